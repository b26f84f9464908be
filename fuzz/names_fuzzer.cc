// Fuzz target: ValidateQueueName, ValidateSchemaName and ValidateTopicName,
// the gate between user input and SQL (queue names and dead-letter topics
// reach SQL as values, schema names as quoted identifiers). An accepted name
// must hold only the characters the header promises, so it can never break
// out of its quoting.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "store/validate.h"

namespace {

// Aborts unless `name` has 1..max_len characters, each passing `ok`.
template <typename Pred>
void Expect(const std::string& name, size_t max_len, Pred ok) {
  if (name.empty() || name.size() > max_len) abort();
  for (char c : name) {
    if (!ok(static_cast<unsigned char>(c))) abort();
  }
}

bool Dotted(unsigned char c) { return absl::ascii_isalnum(c) || c == '_' || c == '.' || c == '-'; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name(reinterpret_cast<const char*>(data), size);
  if (partq::ValidateQueueName(name).ok()) Expect(name, 63, Dotted);
  if (partq::ValidateSchemaName(name).ok()) {
    Expect(name, 63, [](unsigned char c) {
      return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_';
    });
  }
  if (partq::ValidateTopicName(name).ok()) {
    Expect(name, 249, Dotted);
    if (name == "." || name == "..") abort();
  }
  return 0;
}
