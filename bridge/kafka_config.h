// The librdkafka properties a bridge sets itself because its guarantees rest
// on them, and the check that keeps --kafka-config from changing them.
#ifndef PARTQ_BRIDGE_KAFKA_CONFIG_H_
#define PARTQ_BRIDGE_KAFKA_CONFIG_H_

#include <map>
#include <string>

#include "absl/status/status.h"
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

}  // namespace partq

#endif  // PARTQ_BRIDGE_KAFKA_CONFIG_H_
