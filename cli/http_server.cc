#include "cli/http_server.h"

#include <CivetServer.h>
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstring>
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

struct MetricsEndpoints {
  std::shared_ptr<prometheus::Registry> registry;  // /metrics when set
  std::function<bool(std::string*)> ready;         // /readyz when set
};

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

// The metrics server's one thread (libmicrohttpd, epoll) waits on every
// connection at once, so a client that connects and sends slowly or nothing
// holds a file descriptor, not a thread. Each request is answered as soon
// as its header is in; a body is not read (none of these endpoints takes
// one): the answer says "Connection: close".
MHD_Result Answer(MHD_Connection* conn, unsigned int code, const char* type,
                  const std::string& body) {
  MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()),
                                                    MHD_RESPMEM_MUST_COPY);
  if (r == nullptr) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
  const MHD_Result queued = MHD_queue_response(conn, code, r);
  MHD_destroy_response(r);
  return queued;
}

MHD_Result ServeMetrics(void* cls, MHD_Connection* conn, const char* url, const char* method,
                        const char* /*version*/, const char* /*upload_data*/,
                        size_t* upload_data_size, void** /*state*/) {
  const auto* e = static_cast<const MetricsEndpoints*>(cls);
  if (*upload_data_size > 0) return MHD_NO;  // a body after the answer: close
  if (std::strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
      std::strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
    return Answer(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET only\n");
  }
  const absl::string_view path(url);
  if (path == "/healthz") return Answer(conn, MHD_HTTP_OK, "text/plain", "ok\n");
  if (path == "/readyz" && e->ready) {
    std::string why;
    const bool ok = e->ready(&why);
    return Answer(conn, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain",
                  ok ? "ok\n" : why + "\n");
  }
  if (path == "/metrics" && e->registry) {
    std::vector<prometheus::MetricFamily> families = e->registry->Collect();
    for (auto& f : ProcessMetrics()) families.push_back(std::move(f));
    return Answer(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                  prometheus::TextSerializer().Serialize(families));
  }
  return Answer(conn, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n");
}

// How many connections the metrics server holds open at once: as many as
// the process may open files, less room for its own (its database
// connections, its handlers' children), at most kMetricsConnections. The
// soft limit is raised to the hard one, up to what that needs.
unsigned int MetricsConnectionLimit() {
  constexpr rlim_t kRoom = 256;
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 64;
  const rlim_t want = kMetricsConnections + kRoom;
  if (lim.rlim_cur < want && lim.rlim_max > lim.rlim_cur) {
    rlimit raised = lim;
    raised.rlim_cur = std::min(lim.rlim_max, want);
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  if (lim.rlim_cur <= kRoom + 64) return 64;
  return static_cast<unsigned int>(std::min<rlim_t>(lim.rlim_cur - kRoom, kMetricsConnections));
}

// HOST:PORT as Start takes it (see http_server.h); `flag` names it in errors.
struct ListenAddress {
  bool any = false;  // all interfaces
  in_addr ip{};      // else this one
  uint16_t port = 0;
  std::string civetweb;  // as civetweb's listening_ports wants it
};

absl::StatusOr<ListenAddress> ParseListen(const std::string& addr, const std::string& flag) {
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
  ListenAddress out;
  out.port = static_cast<uint16_t>(port_number);
  out.any = host.empty() || host == "0.0.0.0" || host == "*";
  if (host == "localhost") host = "127.0.0.1";
  if (!out.any && inet_pton(AF_INET, host.c_str(), &out.ip) != 1) {
    // IPv4 addresses only (no names to resolve, no IPv6 here).
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": the host must be an IPv4 address, localhost or 0.0.0.0 (got \"", host, "\")"));
  }
  // civetweb wants PORT alone for all interfaces, or IP:PORT.
  out.civetweb = out.any ? port : absl::StrCat(host, ":", port);
  return out;
}

}  // namespace

std::string ListenHost(const std::string& addr) {
  const auto colon = addr.rfind(':');
  return colon == std::string::npos ? "" : addr.substr(0, colon);
}

struct HttpServer::Handlers {
  std::unique_ptr<FuncHandler> health;
  std::unique_ptr<ConsoleHandler> console;
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& addr, std::shared_ptr<prometheus::Registry> registry,
    std::function<bool(std::string*)> ready) {
  absl::StatusOr<ListenAddress> listen = ParseListen(addr, "--metrics-addr");
  if (!listen.ok()) return listen.status();
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->metrics_ = std::make_unique<MetricsEndpoints>();
  s->metrics_->registry = std::move(registry);
  s->metrics_->ready = std::move(ready);
  sockaddr_in bind{};
  bind.sin_family = AF_INET;
  bind.sin_port = htons(listen->port);
  bind.sin_addr = listen->any ? in_addr{htonl(INADDR_ANY)} : listen->ip;
  // A connection that sends nothing for kHttpRequestTimeoutMs is closed.
  s->daemon_ = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD, listen->port, nullptr, nullptr,
                                &ServeMetrics, s->metrics_.get(), MHD_OPTION_SOCK_ADDR,
                                reinterpret_cast<sockaddr*>(&bind), MHD_OPTION_CONNECTION_TIMEOUT,
                                static_cast<unsigned int>((kHttpRequestTimeoutMs + 999) / 1000),
                                MHD_OPTION_CONNECTION_LIMIT, MetricsConnectionLimit(),
                                MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_END);
  if (s->daemon_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", addr, ": ",
                                               std::strerror(errno), " (is the port in use?)"));
  }
  return s;
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& addr,
                                                              HttpServerOptions options) {
  absl::StatusOr<ListenAddress> listen = ParseListen(addr, options.flag);
  if (!listen.ok()) return listen.status();
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->handlers_ = std::make_unique<Handlers>();
  s->handlers_->health = std::make_unique<FuncHandler>([](std::string*) { return true; });
  s->handlers_->console = std::make_unique<ConsoleHandler>(options.console);
  // One request per connection (civetweb's keep-alive is off by default), at
  // most kHttpRequestTimeoutMs to send it (header and body; civetweb times the
  // header from accept, ConsoleHandler the body) and to take each write of the
  // reply. The accept queue and the kernel's backlog hold what waits for a thread.
  std::vector<std::string> civet = {"listening_ports",    listen->civetweb,
                                    "num_threads",        absl::StrCat(kHttpThreads),
                                    "request_timeout_ms", absl::StrCat(kHttpRequestTimeoutMs),
                                    "enable_keep_alive",  "no",
                                    "connection_queue",   absl::StrCat(kHttpThreads),
                                    "listen_backlog",     "1024"};
  // The console's headers on civetweb's own answers too (a malformed
  // request, a slow or too large body refused by ReadBody).
  std::vector<std::string> lines;
  for (const auto& [name, value] : console::SecurityHeaders()) {
    lines.push_back(absl::StrCat(name, ": ", value));
  }
  civet.insert(civet.end(), {"additional_header", absl::StrJoin(lines, "\r\n")});
  try {
    s->server_ = std::make_unique<CivetServer>(civet);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve the console on ", addr, ": ", e.what(),
                                               " (is the port in use?)"));
  }
  // "/" catches every path the other does not (civetweb picks the longest match).
  s->server_->addHandler("/", s->handlers_->console.get());
  s->server_->addHandler("/healthz", s->handlers_->health.get());
  return s;
}

HttpServer::~HttpServer() {
  if (server_) server_->close();
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

}  // namespace partq::cli
