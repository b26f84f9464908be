#include "producer/metrics.h"

namespace partq {

ProducerMetrics::ProducerMetrics(prometheus::Registry& r)
    : enqueued_(prometheus::BuildCounter()
                    .Name("partq_items_enqueued_total")
                    .Help("Items enqueued by this process through a partq Producer (dedup-key "
                          "duplicates excluded; `partq enqueue` and EnqueueInTx not counted).")
                    .Register(r)),
      cancelled_(prometheus::BuildCounter()
                     .Name("partq_items_cancelled_total")
                     .Help("Items cancelled (removed before they ran) by this process through a "
                           "partq Producer; `partq cancel` and the SQL cancel() not counted.")
                     .Register(r)) {}

void ProducerMetrics::Enqueued(absl::string_view queue, int64_t n) {
  // Family::Add returns the existing series for a known queue.
  enqueued_.Add({{"queue", std::string(queue)}}).Increment(static_cast<double>(n));
}

void ProducerMetrics::Cancelled(absl::string_view queue, int64_t n) {
  cancelled_.Add({{"queue", std::string(queue)}}).Increment(static_cast<double>(n));
}

}  // namespace partq
