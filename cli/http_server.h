// partq's HTTP endpoints, each served when its option is given:
//   /metrics  the registry in Prometheus text format
//   /healthz  200 while the process runs (always)
//   /readyz   200 once the session joined and owns parts or waits for a
//             hand-off (readiness callback), 503 otherwise
// on the metrics address (libmicrohttpd), and the web console
// (console/console.h) on its own (civetweb), with /healthz beside it.
#ifndef PARTQ_CLI_HTTP_SERVER_H_
#define PARTQ_CLI_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"

class CivetServer;
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
// nothing (tested in tests/observability/slow_clients_test.cc).
// - The metrics address: libmicrohttpd's one thread waits on every
//   connection with epoll, so a slow client holds a file descriptor, not a
//   thread. It holds up to kMetricsConnections (fewer when the process may
//   not open that many files), and closes a connection that sends nothing
//   for kHttpRequestTimeoutMs.
// - The console: civetweb serves a connection on one thread from accept to
//   close, one request each, so it answers while fewer than kHttpThreads
//   connections are open. A connection is closed when its request header
//   has not arrived kHttpRequestTimeoutMs after the connect, or its body that
//   long after the header (408), or when its client takes none of a reply
//   for that long.
inline constexpr int kHttpThreads = 128;
inline constexpr int kHttpRequestTimeoutMs = 5000;
inline constexpr unsigned int kMetricsConnections = 10000;

// HOST of a HOST:PORT address (as Start takes it), "" for all interfaces.
std::string ListenHost(const std::string& addr);

struct MetricsEndpoints;

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

 private:
  HttpServer() = default;
  struct Handlers;
  std::unique_ptr<Handlers> handlers_;  // the console's
  std::unique_ptr<CivetServer> server_;
  std::unique_ptr<MetricsEndpoints> metrics_;  // the metrics address's
  MHD_Daemon* daemon_ = nullptr;
};

}  // namespace partq::cli

#endif  // PARTQ_CLI_HTTP_SERVER_H_
