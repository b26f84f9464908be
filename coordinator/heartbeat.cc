#include "coordinator/heartbeat.h"

#include <algorithm>

namespace partq {

HeartbeatTimer::HeartbeatTimer(Clock* clock, absl::Duration interval, absl::Duration ttl,
                               bool aligned)
    : clock_(clock), interval_(interval), aligned_(aligned), ttl_(ttl) {
  const absl::Time now = clock_->Now();
  next_ = After(now);
  last_alive_ = now;
}

absl::Time HeartbeatTimer::After(absl::Time t) const {
  const absl::Time unaligned = t + interval_;
  if (!aligned_) return unaligned;
  return absl::UnixEpoch() + absl::Floor(unaligned - absl::UnixEpoch(), interval_);
}

void HeartbeatTimer::Retry(absl::Time retry, bool heartbeat) {
  next_ = heartbeat ? retry : std::min(next_, retry);
}

// A keepalive's report may come after a newer one of the session thread.
void HeartbeatTimer::AliveAt(absl::Time t) { last_alive_ = std::max(last_alive_, t); }

}  // namespace partq
