#include "base/clock.h"

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

void ManualClock::AddWaiter(absl::Mutex* mu) {
  absl::MutexLock lock(&waiters_mu_);
  ++waiters_[mu];
  ++waiting_;
}

void ManualClock::RemoveWaiter(absl::Mutex* mu) {
  absl::MutexLock lock(&waiters_mu_);
  if (--waiters_[mu] == 0) waiters_.erase(mu);
  --waiting_;
}

// absl::Mutex re-evaluates the conditions of its waiters whenever it is
// released, so a wait needs no condition variable of its own: its condition
// also reads the clock, and Advance releases every waiting mutex once.
bool ManualClock::AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& cond,
                                    absl::Time deadline) {
  const int64_t until =
      deadline == absl::InfiniteFuture() ? INT64_MAX : absl::ToUnixNanos(deadline);
  auto done = [&] { return cond.Eval() || now_ns_.load() >= until; };
  AddWaiter(&mu);
  mu.Await(absl::Condition(&done));
  RemoveWaiter(&mu);
  return cond.Eval();
}

void ManualClock::SleepFor(absl::Duration d) {
  const int64_t until = absl::ToUnixNanos(Now() + d);
  absl::MutexLock lock(&sleep_mu_);
  auto done = [&] { return now_ns_.load() >= until; };
  AddWaiter(&sleep_mu_);
  sleep_mu_.Await(absl::Condition(&done));
  RemoveWaiter(&sleep_mu_);
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
}

bool ManualClock::AwaitWaiters(int n, absl::Duration timeout) const {
  absl::MutexLock lock(&waiters_mu_);
  auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(waiters_mu_) { return waiting_ >= n; };
  return waiters_mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

}  // namespace partq
