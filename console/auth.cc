#include "console/auth.h"

#include <arpa/inet.h>
#include <sys/random.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/secret_file.h"

namespace partq::console {

std::string RandomToken() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    // getrandom on a 3.17+ kernel with an initialised pool does not fail;
    // a secret made of zeros would be worse than stopping.
    if (n <= 0) abort();
    got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

bool SameSecret(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> file = ReadSecretFile(path, "--token-file");
  if (!file.ok()) return file.status();
  std::string token(absl::StripAsciiWhitespace(*file));
  if (token.size() < 16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--token-file: the token in ", path,
        " is shorter than 16 characters; make one with `(umask 077; openssl rand -hex 32 > ", path,
        ")`"));
  }
  return token;
}

bool IsLoopbackHost(absl::string_view host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr ip{};
  const std::string h(host);
  if (inet_pton(AF_INET, h.c_str(), &ip) != 1) return false;
  return (ntohl(ip.s_addr) >> 24) == 127;
}

absl::Status CheckListenAddress(absl::string_view host, bool has_token,
                                absl::string_view token_flag) {
  if (has_token || IsLoopbackHost(host)) return absl::OkStatus();
  // Flags that do not go together: bad usage (exit status 2), as the other
  // flags the console refuses.
  return absl::InvalidArgumentError(absl::StrCat(
      "refusing to serve the console on \"", host.empty() ? "*" : host,
      "\" (reachable from other machines) without a token: give ", token_flag,
      " FILE (e.g. made with `(umask 077; openssl rand -hex 32 > FILE)`), or listen on 127.0.0.1"));
}

}  // namespace partq::console
