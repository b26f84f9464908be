// A Store decorator for benchmarks: forwards every call to a real store and
// tells a shared Tracker when items were claimed and when their acks
// committed (client clock, right after the call returned), and how many calls
// of each kind the consumers made (the idle cost, measured on the client).
#ifndef PARTQ_BENCH_TRACKING_STORE_H_
#define PARTQ_BENCH_TRACKING_STORE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/store.h"

namespace partq::bench {

// Thread-safe. Items are identified by their payload, a decimal sequence
// number 0..capacity-1 the benchmark chose; other payloads are counted only.
class Tracker {
 public:
  explicit Tracker(int64_t capacity = 0);

  void Claimed(const std::vector<Item>& items, absl::Time when);
  void Acked(const FinishRequest& request, const FinishResult& result, absl::Time when);
  void Call(const char* what);
  // Adds `n` to the count of `what` (e.g. rows a call returned).
  void Add(const char* what, int64_t n);

  // Items acked or dead-lettered (the bench's *_fail drains dead-letter 1 %).
  int64_t acked() const { return acked_.load(); }
  // Blocks until at least `n` items were acked (or dead) or `deadline` passed.
  bool WaitAcked(int64_t n, absl::Time deadline);
  // Microseconds since the epoch of the first claim / ack of item `seq`; 0 if none.
  int64_t claimed_us(int64_t seq) const { return claimed_us_[seq].load(); }
  int64_t acked_us(int64_t seq) const { return acked_us_[seq].load(); }
  int64_t capacity() const { return capacity_; }
  std::map<std::string, int64_t> calls() const;
  // Also count the claims made ahead in acks ("claim_ahead"), the parts
  // claims list ("claim_part"; "claim_part_head": without a cursor) and the
  // claims whose first part, which is always read, is read from its head
  // ("claim_lead_head").
  // Off by default: it copies each FinishRequest, which a benchmark should
  // not pay for.
  void CountClaimParts() { count_claim_parts_ = true; }
  bool counts_claim_parts() const { return count_claim_parts_.load(); }

 private:
  const int64_t capacity_;
  std::unique_ptr<std::atomic<int64_t>[]> claimed_us_;
  std::unique_ptr<std::atomic<int64_t>[]> acked_us_;
  std::atomic<int64_t> acked_{0};
  std::atomic<bool> count_claim_parts_{false};
  mutable absl::Mutex mu_;
  std::map<std::string, int64_t> calls_ ABSL_GUARDED_BY(mu_);
};

// A StoreFactory whose stores report to `tracker` (which must outlive them).
StoreFactory TrackingFactory(StoreFactory inner, Tracker* tracker);

}  // namespace partq::bench

#endif  // PARTQ_BENCH_TRACKING_STORE_H_
