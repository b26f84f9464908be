#include "store/headers_json.h"

#include "absl/strings/escaping.h"
#include "base/utf8.h"
#include "nlohmann/json.hpp"

namespace partq {

std::optional<std::string> HeadersJson(const std::vector<Header>& headers) {
  if (headers.empty()) return std::nullopt;
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, value] : headers) {
    if (!IsValidUtf8(key)) return std::nullopt;
    nlohmann::json one = {{"key", key}};
    if (!value) {
      one["value"] = nullptr;
    } else if (IsValidUtf8(*value)) {
      one["value"] = *value;
    } else {
      one["value_hex"] = absl::BytesToHexString(*value);
    }
    out.push_back(std::move(one));
  }
  return out.dump();
}

}  // namespace partq
