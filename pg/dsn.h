// Where a libpq connection string keeps its secrets, so that they can be
// hidden: in a command line (`ps` and /proc/PID/cmdline show it to every
// local user) and in error messages (libpq quotes parts of a malformed URI
// back, the password among them).
//
// The secrets are what libpq itself marks secret (PQconninfoOption's dispchar
// "*": password and sslpassword), and which words set them is libpq's verdict
// too (PQconninfoParse on each word), so spellings libpq accepts are found:
// `?%70assword=` in a URI, `sslpassword=`. passfile is not one: it names a
// file (which libpq wants readable by its owner only), like sslkey.
#ifndef PARTQ_PG_DSN_H_
#define PARTQ_PG_DSN_H_

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace partq {

// The [begin, end) byte ranges of the secret values in `dsn`, as written
// (quoted, escaped or percent-encoded): in key=value form each word whose key
// libpq reads as a secret option (a malformed word is skipped, the scan goes
// on at the next); in a postgresql:// or postgres:// URI (leading spaces
// allowed) the password of the user info (`user:PASSWORD@`) and each query
// parameter whose key, percent-decoded, names a secret option.
std::vector<std::pair<size_t, size_t>> DsnPasswordSpans(absl::string_view dsn);

// `dsn` with every byte of its secrets replaced by 'x': the same length, so
// it can be written over the argv string it came from.
std::string MaskDsnPasswords(absl::string_view dsn);

// `message` with each of `dsn`'s secrets, as written and as libpq decodes
// them, replaced by "xxxxx" wherever it occurs inside a double-quoted stretch
// (the way libpq quotes what it did not understand: `invalid percent-encoded
// token: "s3cret%zz"`, or the whole URI).
std::string RedactDsnPasswords(absl::string_view message, absl::string_view dsn);

// The values libpq reads from `dsn` for its secret options (decoded), or
// nullopt when libpq cannot parse `dsn`.
std::optional<std::vector<std::string>> DsnSecretValues(absl::string_view dsn);

}  // namespace partq

#endif  // PARTQ_PG_DSN_H_
