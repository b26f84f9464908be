#include "handlers/effects.h"

#include "absl/strings/str_cat.h"

namespace partq {

absl::Status ApplyResultOnly(HandlerCall& call, const ItemReply& reply) {
  if (!reply.enqueue.empty() || !reply.publish.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the handler asked for ", reply.enqueue.size(), " enqueue and ", reply.publish.size(),
        " publish effect(s), which this partq cannot apply yet"));
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
