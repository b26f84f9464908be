// The fleet-scale workload (`partq bench --only scale`, issue 26): N
// coordinator sessions in this process on a P-part sticky queue. It counts
// rather than times where it can (the machine may be shared): heartbeat
// intervals from the last join to full ownership, store calls and owner rows
// per idle session, parts moved on a join, a leave and a "SIGKILL" (a session
// that stops heartbeating without leaving) against the lower bound, and an
// owner check from the database throughout the run.
//
// The owner check: every part a live session's listener believes it owns
// (between OnAssign and OnRevoke/OnLost) must be, in the database at that
// moment, that session's at that epoch, and no part may be believed by two
// live sessions. A sampler reads session_parts while it holds the lock the
// listeners take, so no belief changes during a read (a release waits for
// OnRevoke, which waits for the sampler). It samples throughout the run
// except the idle window, whose server CPU would otherwise be mostly its own
// reads (every owner row, ten times a second); nothing moves in that window
// (ScaleReport::idle_generation_moves says whether anything did).
//
// Thread-safety: RunScale drives its own threads; call it from one thread.
#ifndef PARTQ_BENCH_SCALE_H_
#define PARTQ_BENCH_SCALE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/baselines.h"
#include "store/store.h"

namespace partq::bench {

struct ScaleOptions {
  std::string queue = "scale";  // created by RunScale; must not exist
  int sessions = 200;
  int parts = 4096;
  absl::Duration session_ttl = absl::Seconds(10);  // heartbeats every ttl/3
  absl::Duration idle = absl::Seconds(10);         // the idle measurement
  // Rounds (idle heartbeats) each session runs after the group settled and
  // before the idle window: PostgreSQL plans a prepared statement for its
  // arguments on its first five runs on a connection and may keep a generic
  // plan from then on, so a window right after the storm measures those
  // first plans; 6 measures the steady state of a long-idle fleet.
  int idle_warmup = 0;
  int start_threads = 8;                           // sessions joining at once
  // Give up on a phase (full ownership, a rebalance) after this long.
  absl::Duration phase_timeout = absl::Minutes(2);
  // The server's CPU ticks so far (postmaster and children); null or -1:
  // unknown, no CPU figure.
  std::function<int64_t()> server_cpu_ticks;
  bool verbose = false;  // progress on stderr
};

// Parts moved by one membership change, against the lower bound for sticky
// assignment (the newcomer's fair share; the leaver's parts).
struct ScaleMoves {
  int64_t moved = -1, lower_bound = -1;
  double intervals = -1;  // heartbeat intervals from the change to balance
};

struct ScaleReport {
  int sessions = 0, parts = 0;
  double heartbeat_interval_s = 0;
  // From the last Start() returning to every part owned / to balanced
  // ownership (every part owned, counts differing by at most one).
  double full_intervals = -1, balanced_intervals = -1;
  // The idle fleet, per session: store calls/s, and owner rows the group
  // reads returned per call (heartbeats, and group reads after notices).
  double idle_calls_per_s_per_session = 0;
  std::map<std::string, double> idle_calls_per_s;  // whole fleet, by call
  double idle_owner_rows_per_heartbeat = -1;
  // Owner rows all group reads returned over the idle window, and how often
  // the group generation moved meanwhile (-1: the schema has none): with no
  // move, a heartbeat that read what changed returns no owner row.
  int64_t idle_owner_rows = 0, idle_generation_moves = -1;
  double idle_server_cpu_percent = -1;  // of one core
  // The idle window's length, and the machine's steal time over it (% of one
  // core; -1 unknown): on a VM, CPU the host gave elsewhere, which makes the
  // same work cost more CPU time here.
  double idle_seconds = 0, idle_steal_percent = -1;
  // pg_stat_statements over the idle window: the heartbeat statement's mean
  // time and buffers (shared hits and reads) per call (-1: not available).
  double heartbeat_mean_ms = -1, heartbeat_blocks_per_call = -1;
  ScaleMoves join, leave, kill;
  // Owner check: samples taken; violations seen (a part believed by two
  // live sessions, or believed at an epoch the database does not hold).
  int64_t owner_samples = 0, double_owned = 0, stale_beliefs = 0;
  // Joins beyond one per session: sessions whose lease lapsed (no heartbeat
  // reached the database within the TTL, e.g. on a starved machine) and
  // joined again. Until such a session notices, it and its parts' next
  // owner both believe they own them (its acks are fenced by the epoch),
  // and its parts move more than the lower bound.
  int64_t rejoins = 0;
  // Store calls over the whole run, by call (rebalance cost).
  std::map<std::string, int64_t> run_calls;
};

// Runs the workload on `factory`'s database, whose tables are in `schema`;
// the owner check reads them over two connections of its own to `dsn`. The
// queue is deleted afterwards.
absl::StatusOr<ScaleReport> RunScale(const ScaleOptions& options, const StoreFactory& factory,
                                     const std::string& dsn, const std::string& schema);

std::string FormatScale(const ScaleReport& r);

}  // namespace partq::bench

#endif  // PARTQ_BENCH_SCALE_H_
