#include "cli/common.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "base/log.h"
#include "base/utf8.h"
#include "bridge/kafka_config.h"
#include "pg/dsn.h"

namespace partq::cli {

std::set<std::string> With(std::set<std::string> a, const std::set<std::string>& b) {
  a.insert(b.begin(), b.end());
  return a;
}

absl::StatusOr<PgOptions> ConnectionOptions(const Args& args) {
  PgOptions o;
  if (auto dsn = args.Get("dsn")) {
    o.dsn = *dsn;
  } else if (const char* env = std::getenv("PARTQ_DSN"); env != nullptr) {
    o.dsn = env;
  }
  if (auto schema = args.Get("schema")) {
    o.schema = *schema;
  } else if (const char* env = std::getenv("PARTQ_SCHEMA"); env != nullptr && *env) {
    o.schema = env;
  }
  if (absl::Status st = ValidateSchemaName(o.schema); !st.ok()) return st;
  // The pooler between partq and PostgreSQL, named as PgBouncer's pool_mode.
  std::string pool_mode = "none";
  if (auto mode = args.Get("pool-mode")) {
    pool_mode = *mode;
  } else if (const char* env = std::getenv("PARTQ_POOL_MODE"); env != nullptr && *env) {
    pool_mode = env;
  }
  if (pool_mode == "transaction") {
    o.transaction_pooler = true;
  } else if (pool_mode == "statement") {
    return absl::InvalidArgumentError(
        "--pool-mode statement: partq needs transactions of several statements, which a pooler "
        "in statement mode refuses; point partq at a pool in transaction or session mode");
  } else if (pool_mode != "none" && pool_mode != "session") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--pool-mode (or PARTQ_POOL_MODE): ", Quoted(pool_mode),
        " is not one of none, session, transaction (PgBouncer's pool_mode of the pool partq "
        "connects to; none for a direct connection)"));
  }
  auto max = args.Int("max-payload", o.max_payload_bytes, 1, int64_t{1} << 30);
  if (!max.ok()) return max.status();
  o.max_payload_bytes = *max;
  return o;
}

absl::StatusOr<std::unique_ptr<Store>> Connect(const Args& args) {
  auto o = ConnectionOptions(args);
  if (!o.ok()) return o.status();
  return ConnectPg(*o);
}

absl::StatusOr<std::unique_ptr<Store>> ConnectChecked(const PgOptions& options) {
  auto store = ConnectPg(options);
  if (!store.ok()) return store.status();
  if (absl::Status st = (*store)->CheckSchema(); !st.ok()) return st;
  return store;
}

absl::StatusOr<std::unique_ptr<Store>> ConnectChecked(const Args& args) {
  auto o = ConnectionOptions(args);
  if (!o.ok()) return o.status();
  return ConnectChecked(*o);
}

absl::Status SetLogLevelFlag(const Args& args) {
  auto level = args.Get("log-level");
  if (!level) return absl::OkStatus();
  static const std::map<std::string, LogLevel> kLevels = {{"debug", LogLevel::kDebug},
                                                          {"info", LogLevel::kInfo},
                                                          {"warning", LogLevel::kWarning},
                                                          {"error", LogLevel::kError},
                                                          {"off", LogLevel::kOff}};
  auto it = kLevels.find(*level);
  if (it == kLevels.end()) {
    return absl::InvalidArgumentError("--log-level: debug, info, warning, error or off");
  }
  SetLogLevel(it->second);
  return absl::OkStatus();
}

namespace {

// The value of flag `name` at argv[i] (`--name V` or `--name=V`), or nullptr.
char* FlagValue(int argc, char** argv, int i, const char* name) {
  const size_t n = std::strlen(name);
  if (std::strncmp(argv[i], name, n) != 0) return nullptr;
  if (argv[i][n] == '\0') return i + 1 < argc ? argv[i + 1] : nullptr;
  return argv[i][n] == '=' ? argv[i] + n + 1 : nullptr;
}

// x's over the values of secret properties in --kafka-config's "k=v,k=v".
void MaskKafkaSecrets(char* value) {
  char* word = value;
  while (*word != '\0') {
    char* end = std::strchr(word, ',');
    if (end == nullptr) end = word + std::strlen(word);
    char* eq = static_cast<char*>(std::memchr(word, '=', end - word));
    if (eq != nullptr && IsSecretKafkaProperty(absl::string_view(word, eq - word))) {
      std::fill(eq + 1, end, 'x');
    }
    word = *end == ',' ? end + 1 : end;
  }
}

// x's over the values of a URL's query string from `query` (its '?') to
// the URL's end (a space, a comma, a '#'): "?token=xxxxx&a=x".
char* MaskQueryValues(char* query) {
  char* end = query + std::strcspn(query, "#, ");
  for (char* c = query; c < end; ++c) {
    if (*c != '=') continue;
    char* value_end = static_cast<char*>(std::memchr(c, '&', end - c));
    if (value_end == nullptr) value_end = end;
    std::fill(c + 1, value_end, 'x');
    c = value_end;
  }
  return end;
}

// x's over the password of every URL's userinfo in `value`, and over the
// values of its query string ("http://svc:PASSWORD@host/h?token=T", in
// --handler or --queue Q:handler=...): logs and errors name the URL
// without either (RedactUrl).
void MaskUrlPasswords(char* value) {
  for (char* scheme = std::strstr(value, "://"); scheme != nullptr;
       scheme = std::strstr(scheme, "://")) {
    char* authority = scheme + 3;
    const size_t len = std::strcspn(authority, "/?#, ");
    char* at = nullptr;
    for (char* c = authority; c < authority + len; ++c) {
      if (*c == '@') at = c;
    }
    if (at != nullptr) {
      char* colon = static_cast<char*>(std::memchr(authority, ':', at - authority));
      if (colon != nullptr) std::fill(colon + 1, at, 'x');
    }
    scheme = authority + len;
    char* query = scheme + std::strcspn(scheme, "?#, ");
    if (*query == '?') scheme = MaskQueryValues(query);
  }
}

}  // namespace

void HidePasswordsInArgv(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    MaskUrlPasswords(argv[i]);
    if (char* dsn = FlagValue(argc, argv, i, "--dsn")) {
      const std::string masked = MaskDsnPasswords(dsn);
      std::memcpy(dsn, masked.data(), masked.size());  // the same length
    } else if (char* kafka = FlagValue(argc, argv, i, "--kafka-config")) {
      MaskKafkaSecrets(kafka);
    }
  }
}

void PrintJson(const std::string& dump) { printf("%s\n", EscapeInvisibleControls(dump).c_str()); }

int Fail(const absl::Status& st) {
  // Messages quote what they refuse, and what the database says: escaped
  // for the terminal (bidi overrides and escape sequences spelled out).
  fprintf(stderr, "partq: error: %s\n", PrintableUtf8Lines(st.message()).c_str());
  return absl::IsInvalidArgument(st) ? 2 : 1;
}

int FailNoting(const absl::Status& st, absl::string_view note) {
  if (!absl::IsPermissionDenied(st)) return Fail(st);
  return Fail(absl::PermissionDeniedError(absl::StrCat(st.message(), " (", note, ")")));
}

int FailReadingTables(const absl::Status& st, absl::string_view command, absl::string_view queue,
                      absl::string_view grant) {
  // The SQL API's own refusals already say which grant would do.
  if (!absl::StrContains(st.message(), "permission denied for table")) return Fail(st);
  return FailNoting(st, absl::StrCat("partq ", command,
                                     " reads partq's tables: run it as the schema's owner, or as "
                                     "a role granted ",
                                     grant, " on the queue: partq grant ", grant, " ROLE --queue ",
                                     queue, ", as the owner"));
}

namespace {

std::atomic<int> g_stop_signals{0};

void OnStopSignal(int) {
  if (g_stop_signals.fetch_add(1) >= 1) {
    static const char msg[] = "partq: second signal, exiting without draining\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(130);
  }
}

}  // namespace

void InstallStopSignals() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

int StopSignals() { return g_stop_signals.load(); }

void StopWithin(const std::function<void()>& stop, absl::Duration limit, const std::string& what,
                const std::string& consequence) {
  absl::Notification stopped;
  std::thread stopper([&] {
    stop();
    stopped.Notify();
  });
  if (!stopped.WaitForNotificationWithTimeout(limit)) {
    LogLine(LogLevel::kError, absl::StrCat(what, " ", absl::FormatDuration(limit),
                                           " after the stop began; exiting ", consequence));
    fflush(stderr);
    _exit(1);
  }
  stopper.join();
}

std::string ShellQuote(absl::string_view word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
           absl::string_view("@%+=:,./_-").find(c) != absl::string_view::npos;
  });
  if (plain) return std::string(word);
  const bool controls = std::any_of(word.begin(), word.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  std::string out = controls ? "$'" : "'";
  for (char c : word) {
    const auto u = static_cast<unsigned char>(c);
    if (!controls) {
      out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    } else if (u < 0x20 || u == 0x7f || c == '\'' || c == '\\') {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
    } else {
      out += c;
    }
  }
  return out + "'";
}

int Usage(const std::string& message) {
  fprintf(stderr, "partq: error: %s\nRun `partq help` for the commands.\n",
          PrintableUtf8Lines(message).c_str());
  return 2;
}

std::optional<int> WrongPositionals(const std::vector<std::string>& positional, size_t skip,
                                    const std::vector<std::string>& names,
                                    const std::string& usage) {
  const size_t given = positional.size() - std::min(skip, positional.size());
  if (given > names.size()) {
    std::vector<std::string> extra(positional.begin() + skip + names.size(), positional.end());
    return Usage(absl::StrCat(extra.size() == 1 ? "unexpected argument " : "unexpected arguments ",
                              absl::StrJoin(extra, " ",
                                            [](std::string* out, const std::string& a) {
                                              absl::StrAppend(out, Quoted(a));
                                            }),
                              " (", usage, ")"));
  }
  if (given < names.size()) {
    return Usage(absl::StrCat(names[given], " is missing (", usage, ")"));
  }
  return std::nullopt;
}

std::string SelfPath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = 0;
  return buf;
}

std::string SiblingPath(const std::string& name) {
  const std::string self = SelfPath();
  const size_t slash = self.rfind('/');
  if (slash == std::string::npos) return name;
  return self.substr(0, slash + 1) + name;
}

int ExecBench(const std::string& command, const std::vector<std::string>& argv) {
  const std::string bench = SiblingPath("partq-bench");
  if (access(bench.c_str(), X_OK) != 0) {
    fprintf(stderr,
            "partq %s: the benchmark binary %s is not there (%s). partq bench is a binary of its "
            "own, beside partq: ./scripts/test builds it, or `cmake --build build --target "
            "partq-bench` (./scripts/demo builds partq alone)\n",
            command.c_str(), bench.c_str(), strerror(errno));
    return 2;
  }
  std::vector<std::string> words = {bench, command};
  words.insert(words.end(), argv.begin(), argv.end());
  std::vector<char*> args;
  for (std::string& w : words) args.push_back(w.data());
  args.push_back(nullptr);
  execv(bench.c_str(), args.data());
  fprintf(stderr, "partq %s: cannot run %s: %s\n", command.c_str(), bench.c_str(), strerror(errno));
  return 1;
}

}  // namespace partq::cli
