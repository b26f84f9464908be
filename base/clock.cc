#include "base/clock.h"

#include <iterator>
#include <vector>

namespace partq {
namespace {

class RealClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void SleepFor(absl::Duration d) override { absl::SleepFor(d); }
  bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& cond, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) override {
    return mu.AwaitWithDeadline(cond, deadline);
  }
};

}  // namespace

Clock* Clock::Real() {
  static RealClock* clock = new RealClock();
  return clock;
}

void ManualClock::AddWaiter(absl::Mutex* mu, int64_t until) {
  absl::MutexLock lock(&waiters_mu_);
  ++waiters_[mu];
  deadlines_.insert(until);
}

void ManualClock::RemoveWaiter(absl::Mutex* mu, int64_t until) {
  absl::MutexLock lock(&waiters_mu_);
  if (--waiters_[mu] == 0) waiters_.erase(mu);
  deadlines_.erase(deadlines_.find(until));
}

// absl::Mutex re-evaluates the conditions of its waiters whenever it is
// released, so a wait needs no condition variable of its own: its condition
// also reads the clock, and Advance releases every waiting mutex once.
bool ManualClock::AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& cond,
                                    absl::Time deadline) {
  const int64_t until =
      deadline == absl::InfiniteFuture() ? INT64_MAX : absl::ToUnixNanos(deadline);
  auto done = [&] { return cond.Eval() || now_ns_.load() >= until; };
  AddWaiter(&mu, until);
  mu.Await(absl::Condition(&done));
  RemoveWaiter(&mu, until);
  return cond.Eval();
}

void ManualClock::SleepFor(absl::Duration d) {
  const int64_t until = absl::ToUnixNanos(Now() + d);
  absl::MutexLock lock(&sleep_mu_);
  auto done = [&] { return now_ns_.load() >= until; };
  AddWaiter(&sleep_mu_, until);
  sleep_mu_.Await(absl::Condition(&done));
  RemoveWaiter(&sleep_mu_, until);
}

void ManualClock::Advance(absl::Duration d) {
  now_ns_.fetch_add(absl::ToInt64Nanoseconds(d));
  std::vector<absl::Mutex*> wake;
  {
    absl::MutexLock lock(&waiters_mu_);
    for (const auto& [mu, n] : waiters_) wake.push_back(mu);
  }
  for (absl::Mutex* mu : wake) {
    mu->Lock();
    mu->Unlock();
  }
  { absl::MutexLock wake_await_waiters(&waiters_mu_); }  // its count depends on the time
}

bool ManualClock::AwaitWaiters(int n, absl::Duration timeout) const {
  absl::MutexLock lock(&waiters_mu_);
  // A wait whose deadline has passed is ending: counting it, a test could
  // advance again before the thread ran on (it would fall behind the clock
  // by the machine's load).
  auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(waiters_mu_) {
    const auto blocked = deadlines_.upper_bound(now_ns_.load());
    return std::distance(blocked, deadlines_.end()) >= n;
  };
  return waiters_mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

}  // namespace partq
