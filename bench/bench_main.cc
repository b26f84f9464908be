// partq-bench: the benchmark harness as a binary of its own, so that `partq`
// (what ./scripts/demo builds and waits for) does not compile it. `partq bench
// ARGS` and `partq bench-peer ARGS` run `partq-bench bench ARGS` and
// `partq-bench bench-peer ARGS` from the same directory (cli/main.cc).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/common.h"

int main(int argc, char** argv) {
  using namespace partq::cli;
  setenv("PGCONNECT_TIMEOUT", "10", /*overwrite=*/0);  // as partq's own main
  std::vector<std::string> words(argv + 1, argv + argc);
  HidePasswordsInArgv(argc, argv);
  if (words.empty() || (words[0] != "bench" && words[0] != "bench-peer")) {
    return Usage(
        "usage: partq-bench bench|bench-peer [ARGS] (run by `partq bench`; see "
        "`partq bench --help`)");
  }
  const std::vector<std::string> rest(words.begin() + 1, words.end());
  return words[0] == "bench" ? CmdBench(rest) : CmdBenchPeer(rest);
}
