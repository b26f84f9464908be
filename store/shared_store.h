// One Store connection that several background threads of a process take
// turns on, opened when one of them first needs it.
//
// The owner of a queue's part 0 runs three periodic jobs, the depth collector
// (coordinator/queue_collector.h), the schedule firer
// (consumer/schedule_firer.h) and the table keeper (consumer/table_keeper.h);
// each used to hold a connection of its own. A Consumer gives all three one
// SharedStore, and a Worker of several queues gives every queue's jobs the
// same one, so a process holds one such connection however many part 0s it
// owns (docs/guide/operations-and-roles.md, "Connections").
//
// Thread-safe: a user holds `mu` from before it connects (EnsureLocked, which
// counts it as needing the connection) until its call returns; it calls
// NotNeededLocked when it stops needing it (its process no longer owns its
// part 0), and the connection closes once no user needs it. A user resets
// `store` itself when the connection broke.
#ifndef PARTQ_STORE_SHARED_STORE_H_
#define PARTQ_STORE_SHARED_STORE_H_

#include <memory>
#include <set>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "store/store.h"

namespace partq {

struct SharedStore {
  explicit SharedStore(StoreFactory f) : factory(std::move(f)) {}

  // Connects `store` if it is not, counting `user` as needing it; the
  // connect error otherwise.
  absl::Status EnsureLocked(const void* user) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    users.insert(user);
    if (store != nullptr) return absl::OkStatus();
    absl::StatusOr<std::unique_ptr<Store>> s = factory();
    if (!s.ok()) return s.status();
    store = *std::move(s);
    return absl::OkStatus();
  }

  // `user` no longer needs the connection: closed when nobody does.
  void NotNeededLocked(const void* user) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    users.erase(user);
    if (users.empty()) store.reset();
  }

  const StoreFactory factory;
  absl::Mutex mu;
  std::unique_ptr<Store> store ABSL_GUARDED_BY(mu);
  std::set<const void*> users ABSL_GUARDED_BY(mu);  // those that need `store`
};

}  // namespace partq

#endif  // PARTQ_STORE_SHARED_STORE_H_
