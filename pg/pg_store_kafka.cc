// PgStore's Kafka bridge operations (schema migration 2): exactly-once ingest
// (items and offsets in one transaction), the outbox, the backlog count.
//
// These statements run as parameterized (unprepared) statements: the bridge
// runs one per batch of messages, not one per item, so a Parse per call costs
// nothing measurable, and the prepared set in pg_store_sql.cc stays the
// consumer's hot path.
#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/utf8.h"
#include "partitioner/part.h"
#include "pg/migrations.h"
#include "pg/pg_store_internal.h"

namespace partq {
namespace pg_internal {
namespace {

constexpr size_t kMaxKafkaKeyBytes = 1024;  // as for any item key

// The item key of a Kafka key (see KafkaMessage::key in store.h). A plain
// key that itself starts with "\x" is hex-encoded too, so the mapping can be
// reversed: the finish statement turns the key of a dead-lettered item back
// into the original bytes for its dead-letter message.
std::string KafkaKeyText(absl::string_view key) {
  if (IsValidUtf8(key) && !absl::StrContains(key, '\0') && !absl::StartsWith(key, "\\x")) {
    return std::string(key);
  }
  return absl::StrCat("\\x", absl::BytesToHexString(key));
}

}  // namespace

absl::StatusOr<int64_t> PgStore::IngestKafka(const KafkaIngestRequest& request) {
  if (absl::Status st = ValidateQueueName(request.queue); !st.ok()) return st;
  if (request.messages.empty() && request.offsets.empty()) return 0;
  for (const KafkaMessage& m : request.messages) {
    if (static_cast<int64_t>(m.payload.size()) > options_.max_payload_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "message ", m.topic, "/", m.partition, "@", m.offset, ": payload is ", m.payload.size(),
          " bytes; the limit is ", options_.max_payload_bytes, " (--max-payload)"));
    }
    if (m.key && m.key->size() > kMaxKafkaKeyBytes) {
      return absl::InvalidArgumentError(absl::StrCat("message ", m.topic, "/", m.partition, "@",
                                                     m.offset, ": key is ", m.key->size(),
                                                     " bytes; the limit is ", kMaxKafkaKeyBytes));
    }
  }
  // Offsets in (topic, partition) order, so two bridges racing for the same
  // partitions lock their rows in one order and cannot deadlock.
  std::vector<KafkaOffsetAdvance> offsets = request.offsets;
  std::sort(offsets.begin(), offsets.end(), [](const auto& a, const auto& b) {
    return std::tie(a.topic, a.partition) < std::tie(b.topic, b.partition);
  });
  return Run(absl::StrCat("ingest into \"", request.queue, "\""), [&]() -> absl::StatusOr<int64_t> {
    PgWork<> tx(*conn_, options_.transaction_pooler);
    // Items' lock first, as every writer of items takes it, and
    // before the offsets' rows: DeleteQueue locks items, then
    // deletes the queue's offsets (the other order deadlocks).
    Exec(tx, "lock_items_for_enqueue");
    for (const KafkaOffsetAdvance& o : offsets) {
      // pg/sql/kafka_offset_cas.sql says why two bridges cannot both move it.
      pqxx::result r = Exec(tx, "kafka_offset_cas", request.queue, o.topic, o.partition, o.expected,
                            o.next_offset);
      if (r[0][0].as<int64_t>() != 1) {
        return absl::AbortedError(
            absl::StrCat("offset of ", o.topic, "/", o.partition, " is no longer ",
                         o.expected ? absl::StrCat(*o.expected) : std::string("unset"),
                         ": another bridge ingested this partition; re-read and seek"));
      }
    }
    if (request.messages.empty()) {
      tx.commit();
      return int64_t{0};
    }
    std::vector<CopyRow> rows(request.messages.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const KafkaMessage& m = request.messages[i];
      if (m.key) rows[i].key = KafkaKeyText(*m.key);
      rows[i].part_key = m.key;  // the raw bytes, as Kafka partitions them
      rows[i].payload = m.payload;
      rows[i].origin = &m;
    }
    absl::StatusOr<int64_t> n = CopyItems(tx, request.queue, rows);
    if (!n.ok()) return n;
    tx.commit();
    return static_cast<int64_t>(request.messages.size());
  });
}

absl::StatusOr<std::vector<KafkaOffset>> PgStore::ReadKafkaOffsets(absl::string_view queue,
                                                                   absl::string_view topic) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run("read kafka offsets", [&]() -> absl::StatusOr<std::vector<KafkaOffset>> {
    pqxx::transaction_base& tx = Autocommit();
    std::vector<KafkaOffset> out;
    for (const pqxx::row& row : Exec(tx, "kafka_offsets", std::string(queue), std::string(topic))) {
      out.push_back({std::string(topic), row[0].as<int32_t>(), row[1].as<int64_t>()});
    }
    return out;
  });
}

absl::StatusOr<int64_t> PgStore::CountItems(absl::string_view queue, int64_t limit) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run("count items", [&]() -> absl::StatusOr<int64_t> {
    pqxx::transaction_base& tx = Autocommit();
    pqxx::result r = Exec(tx, "count_items", std::string(queue), std::max<int64_t>(limit, 0));
    return r[0][0].as<int64_t>();
  });
}

absl::StatusOr<std::vector<OutboxRow>> PgStore::ReadOutbox(int limit) {
  return Run("read outbox", [&]() -> absl::StatusOr<std::vector<OutboxRow>> {
    pqxx::transaction_base& tx = Autocommit();
    std::vector<OutboxRow> out;
    for (const pqxx::row& row : Exec(tx, "outbox_read", std::max(limit, 0))) {
      OutboxRow o;
      o.id = row[0].as<int64_t>();
      o.topic = row[1].c_str();
      if (!row[2].is_null()) {
        std::string key;
        if (!DecodeBytea(row[2].c_str(), &key)) return absl::InternalError("bad bytea in outbox");
        o.key = std::move(key);
      }
      if (!DecodeBytea(row[3].c_str(), &o.payload)) {
        return absl::InternalError("bad bytea in outbox");
      }
      o.headers_json = Text(row[4]);
      out.push_back(std::move(o));
    }
    return out;
  });
}

absl::Status PgStore::DeleteOutbox(const std::vector<int64_t>& ids) {
  if (ids.empty()) return absl::OkStatus();
  return Run("delete outbox rows", [&]() -> absl::Status {
    pqxx::transaction_base& tx = Autocommit();
    Exec(tx, "outbox_delete", IntArray(ids));
    return absl::OkStatus();
  });
}

}  // namespace pg_internal

}  // namespace partq
