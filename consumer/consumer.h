// The worker runtime (DESIGN.md protocols 5-9): a Consumer joins a queue's
// group through a coordinator Session, claims ready items of the parts it
// owns, runs a Handler on N threads and finishes each batch in one
// transaction that is fenced by the parts' epochs (see Store::Finish).
//
// Threads: one claimer (one connection) claims up to `batch` items at a time
// in (priority, id) order — no other session reads those parts, so claims do
// not contend — and hands batches to `concurrency` workers, each with its own
// connection and transaction. At most `concurrency` batches are in flight plus
// one prefetched. An item whose previous claim was abandoned (its worker died
// mid-item) runs alone, so a poison item that kills the process takes no
// other item down with it; once its claims pass max_attempts it is
// dead-lettered without running ("crash loop").
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
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "consumer/backoff.h"
#include "consumer/handler.h"
#include "coordinator/session.h"
#include "coordinator/store.h"

namespace partq {

class ConsumerMetrics;
class QueueCollector;

struct ConsumerOptions {
  std::string queue;
  int concurrency = 4;  // worker threads (each one connection)
  int batch = 100;      // items per claim and per ack transaction
  std::string instance_id;  // static membership (see SessionOptions)
  bool poll_only = false;   // no LISTEN (PgBouncer transaction pooling)
  absl::Duration poll_interval = absl::Seconds(1);
  // How often a claim also looks for abandoned claims (items whose worker
  // died mid-item) in parts it has owned for a while. Newly assigned parts are
  // probed on every claim until a probe comes back clean: only an earlier
  // owner leaves abandoned claims, so after that the probe is a safety net
  // (for one that sorted behind a long ready backlog). Zero: every claim.
  absl::Duration suspect_probe_interval = absl::Seconds(1);
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
  const Session& session() const { return *session_; }
  // Items waiting for a worker plus items being processed.
  int64_t in_flight() const;

 private:
  struct Batch {
    std::vector<Item> items;
    bool isolate = false;  // run each item under its own savepoint
  };

  // PartListener (called on the session thread).
  void OnRevoke(const std::vector<OwnedPart>& parts) override;
  void OnAssign(const std::vector<OwnedPart>& parts) override;
  void OnLost(const std::vector<OwnedPart>& parts) override;

  void ClaimLoop();
  void WorkLoop(int index);
  // Finishes one batch; returns false if it must be retried (database error).
  bool Process(Store& store, Batch& batch);
  absl::StatusOr<std::vector<Outcome>> RunHandlers(Tx& tx, absl::Span<const Item> items,
                                                   bool isolate, bool* need_isolation);
  Outcome Failure(const Item& item, const std::string& error);
  void DropQueuedLocked(const std::vector<int>& parts) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Wake();

  const StoreFactory factory_;
  const ConsumerOptions options_;
  Handler* const handler_;
  ConsumerMetrics* const metrics_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<QueueCollector> collector_;  // with metrics only
  QueueConfig config_;

  mutable absl::Mutex mu_;
  std::map<int, Epoch> parts_ ABSL_GUARDED_BY(mu_);  // claimable parts
  std::deque<Batch> queue_ ABSL_GUARDED_BY(mu_);     // claimed, not yet started
  std::map<int, int> busy_parts_ ABSL_GUARDED_BY(mu_);  // part -> items being processed
  bool suspect_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  // Abandoned-claim probes: parts were assigned (assigned_gen_ counts
  // OnAssign calls) since the last probe that came back clean (clean_gen_,
  // the assigned_gen_ it was issued at).
  int64_t assigned_gen_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t clean_gen_ ABSL_GUARDED_BY(mu_) = -1;
  absl::Time last_probe_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool claiming_ ABSL_GUARDED_BY(mu_) = false;  // a Claim call is under way
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  int idle_workers_ ABSL_GUARDED_BY(mu_) = 0;
  ConsumerStats stats_ ABSL_GUARDED_BY(mu_);

  std::thread claimer_;
  std::vector<std::thread> workers_;
};

}  // namespace partq

#endif  // PARTQ_CONSUMER_CONSUMER_H_
