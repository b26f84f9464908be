// partq console: the web console (console/console.h) on its own, until
// SIGTERM/SIGINT; and the same console mounted by a worker (ServeConsole).
#include "console/console.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "cli/common.h"
#include "cli/console_flags.h"
#include "cli/http_server.h"
#include "base/utf8.h"
#include "console/auth.h"

namespace partq::cli {

absl::StatusOr<ConsoleFlags> ParseConsoleFlags(const Args& args, const std::string& prefix,
                                               const std::string& default_listen) {
  ConsoleFlags f;
  f.listen_flag = absl::StrCat("--", prefix, "listen");
  f.token_flag = absl::StrCat("--", prefix, "token-file");
  f.listen = args.GetOr(absl::StrCat(prefix, "listen"), default_listen);
  f.read_only = args.Has(absl::StrCat(prefix, "read-only"));
  f.token_file = args.Get(absl::StrCat(prefix, "token-file"));
  const std::string allowed_flag = absl::StrCat(prefix, "allowed-host");
  if (auto names = args.Get(allowed_flag)) {
    for (absl::string_view name : absl::StrSplit(*names, ',', absl::SkipWhitespace())) {
      name = absl::StripAsciiWhitespace(name);
      const bool ok = name.size() <= 253 && std::all_of(name.begin(), name.end(), [](char c) {
                        return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
                               c == '.' || c == '-' || c == ':' || c == '[' || c == ']';
                      });
      if (!ok) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", allowed_flag, ": \"", PrintableUtf8(name),
            "\" is not a host name or address (give names separated by commas, like "
            "console.example.com,partq.internal)"));
      }
      f.allowed_hosts.emplace_back(name);
    }
  }
  return f;
}

absl::StatusOr<ServedConsole> ServeConsole(const ConsoleFlags& flags, const PgOptions& pg) {
  const std::string& listen = flags.listen;
  console::ConsoleOptions o;
  o.read_only = flags.read_only;
  o.listen_host = ListenHost(listen);
  o.allowed_hosts = flags.allowed_hosts;
  if (flags.token_file) {
    absl::StatusOr<std::string> token = console::ReadTokenFile(*flags.token_file);
    if (!token.ok()) return token.status();
    o.token = *token;
  }
  if (absl::Status st =
          console::CheckListenAddress(o.listen_host, o.token.has_value(), flags.token_flag);
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
  ho.flag = flags.listen_flag;
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
  auto args = Args::Parse(
      argv, With(ConnectionFlags(), {"listen", "token-file", "allowed-host", "log-level"}),
      {"read-only"});
  if (!args.ok()) return Fail(args.status());
  if (auto u = WrongPositionals(args->positional(), 0, {},
                                "usage: partq console [--listen 127.0.0.1:8080] [--read-only] "
                                "[--token-file FILE] [--allowed-host NAME,...]")) {
    return *u;
  }
  auto flags = ParseConsoleFlags(*args, "", "127.0.0.1:8080");
  if (!flags.ok()) return Fail(flags.status());
  if (absl::Status st = SetLogLevelFlag(*args); !st.ok()) return Fail(st);
  auto pg = ConnectionOptions(*args);
  if (!pg.ok()) return Fail(pg.status());
  {
    // Fail fast on a bad DSN or a missing schema.
    auto store = ConnectChecked(*pg);
    if (!store.ok()) return Fail(store.status());
  }
  const std::string& listen = flags->listen;
  InstallStopSignals();
  absl::StatusOr<ServedConsole> served = ServeConsole(*flags, *pg);
  if (!served.ok()) return Fail(served.status());
  const std::string host = ListenHost(listen);
  LogLine(LogLevel::kInfo,
          absl::StrCat("console on http://",
                       host.empty() || host == "0.0.0.0" || host == "*" ? "THIS-HOST" : host,
                       listen.substr(listen.rfind(':')), "/ (",
                       args->Has("read-only")     ? "read-only"
                       : !args->Has("token-file") ? "read-only: actions need --token-file"
                                                  : "actions with the token",
                       ")"));
  while (StopSignals() == 0) absl::SleepFor(absl::Milliseconds(50));
  return 0;
}

}  // namespace partq::cli
