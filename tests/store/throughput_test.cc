// Rates from the per-minute counts the heartbeats report (store/throughput.h).
#include "store/throughput.h"

#include "gtest/gtest.h"

namespace partq {
namespace {

const absl::Time kMinute = absl::FromUnixSeconds(1'800'000'000 / 60 * 60);

TEST(ThroughputTest, TheCurrentMinuteCountsWholeAndThePreviousOneForItsShareOfTheWindow) {
  const std::vector<ThroughputMinute> minutes = {
      {kMinute - absl::Minutes(2), {6000, 600, 60}},  // outside the window
      {kMinute - absl::Minutes(1), {1200, 120, 12}},
      {kMinute, {300, 30, 3}},
  };
  // 15 s into the current minute: 45 s of the previous one are in the window.
  const FinishRates r = RatesOverLastMinute(minutes, kMinute + absl::Seconds(15));
  EXPECT_DOUBLE_EQ(r.acked, (300 + 1200 * 0.75) / 60);
  EXPECT_DOUBLE_EQ(r.retried, (30 + 120 * 0.75) / 60);
  EXPECT_DOUBLE_EQ(r.dead, (3 + 12 * 0.75) / 60);
  // At the minute's start the window is exactly the previous minute.
  EXPECT_DOUBLE_EQ(RatesOverLastMinute(minutes, kMinute).acked, (300 + 1200) / 60.0);
}

TEST(ThroughputTest, NothingReportedIsZeroAndOldMinutesDoNotCount) {
  EXPECT_EQ(RatesOverLastMinute({}, kMinute).acked, 0);
  const std::vector<ThroughputMinute> old = {{kMinute - absl::Minutes(5), {100, 1, 1}}};
  const FinishRates r = RatesOverLastMinute(old, kMinute + absl::Seconds(30));
  EXPECT_EQ(r.acked, 0);
  EXPECT_EQ(r.retried, 0);
  EXPECT_EQ(r.dead, 0);
}

TEST(ThroughputTest, LastMinutesFillsTheGapsWithZerosOldestFirst) {
  const std::vector<ThroughputMinute> minutes = {
      {kMinute - absl::Minutes(9), {1, 0, 0}},  // before the 4 minutes asked for
      {kMinute - absl::Minutes(2), {20, 2, 0}},
      {kMinute, {5, 0, 1}},
  };
  const std::vector<ThroughputMinute> last = LastMinutes(minutes, kMinute + absl::Seconds(59), 4);
  ASSERT_EQ(last.size(), 4u);
  EXPECT_EQ(last[0].minute, kMinute - absl::Minutes(3));
  EXPECT_EQ(last[3].minute, kMinute);
  EXPECT_EQ(last[0].counts, FinishCounts{});
  EXPECT_EQ(last[1].counts, (FinishCounts{20, 2, 0}));
  EXPECT_EQ(last[2].counts, FinishCounts{});
  EXPECT_EQ(last[3].counts, (FinishCounts{5, 0, 1}));
}

}  // namespace
}  // namespace partq
