// A claimed batch on its way through a worker: made by the ClaimScheduler,
// its handlers run by the BatchRunner inside a Finish, driven by the
// Consumer. Besides its items it carries what its runs so far learned, which
// the next run of the same batch acts on.
#ifndef PARTQ_CONSUMER_BATCH_H_
#define PARTQ_CONSUMER_BATCH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "consumer/handler.h"
#include "store/store.h"
#include "store/types.h"

namespace partq {

// A failure a run recorded (a kRetry or kDead outcome), for the consumer to
// log and count once the transaction holding it commits.
struct FailureNote {
  Outcome outcome;
  int attempt = 0;  // the item's attempt that failed
  FailureKind kind = FailureKind::kHandlerError;
};

struct Batch {
  std::vector<Item> items;
  bool isolate = false;  // rerun with savepoints: a group, and the blamed items alone
  // A lone item that failed in a transaction that was rolled back: its id
  // and failure (hints too), so the rerun records the failure without
  // running it again.
  std::optional<std::pair<int64_t, absl::Status>> failed_alone;
  // Items the batch attempt's handler reported Throttled (handler.h): it did
  // nothing with them, so the rerun records their retries without running
  // them again, and without running them alone first (a 429 for a whole
  // batch must not become one request per item).
  std::vector<std::pair<int64_t, absl::Status>> throttled;
  // After a batch attempt that failed: the items whose handler reported a
  // failure, when it could tell (a status for every item, in time). Empty:
  // it could not, and on the isolating run every item runs alone.
  std::vector<int64_t> blamed;
  absl::Duration item_cost;  // the batch attempt's handler time per item
  // Items the isolating run left for another transaction (its savepoints
  // reached BatchRunner::kMaxKeptSavepoints); the Consumer finishes them
  // next.
  std::vector<int64_t> left;
  // The failures the last run recorded (each run starts it afresh).
  std::vector<FailureNote> failures;
};

}  // namespace partq

#endif  // PARTQ_CONSUMER_BATCH_H_
