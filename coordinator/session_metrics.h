// A Session's Prometheus metrics (a probe, architecture.md, Conventions: the session calls it,
// it owns the metric handles). Labels: queue only — never session ids; tell
// sessions apart by the scrape's `instance` label.
//
//   partq_parts_owned                 gauge      parts this session owns now
//   partq_rebalances_total            counter    rounds that changed this session's parts
//   partq_handoff_duration_seconds    histogram  part wanted -> acquired (see below)
//   partq_revoke_duration_seconds     histogram  drain (OnRevoke) + release of given-up parts
//   partq_heartbeat_failures_total    counter    heartbeats that failed (database errors)
//   partq_session_expirations_total   counter    other sessions this one expired
//   partq_sessions_lost_total         counter    times this session lost all its parts
//
// Hand-off duration: from the first rebalance round whose plan says this
// session should acquire a part to the round that acquires it. A free part is
// acquired in the same round (about zero); a part another session must release
// first takes as long as that session's drain and release plus the next round.
//
// Thread-safe (prometheus-cpp handles are atomic).
#ifndef PARTQ_COORDINATOR_SESSION_METRICS_H_
#define PARTQ_COORDINATOR_SESSION_METRICS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace partq {

class SessionMetrics {
 public:
  // Registers (or reuses) the families in `registry`, which must outlive this.
  SessionMetrics(prometheus::Registry& registry, const std::string& queue);
  SessionMetrics(const SessionMetrics&) = delete;
  SessionMetrics& operator=(const SessionMetrics&) = delete;

  // A process-wide instance on a private registry, for sessions built without
  // metrics: the session always has a probe to call, and nobody reads this one.
  static SessionMetrics& Discard();

  void SetPartsOwned(size_t n) { parts_owned_.Set(static_cast<double>(n)); }
  void Rebalanced() { rebalances_.Increment(); }
  void HandedOff(absl::Duration waited) { handoff_.Observe(absl::ToDoubleSeconds(waited)); }
  void Revoked(absl::Duration took) { revoke_.Observe(absl::ToDoubleSeconds(took)); }
  void HeartbeatFailed() { heartbeat_failures_.Increment(); }
  void Expired(int64_t sessions) { expirations_.Increment(static_cast<double>(sessions)); }
  void Lost() { lost_.Increment(); }

 private:
  prometheus::Gauge& parts_owned_;
  prometheus::Counter& rebalances_;
  prometheus::Histogram& handoff_;
  prometheus::Histogram& revoke_;
  prometheus::Counter& heartbeat_failures_;
  prometheus::Counter& expirations_;
  prometheus::Counter& lost_;
};

}  // namespace partq

#endif  // PARTQ_COORDINATOR_SESSION_METRICS_H_
