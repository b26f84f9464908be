// Fuzz target: ParseReply, the parser of a handler's reply
// (docs/handler-protocol.md), the answer to a batch of items 1, 2 and 3. A
// reply comes from a program partq does not control. It must never crash;
// it returns one reply per item, in the batch's order, or InvalidArgument /
// ResourceExhausted with a message that can go to a text column (UTF-8, no
// NUL).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "absl/strings/string_view.h"
#include "handlers/protocol.h"
#include "base/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view reply(reinterpret_cast<const char*>(data), size);
  const std::vector<int64_t> ids = {1, 2, 3};
  partq::ReplyLimits limits;
  limits.max_reply_bytes = 1 << 16;
  limits.max_effects_per_item = 4;
  limits.max_headers_per_message = 4;
  auto r = partq::ParseReply(reply, "b1", ids, limits);
  if (r.ok()) {
    if (r->size() != ids.size()) abort();
    for (size_t i = 0; i < ids.size(); ++i) {
      const partq::ItemReply& one = (*r)[i];
      if (one.id != ids[i]) abort();
      if (one.enqueue.size() + one.publish.size() > limits.max_effects_per_item) abort();
      if (!one.ok && (!one.enqueue.empty() || !one.publish.empty() || one.result)) abort();
      if (one.ok && (one.dead || one.retry_in || !one.error.empty())) abort();
      if (one.retry_in && *one.retry_in < absl::ZeroDuration()) abort();
      if (!partq::IsValidUtf8(one.error)) abort();
    }
  } else {
    if (!absl::IsInvalidArgument(r.status()) && !absl::IsResourceExhausted(r.status())) abort();
    const absl::string_view m = r.status().message();
    if (!partq::IsValidUtf8(m) || m.find('\0') != absl::string_view::npos) abort();
  }
  return 0;
}
