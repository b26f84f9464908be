// The console's secrets and the checks made on them.
//
// Two secrets, both per process: the operator's token (from --token-file),
// which a browser trades for a session cookie at the login form, and a CSRF
// token, random at start, embedded in the page the console serves and
// required on every POST. A cross-site page can make a browser send the
// cookie but cannot read the page, so it cannot send the CSRF token.
#ifndef PARTQ_CONSOLE_AUTH_H_
#define PARTQ_CONSOLE_AUTH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace partq::console {

// 32 random bytes from the kernel (getrandom), as 64 hex digits.
std::string RandomToken();

// a == b, in time that depends on their lengths only (not on where they
// first differ), so a remote caller cannot find a token byte by byte.
bool SameSecret(absl::string_view a, absl::string_view b);

// The token in `path`: its text without surrounding whitespace.
// InvalidArgument when it cannot be read, when users other than its owner
// and group may read or write it (mode o+r, o+w or o+x: as ssh refuses such
// a key), or when it is empty or shorter than 16 bytes (a token a person can
// guess protects nothing).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// Whether HOST of a listen address reaches only this machine: 127.0.0.0/8,
// localhost, ::1. Empty, 0.0.0.0, * and any other address do not.
bool IsLoopbackHost(absl::string_view host);

// A console must not be reachable from other machines without a token:
// InvalidArgument (bad usage), saying what to do (give `token_flag`), for a
// non-loopback `host` when `has_token` is false.
absl::Status CheckListenAddress(absl::string_view host, bool has_token,
                                absl::string_view token_flag = "--token-file");

}  // namespace partq::console

#endif  // PARTQ_CONSOLE_AUTH_H_
