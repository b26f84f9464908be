// Retry delays: exponential with jitter (DESIGN.md protocol 7).
#ifndef PARTQ_CONSUMER_BACKOFF_H_
#define PARTQ_CONSUMER_BACKOFF_H_

#include "absl/random/bit_gen_ref.h"
#include "absl/time/time.h"

namespace partq {

struct BackoffPolicy {
  absl::Duration base = absl::Seconds(1);  // delay after the first failure
  absl::Duration max = absl::Minutes(10);  // cap
  double jitter = 0.25;                    // +-25% spread
};

// The delay before attempt `attempts + 1`, after `attempts` (>= 1) failures:
// min(base * 2^(attempts-1), max), then scaled by a uniform factor in
// [1 - jitter, 1 + jitter] so that a burst of failures does not retry in
// lockstep. The result never exceeds max * (1 + jitter).
absl::Duration RetryDelay(const BackoffPolicy& policy, int attempts, absl::BitGenRef gen);

}  // namespace partq

#endif  // PARTQ_CONSUMER_BACKOFF_H_
