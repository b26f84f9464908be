#include "cli/http_server.h"

#include <CivetServer.h>
#include <arpa/inet.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/process_metrics.h"
#include "prometheus/text_serializer.h"

namespace partq::cli {
namespace {

void Reply(mg_connection* conn, int code, const char* type, const std::string& body) {
  const char* reason = code == 200 ? "OK" : code == 503 ? "Service Unavailable" : "Error";
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n\r\n",
            code, reason, type, body.size());
  mg_write(conn, body.data(), body.size());
}

class MetricsHandler : public CivetHandler {
 public:
  explicit MetricsHandler(std::shared_ptr<prometheus::Registry> r) : registry_(std::move(r)) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    std::vector<prometheus::MetricFamily> families = registry_->Collect();
    for (auto& f : ProcessMetrics()) families.push_back(std::move(f));
    prometheus::TextSerializer s;
    Reply(conn, 200, "text/plain; version=0.0.4; charset=utf-8", s.Serialize(families));
    return true;
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
};

class FuncHandler : public CivetHandler {
 public:
  explicit FuncHandler(std::function<bool(std::string*)> f) : f_(std::move(f)) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    std::string why;
    const bool ok = f_(&why);
    Reply(conn, ok ? 200 : 503, "text/plain", ok ? "ok\n" : why + "\n");
    return true;
  }

 private:
  std::function<bool(std::string*)> f_;
};

}  // namespace

struct HttpServer::Handlers {
  std::unique_ptr<MetricsHandler> metrics;
  std::unique_ptr<FuncHandler> health, ready;
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& addr, std::shared_ptr<prometheus::Registry> registry,
    std::function<bool(std::string*)> ready) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon + 1 == addr.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-addr must be HOST:PORT, like 0.0.0.0:9090 (got \"", addr, "\")"));
  }
  std::string host = addr.substr(0, colon);
  std::string port = addr.substr(colon + 1);
  int port_number = 0;
  if (!absl::SimpleAtoi(port, &port_number) || port_number < 1 || port_number > 65535 ||
      port.find_first_not_of("0123456789") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics-addr: the port must be a number from 1 to 65535 (got \"", port, "\")"));
  }
  const bool any = host.empty() || host == "0.0.0.0" || host == "*";
  in_addr ip{};
  if (!any && host != "localhost" && inet_pton(AF_INET, host.c_str(), &ip) != 1) {
    // civetweb binds IPv4 addresses only (no names to resolve, no IPv6 here).
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics-addr: the host must be an IPv4 address, localhost or 0.0.0.0 (got \"", host,
        "\")"));
  }
  // civetweb wants PORT alone for all interfaces, or IP:PORT.
  std::string listen = any ? port : host == "localhost" ? absl::StrCat("127.0.0.1:", port) : addr;
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->handlers_ = std::make_unique<Handlers>();
  s->handlers_->metrics = std::make_unique<MetricsHandler>(std::move(registry));
  s->handlers_->health = std::make_unique<FuncHandler>([](std::string*) { return true; });
  s->handlers_->ready = std::make_unique<FuncHandler>(std::move(ready));
  std::vector<std::string> options = {"listening_ports", listen, "num_threads", "2"};
  try {
    s->server_ = std::make_unique<CivetServer>(options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", addr, ": ", e.what(), " (is the port in use?)"));
  }
  s->server_->addHandler("/metrics", s->handlers_->metrics.get());
  s->server_->addHandler("/healthz", s->handlers_->health.get());
  s->server_->addHandler("/readyz", s->handlers_->ready.get());
  return s;
}

HttpServer::~HttpServer() {
  if (server_) server_->close();
}

}  // namespace partq::cli
