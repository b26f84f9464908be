// Reading a secret from a file named by a flag (a console token, an HTTP
// handler's Authorization value): refused when other users may read or
// write the file, as ssh refuses such a private key. A group may read it:
// Kubernetes gives a Secret's files to the pod's fsGroup.
#ifndef PARTQ_BASE_SECRET_FILE_H_
#define PARTQ_BASE_SECRET_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace partq {

// The whole content of `path`. InvalidArgument, naming `flag`, when it
// cannot be read or other users may read or write it.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, absl::string_view flag);

}  // namespace partq

#endif  // PARTQ_BASE_SECRET_FILE_H_
