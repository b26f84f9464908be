#include "consumer/failure_policy.h"

#include <cstdint>
#include <limits>
#include <random>

#include "absl/status/status.h"
#include "consumer/handler.h"
#include "gtest/gtest.h"

namespace partq {
namespace {

// A generator that always returns the same bits: 0 draws the bottom of a
// uniform range, 2^63 its middle.
class FixedBits {
 public:
  using result_type = uint64_t;
  explicit FixedBits(uint64_t bits) : bits_(bits) {}
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return std::numeric_limits<uint64_t>::max(); }
  result_type operator()() { return bits_; }

 private:
  uint64_t bits_;
};

Item ItemAt(int attempts) {
  Item i;
  i.id = 42;
  i.part = 3;
  i.attempts = attempts;
  return i;
}

TEST(RetryDelay, DoublesFromBaseUpToMax) {
  BackoffPolicy p;
  p.base = absl::Seconds(1);
  p.max = absl::Seconds(30);
  p.jitter = 0;
  FixedBits gen(0);
  EXPECT_EQ(RetryDelay(p, 1, gen), absl::Seconds(1));
  EXPECT_EQ(RetryDelay(p, 2, gen), absl::Seconds(2));
  EXPECT_EQ(RetryDelay(p, 3, gen), absl::Seconds(4));
  EXPECT_EQ(RetryDelay(p, 5, gen), absl::Seconds(16));
  EXPECT_EQ(RetryDelay(p, 6, gen), absl::Seconds(30));
  EXPECT_EQ(RetryDelay(p, 1000, gen), absl::Seconds(30));
}

// Base 4 s, the default cap, +-25 %.
constexpr BackoffPolicy kJittered{absl::Seconds(4), absl::Minutes(10), 0.25};

TEST(RetryDelay, JitterScalesByAFactorFromTheInjectedGenerator) {
  BackoffPolicy p = kJittered;
  FixedBits lowest(0);
  EXPECT_EQ(RetryDelay(p, 1, lowest), absl::Seconds(3));
  FixedBits middle(uint64_t{1} << 63);
  EXPECT_EQ(RetryDelay(p, 1, middle), absl::Seconds(4));
  // The cap applies before the jitter.
  p.max = absl::Seconds(8);
  EXPECT_EQ(RetryDelay(p, 30, middle), absl::Seconds(8));
  EXPECT_EQ(RetryDelay(p, 30, lowest), absl::Seconds(6));
}

TEST(RetryDelay, JitterStaysWithinItsBandAndSpreads) {
  const BackoffPolicy p = kJittered;
  std::mt19937_64 gen(20240611);  // seeded: the same draws every run
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

TEST(FailurePolicy, RetriesAfterTheBackoffWhileAttemptsRemainThenDeadLetters) {
  BackoffPolicy b;
  b.base = absl::Seconds(1);
  b.jitter = 0;
  const FailurePolicy policy(b, /*max_attempts=*/3);
  FixedBits gen(0);
  const Outcome first = policy.Failed(ItemAt(1), absl::InternalError("boom"), gen);
  EXPECT_EQ(first.kind, Outcome::Kind::kRetry);
  EXPECT_EQ(first.id, 42);
  EXPECT_EQ(first.part, 3);
  EXPECT_EQ(first.error, "boom");
  EXPECT_EQ(first.retry_delay, absl::Seconds(1));
  EXPECT_FALSE(first.refund_attempt);
  const Outcome second = policy.Failed(ItemAt(2), absl::InternalError("boom"), gen);
  EXPECT_EQ(second.kind, Outcome::Kind::kRetry);
  EXPECT_EQ(second.retry_delay, absl::Seconds(2));
  const Outcome last = policy.Failed(ItemAt(3), absl::InternalError("boom again"), gen);
  EXPECT_EQ(last.kind, Outcome::Kind::kDead);
  EXPECT_EQ(last.error, "boom again") << "the last error is kept";
}

TEST(FailurePolicy, RetryJitterComesFromTheCallersGenerator) {
  const FailurePolicy policy(kJittered, 5);
  FixedBits lowest(0);
  EXPECT_EQ(policy.Failed(ItemAt(1), absl::InternalError("x"), lowest).retry_delay,
            absl::Seconds(3));
}

TEST(FailurePolicy, RetryInReplacesTheBackoffButTheAttemptCounts) {
  const FailurePolicy policy(kJittered, /*max_attempts=*/3);
  FixedBits gen(0);
  const Outcome o =
      policy.Failed(ItemAt(1), RetryIn(absl::InternalError("later"), absl::Seconds(30)), gen);
  EXPECT_EQ(o.kind, Outcome::Kind::kRetry);
  EXPECT_EQ(o.retry_delay, absl::Seconds(30)) << "no jitter either";
  EXPECT_FALSE(o.refund_attempt);
  EXPECT_EQ(o.error, "later");
  EXPECT_EQ(policy.Failed(ItemAt(1), RetryIn(absl::InternalError("now"), -absl::Seconds(1)), gen)
                .retry_delay,
            absl::ZeroDuration());
  const Outcome last =
      policy.Failed(ItemAt(3), RetryIn(absl::InternalError("later"), absl::Seconds(30)), gen);
  EXPECT_EQ(last.kind, Outcome::Kind::kDead) << "past max_attempts as usual";
}

TEST(FailurePolicy, DeadNowDeadLettersWhateverAttemptsRemain) {
  const FailurePolicy policy(kJittered, /*max_attempts=*/10);
  FixedBits gen(0);
  const Outcome o = policy.Failed(
      ItemAt(1), DeadNow(RetryIn(absl::InvalidArgumentError("bad payload"), absl::Seconds(5))),
      gen);
  EXPECT_EQ(o.kind, Outcome::Kind::kDead) << "dead wins over retry_in";
  EXPECT_EQ(o.error, "bad payload");
  EXPECT_FALSE(o.refund_attempt);
}

TEST(FailurePolicy, AThrottledItemIsRetriedWithItsAttemptGivenBackEvenOnItsLast) {
  const FailurePolicy policy(kJittered, /*max_attempts=*/3);
  FixedBits gen(0);
  for (int attempts : {1, 3, 7}) {
    const Outcome o = policy.Failed(
        ItemAt(attempts), Throttled(absl::UnavailableError("429"), absl::Seconds(12)), gen);
    EXPECT_EQ(o.kind, Outcome::Kind::kRetry) << attempts;
    EXPECT_TRUE(o.refund_attempt) << attempts;
    EXPECT_EQ(o.retry_delay, absl::Seconds(12)) << attempts;
    EXPECT_EQ(o.error, "429");
  }
}

TEST(FailurePolicy, AnItemClaimedMoreThanMaxAttemptsTimesIsACrashLoop) {
  const FailurePolicy policy(BackoffPolicy{}, /*max_attempts=*/3);
  EXPECT_FALSE(policy.CrashLoop(ItemAt(1)).has_value());
  EXPECT_FALSE(policy.CrashLoop(ItemAt(3)).has_value()) << "its last attempt still runs";
  std::optional<Outcome> dead = policy.CrashLoop(ItemAt(4));
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->kind, Outcome::Kind::kDead);
  EXPECT_EQ(dead->id, 42);
  EXPECT_EQ(dead->part, 3);
  EXPECT_EQ(dead->error,
            "gave up after 3 attempts: the worker processing it died or lost its session each "
            "time (crash loop)");
  EXPECT_TRUE(dead->refund_attempt) << "its dead row says the 3 attempts, as the error does";
}

}  // namespace
}  // namespace partq
