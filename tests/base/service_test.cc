#include "base/service.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace partq {
namespace {

using State = StartStop::State;

TEST(StartStop, StartsOnceAndStopsOnce) {
  StartStop s;
  ASSERT_TRUE(s.BeginStart("svc").ok());
  EXPECT_EQ(s.state(), State::kStarting);
  s.EndStart(true);
  EXPECT_TRUE(s.running());
  const absl::Status again = s.BeginStart("svc");
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(again.message(), "svc already started");
  EXPECT_TRUE(s.running()) << "a refused Start changes nothing";
  ASSERT_TRUE(s.BeginStop());
  EXPECT_EQ(s.state(), State::kStopping);
  s.EndStop();
  EXPECT_EQ(s.state(), State::kStopped);
  EXPECT_FALSE(s.BeginStop()) << "a second Stop has nothing to do";
  const absl::Status after = s.BeginStart("svc");
  EXPECT_EQ(after.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(after.message(), "svc was stopped; make a new one");
}

TEST(StartStop, StopBeforeStartStopsItForGood) {
  StartStop s;
  EXPECT_FALSE(s.BeginStop());
  EXPECT_EQ(s.state(), State::kStopped);
  EXPECT_EQ(s.BeginStart("svc").code(), absl::StatusCode::kFailedPrecondition);
}

TEST(StartStop, AFailedStartLeavesItNewToTryAgain) {
  StartStop s;
  ASSERT_TRUE(s.BeginStart("svc").ok());
  s.EndStart(false);
  EXPECT_EQ(s.state(), State::kNew);
  ASSERT_TRUE(s.BeginStart("svc").ok());
  s.EndStart(true);
  EXPECT_TRUE(s.running());
}

// Of two Stops at once, one stops the service; the other returns only once
// it has stopped. The main thread holds the first Stop open until the other
// thread is calling the second and has had time to return if it would.
TEST(StartStop, ASecondStopReturnsOnlyOnceTheFirstHasStopped) {
  StartStop s;
  ASSERT_TRUE(s.BeginStart("svc").ok());
  s.EndStart(true);
  ASSERT_TRUE(s.BeginStop());
  absl::Notification calling, returned;
  bool second = true;
  State seen = State::kNew;
  std::thread other([&] {
    calling.Notify();
    second = s.BeginStop();
    seen = s.state();
    returned.Notify();
  });
  calling.WaitForNotification();
  EXPECT_FALSE(returned.WaitForNotificationWithTimeout(absl::Milliseconds(200)))
      << "the second Stop returned while the first was still stopping";
  s.EndStop();
  other.join();
  EXPECT_FALSE(second);
  EXPECT_EQ(seen, State::kStopped);
}

// A Stop during a Start waits for it, then stops what it started.
TEST(StartStop, AStopDuringAStartStopsWhatItStarted) {
  StartStop s;
  ASSERT_TRUE(s.BeginStart("svc").ok());
  absl::Notification calling, returned;
  bool stops = false;
  std::thread other([&] {
    calling.Notify();
    stops = s.BeginStop();
    if (stops) s.EndStop();
    returned.Notify();
  });
  calling.WaitForNotification();
  EXPECT_FALSE(returned.WaitForNotificationWithTimeout(absl::Milliseconds(200)))
      << "the Stop returned while the Start was under way";
  s.EndStart(true);
  returned.WaitForNotification();
  other.join();
  EXPECT_TRUE(stops);
  EXPECT_EQ(s.state(), State::kStopped);
}

}  // namespace
}  // namespace partq
