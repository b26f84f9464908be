// Runs a batch's handlers inside the transaction that finishes it (the body
// of Store::Finish), and isolates a batch in which an item failed, so one
// failure never drops another's writes (consumer/README.md, "How a batch
// flows", step 4):
//
//   batch attempt   every item in one HandleBatch call. All OK: all acked.
//                   Any failure (or a throw, or too few statuses, or over the
//                   handler timeout): the body returns an error so that the
//                   transaction rolls back, and the batch is to run again,
//                   isolating (what it learned, the blamed items and the cost
//                   per item, is kept in the Batch).
//   isolating run   the items the attempt did not blame together under one
//                   savepoint, when that is expected to pay (GroupRoundPays);
//                   a group that fails again sheds the items it blames, up to
//                   kGroupRounds. Then the rest each alone under a savepoint.
//                   A failure is recorded (FailurePolicy) only from a run of
//                   the item alone. At most kMaxKeptSavepoints savepoints are
//                   kept per transaction; the items beyond are left (kLeave,
//                   listed in Batch::left) for the next transaction.
//   a lone item     a batch of one runs without a savepoint; if it fails, the
//                   rollback takes its writes and the rerun records the
//                   failure without running the handler again.
//   final statuses  a handler whose statuses are final (exec, http:
//                   Handler::StatusesAreFinal) runs once, and each item's
//                   status is recorded as it is in the same transaction: no
//                   rollback, no savepoint, nothing sent again. After a
//                   failure without blame (no statuses) each item runs alone,
//                   in the same transaction.
//   throttled       items whose handler answered Throttled (handler.h) did
//                   nothing: the isolating run records their retries (the
//                   attempt given back) without running them again, alone
//                   or in a group, so a 429 for a whole batch costs one
//                   rollback, not one request per item.
//
//   stopping        once the consumer stops (StopBy), calls end by the end
//                   of its drain and none starts after it; at the drain
//                   timeout the calls under way are given up (CancelCalls).
//                   The run then returns the stop signal: the transaction
//                   rolls back and the items go back unfinished, no attempt
//                   used (a call cut short by the stop is not their failure).
//
// Thread-safe: one runner serves every worker of a consumer at once (each
// with its own transaction and batch); the only state it shares between
// them is the recent rerun failure rate, behind its own mutex.
#ifndef PARTQ_CONSUMER_BATCH_RUNNER_H_
#define PARTQ_CONSUMER_BATCH_RUNNER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/clock.h"
#include "consumer/batch.h"
#include "consumer/failure_policy.h"
#include "consumer/handler.h"
#include "store/store.h"

namespace partq {

class ConsumerMetrics;

class BatchRunner {
 public:
  // A failed group round: how many rounds a group may try before its items
  // run alone.
  static constexpr int kGroupRounds = 8;
  // Savepoints that succeeded (a group's, items alone) that one transaction
  // keeps: room under PostgreSQL's 64 cached subtransactions per session,
  // with some left for the handler's own.
  static constexpr int kMaxKeptSavepoints = 48;

  // `handler`, `clock` and `metrics` (null: none) must outlive the runner.
  // Handler calls get deadlines `handler_timeout` after they start, on
  // `clock`; a call that returns later has failed.
  BatchRunner(Handler* handler, FailurePolicy failures, absl::Duration handler_timeout,
              Clock* clock, ConsumerMetrics* metrics);
  BatchRunner(const BatchRunner&) = delete;
  BatchRunner& operator=(const BatchRunner&) = delete;

  // The Finish body for `batch`: runs the handlers of `items` (those of the
  // batch still owned) in `tx` for session `session`, returning one Outcome
  // per item, in order. Retry delays draw their jitter from `gen`. The
  // failures it records are noted in batch.failures (of this run only).
  // Without batch.isolate this is the batch attempt: when it fails it records
  // what it learned in `batch`, sets *need_isolation and returns an error
  // (Finish then rolls back), and the caller runs the batch again with
  // batch.isolate set. An isolating run fills batch.left. Other errors are
  // the transaction's (a savepoint statement failed).
  absl::StatusOr<std::vector<Outcome>> Run(Tx& tx, absl::Span<const Item> items,
                                           const SessionId& session, absl::BitGenRef gen,
                                           Batch& batch, bool* need_isolation);

  // Whether running `items` that succeeded in the batch attempt together
  // again, under one savepoint, is expected to cost less than running each
  // alone under its own, when such reruns fail at `rerun_failure_rate`, an
  // item's handler takes `item_cost` and a savepoint (with its release)
  // `savepoint_cost`.
  static bool GroupRoundPays(double rerun_failure_rate, size_t items, absl::Duration item_cost,
                             absl::Duration savepoint_cost);

  // How often an item that succeeded in its batch attempt failed when run
  // again, lately (0 before any rerun).
  double RerunFailureRate() const ABSL_LOCKS_EXCLUDED(mu_);

  // The consumer stops (Consumer::Stop): handler calls that start from now
  // on end by `deadline`, the end of its drain, and none starts after it
  // (Run returns the stop signal, so the transaction rolls back and its
  // items go back unfinished).
  void StopBy(absl::Time deadline);
  // The drain timeout passed: the calls under way are given up too
  // (HandlerCall::cancel), and Run returns the stop signal after them.
  void CancelCalls();
  // Whether `status` is the stop signal Run returns.
  static bool IsStopSignal(const absl::Status& status);
  // StopBy was called.
  bool Stopping() const { return stop_deadline_ns_.load() != INT64_MAX; }

 private:
  // Isolating runs: `runs` items that succeeded in their batch attempt ran
  // again, and `failed` of them failed.
  void NoteRerun(size_t runs, size_t failed) ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `call` alone, with its own deadline; a handler over time has failed
  // (unless its statuses are final: then its status stands).
  absl::Status RunAlone(HandlerCall& call);
  // The deadline of a handler call that starts at `start`.
  absl::Time CallDeadline(absl::Time start) const;
  // Whether handler calls are over: the stop's deadline passed, or they
  // were given up (CancelCalls).
  bool Stopped() const;
  // The run of a handler whose statuses are final (Handler::StatusesAreFinal):
  // the items of `run_index` (positions in `items` and `calls`) in one
  // HandleBatch call, each status recorded as it is into *outcomes; after a
  // failure without blame, each item alone. kBroken if the handler broke its
  // promise (it threw, or gave some statuses but not one per item): the
  // caller rolls back and isolates as for any handler. kStopped: calls are
  // over (Stopped) before it could finish.
  enum class FinalRun { kDone, kBroken, kStopped };
  // `run`: the calls of `run_index`.
  FinalRun RunFinal(absl::Span<const Item> items, std::vector<HandlerCall>& calls,
                    const std::vector<HandlerCall*>& run, const std::vector<size_t>& run_index,
                    absl::BitGenRef gen, Batch& batch, std::vector<Outcome>* outcomes);
  // The steps of Run after it set up its calls, with Run's parameters
  // (`run`: the calls of `run_index`, positions in `items` and `calls`). An
  // error is Run's to return: the stop or isolate signal, or the
  // transaction's.
  //
  // The batch attempt (but of a lone item): every call of `run` in one
  // HandleBatch call, due by `deadline`. OK: all acked into *outcomes.
  absl::Status RunAttempt(absl::Span<const Item> items, std::vector<HandlerCall>& calls,
                          const std::vector<HandlerCall*>& run,
                          const std::vector<size_t>& run_index, absl::Time deadline, Batch& batch,
                          bool* need_isolation, std::vector<Outcome>* outcomes);
  // The isolating run: the throttled items' retries, the group rounds, then
  // the rest alone (fills batch.left).
  absl::Status Isolate(Tx& tx, absl::Span<const Item> items, std::vector<HandlerCall>& calls,
                       const std::vector<HandlerCall*>& run, const std::vector<size_t>& run_index,
                       absl::BitGenRef gen, Batch& batch, std::vector<Outcome>* outcomes);
  // The group rounds of an isolating run over `group` (positions in `run`):
  // what a round acks leaves `group` (its savepoint counted in
  // *kept_savepoints), what it blames goes to `alone`; what is left in
  // `group` at the end runs alone too.
  absl::Status RunGroupRounds(Tx& tx, absl::Span<const Item> items,
                              const std::vector<HandlerCall*>& run,
                              const std::vector<size_t>& run_index, absl::BitGenRef gen,
                              Batch& batch, std::vector<Outcome>* outcomes,
                              std::vector<size_t>& group, std::vector<size_t>& alone,
                              int* kept_savepoints);
  // The items of `alone` (positions in `run`, in order) each alone
  // under a savepoint, `kept_savepoints` kept already; those beyond
  // kMaxKeptSavepoints are left (kLeave, in batch.left). `unblamed`: which
  // ran OK in the batch attempt (a rerun, for NoteRerun).
  absl::Status RunEachAlone(Tx& tx, absl::Span<const Item> items, std::vector<HandlerCall>& calls,
                            const std::vector<size_t>& run_index, const std::vector<size_t>& alone,
                            const std::vector<bool>& unblamed, int kept_savepoints,
                            absl::BitGenRef gen, Batch& batch, std::vector<Outcome>* outcomes);
  // FailurePolicy::Failed, noted in batch.failures.
  Outcome Failed(const Item& item, const absl::Status& failure, absl::BitGenRef gen,
                 Batch& batch) const;
  // `item` acked, with its call's result.
  static void Ack(const Item& item, HandlerCall& call, Outcome* outcome);

  Handler* const handler_;
  const FailurePolicy failures_;
  const absl::Duration handler_timeout_;
  Clock* const clock_;
  ConsumerMetrics* const metrics_;

  // StopBy's deadline in Unix nanoseconds (INT64_MAX: not stopping), and
  // CancelCalls'.
  std::atomic<int64_t> stop_deadline_ns_{INT64_MAX};
  std::atomic<bool> cancelled_{false};

  mutable absl::Mutex mu_;
  // Decayed counts of items rerun by isolating runs and of those that failed.
  double rerun_runs_ ABSL_GUARDED_BY(mu_) = 0;
  double rerun_failed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace partq

#endif  // PARTQ_CONSUMER_BATCH_RUNNER_H_
