// Secret spans of libpq connection strings (pg/dsn.h). The words are found by
// scanning the text the way libpq does (a parse gives values, not where they
// were); whether a word sets a secret is asked of libpq.
#include "pg/dsn.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace partq {
namespace {

bool IsSpace(char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); }

// Each option libpq marks secret that `conninfo` sets, as libpq reads it.
std::optional<std::vector<std::string>> ParsedSecrets(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (error != nullptr) PQfreemem(error);
  if (options == nullptr) return std::nullopt;
  std::vector<std::string> out;
  for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val != nullptr && o->dispchar != nullptr && std::strchr(o->dispchar, '*') != nullptr) {
      out.emplace_back(o->val);
    }
  }
  PQconninfoFree(options);
  return out;
}

// libpq's verdict on a key as written: whether a word with it sets a secret
// option (in a URI the key is percent-decoded first, as libpq does).
bool IsSecretKey(absl::string_view key, bool uri) {
  const std::string probe =
      uri ? absl::StrCat("postgresql://?", key, "=x") : absl::StrCat(key, "=x");
  const auto secrets = ParsedSecrets(probe);
  return secrets.has_value() && !secrets->empty();
}

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
    if (end > begin && IsSecretKey(key, /*uri=*/false)) out->emplace_back(begin, end);
  }
}

// A URI from `start`, the first byte after "scheme://".
void UriSpans(absl::string_view dsn, size_t start, std::vector<std::pair<size_t, size_t>>* out) {
  // The user info ends at the first '@' before any '/' (libpq's
  // conninfo_uri_parse_options); its password follows the first ':'.
  size_t i = start;
  while (i < dsn.size() && dsn[i] != '@' && dsn[i] != '/') ++i;
  if (i < dsn.size() && dsn[i] == '@') {
    const size_t colon = dsn.find(':', start);
    if (colon < i && colon + 1 < i) out->emplace_back(colon + 1, i);
  }
  // Query parameters: KEY=VALUE up to the next '&'.
  const size_t q = dsn.find('?', i);
  for (size_t p = q; p != absl::string_view::npos && p < dsn.size();) {
    const size_t word = p + 1;
    const size_t amp = dsn.find('&', word);
    const size_t end = amp == absl::string_view::npos ? dsn.size() : amp;
    const size_t eq = dsn.find('=', word);
    if (eq < end && eq + 1 < end && IsSecretKey(dsn.substr(word, eq - word), /*uri=*/true)) {
      out->emplace_back(eq + 1, end);
    }
    p = amp;
  }
}

}  // namespace

std::vector<std::pair<size_t, size_t>> DsnPasswordSpans(absl::string_view dsn) {
  std::vector<std::pair<size_t, size_t>> out;
  // libpq takes a URI only from the first byte; one after spaces is refused
  // with a message that quotes it, so it is masked as a URI too.
  size_t i = 0;
  while (i < dsn.size() && IsSpace(dsn[i])) ++i;
  const absl::string_view rest = dsn.substr(i);
  if (absl::StartsWith(rest, "postgresql://")) {
    UriSpans(dsn, i + 13, &out);
  } else if (absl::StartsWith(rest, "postgres://")) {
    UriSpans(dsn, i + 11, &out);
  } else {
    KeyValueSpans(dsn, &out);
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

std::optional<std::vector<std::string>> DsnSecretValues(absl::string_view dsn) {
  return ParsedSecrets(std::string(dsn));
}

std::string RedactDsnPasswords(absl::string_view message, absl::string_view dsn) {
  std::vector<std::string> secrets;
  for (const auto& [begin, end] : DsnPasswordSpans(dsn)) {
    secrets.emplace_back(dsn.substr(begin, end - begin));
  }
  if (auto decoded = DsnSecretValues(dsn)) {
    for (std::string& s : *decoded) {
      if (!s.empty()) secrets.push_back(std::move(s));
    }
  }
  if (secrets.empty()) return std::string(message);
  // The longest first, so that a secret inside another is not left half replaced.
  std::sort(secrets.begin(), secrets.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
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
