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

// Whether code point `c` changes how the text around it shows without being
// seen itself, on a terminal or a page: the C1 controls (U+0080..U+009F), the
// bidirectional formatting characters (U+061C, U+200E, U+200F,
// U+202A..U+202E, U+2066..U+2069: U+202E shows "exe.txt" as "txt.exe") and
// the line and paragraph separators (U+2028, U+2029).
bool IsInvisibleControl(char32_t c);

// `s` fit for a message that may end up in a text column, a log line or a
// terminal: ASCII control characters (NUL included) and bytes that are not
// part of well-formed UTF-8 become \xNN escapes, invisible controls (above)
// \uXXXX escapes; the rest is kept. The result is valid UTF-8 without NUL.
// (Not reversible: a backslash stays as it is.)
std::string PrintableUtf8(absl::string_view s);

// PrintableUtf8, but newlines and tabs kept: for text of several lines.
std::string PrintableUtf8Lines(absl::string_view s);

// JSON text (nlohmann's dump: well-formed UTF-8, its controls escaped) with
// each invisible control written as a \uXXXX escape instead: the same JSON
// value, safe to show on a terminal.
std::string EscapeInvisibleControls(absl::string_view json);

// Bytes as a JSON string: themselves when they are UTF-8 (returns "utf8"),
// else their base64 (returns "base64"), the encoding a reader needs to get
// the bytes back (the handler protocol's payloads, `partq wait --json`).
const char* TextOrBase64(absl::string_view bytes, std::string* text);

// The first `max_bytes` bytes of `value`, or fewer: never a part of a
// UTF-8 character (a cut inside one would show as \xNN escapes).
absl::string_view CutAtCharacter(absl::string_view value, size_t max_bytes);

// How a message shows a value it refuses or reports: in double quotes,
// PrintableUtf8, and cut after `max_bytes` bytes (CutAtCharacter) with its
// whole length noted, so that a 100 KB value makes a message of one line:
// "aaaa"... (100000 bytes).
inline constexpr size_t kMaxQuotedBytes = 64;
std::string Quoted(absl::string_view value, size_t max_bytes = kMaxQuotedBytes);

}  // namespace partq

#endif  // PARTQ_BASE_UTF8_H_
