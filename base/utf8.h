// UTF-8 validity, which abseil 20220623 does not offer publicly. Used where
// bytes become text that others parse: Kafka keys stored as item keys,
// Kafka headers and payloads in JSON (the bridge, the handler protocol),
// a child's or server's bytes quoted in an error message.
#ifndef PARTQ_BASE_UTF8_H_
#define PARTQ_BASE_UTF8_H_

#include <string>

#include "absl/strings/string_view.h"

namespace partq {

// True when `s` is well-formed UTF-8 (RFC 3629): no overlong forms, no
// surrogates, nothing past U+10FFFF, no truncated sequence. NUL is valid.
bool IsValidUtf8(absl::string_view s);

// `s` fit for a message that may end up in a text column or a log line:
// ASCII control characters (NUL included) and bytes that are not part of
// well-formed UTF-8 become \xNN escapes; the rest is kept. The result is
// valid UTF-8 without NUL. (Not reversible: a backslash stays as it is.)
std::string PrintableUtf8(absl::string_view s);

}  // namespace partq

#endif  // PARTQ_BASE_UTF8_H_
