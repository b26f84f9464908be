#include "consumer/metrics.h"

#include <algorithm>
#include <unordered_set>

namespace partq {
namespace {

prometheus::Counter& Counter(prometheus::Registry& r, const std::string& name,
                             const std::string& help, const std::string& queue) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({{"queue", queue}});
}

prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
}

}  // namespace

ConsumerMetrics::ConsumerMetrics(prometheus::Registry& r, const std::string& queue)
    : registry_(r),
      session_(r, queue),
      concurrency_(prometheus::BuildGauge()
                       .Name("partq_worker_concurrency")
                       .Help("Handler threads of this worker.")
                       .Register(r)
                       .Add({{"queue", queue}})),
      claimed_(Counter(r, "partq_items_claimed_total", "Items claimed for processing.", queue)),
      acked_(
          Counter(r, "partq_items_acked_total", "Items acknowledged (handler succeeded).", queue)),
      retried_(Counter(r, "partq_items_nacked_total",
                       "Items that failed and were scheduled for a retry.", queue)),
      dead_(Counter(r, "partq_items_dead_lettered_total", "Items moved to dead_items.", queue)),
      fenced_(Counter(r, "partq_items_fenced_total",
                      "Items not acknowledged because this session no longer owned their part.",
                      queue)),
      finish_errors_(Counter(r, "partq_ack_errors_total",
                             "Ack transactions that failed (database errors); retried.", queue)),
      item_failures_(prometheus::BuildCounter()
                         .Name("partq_item_failures_total")
                         .Help("Failed attempts of items (retried or dead-lettered), by reason.")
                         .Register(r)),
      latency_(prometheus::BuildHistogram()
                   .Name("partq_item_latency_seconds")
                   .Help("Time from enqueue to acknowledgement (database enqueue time to "
                         "worker clock).")
                   .Register(r)
                   .Add({{"queue", queue}}, LatencyBuckets())),
      batch_duration_(prometheus::BuildHistogram()
                          .Name("partq_ack_duration_seconds")
                          .Help("Duration of one ack transaction: fence, handlers, writes, "
                                "commit.")
                          .Register(r)
                          .Add({{"queue", queue}}, LatencyBuckets())),
      claim_duration_(prometheus::BuildHistogram()
                          .Name("partq_claim_duration_seconds")
                          .Help("Duration of one claim query (successful ones).")
                          .Register(r)
                          .Add({{"queue", queue}}, LatencyBuckets())),
      wait_(prometheus::BuildHistogram()
                .Name("partq_item_wait_seconds")
                .Help("Time an item was ready (since its run time, database clock) before a "
                      "worker claimed it (worker clock).")
                .Register(r)
                .Add({{"queue", queue}}, LatencyBuckets())),
      handler_(prometheus::BuildHistogram()
                   .Name("partq_handler_duration_seconds")
                   .Help("Duration of one handler call: a whole batch, or one item run alone "
                         "(under its own savepoint).")
                   .Register(r)
                   .Add({{"queue", queue}}, LatencyBuckets())),
      queue_(queue),
      schedule_fired_(prometheus::BuildCounter()
                          .Name("partq_schedule_fired_total")
                          .Help("Schedule ticks this worker fired (one item each; "
                                "consumer/schedule_firer.h).")
                          .Register(r)),
      schedule_missed_(prometheus::BuildCounter()
                           .Name("partq_schedule_missed_total")
                           .Help("Schedule ticks that came due while no worker fired them and "
                                 "were skipped (only the latest fires on return).")
                           .Register(r)),
      schedule_errors_(Counter(r, "partq_schedule_fire_errors_total",
                               "Rounds of the schedule firer that failed (database errors); "
                               "retried.",
                               queue)),
      vacuums_(prometheus::BuildCounter()
                   .Name("partq_table_vacuums_total")
                   .Help("Vacuums of the queue tables this worker ran as the queue's table "
                         "keeper (consumer/table_keeper.h).")
                   .Register(r)),
      vacuum_seconds_(prometheus::BuildCounter()
                          .Name("partq_table_vacuum_seconds_total")
                          .Help("Time those vacuums took.")
                          .Register(r)),
      vacuum_errors_(Counter(r, "partq_table_vacuum_errors_total",
                             "Rounds of the table keeper that failed (database errors); "
                             "retried.",
                             queue)),
      index_rebuilds_(prometheus::BuildCounter()
                          .Name("partq_index_rebuilds_total")
                          .Help("Indexes of the queue tables this worker rebuilt online as the "
                                "queue's table keeper, after a vacuum found them many times the "
                                "size their entries need (consumer/table_keeper.h).")
                          .Register(r)),
      bytes_returned_(prometheus::BuildCounter()
                          .Name("partq_table_bytes_returned_total")
                          .Help("Bytes of the queue tables' empty last pages this worker handed "
                                "back to the file system as the queue's table keeper, after a "
                                "vacuum found a table many times the size its rows need "
                                "(consumer/table_keeper.h).")
                          .Register(r)) {
  // Every reason from the start, at 0: a rate over them works before the
  // first failure; kept, so a failure costs no label lookup.
  for (FailureKind kind : kFailureKinds) {
    item_failure_by_kind_.push_back(
        &item_failures_.Add({{"queue", queue_}, {"reason", FailureKindName(kind)}}));
  }
}

void ConsumerMetrics::Vacuumed(const std::string& table, absl::Duration took) {
  const prometheus::Labels labels{{"queue", queue_}, {"table", table}};
  vacuums_.Add(labels).Increment();
  vacuum_seconds_.Add(labels).Increment(absl::ToDoubleSeconds(took));
}

void ConsumerMetrics::IndexRebuilt(const std::string& index) {
  index_rebuilds_.Add({{"queue", queue_}, {"index", index}}).Increment();
}

void ConsumerMetrics::TableShrunk(const std::string& table, int64_t bytes) {
  bytes_returned_.Add({{"queue", queue_}, {"table", table}}).Increment(static_cast<double>(bytes));
}

void ConsumerMetrics::ScheduleFired(const std::string& schedule, int64_t missed) {
  const prometheus::Labels labels{{"queue", queue_}, {"schedule", schedule}};
  schedule_fired_.Add(labels).Increment();
  schedule_missed_.Add(labels).Increment(static_cast<double>(missed));
}

void ConsumerMetrics::ClaimQuery(absl::Duration took, const std::vector<Item>& items,
                                 absl::Time now) {
  claim_duration_.Observe(absl::ToDoubleSeconds(took));
  Waited(items, now);
}

void ConsumerMetrics::Waited(const std::vector<Item>& items, absl::Time now) {
  for (const auto& item : items) {
    // Clocks differ a little between database and worker: no negative waits.
    wait_.Observe(std::max(0.0, absl::ToDoubleSeconds(now - item.run_at)));
  }
}

void ConsumerMetrics::ItemFailed(FailureKind kind) {
  item_failure_by_kind_[static_cast<size_t>(kind)]->Increment();
}

void ConsumerMetrics::Finished(const FinishResult& result, const std::vector<Item>& items,
                               absl::Time start, absl::Time end) {
  acked_.Increment(static_cast<double>(result.acked.size()));
  retried_.Increment(static_cast<double>(result.retried.size()));
  dead_.Increment(static_cast<double>(result.dead.size()));
  fenced_.Increment(static_cast<double>(result.fenced.size()));
  batch_duration_.Observe(absl::ToDoubleSeconds(end - start));
  std::unordered_set<int64_t> acked(result.acked.begin(), result.acked.end());
  for (const auto& item : items) {
    if (acked.count(item.id)) latency_.Observe(absl::ToDoubleSeconds(end - item.enqueued_at));
  }
}

}  // namespace partq
