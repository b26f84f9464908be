// Password spans of libpq connection strings (pg/dsn.h).
#include "pg/dsn.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace partq {
namespace {

bool IsSpace(char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); }

// key=value words, as libpq's conninfo_parse reads them: spaces around '=',
// a value in single quotes (backslash escapes inside) or up to the next space
// (backslash escapes too).
void KeyValueSpans(absl::string_view s, std::vector<std::pair<size_t, size_t>>* out) {
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    while (i < n && IsSpace(s[i])) ++i;
    if (i >= n) break;
    const size_t key_begin = i;
    while (i < n && s[i] != '=' && !IsSpace(s[i])) ++i;
    const absl::string_view key = s.substr(key_begin, i - key_begin);
    size_t j = i;
    while (j < n && IsSpace(s[j])) ++j;
    if (j >= n || s[j] != '=') {
      // Not a key=value word: libpq refuses the string; go on from the next
      // word, so a password after it is still found.
      continue;
    }
    i = j + 1;
    while (i < n && IsSpace(s[i])) ++i;
    size_t begin, end;
    if (i < n && s[i] == '\'') {
      begin = ++i;
      while (i < n && s[i] != '\'') i += s[i] == '\\' ? 2 : 1;
      end = std::min(i, n);
      ++i;  // the closing quote
    } else {
      begin = i;
      while (i < n && !IsSpace(s[i])) i += s[i] == '\\' ? 2 : 1;
      end = std::min(i, n);
    }
    if (key == "password" && end > begin) out->emplace_back(begin, end);
  }
}

}  // namespace

std::vector<std::pair<size_t, size_t>> DsnPasswordSpans(absl::string_view dsn) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t start;
  if (absl::StartsWith(dsn, "postgresql://")) {
    start = 13;
  } else if (absl::StartsWith(dsn, "postgres://")) {
    start = 11;
  } else {
    KeyValueSpans(dsn, &out);
    return out;
  }
  // The user info ends at the first '@' before any '/' (libpq's
  // conninfo_uri_parse_options); its password follows the first ':'.
  size_t i = start;
  while (i < dsn.size() && dsn[i] != '@' && dsn[i] != '/') ++i;
  if (i < dsn.size() && dsn[i] == '@') {
    const size_t colon = dsn.find(':', start);
    if (colon < i && colon + 1 < i) out.emplace_back(colon + 1, i);
  }
  // Query parameters: password=VALUE up to the next '&'.
  const size_t q = dsn.find('?', i);
  for (size_t p = q; p != absl::string_view::npos && p < dsn.size();) {
    const size_t word = p + 1;
    const size_t amp = dsn.find('&', word);
    const size_t end = amp == absl::string_view::npos ? dsn.size() : amp;
    const absl::string_view param = dsn.substr(word, end - word);
    if (absl::StartsWith(param, "password=") && param.size() > 9) {
      out.emplace_back(word + 9, end);
    }
    p = amp;
  }
  return out;
}

std::string MaskDsnPasswords(absl::string_view dsn) {
  std::string out(dsn);
  for (const auto& [begin, end] : DsnPasswordSpans(dsn)) {
    for (size_t i = begin; i < end; ++i) out[i] = 'x';
  }
  return out;
}

std::string RedactDsnPasswords(absl::string_view message, absl::string_view dsn) {
  std::vector<std::string> secrets;
  for (const auto& [begin, end] : DsnPasswordSpans(dsn)) {
    secrets.emplace_back(dsn.substr(begin, end - begin));
  }
  if (secrets.empty()) return std::string(message);
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    const size_t open = message.find('"', i);
    if (open == absl::string_view::npos) break;
    const size_t close = message.find('"', open + 1);
    const size_t end = close == absl::string_view::npos ? message.size() : close;
    absl::StrAppend(&out, message.substr(i, open + 1 - i));
    std::string quoted(message.substr(open + 1, end - open - 1));
    for (const std::string& s : secrets) absl::StrReplaceAll({{s, "xxxxx"}}, &quoted);
    out += quoted;
    i = end;
    if (close != absl::string_view::npos) {
      out += '"';
      i = close + 1;
    }
  }
  if (i < message.size()) absl::StrAppend(&out, message.substr(i));
  return out;
}

}  // namespace partq
