// The web console as the partq commands serve it: `partq console`, and a
// worker with --console-listen.
#ifndef PARTQ_CLI_CONSOLE_FLAGS_H_
#define PARTQ_CLI_CONSOLE_FLAGS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/args.h"
#include "cli/http_server.h"
#include "console/console.h"
#include "pg/pg_store.h"

namespace partq::cli {

// A console and the server that serves it; destroying it stops both.
struct ServedConsole {
  ServedConsole() = default;
  ServedConsole(ServedConsole&&) = default;
  ServedConsole& operator=(ServedConsole&&) = default;
  ~ServedConsole();
  std::unique_ptr<console::Console> console;
  std::unique_ptr<HttpServer> server;
};

// What the flags of `partq console` (or a worker's --console-*) ask for.
struct ConsoleFlags {
  std::string listen;
  bool read_only = false;
  std::optional<std::string> token_file;
  std::vector<std::string> allowed_hosts;  // console::ConsoleOptions::allowed_hosts
  // The flags they came from, for errors.
  std::string listen_flag, token_flag;
};

// The console's flags of `args`: `prefix` "" (partq console: --listen,
// --read-only, --token-file, --allowed-host) or "console-" (a worker's).
// InvalidArgument for an allowed host that is not a host name or address.
absl::StatusOr<ConsoleFlags> ParseConsoleFlags(const Args& args, const std::string& prefix,
                                               const std::string& default_listen);

// Reads the token (if any), refuses a non-loopback address without one
// (console::CheckListenAddress), then serves a console over `pg` and starts
// its poller.
absl::StatusOr<ServedConsole> ServeConsole(const ConsoleFlags& flags, const PgOptions& pg);

}  // namespace partq::cli

#endif  // PARTQ_CLI_CONSOLE_FLAGS_H_
