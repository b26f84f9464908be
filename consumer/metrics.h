// The consumer's Prometheus metrics (a probe: logic calls it, it owns the
// handles). Labels: queue, for schedules the schedule's name (chosen by
// an operator, so bounded), for vacuums the table (items or part_claims);
// never item or session ids. It also holds the probe of the consumer's
// session (coordinator/session_metrics.h), and its
// registry is where the consumer's queue collector (queue_collector.h)
// registers the depth gauges. docs/metrics.md lists every metric.
#ifndef PARTQ_CONSUMER_METRICS_H_
#define PARTQ_CONSUMER_METRICS_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "consumer/handler.h"
#include "coordinator/session_metrics.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "store/store.h"

namespace partq {

class ConsumerMetrics {
 public:
  // Registers (or reuses) the families in `registry`; thread-safe afterwards.
  ConsumerMetrics(prometheus::Registry& registry, const std::string& queue);

  prometheus::Registry& registry() { return registry_; }
  SessionMetrics& session() { return session_; }

  void SetConcurrency(int n) { concurrency_.Set(n); }
  void Claimed(size_t n) { claimed_.Increment(static_cast<double>(n)); }
  // One successful claim query: its duration, and how long each item had been
  // ready (since its run_at) when claimed at `now`.
  void ClaimQuery(absl::Duration took, const std::vector<Item>& items, absl::Time now);
  // Items claimed ahead in an ack (no query of its own): their wait only.
  void Waited(const std::vector<Item>& items, absl::Time now);
  // One handler call (a batch, or one isolated item) took `took`.
  void HandlerCall(absl::Duration took) { handler_.Observe(absl::ToDoubleSeconds(took)); }
  void FinishError() { finish_errors_.Increment(); }
  // An item's attempt failed for `kind`, and that failure committed (it was
  // retried or dead-lettered).
  void ItemFailed(FailureKind kind);
  // One finished batch: outcomes, its items, and the transaction's start/end.
  void Finished(const FinishResult& result, const std::vector<Item>& items, absl::Time start,
                absl::Time end);
  // Schedules (schedule_firer.h): one tick of `schedule` fired, after
  // `missed` due ticks that were skipped; a firing round that failed.
  void ScheduleFired(const std::string& schedule, int64_t missed);
  void ScheduleError() { schedule_errors_.Increment(); }
  // The table keeper (table_keeper.h): it vacuumed `table` in `took`; a
  // round that failed.
  void Vacuumed(const std::string& table, absl::Duration took);
  void VacuumError() { vacuum_errors_.Increment(); }
  // ... and after a vacuum it rebuilt `index`, bloated (TableVacuum::rebuilt).
  void IndexRebuilt(const std::string& index);
  // ... and it handed `bytes` of `table`'s empty pages back (TableVacuum::shrunk).
  void TableShrunk(const std::string& table, int64_t bytes);

 private:
  prometheus::Registry& registry_;
  SessionMetrics session_;
  prometheus::Gauge& concurrency_;
  prometheus::Counter& claimed_;
  prometheus::Counter& acked_;
  prometheus::Counter& retried_;
  prometheus::Counter& dead_;
  prometheus::Counter& fenced_;
  prometheus::Counter& finish_errors_;
  prometheus::Family<prometheus::Counter>& item_failures_;
  std::vector<prometheus::Counter*> item_failure_by_kind_;  // by FailureKind, from kFailureKinds
  prometheus::Histogram& latency_;
  prometheus::Histogram& batch_duration_;
  prometheus::Histogram& claim_duration_;
  prometheus::Histogram& wait_;
  prometheus::Histogram& handler_;
  const std::string queue_;
  prometheus::Family<prometheus::Counter>& schedule_fired_;
  prometheus::Family<prometheus::Counter>& schedule_missed_;
  prometheus::Counter& schedule_errors_;
  prometheus::Family<prometheus::Counter>& vacuums_;
  prometheus::Family<prometheus::Counter>& vacuum_seconds_;
  prometheus::Counter& vacuum_errors_;
  prometheus::Family<prometheus::Counter>& index_rebuilds_;
  prometheus::Family<prometheus::Counter>& bytes_returned_;
};

}  // namespace partq

#endif  // PARTQ_CONSUMER_METRICS_H_
