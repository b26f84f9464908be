// Injected time (architecture.md, Conventions). Everything in partq that reads the time, sleeps
// or waits with a deadline does it through a Clock: the real one in programs,
// a ManualClock in tests, which then move time on instead of sleeping. A
// MemStore uses its Clock as the "database clock" too, so one ManualClock
// drives sessions, consumers and their store together.
#ifndef PARTQ_BASE_CLOCK_H_
#define PARTQ_BASE_CLOCK_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace partq {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // Returns once `d` has passed on this clock.
  virtual void SleepFor(absl::Duration d) = 0;
  // Like absl::Mutex::AwaitWithDeadline, on this clock: with `mu` held,
  // waits until `cond` holds or this clock reaches `deadline`, releasing `mu`
  // meanwhile. Returns whether `cond` holds.
  virtual bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& cond, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;
  bool AwaitWithTimeout(absl::Mutex& mu, const absl::Condition& cond, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return AwaitWithDeadline(mu, cond, Now() + timeout);
  }

  // The process-wide real clock.
  static Clock* Real();
};

// A clock that moves only when told to. Waits on it end when their condition
// holds (as with a real clock) or when Advance moves the time past their
// deadline. Thread-safe. Advance must not be called with the mutex of any
// wait on this clock held, nor while an object waiting on it is destroyed
// (tests advance from their own thread, which also owns the objects).
//
// Stepping background threads: AwaitWaiters(n) counts only waits whose
// deadline is still to come, so after an Advance it returns once the threads
// it woke have run on to their next wait. A test that knows how many threads
// wait on the clock when idle can thus move them in lockstep: Advance,
// AwaitWaiters(n), look. A wait's mutex must outlive the wait by as long as an
// Advance may still wake it: wait on long-lived mutexes, not on a local of a
// frame that returns.
class ManualClock : public Clock {
 public:
  explicit ManualClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000))
      : now_ns_(absl::ToUnixNanos(start)) {}
  absl::Time Now() const override { return absl::FromUnixNanos(now_ns_.load()); }
  void SleepFor(absl::Duration d) override;
  bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& cond, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) override;
  // Moves the time on by `d` (>= 0) and wakes the waits whose deadline came.
  void Advance(absl::Duration d);
  // Waits on the real clock, at most `timeout`, until at least `n` threads
  // are waiting or sleeping on this clock for a time still to come (a wait
  // whose deadline has passed is about to return and does not count): a
  // test's way to know that a background thread has reached its next timed
  // wait before advancing.
  bool AwaitWaiters(int n, absl::Duration timeout = absl::Seconds(30)) const;

 private:
  // `until`: the wait's deadline in Unix nanoseconds (INT64_MAX: none).
  void AddWaiter(absl::Mutex* mu, int64_t until);
  void RemoveWaiter(absl::Mutex* mu, int64_t until);

  std::atomic<int64_t> now_ns_;
  mutable absl::Mutex waiters_mu_;
  // The mutexes of the waits under way, with how many waits use each.
  std::map<absl::Mutex*, int> waiters_ ABSL_GUARDED_BY(waiters_mu_);
  // The deadlines of those waits, as AddWaiter's `until`.
  std::multiset<int64_t> deadlines_ ABSL_GUARDED_BY(waiters_mu_);
  absl::Mutex sleep_mu_;  // SleepFor waits on it
};

}  // namespace partq

#endif  // PARTQ_BASE_CLOCK_H_
