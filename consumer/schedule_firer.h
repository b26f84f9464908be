// Fires a queue's schedules (Store::FireSchedules) from one worker of the
// queue at a time: the one whose session owns part 0, as the queue
// collector does (coordinator/queue_collector.h). docs/architecture.md
// ("Schedules") says why each tick then gives exactly one item.
//
// Cost: the firer asks the database once per due tick (it sleeps until the
// earliest next tick the last round reported, read as a distance on the
// database clock, so the clocks need not agree) and otherwise once per
// `poll_interval`, which is also how soon a schedule added meanwhile starts
// firing; when the queue has none, once per `quiet_poll_interval` if set (a
// listening Consumer sets it, and a notice of a schedule added pokes it).
// Workers that do not own part 0 never ask. When part 0 comes to
// this worker (Poke) it looks at once: ticks that came due while its firer
// was dead or stalled fire then, late, each once, as far back as the
// schedule's catch-up window (schedule/timing.h, PlanCatchUp); of older ones
// only the latest. The firer holds a
// connection while it is the firer, none otherwise: its own, or one it
// shares with the queue collector (a round then waits while a Status query
// runs: seconds at most, on a backlog of millions).
//
// A store that keeps no schedules (Store::FireSchedules is Unimplemented)
// ends the firer's rounds quietly. A queue that is gone (NotFound: deleted
// under the worker, whose session then stops it) is reported once, until a
// round answers otherwise, and asked about again at `poll_interval`.
//
// Lifecycle (base/service.h): Start() starts one thread; Stop() joins it;
// safe before Start and twice. Poke, RunOnce and the counts are
// thread-safe.
#ifndef PARTQ_CONSUMER_SCHEDULE_FIRER_H_
#define PARTQ_CONSUMER_SCHEDULE_FIRER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/service.h"
#include "store/shared_store.h"
#include "store/store.h"

namespace partq {

class ConsumerMetrics;

struct ScheduleFirerOptions {
  std::string queue;
  // With no tick due sooner, ask the database this often.
  absl::Duration poll_interval = absl::Seconds(5);
  // When the queue has no schedule at all, this often instead (zero: as
  // poll_interval). Only for a firer that is poked when a schedule is added
  // (the queue's notices, Notice::Kind::kSchedules): a Consumer that listens.
  absl::Duration quiet_poll_interval = absl::ZeroDuration();
  // After a failed round (the database is away), try again this soon.
  absl::Duration retry_backoff = absl::Seconds(1);
  // Reads, and waits between rounds; must outlive the firer.
  Clock* clock = Clock::Real();
};

class ScheduleFirer {
 public:
  // `is_firer` is asked before every round (does this worker own part 0?);
  // `metrics` may be null, else it must outlive the firer.
  ScheduleFirer(StoreFactory factory, ScheduleFirerOptions options, std::function<bool()> is_firer,
                ConsumerMetrics* metrics = nullptr);
  // The same, on a connection it takes turns on with others (the queue's
  // depth collector, store/shared_store.h).
  ScheduleFirer(std::shared_ptr<SharedStore> store, ScheduleFirerOptions options,
                std::function<bool()> is_firer, ConsumerMetrics* metrics = nullptr);
  ~ScheduleFirer();
  ScheduleFirer(const ScheduleFirer&) = delete;
  ScheduleFirer& operator=(const ScheduleFirer&) = delete;

  void Start();
  void Stop();
  // Runs a round now rather than at the planned time (part 0 came to us).
  void Poke();

  // One round: fires what is due if this worker is the firer. Returns when
  // the next round is due, on the options' clock (InfiniteFuture: never,
  // the store keeps no schedules).
  absl::Time RunOnce();

  // Ticks fired and missed ticks counted by this firer so far.
  int64_t fired() const;
  int64_t missed() const;

 private:
  void Run();

  const std::shared_ptr<SharedStore> store_;
  const ScheduleFirerOptions options_;
  Clock* const clock_;
  const std::function<bool()> is_firer_;
  ConsumerMetrics* const metrics_;

  mutable absl::Mutex mu_;
  StartStop lifecycle_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool poked_ ABSL_GUARDED_BY(mu_) = false;
  int64_t fired_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t missed_ ABSL_GUARDED_BY(mu_) = 0;
  // The last round that asked found no queue, and said so.
  bool queue_missing_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace partq

#endif  // PARTQ_CONSUMER_SCHEDULE_FIRER_H_
