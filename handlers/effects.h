// What a transport does with a parsed reply: an item the handler answered
// ok has its effects applied in the ack transaction; an item that failed
// becomes a failed status carrying the handler's retry_in / dead hints.
#ifndef PARTQ_HANDLERS_EFFECTS_H_
#define PARTQ_HANDLERS_EFFECTS_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "consumer/handler.h"
#include "handlers/protocol.h"

namespace partq {

// Applies an ok item's reply to its call: sets call.result and writes the
// enqueue and publish effects through call.tx (the ack transaction, so they
// commit exactly when the item is acked). Returns the item's status: a
// failure here fails the item (and rolls back what it wrote, as for any
// failed handler). Runs on the worker thread that called the handler.
using EffectsApplier = std::function<absl::Status(HandlerCall& call, const ItemReply& reply)>;

// The applier transports use: each enqueue through call.tx->Enqueue, each
// publish through call.tx->Publish (with a partq.item.id header appended),
// then call.result. The first effect that fails fails the item, naming the
// effect; what it wrote before rolls back with the item.
absl::Status ApplyEffects(HandlerCall& call, const ItemReply& reply);

// The status of one item: `apply` for an ok reply; for a failure,
// UnknownError(reply.error) with RetryIn / DeadNow hints (handler.h).
absl::Status ItemStatus(HandlerCall& call, const ItemReply& reply, const EffectsApplier& apply);

// The statuses of a batch's `calls` from their `replies` (same order, one
// each), final in the sense of Handler::StatusesAreFinal: a failed reply
// writes nothing, an ok one goes through `apply`, and an item whose effects
// cannot all be applied fails with nothing of it left in the transaction,
// while the other items' effects stay. An ok reply without effects writes
// nothing (`apply` only sets its result). When some have effects they are
// written under the savepoint partq_effects (one round trip per batch, left
// to the commit); when an item's effects fail, the transaction rolls back
// to it, the items applied since are applied again, and the savepoint is
// renewed past the failed one: each item is applied at most twice, and a
// failure costs one rollback and one renewal. The calls share one Tx; calls
// without one (tests) are applied without savepoints.
std::vector<absl::Status> ApplyReplies(absl::Span<HandlerCall* const> calls,
                                       absl::Span<const ItemReply> replies,
                                       const EffectsApplier& apply);

}  // namespace partq

#endif  // PARTQ_HANDLERS_EFFECTS_H_
