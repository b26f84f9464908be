// The consumer's Prometheus metrics (a probe: logic calls it, it owns the
// handles). Labels: queue only — never item or session ids.
#ifndef PARTQ_CONSUMER_METRICS_H_
#define PARTQ_CONSUMER_METRICS_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/store.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace partq {

class ConsumerMetrics {
 public:
  // Registers (or reuses) the families in `registry`; thread-safe afterwards.
  ConsumerMetrics(prometheus::Registry& registry, const std::string& queue);

  void SetConcurrency(int n) { concurrency_.Set(n); }
  void Claimed(size_t n) { claimed_.Increment(static_cast<double>(n)); }
  void FinishError() { finish_errors_.Increment(); }
  // One finished batch: outcomes, its items, and the transaction's start/end.
  void Finished(const FinishResult& result, const std::vector<Item>& items, absl::Time start,
                absl::Time end);

 private:
  prometheus::Gauge& concurrency_;
  prometheus::Counter& claimed_;
  prometheus::Counter& acked_;
  prometheus::Counter& retried_;
  prometheus::Counter& dead_;
  prometheus::Counter& fenced_;
  prometheus::Counter& finish_errors_;
  prometheus::Histogram& latency_;
  prometheus::Histogram& batch_duration_;
};

}  // namespace partq

#endif  // PARTQ_CONSUMER_METRICS_H_
