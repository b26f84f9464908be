#!/usr/bin/env bash
# tools/check-function-lengths on a small tree made here: a hot-path function of 100 lines and
# another of 150 pass; one line more each fails, named with file, line and length, and makes
# the exit status 1.
# Usage: tests/docs/check_function_lengths_test.sh SOURCE_DIR
set -euo pipefail
check=${1:?usage: check_function_lengths_test.sh SOURCE_DIR}/tools/check-function-lengths
work=$(mktemp -d "${TMPDIR:-/tmp}/partq-fnlen.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "check_function_lengths_test: FAIL: $*" >&2; exit 1; }

# A function of n lines: its head, n - 2 statements, its closing brace.
function_of() {
  echo "int $1(int x) {"
  for ((i = 0; i < $2 - 2; i++)); do echo "  x += $i;"; done
  echo "}"
}
mkdir -p "$work/tree/consumer" "$work/tree/cli"
function_of Hot 100 >"$work/tree/consumer/hot.cc"
function_of Cold 150 >"$work/tree/cli/cold.cc"
"$check" --root "$work/tree" >"$work/out" || fail "functions at their limits were refused: $(cat "$work/out")"

function_of Hot 101 >"$work/tree/consumer/hot.cc"
function_of Cold 151 >"$work/tree/cli/cold.cc"
if "$check" --root "$work/tree" >"$work/out" 2>&1; then fail "functions over their limits passed"; fi
grep -q "consumer/hot.cc:1: Hot is 101 lines (limit 100)" "$work/out" || fail "hot: $(cat "$work/out")"
grep -q "cli/cold.cc:1: Cold is 151 lines (limit 150)" "$work/out" || fail "cold: $(cat "$work/out")"
echo "check_function_lengths_test: ok"
