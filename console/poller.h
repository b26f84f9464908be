// The console's one reader of the database: what every browser tab sees
// comes from this object's cached state, never from a query of its own, so N
// open tabs cost the database what one does.
//
// Two lanes, each a thread with its own connection:
//   owners  every `owners_interval` (1 s): ListQueues, then Store::Owners per
//           queue (O(parts): who owns which part, and every session with its
//           expiry, live or not). Changes between two rounds are the
//           hand-offs this console saw (kept `handoff_window`).
//   status  every `status_interval` (10 s): Store::Status per queue (counts
//           every item: ready/delayed/in flight/dead per part, oldest ready
//           age, sessions' heartbeats). Its samples make the rates.
// Each lane then waits at least `spacing` times as long as its last round's
// queries took (as QueueCollector does), so a lane keeps the database busy at
// most 1/spacing of the time whatever the backlog: Status on 2M items takes
// ~0.3 s and is then read every 12 s, not every 10.
//
// What it sees is what it sampled: a part that moved and moved back between
// two owners rounds shows no hand-off, and the backlog's rate is its change
// between status samples (no history of the backlog is kept in the database;
// the acks' is, per minute, in the status read: QueueStatus::throughput).
//
// Lifecycle (base/service.h): Start() starts both lanes; Stop() joins them;
// safe before Start and twice. All methods are thread-safe.
#ifndef PARTQ_CONSOLE_POLLER_H_
#define PARTQ_CONSOLE_POLLER_H_

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/service.h"
#include "store/store.h"

namespace partq::console {

struct PollerOptions {
  absl::Duration owners_interval = absl::Seconds(1);
  absl::Duration status_interval = absl::Seconds(10);
  int spacing = 40;
  absl::Duration handoff_window = absl::Hours(1);
  // Status samples kept for the rates.
  absl::Duration rate_window = absl::Minutes(10);
  Clock* clock = Clock::Real();
};

// Parts that went from one owner to another between two owners rounds.
struct Handoff {
  absl::Time at;                      // when the console saw it (its clock)
  std::optional<SessionId> from, to;  // nullopt: no owner
  std::vector<int> parts;
};

// One status sample of a queue, summed over its parts.
struct Sample {
  absl::Time at;        // the console's clock
  int64_t backlog = 0;  // ready + delayed + in flight
};

struct QueueState {
  QueueConfig config;
  // Owners lane.
  absl::Time owners_at;  // absl::Time(): not read yet
  QueueOwners group;     // as Store::Owners gave it: sessions, an owner per part
  std::deque<Handoff> handoffs;                  // oldest first
  // Status lane.
  std::optional<QueueStatus> status;
  absl::Time status_at = absl::InfinitePast();
  absl::Duration status_took;
  std::deque<Sample> samples;  // oldest first
};

struct PollerState {
  std::map<std::string, QueueState> queues;
  // "host:pid" of every session seen, those gone too (a hand-off names
  // them after they died).
  std::map<std::string, std::string> labels;
  std::string owners_error, status_error;  // the last round's, empty if it went well
  absl::Time owners_at = absl::InfinitePast(), status_at = absl::InfinitePast();
};

class Poller {
 public:
  Poller(StoreFactory factory, PollerOptions options = {});
  ~Poller();
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  void Start();
  void Stop();

  // One round of a lane, on the calling thread (tests; the lanes call them).
  absl::Status PollOwnersOnce();
  absl::Status PollStatusOnce();
  // Asks both lanes for a round as soon as their spacing allows (after an
  // action, so the page shows its effect within a second).
  void Poke();

  // A copy of the state (one queue's vectors are a few KB at 4096 parts).
  PollerState Snapshot() const;
  // Only `queue` of it (and the labels); nullopt for a queue not seen.
  std::optional<QueueState> SnapshotQueue(const std::string& queue,
                                          std::map<std::string, std::string>* labels) const;

 private:
  enum class Lane { kOwners, kStatus };
  void Run(Lane lane);
  // A lane's connection, made on first use and again after a failed round.
  absl::Status Connect(std::unique_ptr<Store>& store);
  // A failed round: drops the lane's connection and keeps `st` as its
  // `error` for the pages. Returns `st`.
  absl::Status Failed(std::unique_ptr<Store>& store, std::string PollerState::*error,
                      const absl::Status& st) ABSL_LOCKS_EXCLUDED(mu_);

  const StoreFactory factory_;
  const PollerOptions options_;

  absl::Mutex owners_store_mu_, status_store_mu_;
  std::unique_ptr<Store> owners_store_ ABSL_GUARDED_BY(owners_store_mu_);
  std::unique_ptr<Store> status_store_ ABSL_GUARDED_BY(status_store_mu_);

  mutable absl::Mutex mu_;
  PollerState state_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool poked_owners_ ABSL_GUARDED_BY(mu_) = false;
  bool poked_status_ ABSL_GUARDED_BY(mu_) = false;
  StartStop lifecycle_;
  std::thread owners_thread_, status_thread_;
};

// How fast the backlog grew (negative: fell), per second, over the samples of the last
// `window` (from the oldest sample inside it to the newest); nullopt with
// fewer than two samples there.
std::optional<double> BacklogRate(const std::deque<Sample>& samples, absl::Duration window);
}  // namespace partq::console

#endif  // PARTQ_CONSOLE_POLLER_H_
