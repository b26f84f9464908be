// partq console: the web console (console/console.h) on its own, until
// SIGTERM/SIGINT; and the same console mounted by a worker (ServeConsole).
#include "console/console.h"

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/common.h"
#include "cli/console_flags.h"
#include "cli/http_server.h"
#include "console/auth.h"

namespace partq::cli {

absl::StatusOr<ServedConsole> ServeConsole(const std::string& listen, const PgOptions& pg,
                                           bool read_only,
                                           const std::optional<std::string>& token_file,
                                           const std::string& flag, const std::string& token_flag) {
  console::ConsoleOptions o;
  o.read_only = read_only;
  if (token_file) {
    absl::StatusOr<std::string> token = console::ReadTokenFile(*token_file);
    if (!token.ok()) return token.status();
    o.token = *token;
  }
  if (absl::Status st =
          console::CheckListenAddress(ListenHost(listen), o.token.has_value(), token_flag);
      !st.ok()) {
    return st;
  }
  PgOptions options = pg;
  // Its connections show as the console's in pg_stat_activity (the cost
  // measurement in BENCHMARKS.md finds them by this name).
  options.application_name = "partq console";
  ServedConsole out;
  out.console = std::make_unique<console::Console>(PgStoreFactory(options), o);
  HttpServerOptions ho;
  ho.flag = flag;
  ho.console = out.console.get();
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(listen, std::move(ho));
  if (!server.ok()) return server.status();
  out.server = std::move(*server);
  out.console->Start();
  return out;
}

ServedConsole::~ServedConsole() {
  server.reset();  // no more requests, then the poller
  if (console) console->Stop();
}

int CmdConsole(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, With(ConnectionFlags(), {"listen", "token-file", "log-level"}),
                          {"read-only"});
  if (!args.ok()) return Fail(args.status());
  if (auto u = WrongPositionals(args->positional(), 0, {},
                                "usage: partq console [--listen 127.0.0.1:8080] [--read-only] "
                                "[--token-file FILE]")) {
    return *u;
  }
  if (absl::Status st = SetLogLevelFlag(*args); !st.ok()) return Fail(st);
  auto pg = ConnectionOptions(*args);
  if (!pg.ok()) return Fail(pg.status());
  {
    // Fail fast on a bad DSN or a missing schema.
    auto store = ConnectChecked(*pg);
    if (!store.ok()) return Fail(store.status());
  }
  const std::string listen = args->GetOr("listen", "127.0.0.1:8080");
  InstallStopSignals();
  absl::StatusOr<ServedConsole> served = ServeConsole(
      listen, *pg, args->Has("read-only"), args->Get("token-file"), "--listen", "--token-file");
  if (!served.ok()) return Fail(served.status());
  const std::string host = ListenHost(listen);
  fprintf(stderr, "partq: console on http://%s%s/ (%s)\n",
          host.empty() || host == "0.0.0.0" || host == "*" ? "THIS-HOST" : host.c_str(),
          listen.substr(listen.rfind(':')).c_str(),
          args->Has("read-only")     ? "read-only"
          : !args->Has("token-file") ? "read-only: actions need --token-file"
                                     : "actions with the token");
  while (StopSignals() == 0) absl::SleepFor(absl::Milliseconds(50));
  return 0;
}

}  // namespace partq::cli
