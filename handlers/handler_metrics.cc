#include "handlers/handler_metrics.h"

namespace partq {

HandlerMetrics::HandlerMetrics(prometheus::Registry& r, const std::string& queue,
                               const std::string& transport)
    : queue_(queue),
      transport_(transport),
      requests_(prometheus::BuildCounter()
                    .Name("partq_handler_requests_total")
                    .Help("Batches sent to an exec or http handler.")
                    .Register(r)
                    .Add({{"queue", queue}, {"transport", transport}})),
      failures_(prometheus::BuildCounter()
                    .Name("partq_handler_request_failures_total")
                    .Help("Batches an exec or http handler gave no usable reply for, by reason.")
                    .Register(r)),
      throttled_(prometheus::BuildCounter()
                     .Name("partq_handler_throttled_total")
                     .Help("Batches an http handler refused with 429 or 503.")
                     .Register(r)
                     .Add({{"queue", queue}, {"transport", transport}})),
      restarts_(prometheus::BuildCounter()
                    .Name("partq_handler_restarts_total")
                    .Help("Exec handler children started again after one failed.")
                    .Register(r)
                    .Add({{"queue", queue}})),
      duration_(prometheus::BuildHistogram()
                    .Name("partq_handler_request_duration_seconds")
                    .Help("Time from sending a batch to an exec or http handler to its reply.")
                    .Register(r)
                    .Add({{"queue", queue}, {"transport", transport}},
                         prometheus::Histogram::BucketBoundaries{0.001, 0.0025, 0.005, 0.01, 0.025,
                                                                 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                                                                 10, 30, 60, 300})) {}

void HandlerMetrics::Request(absl::Duration took) {
  requests_.Increment();
  duration_.Observe(absl::ToDoubleSeconds(took));
}

void HandlerMetrics::Failure(absl::string_view reason) {
  failures_.Add({{"queue", queue_}, {"transport", transport_}, {"reason", std::string(reason)}})
      .Increment();
}

}  // namespace partq
