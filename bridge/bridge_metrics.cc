#include "bridge/bridge_metrics.h"

namespace partq {
namespace {

prometheus::Labels TopicQueue(absl::string_view topic, absl::string_view queue) {
  return {{"topic", std::string(topic)}, {"queue", std::string(queue)}};
}

}  // namespace

BridgeMetrics::BridgeMetrics(prometheus::Registry& r)
    : lag_(prometheus::BuildGauge()
               .Name("partq_bridge_lag_messages")
               .Help("Kafka high watermark minus the next offset stored in PostgreSQL, summed "
                     "over the partitions this bridge holds.")
               .Register(r)),
      paused_(prometheus::BuildGauge()
                  .Name("partq_bridge_paused_partitions")
                  .Help("Kafka partitions this bridge holds paused (backpressure or resync).")
                  .Register(r)),
      in_(prometheus::BuildCounter()
              .Name("partq_bridge_messages_in_total")
              .Help("Kafka messages ingested as items (committed with their offsets).")
              .Register(r)),
      out_(prometheus::BuildCounter()
               .Name("partq_bridge_messages_out_total")
               .Help("Outbox rows delivered to Kafka (acknowledged by the brokers).")
               .Register(r)),
      batch_(prometheus::BuildHistogram()
                 .Name("partq_bridge_ingest_batch_messages")
                 .Help("Messages per ingest transaction.")
                 .Register(r)),
      conflicts_(prometheus::BuildCounter()
                     .Name("partq_bridge_ingest_conflicts_total")
                     .Help("Ingest transactions refused because the stored offset had moved "
                           "(another bridge ingested the partition).")
                     .Register(r)),
      errors_(prometheus::BuildCounter()
                  .Name("partq_bridge_ingest_errors_total")
                  .Help("Ingest transactions that failed (nothing written; retried).")
                  .Register(r)),
      failures_(prometheus::BuildCounter()
                    .Name("partq_bridge_delivery_failures_total")
                    .Help("Outbox rows whose delivery report was a failure (kept, retried).")
                    .Register(r)) {}

void BridgeMetrics::IngestStarted(absl::string_view topic, absl::string_view queue) {
  in_.Add(TopicQueue(topic, queue));
  conflicts_.Add({{"queue", std::string(queue)}});
  errors_.Add({{"queue", std::string(queue)}});
}
void BridgeMetrics::SetLag(absl::string_view topic, absl::string_view queue, int64_t lag) {
  lag_.Add(TopicQueue(topic, queue)).Set(static_cast<double>(lag));
}
void BridgeMetrics::SetPaused(absl::string_view topic, absl::string_view queue, int64_t n) {
  paused_.Add(TopicQueue(topic, queue)).Set(static_cast<double>(n));
}
void BridgeMetrics::Ingested(absl::string_view topic, absl::string_view queue, int64_t n) {
  in_.Add(TopicQueue(topic, queue)).Increment(static_cast<double>(n));
}
void BridgeMetrics::IngestBatch(absl::string_view queue, int64_t n) {
  static const auto* kBuckets = new prometheus::Histogram::BucketBoundaries{
      1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000};
  batch_.Add({{"queue", std::string(queue)}}, *kBuckets).Observe(static_cast<double>(n));
}
void BridgeMetrics::IngestConflict(absl::string_view queue) {
  conflicts_.Add({{"queue", std::string(queue)}}).Increment();
}
void BridgeMetrics::IngestError(absl::string_view queue) {
  errors_.Add({{"queue", std::string(queue)}}).Increment();
}
void BridgeMetrics::Delivered(absl::string_view topic, int64_t n) {
  out_.Add({{"topic", std::string(topic)}}).Increment(static_cast<double>(n));
}
void BridgeMetrics::DeliveryFailed(absl::string_view topic, int64_t n) {
  failures_.Add({{"topic", std::string(topic)}}).Increment(static_cast<double>(n));
}

}  // namespace partq
