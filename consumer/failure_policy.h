// How an item's failure ends (docs/architecture.md, Failures; consumer/README.md,
// "Failures"): retried after an exponential backoff with jitter, or
// dead-lettered once it has used the queue's max_attempts, or dead-lettered
// without running when it keeps killing the workers that take it ("crash
// loop").
#ifndef PARTQ_CONSUMER_FAILURE_POLICY_H_
#define PARTQ_CONSUMER_FAILURE_POLICY_H_

#include <optional>
#include <string>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "store/store.h"
#include "store/types.h"

namespace partq {

struct BackoffPolicy {
  absl::Duration base = absl::Seconds(1);  // delay after the first failure
  absl::Duration max = absl::Minutes(10);  // cap
  double jitter = 0.25;                    // +-25% spread
};

// The delay before attempt `attempts + 1`, after `attempts` (>= 1) failures:
// min(base * 2^(attempts-1), max), then scaled by a uniform factor in
// [1 - jitter, 1 + jitter] drawn from `gen`, so that a burst of failures does
// not retry in lockstep. The result never exceeds max * (1 + jitter).
absl::Duration RetryDelay(const BackoffPolicy& policy, int attempts, absl::BitGenRef gen);

// Immutable, so one policy serves every worker thread; the randomness comes
// from the caller's generator (one per thread: absl::BitGen is not
// thread-safe).
class FailurePolicy {
 public:
  FailurePolicy(BackoffPolicy backoff, int max_attempts)
      : backoff_(backoff), max_attempts_(max_attempts) {}

  // `item` failed on its attempt `item.attempts` with `failure`, whose
  // message is kept either way (the item's last error). By the failure's
  // hints (handler.h), first that applies:
  //   Throttled(d)  kRetry after d, the attempt given back (refund_attempt):
  //                 the handler did nothing with the item, so even an item on
  //                 its last attempt is not dead-lettered for it;
  //   DeadNow       kDead now;
  //   (no attempts left)  kDead;
  //   RetryIn(d)    kRetry after d instead of the backoff;
  //   (none)        kRetry after RetryDelay(item.attempts).
  // A negative hinted delay counts as zero.
  Outcome Failed(const Item& item, const absl::Status& failure, absl::BitGenRef gen) const;

  // An item claimed more than max_attempts times without ever finishing:
  // every worker that took it died or lost its session (its attempts were
  // counted from the claim records they left). kDead without running it
  // again; nullopt for an item that may run. The outcome gives its claim's
  // attempt back (refund_attempt): the item did not run, and its dead row
  // says the attempts it used, as the error does.
  std::optional<Outcome> CrashLoop(const Item& item) const;


 private:
  const BackoffPolicy backoff_;
  const int max_attempts_;
};

}  // namespace partq

#endif  // PARTQ_CONSUMER_FAILURE_POLICY_H_
