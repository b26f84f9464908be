// The worker's HTTP endpoints for Prometheus and Kubernetes (civetweb):
//   /metrics  the registry in Prometheus text format
//   /healthz  200 while the process runs
//   /readyz   200 once the session joined and owns parts or waits for a
//             hand-off (readiness callback), 503 otherwise
#ifndef PARTQ_CLI_HTTP_SERVER_H_
#define PARTQ_CLI_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"

class CivetServer;

namespace partq::cli {

class HttpServer {
 public:
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
