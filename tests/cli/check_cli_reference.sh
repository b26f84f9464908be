#!/usr/bin/env bash
# docs/reference/cli.md is what the built binary prints, and the help names everything the
# command line accepts:
#   1. tools/gen-cli-reference run on PARTQ gives the committed docs/reference/cli.md, byte for
#      byte (a usage changed in cli/help.cc without regenerating it fails here);
#   2. every command main.cc dispatches is listed by `partq help` (bench-peer excepted: an
#      internal peer of `partq bench`, "not in the help" by cli/common.h);
#   3. every flag an Args::Parse table in cli/*.cc accepts appears in its command's --help
#      (a flag added to a table without a word in cli/help.cc fails here).
# Usage: tests/cli/check_cli_reference.sh PARTQ_BINARY SOURCE_DIR
set -euo pipefail
partq=${1:?usage: check_cli_reference.sh PARTQ_BINARY SOURCE_DIR}
src=${2:?usage: check_cli_reference.sh PARTQ_BINARY SOURCE_DIR}
work=$(mktemp -d "${TMPDIR:-/tmp}/partq-cli-reference.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$src/tools/gen-cli-reference" "$partq" "$work/cli.md"
if ! diff -u "$src/docs/reference/cli.md" "$work/cli.md" >"$work/diff"; then
  cat "$work/diff"
  echo "check_cli_reference: FAIL: docs/reference/cli.md differs from what $partq prints;" \
    "run tools/gen-cli-reference build/cli/partq and commit the result" >&2
  exit 1
fi

python3 - "$partq" "$src" <<'PY'
import glob, os, re, subprocess, sys

partq, src = sys.argv[1], sys.argv[2]
INTERNAL = {"bench-peer"}  # cli/common.h: "a handler peer of `partq bench` (not in the help)"
failures = []

def help_of(command):
    r = subprocess.run([partq, command, "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"`partq {command} --help` exits {r.returncode}: {r.stderr.strip()}")
    return r.stdout

main_help = subprocess.run([partq, "help"], capture_output=True, text=True, check=True).stdout
listed = set(re.findall(r"^  ([a-z][a-z-]*)\b", main_help, re.M))

main_cc = open(os.path.join(src, "cli/main.cc")).read()
dispatched = set(re.findall(r'if \(cmd == "([a-z-]+)"\) return Cmd', main_cc))
if not dispatched:
    failures.append("found no `if (cmd == \"...\") return Cmd...` in cli/main.cc: update this check")
for command in sorted(dispatched - INTERNAL - listed):
    failures.append(f"`partq {command}` runs, but `partq help` does not list it: add it to cli/help.cc")

common = open(os.path.join(src, "cli/common.h")).read()
m = re.search(r"ConnectionFlags\(\) \{\s*static const std::set<std::string> flags = \{([^}]*)\}", common)
connection_flags = re.findall(r'"([a-z-]+)"', m.group(1)) if m else []
if not connection_flags:
    failures.append("found no ConnectionFlags() in cli/common.h: update this check")

def command_of(path, function):
    """The command a function of cli/ parses for: CmdSchedule -> schedule; bridge.cc's
    Ingest/Publish -> bridge."""
    if os.path.basename(path) == "bridge.cc":
        return "bridge"
    m = re.fullmatch(r"Cmd([A-Z][A-Za-z]*)", function)
    if not m:
        return None
    return re.sub(r"(?<!^)([A-Z])", r"-\1", m.group(1)).lower()

def call_text(text, start):
    """The text of the call whose '(' is at or after start, up to its matching ')'."""
    i = text.index("(", start)
    depth = 0
    for j in range(i, len(text)):
        depth += {"(": 1, ")": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j + 1]
    return text[i:]

tables = 0
for path in sorted(glob.glob(os.path.join(src, "cli", "*.cc"))):
    text = open(path).read()
    functions = [(m.start(), m.group(1)) for m in
                 re.finditer(r"^int (\w+)\(const std::vector<std::string>& argv\)", text, re.M)]
    for call in re.finditer(r"Args::Parse\(", text):
        if "Args::Parse(const" in text[call.start():call.start() + 30]:
            continue  # the definition, in args.cc
        tables += 1
        before = [f for f in functions if f[0] < call.start()]
        if not before:
            failures.append(f"{os.path.relpath(path, src)}: an Args::Parse outside a command function")
            continue
        begin, function = before[-1]
        command = command_of(path, function)
        if command is None:
            failures.append(f"{os.path.relpath(path, src)}: {function} parses flags for no known command")
            continue
        if command in INTERNAL:
            continue
        # The table: the literals of the call, those a set built just before it adds
        # (`value_flags.insert({...})`), and the connection flags when it includes them.
        body = text[begin:call.start()]
        literal = call_text(text, call.start()) + "".join(
            call_text(body, m.start()) for m in re.finditer(r"\.insert\(", body))
        flags = set(re.findall(r'"([a-z][a-z-]*)"', literal))
        if "ConnectionFlags()" in literal or "ConnectionFlags()" in body:
            flags |= set(connection_flags)
        usage = help_of(command)
        for flag in sorted(flags):
            if not re.search(rf"--{re.escape(flag)}\b", usage):
                failures.append(f"`partq {command}` accepts --{flag} ({os.path.relpath(path, src)}, "
                                f"{function}), but `partq {command} --help` does not mention it: "
                                "add it to cli/help.cc")
if tables == 0:
    failures.append("found no Args::Parse table in cli/*.cc: update this check")

for f in failures:
    print("check_cli_reference: FAIL:", f, file=sys.stderr)
if failures:
    sys.exit(1)
print(f"check_cli_reference: OK: {len(dispatched)} commands, {tables} flag tables")
PY
