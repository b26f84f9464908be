#include "coordinator/heartbeat.h"

#include <algorithm>

namespace partq {

HeartbeatTimer::HeartbeatTimer(Clock* clock, absl::Duration interval, absl::Duration ttl)
    : clock_(clock), interval_(interval), ttl_(ttl) {
  const absl::Time now = clock_->Now();
  next_ = now + interval_;
  last_alive_ = now;
}

void HeartbeatTimer::Retry(absl::Time retry, bool heartbeat) {
  next_ = heartbeat ? retry : std::min(next_, retry);
}

// A keepalive's report may come after a newer one of the session thread.
void HeartbeatTimer::AliveAt(absl::Time t) { last_alive_ = std::max(last_alive_, t); }

}  // namespace partq
