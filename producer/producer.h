// Enqueueing items, and waiting for them to finish.
//
//   Producer p(std::move(store));
//   auto r = p.Enqueue("emails", {.payload = "...", .key = "user-42"});
//
// Keyed items land on part PartForKey(key) (Kafka's murmur2 partitioner), so
// items of one key keep their order in ordered queues; keyless items spread
// evenly. Priority: lower runs first. A dedup key makes the enqueue
// idempotent while the item is live (the existing item is returned with
// duplicate=true); once it finished, the key is free again.
//
// To enqueue inside your own libpqxx transaction (the item exists exactly when
// it commits), use EnqueueInTx from coordinator/pg_store.h.
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
#include "coordinator/store.h"

namespace partq {

class Producer {
 public:
  explicit Producer(std::unique_ptr<Store> store) : store_(std::move(store)) {}

  absl::StatusOr<EnqueueResult> Enqueue(absl::string_view queue, const NewItem& item) {
    return store_->Enqueue(queue, item);
  }
  // All or none, via COPY.
  absl::StatusOr<int64_t> EnqueueBatch(absl::string_view queue, const std::vector<NewItem>& items) {
    return store_->EnqueueBatch(queue, items);
  }

  // Waits until the item is done or dead-lettered and returns its state
  // (kDone with the handler's result, or kDead with the last error).
  // DeadlineExceeded after `timeout` (the state so far is in the message);
  // NotFound if the id was never enqueued.
  absl::StatusOr<ItemState> Wait(absl::string_view queue, int64_t id, absl::Duration timeout);
  absl::StatusOr<ItemState> WaitByDedupKey(absl::string_view queue, absl::string_view dedup_key,
                                           absl::Duration timeout);

  Store& store() { return *store_; }

 private:
  absl::StatusOr<ItemState> WaitFor(absl::Duration timeout,
                                    const std::function<absl::StatusOr<ItemState>()>& poll);
  std::unique_ptr<Store> store_;
};

}  // namespace partq

#endif  // PARTQ_PRODUCER_PRODUCER_H_
