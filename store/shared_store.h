// One Store connection that several background threads of a process take
// turns on, opened when one of them first needs it.
//
// The owner of a queue's part 0 runs two periodic jobs, the depth collector
// (coordinator/queue_collector.h) and the schedule firer
// (consumer/schedule_firer.h); each used to hold a connection of its own. A
// Consumer gives both one SharedStore, so the part-0 owner holds one
// connection more than other workers, not two (docs/guide/operations-and-roles.md, "Connections").
//
// Thread-safe: a user holds `mu` from before it connects until its call
// returns, and closes `store` (reset) when the connection broke or when
// none of the users needs it (they all work only while the process owns
// part 0).
#ifndef PARTQ_STORE_SHARED_STORE_H_
#define PARTQ_STORE_SHARED_STORE_H_

#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "store/store.h"

namespace partq {

struct SharedStore {
  explicit SharedStore(StoreFactory f) : factory(std::move(f)) {}

  // Connects `store` if it is not; the connect error otherwise.
  absl::Status EnsureLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (store != nullptr) return absl::OkStatus();
    absl::StatusOr<std::unique_ptr<Store>> s = factory();
    if (!s.ok()) return s.status();
    store = *std::move(s);
    return absl::OkStatus();
  }

  const StoreFactory factory;
  absl::Mutex mu;
  std::unique_ptr<Store> store ABSL_GUARDED_BY(mu);
};

}  // namespace partq

#endif  // PARTQ_STORE_SHARED_STORE_H_
