// Queue depth for Prometheus, from one collector per queue.
//
// Every worker of a queue could count its items, but N workers running the
// same Status query would multiply its cost and export N copies of one number.
// Instead the worker whose session owns part 0 (`is_collector`) runs
// Store::Status every `interval` and publishes (on a connection of its own,
// or one it shares with the schedule firer; it closes it when the process
// stops owning part 0):
//
//   partq_queue_ready_items                gauge  items ready to be claimed now
//   partq_queue_delayed_items              gauge  items waiting for their run_at (retries, delays)
//   partq_queue_in_flight_items            gauge  items claimed and not finished
//   partq_queue_dead_items                 gauge  rows in dead_items
//   partq_queue_oldest_ready_age_seconds   gauge  age of the oldest ready item (0: none)
//   partq_queue_unowned_parts              gauge  parts no session owns
//   partq_sessions                         gauge  live (unexpired) sessions of the queue
//   partq_queue_collector                  gauge  1 while this process is the collector
//   partq_queue_collect_errors_total       counter Status queries that failed
//   partq_queue_collect_duration_seconds   gauge  how long the last Status query took
//   partq_vacuum_horizon_age_seconds       gauge  how long the oldest holder of the
//                                                 database's vacuum horizon has held it
//   partq_vacuum_horizon_age_xids          gauge  transactions begun since that horizon
//
// The horizon is the database's, not the queue's (QueueStatus::horizon):
// while a long transaction, an idle-in-transaction session, a prepared
// transaction or a replication slot holds it, vacuum removes no acked item's
// row, and the items table and its index grow. An operator sees the cause
// here and in `partq status` (alert PartqVacuumHorizonHeld).
//
// Every other worker exports the same gauges at zero (zero-filled), and the
// collector zeroes its own when it stops being one, so when part 0 moves (or
// its pod dies, and Prometheus drops that target's series) no stale copy of an
// old value remains. Query them as `max by (queue) (...)` (or `sum`, the same
// here); never `min` or `avg`. On a failed query the last values stay (the
// error counter and the heartbeat alerts say why).
//
// Status counts every item of the queue (0.3 s for 2,000,000 items on a
// 2-core machine), so on a backlog of millions a query every `interval` would
// keep a database core busy when it is needed most. The next round therefore
// waits at least kCollectSpacing times as long as the last query took
// (WaitAfter), however often it is poked: collection uses at most
// 1/kCollectSpacing of one connection's time, and the gauges then lag by that
// much. A query that failed does not space out the next one.
//
// Lifecycle (base/service.h): Start() starts one thread; Stop() joins it and
// zero-fills; safe before Start and twice. CollectOnce() and the gauges are
// thread-safe.
#ifndef PARTQ_COORDINATOR_QUEUE_COLLECTOR_H_
#define PARTQ_COORDINATOR_QUEUE_COLLECTOR_H_

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/service.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "store/shared_store.h"
#include "store/store.h"

namespace partq {

// A queue's status summed over its parts, as `partq status` prints it, the
// collector exports it and the console shows it. A part counts as unowned
// when no live session owns it (SessionLive): its owner's session may have
// expired without anyone (a live member's heartbeat) having deleted it yet,
// and its items wait either way.
struct QueueTotals {
  int64_t ready = 0, delayed = 0, in_flight = 0, dead = 0, held = 0, cancelled = 0;
  // Of in_flight, those on parts without a live owner: claimed by a session
  // that died; nothing runs them until a live member takes the part (and
  // makes them ready again).
  int64_t in_flight_unowned = 0;
  int64_t dead_last_minute = 0;  // PartStatus::dead_last_minute, summed
  int64_t unowned_parts = 0;
  int64_t live_sessions = 0, expired_sessions = 0;
  absl::Duration oldest_ready_age;  // zero when none is ready
};
// `since_read`: how long ago the status was read (the console shows reads
// seconds old; sessions that expired since count as expired).
QueueTotals SumUp(const QueueStatus& status, absl::Duration since_read = absl::ZeroDuration());

// The same rule over Store::Owners' cheaper read: live and expired sessions,
// and parts without a live owner.
struct OwnerTotals {
  int64_t live_sessions = 0, expired_sessions = 0, unowned_parts = 0;
};
OwnerTotals SumUp(const QueueOwners& owners, absl::Duration since_read = absl::ZeroDuration());

class QueueCollector {
 public:
  static constexpr int kCollectSpacing = 20;
  // The wait before the next round after a query that took `took`.
  static absl::Duration WaitAfter(absl::Duration interval, absl::Duration took) {
    return std::max(interval, took * kCollectSpacing);
  }

  // `is_collector` is asked before every collection; `registry` and `clock`
  // (the query timing and the wait between rounds) must outlive this object.
  QueueCollector(StoreFactory factory, std::string queue, std::function<bool()> is_collector,
                 prometheus::Registry& registry, absl::Duration interval = absl::Seconds(5),
                 Clock* clock = Clock::Real());
  // The same, on a connection it takes turns on with others (a Consumer's
  // schedule firer, store/shared_store.h).
  QueueCollector(std::shared_ptr<SharedStore> store, std::string queue,
                 std::function<bool()> is_collector, prometheus::Registry& registry,
                 absl::Duration interval = absl::Seconds(5), Clock* clock = Clock::Real());
  ~QueueCollector();
  QueueCollector(const QueueCollector&) = delete;
  QueueCollector& operator=(const QueueCollector&) = delete;

  void Start();
  void Stop();
  // When the last read found the queue quiet (nothing ready, delayed, in
  // flight or held, no group pending, every part owned), the next waits this
  // long instead of `interval`, or until Poke (but at least the spacing,
  // WaitAfter): for a collector that is poked
  // whenever the queue may have changed (a Consumer that listens pokes it on
  // every notice of the queue: an enqueue, a join, a leave, an expiry swept,
  // a setting changed). Zero (the default): always `interval`. Before Start.
  void SetQuietInterval(absl::Duration d);
  // Something changed: ends a quiet wait. The next round still waits for
  // the spacing after the last one (WaitAfter): pokes never make rounds
  // come more often than that.
  void Poke();

  // One round: zero-fills if this process is not the collector, else queries
  // and publishes. Returns the query's error, if any.
  absl::Status CollectOnce();
  // Sets the gauges from a status read (the collector's half of CollectOnce).
  void Publish(const QueueStatus& status);
  void ZeroFill();

 private:
  void Run();

  const std::shared_ptr<SharedStore> store_;
  const std::string queue_;
  const std::function<bool()> is_collector_;
  const absl::Duration interval_;
  Clock* const clock_;

  prometheus::Gauge& ready_;
  prometheus::Gauge& delayed_;
  prometheus::Gauge& held_;
  // partq_queue_groups{state="held"|"started"|"ended"}, and the items the
  // groups not ended have pending.
  prometheus::Family<prometheus::Gauge>& groups_;
  prometheus::Gauge& groups_held_;
  prometheus::Gauge& groups_started_;
  prometheus::Gauge& groups_ended_;
  prometheus::Gauge& group_pending_;
  prometheus::Gauge& in_flight_;
  prometheus::Gauge& dead_;
  prometheus::Gauge& cancelled_;
  prometheus::Gauge& oldest_ready_age_;
  prometheus::Gauge& unowned_parts_;
  prometheus::Gauge& sessions_;
  prometheus::Gauge& paused_;
  prometheus::Gauge& collector_;
  prometheus::Counter& errors_;
  prometheus::Gauge& duration_;
  prometheus::Gauge& horizon_age_;
  prometheus::Gauge& horizon_xids_;

  absl::Mutex took_mu_;  // CollectOnce may run on the thread and in tests
  // How long the last status query took; zero if it failed or this process
  // was not the collector.
  absl::Duration last_took_ ABSL_GUARDED_BY(took_mu_);
  // The last round read the queue quiet (SetQuietInterval).
  bool quiet_ ABSL_GUARDED_BY(took_mu_) = false;
  absl::Duration quiet_interval_;  // set before Start

  absl::Mutex mu_;
  StartStop lifecycle_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool poked_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace partq

#endif  // PARTQ_COORDINATOR_QUEUE_COLLECTOR_H_
