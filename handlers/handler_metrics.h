// The metrics of the handlers that call out of the process (exec, http): a
// probe, as consumer/metrics.h. Labels: queue, transport ("exec", "http")
// and, for failures, a reason from a fixed list — never item ids.
//
//   partq_handler_requests_total{queue,transport}           batches sent
//   partq_handler_request_failures_total{queue,transport,reason}
//       batches that got no usable reply: the reason is the transport's
//       (exec: died, timeout, bad_reply, start; http: HttpFailureName(),
//       bad_reply) — what an operator looks at when items keep failing
//   partq_handler_throttled_total{queue,transport}          batches refused
//                                                           with 429/503
//   partq_handler_request_duration_seconds{queue,transport} send to reply
//   partq_handler_restarts_total{queue}                     exec children started
//                                                           after the first
#ifndef PARTQ_HANDLERS_HANDLER_METRICS_H_
#define PARTQ_HANDLERS_HANDLER_METRICS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace partq {

class HandlerMetrics {
 public:
  // Registers (or reuses) the families in `registry`; thread-safe afterwards.
  HandlerMetrics(prometheus::Registry& registry, const std::string& queue,
                 const std::string& transport);

  void Request(absl::Duration took);
  void Failure(absl::string_view reason);
  void Throttled() { throttled_.Increment(); }
  void Restarted() { restarts_.Increment(); }

 private:
  const std::string queue_;
  const std::string transport_;
  prometheus::Counter& requests_;
  prometheus::Family<prometheus::Counter>& failures_;
  prometheus::Counter& throttled_;
  prometheus::Counter& restarts_;
  prometheus::Histogram& duration_;
};

}  // namespace partq

#endif  // PARTQ_HANDLERS_HANDLER_METRICS_H_
