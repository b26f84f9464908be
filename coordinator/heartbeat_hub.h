// The heartbeats of one process's sessions, one per queue it serves
// (consumer/worker.h), sent as one transaction on one connection of their own
// (issue 52): a worker of 50 idle queues made 50 heartbeat transactions per
// TTL/3, 15 a second at the default TTL; with the hub it makes one.
//
// How they come together: a session given a hub (SessionOptions::hub) keeps
// its heartbeats on a grid, each due at a multiple of its interval on the
// clock (HeartbeatTimer's `aligned`), never later than an interval after the
// last; sessions of one interval are then due at the same moments. The first
// caller of a round gathers the others' requests until all `members` have
// asked or `gather` has passed, and sends them all (Store::HeartbeatMany);
// the rest wait for their answer. A caller that comes while a batch is being
// sent leads the next. The transaction begins after every request in it was
// made, so the database's now() is no earlier than any session's send time,
// from which its lease counts (session.h): nothing about the lease changes.
//
// An error fails the batch for all its sessions; each round fails as a
// single heartbeat's would (session.h), and the connection is made again on
// the next batch when it broke. Only heartbeats come here: a session's other
// calls (group reads, acquisitions, LISTEN) stay on its own connection.
//
// Thread-safe.
#ifndef PARTQ_COORDINATOR_HEARTBEAT_HUB_H_
#define PARTQ_COORDINATOR_HEARTBEAT_HUB_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/store.h"

namespace partq {

class HeartbeatHub {
 public:
  // `members`: how many sessions will heartbeat through the hub (a batch is
  // sent as soon as that many asked).
  HeartbeatHub(StoreFactory factory, int members, absl::Duration gather = absl::Milliseconds(20));
  HeartbeatHub(const HeartbeatHub&) = delete;
  HeartbeatHub& operator=(const HeartbeatHub&) = delete;

  // Store::HeartbeatSince of `request`, in the transaction of the round it
  // joins; blocks until that round's answer.
  absl::StatusOr<GroupView> Heartbeat(HeartbeatRequest request);

  // Transactions sent so far, and the heartbeats in them (for tests).
  int64_t batches() const;
  int64_t heartbeats() const;

 private:
  struct Slot {
    HeartbeatRequest request;
    std::optional<absl::StatusOr<GroupView>> answer;
  };
  // Sends `batch` (one transaction) and answers its slots.
  void Send(const std::vector<Slot*>& batch);

  const StoreFactory factory_;
  const int members_;
  const absl::Duration gather_;

  mutable absl::Mutex mu_;
  std::vector<Slot*> pending_ ABSL_GUARDED_BY(mu_);
  bool gathering_ ABSL_GUARDED_BY(mu_) = false;  // a leader waits for the others
  int64_t batches_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t heartbeats_ ABSL_GUARDED_BY(mu_) = 0;

  absl::Mutex send_mu_ ABSL_ACQUIRED_AFTER(mu_);  // one batch at a time on store_
  std::unique_ptr<Store> store_ ABSL_GUARDED_BY(send_mu_);
};

}  // namespace partq

#endif  // PARTQ_COORDINATOR_HEARTBEAT_HUB_H_
