#include "bridge/kafka_config.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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

bool IsSecretKafkaProperty(absl::string_view key) {
  // librdkafka 2.0 flags these _RK_SENSITIVE (rdkafka_conf.c) but has no API
  // to ask; its paths (ssl.key.location, ssl.keystore.location) are not secrets.
  static constexpr absl::string_view kSecrets[] = {
      "sasl.password", "ssl.key.password",        "ssl.keystore.password",
      "ssl.key.pem",   "sasl.oauthbearer.config", "sasl.oauthbearer.client.secret"};
  for (absl::string_view s : kSecrets) {
    if (key == s) return true;
  }
  return false;
}

absl::StatusOr<std::map<std::string, std::string>> ParseKafkaProperties(absl::string_view text,
                                                                        absl::string_view source) {
  std::map<std::string, std::string> out;
  std::map<std::string, int> line_of;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);  // a CRLF file's '\r' too
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    const absl::string_view key =
        absl::StripAsciiWhitespace(line.substr(0, std::min(eq, line.size())));
    if (eq == absl::string_view::npos || key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, " line ", number,
                       ": expected key=value (or a # comment); the line is not shown, it may "
                       "hold a secret"));
    }
    const auto [it, inserted] = line_of.emplace(std::string(key), number);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(source, " line ", number, ": ", key,
                                                     " is set already on line ", it->second));
    }
    out[std::string(key)] = std::string(absl::StripAsciiWhitespace(line.substr(eq + 1)));
  }
  return out;
}

absl::StatusOr<std::map<std::string, std::string>> ReadKafkaPropertiesFile(const std::string& path,
                                                                           absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  return ParseKafkaProperties(ss.str(), absl::StrCat(flag, " ", path));
}

std::string KafkaPropertyError(absl::string_view key, absl::string_view value,
                               absl::string_view err) {
  if (IsSecretKafkaProperty(key)) {
    return absl::StrCat("kafka config ", key,
                        ": librdkafka refused its value (neither it nor librdkafka's message is "
                        "shown: it is a secret)");
  }
  // A key librdkafka does not know may be a secret's mistyped
  // (sasl.pasword, SASL.PASSWORD): its value is not shown either.
  if (absl::StrContains(err, "No such configuration property")) {
    return absl::StrCat("kafka config ", key, ": ", err,
                        " (its value is not shown: the key may be a secret's, mistyped)");
  }
  return absl::StrCat("kafka config ", key, "=", value, ": ", err);
}

}  // namespace partq
