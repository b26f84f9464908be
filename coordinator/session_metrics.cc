#include "coordinator/session_metrics.h"

namespace partq {
namespace {

prometheus::Counter& Counter(prometheus::Registry& r, const std::string& name,
                             const std::string& help, const std::string& queue) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({{"queue", queue}});
}

// Hand-offs range from "free part, same round" (milliseconds) to a drain that
// waits for the slowest handler (the drain timeout, 10 s by default, or more).
prometheus::Histogram::BucketBoundaries HandoffBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}

prometheus::Histogram& Histogram(prometheus::Registry& r, const std::string& name,
                                 const std::string& help, const std::string& queue) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add({{"queue", queue}},
                                                                            HandoffBuckets());
}

}  // namespace

SessionMetrics::SessionMetrics(prometheus::Registry& r, const std::string& queue)
    : parts_owned_(prometheus::BuildGauge()
                       .Name("partq_parts_owned")
                       .Help("Parts this worker's session owns now (one series per worker: "
                             "tell them apart by the instance label).")
                       .Register(r)
                       .Add({{"queue", queue}})),
      rebalances_(Counter(r, "partq_rebalances_total",
                          "Rebalance rounds in which this session acquired or released parts.",
                          queue)),
      handoff_(Histogram(r, "partq_handoff_duration_seconds",
                         "Time from the first rebalance round that wanted a part for this "
                         "session to the round that acquired it (about zero for a free part; "
                         "a part held by another session waits for its drain and release).",
                         queue)),
      revoke_(Histogram(r, "partq_revoke_duration_seconds",
                        "Time this session took to give parts up: draining their in-flight "
                        "items and releasing them.",
                        queue)),
      heartbeat_failures_(Counter(r, "partq_heartbeat_failures_total",
                                  "Heartbeats that failed (database unreachable or erroring).",
                                  queue)),
      expirations_(Counter(r, "partq_session_expirations_total",
                           "Sessions of the queue this worker's heartbeats found expired and "
                           "deleted (each expiry is counted once, by the session that did it).",
                           queue)),
      lost_(Counter(r, "partq_sessions_lost_total",
                    "Times this worker's session lost all its parts without revoking them "
                    "(it expired, or heartbeats failed for a whole TTL) and re-joined.",
                    queue)) {}

SessionMetrics& SessionMetrics::Discard() {
  static prometheus::Registry* registry = new prometheus::Registry();
  static SessionMetrics* metrics = new SessionMetrics(*registry, "");
  return *metrics;
}

}  // namespace partq
