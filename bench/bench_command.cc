// partq bench: end-to-end throughput and latency, partq against plain-SQL
// baselines in one run on one database (bench/bench.h has the workloads).
// The commands of the `partq-bench` binary (bench_main.cc), which `partq bench`
// and `partq bench-peer` run (cli/main.cc): the harness is not in `partq`.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/log.h"
#include "bench/bench.h"
#include "bench/handler_peers.h"
#include "cli/common.h"
#include "pg/embedded_postgres.h"

namespace partq::cli {
namespace {

absl::StatusOr<std::vector<int>> IntList(const Args& args, const std::string& flag,
                                         std::vector<int> def, int min, int max) {
  auto v = args.Get(flag);
  if (!v) return def;
  std::vector<int> out;
  for (absl::string_view s : absl::StrSplit(*v, ',', absl::SkipEmpty())) {
    int n;
    if (!absl::SimpleAtoi(s, &n) || n < min || n > max) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": \"", s, "\" is not a number from ", min, " to ", max));
    }
    out.push_back(n);
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  return out;
}

// Whether `path` (the value of --`flag`) can be written: an existing file
// writable, or a new one in a writable directory. Nothing is created or
// truncated: a run that fails leaves an earlier result file as it was.
absl::Status CheckWritable(const std::string& flag, const std::string& path) {
  const std::filesystem::path p(path);
  std::error_code ec;
  const bool exists = std::filesystem::exists(p, ec);
  if (exists && std::filesystem::is_directory(p, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", path, " is a directory"));
  }
  const std::string target =
      exists ? path : (p.has_parent_path() ? p.parent_path().string() : std::string("."));
  if (access(target.c_str(), W_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": cannot write ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

// The comma-separated `value` of --`flag`, each one of `known`.
absl::StatusOr<std::set<std::string>> Choices(const char* flag, const char* noun,
                                              const std::string& value,
                                              const std::vector<std::string>& known) {
  std::set<std::string> out;
  for (absl::string_view w : absl::StrSplit(value, ',', absl::SkipEmpty())) {
    if (std::find(known.begin(), known.end(), w) == known.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": unknown ", noun, " \"", w,
                                                     "\" (one of ", absl::StrJoin(known, ", "),
                                                     ")"));
    }
    out.insert(std::string(w));
  }
  return out;
}

// `partq bench`'s flags that take a value.
const std::set<std::string>& BenchValueFlags() {
  static const std::set<std::string> flags = With(ConnectionFlags(), {"sessions",
                                                                      "batch",
                                                                      "items",
                                                                      "rounds",
                                                                      "parts",
                                                                      "sweep-sessions",
                                                                      "only",
                                                                      "systems",
                                                                      "steady-rate",
                                                                      "steady-seconds",
                                                                      "steady-sessions",
                                                                      "steady-p99-limit",
                                                                      "idle-sessions",
                                                                      "idle-seconds",
                                                                      "pickup-samples",
                                                                      "out",
                                                                      "plot",
                                                                      "examples",
                                                                      "soak-rate",
                                                                      "soak-seconds",
                                                                      "soak-sessions",
                                                                      "soak-churn",
                                                                      "soak-sample",
                                                                      "soak-restart-at",
                                                                      "soak-restart",
                                                                      "soak-hold",
                                                                      "soak-out",
                                                                      "scale-sessions",
                                                                      "scale-parts",
                                                                      "scale-warmup",
                                                                      "vacuum-interval"});
  return flags;
}

// The workloads' sizes into `o`: sessions, batches, items, rounds, parts and
// the steady, idle, scale and pickup workloads' numbers.
absl::Status ReadSizes(const Args& args, bench::BenchOptions& o) {
  auto sessions = IntList(args, "sessions", o.sessions, 1, 64);
  if (!sessions.ok()) return sessions.status();
  o.sessions = *sessions;
  auto batches = IntList(args, "batch", o.batches, 1, 10000);
  if (!batches.ok()) return batches.status();
  o.batches = *batches;
  struct IntFlag {
    const char* name;
    int64_t min, max;
    int64_t* out64;
    int* out;
  };
  int64_t items = o.items;
  for (const IntFlag& f :
       std::vector<IntFlag>{{"items", 100, 10000000, &items, nullptr},
                            {"rounds", 1, 100, nullptr, &o.rounds},
                            {"parts", 1, 4096, nullptr, &o.parts},
                            {"sweep-sessions", 1, 64, nullptr, &o.sweep_sessions},
                            {"steady-sessions", 1, 64, nullptr, &o.steady_sessions},
                            {"idle-sessions", 1, 1000, nullptr, &o.idle_sessions},
                            {"scale-sessions", 2, 1000, nullptr, &o.scale_sessions},
                            {"scale-parts", 1, 65536, nullptr, &o.scale_parts},
                            {"scale-warmup", 0, 100, nullptr, &o.scale_warmup},
                            {"pickup-samples", 1, 100000, nullptr, &o.pickup_samples}}) {
    const int64_t def = f.out64 ? *f.out64 : *f.out;
    auto v = args.Int(f.name, def, f.min, f.max);
    if (!v.ok()) return v.status();
    if (f.out64) *f.out64 = *v;
    if (f.out) *f.out = static_cast<int>(*v);
  }
  o.items = items;
  auto rate = args.Double("steady-rate", o.steady_rate, 1, 1e7);
  if (!rate.ok()) return rate.status();
  o.steady_rate = *rate;
  auto secs = args.Double("steady-seconds", o.steady_seconds, 0.1, 3600);
  if (!secs.ok()) return secs.status();
  o.steady_seconds = *secs;
  auto limit = args.Double("steady-p99-limit", o.steady_p99_limit_ms, 0, 1e6);
  if (!limit.ok()) return limit.status();
  o.steady_p99_limit_ms = *limit;
  auto idle = args.Double("idle-seconds", o.idle_seconds, 1, 3600);
  if (!idle.ok()) return idle.status();
  o.idle_seconds = *idle;
  return absl::OkStatus();
}

// The soak workload's flags into `o` (and --vacuum-interval, read with them).
absl::Status ReadSoakFlags(const Args& args, bench::BenchOptions& o) {
  for (const auto& [flag, out, lo, hi] :
       std::vector<std::tuple<const char*, double*, double, double>>{
           {"soak-rate", &o.soak.rate, 1, 1e7},
           {"soak-seconds", &o.soak.seconds, 10, 86400},
           {"soak-churn", &o.soak.churn_seconds, 0, 86400},
           {"soak-sample", &o.soak.sample_seconds, 1, 3600},
           {"soak-restart-at", &o.soak.restart_at, 0, 86400},
           {"vacuum-interval", &o.vacuum_interval_seconds, 0, 86400}}) {
    auto v = args.Double(flag, *out, lo, hi);
    if (!v.ok()) return v.status();
    *out = *v;
  }
  auto soak_sessions = args.Int("soak-sessions", o.soak.sessions, 1, 64);
  if (!soak_sessions.ok()) return soak_sessions.status();
  o.soak.sessions = static_cast<int>(*soak_sessions);
  o.soak.restart_command = args.Get("soak-restart").value_or("");
  if (o.soak.restart_at > 0 && o.soak.restart_command.empty()) {
    return absl::InvalidArgumentError(
        "--soak-restart-at needs --soak-restart COMMAND (the shell command that restarts the "
        "server)");
  }
  // --soak-hold AT:FOR[,AT:FOR...], seconds from the start.
  for (absl::string_view h :
       absl::StrSplit(args.Get("soak-hold").value_or(""), ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> p = absl::StrSplit(h, absl::MaxSplits(':', 1));
    double at, length;
    if (!absl::SimpleAtod(p.first, &at) || !absl::SimpleAtod(p.second, &length) || at < 0 ||
        length <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--soak-hold: \"", h, "\" is not START:SECONDS (e.g. 300:120,900:600)"));
    }
    o.soak.holds.emplace_back(at, length);
  }
  o.soak.out = args.Get("soak-out").value_or("");
  return absl::OkStatus();
}

// The run's options from the command line, all but the database; what the
// run will write is checked too.
absl::StatusOr<bench::BenchOptions> BenchOptionsFromFlags(const Args& args) {
  bench::BenchOptions o;
  if (absl::Status st = ReadSizes(args, o); !st.ok()) return st;
  if (absl::Status st = ReadSoakFlags(args, o); !st.ok()) return st;
  o.full = args.Has("full");
  if (auto only = args.Get("only")) {
    std::vector<std::string> known = bench::Workloads();
    known.insert(known.end(), bench::OptInWorkloads().begin(), bench::OptInWorkloads().end());
    auto chosen = Choices("only", "workload", *only, known);
    if (!chosen.ok()) return chosen.status();
    o.only = *std::move(chosen);
  }
  if (auto systems = args.Get("systems")) {
    auto chosen = Choices("systems", "system", *systems, bench::DrainSystems());
    if (!chosen.ok()) return chosen.status();
    o.systems = *std::move(chosen);
  }
  o.verbose = !args.Has("quiet");
  o.diagnose = args.Has("diagnose");
  // The workers and the handler peers the bench starts are `partq`'s commands.
  o.worker_binary = SiblingPath("partq");
  o.examples_dir = args.Get("examples").value_or(PARTQ_SOURCE_DIR "/examples");
  o.peers_dir = PARTQ_SOURCE_DIR "/bench/peers";
  if (o.only.count("soak") && o.soak.out.empty()) {
    return absl::InvalidArgumentError(
        "--only soak needs --soak-out FILE, where its samples go (bench/soak.sh plots them)");
  }
  // What the run will write is checked before it starts: a run takes minutes.
  for (const char* flag : {"out", "plot", "soak-out"}) {
    if (auto path = args.Get(flag)) {
      if (absl::Status st = CheckWritable(flag, *path); !st.ok()) return st;
    }
  }
  if (auto plot = args.Get("plot")) {
    if (absl::Status st = bench::CheckPlot(o, *plot); !st.ok()) return st;
  }
  return o;
}

// An embedded PostgreSQL for a run given no database, with room for the
// workloads' connections.
absl::StatusOr<std::unique_ptr<EmbeddedPostgres>> StartBenchServer(const Args& args,
                                                                   const bench::BenchOptions& o) {
  if (o.verbose) fprintf(stderr, "partq bench: starting an embedded PostgreSQL...\n");
  EmbeddedPostgres::Options eo;
  eo.keep = args.Has("keep");
  // Default settings except room for the idle workload's connections
  // (bench::kIdleConnectionsPerSession each), with a margin.
  eo.settings = {
      absl::StrCat("max_connections=",
                   std::max({200, (bench::kIdleConnectionsPerSession + 1) * o.idle_sessions + 50,
                             o.only.count("scale") ? 2 * (o.scale_sessions + 1) + 50 : 0}))};
  // --diagnose: pg_stat_statements, for a run that explains its numbers.
  if (o.diagnose) {
    eo.settings.push_back("shared_preload_libraries=pg_stat_statements");
    eo.settings.push_back("pg_stat_statements.track_planning=on");
  }
  return EmbeddedPostgres::Start(eo);
}

// Gives a new embedded server the WAL segments a server that has run a
// while keeps for reuse, up to max_wal_size. A new data directory has none:
// every 16 MB of WAL, one backend created and zero-filled a segment while
// every other commit waited (COMMITs of 32-41 ms on every connection at
// once, every 6 s at 5,000 items/s: the steady rounds' max latency,
// BENCHMARKS.md). Each segment is written once here (a logged table's row
// each: a temporary table writes no WAL, and a switch after none is no
// switch), then a checkpoint recycles them all as future ones. With
// wal_init_zero off instead, commits into never-written segments paid for
// the filesystem's allocation: a slower median. A failure costs only the
// stalls, so it is a warning.
void WarmWal(const EmbeddedPostgres& server, bool verbose) {
  absl::StatusOr<std::unique_ptr<bench::Sql>> sql = bench::Sql::Open(server.dsn());
  absl::StatusOr<std::string> need =
      sql.ok() ? (*sql)->Scalar("SELECT pg_size_bytes(current_setting('max_wal_size'))")
               : sql.status();
  int64_t need_bytes = 0;
  absl::Status st = need.status();
  if (st.ok() && !absl::SimpleAtoi(*need, &need_bytes)) {
    st = absl::InternalError(absl::StrCat("max_wal_size in bytes is \"", *need, "\""));
  }
  // The segments go beside the server's data: a disk too full for twice
  // them keeps the stalls rather than risk the server's WAL writes.
  std::error_code ec;
  const std::filesystem::space_info disk = std::filesystem::space(server.dir(), ec);
  if (st.ok() && !ec && disk.available / 2 < static_cast<uintmax_t>(need_bytes)) {
    st = absl::ResourceExhaustedError(
        absl::StrCat("only ", disk.available >> 20, " MB free beside it, and max_wal_size is ",
                     need_bytes >> 20, " MB: commits may stall while a segment is made"));
  }
  if (st.ok()) {
    if (verbose) fprintf(stderr, "partq bench: making the embedded server's WAL segments...\n");
    st = (*sql)->Exec(R"sql(
CREATE TABLE partq_wal_warmup (n int);
DO $$
BEGIN
  FOR n IN 1 .. pg_size_bytes(current_setting('max_wal_size'))
                / pg_size_bytes(current_setting('wal_segment_size')) LOOP
    INSERT INTO partq_wal_warmup VALUES (n);
    PERFORM pg_switch_wal();
  END LOOP;
END $$;
DROP TABLE partq_wal_warmup;
CHECKPOINT)sql");
  }
  if (!st.ok()) {
    fprintf(stderr, "partq bench: warning: the embedded server's WAL was not made ahead: %s\n",
            std::string(st.message()).c_str());
  }
}

// The report as a table (or --json) on stdout, then --out and --plot; the
// exit status.
int WriteReport(const Args& args, const bench::BenchReport& report, const bench::BenchOptions& o) {
  const std::string table = bench::FormatTable(report, o);
  const std::string json = bench::ToJson(report, o);
  if (args.Has("json")) {
    printf("%s\n", json.c_str());
  } else {
    printf("%s", table.c_str());
  }
  fflush(stdout);
  if (auto out = args.Get("out")) {
    std::ofstream f(*out);
    f << json << "\n";
    if (!f) return Fail(absl::UnavailableError(absl::StrCat("--out: cannot write ", *out)));
  }
  if (auto plot = args.Get("plot")) {
    // The results are out already; the plot asked for is not.
    if (absl::Status st = bench::WritePlot(report, o, *plot); !st.ok()) return Fail(st);
    if (o.verbose) fprintf(stderr, "partq bench: plot written to %s\n", plot->c_str());
  }
  if (bench::SteadyOverLimit(report, o)) {
    fprintf(stderr, "partq bench: steady p99 %.1f ms is above --steady-p99-limit %g ms\n",
            report.steady_latency.p99_ms, o.steady_p99_limit_ms);
    return 1;
  }
  return 0;
}

}  // namespace

int CmdBench(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, BenchValueFlags(), {"json", "full", "quiet", "keep", "diagnose"});
  if (!args.ok()) return Fail(args.status());
  if (auto u = WrongPositionals(args->positional(), 0, {},
                                "usage: partq bench [options]; partq bench --help lists them")) {
    return *u;
  }
  auto options = BenchOptionsFromFlags(*args);
  if (!options.ok()) return Fail(options.status());
  bench::BenchOptions& o = *options;

  auto pg = ConnectionOptions(*args);
  if (!pg.ok()) return Fail(pg.status());
  if (!args->Has("schema") && std::getenv("PARTQ_SCHEMA") == nullptr) pg->schema = "partq_bench";
  pg->application_name = "partq bench";
  std::unique_ptr<EmbeddedPostgres> server;
  if (!args->Has("dsn") && std::getenv("PARTQ_DSN") == nullptr) {
    auto s = StartBenchServer(*args, o);
    if (!s.ok()) return Fail(s.status());
    server = std::move(*s);
    pg->dsn = server->dsn();
    WarmWal(*server, o.verbose);
  }
  o.pg = *pg;
  // Consumers log reconnects and the like; a benchmark's output is its table.
  if (!o.verbose) SetLogLevel(LogLevel::kError);

  auto report = bench::RunBench(o);
  if (!report.ok()) return Fail(report.status());
  return WriteReport(*args, *report, o);
}

int CmdBenchPeer(const std::vector<std::string>& argv) {
  bench::PeerOptions o;
  bool ok = !argv.empty() && (argv[0] == "exec" || argv[0] == "http");
  for (size_t i = 1; ok && i < argv.size(); ++i) {
    if (argv[i] == "--no-result") {
      o.with_result = false;
    } else if (argv[i] == "--fail-every" && i + 1 < argv.size()) {
      ok = absl::SimpleAtoi(argv[++i], &o.fail_every) && o.fail_every > 0;
    } else {
      ok = false;
    }
  }
  if (ok) return argv[0] == "exec" ? bench::RunExecPeer(o) : bench::RunHttpPeer(o);
  return Usage(
      "usage: partq bench-peer exec|http [--no-result] [--fail-every N] (the peers of partq "
      "bench's handler drains)");
}

}  // namespace partq::cli
