// The one seam between partq and its database.
//
// Every database operation partq performs is an intent-named method here.
// PgStore (pg_store.h) is the only implementation that talks to PostgreSQL
// and the only code that includes libpqxx; MemStore (mem_store.h) serves unit
// tests of pure logic.
//
// Errors are values (absl::Status):
//   kUnavailable         the connection broke or the server is gone; the store
//                        reconnects on the next call, so retrying is right.
//   kAborted             serialization failure or deadlock: retry the operation.
//   kNotFound            unknown queue / item.
//   kAlreadyExists       queue exists.
//   kInvalidArgument     bad input (names, ranges, payload size).
//   kFailedPrecondition  schema missing or newer than this binary: don't retry.
//   kInternal            anything else the server rejected.
//
// Thread-safety: a Store is one connection; use it from one thread at a time.
// Make one per thread with a StoreFactory.
#ifndef PARTQ_COORDINATOR_STORE_H_
#define PARTQ_COORDINATOR_STORE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "coordinator/types.h"

namespace pqxx {
class transaction_base;
}

namespace partq {

// A row of a query result, NULL as nullopt.
using Row = std::vector<std::optional<std::string>>;

// The transaction a handler's own writes go into; it commits exactly when the
// items it processes are acknowledged, or not at all.
class Tx {
 public:
  virtual ~Tx() = default;
  // Runs `sql` with $1..$n bound to `params` (NULL as nullopt); returns rows.
  virtual absl::StatusOr<std::vector<Row>> Exec(absl::string_view sql,
                                                const std::vector<std::optional<std::string>>&
                                                    params = {}) = 0;
  // The libpqxx transaction, for handlers that want the full API; nullptr
  // when the store is not PostgreSQL.
  virtual pqxx::transaction_base* pqxx() = 0;
  // The schema partq's tables live in (already validated).
  virtual const std::string& schema() const = 0;
};

// How one processed item ends.
struct Outcome {
  enum class Kind { kAck, kRetry, kDead };
  int64_t id = 0;
  int part = 0;
  Kind kind = Kind::kAck;
  absl::Duration retry_delay;   // kRetry: run again after this
  std::string error;            // kRetry/kDead: the handler's error, kept
  std::optional<std::string> result;  // kAck: optional result for `partq wait`
  // kRetry only: give the attempt back (graceful hand-off of an unstarted item).
  bool refund_attempt = false;
};

// Finish: one transaction that
//   1. locks this session's session_parts rows for `parts` FOR SHARE and keeps
//      only those still at the given epoch (so no other session can take them
//      until this transaction ends);
//   2. runs `body` with the transaction and the ids of items in those parts;
//      body returns one Outcome per item it was given;
//   3. deletes acked items (WHERE claim_epoch = the part's epoch), reschedules
//      retried ones, moves dead ones to dead_items, records results;
//   4. commits.
// Returns the ids acked/retried/dead-lettered and the ids dropped because their
// part is no longer owned at that epoch (fenced: nothing of theirs committed).
// If `body` returns an error the transaction rolls back and that error is
// returned.
//
// Dead-letter topic: when the queue has a dlq_topic (QueueConfig), step 3 also
// writes one outbox row per dead-lettered item, so the row commits exactly
// when the item moves to dead_items; `partq bridge publish` sends it. The
// message is the item as it came in: key (an item ingested from Kafka gets its
// original key bytes back), payload, and the original Kafka headers, followed
// by context headers named as Kafka Connect's dead-letter queue names them
// (values are UTF-8 text; the origin ones only for items ingested from Kafka):
//   __connect.errors.topic, __connect.errors.partition, __connect.errors.offset
//   __connect.errors.exception.message   the last error
//   partq.errors.attempts                attempts made (claims), as a number
//   partq.errors.queue                   the queue the item died in
//   partq.errors.item.id                 the item's id (also dead_items.id)
// The context headers come last, so a consumer's "last header of this name"
// (Java's Headers.lastHeader) is this failure's even when the original
// message already carried such headers (a replayed dead letter).
struct FinishRequest {
  std::string queue;
  SessionId session;
  std::vector<OwnedPart> parts;  // the fence: part and epoch claimed under
  std::vector<Item> items;       // claimed items to finish
  int max_attempts = 25;
};
struct FinishResult {
  std::vector<int64_t> acked;
  std::vector<int64_t> retried;
  std::vector<int64_t> dead;
  std::vector<int64_t> fenced;
};
using FinishBody =
    std::function<absl::StatusOr<std::vector<Outcome>>(Tx&, absl::Span<const Item> owned_items)>;

struct JoinRequest {
  std::string queue;
  std::string instance_id;  // non-empty: static member (stable id, keeps parts)
  std::string host;
  int pid = 0;
};
struct JoinResult {
  SessionId id;
  int64_t incarnation = 0;
  // Static re-join within the TTL: the parts the previous incarnation owned,
  // now at fresh epochs (fencing the previous incarnation's acks).
  std::vector<OwnedPart> kept;
};

struct ClaimRequest {
  std::string queue;
  std::vector<OwnedPart> parts;  // claim only in these, under these epochs
  int limit = 100;
  bool ordered = false;          // per key: only the oldest live item
  // Also claim at most one item whose previous claim was abandoned (its owner
  // died mid-item); it is returned with suspect=true, to run on its own.
  bool include_suspect = true;
};

// Per-part and per-session state for `partq status` and the metrics.
struct PartStatus {
  int part = 0;
  std::optional<SessionId> owner;
  Epoch epoch;
  int64_t ready = 0;
  int64_t delayed = 0;
  int64_t in_flight = 0;
  int64_t dead = 0;
  absl::Duration oldest_ready_age;  // zero when none is ready
};
struct QueueStatus {
  QueueConfig config;
  absl::Time db_now;
  std::vector<SessionInfo> sessions;
  std::vector<PartStatus> parts;  // one per part, 0..P-1
};

// The state of one item, for `partq wait`.
struct ItemState {
  enum class Kind { kPending, kDone, kDead, kUnknown };
  Kind kind = Kind::kUnknown;
  int64_t id = 0;
  std::optional<std::string> result;  // kDone: the handler's result, if any
  std::string error;                  // kDead: the last error
  int attempts = 0;
};

// A wake-up from LISTEN.
struct Notice {
  enum class Kind { kItems, kGroup };
  Kind kind = Kind::kItems;
  int part = -1;  // kItems: the part that got items, -1 when unknown
};

// A dedicated LISTEN connection for one queue.
class Listener {
 public:
  virtual ~Listener() = default;
  // Waits up to `timeout` for notices; returns those that arrived (maybe none).
  virtual absl::StatusOr<std::vector<Notice>> Wait(absl::Duration timeout) = 0;
};

// --- Kafka bridge (producer/bridge_*.h) -------------------------------------------

// One consumed Kafka message to ingest as an item.
struct KafkaMessage {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  // The message key, raw bytes. The item's part is PartForKey(key) of these
  // bytes (Kafka's murmur2 partitioner: with equal counts, Kafka partition p
  // and part p hold the same keys). The item's key column is the key itself
  // when it is UTF-8 without NUL and does not start with "\x", else "\x" +
  // lowercase hex of the bytes (so the bytes can be recovered).
  std::optional<std::string> key;
  std::string payload;
  std::optional<std::string> headers_json;  // a JSON array; nullopt: none
};
// Moves a (topic, partition)'s stored next offset by compare-and-set.
struct KafkaOffsetAdvance {
  std::string topic;
  int32_t partition = 0;
  std::optional<int64_t> expected;  // the stored value read before; nullopt: no row
  int64_t next_offset = 0;
};
struct KafkaIngestRequest {
  std::string queue;
  std::vector<KafkaMessage> messages;
  std::vector<KafkaOffsetAdvance> offsets;
};
struct KafkaOffset {
  std::string topic;
  int32_t partition = 0;
  int64_t next_offset = 0;
};
// A row of the outbox, to produce to Kafka.
struct OutboxRow {
  int64_t id = 0;
  std::string topic;
  std::optional<std::string> key;  // raw bytes
  std::string payload;
  std::optional<std::string> headers_json;
};

class Store {
 public:
  virtual ~Store() = default;

  // --- schema ---------------------------------------------------------------
  // Creates or upgrades the schema; idempotent; serialized across processes by
  // an advisory lock, so a fleet may run it at once.
  virtual absl::Status Migrate() = 0;
  // The applied schema version; FailedPrecondition if the schema is missing or
  // newer than this binary knows.
  virtual absl::Status CheckSchema() = 0;

  // --- queues ---------------------------------------------------------------
  virtual absl::Status CreateQueue(const QueueConfig& config) = 0;
  virtual absl::StatusOr<QueueConfig> GetQueue(absl::string_view name) = 0;
  virtual absl::StatusOr<std::vector<QueueConfig>> ListQueues() = 0;
  // Deletes the queue with its sessions, parts and items.
  virtual absl::Status DeleteQueue(absl::string_view name) = 0;
  // Sets (or with nullopt clears) the queue's dead-letter topic; items that
  // die from then on go there. InvalidArgument for a malformed topic name,
  // NotFound for an unknown queue.
  virtual absl::Status SetDeadLetterTopic(absl::string_view queue,
                                          const std::optional<std::string>& topic) = 0;

  // --- sessions (protocol steps 1-4, 8 of DESIGN.md) --------------------------
  virtual absl::StatusOr<JoinResult> Join(const JoinRequest& request) = 0;
  // Moves our expires_at (now() + the queue's TTL, database time), deletes
  // expired sessions of the queue (cascading their parts) and returns the group.
  // alive=false when our row (this incarnation) is gone: the session is dead.
  virtual absl::StatusOr<GroupView> Heartbeat(absl::string_view queue, const SessionId& session,
                                              int64_t incarnation) = 0;
  virtual absl::StatusOr<GroupView> ReadGroup(absl::string_view queue) = 0;
  // Inserts ownership rows for those of `parts` that are free, at fresh
  // epochs; returns the ones acquired. Parts owned by anyone stay as they are.
  virtual absl::StatusOr<std::vector<OwnedPart>> AcquireParts(absl::string_view queue,
                                                              const SessionId& session,
                                                              const std::vector<int>& parts) = 0;
  // Deletes our ownership rows for `parts` (only at the given epochs) and
  // returns unfinished claims made under them to the queue (attempt refunded).
  virtual absl::Status ReleaseParts(absl::string_view queue, const SessionId& session,
                                    const std::vector<OwnedPart>& parts) = 0;
  // Deletes the session (its parts cascade) and returns its unfinished claims.
  virtual absl::Status Leave(absl::string_view queue, const SessionId& session,
                             int64_t incarnation) = 0;
  // Tells the queue's listeners the group changed (join/leave/release).
  virtual absl::Status NotifyGroup(absl::string_view queue) = 0;

  // --- items ----------------------------------------------------------------
  virtual absl::StatusOr<EnqueueResult> Enqueue(absl::string_view queue, const NewItem& item) = 0;
  // Bulk enqueue via COPY; returns the number of items written. All or none.
  virtual absl::StatusOr<int64_t> EnqueueBatch(absl::string_view queue,
                                               const std::vector<NewItem>& items) = 0;
  // Claims up to `limit` ready items of the given parts in (priority, id) order:
  // increments attempts and stamps the claim epoch.
  virtual absl::StatusOr<std::vector<Item>> Claim(const ClaimRequest& request) = 0;
  virtual absl::StatusOr<FinishResult> Finish(const FinishRequest& request,
                                              const FinishBody& body) = 0;
  virtual absl::StatusOr<ItemState> GetItemState(absl::string_view queue, int64_t id) = 0;
  virtual absl::StatusOr<ItemState> GetItemStateByDedupKey(absl::string_view queue,
                                                           absl::string_view dedup_key) = 0;
  virtual absl::StatusOr<QueueStatus> Status(absl::string_view queue) = 0;

  // A new LISTEN connection for `queue` (PgStore); Unimplemented elsewhere.
  virtual absl::StatusOr<std::unique_ptr<Listener>> Listen(absl::string_view queue) = 0;

  // --- Kafka bridge (PgStore; Unimplemented elsewhere) -------------------------
  // One transaction: inserts one item per message (with its origin and
  // headers) and moves every offset in `request.offsets` from `expected` to
  // `next_offset`. If any stored offset is not `expected` (another bridge
  // ingested that partition meanwhile) nothing is written and the result is
  // kAborted: re-read the offsets and seek. Returns the items written.
  virtual absl::StatusOr<int64_t> IngestKafka(const KafkaIngestRequest& request) {
    return absl::UnimplementedError("Kafka ingest needs PostgreSQL");
  }
  // The stored next offsets of `topic` for `queue`, by partition.
  virtual absl::StatusOr<std::vector<KafkaOffset>> ReadKafkaOffsets(absl::string_view queue,
                                                                    absl::string_view topic) {
    return absl::UnimplementedError("Kafka offsets need PostgreSQL");
  }
  // The number of items in `queue` (ready, delayed or in flight), counting no
  // further than `limit` so a deep backlog stays cheap to measure.
  virtual absl::StatusOr<int64_t> CountItems(absl::string_view queue, int64_t limit) {
    return absl::UnimplementedError("CountItems needs PostgreSQL");
  }
  // Up to `limit` outbox rows in id order (all of them are undelivered).
  virtual absl::StatusOr<std::vector<OutboxRow>> ReadOutbox(int limit) {
    return absl::UnimplementedError("the outbox needs PostgreSQL");
  }
  // Deletes delivered outbox rows.
  virtual absl::Status DeleteOutbox(const std::vector<int64_t>& ids) {
    return absl::UnimplementedError("the outbox needs PostgreSQL");
  }
};

// Makes a new Store (a new connection). Thread-safe.
using StoreFactory = std::function<absl::StatusOr<std::unique_ptr<Store>>()>;

}  // namespace partq

#endif  // PARTQ_COORDINATOR_STORE_H_
