// partq — a partitioned work queue and consumer-group coordinator on
// PostgreSQL. Thin commands over the libraries; see `partq help`.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "cli/common.h"

int main(int argc, char** argv) {
  using namespace partq::cli;
  // libpq waits for ever by default for a server that accepts the TCP
  // connection and never answers (a hung host, a half-open proxy); every
  // command would hang with it. 10 s unless the user chose (connect_timeout
  // in the DSN overrides this too).
  setenv("PGCONNECT_TIMEOUT", "10", /*overwrite=*/0);
  if (argc < 2) {
    fputs(MainHelp().c_str(), stderr);
    return 2;
  }
  // Connection flags may come before the command (`partq --dsn D status q`,
  // as with psql): they go to the command, which parses them.
  std::vector<std::string> words(argv + 1, argv + argc);
  // A password in --dsn is copied above; the command line every local user
  // can read (ps, /proc/PID/cmdline) keeps only x's in its place.
  HidePasswordsInArgv(argc, argv);
  std::vector<std::string> leading;
  while (!words.empty() && words[0].rfind("--", 0) == 0) {
    const std::string& w = words[0];
    const size_t eq = w.find('=');
    const std::string name = w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (!ConnectionFlags().count(name)) break;
    // `--dsn --schema s` forgot the DSN: the flag goes alone, and the
    // command's parser says it needs a value.
    const bool takes_next = eq == std::string::npos && words.size() >= 2 &&
                            !(words[1].size() > 2 && words[1].rfind("--", 0) == 0);
    const size_t n = takes_next ? 2 : 1;
    leading.insert(leading.end(), words.begin(), words.begin() + n);
    words.erase(words.begin(), words.begin() + n);
  }
  if (words.empty()) return Usage("a command is missing (partq COMMAND [ARGS]; partq help)");
  const std::string cmd = words[0];
  if (cmd.size() > 2 && cmd.rfind("--", 0) == 0 && cmd != "--help" && cmd != "--version") {
    std::vector<std::string> flags;
    for (const std::string& f : ConnectionFlags()) flags.push_back("--" + f);
    return Usage("unknown option \"" + cmd + "\" before the command: only connection flags (" +
                 absl::StrJoin(flags, ", ") + ") may come first");
  }
  std::vector<std::string> rest(words.begin() + 1, words.end());
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    // `partq help worker` as `partq worker --help`.
    std::optional<std::string> one;
    if (!rest.empty()) one = CommandHelp(rest[0]);
    if (!rest.empty() && !one) return Usage("unknown command \"" + rest[0] + "\"");
    fputs(one ? one->c_str() : MainHelp().c_str(), stdout);
    return 0;
  }
  if (cmd == "version" || cmd == "--version") {
    puts("partq 0.1.0");
    return 0;
  }
  // In front, not at the end: after a `--` in the command's words they
  // would be read as positional arguments.
  rest.insert(rest.begin(), leading.begin(), leading.end());
  if (WantsHelp(rest)) {
    if (std::optional<std::string> help = CommandHelp(cmd)) {
      fputs(help->c_str(), stdout);
      return 0;
    }
  }
  if (cmd == "migrate") return CmdMigrate(rest);
  if (cmd == "queue") return CmdQueue(rest);
  if (cmd == "enqueue") return CmdEnqueue(rest);
  if (cmd == "wait") return CmdWait(rest);
  if (cmd == "item") return CmdItem(rest);
  if (cmd == "cancel") return CmdCancel(rest);
  if (cmd == "worker") return CmdWorker(rest);
  if (cmd == "status") return CmdStatus(rest);
  if (cmd == "dead") return CmdDead(rest);
  if (cmd == "prune") return CmdPrune(rest);
  if (cmd == "grant") return CmdGrant(rest);
  if (cmd == "revoke") return CmdRevoke(rest);
  if (cmd == "grants") return CmdGrants(rest);
  if (cmd == "group") return CmdGroup(rest);
  if (cmd == "schedule") return CmdSchedule(rest);
  if (cmd == "demo") return CmdDemo(rest);
  if (cmd == "bench" || cmd == "bench-peer") return ExecBench(cmd, rest);
  if (cmd == "bridge") return CmdBridge(rest);
  if (cmd == "console") return CmdConsole(rest);
  return Usage("unknown command \"" + cmd + "\"");
}
