// The Kafka bridge's Prometheus metrics (a probe, architecture.md, Conventions):
//
//   partq_bridge_lag_messages{topic,queue}          gauge    high watermark - stored next
//                                                            offset, summed over the
//                                                            partitions this bridge holds
//   partq_bridge_messages_in_total{topic,queue}     counter  messages ingested as items
//   partq_bridge_messages_out_total{topic}          counter  outbox rows delivered to Kafka
//   partq_bridge_ingest_batch_messages{queue}       histogram messages per ingest transaction
//   partq_bridge_ingest_conflicts_total{queue}      counter  batches refused because the
//                                                            stored offset moved (fenced)
//   partq_bridge_ingest_errors_total{queue}         counter  failed ingest transactions
//   partq_bridge_paused_partitions{topic,queue}     gauge    partitions paused (backpressure
//                                                            or resync)
//   partq_bridge_delivery_failures_total{topic}     counter  failed delivery reports
//
// Labels are topics and queues only (low cardinality). Thread-safe.
// IngestStarted creates an ingesting bridge's counters at 0, so they have a
// series (and rate() data) before their first increment.
#ifndef PARTQ_BRIDGE_BRIDGE_METRICS_H_
#define PARTQ_BRIDGE_BRIDGE_METRICS_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace partq {

class BridgeMetrics {
 public:
  // Registers the families in `registry`, which must outlive this.
  explicit BridgeMetrics(prometheus::Registry& registry);

  // A bridge ingests `topic` into `queue`: its messages-in, conflict and
  // error counters appear at 0.
  void IngestStarted(absl::string_view topic, absl::string_view queue);
  void SetLag(absl::string_view topic, absl::string_view queue, int64_t lag);
  void SetPaused(absl::string_view topic, absl::string_view queue, int64_t n);
  void Ingested(absl::string_view topic, absl::string_view queue, int64_t n);
  void IngestBatch(absl::string_view queue, int64_t n);
  void IngestConflict(absl::string_view queue);
  void IngestError(absl::string_view queue);
  void Delivered(absl::string_view topic, int64_t n);
  void DeliveryFailed(absl::string_view topic, int64_t n);

 private:
  prometheus::Family<prometheus::Gauge>& lag_;
  prometheus::Family<prometheus::Gauge>& paused_;
  prometheus::Family<prometheus::Counter>& in_;
  prometheus::Family<prometheus::Counter>& out_;
  prometheus::Family<prometheus::Histogram>& batch_;
  prometheus::Family<prometheus::Counter>& conflicts_;
  prometheus::Family<prometheus::Counter>& errors_;
  prometheus::Family<prometheus::Counter>& failures_;
};

}  // namespace partq

#endif  // PARTQ_BRIDGE_BRIDGE_METRICS_H_
