// Validation of the names and settings that reach SQL (queue, schema and
// Kafka topic names, a queue's settings). Every Store checks its input with
// these, so MemStore and PgStore refuse the same things with the same words.
#ifndef PARTQ_STORE_VALIDATE_H_
#define PARTQ_STORE_VALIDATE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "schedule/timing.h"
#include "store/types.h"

namespace partq {

// Names that reach SQL as identifiers or values: queue names are 1..63 chars
// of [A-Za-z0-9_.-] starting with a letter or digit; schema names are
// lowercase [a-z_][a-z0-9_]{0,62}. InvalidArgument with a clear message if not.
absl::Status ValidateQueueName(absl::string_view name);
absl::Status ValidateSchemaName(absl::string_view name);
// Kafka topic names: 1..249 characters of [A-Za-z0-9._-], not "." or "..".
absl::Status ValidateTopicName(absl::string_view name);
// All of the above for a queue's settings (name, ranges, dlq_topic).
absl::Status ValidateQueueConfig(const QueueConfig& config);

// The payload limit a store applies unless told otherwise (PgOptions,
// MemDatabase::Connect).
inline constexpr int64_t kDefaultMaxPayloadBytes = 1 << 20;
// A queue's payload limit (QueueConfig::max_payload_bytes): 1 byte to
// 1 GiB (PostgreSQL's bytea holds up to 1 GiB).
inline constexpr int64_t kMaxMaxPayloadBytes = int64_t{1} << 30;
absl::Status ValidateMaxPayload(int64_t bytes);
// Keys and dedup keys are at most this long (PostgreSQL keeps them in btree
// indexes, whose entries must fit in a third of a page).
inline constexpr size_t kMaxKeyBytes = 1024;
// An item to enqueue: a payload of at most `max_payload_bytes`, a priority
// in -32768..32767, keys and dedup keys of at most kMaxKeyBytes of UTF-8
// without NUL bytes, a delay of at most 10 years. InvalidArgument saying which if not.
absl::Status ValidateNewItem(const NewItem& item, int64_t max_payload_bytes);
// A key or dedup key is text: well-formed UTF-8 (InvalidArgument naming
// `what`, the bytes escaped, if not).
absl::Status ValidateKeyText(absl::string_view what, absl::string_view key);
// A queue's rate limit (QueueConfig::rate): more than 0 and at most 1e6
// items a second, or none.
absl::Status ValidateRate(std::optional<double> per_second);
// Growing a queue of `current` parts to `parts` (Store::GrowParts): at most
// 4096 and a multiple of `current` (the same count is fine: nothing to do).
// A smaller count is refused: a queue does not shrink.
absl::Status ValidateGrowth(absl::string_view queue, int current, int parts);
// QueueConfig::fair_by as `--fair-by` and the queues table spell it: "key"
// or "none" (NULL in the table). InvalidArgument for anything else.
absl::StatusOr<FairBy> ParseFairBy(absl::string_view text);
const char* FairByName(FairBy fair_by);
// QueueConfig::key_concurrency: 0 (none) or 1..kMaxKeyConcurrency.
inline constexpr int kMaxKeyConcurrency = 1000000;
absl::Status ValidateKeyConcurrency(int n);
// A key concurrency of `n` on queue `queue`, ordered or not: an ordered
// queue takes none (it already runs one item of a key at a time, in
// enqueue order), and saying one would promise what it does not do.
absl::Status ValidateKeyConcurrencyFor(absl::string_view queue, bool ordered, int n);
// As `--key-concurrency` spells it: N (1..kMaxKeyConcurrency) or "none"
// (0). InvalidArgument for anything else; KeyConcurrencyText is the inverse.
absl::StatusOr<int> ParseKeyConcurrency(absl::string_view text);
std::string KeyConcurrencyText(int n);
// A queue group's id: 1..kMaxGroupIdBytes of UTF-8 without NUL bytes (the
// SQL API's check_group_id says the same).
inline constexpr size_t kMaxGroupIdBytes = 200;
absl::Status ValidateGroupId(absl::string_view id);
// Item ids a caller names (Store::CancelItems): each at least 1, as ids are.
absl::Status ValidateItemIds(const std::vector<int64_t>& ids);

// A schedule (Store::AddSchedule): its name (as a queue name), the queue
// name, exactly one of `every` and `cron`, a time zone only with `cron`,
// a catch-up window from 0 to 366 days, and the item each tick enqueues
// (ValidateNewItem with its dedup key).
// Returns its timing; InvalidArgument saying what is wrong.
absl::StatusOr<Timing> ValidateSchedule(const ScheduleSpec& spec, int64_t max_payload_bytes);
// The item one tick of `spec` enqueues.
NewItem ScheduledItem(const ScheduleSpec& spec, absl::Time tick);
// Its dedup key: schedule:NAME:TICK.
std::string ScheduleDedupKey(absl::string_view name, absl::Time tick);
// The catch-up window of `spec` for its tick `due`: its own, or
// DefaultCatchUp (schedule/timing.h) of the queue's `session_ttl`, the
// workers' heartbeat interval (a third of it: coordinator/heartbeat.h) and
// the schedule's period at `due`.
absl::Duration CatchUpOf(const ScheduleSpec& spec, const Timing& timing, absl::Duration session_ttl,
                         absl::Time due);

}  // namespace partq

#endif  // PARTQ_STORE_VALIDATE_H_
