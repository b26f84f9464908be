#include "base/utf8.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_format.h"

namespace partq {

// The table of RFC 3629, section 4: the first byte decides the length and
// the range of the second byte; later bytes are always 80..BF.
bool IsValidUtf8(absl::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned char* const end = p + s.size();
  while (p < end) {
    // Payloads are mostly ASCII: eight bytes at a time while no high bit is set.
    if (end - p >= 8) {
      uint64_t w;
      memcpy(&w, p, 8);
      if ((w & 0x8080808080808080ULL) == 0) {
        p += 8;
        continue;
      }
    }
    const unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int len;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c == 0xE0) {
      len = 3, lo = 0xA0;  // no overlong forms
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
      len = 3;
    } else if (c == 0xED) {
      len = 3, hi = 0x9F;  // no surrogates
    } else if (c == 0xF0) {
      len = 4, lo = 0x90;  // no overlong forms
    } else if (c >= 0xF1 && c <= 0xF3) {
      len = 4;
    } else if (c == 0xF4) {
      len = 4, hi = 0x8F;  // nothing above U+10FFFF
    } else {
      return false;  // 80..C1 (continuation, overlong), F5..FF
    }
    if (end - p < len) return false;
    if (p[1] < lo || p[1] > hi) return false;
    for (int i = 2; i < len; ++i) {
      if (p[i] < 0x80 || p[i] > 0xBF) return false;
    }
    p += len;
  }
  return true;
}

std::string PrintableUtf8(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // The length a sequence starting with this byte would have.
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (c >= 0x80 && i + len <= s.size() && IsValidUtf8(s.substr(i, len))) {
      out.append(s.data() + i, len);
      i += len;
      continue;
    }
    absl::StrAppendFormat(&out, "\\x%02x", c);
    ++i;
  }
  return out;
}

}  // namespace partq
