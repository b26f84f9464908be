// A TCP proxy for fault tests: clients connect to 127.0.0.1:port() and are
// forwarded to 127.0.0.1:upstream_port. On command it breaks the network
// between them: every connection closed (FIN), reset (RST) or stalled (no
// bytes forwarded either way for a while, connections stay open, like a
// partition).
//
// Threads: one forwarding thread (poll over all sockets); the commands are
// thread-safe and take effect within one poll tick (~10 ms).
#ifndef PARTQ_TESTS_FAULT_TCP_PROXY_H_
#define PARTQ_TESTS_FAULT_TCP_PROXY_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace partq::testing {

class TcpProxy {
 public:
  static absl::StatusOr<std::unique_ptr<TcpProxy>> Start(int upstream_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  // Closes both ends of every open connection; returns how many there were.
  int DropAll();
  // Closes both ends with SO_LINGER 0, so each peer gets a RST.
  int ResetAll();
  // Forwards nothing (and accepts nothing) for `d`; connections stay open.
  void Stall(absl::Duration d);
  // From now on, the `nth` read from a client that contains `needle` (e.g. a
  // "COMMIT" query) is forwarded and then its connection closed before any
  // reply comes back: the server runs the statement, the client cannot know.
  void CutAfterClientSends(std::string needle, int nth);
  int connections() const;

 private:
  struct Pair {
    int client = -1;
    int server = -1;
  };
  TcpProxy() = default;
  void Loop();
  int CloseAll(bool reset);

  int listen_fd_ = -1;
  int port_ = 0;
  int upstream_port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::vector<Pair> pairs_ ABSL_GUARDED_BY(mu_);
  absl::Time stalled_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string cut_needle_ ABSL_GUARDED_BY(mu_);
  int cut_countdown_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace partq::testing

#endif  // PARTQ_TESTS_FAULT_TCP_PROXY_H_
