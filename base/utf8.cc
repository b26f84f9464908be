#include "base/utf8.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
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

bool IsInvisibleControl(char32_t c) {
  return (c >= 0x80 && c <= 0x9F) || c == 0x061C || c == 0x200E || c == 0x200F ||
         (c >= 0x2028 && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);
}

namespace {

// The code point of the well-formed sequence of `len` bytes at `p`.
char32_t Decode(const unsigned char* p, size_t len) {
  if (len == 1) return p[0];
  char32_t c = p[0] & (0x7F >> len);
  for (size_t i = 1; i < len; ++i) c = (c << 6) | (p[i] & 0x3F);
  return c;
}

std::string Printable(absl::string_view s, bool keep_lines) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    if ((c >= 0x20 && c < 0x7F) || (keep_lines && (c == '\n' || c == '\t'))) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // The length a sequence starting with this byte would have.
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (c >= 0x80 && i + len <= s.size() && IsValidUtf8(s.substr(i, len))) {
      const char32_t code = Decode(reinterpret_cast<const unsigned char*>(s.data() + i), len);
      if (IsInvisibleControl(code)) {
        absl::StrAppendFormat(&out, "\\u%04x", static_cast<uint32_t>(code));
      } else {
        out.append(s.data() + i, len);
      }
      i += len;
      continue;
    }
    absl::StrAppendFormat(&out, "\\x%02x", c);
    ++i;
  }
  return out;
}

}  // namespace

std::string PrintableUtf8(absl::string_view s) { return Printable(s, /*keep_lines=*/false); }

std::string PrintableUtf8Lines(absl::string_view s) { return Printable(s, /*keep_lines=*/true); }

std::string EscapeInvisibleControls(absl::string_view json) {
  std::string out;
  out.reserve(json.size());
  size_t i = 0;
  while (i < json.size()) {
    const unsigned char c = json[i];
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (c >= 0x80 && i + len <= json.size() && IsValidUtf8(json.substr(i, len))) {
      const char32_t code = Decode(reinterpret_cast<const unsigned char*>(json.data() + i), len);
      if (IsInvisibleControl(code)) {
        absl::StrAppendFormat(&out, "\\u%04x", static_cast<uint32_t>(code));
        i += len;
        continue;
      }
    }
    out += static_cast<char>(c);
    ++i;
  }
  return out;
}

const char* TextOrBase64(absl::string_view bytes, std::string* text) {
  if (IsValidUtf8(bytes)) {
    text->assign(bytes.data(), bytes.size());
    return "utf8";
  }
  *text = absl::Base64Escape(bytes);
  return "base64";
}

absl::string_view CutAtCharacter(absl::string_view value, size_t max_bytes) {
  if (value.size() <= max_bytes) return value;
  // Back to the start of the character the cut would split.
  size_t cut = max_bytes;
  for (int back = 0; back < 3 && cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80;
       ++back) {
    --cut;
  }
  return value.substr(0, cut);
}

std::string Quoted(absl::string_view value, size_t max_bytes) {
  if (value.size() <= max_bytes) return absl::StrCat("\"", PrintableUtf8(value), "\"");
  return absl::StrCat("\"", PrintableUtf8(CutAtCharacter(value, max_bytes)), "\"... (",
                      value.size(), " bytes)");
}

}  // namespace partq
