#include "console/escape.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
// The length of the UTF-8 sequence `s` begins with, 0 if it is not one.
size_t Utf8Sequence(absl::string_view s) {
  const auto lead = static_cast<unsigned char>(s[0]);
  const size_t n = lead >= 0xc2 && lead <= 0xdf   ? 2
                   : lead >= 0xe0 && lead <= 0xef ? 3
                   : lead >= 0xf0 && lead <= 0xf4 ? 4
                                                  : 0;
  return n != 0 && n <= s.size() && IsValidUtf8(s.substr(0, n)) ? n : 0;
}
}  // namespace

std::vector<PreviewRun> PayloadRuns(absl::string_view head, int64_t total) {
  std::vector<PreviewRun> runs;
  auto append = [&](PreviewRun::Kind kind, absl::string_view text) {
    if (runs.empty() || runs.back().kind != kind) runs.push_back({kind, ""});
    absl::StrAppend(&runs.back().text, text);
  };
  for (size_t i = 0; i < head.size();) {
    const auto c = static_cast<unsigned char>(head[i]);
    const size_t n = c >= 0x20 && c < 0x7f ? 1 : c >= 0x80 ? Utf8Sequence(head.substr(i)) : 0;
    // A character that changes how the text around it shows (U+202E shows
    // "exe.txt" as "txt.exe") is shown as its code, as PrintableUtf8 does.
    char32_t code = n > 1 ? static_cast<unsigned char>(head[i]) & (0x7f >> n) : 0;
    for (size_t k = 1; k < n; ++k) {
      code = (code << 6) | (static_cast<unsigned char>(head[i + k]) & 0x3f);
    }
    if (n > 1 && IsInvisibleControl(code)) {
      append(PreviewRun::kBytes, absl::StrFormat("\\u%04x", static_cast<uint32_t>(code)));
      i += n;
    } else if (n > 0) {
      append(PreviewRun::kText, head.substr(i, n));
      i += n;
    } else {
      append(PreviewRun::kBytes, absl::StrCat("\\x", absl::Hex(c, absl::kZeroPad2)));
      ++i;
    }
  }
  if (total > static_cast<int64_t>(head.size())) {
    runs.push_back({PreviewRun::kMore, absl::StrCat("\xe2\x80\xa6 (", total, " bytes)")});
  }
  return runs;
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
