#include "consumer/backoff.h"

#include <algorithm>

#include "absl/random/distributions.h"

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

}  // namespace partq
