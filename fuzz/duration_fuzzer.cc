// Fuzz target: cli::ParseDurationFlag, the parser behind every duration flag
// (--session-ttl, --delay, --timeout, --handler-timeout, ...). It must never
// crash and must return a finite duration or InvalidArgument.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/time/time.h"
#include "cli/args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto d = partq::cli::ParseDurationFlag(text);
  if (d.ok()) {
    if (*d == absl::InfiniteDuration() || *d == -absl::InfiniteDuration()) abort();
  } else if (!absl::IsInvalidArgument(d.status())) {
    abort();
  }
  return 0;
}
