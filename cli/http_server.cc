#include "cli/http_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "cli/process_metrics.h"
#include "console/console.h"
#include "prometheus/text_serializer.h"

namespace partq::cli {

// What a server answers: the metrics address's endpoints, or the console.
struct HttpServer::Endpoints {
  std::shared_ptr<prometheus::Registry> registry;  // /metrics when set
  std::function<bool(std::string*)> ready;         // /readyz when set
  console::Console* console = nullptr;             // everything else when set
};

namespace {

// A request being read: its URI as sent (with the query string, which the
// access handler's URL has lost), whether its header was seen, its body so
// far, and when it must be in.
struct Request {
  std::string uri;
  bool started = false;
  std::string body;
  absl::Time deadline;
};

void* StartRequest(void* /*cls*/, const char* uri, MHD_Connection* /*conn*/) {
  auto* r = new Request;
  r->uri = uri != nullptr ? uri : "/";
  r->deadline = Clock::Real()->Now() + absl::Milliseconds(kHttpRequestTimeoutMs);
  return r;
}

void EndRequest(void* /*cls*/, MHD_Connection* /*conn*/, void** state,
                MHD_RequestTerminationCode /*why*/) {
  delete static_cast<Request*>(*state);
  *state = nullptr;
}

// Queues `r` as the answer; the connection closes after it.
MHD_Result Answer(MHD_Connection* conn, const console::HttpResponse& r) {
  MHD_Response* m = MHD_create_response_from_buffer(r.body.size(), const_cast<char*>(r.body.data()),
                                                    MHD_RESPMEM_MUST_COPY);
  if (m == nullptr) return MHD_NO;
  MHD_add_response_header(m, MHD_HTTP_HEADER_CONTENT_TYPE, r.content_type.c_str());
  MHD_add_response_header(m, MHD_HTTP_HEADER_CONNECTION, "close");
  for (const auto& [name, value] : r.headers) {
    MHD_add_response_header(m, name.c_str(), value.c_str());
  }
  const MHD_Result queued = MHD_queue_response(conn, static_cast<unsigned int>(r.code), m);
  MHD_destroy_response(m);
  return queued;
}

console::HttpResponse Text(int code, std::string body, bool console_headers) {
  console::HttpResponse r;
  r.code = code;
  r.body = std::move(body);
  if (console_headers) r.headers = console::SecurityHeaders();
  return r;
}

// The metrics address's endpoints (none takes a body).
console::HttpResponse ServeMetrics(const HttpServer::Endpoints& e, absl::string_view path,
                                   absl::string_view method) {
  if (method != MHD_HTTP_METHOD_GET && method != MHD_HTTP_METHOD_HEAD) {
    return Text(MHD_HTTP_METHOD_NOT_ALLOWED, "GET only\n", false);
  }
  if (path == "/healthz") return Text(MHD_HTTP_OK, "ok\n", false);
  if (path == "/readyz" && e.ready) {
    std::string why;
    const bool ok = e.ready(&why);
    return Text(ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, ok ? "ok\n" : why + "\n", false);
  }
  if (path == "/metrics" && e.registry) {
    std::vector<prometheus::MetricFamily> families = e.registry->Collect();
    for (auto& f : ProcessMetrics()) families.push_back(std::move(f));
    console::HttpResponse r =
        Text(MHD_HTTP_OK, prometheus::TextSerializer().Serialize(families), false);
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    return r;
  }
  return Text(MHD_HTTP_NOT_FOUND, "not found\n", false);
}

MHD_Result AddHeader(void* cls, MHD_ValueKind /*kind*/, const char* name, const char* value) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(cls);
  (*headers)[absl::AsciiStrToLower(name)] = value != nullptr ? value : "";
  return MHD_YES;
}

// The console's request as console::Console takes it.
console::HttpRequest ConsoleRequest(MHD_Connection* conn, const char* url, const char* method,
                                    Request* r) {
  console::HttpRequest req;
  req.method = method;
  req.path = url;
  const auto q = r->uri.find('?');
  if (q != std::string::npos) req.query = r->uri.substr(q + 1);
  MHD_get_connection_values(conn, MHD_HEADER_KIND, &AddHeader, &req.headers);
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  char ip[INET_ADDRSTRLEN] = "";
  if (info != nullptr && info->client_addr != nullptr && info->client_addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(info->client_addr)->sin_addr, ip,
              sizeof ip);
  }
  req.remote_addr = ip;
  req.body = std::move(r->body);
  return req;
}

// libmicrohttpd's access handler: once when the request's header is in,
// once per piece of its body, once more when it is all in. The metrics
// endpoints answer at the first call (a body after it closes the
// connection). The console reads a body of at most Console::kMaxBody bytes,
// all within kHttpRequestTimeoutMs of the request's start: 413 when the
// Content-Length says more; otherwise a body too long or too slow closes
// the connection (libmicrohttpd cannot answer while a body is coming).
MHD_Result Serve(void* cls, MHD_Connection* conn, const char* url, const char* method,
                 const char* /*version*/, const char* upload, size_t* upload_size, void** state) {
  const auto* e = static_cast<const HttpServer::Endpoints*>(cls);
  auto* r = static_cast<Request*>(*state);
  const bool console = e->console != nullptr;
  if (!r->started) {
    r->started = true;
    if (!console) return Answer(conn, ServeMetrics(*e, url, method));
    const char* length =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    uint64_t n = 0;
    if (length != nullptr && absl::SimpleAtoi(length, &n) && n > console::Console::kMaxBody) {
      return Answer(conn, Text(MHD_HTTP_CONTENT_TOO_LARGE, "request body too large\n", true));
    }
    return MHD_YES;
  }
  if (!console) return MHD_NO;
  if (*upload_size > 0) {
    if (Clock::Real()->Now() > r->deadline ||
        r->body.size() + *upload_size > console::Console::kMaxBody) {
      return MHD_NO;
    }
    r->body.append(upload, *upload_size);
    *upload_size = 0;
    return MHD_YES;
  }
  const console::HttpRequest req = ConsoleRequest(conn, url, method, r);
  if (req.path == "/healthz") return Answer(conn, Text(MHD_HTTP_OK, "ok\n", true));
  return Answer(conn, e->console->Handle(req));
}

// How many connections a server holds open at once: as many as
// the process may open files, less room for its own (its database
// connections, its handlers' children), at most kHttpConnections. The
// soft limit is raised to the hard one, up to what that needs.
unsigned int ConnectionLimit() {
  constexpr rlim_t kRoom = 256;
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 64;
  const rlim_t want = kHttpConnections + kRoom;
  if (lim.rlim_cur < want && lim.rlim_max > lim.rlim_cur) {
    rlimit raised = lim;
    raised.rlim_cur = std::min(lim.rlim_max, want);
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  if (lim.rlim_cur <= kRoom + 64) return 64;
  return static_cast<unsigned int>(std::min<rlim_t>(lim.rlim_cur - kRoom, kHttpConnections));
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
  return out;
}

}  // namespace

std::string ListenHost(const std::string& addr) {
  const auto colon = addr.rfind(':');
  return colon == std::string::npos ? "" : addr.substr(0, colon);
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& addr, std::shared_ptr<prometheus::Registry> registry,
    std::function<bool(std::string*)> ready) {
  auto e = std::make_unique<Endpoints>();
  e->registry = std::move(registry);
  e->ready = std::move(ready);
  return Start(addr, "--metrics-addr", std::move(e));
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& addr,
                                                              HttpServerOptions options) {
  auto e = std::make_unique<Endpoints>();
  e->console = options.console;
  return Start(addr, options.flag, std::move(e));
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& addr,
                                                              const std::string& flag,
                                                              std::unique_ptr<Endpoints> e) {
  absl::StatusOr<ListenAddress> listen = ParseListen(addr, flag);
  if (!listen.ok()) return listen.status();
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->endpoints_ = std::move(e);
  sockaddr_in bind{};
  bind.sin_family = AF_INET;
  bind.sin_port = htons(listen->port);
  bind.sin_addr = listen->any ? in_addr{htonl(INADDR_ANY)} : listen->ip;
  // The metrics endpoints answer from memory on the one thread; the console's
  // may wait for its database (an action), so it has kConsoleThreads, each
  // waiting on its share of the connections.
  const unsigned int threads = s->endpoints_->console != nullptr ? kConsoleThreads : 1;
  s->daemon_ = MHD_start_daemon(
      MHD_USE_EPOLL_INTERNAL_THREAD, listen->port, nullptr, nullptr, &Serve, s->endpoints_.get(),
      MHD_OPTION_SOCK_ADDR, reinterpret_cast<sockaddr*>(&bind), MHD_OPTION_URI_LOG_CALLBACK,
      &StartRequest, nullptr, MHD_OPTION_NOTIFY_COMPLETED, &EndRequest, nullptr,
      MHD_OPTION_CONNECTION_TIMEOUT,
      static_cast<unsigned int>((kHttpRequestTimeoutMs + 999) / 1000), MHD_OPTION_CONNECTION_LIMIT,
      ConnectionLimit(), MHD_OPTION_PER_IP_CONNECTION_LIMIT, kHttpConnectionsPerAddress,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      s->endpoints_->console != nullptr ? kConsoleRequestMemory : kMetricsRequestMemory,
      MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_END);
  if (s->daemon_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve ", s->endpoints_->console != nullptr ? "the console" : "metrics",
                     " on ", addr, ": ", std::strerror(errno), " (is the port in use?)"));
  }
  return s;
}

HttpServer::~HttpServer() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

}  // namespace partq::cli
