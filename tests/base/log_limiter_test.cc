// LogLimiter on a ManualClock: the budget per window, the count of what it
// dropped handed over with the next line it admits, and at the end.
#include "base/log_limiter.h"

#include <gtest/gtest.h>

#include "base/clock.h"

namespace partq {
namespace {

TEST(LogLimiterTest, AdmitsTheBudgetPerWindowAndCountsWhatItDrops) {
  ManualClock clock;
  LogLimiter limiter(3, 1000, absl::Seconds(10), &clock);
  for (int i = 0; i < 3; ++i) {
    const LogLimiter::Verdict v = limiter.Admit(10);
    EXPECT_TRUE(v.log) << i;
    EXPECT_FALSE(v.dropped.any());
  }
  clock.Advance(absl::Seconds(1));
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(limiter.Admit(20).log) << i;
  clock.Advance(absl::Seconds(9));  // the window of the first line is over
  const LogLimiter::Verdict v = limiter.Admit(10);
  EXPECT_TRUE(v.log);
  EXPECT_EQ(v.dropped.lines, 5);
  EXPECT_EQ(v.dropped.bytes, 100);
  EXPECT_EQ(v.dropped.over, absl::Seconds(9));
  EXPECT_EQ(v.dropped.Describe(), "5 lines (100 bytes) not logged over the last 9s");
  EXPECT_FALSE(limiter.TakeDropped().any()) << "handed over once";
}

TEST(LogLimiterTest, SaysWhenTheDroppedLinesAreDueAndHandsThemOverThenOnce) {
  ManualClock clock;
  LogLimiter limiter(1, 1000, absl::Seconds(10), &clock);
  const absl::Time t0 = clock.Now();
  EXPECT_EQ(limiter.DroppedDueAt(), absl::InfiniteFuture()) << "nothing dropped";
  EXPECT_TRUE(limiter.Admit(1).log);
  clock.Advance(absl::Seconds(2));
  const LogLimiter::Verdict first = limiter.Admit(1);
  EXPECT_FALSE(first.log);
  EXPECT_TRUE(first.first_dropped);
  EXPECT_FALSE(limiter.Admit(1).first_dropped);
  EXPECT_EQ(limiter.DroppedDueAt(), t0 + absl::Seconds(10));
  EXPECT_FALSE(limiter.TakeDroppedIfDue().any()) << "the window has not ended";
  clock.Advance(absl::Seconds(8));
  const LogLimiter::Dropped due = limiter.TakeDroppedIfDue();
  EXPECT_EQ(due.lines, 2);
  EXPECT_EQ(due.over, absl::Seconds(8));
  EXPECT_FALSE(limiter.TakeDroppedIfDue().any());
  EXPECT_EQ(limiter.DroppedDueAt(), absl::InfiniteFuture());
}

TEST(LogLimiterTest, BytesCountAsWellAsLines) {
  ManualClock clock;
  LogLimiter limiter(100, 1000, absl::Seconds(1), &clock);
  EXPECT_TRUE(limiter.Admit(5000).log) << "a window's first line, whatever its size";
  EXPECT_FALSE(limiter.Admit(1).log);
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(limiter.Admit(600).log);
  EXPECT_FALSE(limiter.Admit(600).log);
  const LogLimiter::Verdict fits = limiter.Admit(400);
  EXPECT_TRUE(fits.log) << "what fits still fits";
  EXPECT_EQ(fits.dropped.lines, 1);
  EXPECT_EQ(fits.dropped.bytes, 600);
  EXPECT_FALSE(limiter.Admit(1).log);
  const LogLimiter::Dropped end = limiter.TakeDropped();
  EXPECT_EQ(end.lines, 1);
  EXPECT_EQ(end.bytes, 1);
}

}  // namespace
}  // namespace partq
