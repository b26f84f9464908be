// The Kafka bridge's seam to the database (bridge/bridge_ingest.h,
// bridge/bridge_publish.h): exactly-once ingest of Kafka messages as items,
// the stored offsets, the backlog count and the outbox. Apart from the queue
// and schema checks it shares nothing with Store, so a program that never
// runs the bridge never sees these operations, and the stores used to test
// sessions and consumers (MemStore) need not pretend to have them. PgStore
// implements both interfaces on one connection (pg/pg_store.h,
// PgBridgeStoreFactory).
//
// Errors and threading as in store.h: one connection, one thread at a time.
#ifndef PARTQ_STORE_BRIDGE_STORE_H_
#define PARTQ_STORE_BRIDGE_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "store/types.h"

namespace partq {

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

class BridgeStore {
 public:
  virtual ~BridgeStore() = default;

  // As Store::CheckSchema and Store::GetQueue.
  virtual absl::Status CheckSchema() = 0;
  virtual absl::StatusOr<QueueConfig> GetQueue(absl::string_view name) = 0;

  // One transaction: inserts one item per message (with its origin and
  // headers) and moves every offset in `request.offsets` from `expected` to
  // `next_offset`. If any stored offset is not `expected` (another bridge
  // ingested that partition meanwhile) nothing is written and the result is
  // kAborted: re-read the offsets and seek. Returns the items written.
  virtual absl::StatusOr<int64_t> IngestKafka(const KafkaIngestRequest& request) = 0;
  // The stored next offsets of `topic` for `queue`, by partition.
  virtual absl::StatusOr<std::vector<KafkaOffset>> ReadKafkaOffsets(absl::string_view queue,
                                                                    absl::string_view topic) = 0;
  // The number of items in `queue` (ready, delayed or in flight), counting no
  // further than `limit` so a deep backlog stays cheap to measure.
  virtual absl::StatusOr<int64_t> CountItems(absl::string_view queue, int64_t limit) = 0;
  // Up to `limit` outbox rows in id order (all of them are undelivered).
  virtual absl::StatusOr<std::vector<OutboxRow>> ReadOutbox(int limit) = 0;
  // Deletes delivered outbox rows.
  virtual absl::Status DeleteOutbox(const std::vector<int64_t>& ids) = 0;
};

// Makes a new BridgeStore (a new connection). Thread-safe.
using BridgeStoreFactory = std::function<absl::StatusOr<std::unique_ptr<BridgeStore>>()>;

}  // namespace partq

#endif  // PARTQ_STORE_BRIDGE_STORE_H_
