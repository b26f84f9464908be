// The handler protocol, version 1 (docs/handler-protocol.md): the JSON that
// partq sends a handler written in any language for a batch of items, and the
// reply it expects back. Shared by every transport (exec, HTTP, SQL); this
// file knows nothing of processes, sockets or transactions.
//
// EncodeRequest turns a batch into one JSON object on one line; ParseReply
// checks a reply against the batch it answers and returns one ItemReply per
// item, or a status naming the first thing wrong with it. Any such error
// makes the whole reply invalid: the transport then reports the batch as
// failed without saying which item failed (Handler::HandleBatch), so the
// consumer runs each item alone and only an item whose own reply is bad
// accumulates failed attempts.
//
// Thread-safe: plain functions of their arguments.
#ifndef PARTQ_HANDLERS_PROTOCOL_H_
#define PARTQ_HANDLERS_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "store/types.h"

namespace partq {

// The version this partq speaks, the request's and the reply's "version".
inline constexpr int kHandlerProtocolVersion = 1;

// Default limits on a reply (ReplyLimits).
inline constexpr size_t kDefaultMaxReplyBytes = 16 << 20;  // the reply, without its '\n'
inline constexpr size_t kDefaultMaxEffectsPerItem = 100;   // enqueue + publish of one item
inline constexpr size_t kDefaultMaxHeadersPerMessage = 64;
inline constexpr absl::Duration kDefaultMaxDelay = absl::Hours(24 * 365);
// Objects and arrays nest at most this deep in a reply (a valid one needs 7).
inline constexpr int kMaxReplyDepth = 16;

// What a batch request says besides its items.
struct BatchRequest {
  std::string batch_id;  // echoed by the reply; unique per batch
  std::string queue;     // the queue the items come from
  int max_attempts = 0;  // the queue's; attempts beyond it dead-letter the item
  absl::Time deadline;   // answer before this
  absl::Time now;        // for timeout_ms (deadline - now)
};

// The request for `items` (ids unique), as one line of JSON without the
// trailing '\n'. A payload is sent as text when it is valid UTF-8, else as
// base64 (payload_encoding says which). Keys are text in the database; bytes
// of one that is not UTF-8 (not possible in a UTF8 database) are sent as
// U+FFFD.
std::string EncodeRequest(const BatchRequest& request, absl::Span<const Item* const> items);

// Follow-up work an ok item asks for, done in the transaction that acks it.
struct EnqueueEffect {
  std::string queue;  // any queue, not only the batch's
  NewItem item;
};
struct PublishEffect {
  std::string topic;
  std::optional<std::string> key;                            // raw bytes
  std::string payload;                                       // raw bytes
  std::vector<std::pair<std::string, std::string>> headers;  // key, value (raw bytes)
};

// The handler's answer for one item.
struct ItemReply {
  int64_t id = 0;
  bool ok = false;
  // ok: the item's result for `partq wait` (raw bytes), and its effects.
  std::optional<std::string> result;
  std::vector<EnqueueEffect> enqueue;
  std::vector<PublishEffect> publish;
  // !ok: why, and what to do about it.
  std::string error;
  std::optional<absl::Duration> retry_in;  // run again after this, not the backoff's delay
  bool dead = false;                       // dead-letter now, whatever attempts are left
};

struct ReplyLimits {
  size_t max_reply_bytes = kDefaultMaxReplyBytes;
  size_t max_effects_per_item = kDefaultMaxEffectsPerItem;
  size_t max_headers_per_message = kDefaultMaxHeadersPerMessage;
  absl::Duration max_delay = kDefaultMaxDelay;  // for delay and retry_in
};

// Parses `reply` (one line, with or without its '\n') as the answer to the
// batch `batch_id` of the items `ids`. Returns one ItemReply per id, in the
// order of `ids`. InvalidArgument naming the first violation of the
// protocol (e.g. `reply: results[2]: lists item 17, which was not in the
// batch`); ResourceExhausted for a reply over a limit.
absl::StatusOr<std::vector<ItemReply>> ParseReply(absl::string_view reply,
                                                  absl::string_view batch_id,
                                                  absl::Span<const int64_t> ids,
                                                  const ReplyLimits& limits = {});

}  // namespace partq

#endif  // PARTQ_HANDLERS_PROTOCOL_H_
