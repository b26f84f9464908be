#include "store/throughput.h"

#include <algorithm>
#include <utility>

namespace partq {
namespace {

absl::Time MinuteOf(absl::Time t) {
  return absl::UnixEpoch() + absl::Floor(t - absl::UnixEpoch(), absl::Minutes(1));
}

}  // namespace

namespace {

// The span the row of `minute` covers for a session that heartbeats every
// `interval`, last at `last`, started at `start`: from the heartbeat before
// the minute's first one to the minute's last. A row with no heartbeat of
// that cadence in its minute (one sent off it: a retry, a leaving session's
// last) covers its minute up to `last`.
std::pair<absl::Time, absl::Time> Covered(absl::Time minute, absl::Time last, absl::Time start,
                                          absl::Duration interval) {
  const absl::Time end = minute + absl::Minutes(1);
  // Heartbeats at last - k * interval, k >= 0: the minute's last is the
  // first k with a time before `end`, its first the last k not before `minute`.
  absl::Duration rest;
  const int64_t k_last = last < end ? 0 : absl::IDivDuration(last - end, interval, &rest) + 1;
  const int64_t k_first = last < minute ? -1 : absl::IDivDuration(last - minute, interval, &rest);
  if (k_first < k_last) return {std::max(minute, start), std::min(end, last)};
  return {std::max(last - (k_first + 1) * interval, start), last - k_last * interval};
}

}  // namespace

FinishRates RecentRates(const QueueStatus& status, absl::Duration interval,
                        absl::Duration window) {
  FinishRates r;
  if (interval <= absl::ZeroDuration() || window <= absl::ZeroDuration()) return r;
  for (const SessionInfo& s : status.sessions) {
    if (!SessionLive(s.expires_in)) continue;
    const absl::Time last = status.db_now - s.since_heartbeat;
    // A first heartbeat covers an interval at least: one soon after a join
    // (a session that joined again, its worker's counts going on) must not
    // make its counts a burst.
    const absl::Time start = std::min(status.db_now - s.since_start, last - interval);
    const absl::Time from = std::max(last - window, start);
    FinishRates mine;
    for (const ThroughputMinute& m : s.throughput) {
      const auto [lo, hi] = Covered(m.minute, last, start, interval);
      const absl::Duration inside = std::min(hi, last) - std::max(lo, from);
      if (inside <= absl::ZeroDuration()) continue;
      const double share = hi > lo ? std::min(1.0, absl::FDivDuration(inside, hi - lo)) : 1.0;
      mine.acked += share * static_cast<double>(m.counts.acked);
      mine.retried += share * static_cast<double>(m.counts.retried);
      mine.dead += share * static_cast<double>(m.counts.dead);
    }
    const double seconds = absl::ToDoubleSeconds(last - from);
    r.acked += mine.acked / seconds;
    r.retried += mine.retried / seconds;
    r.dead += mine.dead / seconds;
  }
  return r;
}

FinishCounts Total(const std::vector<ThroughputMinute>& minutes) {
  FinishCounts sum;
  for (const ThroughputMinute& m : minutes) sum = sum + m.counts;
  return sum;
}

std::vector<ThroughputMinute> LastMinutes(const std::vector<ThroughputMinute>& minutes,
                                          absl::Time now, int n) {
  const absl::Time current = MinuteOf(now);
  std::vector<ThroughputMinute> out(std::max(n, 0));
  for (int i = 0; i < n; ++i) out[i].minute = current - absl::Minutes(n - 1 - i);
  for (const ThroughputMinute& m : minutes) {
    const int64_t back = (current - m.minute) / absl::Minutes(1);
    if (m.minute > current || back >= n) continue;
    out[n - 1 - back].counts = out[n - 1 - back].counts + m.counts;
  }
  return out;
}

}  // namespace partq
