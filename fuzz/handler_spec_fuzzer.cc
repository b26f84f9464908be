// Fuzz target: ParseHandlerSpec, the parser of `partq worker --handler SPEC`
// (comma-separated noop, sleep:MS, fail:RATE, record:TABLE, crash:PAYLOAD).
// Parsing only: the handlers are built, never run. It must never crash and
// must return a handler or InvalidArgument.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "consumer/builtin_handlers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string spec(reinterpret_cast<const char*>(data), size);
  auto h = partq::ParseHandlerSpec(spec);
  if (h.ok() ? *h == nullptr : !absl::IsInvalidArgument(h.status())) abort();
  return 0;
}
