#include "producer/producer.h"

#include <algorithm>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace partq {
namespace {

// "0s", where absl::FormatDuration says "0" for a zero duration.
std::string Said(absl::Duration d) {
  return d == absl::ZeroDuration() ? "0s" : absl::FormatDuration(d);
}

}  // namespace

absl::StatusOr<ItemState> Producer::WaitFor(
    absl::Duration timeout, absl::string_view what, bool may_appear,
    const std::function<absl::StatusOr<ItemState>()>& poll) {
  const absl::Time deadline = absl::Now() + timeout;
  // Polls with a growing interval: items usually finish within milliseconds,
  // and a long wait should not cost many queries.
  absl::Duration every = absl::Milliseconds(5);
  for (;;) {
    auto state = poll();
    if (!state.ok() && !absl::IsUnavailable(state.status())) return state.status();
    if (state.ok()) {
      if (state->kind == ItemState::Kind::kDone || state->kind == ItemState::Kind::kDead ||
          state->kind == ItemState::Kind::kCancelled) {
        return state;
      }
      if (state->kind == ItemState::Kind::kUnknown && !may_appear) {
        return absl::NotFoundError(absl::StrCat("no such item: ", what));
      }
    }
    if (absl::Now() >= deadline) {
      if (state.ok() && state->kind == ItemState::Kind::kUnknown) {
        return absl::NotFoundError(
            absl::StrCat("no such item: ", what, " (none was there within ", Said(timeout),
                         ": not enqueued yet, or finished with no record kept, or pruned)"));
      }
      std::string so_far =
          state.ok() ? absl::StrCat("pending after ", state->attempts, " attempt(s)",
                                    state->error.empty() ? "" : ", last error: ", state->error)
                     : std::string(state.status().message());
      return absl::DeadlineExceededError(
          absl::StrCat("item not finished within ", Said(timeout), " (", so_far, ")"));
    }
    absl::SleepFor(std::min(every, deadline - absl::Now()));
    every = std::min(every * 2, absl::Milliseconds(250));
  }
}

absl::StatusOr<std::vector<CancelOutcome>> Producer::Cancel(absl::string_view queue,
                                                            const std::vector<int64_t>& ids) {
  auto r = store_->CancelItems(queue, ids);
  if (r.ok() && metrics_ != nullptr) {
    metrics_->Cancelled(queue, std::count_if(r->begin(), r->end(), [](const CancelOutcome& o) {
                          return o.kind == CancelOutcome::Kind::kCancelled;
                        }));
  }
  return r;
}

absl::StatusOr<CancelOutcome> Producer::CancelByDedupKey(absl::string_view queue,
                                                         absl::string_view dedup_key) {
  auto r = store_->CancelByDedupKey(queue, dedup_key);
  if (r.ok() && r->kind == CancelOutcome::Kind::kCancelled && metrics_ != nullptr) {
    metrics_->Cancelled(queue, 1);
  }
  return r;
}

absl::StatusOr<ItemState> Producer::Wait(absl::string_view queue, int64_t id,
                                         absl::Duration timeout) {
  return WaitFor(timeout, absl::StrCat("item ", id, " of queue ", queue), /*may_appear=*/false,
                 [&] { return store_->GetItemState(queue, id); });
}

absl::StatusOr<ItemState> Producer::WaitByDedupKey(absl::string_view queue,
                                                   absl::string_view dedup_key,
                                                   absl::Duration timeout) {
  return WaitFor(
      timeout, absl::StrCat("dedup key \"", absl::CHexEscape(dedup_key), "\" in queue ", queue),
      /*may_appear=*/true, [&] { return store_->GetItemStateByDedupKey(queue, dedup_key); });
}

}  // namespace partq
