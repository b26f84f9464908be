#include "handlers/effects.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "store/headers_json.h"

namespace partq {

// Each effect goes through the ack transaction, so it commits exactly when
// the item is acknowledged: a rerun of the item (after a rollback) writes
// them again, and only the committed run's stay. Tx::Enqueue and Tx::Publish
// check their input before they send a statement, so a bad effect fails the
// item without aborting the transaction the others share.
absl::Status ApplyEffects(HandlerCall& call, const ItemReply& reply) {
  for (size_t i = 0; i < reply.enqueue.size(); ++i) {
    const EnqueueEffect& e = reply.enqueue[i];
    absl::StatusOr<EnqueueResult> r = call.tx->Enqueue(e.queue, e.item);
    if (!r.ok()) {
      return WithFailureKind(
          absl::Status(r.status().code(), absl::StrCat("effect enqueue[", i, "] into \"", e.queue,
                                                       "\": ", r.status().message())),
          FailureKind::kEffect);
    }
  }
  for (size_t i = 0; i < reply.publish.size(); ++i) {
    const PublishEffect& p = reply.publish[i];
    std::vector<Header> headers;
    headers.reserve(p.headers.size() + 1);
    for (const auto& [k, v] : p.headers) headers.emplace_back(k, v);
    // As the built-in publish: handler does, the item's id goes last, so a
    // consumer can tell a re-sent message (the outbox is at-least-once).
    headers.emplace_back("partq.item.id", absl::StrCat(call.item->id));
    OutboxEvent event{p.topic, p.key, p.payload, HeadersJson(headers)};
    if (absl::Status st = call.tx->Publish(event); !st.ok()) {
      return WithFailureKind(absl::Status(st.code(), absl::StrCat("effect publish[", i, "] to \"",
                                                                  p.topic, "\": ", st.message())),
                             FailureKind::kEffect);
    }
  }
  call.result = reply.result;
  return absl::OkStatus();
}

absl::Status ItemStatus(HandlerCall& call, const ItemReply& reply, const EffectsApplier& apply) {
  if (reply.ok) return apply(call, reply);
  absl::Status st = absl::UnknownError(reply.error);
  if (reply.retry_in) st = RetryIn(std::move(st), *reply.retry_in);
  if (reply.dead) st = DeadNow(std::move(st));
  return st;
}

namespace {

constexpr char kEffectsSavepoint[] = "partq_effects";

bool HasEffects(const ItemReply& reply) { return !reply.enqueue.empty() || !reply.publish.empty(); }

// Applies the effects of `writers` (positions in calls/replies, in order)
// under the savepoint partq_effects (see ApplyReplies), into `statuses`.
void ApplyWriters(absl::Span<HandlerCall* const> calls, absl::Span<const ItemReply> replies,
                  const std::vector<size_t>& writers, const EffectsApplier& apply,
                  std::vector<absl::Status>* statuses) {
  Tx& tx = *calls[writers[0]]->tx;
  auto fail_rest = [&](size_t from, const absl::Status& why) {
    for (size_t k = from; k < writers.size(); ++k) {
      (*statuses)[writers[k]] = why;
      calls[writers[k]]->result.reset();
    }
  };
  if (absl::Status sp = tx.Savepoint(kEffectsSavepoint); !sp.ok()) return fail_rest(0, sp);
  std::vector<bool> failed(writers.size(), false);
  size_t from = 0;                 // the first writer applied since the savepoint
  size_t settle = writers.size();  // redoing: the failed writer the savepoint moves past
  for (size_t k = from; k < writers.size(); ++k) {
    const size_t i = writers[k];
    if (failed[k]) {
      if (k == settle) {
        // The writers before it are applied again: keep them, and start a
        // savepoint after them.
        if (absl::Status r = tx.RenewSavepoint(kEffectsSavepoint); !r.ok()) {
          return fail_rest(k + 1, r);
        }
        from = k + 1;
        settle = writers.size();
      }
      continue;
    }
    absl::Status st = apply(*calls[i], replies[i]);
    (*statuses)[i] = st;
    if (st.ok()) continue;
    // Part of its effects may be written, or the transaction aborted by the
    // statement that failed: undo everything since the savepoint, then apply
    // again what succeeded since.
    failed[k] = true;
    calls[i]->result.reset();
    if (absl::Status r = tx.RollbackToSavepoint(kEffectsSavepoint); !r.ok()) {
      for (size_t j = from; j < k; ++j) {
        if (!failed[j]) (*statuses)[writers[j]] = r;
      }
      return fail_rest(k + 1, r);
    }
    if (settle == writers.size() || k > settle) settle = k;
    k = from - 1;  // unsigned wrap-around: the ++k makes it `from`
  }
}

}  // namespace

std::vector<absl::Status> ApplyReplies(absl::Span<HandlerCall* const> calls,
                                       absl::Span<const ItemReply> replies,
                                       const EffectsApplier& apply) {
  std::vector<absl::Status> statuses(calls.size());
  std::vector<size_t> writers;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (replies[i].ok && HasEffects(replies[i]) && calls[i]->tx != nullptr) {
      writers.push_back(i);
    } else {
      statuses[i] = ItemStatus(*calls[i], replies[i], apply);
    }
  }
  if (!writers.empty()) ApplyWriters(calls, replies, writers, apply, &statuses);
  return statuses;
}

}  // namespace partq
