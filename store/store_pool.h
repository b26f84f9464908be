// Connections several threads of a process borrow for one call at a time
// (issue 52: the claimers of a worker's queues). A connection is taken for a
// call and given back after it; the pool keeps what was given back and
// closes what nobody has taken for `idle_close`, down to `keep`. So the
// number open follows the calls under way at once, not the number of
// borrowers: a worker of 50 idle queues holds one, a drain of four as many
// as claim together.
//
// Thread-safe. A trimmer thread runs while the pool lives.
#ifndef PARTQ_STORE_STORE_POOL_H_
#define PARTQ_STORE_STORE_POOL_H_

#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "store/store.h"

namespace partq {

class StorePool {
 public:
  explicit StorePool(StoreFactory factory, absl::Duration idle_close = absl::Seconds(10),
                     int keep = 1)
      : factory_(std::move(factory)), idle_close_(idle_close), keep_(static_cast<size_t>(keep)) {
    trimmer_ = std::thread([this] { Trim(); });
  }
  ~StorePool() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    trimmer_.join();
  }
  StorePool(const StorePool&) = delete;
  StorePool& operator=(const StorePool&) = delete;

  // The connection given back last, or a new one.
  absl::StatusOr<std::unique_ptr<Store>> Take() {
    {
      absl::MutexLock lock(&mu_);
      if (!idle_.empty()) {
        std::unique_ptr<Store> s = std::move(idle_.back().first);
        idle_.pop_back();
        return s;
      }
    }
    return factory_();
  }
  // Back for the next Take (a working connection only: drop a broken one).
  void Give(std::unique_ptr<Store> store) {
    if (store == nullptr) return;
    absl::MutexLock lock(&mu_);
    idle_.emplace_back(std::move(store), absl::Now());
  }
  // Connections kept now (for tests).
  int idle() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(idle_.size());
  }

 private:
  void Trim() {
    for (;;) {
      std::vector<std::unique_ptr<Store>> closing;
      {
        absl::MutexLock lock(&mu_);
        if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), idle_close_ / 2)) return;
        // Oldest first; the newest `keep` stay whatever their age.
        const absl::Time cutoff = absl::Now() - idle_close_;
        size_t old = 0;
        while (old + keep_ < idle_.size() && idle_[old].second < cutoff) ++old;
        for (size_t i = 0; i < old; ++i) closing.push_back(std::move(idle_[i].first));
        idle_.erase(idle_.begin(), idle_.begin() + static_cast<std::ptrdiff_t>(old));
      }
      // `closing` closes them here, outside the lock.
    }
  }

  const StoreFactory factory_;
  const absl::Duration idle_close_;
  const size_t keep_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Given back, with when: oldest first.
  std::vector<std::pair<std::unique_ptr<Store>, absl::Time>> idle_ ABSL_GUARDED_BY(mu_);
  std::thread trimmer_;
};

}  // namespace partq

#endif  // PARTQ_STORE_STORE_POOL_H_
