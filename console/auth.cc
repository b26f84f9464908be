#include "console/auth.h"

#include <arpa/inet.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--token-file: cannot read ", path));
  // As ssh refuses a private key others can read. A group may read it:
  // Kubernetes gives a Secret's files to the pod's fsGroup.
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && (st.st_mode & S_IRWXO) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--token-file: %s can be read or written by other users (mode %04o): anyone on this "
        "machine could take the console's token; chmod o-rwx %s (600, or 640 for a group "
        "such as Kubernetes' fsGroup)",
        path, st.st_mode & 07777, path));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(ss.str()));
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
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to serve the console on \"", host.empty() ? "*" : host,
      "\" (reachable from other machines) without a token: give ", token_flag,
      " FILE (e.g. made with `(umask 077; openssl rand -hex 32 > FILE)`), or listen on 127.0.0.1"));
}

}  // namespace partq::console
