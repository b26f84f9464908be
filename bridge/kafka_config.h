// The librdkafka properties a bridge sets itself because its guarantees rest
// on them, and the check that keeps --kafka-config from changing them; the
// properties that hold secrets, and the properties file format that keeps
// them out of the command line (--kafka-config-file).
#ifndef PARTQ_BRIDGE_KAFKA_CONFIG_H_
#define PARTQ_BRIDGE_KAFKA_CONFIG_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace partq {

struct GuardedProperty {
  const char* key;
  const char* why;  // what setting it would break, or which flag sets it
};

// InvalidArgument naming the first property of `extra` that is guarded, and
// why; OK otherwise. Keys compare exactly, as librdkafka's do.
absl::Status CheckExtraKafkaConfig(const std::map<std::string, std::string>& extra,
                                   absl::Span<const GuardedProperty> guarded);

// Whether librdkafka property `key` holds a secret (sasl.password,
// ssl.key.password, ssl.keystore.password, ssl.key.pem,
// sasl.oauthbearer.client.secret, sasl.oauthbearer.config: those librdkafka
// marks sensitive whose value is a secret, not a path). Its value is never
// printed, and --kafka-config masks it in argv.
bool IsSecretKafkaProperty(absl::string_view key);

// The properties in `text`, a librdkafka properties file: one `key=value` per
// line (spaces around key and value ignored, the value may contain '='),
// blank lines and lines starting with '#' skipped. InvalidArgument naming
// `source` and the line number, never the line's text (it may hold a secret),
// for a line without '=' or with an empty key, or a key given twice.
absl::StatusOr<std::map<std::string, std::string>> ParseKafkaProperties(absl::string_view text,
                                                                        absl::string_view source);

// ParseKafkaProperties of the file at `path`, whose messages name `flag` and
// the file. InvalidArgument when it cannot be read.
absl::StatusOr<std::map<std::string, std::string>> ReadKafkaPropertiesFile(const std::string& path,
                                                                           absl::string_view flag);

// The message for a property librdkafka refused (`err`, its words): with the
// value, unless the property is secret, when neither the value nor `err`
// (which may quote it) is shown.
std::string KafkaPropertyError(absl::string_view key, absl::string_view value,
                               absl::string_view err);

}  // namespace partq

#endif  // PARTQ_BRIDGE_KAFKA_CONFIG_H_
