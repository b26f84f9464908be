#include "consumer/backoff.h"

#include "absl/random/random.h"
#include "gtest/gtest.h"

namespace partq {
namespace {

TEST(RetryDelay, DoublesFromBaseUpToMax) {
  BackoffPolicy p;
  p.base = absl::Seconds(1);
  p.max = absl::Seconds(30);
  p.jitter = 0;
  absl::BitGen gen;
  EXPECT_EQ(RetryDelay(p, 1, gen), absl::Seconds(1));
  EXPECT_EQ(RetryDelay(p, 2, gen), absl::Seconds(2));
  EXPECT_EQ(RetryDelay(p, 3, gen), absl::Seconds(4));
  EXPECT_EQ(RetryDelay(p, 5, gen), absl::Seconds(16));
  EXPECT_EQ(RetryDelay(p, 6, gen), absl::Seconds(30));
  EXPECT_EQ(RetryDelay(p, 1000, gen), absl::Seconds(30));
}

TEST(RetryDelay, JitterStaysWithinItsBandAndSpreads) {
  BackoffPolicy p;
  p.base = absl::Seconds(4);
  p.jitter = 0.25;
  absl::BitGen gen;
  absl::Duration lo = absl::InfiniteDuration(), hi = absl::ZeroDuration();
  for (int i = 0; i < 2000; ++i) {
    absl::Duration d = RetryDelay(p, 1, gen);
    ASSERT_GE(d, absl::Seconds(3));
    ASSERT_LE(d, absl::Seconds(5));
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  EXPECT_LT(lo, absl::Milliseconds(3200));  // spread, not lockstep
  EXPECT_GT(hi, absl::Milliseconds(4800));
}

}  // namespace
}  // namespace partq
