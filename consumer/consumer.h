// The worker runtime (docs/architecture.md, Protocols): a Consumer joins a
// queue's group through a coordinator Session, claims ready items of the parts it
// owns, runs a Handler on N threads and finishes each batch in one
// transaction that is fenced by the parts' epochs (see Store::Finish).
//
// Claims are in memory (store.h, "Claims"): no other session reads these
// parts, so a claim is a read and the consumer remembers what it has in
// flight. Per part it keeps a cursor, the last key it claimed, and reads on
// from there, so the items it acked a moment ago (dead in the index until
// vacuum, and for as long as a long transaction holds vacuum back) are not
// walked again. What comes due behind the cursor (retries, delayed items)
// a claim finds through an index of such items alone (store.h, ClaimPart),
// after a poll and at least every `rescan_interval`. An enqueue notice carries the lowest key its
// transaction added to the part; one that sorts behind the cursor (a higher priority, or an earlier
// id that committed late) makes the next claim read from just before it. A part is read from its
// head ("rescan", skipping what is in flight) when it is acquired, on a notice that carries no key
// (an older producer; the listener reconnected), every `rescan_interval` when there are no notices
// (poll_only: from a floor that snapshots say nothing can commit behind instead, and from the head
// every minute; claim_scheduler.h, "poll-only floors"), and always for ordered, key-concurrency
// and fair queues.
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
// Key concurrency (QueueConfig::key_concurrency, read at Start): a claim
// returns an item only while fewer than N older items of its key are live,
// so at most N of a key are in flight at once across the fleet (a key's part
// has one owner); unlike ordered (N = 1), items of a key may finish out of
// order.
//
// Fair queues (QueueConfig::fair_by, read at Start): each part's keys take
// turns in its claims (ClaimRequest::fair), so one key's backlog holds no
// other key back.
//
// Wake-ups: item notices (LISTEN) wake the claimer at once; without them it
// polls every `poll_interval`. With them, an idle worker (its last poll's
// claim found nothing, nothing in flight; not of an ordered or key-bound
// queue, whose held-back items come free without a notice) polls next when
// its parts' first retry or delayed item comes due (Store::NextDue), at the
// latest after `idle_poll_interval`.
//
// The parts: a ClaimScheduler (claim_scheduler.h) decides what to claim and
// holds what is in flight, a BatchRunner (batch_runner.h) runs a batch's
// handlers in its Finish and isolates failures, a FailurePolicy
// (failure_policy.h) turns a failure into a retry or a dead letter, a
// ScheduleFirer (schedule_firer.h) fires the queue's schedules and a
// TableKeeper (table_keeper.h) vacuums the queue's tables while this worker
// owns part 0. This class owns the threads and drives the store.
//
// Lifecycle: Start() joins; Stop() stops claiming, drains in-flight batches
// (bounded by drain_timeout; unstarted items are returned to the queue),
// leaves the group so others take the parts at once, and joins all threads.
// Handler calls started during the drain end by its end, none starts after
// it, and the calls still running then are given up (HandlerCall::cancel;
// their items go back unfinished, no attempt used), so Stop ends within
// drain_timeout plus what a handler takes to notice (the exec handler: at
// once; http: within about a second; an in-process handler that ignores
// its deadline: when it returns).
// Start, Stop and Abandon keep the rules of base/service.h (Stop is safe
// before Start and twice; a stopped consumer does not start again). All
// methods are thread-safe.
#ifndef PARTQ_CONSUMER_CONSUMER_H_
#define PARTQ_CONSUMER_CONSUMER_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/log_limiter.h"
#include "base/service.h"
#include "consumer/batch.h"
#include "consumer/batch_runner.h"
#include "consumer/claim_scheduler.h"
#include "consumer/failure_policy.h"
#include "consumer/handler.h"
#include "coordinator/session.h"
#include "store/store.h"

namespace partq {

class ConsumerMetrics;
class QueueCollector;
struct SharedStore;
class StorePool;
class ScheduleFirer;
class TableKeeper;

struct ConsumerOptions {
  std::string queue;
  int concurrency = 4;         // worker threads (each one connection)
  int batch = 100;             // items per claim and per ack transaction
  // Payload bytes per claim, at most (ClaimSchedulerOptions::max_claim_bytes; 0: no bound, and
  // the claims' cheaper statements): a worker holds about concurrency x 2 claims' payloads.
  int64_t claim_bytes = 0;
  std::string instance_id;     // static membership (see SessionOptions)
  bool leave_on_stop = false;  // a static member leaves on Stop() (SessionOptions)
  bool poll_only = false;      // no LISTEN (PgBouncer transaction pooling)
  absl::Duration poll_interval = absl::Seconds(1);
  // With LISTEN: once a poll's claim finds nothing and nothing is in flight,
  // the next poll waits until the first retry or delayed item of its parts
  // comes due (Store::NextDue), a notice, or this long, whichever is first:
  // an idle worker costs its heartbeats and not a claim a second. What it
  // still finds by this poll alone: items written without a notice (an
  // INSERT into the items table by hand).
  absl::Duration idle_poll_interval = absl::Seconds(60);
  // poll_only: every part is read from its head, or its poll floor, at least this often (see
  // above); with LISTEN, the notices say where to read, and a busy part's
  // claims look for what came due behind its cursor this often.
  absl::Duration rescan_interval = absl::Seconds(1);
  absl::Duration heartbeat_interval = absl::ZeroDuration();  // zero: TTL / 3
  absl::Duration drain_timeout = absl::Seconds(10);
  absl::Duration handler_timeout = absl::Minutes(5);  // longer counts as a failure
  BackoffPolicy backoff;
  absl::Duration retry_backoff = absl::Milliseconds(200);  // after database errors
  // With metrics: how often the queue's collector (the owner of part 0)
  // refreshes the depth gauges (coordinator/queue_collector.h).
  absl::Duration status_interval = absl::Seconds(5);
  // While this worker owns part 0 it fires the queue's schedules
  // (schedule_firer.h): it asks the database at each due tick and at least
  // this often, which is how soon a schedule added meanwhile starts firing.
  absl::Duration schedule_poll_interval = absl::Seconds(5);
  // A queue that has no schedule is asked about once per
  // quiet_poll_interval instead, and an idle queue's depth gauges are read
  // that often: with LISTEN, a schedule added, an enqueue or any change of
  // the group wakes them (Notice): the firer at once, the gauges once
  // status_interval has passed since their last read. Zero: as the
  // intervals above.
  absl::Duration quiet_poll_interval = absl::Seconds(60);
  // While this worker owns part 0 it vacuums the queue's tables
  // (table_keeper.h) when the statistics say they passed their threshold,
  // looking this often; zero: never (autovacuum alone keeps them).
  absl::Duration vacuum_interval = absl::Seconds(10);
  // When the table keeper runs: empty, while this consumer owns its queue's
  // part 0. The tables are every queue's, so a Worker of several queues
  // gives one consumer "while this process owns any of its queues' part 0"
  // and the others a vacuum_interval of zero.
  std::function<bool()> keeps_tables;
  // The one connection the part-0 jobs (collector, firer, keeper) take turns
  // on (store/shared_store.h); null: the consumer's own. A Worker gives all
  // its consumers one.
  std::shared_ptr<SharedStore> part0_store;
  // Heartbeat in one transaction with the process's other sessions
  // (coordinator/heartbeat_hub.h); null: on the session's connection. A
  // Worker of several queues gives all its consumers one.
  std::shared_ptr<HeartbeatHub> heartbeat_hub;
  // Wait for notices on the process's one LISTEN connection
  // (coordinator/notice_hub.h); null: the session's. A Worker of several
  // queues gives all its consumers one.
  std::shared_ptr<NoticeHub> notice_hub;
  // Claim on connections borrowed from this pool (store/store_pool.h) for one
  // claim at a time; null: on the claimer's own. A Worker of several queues
  // gives all its consumers one.
  std::shared_ptr<StorePool> claim_pool;
  // Non-zero: a Worker's sweep (consumer/worker.h) asks, for all its queues in one read, which
  // hold an item or a due schedule every idle_poll_interval and pokes those (Poke), so this
  // consumer's idle claimer and quiet part-0 jobs wait on their own (beside notices and the
  // due times they know) only this long, instead of idle_poll_interval and
  // quiet_poll_interval each. A Worker of several queues sets it (an hour) unless poll_only.
  absl::Duration swept_poll_interval = absl::ZeroDuration();
  // Every time read, sleep and timed wait of the consumer, its session, its
  // queue collector, its schedule firer and its table keeper (polls, rescans,
  // the drain, handler deadlines, backoff after database errors) goes through
  // this clock. A test passes a ManualClock (and a MemDatabase on the same
  // clock). Must outlive the consumer.
  Clock* clock = Clock::Real();
};

// Counters a test or a status line can read without a metrics registry.
struct ConsumerStats {
  int64_t claimed = 0;
  int64_t acked = 0;
  int64_t retried = 0;  // throttled ones included
  // Of the retried: throttled (Throttled, handler.h), their attempt given back.
  int64_t throttled = 0;
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
  // What a poll does, now: the claimer reads its parts, and (while this consumer owns part 0)
  // the firer and the collector look at once. A Worker's sweep calls it (swept_poll_interval).
  void Poke();

  const Session& session() const { return *session_; }
  const std::string& queue() const { return options_.queue; }
  const ConsumerOptions& options() const { return options_; }
  // Items waiting for a worker plus items being processed.
  int64_t in_flight() const;

 private:
  // Start's work, between the lifecycle's BeginStart and EndStart.
  absl::Status StartThreads();
  // PartListener (called on the session thread).
  void OnRevoke(const std::vector<OwnedPart>& parts) override;
  void OnAssign(const std::vector<OwnedPart>& parts) override;
  void OnLost(const std::vector<OwnedPart>& parts) override;

  void ClaimLoop();
  // Whether the claim loop may claim: an idle worker with nothing queued
  // for it, and no claim under way.
  bool RoomLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The claim loop's wait: until a claim may go out, `next_poll`, a rate
  // budget allows an item, a stop, or the failure log's window with
  // dropped lines ends. Returns the line that says how many were dropped
  // when that window has ended (empty if not), for the caller to log once
  // it has let go of mu_: a logger that blocks must not stall the workers.
  std::string AwaitClaimLocked(absl::Time next_poll) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WorkLoop(int index);
  // Finishes one batch (claiming ahead when due); kFailed if it must be
  // retried (database error), with `batch` cut down to what did not commit
  // (an isolating run's earlier transactions may have). `*kept` gets the
  // batch this worker must run next on `store` (its transaction is begun
  // already), if any. Retry delays draw their jitter from `gen`.
  enum class Processed { kDone, kStopped, kFailed };  // kStopped: Run's stop signal
  // `flush_alone`: `batch` is empty, and the Finish writes the deferred
  // failures (Deferred, below) alone.
  Processed Process(Store& store, absl::BitGenRef gen, Batch& batch, std::optional<Batch>* kept,
                    bool flush_alone = false);
  // A Finish of what an isolating run left, `left` of `batch` (now in
  // `rest`), failed after the earlier ones committed `r` (since `t0`, with
  // `notes`): reports and counts what committed and releases it, and cuts
  // `batch` down to `rest`.
  void CutToUncommitted(const FinishResult& r, const std::vector<FailureNote>& notes,
                        const absl::flat_hash_set<int64_t>& left, absl::Time t0, Batch& rest,
                        Batch& batch) ABSL_LOCKS_EXCLUDED(mu_);
  // The end of Process, once the Finish of `batch` (begun at `t0`) gave
  // `r`: accepts the claim ahead in it (`ahead`, begun at `claim_started`;
  // `*kept` as for Process) or fails it, then counts the finished items, or
  // logs and counts the error.
  Processed Settle(absl::StatusOr<FinishResult> r, const std::optional<ClaimRequest>& ahead,
                   absl::Time claim_started, const Batch& batch, absl::Time t0,
                   std::optional<Batch>* kept) ABSL_LOCKS_EXCLUDED(mu_);
  // A failure that an exec or http handler reported for one item
  // (Handler::StatusesAreFinal: its reply, whose effects are applied per
  // item) is not written by the batch's own ack but later, with others, in
  // one Finish: the ack stays the lean statement (issue 49: the general
  // Finish for every batch with a failure cost 16-27 % of the drain at 1 %
  // failing). Until then the item stays in flight: the scheduler holds it,
  // its part's claim record lists it, its key stays taken, and a revoke
  // waits for it. Written when kDeferredMax are waiting, when the oldest has
  // waited kDeferredAge (its retry delay counts from then), or at once when
  // a revoke waits (flush_now_): on the next Finish a worker runs, or alone
  // by an idle worker.
  struct Deferred {
    Item item;
    FailureNote note;
  };
  static constexpr size_t kDeferredMax = 64;
  static constexpr absl::Duration kDeferredAge = absl::Milliseconds(200);
  // The Finish body of Process: the runner for the batch's own items among
  // `owned`, the notes' outcomes for those of `flushing`; what it defers of
  // the batch's failures into *deferring (the last call's).
  absl::StatusOr<std::vector<Outcome>> RunBody(Tx& tx, absl::Span<const Item> owned,
                                               const std::vector<Deferred>& flushing,
                                               const SessionId& session, absl::BitGenRef gen,
                                               Batch& batch, bool* need_isolation,
                                               std::vector<Deferred>* deferring);
  // Outcomes in *outs (for `run`) of failures to defer become kLeave; their
  // items and notes go to *deferring.
  void DeferFailures(const Batch& batch, absl::Span<const Item> run, std::vector<Outcome>* outs,
                     std::vector<Deferred>* deferring) const;
  // The items a Finish of `batch` finishes when it defers `deferring` and
  // writes `flushing` (what its claim ahead must not count as in flight).
  static std::vector<Item> Finishing(const Batch& batch, const std::vector<Deferred>& deferring,
                                     const std::vector<Deferred>& flushing);
  // Whether `item`'s part is still this session's at the item's epoch
  // (held, or being revoked): its failure can still be written.
  bool DeferrableLocked(const Item& item) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the deferred failures are due to be written.
  bool FlushDueLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The deferred failures, taken out to be written: when due, or (`all`)
  // whenever there are any.
  std::vector<Deferred> TakeDeferredLocked(bool all) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After Process: if its first transaction committed (`flushed`), what it
  // flushed is released and what it deferred stays in flight (out of
  // `batch`, whose items the worker releases); else the flushed ones wait
  // for the next flush.
  void SettleDeferred(bool flushed, std::vector<Deferred> deferring, std::vector<Deferred> flushing,
                      Batch& batch) ABSL_LOCKS_EXCLUDED(mu_);
  // Deferred failures of parts this session no longer holds: released
  // unwritten (their Finish would be fenced; the next owner counts them).
  void DropDeferredLocked(const std::vector<int>& parts) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same for those `drop` picks (TakeDeferredLocked: not ours at their epoch).
  void DropDeferredLocked(absl::FunctionRef<bool(const Item&)> drop)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker's wait for a batch, or for deferred failures to come due.
  void AwaitWorkLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Connections move between the claimer and the workers: an idle worker
  // parks its own (parked_), the claimer claims on a parked one when it has
  // none, and the connection of a claim that left a transaction begun
  // (Store::Begun) goes to the next idle worker (handoffs_), which takes it
  // with the first queued batch: its Finish continues that transaction, no
  // BEGIN between an idle worker's claim and its handler. The batches stay
  // in the scheduler's queue until then, so a revoke, a loss or Abandon
  // drops them as ever, and claims ahead count them. A waking worker takes
  // a handoff's connection, or a parked one: the worker threads and the
  // claimer share connections.
  //
  // The claimer's connection for its next claim (`*parked`: it was a
  // worker's, which goes back to parked_ when the claim keeps it).
  std::unique_ptr<Store> ClaimStore(bool* parked) ABSL_LOCKS_EXCLUDED(mu_);
  // Asks `store` (nullptr: none could connect) for a snapshot's bounds and
  // tells the scheduler (ClaimScheduler::NoteSnapshot: poll-only floors).
  void NoteSnapshot(Store* store) ABSL_LOCKS_EXCLUDED(mu_);
  // After a claim that found nothing, ended at `claim_end`: the worker may
  // wait for what comes due instead of polling (NextIdlePoll).
  bool IdleLocked(absl::Time claim_end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives the claim loop's connection back after a claim (ClaimStore says
  // whose it is): returns it when it is the loop's own, else nullptr.
  std::unique_ptr<Store> ReturnClaimStore(std::unique_ptr<Store> store, bool parked)
      ABSL_LOCKS_EXCLUDED(mu_);
  // After a claim that left a transaction begun on `store`: a handoff, while
  // a batch is queued for it; else (stopping, or nothing queued) the store is
  // returned, for the caller to close outside the lock (the server rolls the
  // transaction back).
  std::unique_ptr<Store> HandOffLocked(std::unique_ptr<Store> store)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A waking worker takes the first handoff with the first queued batch (its
  // store into `*store`); false when there is no handoff, or no batch, when
  // the handoffs' stores go to `*closing`, to be closed outside the lock.
  bool TakeHandoffLocked(Batch* batch, std::unique_ptr<Store>* store,
                         std::vector<std::unique_ptr<Store>>* closing)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // What a Finish of `items` committed, into the stats and metrics.
  void CountLocked(const FinishResult& r, const std::vector<Item>& items, absl::Time start,
                   absl::Time end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A claim took `n` items, into the stats and metrics.
  void CountClaimedLocked(int64_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The failures of `notes` that `r` committed (retried or dead-lettered):
  // logged (warning; info when throttled, but a warning once a minute, so
  // that a worker told to wait says so at the default level; through
  // failure_log_) and counted by kind (partq_item_failures_total{reason},
  // stats_.throttled).
  void ReportFailures(const std::vector<FailureNote>& notes, const FinishResult& r)
      ABSL_LOCKS_EXCLUDED(mu_);

  const StoreFactory factory_;
  const ConsumerOptions options_;
  Clock* const clock_;
  Handler* const handler_;
  ConsumerMetrics* const metrics_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<QueueCollector> collector_;  // with metrics only
  std::unique_ptr<ScheduleFirer> firer_;       // fires while we own part 0
  std::unique_ptr<TableKeeper> keeper_;        // vacuums while we own part 0
  QueueConfig config_;
  // Made by Start from the queue's config, before the threads; read-only
  // (and thread-safe) after that.
  std::unique_ptr<BatchRunner> runner_;

  // Item failure lines: at most 10 lines (16 KiB) every 10 s; the rest
  // counted, and said with the next line or at Stop.
  // Lines only (each is short: its error is cut), admitted before it is made.
  LogLimiter failure_log_{10, INT64_MAX, absl::Seconds(10), clock_};
  // A failure line was dropped since the claim loop last looked: it waits
  // for the window's end to log their count.
  bool failures_dropped_ ABSL_GUARDED_BY(mu_) = false;
  // When a throttled failure was last logged as a warning (unix µs).
  std::atomic<int64_t> throttle_warned_us_{INT64_MIN};

  StartStop lifecycle_;
  mutable absl::Mutex mu_;
  // What to claim, and what is in flight (its locking contract: claim_scheduler.h).
  ClaimScheduler scheduler_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int idle_workers_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<std::unique_ptr<Store>> handoffs_ ABSL_GUARDED_BY(mu_);  // Store::Begun()
  bool noticed_ ABSL_GUARDED_BY(mu_) = false;  // a notice of items since the last claim
  std::vector<std::unique_ptr<Store>> parked_ ABSL_GUARDED_BY(mu_);
  std::vector<Deferred> deferred_ ABSL_GUARDED_BY(mu_);  // failures not written yet
  absl::Time deferred_since_ ABSL_GUARDED_BY(mu_);       // when the oldest was deferred
  bool flush_now_ ABSL_GUARDED_BY(mu_) = false;          // a revoke waits for them
  // Parts OnRevoke is draining, at their epochs: out of the scheduler, ours
  // until released.
  absl::flat_hash_map<int, Epoch> revoking_ ABSL_GUARDED_BY(mu_);
  absl::Time NextIdlePoll(Store& store, const std::vector<int>& parts, absl::Time now);
  bool holds_back_ = false;  // ordered or key-bound: never idle (Start sets it)
  // When the database last failed a claim or an ack (a failover, a restart):
  // for idle_poll_interval after it the claimer polls as before and never
  // waits idle, as its listener may still be reconnecting, its notices lost.
  std::atomic<int64_t> last_store_failure_ns_{INT64_MIN};  // absl::ToUnixNanos
  int due_now_streak_ = 0;  // NextIdlePoll's answers in a row that were "now" (claimer only)
  ConsumerStats stats_ ABSL_GUARDED_BY(mu_);

  std::thread claimer_;
  std::vector<std::thread> workers_;
};

}  // namespace partq

#endif  // PARTQ_CONSUMER_CONSUMER_H_
