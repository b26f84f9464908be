// UTF-8 validity, which abseil 20220623 does not offer publicly. Used where
// bytes become text that others parse: Kafka keys stored as item keys,
// Kafka headers and payloads in JSON (the bridge, the handler protocol).
#ifndef PARTQ_BASE_UTF8_H_
#define PARTQ_BASE_UTF8_H_

#include "absl/strings/string_view.h"

namespace partq {

// True when `s` is well-formed UTF-8 (RFC 3629): no overlong forms, no
// surrogates, nothing past U+10FFFF, no truncated sequence. NUL is valid.
bool IsValidUtf8(absl::string_view s);

}  // namespace partq

#endif  // PARTQ_BASE_UTF8_H_
