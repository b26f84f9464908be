// The handlers at the other end of `partq bench`'s exec and http drains.
//
// The bench's own peers measure partq's transport, not a language runtime:
// they parse each request and write each reply with nlohmann::json, as the
// codec on partq's side does (handlers/protocol.cc), and answer every item
// ok with its payload as the result (EchoReply), so partq writes one results
// row per item in the ack statement; or fail 1 % of the items for good
// (PeerOptions::fail_every), for the drains with failing items. They run as
// separate processes of the `partq` binary (`partq bench-peer exec|http`,
// not listed in the help): an exec child is one by definition, and an http
// peer in a process of its own is what a sidecar is, with its CPU its own
// and not the worker's.
//
// PeerServer starts a server process (this http peer, or the Node example)
// and waits until it says where it listens.
#ifndef PARTQ_BENCH_HANDLER_PEERS_H_
#define PARTQ_BENCH_HANDLER_PEERS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace partq {
class ChildProcess;
}

namespace partq::bench {

// Whether a peer with --fail-every `n` fails the item whose payload is `k`.
inline bool FailsEvery(int n, int64_t k) { return n > 0 && ((k % n) + n) % n == n - 1; }

// How a peer answers (`partq bench-peer exec|http [--no-result]
// [--fail-every N]`).
struct PeerOptions {
  // Each ok item with its payload as the result, in the payload's encoding;
  // false: ok with nothing.
  bool with_result = true;
  // > 0: an item whose payload is an integer K with K mod N == N - 1 (1 % of
  // the bench's items 0..M-1 for N = 100; FailsEvery) fails with
  // `"dead": true`, so partq dead-letters it at once.
  int fail_every = 0;
};

// The reply to one request of the handler protocol (docs/handler-protocol.md)
// as `options` say, on one line without '\n'. InvalidArgument for a request
// that is not version 1 or lacks what the reply needs.
absl::StatusOr<std::string> EchoReply(absl::string_view request, const PeerOptions& options = {});

// `partq bench-peer exec`: reads request lines on stdin and writes an
// EchoReply line for each on stdout, until stdin ends. Returns the exit
// code: 0 at the end of stdin, 1 after a request it cannot answer (said on
// stderr).
int RunExecPeer(const PeerOptions& options);

// `partq bench-peer http`: serves EchoReply to POSTs on 127.0.0.1, on a port
// the system picks, with keep-alive; writes "ready on http://127.0.0.1:PORT/"
// on stderr once it listens, and stops when its stdin ends (so it never
// outlives the bench that started it). Returns the exit code.
int RunHttpPeer(const PeerOptions& options);

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
