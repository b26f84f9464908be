#include "consumer/failure_policy.h"

#include <algorithm>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "consumer/handler.h"

namespace partq {

absl::Duration RetryDelay(const BackoffPolicy& policy, int attempts, absl::BitGenRef gen) {
  absl::Duration d = policy.base;
  for (int i = 1; i < attempts && d < policy.max; ++i) d *= 2;
  d = std::min(d, policy.max);
  if (policy.jitter > 0) {
    d *= absl::Uniform(gen, 1.0 - policy.jitter, 1.0 + policy.jitter);
  }
  return d;
}

Outcome FailurePolicy::Failed(const Item& item, const absl::Status& failure,
                              absl::BitGenRef gen) const {
  Outcome o;
  o.id = item.id;
  o.part = item.part;
  o.error = std::string(failure.message());
  const std::optional<absl::Duration> hinted = RetryInOf(failure);
  if (IsThrottled(failure)) {
    o.kind = Outcome::Kind::kRetry;
    o.retry_delay = std::max(absl::ZeroDuration(), hinted.value_or(absl::ZeroDuration()));
    o.refund_attempt = true;
  } else if (IsDeadNow(failure) || item.attempts >= max_attempts_) {
    o.kind = Outcome::Kind::kDead;
  } else {
    o.kind = Outcome::Kind::kRetry;
    o.retry_delay =
        hinted ? std::max(absl::ZeroDuration(), *hinted) : RetryDelay(backoff_, item.attempts, gen);
  }
  return o;
}

std::optional<Outcome> FailurePolicy::CrashLoop(const Item& item) const {
  if (item.attempts <= max_attempts_) return std::nullopt;
  Outcome o;
  o.id = item.id;
  o.part = item.part;
  o.kind = Outcome::Kind::kDead;
  o.refund_attempt = true;
  // attempts counts this claim too: the ones before it were all abandoned.
  o.error = absl::StrCat("gave up after ", item.attempts - 1,
                         " attempts: the worker processing it died or lost its session "
                         "each time (crash loop)");
  return o;
}

}  // namespace partq
