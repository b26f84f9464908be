// UTF-8 validation (abseil 20220623 has no public one).
#ifndef PARTQ_HANDLERS_UTF8_H_
#define PARTQ_HANDLERS_UTF8_H_

#include <string>

#include "absl/strings/string_view.h"

namespace partq {

// Whether `s` is well-formed UTF-8 as RFC 3629 defines it: no overlong
// forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF. NUL bytes
// are valid (U+0000).
bool IsValidUtf8(absl::string_view s);

// `s` fit for a message that may end up in a text column: ASCII control
// characters (NUL included) and bytes that are not part of well-formed UTF-8
// become \xNN escapes; the rest is kept. The result is valid UTF-8 without
// NUL. (Not reversible: a backslash stays as it is.)
std::string PrintableUtf8(absl::string_view s);

}  // namespace partq

#endif  // PARTQ_HANDLERS_UTF8_H_
