// Enqueueing items, and waiting for them to finish.
//
//   Producer p(std::move(store));
//   auto r = p.Enqueue("emails", {.payload = "...", .key = "user-42"});
//
// Keyed items land on part PartForKey(key) (Kafka's murmur2 partitioner), so
// items of one key keep their order in ordered queues; keyless items go to
// parts in runs of 32 consecutive ids (kKeylessRun), the runs spread evenly. Priority: lower runs
// first. A dedup key makes the enqueue idempotent while the item is live (the existing item is
// returned with duplicate=true); once it finished, the key is free again.
//
// To enqueue inside your own libpqxx transaction (the item exists exactly when
// it commits), use EnqueueInTx from pg/pg_store.h, or Tx::Enqueue in a handler.
//
// Metrics: given a ProducerMetrics (producer/metrics.h), a Producer counts the
// items it enqueued (partq_items_enqueued_total).
//
// Thread-safety: like its Store, a Producer is used by one thread at a time.
#ifndef PARTQ_PRODUCER_PRODUCER_H_
#define PARTQ_PRODUCER_PRODUCER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "producer/metrics.h"
#include "store/store.h"

namespace partq {

class Producer {
 public:
  // `metrics` may be null; else it must outlive the producer.
  explicit Producer(std::unique_ptr<Store> store, ProducerMetrics* metrics = nullptr)
      : store_(std::move(store)), metrics_(metrics) {}

  absl::StatusOr<EnqueueResult> Enqueue(absl::string_view queue, const NewItem& item) {
    auto r = store_->Enqueue(queue, item);
    if (r.ok() && !r->duplicate && metrics_ != nullptr) metrics_->Enqueued(queue, 1);
    return r;
  }
  // All or none, via COPY.
  absl::StatusOr<int64_t> EnqueueBatch(absl::string_view queue, const std::vector<NewItem>& items) {
    auto n = store_->EnqueueBatch(queue, items);
    if (n.ok() && metrics_ != nullptr) metrics_->Enqueued(queue, *n);
    return n;
  }

  // Waits until the item is done, dead-lettered or cancelled and returns its
  // state (kDone with the handler's result, kDead with the last error, or
  // kCancelled).
  // DeadlineExceeded after `timeout` (the state so far is in the message);
  // NotFound if the id was never enqueued.
  absl::StatusOr<ItemState> Wait(absl::string_view queue, int64_t id, absl::Duration timeout);
  // The same for the item with `dedup_key`, which may be enqueued after the
  // wait began (a caller picks its key before it enqueues): NotFound only if
  // no item with it was there by `timeout`.
  absl::StatusOr<ItemState> WaitByDedupKey(absl::string_view queue, absl::string_view dedup_key,
                                           absl::Duration timeout);

  // Store::CancelItems and CancelByDedupKey; the items removed count in
  // partq_items_cancelled_total.
  absl::StatusOr<std::vector<CancelOutcome>> Cancel(absl::string_view queue,
                                                    const std::vector<int64_t>& ids);
  absl::StatusOr<CancelOutcome> CancelByDedupKey(absl::string_view queue,
                                                 absl::string_view dedup_key);

  Store& store() { return *store_; }

 private:
  // `what` names the item in a NotFound error ("item 42 of queue q");
  // `may_appear`: an unknown item may still be enqueued, so it is waited for.
  absl::StatusOr<ItemState> WaitFor(absl::Duration timeout, absl::string_view what, bool may_appear,
                                    const std::function<absl::StatusOr<ItemState>()>& poll);
  std::unique_ptr<Store> store_;
  ProducerMetrics* metrics_ = nullptr;
};

}  // namespace partq

#endif  // PARTQ_PRODUCER_PRODUCER_H_
