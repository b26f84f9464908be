// partq's end-to-end benchmark (`partq bench`): partq against plain-SQL
// baselines on one PostgreSQL, with identical writes per item (delete the
// item, insert one result row), systems interleaved within each round so that
// ratios to the floor measured in the same round stay meaningful on a busy
// machine. See bench/README.md for what each workload does.
//
// Thread-safety: RunBench drives its own threads and connections; call it
// from one thread.
#ifndef PARTQ_BENCH_BENCH_H_
#define PARTQ_BENCH_BENCH_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/scale.h"
#include "pg/pg_store.h"

namespace partq::bench {

// The drain systems, in table order.
inline const std::vector<std::string>& DrainSystems() {
  static const std::vector<std::string> s = {"floor",
                                             "log_floor",
                                             "partq",
                                             "skip_locked_batch",
                                             "skip_locked_one",
                                             "naive_update",
                                             "partq_result",
                                             "partq_exec",
                                             "partq_http",
                                             "partq_noop",
                                             "partq_exec_noop",
                                             "partq_http_noop",
                                             "partq_exec_python",
                                             "partq_http_node",
                                             "partq_exec_fail",
                                             "partq_http_fail",
                                             "pgq",
                                             "graphile_worker",
                                             "graphile_worker_default",
                                             "pg_boss",
                                             "pg_boss_default"};
  return s;
}

// The drain systems of handlers (bench/README.md): in process
// (partq_result), through the exec and http transports to the bench's own
// peers (handler_peers.h), and to the examples, each answering every item ok
// with a result, which partq writes as a results row in the ack statement;
// and the same three answering ok with nothing (the *_noop systems: the
// transports' own cost, against an in-process handler that does nothing);
// and partq_exec and partq_http with 1 % of the items failing at their
// first attempt (the *_fail systems: the peers' --fail-every 100), whose
// replies partq applies as they are. They have a table of their own, with
// ratios to the in-process ones too, and the *_fail systems to their
// transport without failures (WithoutFailures).
inline const std::vector<std::string>& HandlerSystems() {
  static const std::vector<std::string> s = {
      "partq_result",    "partq_exec",      "partq_http",        "partq_noop",
      "partq_exec_noop", "partq_http_noop", "partq_exec_python", "partq_http_node",
      "partq_exec_fail", "partq_http_fail"};
  return s;
}

// The system a *_fail system is measured against (the same peer answering
// every item ok), or "" for any other.
inline std::string WithoutFailures(const std::string& system) {
  if (system == "partq_exec_fail") return "partq_exec";
  if (system == "partq_http_fail") return "partq_http";
  return "";
}

// The handler systems whose handler answers ok without a result.
inline bool NoResult(const std::string& system) {
  return system == "partq_noop" || system == "partq_exec_noop" || system == "partq_http_noop";
}

// The systems that run only when --systems names them: the examples need
// python3 and node, and their speed is their runtime's; the *_fail systems
// answer one question (what 1 % of failing items cost a transport); the
// other queues (peer_queues.h) need their packages.
inline const std::vector<std::string>& OptInSystems() {
  static const std::vector<std::string> s = {
      "partq_exec_python", "partq_http_node",         "partq_exec_fail", "partq_http_fail", "pgq",
      "graphile_worker",   "graphile_worker_default", "pg_boss",         "pg_boss_default"};
  return s;
}

// The systems each drain cell also gives ratios to (besides the floors), when
// they ran in the same round: the in-process handlers (the handlers table's
// columns).
inline const std::vector<std::string>& ReferenceSystems() {
  static const std::vector<std::string> s = {"partq", "partq_result", "partq_noop"};
  return s;
}

// The second floor every drain cell gets a ratio to, beside the floor: that
// of a queue whose ack deletes nothing (issue 47: it moves an offset row).
inline constexpr char kLogFloor[] = "log_floor";

// The workloads a run takes by default, in the order it takes them.
inline const std::vector<std::string>& Workloads() {
  static const std::vector<std::string> w = {"drain",   "steady", "pickup",
                                             "enqueue", "idle",   "memory"};
  return w;
}

// The workloads that run only when `--only` names them: the soak takes half
// an hour and more, the scale workload (scale.h) needs a server with room for
// two connections per session.
inline const std::vector<std::string>& OptInWorkloads() {
  static const std::vector<std::string> w = {"soak", "scale"};
  return w;
}

// The soak (issue 27): producers at a steady rate for a long time, consumers
// with the record handler, a session joining or leaving every churn period,
// optionally a server restart and held snapshots, sampled every
// sample_seconds into `out` (a table bench/soak.sh plots).
struct SoakOptions {
  double rate = 20000;  // items/s
  double seconds = 1800;
  int sessions = 4;           // at the start; churn moves between this and one more
  double churn_seconds = 60;  // 0: no churn
  double sample_seconds = 10;
  // A shell command run at restart_at seconds (0: none), e.g.
  // "pg_ctl -D DIR restart -m fast"; the bench lives through it.
  double restart_at = 0;
  std::string restart_command;
  // Snapshots held by a REPEATABLE READ transaction of another connection:
  // (start, length) in seconds from the start.
  std::vector<std::pair<double, double>> holds;
  std::string out;  // the samples, tab-separated; required
};

// Connections one idle session holds (heartbeat and LISTEN on one, claims;
// 20 sessions held at most 45 with the bench's own, 85 before LISTEN shared
// the session's connection): the idle workload needs this many per session
// free on the server, or it is skipped with a note.
inline constexpr int kIdleConnectionsPerSession = 2;

struct BenchOptions {
  PgOptions pg;  // schema is the bench's own (dropped and recreated)
  std::vector<int> sessions = {1, 2, 4, 8, 16};
  std::vector<int> batches = {1, 10, 100};
  // The batch sweep (every batch) runs at this session count; the session
  // sweep at the largest batch. --full runs every pair.
  int sweep_sessions = 4;
  bool full = false;
  // Per drain at the largest batch (scaled down for small ones). Large enough
  // that a drain at the floor's rate lasts a quarter second: at 20000 items
  // (50 ms) the rounds of one cell spread by ±20 %.
  int64_t items = 100000;
  int rounds = 3;
  int parts = 16;  // parts of the bench queue
  // Drain systems to run (DrainSystems() names); empty: all. Ratios need "floor".
  std::set<std::string> systems;
  // Workloads() to run; all by default.
  std::set<std::string> only{Workloads().begin(), Workloads().end()};
  double steady_rate = 5000;  // items/s
  double steady_seconds = 3;
  int steady_sessions = 4;
  // Non-zero: the run fails (partq bench exits 1) when the steady p99 (median over rounds)
  // is above this many milliseconds, so that a change that adds latency is seen.
  double steady_p99_limit_ms = 0;
  // Every consumer's table keeper (ConsumerOptions::vacuum_interval), in
  // seconds; 0: off, autovacuum alone keeps the tables (the A/B of issue
  // 27's soak).
  double vacuum_interval_seconds = 10;
  SoakOptions soak;
  // Each idle session holds ~kIdleConnectionsPerSession connections.
  int idle_sessions = 100;
  double idle_seconds = 10;
  int pickup_samples = 100;
  // The scale workload (scale.h): sessions and parts; its queue's TTL.
  int scale_sessions = 200;
  int scale_parts = 4096;
  // Idle heartbeats per session before the scale workload's idle window
  // (ScaleOptions::idle_warmup).
  int scale_warmup = 0;
  // `partq` itself: the memory workload's worker, and the exec and http peers
  // (`partq bench-peer exec|http`) of partq_exec, partq_http and their
  // _noop and _fail variants.
  std::string worker_binary;
  // The examples/ directory of the source tree: partq_exec_python runs
  // python/handler.py, partq_http_node node/server.mjs.
  std::string examples_dir;
  // bench/peers of the source tree: the Node.js driver of the graphile_worker
  // and pg_boss systems (peer_queues.h) and its pinned npm packages.
  std::string peers_dir;
  int postmaster_pid = 0;  // for the server's CPU; 0: read postmaster.pid if possible
  bool verbose = true;     // progress lines on stderr
  // Diagnostic run: needs pg_stat_statements preloaded; adds the top
  // statements by total time (and EXPLAIN ANALYZE of a claim) to the notes.
  bool diagnose = false;
};

// One drain measurement.
struct DrainSample {
  std::string system;
  int sessions = 0;
  int batch = 0;
  int round = 0;
  int64_t items = 0;
  double seconds = 0;
  double items_per_s = 0;
  // HandlerSystems(): the drained items that left a result (checked against
  // their payloads); 0 for the others.
  int64_t results = 0;
  // CPU per item drained, in µs: the server's (postmaster and its children,
  // from /proc; -1 when the server is not on this host) and this process's
  // (the clients: partq's consumers or the baseline's connections).
  double server_us_per_item = -1, client_us_per_item = -1;
};

struct DrainCell {
  std::string system;
  int sessions = 0;
  int batch = 0;
  double median_items_per_s = 0;
  double median_ratio_to_floor = 0;  // median over rounds of (this / floor in that round)
  // The same, to each of ReferenceSystems() that ran in this cell's rounds,
  // and for a *_fail system to WithoutFailures(system).
  std::map<std::string, double> median_ratio_to;
  std::vector<double> per_round;  // items/s
  // CPU per item (DrainSample), medians over rounds; and the median of the
  // per-round ratios of the server's CPU per item to the floor's (0: none).
  double median_server_us_per_item = -1, median_client_us_per_item = -1;
  double median_server_cpu_to_floor = 0;
};

struct Latency {
  int64_t samples = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
};

// The p50, p99 (nearest rank) and max of `ms`, milliseconds each.
Latency LatencyOf(std::vector<double> ms);

struct BenchReport {
  std::map<std::string, std::string> machine;  // nproc, cpu, ram, server version, settings
  std::vector<DrainSample> samples;
  std::vector<DrainCell> cells;
  // steady state
  double steady_rate = 0, steady_achieved = 0;
  Latency steady_latency;
  // Its two halves (medians of the rounds' p50 and p99, the largest max): enqueue commit ->
  // claimed (the notice, the claimer, the claim) and claimed -> ack commit (the wait for the
  // session's worker, the handler, the ack).
  Latency steady_to_claimed, steady_claimed_to_acked;
  // enqueue items/s: single, batch (multi-row INSERT), copy
  std::map<std::string, double> enqueue;
  // idle
  int idle_sessions = 0;
  double idle_client_calls_per_s = 0;
  std::map<std::string, double> idle_calls_per_s;  // by Store call
  double idle_server_xacts_per_s = 0;
  double idle_server_cpu_percent = -1;  // of one core; -1 when unknown
  // A delayed item enqueued into the idle fleet: due time -> claimed.
  Latency idle_delayed_late;
  // memory of a `partq worker --concurrency 16`
  double worker_rss_mb = -1, worker_peak_rss_mb = -1;
  // idle pick-up: enqueue commit -> claim returned, and -> ack committed;
  // the floor's (PickupBaseline): insert commit -> the job taken
  Latency pickup_claim, pickup_ack, pickup_floor;
  // The soak's summary: acked items/s and enqueue commit -> ack commit
  // latency over its first and its last five minutes, the largest items
  // table and index sizes sampled and those at the end (MB).
  struct SoakSummary {
    bool ran = false;
    double first_rate = 0, last_rate = 0;
    Latency first, last;
    double max_table_mb = 0, max_index_mb = 0, end_table_mb = 0, end_index_mb = 0;
    int64_t enqueued = 0, unsure = 0, acked_rows = 0;
    int joins = 0, leaves = 0;
  } soak;
  // The other queues driven by bench/peers/peer.mjs (peer_queues.h), by
  // system, over the rounds (medians; max: the largest): at the steady rate
  // (the producer's send -> the handler's start) and idle pick-up (the same,
  // one item at a time into an idle fleet).
  struct PeerLatency {
    Latency latency;
    double achieved_rate = 0;
    bool kept_up = true;
  };
  std::map<std::string, PeerLatency> peer_steady, peer_pickup;
  bool scale_ran = false;
  ScaleReport scale;
  std::vector<std::string> notes;
};

absl::StatusOr<BenchReport> RunBench(const BenchOptions& options);

std::string FormatTable(const BenchReport& report, const BenchOptions& options);
// ", fell behind" for a peer's steady run that did not keep up, ", but its
// producer fell short of the rate" for one whose producer offered less than
// 98 % of --steady-rate, else "".
std::string PeerShortfall(bool kept_up, double achieved, const BenchOptions& options);
// Whether a --steady-p99-limit was given and the steady p99 is above it (partq bench then
// exits 1).
bool SteadyOverLimit(const BenchReport& report, const BenchOptions& options);
std::string ToJson(const BenchReport& report, const BenchOptions& options);
// Whether a run with `options` can plot to `path`, checked before the run
// (it takes minutes): the path ends in .svg or .png, the run includes the
// drain, gnuplot is installed. InvalidArgument or FailedPrecondition, with a
// message for the user, when not.
absl::Status CheckPlot(const BenchOptions& options, const std::string& path);

// Throughput against sessions (largest batch), one line per system that ran,
// via gnuplot (run without a shell; its input in a temporary directory). The
// format follows the extension (.svg or .png). CheckPlot's errors, or an
// error when gnuplot fails.
absl::Status WritePlot(const BenchReport& report, const BenchOptions& options,
                       const std::string& path);

}  // namespace partq::bench

#endif  // PARTQ_BENCH_BENCH_H_
