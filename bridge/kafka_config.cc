#include "bridge/kafka_config.h"

#include "absl/strings/str_cat.h"

namespace partq {

absl::Status CheckExtraKafkaConfig(const std::map<std::string, std::string>& extra,
                                   absl::Span<const GuardedProperty> guarded) {
  for (const GuardedProperty& g : guarded) {
    if (extra.count(g.key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--kafka-config: ", g.key, " is set by partq: ", g.why));
    }
  }
  return absl::OkStatus();
}

}  // namespace partq
