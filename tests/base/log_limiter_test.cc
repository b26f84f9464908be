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
