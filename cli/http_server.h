// partq's HTTP endpoints (civetweb), each served when its option is given:
//   /metrics  the registry in Prometheus text format
//   /healthz  200 while the process runs (always)
//   /readyz   200 once the session joined and owns parts or waits for a
//             hand-off (readiness callback), 503 otherwise
//   anything else: the web console (console/console.h)
#ifndef PARTQ_CLI_HTTP_SERVER_H_
#define PARTQ_CLI_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"

class CivetServer;

namespace partq::console {
class Console;
}

namespace partq::cli {

struct HttpServerOptions {
  // The flag the address came from, for error messages.
  std::string flag = "--metrics-addr";
  std::shared_ptr<prometheus::Registry> registry;  // /metrics when set
  std::function<bool(std::string*)> ready;         // /readyz when set
  console::Console* console = nullptr;             // the rest when set; must outlive the server
};

// How the server holds up against clients that connect and send slowly or
// nothing (tested in tests/observability/slow_clients_test.cc). civetweb serves
// a connection on one thread from accept to close, one request each, so it
// answers while fewer than kHttpThreads connections are open. A connection is
// closed when its request header has not arrived kHttpRequestTimeoutMs after
// the connect, or its body that long after the header (408), or when its
// client takes none of a reply for that long.
inline constexpr int kHttpThreads = 128;
inline constexpr int kHttpRequestTimeoutMs = 5000;

// HOST of a HOST:PORT address (as Start takes it), "" for all interfaces.
std::string ListenHost(const std::string& addr);

class HttpServer {
 public:
  // The endpoints `options` asks for on `addr` (as below).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& addr,
                                                           HttpServerOptions options);
  // `addr` is HOST:PORT: HOST an IPv4 address, localhost, 0.0.0.0, * or empty
  // (all interfaces), PORT 1..65535 (civetweb cannot pick one, nor resolve
  // names). InvalidArgument for anything else, Unavailable if it cannot bind.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const std::string& addr, std::shared_ptr<prometheus::Registry> registry,
      std::function<bool(std::string*)> ready);
  ~HttpServer();

 private:
  HttpServer() = default;
  struct Handlers;
  std::unique_ptr<Handlers> handlers_;
  std::unique_ptr<CivetServer> server_;
};

}  // namespace partq::cli

#endif  // PARTQ_CLI_HTTP_SERVER_H_
