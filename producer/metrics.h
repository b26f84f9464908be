// The producer's Prometheus metrics (a probe, architecture.md, Conventions):
//
//   partq_items_enqueued_total{queue}  counter  items this process enqueued
//                                               through a Producer (duplicates,
//                                               i.e. dedup-key hits, excluded)
//   partq_items_cancelled_total{queue} counter  items this process cancelled
//                                               through a Producer (removed
//                                               now; not those found in
//                                               flight, done or cancelled)
//
// Only processes that keep running and serve a registry export it: library
// users and long-lived producers. `partq enqueue` exits at once and exports
// nothing, and items enqueued with EnqueueInTx (inside the caller's own
// transaction) are not counted here — count them where that transaction
// commits. Thread-safe.
#ifndef PARTQ_PRODUCER_METRICS_H_
#define PARTQ_PRODUCER_METRICS_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"

namespace partq {

class ProducerMetrics {
 public:
  // Registers (or reuses) the family in `registry`, which must outlive this.
  explicit ProducerMetrics(prometheus::Registry& registry);

  void Enqueued(absl::string_view queue, int64_t n);
  void Cancelled(absl::string_view queue, int64_t n);

 private:
  prometheus::Family<prometheus::Counter>& enqueued_;
  prometheus::Family<prometheus::Counter>& cancelled_;
};

}  // namespace partq

#endif  // PARTQ_PRODUCER_METRICS_H_
