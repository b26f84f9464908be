// The worker runtime (DESIGN.md protocols 5-9): a Consumer joins a queue's
// group through a coordinator Session, claims ready items of the parts it
// owns, runs a Handler on N threads and finishes each batch in one
// transaction that is fenced by the parts' epochs (see Store::Finish).
//
// Claims are in memory (store.h, "Claims"): no other session reads these
// parts, so a claim is a read and the consumer remembers what it has in
// flight. Per part it keeps a cursor, the last key it claimed, and reads on
// from there, so the items it acked a moment ago (dead in the index until
// vacuum) are not walked again. It reads from the part's head instead
// ("rescan", skipping what is in flight) when it gets the part, when an
// enqueue notice names the part (a new item may sort before the cursor: a
// higher priority, or an earlier id that committed late), at least every
// `rescan_interval` (retries and delayed items come due behind the cursor),
// and always for ordered queues.
//
// Threads: workers (`concurrency`, each with its own connection and
// transaction) finish batches and, when the queue of claimed batches is
// running dry, claim the next batch in the same statement as the ack ("claim
// ahead": no extra round trip, no extra transaction). A claimer thread (one
// connection) claims when a worker is idle and no claim is under way: after
// a notice, a poll or an assignment. One claim at a time per consumer, so
// cursors and the in-flight set stay consistent. An item whose previous
// attempt was abandoned (its worker died mid-item) runs alone, so a poison
// item that kills the process takes no other item down with it; once its
// attempts pass max_attempts it is dead-lettered without running ("crash
// loop").
//
// Ordered queues: a claim returns only the oldest live item of each key, so a
// key has one item in flight at a time and items of a key finish in enqueue
// order, retries included.
//
// Wake-ups: item notices (LISTEN) wake the claimer at once; without them it
// polls every `poll_interval`.
//
// Lifecycle: Start() joins; Stop() stops claiming, drains in-flight batches
// (bounded by drain_timeout; unstarted items are returned to the queue),
// leaves the group so others take the parts at once, and joins all threads.
// Stop is safe before Start and twice. All methods are thread-safe.
#ifndef PARTQ_CONSUMER_CONSUMER_H_
#define PARTQ_CONSUMER_CONSUMER_H_

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "consumer/backoff.h"
#include "consumer/handler.h"
#include "coordinator/session.h"
#include "store/store.h"

namespace partq {

class ConsumerMetrics;
class QueueCollector;

struct ConsumerOptions {
  std::string queue;
  int concurrency = 4;      // worker threads (each one connection)
  int batch = 100;          // items per claim and per ack transaction
  std::string instance_id;  // static membership (see SessionOptions)
  bool poll_only = false;   // no LISTEN (PgBouncer transaction pooling)
  absl::Duration poll_interval = absl::Seconds(1);
  // Every part is read from its head at least this often (see above).
  absl::Duration rescan_interval = absl::Seconds(1);
  absl::Duration heartbeat_interval = absl::ZeroDuration();  // zero: TTL / 4
  absl::Duration drain_timeout = absl::Seconds(10);
  absl::Duration handler_timeout = absl::Minutes(5);  // longer counts as a failure
  BackoffPolicy backoff;
  absl::Duration retry_backoff = absl::Milliseconds(200);  // after database errors
  // With metrics: how often the queue's collector (the owner of part 0)
  // refreshes the depth gauges (coordinator/queue_collector.h).
  absl::Duration status_interval = absl::Seconds(5);
};

// Counters a test or a status line can read without a metrics registry.
struct ConsumerStats {
  int64_t claimed = 0;
  int64_t acked = 0;
  int64_t retried = 0;
  int64_t dead = 0;
  int64_t fenced = 0;
  int64_t finish_errors = 0;
};

class Consumer : private PartListener {
 public:
  // `handler` must outlive the consumer; `metrics` may be null, else it must
  // outlive the consumer, and the consumer also reports its session's metrics
  // and (while it owns part 0) the queue's depth there.
  Consumer(StoreFactory factory, ConsumerOptions options, Handler* handler,
           ConsumerMetrics* metrics = nullptr);
  ~Consumer() override;
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  // Joins the group, runs the handler's Setup and starts the threads.
  absl::Status Start();
  // Graceful stop (see above).
  void Stop();
  // Stops at once without draining, releasing or leaving: like a crash, for
  // tests. Parts move only after the session TTL.
  void Abandon();

  ConsumerStats stats() const;

  // Isolating a failed batch (see Handler::HandleBatch): whether running
  // `items` that succeeded in the batch attempt together again, under one
  // savepoint, is expected to cost less than running each alone under its
  // own, when such reruns fail at `rerun_failure_rate`, an item's handler
  // takes `item_cost` and a savepoint (with its release) `savepoint_cost`.
  static bool GroupRoundPays(double rerun_failure_rate, size_t items, absl::Duration item_cost,
                             absl::Duration savepoint_cost);
  const Session& session() const { return *session_; }
  // Items waiting for a worker plus items being processed.
  int64_t in_flight() const;

 private:
  struct Batch {
    std::vector<Item> items;
    bool isolate = false;  // rerun with savepoints: a group, and the blamed items alone
    // A lone item that failed in a transaction that was rolled back: its id
    // and error, so the rerun records the failure without running it again.
    std::optional<std::pair<int64_t, std::string>> failed_alone;
    // After a batch attempt that failed: the items whose handler reported a
    // failure, when it could tell (a status for every item, in time). Empty:
    // it could not, and on the isolating run every item runs alone.
    std::vector<int64_t> blamed;
    absl::Duration item_cost;  // the batch attempt's handler time per item
    // Items the isolating run left for another transaction (its savepoints
    // reached kMaxKeptSavepoints); Process finishes them next.
    std::vector<int64_t> left;
  };
  // What the consumer knows of a part it owns.
  struct PartState {
    Epoch epoch;
    std::optional<ItemKey> cursor;  // the last key claimed in this tenure
    bool rescan = true;             // the next claim reads from the head
    bool hungry = true;             // may have ready items: claims include it
    // Its last read stopped at the claim's limit: it likely has a batch's
    // worth more, so a claim that starts here need not list other parts.
    bool full = false;
    absl::Time last_rescan = absl::InfinitePast();
    int64_t noticed = 0;  // notice_gen_ at the last notice or poll for it
  };

  // PartListener (called on the session thread).
  void OnRevoke(const std::vector<OwnedPart>& parts) override;
  void OnAssign(const std::vector<OwnedPart>& parts) override;
  void OnLost(const std::vector<OwnedPart>& parts) override;

  void ClaimLoop();
  void WorkLoop(int index);
  // Finishes one batch (claiming ahead when due); returns false if it must be
  // retried (database error), with `batch` cut down to what did not commit
  // (an isolating run's earlier transactions may have). `*kept` gets the
  // batch this worker must run next on `store` (its transaction is begun
  // already), if any.
  bool Process(Store& store, Batch& batch, std::optional<Batch>* kept);
  absl::StatusOr<std::vector<Outcome>> RunHandlers(Tx& tx, absl::Span<const Item> items,
                                                   Batch& batch, bool* need_isolation);
  Outcome Failure(const Item& item, const std::string& error);
  // What a Finish of `items` committed, into the stats and metrics.
  void CountLocked(const FinishResult& r, const std::vector<Item>& items, absl::Time start,
                   absl::Time end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `items` are finished (or given up): no longer busy or in flight.
  void ReleaseLocked(const std::vector<Item>& items) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Isolating runs (RunHandlers): `runs` items that succeeded in their batch
  // attempt ran again, and `failed` of them failed.
  void NoteRerun(size_t runs, size_t failed) ABSL_LOCKS_EXCLUDED(mu_);
  // How often an item that succeeded in its batch attempt failed when run
  // again, lately (0 before any rerun).
  double RerunFailureRate() const ABSL_LOCKS_EXCLUDED(mu_);
  // A claim for `batches` batches (0: only the suspect probe), or nullopt
  // when there is nothing worth reading; `finishing` are the items being
  // finished by the call that carries the claim.
  std::optional<ClaimRequest> MakeClaimLocked(const SessionId& session, int batches,
                                              const std::vector<Item>& finishing)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes a claim's result: cursors, in-flight set, queued batches; with
  // `keep`, its first batch goes there (counted busy) instead of the queue.
  void AcceptClaimLocked(const ClaimRequest& req, std::vector<Item> items, absl::Time started,
                         Batch* keep = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool WantClaimLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropQueuedLocked(const std::vector<int>& parts) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The part may have items no claim has seen: read it from its head.
  void MarkLocked(PartState& st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Items may have come (part -1: any part): read the part from its head.
  void NoticeLocked(int part) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The poll: quiet parts may have items that came without a notice.
  void PollLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const StoreFactory factory_;
  const ConsumerOptions options_;
  Handler* const handler_;
  ConsumerMetrics* const metrics_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<QueueCollector> collector_;  // with metrics only
  QueueConfig config_;

  mutable absl::Mutex mu_;
  std::map<int, PartState> parts_ ABSL_GUARDED_BY(mu_);               // claimable parts
  absl::flat_hash_map<int64_t, int> in_flight_ ABSL_GUARDED_BY(mu_);  // claimed id -> part
  std::deque<Batch> queue_ ABSL_GUARDED_BY(mu_);                      // claimed, not yet started
  std::map<int, int> busy_parts_ ABSL_GUARDED_BY(mu_);  // part -> items being processed
  int64_t suspect_id_ ABSL_GUARDED_BY(mu_) = 0;         // the suspect in flight; 0: none
  // The last probe found a suspect (or parts came that may hold some): the
  // ack of a suspect probes for the next one.
  bool suspects_pending_ ABSL_GUARDED_BY(mu_) = true;
  size_t rotation_ ABSL_GUARDED_BY(mu_) = 0;    // first part of the next claim, if not all fit
  bool claiming_ ABSL_GUARDED_BY(mu_) = false;  // a claim is under way
  // Counts notices and polls; a claim started at claim_gen_ does not clear a
  // part's rescan if the part was noticed after that.
  int64_t notice_gen_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_poll_ ABSL_GUARDED_BY(mu_) = absl::Now();  // PollLocked
  int64_t claim_gen_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  int idle_workers_ ABSL_GUARDED_BY(mu_) = 0;
  ConsumerStats stats_ ABSL_GUARDED_BY(mu_);
  // Decayed counts of items rerun by isolating runs and of those that failed
  // (NoteRerun).
  double rerun_runs_ ABSL_GUARDED_BY(mu_) = 0;
  double rerun_failed_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread claimer_;
  std::vector<std::thread> workers_;
};

}  // namespace partq

#endif  // PARTQ_CONSUMER_CONSUMER_H_
