#include "base/secret_file.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace partq {

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && (st.st_mode & S_IRWXO) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %s can be read or written by other users (mode %04o): anyone on this machine could "
        "take the secret in it; chmod o-rwx %s (600, or 640 for a group such as Kubernetes' "
        "fsGroup)",
        flag, path, st.st_mode & 07777, path));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  return ss.str();
}

}  // namespace partq
