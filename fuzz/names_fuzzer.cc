// Fuzz target: ValidateQueueName and ValidateSchemaName, the gate between
// user input and SQL (queue names reach SQL as values, schema names as
// quoted identifiers). An accepted name must hold only the characters the
// header promises, so it can never break out of its quoting.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "coordinator/pg_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name(reinterpret_cast<const char*>(data), size);
  if (partq::ValidateQueueName(name).ok()) {
    if (name.empty() || name.size() > 63) abort();
    for (char c : name) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' &&
          c != '-') {
        abort();
      }
    }
  }
  if (partq::ValidateSchemaName(name).ok()) {
    if (name.empty() || name.size() > 63) abort();
    for (char c : name) {
      if (!absl::ascii_islower(static_cast<unsigned char>(c)) &&
          !absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '_') {
        abort();
      }
    }
  }
  return 0;
}
