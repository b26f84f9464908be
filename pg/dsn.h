// Where a libpq connection string keeps its passwords, so that they can be
// hidden: in a command line (`ps` and /proc/PID/cmdline show it to every
// local user) and in error messages (libpq quotes parts of a malformed URI
// back, the password among them).
#ifndef PARTQ_PG_DSN_H_
#define PARTQ_PG_DSN_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace partq {

// The [begin, end) byte ranges of the password values in `dsn`: each
// `password` keyword's value in key=value form (quoted or not; a malformed
// word is skipped, the scan goes on at the next), and in a postgresql:// or
// postgres:// URI the password of the user info (`user:PASSWORD@`) and of
// any `password=` query parameter, as written (percent-encoded or not).
std::vector<std::pair<size_t, size_t>> DsnPasswordSpans(absl::string_view dsn);

// `dsn` with every byte of its passwords replaced by 'x': the same length,
// so it can be written over the argv string it came from.
std::string MaskDsnPasswords(absl::string_view dsn);

// `message` with each of `dsn`'s passwords replaced by "xxxxx" wherever it
// occurs inside a double-quoted stretch (the way libpq quotes what it did not
// understand: `invalid percent-encoded token: "s3cret%zz"`, or the whole URI).
std::string RedactDsnPasswords(absl::string_view message, absl::string_view dsn);

}  // namespace partq

#endif  // PARTQ_PG_DSN_H_
