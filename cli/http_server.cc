#include "cli/http_server.h"

#include <CivetServer.h>
#include <arpa/inet.h>

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "cli/process_metrics.h"
#include "console/console.h"
#include "prometheus/text_serializer.h"

namespace partq::cli {
namespace {

void Reply(mg_connection* conn, int code, const char* type, const std::string& body) {
  const char* reason = mg_get_response_code_text(conn, code);
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n\r\n",
            code, reason, type, body.size());
  mg_write(conn, body.data(), body.size());
}

// The largest request body any endpoint takes (the console's forms).
constexpr int64_t kMaxRequestBody = console::Console::kMaxBody;

// Reads the request's body whole, within kHttpRequestTimeoutMs of the call,
// so that civetweb has nothing left to read after the reply. civetweb waits at
// most its request timeout for each byte, but an mg_read of N bytes returns only
// once all N came, so a client sending a byte every few seconds could hold the
// thread for hours: one byte per mg_read lets the deadline be checked between
// bytes. On failure the refusal is sent with mg_send_http_error, which makes
// civetweb close the connection rather than read the rest; returns false then.
bool ReadBody(mg_connection* conn, std::string* body) {
  const mg_request_info* info = mg_get_request_info(conn);
  if (mg_get_header(conn, "Transfer-Encoding") != nullptr) {
    mg_send_http_error(conn, 411, "a request body needs a Content-Length\n");
    return false;
  }
  if (info->content_length > kMaxRequestBody) {
    mg_send_http_error(conn, 413, "request body too large\n");
    return false;
  }
  const absl::Time deadline = Clock::Real()->Now() + absl::Milliseconds(kHttpRequestTimeoutMs);
  body->clear();
  while (static_cast<int64_t>(body->size()) < info->content_length) {
    char c;
    if (mg_read(conn, &c, 1) != 1 || Clock::Real()->Now() > deadline) {
      mg_send_http_error(conn, 408, "request body incomplete or too slow\n");
      return false;
    }
    body->push_back(c);
  }
  return true;
}

class MetricsHandler : public CivetHandler {
 public:
  explicit MetricsHandler(std::shared_ptr<prometheus::Registry> r) : registry_(std::move(r)) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    std::string body;
    if (!ReadBody(conn, &body)) return true;
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
    std::string body;
    if (!ReadBody(conn, &body)) return true;
    std::string why;
    const bool ok = f_(&why);
    Reply(conn, ok ? 200 : 503, "text/plain", ok ? "ok\n" : why + "\n");
    return true;
  }

 private:
  std::function<bool(std::string*)> f_;
};

// The console: every request it gets goes through Console::Handle.
class ConsoleHandler : public CivetHandler {
 public:
  explicit ConsoleHandler(console::Console* c) : console_(c) {}
  // Every method, so the console answers (405, with its headers) what
  // civetweb would answer with a page of its own.
  bool handleGet(CivetServer*, mg_connection* conn) override { return Serve(conn); }
  bool handleHead(CivetServer*, mg_connection* conn) override { return Serve(conn); }
  bool handlePost(CivetServer*, mg_connection* conn) override { return Serve(conn); }
  bool handlePut(CivetServer*, mg_connection* conn) override { return Serve(conn); }
  bool handleDelete(CivetServer*, mg_connection* conn) override { return Serve(conn); }
  bool handleOptions(CivetServer*, mg_connection* conn) override { return Serve(conn); }
  bool handlePatch(CivetServer*, mg_connection* conn) override { return Serve(conn); }

 private:
  bool Serve(mg_connection* conn) {
    const mg_request_info* info = mg_get_request_info(conn);
    console::HttpRequest req;
    req.method = info->request_method ? info->request_method : "";
    req.path = info->local_uri ? info->local_uri : "/";
    req.query = info->query_string ? info->query_string : "";
    req.remote_addr = info->remote_addr;
    req.tls = info->is_ssl != 0;
    for (int i = 0; i < info->num_headers; ++i) {
      req.headers[absl::AsciiStrToLower(info->http_headers[i].name)] = info->http_headers[i].value;
    }
    if (!ReadBody(conn, &req.body)) return true;
    return Write(conn, req, console_->Handle(req));
  }

  static bool Write(mg_connection* conn, const console::HttpRequest& req,
                    const console::HttpResponse& r) {
    std::string head =
        absl::StrCat("HTTP/1.1 ", r.code, " ", mg_get_response_code_text(conn, r.code),
                     "\r\nContent-Type: ", r.content_type, "\r\nContent-Length: ", r.body.size(),
                     "\r\nConnection: close\r\n");
    for (const auto& [name, value] : r.headers) absl::StrAppend(&head, name, ": ", value, "\r\n");
    head += "\r\n";
    mg_write(conn, head.data(), head.size());
    if (req.method != "HEAD") mg_write(conn, r.body.data(), r.body.size());
    return true;
  }

  console::Console* console_;
};

}  // namespace

std::string ListenHost(const std::string& addr) {
  const auto colon = addr.rfind(':');
  return colon == std::string::npos ? "" : addr.substr(0, colon);
}

struct HttpServer::Handlers {
  std::unique_ptr<MetricsHandler> metrics;
  std::unique_ptr<FuncHandler> health, ready;
  std::unique_ptr<ConsoleHandler> console;
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& addr, std::shared_ptr<prometheus::Registry> registry,
    std::function<bool(std::string*)> ready) {
  HttpServerOptions o;
  o.registry = std::move(registry);
  o.ready = std::move(ready);
  return Start(addr, std::move(o));
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& addr,
                                                              HttpServerOptions options) {
  const std::string& flag = options.flag;
  auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon + 1 == addr.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " must be HOST:PORT, like 0.0.0.0:9090 (got \"", addr, "\")"));
  }
  std::string host = addr.substr(0, colon);
  std::string port = addr.substr(colon + 1);
  int port_number = 0;
  if (!absl::SimpleAtoi(port, &port_number) || port_number < 1 || port_number > 65535 ||
      port.find_first_not_of("0123456789") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": the port must be a number from 1 to 65535 (got \"", port, "\")"));
  }
  const bool any = host.empty() || host == "0.0.0.0" || host == "*";
  in_addr ip{};
  if (!any && host != "localhost" && inet_pton(AF_INET, host.c_str(), &ip) != 1) {
    // civetweb binds IPv4 addresses only (no names to resolve, no IPv6 here).
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": the host must be an IPv4 address, localhost or 0.0.0.0 (got \"", host, "\")"));
  }
  // civetweb wants PORT alone for all interfaces, or IP:PORT.
  std::string listen = any ? port : host == "localhost" ? absl::StrCat("127.0.0.1:", port) : addr;
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->handlers_ = std::make_unique<Handlers>();
  s->handlers_->health = std::make_unique<FuncHandler>([](std::string*) { return true; });
  if (options.registry) {
    s->handlers_->metrics = std::make_unique<MetricsHandler>(std::move(options.registry));
  }
  if (options.ready) s->handlers_->ready = std::make_unique<FuncHandler>(std::move(options.ready));
  if (options.console) s->handlers_->console = std::make_unique<ConsoleHandler>(options.console);
  // One request per connection (civetweb's keep-alive is off by default), at
  // most kHttpRequestTimeoutMs to send it (header and body; civetweb times the
  // header from accept, ConsoleHandler the body) and to take each write of the
  // reply. The accept queue and the kernel's backlog hold what waits for a thread.
  std::vector<std::string> civet = {"listening_ports",    listen,
                                    "num_threads",        absl::StrCat(kHttpThreads),
                                    "request_timeout_ms", absl::StrCat(kHttpRequestTimeoutMs),
                                    "enable_keep_alive",  "no",
                                    "connection_queue",   absl::StrCat(kHttpThreads),
                                    "listen_backlog",     "1024"};
  if (options.console) {
    // On civetweb's own answers too (a malformed request, a slow or too large
    // body refused by ReadBody).
    std::vector<std::string> lines;
    for (const auto& [name, value] : console::SecurityHeaders()) {
      lines.push_back(absl::StrCat(name, ": ", value));
    }
    civet.insert(civet.end(), {"additional_header", absl::StrJoin(lines, "\r\n")});
  }
  try {
    s->server_ = std::make_unique<CivetServer>(civet);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve ",
                                               options.console ? "the console" : "metrics", " on ",
                                               addr, ": ", e.what(), " (is the port in use?)"));
  }
  // "/" catches every path the others do not (civetweb picks the longest match).
  if (s->handlers_->console) s->server_->addHandler("/", s->handlers_->console.get());
  if (s->handlers_->metrics) s->server_->addHandler("/metrics", s->handlers_->metrics.get());
  s->server_->addHandler("/healthz", s->handlers_->health.get());
  if (s->handlers_->ready) s->server_->addHandler("/readyz", s->handlers_->ready.get());
  return s;
}

HttpServer::~HttpServer() {
  if (server_) server_->close();
}

}  // namespace partq::cli
