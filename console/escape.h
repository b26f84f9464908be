// Turning what users control (payloads, errors, keys, hosts, queue names)
// into text that is safe where the console puts it. The browser side never
// parses user data as HTML (it sets textContent); these are the server's
// half: JSON strings must be valid UTF-8, and the few server-rendered pages
// escape HTML.
#ifndef PARTQ_CONSOLE_ESCAPE_H_
#define PARTQ_CONSOLE_ESCAPE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace partq::console {

// `s` with & < > " ' as character references: safe in HTML text and in a
// quoted attribute value.
std::string HtmlEscape(absl::string_view s);

// A payload (raw bytes) as one line of text to show: printable ASCII and
// well-formed UTF-8 as they are, a backslash as \\, and every other byte
// (controls, NUL, newlines, invalid UTF-8) as \xNN, so no byte is hidden and
// two different payloads never look the same. `total` is the payload's whole
// size: when `head` is shorter, "…" and the size follow.
std::string PayloadPreview(absl::string_view head, int64_t total);

// The same bytes as runs for a page to show, in order: kText (printable
// ASCII and well-formed UTF-8, as they are, backslashes and all), kBytes
// (the other bytes, each as \xNN, and the characters that change how the
// text around them shows, bidi and C1 controls, as \uXXXX: base/utf8.h,
// IsInvisibleControl) and, when `head` is shorter than `total`,
// a last kMore ("…" and the size). The page marks the escaped runs apart
// from the text, so a typed "\x00" and a NUL byte differ without a backslash
// shown doubled.
struct PreviewRun {
  enum Kind { kText, kBytes, kMore };
  Kind kind = kText;
  std::string text;
};
std::vector<PreviewRun> PayloadRuns(absl::string_view head, int64_t total);

// Decodes application/x-www-form-urlencoded text (a query string or a form
// body): `+` is a space, %XX a byte; a malformed escape is kept as it is.
// A name given twice keeps its first value.
std::map<std::string, std::string> ParseForm(absl::string_view text);

}  // namespace partq::console

#endif  // PARTQ_CONSOLE_ESCAPE_H_
