#include "console/escape.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/utf8.h"

namespace partq::console {

std::string HtmlEscape(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string PayloadPreview(absl::string_view head, int64_t total) {
  std::string out;
  // PrintableUtf8 escapes controls and invalid UTF-8 but leaves a backslash
  // alone, so "\x00" typed by a producer would look like a NUL byte: escape
  // backslashes first, byte by byte, then let it do the rest. DEL (0x7f) is
  // a control it keeps; escape it here too.
  std::string prepared;
  for (unsigned char c : head) {
    if (c == '\\') {
      prepared += "\\\\";
    } else if (c == 0x7f) {
      prepared += "\\x7f";
    } else {
      prepared += static_cast<char>(c);
    }
  }
  // A payload cut at kDeadPayloadHead may end inside a UTF-8 sequence: its
  // bytes show escaped, which is what they are without their end.
  out = PrintableUtf8(prepared);
  if (total > static_cast<int64_t>(head.size())) {
    absl::StrAppend(&out, "\xe2\x80\xa6 (", total, " bytes)");
  }
  return out;
}

namespace {
int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
std::string Decode(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && Hex(s[i + 1]) >= 0 && Hex(s[i + 2]) >= 0) {
      out += static_cast<char>(Hex(s[i + 1]) * 16 + Hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}
}  // namespace

std::map<std::string, std::string> ParseForm(absl::string_view text) {
  std::map<std::string, std::string> out;
  for (absl::string_view pair : absl::StrSplit(text, '&', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(pair, absl::MaxSplits('=', 1));
    out.emplace(Decode(kv.first), Decode(kv.second));
  }
  return out;
}

}  // namespace partq::console
