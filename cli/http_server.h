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
  // `addr` is HOST:PORT (PORT 0 is not supported by civetweb: pick one).
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
