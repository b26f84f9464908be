// Kafka-style message headers as the JSON partq stores them (items.headers
// for ingested messages, outbox.headers for messages to publish, the
// headers_json fields of KafkaMessage and OutboxEvent): an array of
//   {"key": K, "value": V}       V a string, or null for a null value
//   {"key": K, "value_hex": HEX} a value that is not UTF-8, as lowercase hex
// in their order. The bridge publishes them back as the same bytes.
#ifndef PARTQ_STORE_HEADERS_JSON_H_
#define PARTQ_STORE_HEADERS_JSON_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace partq {

// A header: its key and value (nullopt: a null value).
using Header = std::pair<std::string, std::optional<std::string>>;

// The JSON of `headers`; nullopt when there are none, or when a key is not
// UTF-8 (JSON cannot carry it; Kafka keys are strings, so only a broken
// producer sends one).
std::optional<std::string> HeadersJson(const std::vector<Header>& headers);

}  // namespace partq

#endif  // PARTQ_STORE_HEADERS_JSON_H_
