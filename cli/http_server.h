// partq's HTTP endpoints (libmicrohttpd), each served when its option is given:
//   /metrics  the registry in Prometheus text format
//   /healthz  200 while the process runs (always)
//   /readyz   200 once the session joined and owns parts or waits for a
//             hand-off (readiness callback), 503 otherwise
// on the metrics address, and the web console (console/console.h) on its
// own, with /healthz beside it.
#ifndef PARTQ_CLI_HTTP_SERVER_H_
#define PARTQ_CLI_HTTP_SERVER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"

struct MHD_Daemon;

namespace partq::console {
class Console;
}

namespace partq::cli {

struct HttpServerOptions {
  // The flag the address came from, for error messages.
  std::string flag = "--console-listen";
  console::Console* console = nullptr;  // must outlive the server
};

// How the servers hold up against clients that connect and send slowly or
// nothing (tested in tests/observability/slow_clients_test.cc): their
// threads wait on every connection at once (epoll), so a slow client holds
// a file descriptor and a little memory, not a thread. Each server holds up
// to kHttpConnections (fewer when the process may not open that many
// files), at most kHttpConnectionsPerAddress from one client address (a
// probe or a scrape comes from an address of its own), each with at most
// the request memory below for its request header; it closes a connection
// that sends nothing for kHttpRequestTimeoutMs, and a console request whose
// body is not all in kHttpRequestTimeoutMs after it began. The metrics
// address runs one thread (its answers come from memory), the console
// kConsoleThreads (an action waits for the database).
inline constexpr int kHttpRequestTimeoutMs = 5000;
inline constexpr unsigned int kHttpConnections = 4096;
inline constexpr unsigned int kHttpConnectionsPerAddress = 64;
inline constexpr size_t kMetricsRequestMemory = 16 * 1024;
inline constexpr size_t kConsoleRequestMemory = 32 * 1024;
inline constexpr unsigned int kConsoleThreads = 4;

// HOST of a HOST:PORT address (as Start takes it), "" for all interfaces.
std::string ListenHost(const std::string& addr);

class HttpServer {
 public:
  // The console on `addr` (as below).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& addr,
                                                           HttpServerOptions options);
  // /metrics (when `registry` is set), /healthz and /readyz (when `ready` is
  // set) on `addr`, HOST:PORT: HOST an IPv4 address, localhost, 0.0.0.0, * or
  // empty (all interfaces), PORT 1..65535 (no port picked, no names
  // resolved). InvalidArgument for anything else, Unavailable if it cannot
  // bind.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const std::string& addr, std::shared_ptr<prometheus::Registry> registry,
      std::function<bool(std::string*)> ready);
  ~HttpServer();

  struct Endpoints;

 private:
  HttpServer() = default;
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& addr,
                                                           const std::string& flag,
                                                           std::unique_ptr<Endpoints> e);
  std::unique_ptr<Endpoints> endpoints_;
  MHD_Daemon* daemon_ = nullptr;
};

}  // namespace partq::cli

#endif  // PARTQ_CLI_HTTP_SERVER_H_
