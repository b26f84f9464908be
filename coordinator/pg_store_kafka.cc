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

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/migrations.h"
#include "coordinator/pg_store_internal.h"
#include "partitioner/part.h"

namespace partq {
namespace pg_internal {
namespace {

constexpr size_t kMaxKafkaKeyBytes = 1024;  // as for any item key

// Compare-and-set of one partition's next offset. With $4 NULL the row must
// not exist yet (insert); else it must hold $4 (update). Under READ COMMITTED
// a concurrent writer of the same row makes this statement wait, then
// re-check the condition against the committed row, so two bridges can never
// both move a partition from the same offset: one of them gets 0 rows.
constexpr const char* kOffsetCas = R"sql(
WITH upd AS (
  UPDATE {schema}.kafka_offsets SET next_offset = $5, updated_at = now()
  WHERE queue = $1 AND topic = $2 AND partition = $3 AND next_offset = $4::bigint
  RETURNING 1),
ins AS (
  INSERT INTO {schema}.kafka_offsets (queue, topic, partition, next_offset)
  SELECT $1, $2, $3, $5 WHERE $4::bigint IS NULL
  ON CONFLICT (queue, topic, partition) DO NOTHING
  RETURNING 1)
SELECT (SELECT count(*) FROM upd) + (SELECT count(*) FROM ins)
)sql";

// The queue's part count and `n` fresh item ids in one round trip; no rows
// when the queue is unknown.
constexpr const char* kReserve = R"sql(
SELECT q.parts, nextval('{schema}.items_id_seq')
FROM {schema}.queues q, generate_series(1, $2::int)
WHERE q.name = $1
)sql";

constexpr const char* kReadOffsets = R"sql(
SELECT partition, next_offset FROM {schema}.kafka_offsets
WHERE queue = $1 AND topic = $2 ORDER BY partition
)sql";

// Counting stops at the limit: the bridge only needs "above the high-water
// mark or not", and a capped count reads at most `limit` index entries.
constexpr const char* kCountItems = R"sql(
SELECT count(*) FROM (SELECT 1 FROM {schema}.items WHERE queue = $1 LIMIT $2) x
)sql";

constexpr const char* kReadOutbox = R"sql(
SELECT id, topic, key, payload, headers::text FROM {schema}.outbox ORDER BY id LIMIT $1
)sql";

constexpr const char* kDeleteOutbox = R"sql(
DELETE FROM {schema}.outbox WHERE id = ANY($1::bigint[])
)sql";

constexpr const char* kWriteOutbox = R"sql(
INSERT INTO {schema}.outbox (topic, key, payload, headers)
VALUES ($1, decode($2, 'hex'), decode($3, 'hex'), $4::jsonb)
)sql";

// True for well-formed UTF-8 without NUL: such keys are stored as they are.
bool IsPlainUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == 0) return false;
    int n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c >> 5) == 0x6) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c >> 4) == 0xe) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c >> 3) == 0x1e) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // truncated sequence
    for (int k = 1; k <= n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 0x2) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

// The item key of a Kafka key (see KafkaMessage::key in store.h). A plain
// key that itself starts with "\x" is hex-encoded too, so the mapping can be
// reversed: the finish statement turns the key of a dead-lettered item back
// into the original bytes for its dead-letter message.
std::string KafkaKeyText(absl::string_view key) {
  if (IsPlainUtf8(key) && !absl::StartsWith(key, "\\x")) return std::string(key);
  return absl::StrCat("\\x", HexEncode(key));
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
  return Run(absl::StrCat("ingest into \"", request.queue, "\""),
             [&]() -> absl::StatusOr<int64_t> {
               pqxx::work tx(*conn_);
               // Items' lock first, as every writer of items takes it, and
               // before the offsets' rows: DeleteQueue locks items, then
               // deletes the queue's offsets (the other order deadlocks).
               tx.exec_prepared("lock_items_for_enqueue");
               const std::string cas = WithSchema(kOffsetCas, options_.schema);
               for (const KafkaOffsetAdvance& o : offsets) {
                 pqxx::result r = tx.exec_params(cas, request.queue, o.topic, o.partition,
                                                 o.expected, o.next_offset);
                 if (r[0][0].as<int64_t>() != 1) {
                   return absl::AbortedError(absl::StrCat(
                       "offset of ", o.topic, "/", o.partition, " is no longer ",
                       o.expected ? absl::StrCat(*o.expected) : std::string("unset"),
                       ": another bridge ingested this partition; re-read and seek"));
                 }
               }
               if (request.messages.empty()) {
                 tx.commit();
                 return int64_t{0};
               }
               pqxx::result ids = tx.exec_params(WithSchema(kReserve, options_.schema),
                                                 request.queue,
                                                 static_cast<int64_t>(request.messages.size()));
               if (ids.empty()) {
                 return UnknownQueue(request.queue, options_.schema);
               }
               const int parts = ids[0][0].as<int>();
               std::vector<int> touched;
               {
                 pqxx::stream_to copy(tx, qschema_ + ".items",
                                      std::vector<std::string>{
                                          "id", "queue", "part", "key", "payload", "origin_topic",
                                          "origin_partition", "origin_offset", "headers"});
                 for (size_t i = 0; i < request.messages.size(); ++i) {
                   const KafkaMessage& m = request.messages[i];
                   const int64_t id = ids[i][1].as<int64_t>();
                   std::optional<std::string> key;
                   int part;
                   if (m.key) {
                     key = KafkaKeyText(*m.key);
                     part = PartForKey(*m.key, parts);
                   } else {
                     part = PartForId(id, parts);
                   }
                   touched.push_back(part);
                   copy << std::make_tuple(id, request.queue, part, key,
                                           absl::StrCat("\\x", HexEncode(m.payload)), m.topic,
                                           m.partition, m.offset, m.headers_json);
                 }
                 copy.complete();
               }
               std::sort(touched.begin(), touched.end());
               touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
               tx.exec_prepared("notify_parts", ChannelFor(options_.schema, request.queue),
                                IntArray(touched));
               tx.commit();
               return static_cast<int64_t>(request.messages.size());
             });
}

absl::StatusOr<std::vector<KafkaOffset>> PgStore::ReadKafkaOffsets(absl::string_view queue,
                                                                   absl::string_view topic) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run("read kafka offsets", [&]() -> absl::StatusOr<std::vector<KafkaOffset>> {
    pqxx::nontransaction tx(*conn_);
    std::vector<KafkaOffset> out;
    for (const pqxx::row& row : tx.exec_params(WithSchema(kReadOffsets, options_.schema),
                                               std::string(queue), std::string(topic))) {
      out.push_back({std::string(topic), row[0].as<int32_t>(), row[1].as<int64_t>()});
    }
    return out;
  });
}

absl::StatusOr<int64_t> PgStore::CountItems(absl::string_view queue, int64_t limit) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run("count items", [&]() -> absl::StatusOr<int64_t> {
    pqxx::nontransaction tx(*conn_);
    pqxx::result r = tx.exec_params(WithSchema(kCountItems, options_.schema), std::string(queue),
                                    std::max<int64_t>(limit, 0));
    return r[0][0].as<int64_t>();
  });
}

absl::StatusOr<std::vector<OutboxRow>> PgStore::ReadOutbox(int limit) {
  return Run("read outbox", [&]() -> absl::StatusOr<std::vector<OutboxRow>> {
    pqxx::nontransaction tx(*conn_);
    std::vector<OutboxRow> out;
    for (const pqxx::row& row :
         tx.exec_params(WithSchema(kReadOutbox, options_.schema), std::max(limit, 0))) {
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
    pqxx::nontransaction tx(*conn_);
    tx.exec_params(WithSchema(kDeleteOutbox, options_.schema), IntArray(ids));
    return absl::OkStatus();
  });
}

}  // namespace pg_internal

absl::Status WriteOutbox(Tx& tx, const OutboxEvent& event) {
  if (absl::Status st = ValidateTopicName(event.topic); !st.ok()) return st;
  std::optional<std::string> key;
  if (event.key) key = pg_internal::HexEncode(*event.key);
  auto r = tx.Exec(WithSchema(pg_internal::kWriteOutbox, tx.schema()),
                   {event.topic, key, pg_internal::HexEncode(event.payload), event.headers_json});
  return r.status();
}

}  // namespace partq
