// The other queues `partq bench` measures beside partq (issue 51), each on
// the bench's server with the bench's items:
//   - PgQ (Debian's postgresql-15-pgq3): driven here in SQL, one consumer,
//     each batch's result rows written in the transaction that finishes it;
//   - Graphile Worker and pg-boss (npm packages pinned by
//     bench/peers/package-lock.json): driven by bench/peers/peer.mjs in a
//     child process, which loads, drains and checks exactly once by the
//     system's own account and prints one JSON line.
//
// Thread-safety: every function may be called from any thread; each opens
// its own connections or child process.
#ifndef PARTQ_BENCH_PEER_QUEUES_H_
#define PARTQ_BENCH_PEER_QUEUES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace partq::bench {

// The peer queues, each at its documented best settings for a backlog and,
// as *_default, at its defaults (bench/peers/peer.mjs says what each does).
inline const std::vector<std::string>& PeerQueueSystems() {
  static const std::vector<std::string> s = {"pgq", "graphile_worker", "graphile_worker_default",
                                             "pg_boss", "pg_boss_default"};
  return s;
}

// Whether `system` is driven by bench/peers/peer.mjs.
bool IsNodePeer(absl::string_view system);

// PgQ's drain is one consumer: a PgQ consumer sees every event of its queue
// (cooperative consumers are another package), so it runs only in cells of
// one session.
inline bool RunsInCell(absl::string_view system, int sessions) {
  return system != "pgq" || sessions == 1;
}

// Loads `items` events into a fresh PgQ queue named after `schema`, ticked
// every `batch` events (the consumer's batches), and empties bl_results.
// Creates the pgq extension when missing. Not timed.
absl::Status LoadPgq(const std::string& dsn, const std::string& schema, int64_t items, int batch);

// Drains the queue LoadPgq filled with one consumer: per batch, one
// transaction of next_batch, the batch's bl_results rows and finish_batch.
// Returns the seconds until next_batch found no batch left; `mark` as
// DrainBaseline's.
absl::StatusOr<double> DrainPgq(const std::string& dsn, const std::string& schema,
                                const std::function<void(bool)>& mark = nullptr);

// Drops what LoadPgq made (the queue; the extension stays).
absl::Status DropPgq(const std::string& dsn, const std::string& schema);

struct NodePeerOptions {
  std::string peers_dir;  // bench/peers of the source tree
  std::string dsn;        // libpq's; passed to Node as PG* variables
  std::string schema;     // the bench's; the peers use <schema>_<system>
  absl::Duration timeout = absl::Minutes(10);
  std::function<void(absl::string_view)> log;  // the child's stderr lines; may be empty
  // NodePeerModules(peers_dir), when the caller has it already (a run of
  // tools/setup each time otherwise).
  std::string node_modules;
};

// What one run of peer.mjs printed.
struct NodePeerResult {
  std::string version;
  double seconds = 0, items_per_s = 0;
  int64_t items = 0, done = 0, duplicates = 0, missing = 0;
  // steady and pickup
  int64_t samples = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0, achieved_rate = 0;
  bool kept_up = false;
};

// PgQ at a steady `rate` for `seconds` (issue 51; a pick-up is this at 5 a
// second), in a fresh queue as LoadPgq's with ticker_max_lag 20 ms and
// ticker_idle_period 10 ms: after a warm-up event, a producer inserts every
// 10 ms the events due by then in one transaction, a ticker calls
// pgq.ticker() every 10 ms (pgqd's default ticker_period is 1 s), and one
// consumer asks for a batch every 2 ms while it finds none and writes each
// batch's bl_results rows in the transaction that finishes it. Latency: from
// the commit of an event's insert to the read of its batch, or with
// `from_send` from just before the insert (as the Node peers' pick-ups).
// Kept up when every event was read within 10 s of the last insert.
absl::StatusOr<NodePeerResult> SteadyPgq(const std::string& dsn, const std::string& schema,
                                         double rate, double seconds, bool from_send = false);

// Installs the pinned npm packages (tools/setup npm) when missing and
// returns the node_modules directory. FailedPrecondition when node, npm or
// the registry is not there.
absl::StatusOr<std::string> NodePeerModules(const std::string& peers_dir);

// Runs `node peer.mjs SYSTEM MODE ARGS...` (system: graphile_worker[_default]
// or pg_boss[_default]; its shape follows the suffix). An error when the
// script fails, times out or prints no result; a drain whose account is not
// exactly once (done != items, duplicates or missing) is an error too.
absl::StatusOr<NodePeerResult> RunNodePeer(const NodePeerOptions& options,
                                           const std::string& system, const std::string& mode,
                                           const std::vector<std::string>& args);

}  // namespace partq::bench

#endif  // PARTQ_BENCH_PEER_QUEUES_H_
