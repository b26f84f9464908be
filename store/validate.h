// Validation of the names and settings that reach SQL (queue, schema and
// Kafka topic names, a queue's settings). Every Store checks its input with
// these, so MemStore and PgStore refuse the same things with the same words.
#ifndef PARTQ_STORE_VALIDATE_H_
#define PARTQ_STORE_VALIDATE_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
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

}  // namespace partq

#endif  // PARTQ_STORE_VALIDATE_H_
