// Rates from the per-minute counts the heartbeats report (store/throughput.h),
// over sessions simulated as PgStore records them.
#include "store/throughput.h"

#include <algorithm>
#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace partq {
namespace {

const absl::Time kMinute = absl::FromUnixSeconds(1'800'000'000 / 60 * 60);

// A session as PgStore records it: started at `start`, heartbeating every
// `interval`, last at `last`; each heartbeat adds what its worker finished
// since the one before (whole items, `rate` a second until `stop`) to the
// row of the heartbeat's minute.
struct Simulated {
  absl::Time start, last;
  absl::Duration interval;
  double rate = 0;
  absl::Time stop = absl::InfiniteFuture();  // the work stops here
  bool live = true;

  double FinishedBy(absl::Time t) const {
    return rate * absl::ToDoubleSeconds(std::min(t, stop) - std::min(start, stop));
  }
  SessionInfo Info(absl::Time now) const {
    SessionInfo s;
    s.since_heartbeat = now - last;
    s.since_start = now - start;
    s.expires_in = live ? absl::Seconds(10) : -absl::Seconds(1);
    std::map<absl::Time, FinishCounts> rows;
    std::vector<absl::Time> beats;
    for (absl::Time t = last; t > start; t -= interval) beats.insert(beats.begin(), t);
    int64_t sent = 0;
    for (const absl::Time t : beats) {
      const int64_t done = static_cast<int64_t>(FinishedBy(t));
      if (done == sent) continue;  // a heartbeat with nothing new writes no row
      const absl::Time minute =
          absl::UnixEpoch() + absl::Floor(t - absl::UnixEpoch(), absl::Minutes(1));
      rows[minute].acked += done - sent;
      sent = done;
    }
    for (const auto& [minute, counts] : rows) s.throughput.push_back({minute, counts});
    return s;
  }
};

QueueStatus StatusOf(const std::vector<Simulated>& sessions, absl::Time now) {
  QueueStatus st;
  st.db_now = now;
  for (const Simulated& s : sessions) st.sessions.push_back(s.Info(now));
  return st;
}

// At a steady rate the rate is that rate, whatever the interval (one that
// divides a minute or not, one longer than a minute) and wherever the
// minutes fall between the heartbeats; the status read comes up to a
// heartbeat after the last one.
TEST(ThroughputTest, AtASteadyRateTheRateIsThatRate) {
  for (const absl::Duration interval :
       {absl::Milliseconds(1333), absl::Milliseconds(3333), absl::Seconds(7), absl::Seconds(10),
        absl::Seconds(45), absl::Minutes(20)}) {
    for (int phase = 0; phase < 60; phase += 7) {
      Simulated s;
      s.start = kMinute - absl::Hours(2) + absl::Seconds(phase) + absl::Milliseconds(phase * 13);
      s.interval = interval;
      s.rate = 167;
      s.last = s.start + interval * ((absl::Hours(2) + absl::Minutes(1)) / interval);
      for (const absl::Duration after : {absl::ZeroDuration(), interval / 2}) {
        const FinishRates r = RecentRates(StatusOf({s}, s.last + after), interval);
        EXPECT_NEAR(r.acked, 167, 167 * 0.01)
            << "interval " << interval << ", phase " << phase << ", read " << after << " late";
      }
    }
  }
}

// After the work stops the rate falls, and is 0 once the window has left the
// minute the work stopped in (whose row covers every heartbeat of it, those
// after the stop too): within two minutes and a heartbeat.
TEST(ThroughputTest, AfterTheWorkStopsTheRateFallsToZeroInAMinuteAndAHeartbeat) {
  const absl::Duration interval = absl::Seconds(10);
  Simulated s;
  s.start = kMinute - absl::Minutes(10);
  s.interval = interval;
  s.rate = 167;
  s.stop = kMinute + absl::Seconds(24);
  s.last = kMinute + absl::Seconds(50);  // 26 s after the stop: 34 s of the minute were busy
  EXPECT_LT(RecentRates(StatusOf({s}, s.last), interval).acked, 167);
  EXPECT_GT(RecentRates(StatusOf({s}, s.last), interval).acked, 167.0 * 34 / 60 * 0.9);
  double before = 167;
  for (s.last = s.stop; s.last < s.stop + absl::Minutes(4); s.last += interval) {
    const double r = RecentRates(StatusOf({s}, s.last), interval).acked;
    EXPECT_LE(r, before * 1.001) << s.last - s.stop;
    if (s.last >= s.stop + absl::Minutes(2) + interval) EXPECT_EQ(r, 0) << s.last - s.stop;
    before = r;
  }
}

// Each live session counts over its own window; one that started less than
// a window ago over its time so far; expired ones and ones that have not
// heartbeated since they started count 0.
TEST(ThroughputTest, LiveSessionsAddUpAndExpiredOnesCountNothing) {
  const absl::Duration interval = absl::Seconds(3);
  const absl::Time now = kMinute + absl::Seconds(17);
  Simulated a{kMinute - absl::Minutes(5), now - absl::Seconds(1), interval, 100};
  Simulated young{now - absl::Seconds(20) - absl::Milliseconds(500), now - absl::Milliseconds(500),
                  interval, 40};
  Simulated dead{kMinute - absl::Minutes(5), now - absl::Seconds(2), interval, 1000};
  dead.live = false;
  Simulated fresh{now - absl::Seconds(1), now - absl::Seconds(1), interval, 1000};
  const FinishRates r = RecentRates(StatusOf({a, young, dead, fresh}, now), interval);
  EXPECT_NEAR(r.acked, 140, 140 * 0.02);
  EXPECT_EQ(RecentRates(StatusOf({dead}, now), interval).acked, 0) << "no live worker";
  EXPECT_EQ(RecentRates(QueueStatus{}, interval).acked, 0);
}

// Failed and dead-lettered counts go the same way as acked ones.
TEST(ThroughputTest, RetriedAndDeadAreRatesToo) {
  SessionInfo s;
  s.since_heartbeat = absl::ZeroDuration();
  s.since_start = absl::Minutes(10);
  s.expires_in = absl::Seconds(10);
  // Heartbeats every 10 s, the last at kMinute + 60 s - 10 s: the minute's
  // row covers kMinute - 10 s .. kMinute + 50 s, exactly the window.
  s.throughput = {{kMinute - absl::Minutes(1), {999, 999, 999}}, {kMinute, {600, 60, 6}}};
  QueueStatus st;
  st.db_now = kMinute + absl::Seconds(50);
  st.sessions = {s};
  const FinishRates r = RecentRates(st, absl::Seconds(10));
  EXPECT_DOUBLE_EQ(r.acked, 10);
  EXPECT_DOUBLE_EQ(r.retried, 1);
  EXPECT_DOUBLE_EQ(r.dead, 0.1);
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
