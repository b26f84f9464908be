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
      return absl::Status(r.status().code(), absl::StrCat("effect enqueue[", i, "] into \"",
                                                          e.queue, "\": ", r.status().message()));
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
      return absl::Status(
          st.code(), absl::StrCat("effect publish[", i, "] to \"", p.topic, "\": ", st.message()));
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

}  // namespace partq
