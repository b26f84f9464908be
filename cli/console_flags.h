// The web console as the partq commands serve it: `partq console`, and a
// worker with --console-listen.
#ifndef PARTQ_CLI_CONSOLE_FLAGS_H_
#define PARTQ_CLI_CONSOLE_FLAGS_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
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

// Reads the token (if `token_file`), refuses a non-loopback `listen` without
// one (console::CheckListenAddress), then serves a console over `pg` on
// `listen` and starts its poller. `flag` and `token_flag` name the address
// and the token file in errors.
absl::StatusOr<ServedConsole> ServeConsole(const std::string& listen, const PgOptions& pg,
                                           bool read_only,
                                           const std::optional<std::string>& token_file,
                                           const std::string& flag, const std::string& token_flag);

}  // namespace partq::cli

#endif  // PARTQ_CLI_CONSOLE_FLAGS_H_
