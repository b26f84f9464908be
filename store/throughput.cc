#include "store/throughput.h"

#include <algorithm>

namespace partq {
namespace {

absl::Time MinuteOf(absl::Time t) {
  return absl::UnixEpoch() + absl::Floor(t - absl::UnixEpoch(), absl::Minutes(1));
}

}  // namespace

FinishRates RatesOverLastMinute(const std::vector<ThroughputMinute>& minutes, absl::Time now) {
  const absl::Time current = MinuteOf(now);
  const absl::Time previous = current - absl::Minutes(1);
  // The share of the previous minute still inside the window [now - 60 s, now].
  const double share = 1.0 - std::clamp(absl::ToDoubleSeconds(now - current) / 60.0, 0.0, 1.0);
  FinishRates r;
  for (const ThroughputMinute& m : minutes) {
    double weight = 0;
    if (m.minute == current) {
      weight = 1;
    } else if (m.minute == previous) {
      weight = share;
    }
    r.acked += weight * static_cast<double>(m.counts.acked);
    r.retried += weight * static_cast<double>(m.counts.retried);
    r.dead += weight * static_cast<double>(m.counts.dead);
  }
  r.acked /= 60;
  r.retried /= 60;
  r.dead /= 60;
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
