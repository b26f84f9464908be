#include "cli/common.h"
namespace partq::cli {
int CmdBench(const std::vector<std::string>&) { return Fail(absl::UnimplementedError("bench: in progress")); }
}  // namespace partq::cli
