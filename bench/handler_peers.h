// The handlers at the other end of `partq bench`'s exec and http drains.
//
// The bench's own peers measure partq's transport, not a language runtime:
// they parse each request and write each reply with nlohmann::json, as the
// codec on partq's side does (handlers/protocol.cc), and answer every item
// ok with its payload as the result (EchoReply), so partq writes one results
// row per item in the ack statement. They run as separate processes of the
// `partq` binary (`partq bench-peer exec|http`, not listed in the help): an
// exec child is one by definition, and an http peer in a process of its own
// is what a sidecar is, with its CPU its own and not the worker's.
//
// PeerServer starts a server process (this http peer, or the Node example)
// and waits until it says where it listens.
#ifndef PARTQ_BENCH_HANDLER_PEERS_H_
#define PARTQ_BENCH_HANDLER_PEERS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace partq {
class ChildProcess;
}

namespace partq::bench {

// The reply to one request of the handler protocol (docs/handler-protocol.md)
// that answers each item ok — `with_result`: with its payload as the result
// in the payload's encoding; else with nothing — on one line without '\n'.
// InvalidArgument for a request that is not version 1 or lacks what the
// reply needs.
absl::StatusOr<std::string> EchoReply(absl::string_view request, bool with_result = true);

// `partq bench-peer exec [--no-result]`: reads request lines on stdin and
// writes an EchoReply line for each on stdout, until stdin ends. Returns the
// exit code: 0 at the end of stdin, 1 after a request it cannot answer (said
// on stderr).
int RunExecPeer(bool with_result = true);

// `partq bench-peer http [--no-result]`: serves EchoReply to POSTs on 127.0.0.1, on a port
// the system picks, with keep-alive; writes "ready on http://127.0.0.1:PORT/"
// on stderr once it listens, and stops when its stdin ends (so it never
// outlives the bench that started it). Returns the exit code.
int RunHttpPeer(bool with_result = true);

// A handler server in a process of its own, started with /bin/sh -c
// `command`, which is expected to write "ready on http://HOST:PORT/" on
// stderr once it listens (the bench's http peer and examples/node/server.mjs
// both do). Its other stderr lines are dropped. Destroying it kills its
// whole process group.
class PeerServer {
 public:
  // Unavailable, with the command's last stderr line, if it exits or does
  // not say it is ready within `timeout`.
  static absl::StatusOr<std::unique_ptr<PeerServer>> Start(const std::string& command,
                                                           absl::Duration timeout);
  ~PeerServer();
  PeerServer(const PeerServer&) = delete;
  PeerServer& operator=(const PeerServer&) = delete;

  const std::string& url() const { return url_; }

 private:
  struct Ready;
  PeerServer() = default;
  std::shared_ptr<Ready> ready_;
  std::unique_ptr<ChildProcess> child_;
  std::string url_;
};

// `s` as one word for /bin/sh: in single quotes, each quote inside as '\''.
std::string ShellQuote(absl::string_view s);

}  // namespace partq::bench

#endif  // PARTQ_BENCH_HANDLER_PEERS_H_
