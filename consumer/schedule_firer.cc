#include "consumer/schedule_firer.h"

#include <algorithm>
#include <utility>

#include "base/log.h"
#include "consumer/metrics.h"
#include "schedule/timing.h"

namespace partq {

ScheduleFirer::ScheduleFirer(StoreFactory factory, ScheduleFirerOptions options,
                             std::function<bool()> is_firer, ConsumerMetrics* metrics)
    : ScheduleFirer(std::make_shared<SharedStore>(std::move(factory)), std::move(options),
                    std::move(is_firer), metrics) {}

ScheduleFirer::ScheduleFirer(std::shared_ptr<SharedStore> store, ScheduleFirerOptions options,
                             std::function<bool()> is_firer, ConsumerMetrics* metrics)
    : store_(std::move(store)),
      options_(std::move(options)),
      clock_(options_.clock),
      is_firer_(std::move(is_firer)),
      metrics_(metrics) {}

ScheduleFirer::~ScheduleFirer() { Stop(); }

void ScheduleFirer::Start() {
  if (!lifecycle_.BeginStart("schedule firer").ok()) return;
  thread_ = std::thread([this] { Run(); });
  lifecycle_.EndStart(true);
}

void ScheduleFirer::Stop() {
  if (!lifecycle_.BeginStop()) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  {
    absl::MutexLock lock(&store_->mu);
    store_->NotNeededLocked(this);
  }
  lifecycle_.EndStop();
}

void ScheduleFirer::Poke() {
  absl::MutexLock lock(&mu_);
  poked_ = true;
}

int64_t ScheduleFirer::fired() const {
  absl::MutexLock lock(&mu_);
  return fired_;
}

int64_t ScheduleFirer::missed() const {
  absl::MutexLock lock(&mu_);
  return missed_;
}

void ScheduleFirer::Run() {
  for (;;) {
    const absl::Time next = RunOnce();
    absl::MutexLock lock(&mu_);
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || poked_; };
    clock_->AwaitWithDeadline(mu_, absl::Condition(&woken), next);
    if (stopping_) return;
    poked_ = false;
  }
}

absl::Time ScheduleFirer::RunOnce() {
  const absl::Time now = clock_->Now();
  if (!is_firer_()) {
    // Part 0 went elsewhere: so does the connection, which only the firer
    // needs (once the others sharing it need it no longer either).
    absl::MutexLock lock(&store_->mu);
    store_->NotNeededLocked(this);
    return now + options_.poll_interval;
  }
  absl::StatusOr<FiredSchedules> r;
  {
    absl::MutexLock lock(&store_->mu);
    if (absl::Status st = store_->EnsureLocked(this); !st.ok()) {
      PARTQ_LOG(Warning) << "schedules of " << options_.queue << ": " << st;
      if (metrics_ != nullptr) metrics_->ScheduleError();
      return now + options_.retry_backoff;
    }
    r = store_->store->FireSchedules(options_.queue);
    if (!r.ok() && absl::IsUnavailable(r.status())) store_->store.reset();
  }
  // The queue is gone (partq queue delete): the session stops the worker
  // when it sees that. Say so once, until an answer says otherwise, and look
  // again at the poll interval, not a warning every backoff until then.
  const bool gone = !r.ok() && absl::IsNotFound(r.status());
  bool said;
  {
    absl::MutexLock lock(&mu_);
    said = std::exchange(queue_missing_, gone);
  }
  if (!r.ok()) {
    if (absl::IsUnimplemented(r.status())) return absl::InfiniteFuture();
    if (gone) {
      if (!said) PARTQ_LOG(Warning) << "schedules of " << options_.queue << ": " << r.status();
      if (metrics_ != nullptr) metrics_->ScheduleError();
      return clock_->Now() + options_.poll_interval;
    }
    PARTQ_LOG(Warning) << "schedules of " << options_.queue << ": " << r.status();
    if (metrics_ != nullptr) metrics_->ScheduleError();
    return clock_->Now() + options_.retry_backoff;
  }
  {
    absl::MutexLock lock(&mu_);
    for (const ScheduleFiring& f : r->fired) {
      ++fired_;
      missed_ += f.missed;
    }
  }
  for (const ScheduleFiring& f : r->fired) {
    if (f.missed > 0) {
      PARTQ_LOG(Info) << "schedule " << f.name << " of queue " << options_.queue << ": fired "
                      << FormatTick(f.tick) << " after " << f.missed
                      << " missed ticks (due longer ago than its catch-up window, they do not "
                         "fire)";
    } else if (f.late >= absl::Seconds(1)) {
      PARTQ_LOG(Info) << "schedule " << f.name << " of queue " << options_.queue << ": fired "
                      << FormatTick(f.tick) << " " << absl::FormatDuration(f.late)
                      << " late (caught up: no worker fired it in time)";
    }
    if (metrics_ != nullptr) metrics_->ScheduleFired(f.name, f.missed);
  }
  // The wait is a distance on the database clock, so a worker whose clock
  // is off still wakes when the tick has come there. A tick that is due
  // and was not fired belongs to a row another session holds (a hand-off
  // of part 0 under way): look again after the backoff, not in a loop.
  const absl::Time after = clock_->Now();
  absl::Duration wait = options_.poll_interval;
  // A queue with no schedule at all: one added is announced by a notice
  // (Poke), so only a missed one is waited for.
  if (!r->next_due && options_.quiet_poll_interval > absl::ZeroDuration()) {
    wait = options_.quiet_poll_interval;
  }
  if (r->next_due) {
    const absl::Duration until = *r->next_due - r->db_now;
    wait = std::min(wait, until > absl::ZeroDuration() ? until : options_.retry_backoff);
  }
  return after + wait;
}

}  // namespace partq
