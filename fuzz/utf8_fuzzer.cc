// Fuzz target: IsValidUtf8 (base/utf8.h), checked against nlohmann::json's strict UTF-8
// decoder (a serialization of a string that is not UTF-8 throws).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "base/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string s(reinterpret_cast<const char*>(data), size);
  bool reference = true;
  try {
    (void)nlohmann::json(s).dump();
  } catch (const nlohmann::json::type_error&) {
    reference = false;
  }
  if (partq::IsValidUtf8(s) != reference) abort();
  return 0;
}
