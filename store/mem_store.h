// An in-memory Store for unit tests of pure logic (sessions, rebalancing, the
// consumer's dispatch). It follows the contracts of store.h as PgStore does —
// tests/store/store_conformance.h runs one suite against both — with a Clock
// as its database clock, but has no SQL: Tx::Exec is Unimplemented (the rest
// of Tx — savepoints, enqueue, publish — works) and Listen is Unimplemented
// (sessions then poll). Not modelled: the dead-letter topic's outbox rows
// (their headers describe Kafka origins, which MemStore has no way to take
// in). Faults are injected by wrapping it (store/fault_store.h).
//
// Thread-safe: all handles share one MemDatabase guarded by a mutex.
#ifndef PARTQ_STORE_MEM_STORE_H_
#define PARTQ_STORE_MEM_STORE_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "store/store.h"
#include "store/validate.h"

namespace partq {

class MemDatabase {
 public:
  explicit MemDatabase(Clock* clock = Clock::Real()) : clock_(clock) {}
  // A new handle ("connection") on this database. It refuses payloads larger
  // than `max_payload_bytes`, as PgOptions::max_payload_bytes.
  std::unique_ptr<Store> Connect(int64_t max_payload_bytes = kDefaultMaxPayloadBytes);
  StoreFactory Factory();
  // What committed transactions published (Tx::Publish), oldest first.
  std::vector<OutboxEvent> Outbox() const;

 private:
  friend class MemStore;
  struct Session {
    std::string queue;
    int64_t incarnation = 1;
    std::string instance_id, host;
    int pid = 0;
    absl::Time started_at, heartbeat_at, expires_at;
  };
  struct Owner {
    std::string session;
    int64_t epoch;
  };
  struct StoredItem {
    Item item;  // item.attempts: attempts used so far
    std::string queue;
    int64_t abandoned_epoch = 0;  // 0: not abandoned
    std::string last_error;
    absl::Time failed_at;  // dead items: when they died
    // Retried, enqueued with a delay or requeued: it may come due behind a
    // cursor (ClaimPart::after). PgStore: run_at later than enqueued_at.
    bool later = false;
  };
  // What an ack leaves (results): only for an item with a result or a dedup key.
  struct Result {
    std::string queue;
    std::optional<std::string> dedup_key;
    std::optional<std::string> result;
    absl::Time finished_at;  // PgStore: results.finished_at
  };
  struct ClaimRecord {  // part_claims
    int64_t epoch = 0;
    std::vector<int64_t> ids;
  };

  // Where every call starts, with the database locked. Nothing can fail here
  // now (faults: store/fault_store.h); it stays the one place a check common
  // to every call would go.
  absl::Status Enter(const char* method) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return absl::OkStatus();
  }
  // The queue's config; InvalidArgument for a malformed name (as every store
  // refuses it), NotFound ("unknown queue") for one that does not exist.
  absl::StatusOr<QueueConfig*> QueueLocked(absl::string_view name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireLocked(const std::string& queue, const std::string& except, int64_t* expired)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The group as a view (Store::HeartbeatSince): unchanged, without members
  // and owners, when `known` is the queue's generation and no session of the
  // queue is past its TTL.
  GroupView ViewLocked(const std::string& queue, int64_t known) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every change of a queue's members or owners calls this (PgStore: the
  // triggers of migrations 19 and 22), after the change.
  void MoveGenerationLocked(const std::string& queue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new tenure (part at `epoch`) takes over: an older claim record's items
  // are marked abandoned, one attempt counted each, and the part gets an
  // empty record at `epoch`.
  void AbandonLocked(const std::string& queue, int part, int64_t epoch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<Item> ClaimLocked(const ClaimRequest& req, const std::set<int64_t>& skip)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a fair claim (ClaimRequest::fair) takes from part `cp`, in order.
  std::vector<const StoredItem*> FairLocked(const ClaimRequest& req, const ClaimPart& cp,
                                            absl::Time now, const std::set<int64_t>& skip)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The parts whose items of a key come before part `cp`'s in a grown queue
  // (Store::GrowParts: the part the key had before each grow), for a claim
  // with a key bound; empty without one.
  std::set<int> EarlierPartsLocked(const ClaimRequest& req, const ClaimPart& cp)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a claim that is not fair may take from part `cp`, in (priority, id)
  // order; the caller cuts it to its limits.
  std::vector<const StoredItem*> InOrderLocked(const ClaimRequest& req, const ClaimPart& cp,
                                               absl::Time now, const std::set<int64_t>& skip)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The suspect a claim probes for (ClaimRequest::include_suspect): the
  // first abandoned item, in (priority, id) order, of a part the claiming
  // session owns, and in *epoch that part's epoch; null if none.
  const StoredItem* SuspectLocked(const ClaimRequest& req, absl::Time now,
                                  const std::set<int64_t>& skip, int64_t* epoch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rewrites the claim records of the parts a claim took items from
  // (`taken_in`: part -> epoch): the in-flight ids it was sent, and the
  // items it took (`out`).
  void RecordClaimLocked(const ClaimRequest& req, const std::map<int, int64_t>& taken_in,
                         const std::vector<Item>& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Cancels item `id` of `queue` (Store::CancelItems).
  CancelOutcome::Kind CancelLocked(const std::string& queue, int64_t id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Clock* const clock_;
  mutable absl::Mutex mu_;
  std::map<std::string, QueueConfig> queues_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Session> sessions_ ABSL_GUARDED_BY(mu_);              // by id
  std::map<std::pair<std::string, int>, Owner> owners_ ABSL_GUARDED_BY(mu_);  // (queue, part)
  std::map<int64_t, StoredItem> items_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, int>, ClaimRecord> claims_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, StoredItem> dead_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Result> results_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, StoredItem> cancelled_ ABSL_GUARDED_BY(mu_);  // cancelled_items
  std::vector<OutboxEvent> outbox_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Schedule> schedules_ ABSL_GUARDED_BY(mu_);  // by name
  // What heartbeats reported finished, by queue, minute and session
  // (PgStore's throughput table).
  std::map<std::tuple<std::string, absl::Time, std::string>, FinishCounts> throughput_
      ABSL_GUARDED_BY(mu_);
  // By queue; kept when a queue is deleted, as PgStore keeps its row.
  std::map<std::string, int64_t> generations_ ABSL_GUARDED_BY(mu_);
  // By queue: the owners (part -> session, epoch) as of the last move, and
  // the generation that last changed each part's owner (GroupView::delta).
  std::map<std::string, std::map<int, std::pair<std::string, int64_t>>> last_owners_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<int, int64_t>> owner_changed_ ABSL_GUARDED_BY(mu_);
  int64_t next_epoch_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t next_item_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t next_session_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace partq

#endif  // PARTQ_STORE_MEM_STORE_H_
