// Fuzz target: cli::Args::Parse and its typed getters, with the flags of
// `partq worker` and `partq enqueue`. The input is argv, NUL-separated.
// Parsing never crashes; errors are InvalidArgument; a getter's value is
// within the bounds it was given.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli/args.h"

namespace {

void Check(bool ok) {
  if (!ok) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using partq::cli::Args;
  std::vector<std::string> argv;
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      argv.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  if (!cur.empty()) argv.push_back(cur);
  auto args = Args::Parse(argv,
                          {"dsn", "schema", "max-payload", "concurrency", "batch", "handler",
                           "delay", "priority", "session-ttl", "parts", "fail-rate"},
                          {"stdin", "quiet", "poll-only"});
  if (!args.ok()) {
    Check(absl::IsInvalidArgument(args.status()));
    return 0;
  }
  for (const char* flag : {"concurrency", "batch", "priority", "parts", "max-payload"}) {
    auto v = args->Int(flag, 1, -32768, 4096);
    Check(v.ok() ? *v >= -32768 && *v <= 4096 : absl::IsInvalidArgument(v.status()));
  }
  auto rate = args->Double("fail-rate", 0, 0, 1);
  Check(rate.ok() ? *rate >= 0 && *rate <= 1 : absl::IsInvalidArgument(rate.status()));
  for (const char* flag : {"delay", "session-ttl"}) {
    auto d = args->Duration(flag, absl::Seconds(1), absl::ZeroDuration(), absl::Hours(24));
    Check(d.ok() ? *d >= absl::ZeroDuration() && *d <= absl::Hours(24)
                 : absl::IsInvalidArgument(d.status()));
  }
  (void)args->GetOr("dsn", "");
  (void)args->Has("stdin");
  return 0;
}
