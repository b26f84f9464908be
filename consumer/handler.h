// What a consumer runs for each item.
//
// A handler's writes go into the transaction that acknowledges the item
// (call.tx), so they commit exactly when the ack does — the exactly-once
// recipe: if the ack is fenced (this session lost the part) or fails, the
// writes roll back with it and the part's new owner processes the item.
// Side effects outside that transaction (HTTP calls, files) may happen more
// than once: a handler can run again after a crash or a fenced ack, and the
// items of a batch in which another item failed run again (HandleBatch),
// unless the handler's statuses are final (StatusesAreFinal).
//
// Failure: return a non-OK status or throw. The item is retried with
// exponential backoff and dead-lettered after the queue's max_attempts, with
// the status message (or exception text) kept as its last error. Whatever the
// failed handler wrote is rolled back.
//
// Threading: a consumer calls one handler object from all its worker threads
// at once, each with its own transaction; handlers must be thread-safe.
#ifndef PARTQ_CONSUMER_HANDLER_H_
#define PARTQ_CONSUMER_HANDLER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "store/store.h"
#include "store/types.h"

namespace partq {

struct HandlerCall {
  const Item* item = nullptr;
  Tx* tx = nullptr;  // the ack transaction
  const SessionId* session = nullptr;
  // The handler timeout, on the consumer's clock (ConsumerOptions::clock);
  // honour it if you can. While the consumer stops, no later than the end
  // of its drain (ConsumerOptions::drain_timeout).
  absl::Time deadline = absl::InfiniteFuture();
  // Set (never cleared) when the consumer gives the call up: it is stopping
  // and its drain timeout passed. Return as soon as you can; whatever the
  // call did is rolled back and its items go back to the queue without
  // using an attempt. Null when nothing can cancel the call. The exec and
  // http handlers watch it.
  const std::atomic<bool>* cancel = nullptr;
  // Optional result, returned by `partq wait` / Producer::Wait.
  std::optional<std::string> result;
};

class Handler {
 public:
  virtual ~Handler() = default;

  // Once per consumer before the first item, in its own transaction (create
  // tables, prepare statements). Default: nothing.
  virtual absl::Status Setup(Tx& tx) { return absl::OkStatus(); }

  // Processes one item.
  virtual absl::Status Handle(HandlerCall& call) = 0;

  // Processes several items in one transaction; (*statuses)[i] is the result
  // for calls[i]. The default calls Handle for each in turn. Override to
  // batch writes (one INSERT for many items). If any status is not OK, the
  // consumer rolls the whole transaction back and runs the batch again, so
  // one failure never drops another's writes: the items whose status was OK
  // together under one savepoint when that is expected to pay (cheap items,
  // reruns that seldom fail: BatchRunner::GroupRoundPays; a group that fails
  // again sheds the items it blames, up to 8 rounds), the rest each alone
  // under its own savepoint, after the group (at most 48 savepoints kept per
  // transaction; items beyond run in the next one). A failure is recorded
  // only from a run of the item alone. Report per item when you can: a
  // handler that cannot say which item failed (it throws, returns fewer
  // statuses, or runs over its deadline) gets every item run alone.
  // A handler whose statuses are final (below) is not run again: its
  // statuses are recorded as they are.
  virtual void HandleBatch(absl::Span<HandlerCall* const> calls,
                           std::vector<absl::Status>* statuses);

  // Whether HandleBatch's statuses are final (default false). A handler that
  // says true promises, for every HandleBatch and Handle call:
  //   - a failed status is the item's own failure, never a batch-mate's, and
  //     the handler left nothing of that item in call.tx (it wrote nothing
  //     for it, or undid what it wrote);
  //   - no statuses at all (a failure it cannot pin on one item, as when an
  //     exec child dies) means it left nothing in call.tx for any item;
  //   - it keeps the calls' deadline itself: a status that comes after the
  //     deadline is still its answer.
  // The consumer then records the statuses as they are, in the same
  // transaction: no rollback, no savepoint, no item sent again. Only after a
  // failure without blame does it run each item alone, in the same
  // transaction. The exec and http handlers are final (what they write is
  // their replies' effects, which they apply per item: handlers/effects.h);
  // in-process handlers and sql: are not, since a failed item's writes are
  // in the transaction: the consumer undoes them with savepoints and runs
  // the batch again to find which items failed.
  virtual bool StatusesAreFinal() const { return false; }
};

// Failure hints: what a handler may attach to the status it returns for an
// item that failed, beyond the message. A hint on an OK status is dropped
// (absl::Status keeps no payload on OK).
//   RetryIn(st, d)  run the item again after `d` instead of the backoff
//                   policy's delay; the attempt still counts, so an item past
//                   max_attempts is dead-lettered as usual.
//   DeadNow(st)     dead-letter the item now, whatever attempts are left.
//   Throttled(st, d) the handler (or the service behind it) refused to take
//                   the item now — HTTP 429/503 — and did nothing with it:
//                   run it again after `d`, and give the attempt back (being
//                   told to wait is not the item's failure).
// They travel as payloads of the status, so they survive copies and the
// statuses of HandleBatch. The consumer acts on them (FailurePolicy::Failed)
// when it records the failure: from a run of the item alone, as for any
// failure, except Throttled, which it records from the batch attempt (the
// handler did nothing with the item, so there is nothing to isolate).
absl::Status RetryIn(absl::Status failure, absl::Duration delay);
absl::Status DeadNow(absl::Status failure);
// The hints on `status`: nullopt / false when it carries none.
std::optional<absl::Duration> RetryInOf(const absl::Status& status);
bool IsDeadNow(const absl::Status& status);
absl::Status Throttled(absl::Status failure, absl::Duration delay);
bool IsThrottled(const absl::Status& status);

// Why an item's attempt failed, as the worker logs and counts it
// (partq_item_failures_total{reason}, FailureKindName): a bounded set.
enum class FailureKind {
  kHandlerError,  // the handler said so (an error status, a reply's "ok": false)
  kEffect,        // an effect of an ok reply could not be applied
  kTimeout,       // past the handler timeout
  kCrash,         // the handler died with it (an exec child, a 5xx), or a worker (crash loop)
  kProtocol,      // an answer that breaks the handler protocol
  kConnection,    // the connection to the handler broke
  kThrottled,     // Throttled: not the item's failure; the attempt given back
};
// Every kind, in enum order (its value is its index).
inline constexpr FailureKind kFailureKinds[] = {
    FailureKind::kHandlerError, FailureKind::kEffect,   FailureKind::kTimeout,
    FailureKind::kCrash,        FailureKind::kProtocol, FailureKind::kConnection,
    FailureKind::kThrottled};
// A failure marked with its kind, by a handler that knows it (the exec and
// http transports); kept through copies, as the hints are.
absl::Status WithFailureKind(absl::Status failure, FailureKind kind);
// The kind of `failure`: Throttled, else the kind it was marked with, else
// kTimeout for DeadlineExceeded, else kHandlerError.
FailureKind FailureKindOf(const absl::Status& failure);
// "handler_error", "effect", "timeout", "crash", "protocol", "connection",
// "throttled".
const char* FailureKindName(FailureKind kind);

// A handler from a function (for tests and small programs).
std::unique_ptr<Handler> MakeHandler(std::function<absl::Status(HandlerCall&)> fn);

// Runs Handle, turning exceptions into a status.
absl::Status CallHandle(Handler& handler, HandlerCall& call);

// Handle for a handler whose work is the batch (exec, http): `call` as a
// batch of one through HandleBatch, and its status.
absl::Status HandleAsBatch(Handler& handler, HandlerCall& call);

}  // namespace partq

#endif  // PARTQ_CONSUMER_HANDLER_H_
