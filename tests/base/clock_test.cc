#include "base/clock.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace partq {
namespace {

TEST(ManualClock, MovesOnlyWhenAdvanced) {
  ManualClock clock(absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(105));
}

// A wait with a deadline ends when the clock passes it, not before, and
// without any real time passing.
TEST(ManualClock, AWaitEndsWhenTheClockPassesItsDeadline) {
  ManualClock clock;
  absl::Mutex mu;
  bool never = false;
  bool result = true;
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    result = clock.AwaitWithTimeout(mu, absl::Condition(&never), absl::Seconds(10));
  });
  ASSERT_TRUE(clock.AwaitWaiters(1));
  clock.Advance(absl::Seconds(9));
  // Still waiting: the deadline is a second away.
  ASSERT_TRUE(clock.AwaitWaiters(1));
  clock.Advance(absl::Seconds(1));
  waiter.join();
  EXPECT_FALSE(result);
}

TEST(ManualClock, AWaitEndsWhenItsConditionHolds) {
  ManualClock clock;
  absl::Mutex mu;
  bool ready = false;
  bool result = false;
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    result = clock.AwaitWithTimeout(mu, absl::Condition(&ready), absl::Hours(1));
  });
  ASSERT_TRUE(clock.AwaitWaiters(1));
  {
    absl::MutexLock lock(&mu);
    ready = true;
  }
  waiter.join();
  EXPECT_TRUE(result);
  EXPECT_TRUE(clock.AwaitWaiters(0));
}

TEST(ManualClock, SleepForReturnsOnceTheTimeHasPassed) {
  ManualClock clock;
  std::atomic<bool> woke{false};
  std::thread sleeper([&] {
    clock.SleepFor(absl::Milliseconds(200));
    woke = true;
  });
  ASSERT_TRUE(clock.AwaitWaiters(1));
  clock.Advance(absl::Milliseconds(199));
  ASSERT_TRUE(clock.AwaitWaiters(1));
  EXPECT_FALSE(woke);
  clock.Advance(absl::Milliseconds(1));
  sleeper.join();
  EXPECT_TRUE(woke);
}

// Once the clock passed a wait's deadline the wait is ending: AwaitWaiters
// does not count it, whether or not its thread has run yet, so a test that
// steps the clock cannot get ahead of the threads it woke.
TEST(ManualClock, AWaitWhoseDeadlinePassedNoLongerCounts) {
  ManualClock clock;
  absl::Mutex mu;
  bool never = false;
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    clock.AwaitWithTimeout(mu, absl::Condition(&never), absl::Seconds(1));
  });
  ASSERT_TRUE(clock.AwaitWaiters(1));
  clock.Advance(absl::Seconds(1));
  EXPECT_FALSE(clock.AwaitWaiters(1, absl::ZeroDuration()));
  waiter.join();
}

// An Advance that comes before the thread starts to wait is not lost.
TEST(ManualClock, AnAdvanceBeforeTheWaitIsNotLost) {
  ManualClock clock;
  absl::Mutex mu;
  bool never = false;
  const absl::Time deadline = clock.Now() + absl::Seconds(1);
  clock.Advance(absl::Seconds(2));
  absl::MutexLock lock(&mu);
  EXPECT_FALSE(clock.AwaitWithDeadline(mu, absl::Condition(&never), deadline));
}

TEST(RealClock, WaitsForItsDeadline) {
  Clock* clock = Clock::Real();
  absl::Mutex mu;
  bool never = false;
  const absl::Time start = clock->Now();
  absl::MutexLock lock(&mu);
  EXPECT_FALSE(clock->AwaitWithTimeout(mu, absl::Condition(&never), absl::Milliseconds(20)));
  EXPECT_GE(clock->Now() - start, absl::Milliseconds(20));
}

}  // namespace
}  // namespace partq
