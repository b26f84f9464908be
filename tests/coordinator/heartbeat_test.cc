// coordinator/heartbeat.h alone, on a ManualClock: when heartbeats are due,
// how a failure moves them, and when the session counts as expired.
#include "coordinator/heartbeat.h"

#include <algorithm>

#include "base/clock.h"
#include "gtest/gtest.h"

namespace partq {
namespace {

constexpr absl::Duration kInterval = absl::Seconds(1);
constexpr absl::Duration kTtl = absl::Seconds(10);

TEST(HeartbeatTimer, FirstHeartbeatIsDueAnIntervalAfterTheJoin) {
  ManualClock clock;
  const absl::Time joined = clock.Now();
  HeartbeatTimer hb(&clock, kInterval, kTtl);
  EXPECT_EQ(hb.next(), joined + kInterval);
  EXPECT_FALSE(hb.Due(joined + kInterval - absl::Nanoseconds(1)));
  EXPECT_TRUE(hb.Due(joined + kInterval));
}

// The next heartbeat counts from the start of the round that sent one, so a
// slow round does not stretch the cadence.
TEST(HeartbeatTimer, NextIsAnIntervalAfterTheRoundThatSentOne) {
  ManualClock clock;
  HeartbeatTimer hb(&clock, kInterval, kTtl);
  clock.Advance(kInterval);
  const absl::Time round = clock.Now();
  clock.Advance(absl::Milliseconds(300));  // the round took this long
  hb.Sent(round);
  EXPECT_EQ(hb.next(), round + kInterval);
}

// Aligned (sessions sharing a transaction, heartbeat_hub.h): timers of one
// interval started at different moments come due at the same grid points,
// never later than an interval after their last heartbeat.
TEST(HeartbeatTimer, AlignedTimersOfOneIntervalAreDueTogetherAndNeverLater) {
  ManualClock clock;
  const absl::Duration interval = absl::Milliseconds(3333);
  clock.Advance(absl::Milliseconds(1234));
  HeartbeatTimer a(&clock, interval, kTtl, /*aligned=*/true);
  const absl::Time a_start = clock.Now();
  clock.Advance(absl::Milliseconds(2100));
  HeartbeatTimer b(&clock, interval, kTtl, /*aligned=*/true);
  const absl::Time b_start = clock.Now();
  EXPECT_LE(a.next(), a_start + interval);
  EXPECT_LE(b.next(), b_start + interval);
  EXPECT_GT(a.next(), a_start);
  EXPECT_GT(b.next(), b_start);
  for (int round = 0; round < 5; ++round) {
    const absl::Time due = std::max(a.next(), b.next());
    clock.Advance(due - clock.Now());
    const absl::Time now = clock.Now();
    a.Sent(now);
    b.Sent(now);
    EXPECT_EQ(a.next(), b.next()) << "round " << round;
    EXPECT_LE(a.next(), now + interval);
    EXPECT_GT(a.next(), now);
    EXPECT_EQ((a.next() - absl::UnixEpoch()) % interval, absl::ZeroDuration());
  }
}

// A failed heartbeat goes with the retry, not at once: its due time is past,
// and a loop that kept it spun on a database that refused every call.
TEST(HeartbeatTimer, AFailedHeartbeatGoesWithTheRetry) {
  ManualClock clock;
  HeartbeatTimer hb(&clock, kInterval, kTtl);
  clock.Advance(kInterval);
  ASSERT_TRUE(hb.Due(clock.Now()));
  const absl::Time retry = clock.Now() + absl::Milliseconds(200);
  hb.Retry(retry, /*heartbeat=*/true);
  EXPECT_EQ(hb.next(), retry);
  EXPECT_FALSE(hb.Due(clock.Now()));
}

// A round without a heartbeat that fails brings a later heartbeat forward to
// the retry, and never pushes an earlier one back.
TEST(HeartbeatTimer, AFailedRoundTakesTheHeartbeatWithItsRetryAtTheLatest) {
  ManualClock clock;
  HeartbeatTimer hb(&clock, kInterval, kTtl);
  const absl::Time due = hb.next();
  hb.Retry(clock.Now() + absl::Milliseconds(200), /*heartbeat=*/false);
  EXPECT_EQ(hb.next(), clock.Now() + absl::Milliseconds(200));
  hb.Sent(clock.Now());
  hb.Retry(due + absl::Seconds(5), /*heartbeat=*/false);
  EXPECT_EQ(hb.next(), due);
}

TEST(HeartbeatTimer, ExpiresOnlyAfterATtlWithoutBeingSeenAlive) {
  ManualClock clock;
  HeartbeatTimer hb(&clock, kInterval, kTtl);
  clock.Advance(kTtl);
  EXPECT_FALSE(hb.Expired()) << "expired at the TTL, not after it";
  clock.Advance(absl::Nanoseconds(1));
  EXPECT_TRUE(hb.Expired());
  hb.Alive();
  EXPECT_FALSE(hb.Expired());
  EXPECT_EQ(hb.last_alive(), clock.Now());
}

// The keepalive that heartbeats during a revoke reports when it last saw the
// row alive; an older report (or none: InfinitePast) changes nothing.
TEST(HeartbeatTimer, AKeepaliveReportCountsOnlyIfItIsNewer) {
  ManualClock clock;
  HeartbeatTimer hb(&clock, kInterval, kTtl);
  const absl::Time joined = clock.Now();
  clock.Advance(absl::Seconds(4));
  hb.AliveAt(absl::InfinitePast());
  EXPECT_EQ(hb.last_alive(), joined);
  hb.AliveAt(joined + absl::Seconds(3));
  EXPECT_EQ(hb.last_alive(), joined + absl::Seconds(3));
  hb.AliveAt(joined + absl::Seconds(1));
  EXPECT_EQ(hb.last_alive(), joined + absl::Seconds(3));
  clock.Advance(absl::Seconds(9));  // 10 s after the keepalive's heartbeat
  EXPECT_FALSE(hb.Expired());
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(hb.Expired());
}

}  // namespace
}  // namespace partq
