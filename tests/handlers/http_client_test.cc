// HttpClient against real servers on loopback: an in-process civetweb server
// for http; a Python stdlib server for https (https_test_server.py says why),
// with certificates the openssl command makes at test time; a bound port
// nobody listens on; a name that cannot resolve.
#include "handlers/http_client.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "consumer/handler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "handlers/http_handler.h"
#include "nlohmann/json.hpp"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Generous bounds: CI is a loaded 2-core machine. A test only fails on
// time when a call runs into a limit it should never have reached.
constexpr absl::Duration kLongDeadline = absl::Seconds(120);
constexpr absl::Duration kMuchSooner = absl::Seconds(60);

absl::Time Deadline(absl::Duration d = kLongDeadline) { return absl::Now() + d; }

std::unique_ptr<HttpClient> NewClient(HttpClientOptions options = {}) {
  auto client = HttpClient::Create(std::move(options));
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? std::move(*client) : nullptr;
}

// A civetweb server on 127.0.0.1 at a port of its own, with one route per
// behaviour under test. It counts the TCP connections that brought
// requests (by the client's port, which no other connection can hold
// meanwhile) and the requests per route.
class TestServer {
 public:
  TestServer() {
    static const unsigned features = mg_init_library(0);  // once, before any mg_start
    (void)features;
    const char* options[] = {
        "listening_ports",       "127.0.0.1:0", "num_threads", "16", "enable_keep_alive", "yes",
        "keep_alive_timeout_ms", "60000",       nullptr};
    mg_callbacks callbacks{};
    ctx_ = mg_start(&callbacks, nullptr, options);
    if (ctx_ == nullptr) return;
    mg_server_port ports[1];
    if (mg_get_server_ports(ctx_, 1, ports) == 1) port_ = ports[0].port;
    AddRoutes();
  }

  ~TestServer() {
    release_.Notify();  // handlers that hang or trickle return
    if (ctx_ != nullptr) mg_stop(ctx_);
  }

  bool ok() const { return ctx_ != nullptr && port_ > 0; }
  int port() const { return port_; }
  std::string Url(absl::string_view path) const {
    return absl::StrCat("http://127.0.0.1:", port_, path);
  }
  int connections() {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(client_ports_.size());
  }
  int requests(const std::string& path) {
    absl::MutexLock lock(&mu_);
    return requests_[path];
  }
  // Notified when /hang has a request it will not answer.
  absl::Notification& hanging() { return hanging_; }

 private:
  struct Route {
    TestServer* server;
    std::string path;
    std::function<int(mg_connection*, const std::string& body)> handle;
  };

  static int Dispatch(mg_connection* conn, void* data) {
    auto* route = static_cast<Route*>(data);
    std::string body;
    char buf[16384];
    for (int n; (n = mg_read(conn, buf, sizeof buf)) > 0;) body.append(buf, n);
    {
      absl::MutexLock lock(&route->server->mu_);
      route->server->client_ports_.insert(mg_get_request_info(conn)->remote_port);
      route->server->requests_[route->path]++;
    }
    return route->handle(conn, body);
  }

  static int Reply(mg_connection* conn, int status, const std::string& type,
                   const std::string& body,
                   const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    mg_response_header_start(conn, status);
    if (!type.empty()) mg_response_header_add(conn, "Content-Type", type.c_str(), -1);
    mg_response_header_add(conn, "Content-Length", std::to_string(body.size()).c_str(), -1);
    for (const auto& [name, value] : headers) {
      mg_response_header_add(conn, name.c_str(), value.c_str(), -1);
    }
    mg_response_header_send(conn);
    mg_write(conn, body.data(), body.size());
    return status;
  }

  void Add(std::string path, std::function<int(mg_connection*, const std::string&)> handle) {
    routes_.push_back(std::make_unique<Route>(Route{this, path, std::move(handle)}));
    mg_set_request_handler(ctx_, routes_.back()->path.c_str(), Dispatch, routes_.back().get());
  }

  static std::string HttpDate(absl::Time t) {
    return absl::FormatTime("%a, %d %b %Y %H:%M:%S GMT", t, absl::UTCTimeZone());
  }

  void AddRoutes() {
    Add("/json", [](mg_connection* c, const std::string&) {
      return Reply(c, 200, "application/json; charset=utf-8", R"({"ok":true})");
    });
    // Answers, then closes the connection.
    Add("/json-close", [](mg_connection* c, const std::string&) {
      return Reply(c, 200, "application/json", R"({"ok":true})", {{"Connection", "close"}});
    });
    // What arrived, as JSON: method, the headers that matter, the body.
    Add("/echo", [](mg_connection* c, const std::string& body) {
      auto header = [c](const char* name) -> nlohmann::json {
        const char* v = mg_get_header(c, name);
        return v == nullptr ? nlohmann::json() : nlohmann::json(v);
      };
      nlohmann::json j = {{"method", mg_get_request_info(c)->request_method},
                          {"content_type", header("Content-Type")},
                          {"accept", header("Accept")},
                          {"user_agent", header("User-Agent")},
                          {"idempotency_key", header("Idempotency-Key")},
                          {"expect", header("Expect")},
                          {"authorization", header("Authorization")},
                          {"body", body}};
      return Reply(c, 200, "application/problem+json", j.dump());
    });
    Add("/html", [](mg_connection* c, const std::string&) {
      return Reply(c, 200, "text/html",
                   "<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>\"" +
                       std::string(500, 'x') + "</body></html>\n");
    });
    Add("/error500", [](mg_connection* c, const std::string&) {
      return Reply(c, 500, "text/plain", "boom: database is down\n");
    });
    Add("/notfound", [](mg_connection* c, const std::string&) {
      return Reply(c, 404, "application/json", R"({"error":"no such route"})");
    });
    Add("/throttle429", [](mg_connection* c, const std::string&) {
      return Reply(c, 429, "application/json", R"({"error":"slow down"})", {{"Retry-After", "7"}});
    });
    Add("/busy503", [](mg_connection* c, const std::string&) {
      return Reply(c, 503, "text/plain", "busy",
                   {{"Retry-After", HttpDate(absl::Now() + absl::Seconds(120))}});
    });
    Add("/loop", [](mg_connection* c, const std::string&) {
      return Reply(c, 302, "text/html", "<a href=/loop>moved</a>", {{"Location", "/loop"}});
    });
    Add("/moved-with-credentials", [](mg_connection* c, const std::string&) {
      return Reply(c, 307, "text/plain", "",
                   {{"Location", "https://svc:pa55@elsewhere.example:8443/h?token=s3cret"}});
    });
    Add("/empty",
        [](mg_connection* c, const std::string&) { return Reply(c, 200, "application/json", ""); });
    // Declares 16 MiB + 1 and sends until the client hangs up.
    Add("/declared-big", [](mg_connection* c, const std::string&) {
      const int64_t size = (int64_t{16} << 20) + 1;
      mg_response_header_start(c, 200);
      mg_response_header_add(c, "Content-Type", "application/json", -1);
      mg_response_header_add(c, "Content-Length", std::to_string(size).c_str(), -1);
      mg_response_header_send(c);
      const std::string chunk(65536, ' ');
      for (int64_t sent = 0; sent < size;) {
        const size_t n = static_cast<size_t>(std::min<int64_t>(chunk.size(), size - sent));
        if (mg_write(c, chunk.data(), n) <= 0) break;
        sent += static_cast<int64_t>(n);
      }
      return 200;
    });
    // 1 MiB in chunks, no Content-Length: only counting the bytes can stop it.
    Add("/streamed-big", [](mg_connection* c, const std::string&) {
      mg_response_header_start(c, 200);
      mg_response_header_add(c, "Content-Type", "application/json", -1);
      mg_response_header_add(c, "Transfer-Encoding", "chunked", -1);
      mg_response_header_send(c);
      const std::string chunk(16384, ' ');
      for (int i = 0; i < 64; ++i) {
        if (mg_send_chunk(c, chunk.data(), chunk.size()) <= 0) return 200;
      }
      mg_send_chunk(c, "", 0);
      return 200;
    });
    // Answers at once, then sends its 100-byte body one byte a second.
    Add("/trickle", [this](mg_connection* c, const std::string&) {
      mg_response_header_start(c, 200);
      mg_response_header_add(c, "Content-Type", "application/json", -1);
      mg_response_header_add(c, "Content-Length", "100", -1);
      mg_response_header_send(c);
      for (int i = 0; i < 100; ++i) {
        if (mg_write(c, " ", 1) <= 0) break;
        if (release_.WaitForNotificationWithTimeout(absl::Seconds(1))) break;
      }
      return 200;
    });
    // Reads the request, never answers (until the server stops).
    Add("/hang", [this](mg_connection*, const std::string&) {
      if (!hanging_.HasBeenNotified()) hanging_.Notify();
      release_.WaitForNotificationWithTimeout(absl::Minutes(5));
      return 200;
    });
  }

  mg_context* ctx_ = nullptr;
  int port_ = 0;
  std::vector<std::unique_ptr<Route>> routes_;
  absl::Notification release_;
  absl::Notification hanging_;
  absl::Mutex mu_;
  std::set<int> client_ports_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> requests_ ABSL_GUARDED_BY(mu_);
};

// A port on 127.0.0.1 that is bound but not listening: connecting to it is
// refused, and no other process can take it while this object lives.
class RefusingPort {
 public:
  RefusingPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port_ = ntohs(addr.sin_port);
    }
  }
  ~RefusingPort() {
    if (fd_ >= 0) close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A socket listening on 127.0.0.1 at a free port, which goes to `port`;
// -1 if one could not be made.
int ListenOnLoopback(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(fd, 1) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

// A server on 127.0.0.1 that takes one connection, reads the request's
// headers and then sends `answer` (maybe nothing) and closes it: a handler's
// server killed while it worked on the request.
class DyingServer {
 public:
  explicit DyingServer(std::string answer) : answer_(std::move(answer)) {
    fd_ = ListenOnLoopback(&port_);
    if (fd_ < 0) return;
    thread_ = std::thread([this] {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string got;
      char buf[4096];
      while (got.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) break;
        got.append(buf, static_cast<size_t>(n));
      }
      if (!answer_.empty()) (void)!write(c, answer_.data(), answer_.size());
      close(c);
    });
  }
  ~DyingServer() {
    if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);  // an accept still waiting returns
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) close(fd_);
  }
  std::string Url() const { return absl::StrCat("http://127.0.0.1:", port_, "/h?token=abc"); }
  int port() const { return port_; }

 private:
  const std::string answer_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// A server on 127.0.0.1 that answers the first request of one kept-alive
// connection, then reads the second one's headers, stops listening and
// closes the connection without an answer: a handler's server killed while
// it worked on a request that came over a reused connection.
class GoneAfterOneAnswer {
 public:
  GoneAfterOneAnswer() {
    fd_ = ListenOnLoopback(&port_);
    if (fd_ < 0) return;
    thread_ = std::thread([this] {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string got;
      char buf[4096];
      // Reads until `count` requests' headers have come (or the client left).
      auto headers_seen = [&] {
        int n = 0;
        for (size_t at = got.find("\r\n\r\n"); at != std::string::npos;
             at = got.find("\r\n\r\n", at + 4)) {
          ++n;
        }
        return n;
      };
      auto read_headers = [&](int count) {
        while (headers_seen() < count) {
          const ssize_t n = read(c, buf, sizeof buf);
          if (n <= 0) return;
          got.append(buf, static_cast<size_t>(n));
        }
      };
      read_headers(1);
      static const char kAnswer[] =
          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
      (void)!write(c, kAnswer, sizeof kAnswer - 1);
      read_headers(2);
      shutdown(fd_, SHUT_RDWR);  // a new connection is refused from now on
      close(c);
    });
  }
  ~GoneAfterOneAnswer() {
    if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);  // an accept still waiting returns
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) close(fd_);
  }
  std::string Url() const { return absl::StrCat("http://127.0.0.1:", port_, "/h"); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

class HttpClientTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.ok()) << "civetweb did not start"; }
  TestServer server_;
};

TEST_F(HttpClientTest, PostsJsonWithTheContractHeadersAndReadsTheAnswer) {
  auto client = NewClient();
  // Over 1 KiB, where libcurl 7.88 would otherwise send Expect: 100-continue
  // and wait for the server's go-ahead.
  const std::string body = R"({"items":[)" + std::string(100000, ' ') + "]}";
  HttpRequestHeaders headers;
  headers.idempotency_key = "batch-7-42";
  headers.extra = {{"Authorization", "Bearer t0ken"}};
  HttpResult r = client->Post(server_.Url("/echo"), body, headers, Deadline());
  ASSERT_EQ(r.outcome, HttpOutcome::kOk) << r.error;
  EXPECT_EQ(r.failure, HttpFailure::kNone);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/problem+json");
  EXPECT_TRUE(r.error.empty());
  auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["method"], "POST");
  EXPECT_EQ(j["content_type"], "application/json");
  EXPECT_EQ(j["accept"], "application/json");
  EXPECT_EQ(j["user_agent"], std::string(HttpUserAgent()));
  EXPECT_THAT(std::string(HttpUserAgent()),
              ::testing::MatchesRegex("partq/[0-9]+\\.[0-9]+\\.[0-9]+"));
  EXPECT_EQ(j["idempotency_key"], "batch-7-42");
  EXPECT_TRUE(j["expect"].is_null()) << j["expect"];
  EXPECT_EQ(j["authorization"], "Bearer t0ken");
  EXPECT_EQ(j["body"], body);
}

TEST_F(HttpClientTest, NoIdempotencyKeyHeaderWhenNoneIsGiven) {
  auto client = NewClient();
  HttpResult r = client->Post(server_.Url("/echo"), "{}", {}, Deadline());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_TRUE(nlohmann::json::parse(r.body)["idempotency_key"].is_null());
}

TEST_F(HttpClientTest, BadHeadersAreRefusedBeforeAnyRequest) {
  auto client = NewClient();
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"Content-Type", "text/plain"},
                                                        {"user-agent", "curl"},
                                                        {"Bad Name", "x"},
                                                        {"X-Injected", "a\r\nX-Evil: 1"},
                                                        {"", "x"}}) {
    HttpRequestHeaders headers;
    headers.extra = {{name, value}};
    HttpResult r = client->Post(server_.Url("/echo"), "{}", headers, Deadline());
    EXPECT_EQ(r.failure, HttpFailure::kInvalidRequest) << name << ": " << r.error;
  }
  HttpRequestHeaders key;
  key.idempotency_key = "a\nb";
  EXPECT_EQ(client->Post(server_.Url("/echo"), "{}", key, Deadline()).failure,
            HttpFailure::kInvalidRequest);
  EXPECT_EQ(server_.connections(), 0);
}

TEST_F(HttpClientTest, HtmlOn200FailsNamingTheTypeWithAnEscapedTruncatedPreview) {
  auto client = NewClient();
  HttpResult r = client->Post(server_.Url("/html"), "{}", {}, Deadline());
  EXPECT_EQ(r.outcome, HttpOutcome::kFailed);
  EXPECT_EQ(r.failure, HttpFailure::kNotJson);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/html");
  EXPECT_THAT(r.error, HasSubstr("content type \"text/html\", not JSON"));
  // Escaped (the newline and the quote), cut at 200 bytes, with the size.
  EXPECT_THAT(r.error, HasSubstr(R"("<!DOCTYPE html>\n<html><head><title>Sign in)"));
  EXPECT_THAT(r.error, HasSubstr(R"(<body>\"xxx)"));
  EXPECT_THAT(r.error, HasSubstr(absl::StrCat("\"... (", r.body.size(), " bytes)")));
  EXPECT_THAT(r.error, Not(HasSubstr("</html>")));
  EXPECT_LT(r.error.size(), 400u);
  EXPECT_GT(r.body.size(), 500u);
}

TEST_F(HttpClientTest, ServerErrorFailsWithStatusAndBody) {
  auto client = NewClient();
  HttpResult r = client->Post(server_.Url("/error500"), "{}", {}, Deadline());
  EXPECT_EQ(r.outcome, HttpOutcome::kFailed);
  EXPECT_EQ(r.failure, HttpFailure::kServerError);
  EXPECT_EQ(r.status, 500);
  EXPECT_THAT(r.error, HasSubstr("HTTP 500 Internal Server Error"));
  EXPECT_THAT(r.error, HasSubstr(R"("boom: database is down\n")"));
}

TEST_F(HttpClientTest, ClientErrorFails) {
  auto client = NewClient();
  HttpResult r = client->Post(server_.Url("/notfound"), "{}", {}, Deadline());
  EXPECT_EQ(r.failure, HttpFailure::kClientError);
  EXPECT_EQ(r.status, 404);
  EXPECT_THAT(r.error, HasSubstr("HTTP 404"));
  EXPECT_THAT(r.error, HasSubstr("no such route"));
}

TEST_F(HttpClientTest, TooManyRequestsIsThrottledWithRetryAfterSeconds) {
  auto client = NewClient();
  HttpResult r = client->Post(server_.Url("/throttle429"), "{}", {}, Deadline());
  EXPECT_EQ(r.outcome, HttpOutcome::kThrottled);
  EXPECT_EQ(r.failure, HttpFailure::kNone);
  EXPECT_EQ(r.status, 429);
  ASSERT_TRUE(r.retry_after.has_value());
  EXPECT_EQ(*r.retry_after, absl::Seconds(7));
  EXPECT_THAT(r.error, HasSubstr("retry after 7s"));
}

TEST_F(HttpClientTest, ServiceUnavailableIsThrottledWithRetryAfterDate) {
  auto client = NewClient();
  HttpResult r = client->Post(server_.Url("/busy503"), "{}", {}, Deadline());
  EXPECT_EQ(r.outcome, HttpOutcome::kThrottled);
  EXPECT_EQ(r.status, 503);
  ASSERT_TRUE(r.retry_after.has_value());
  // 120 s from the server's clock, with whole-second dates.
  EXPECT_GE(*r.retry_after, absl::Seconds(100));
  EXPECT_LE(*r.retry_after, absl::Seconds(121));
}

TEST_F(HttpClientTest, RedirectLoopIsNotFollowed) {
  auto client = NewClient();
  HttpResult r = client->Post(server_.Url("/loop"), "{}", {}, Deadline());
  EXPECT_EQ(r.failure, HttpFailure::kRedirect);
  EXPECT_EQ(r.status, 302);
  EXPECT_THAT(r.error, HasSubstr(absl::StrCat("redirects to \"http://127.0.0.1:", server_.port(),
                                              "/loop\"")));
  EXPECT_EQ(server_.requests("/loop"), 1);
}

// A Location is shown as URLs are: without its credentials or query.
TEST_F(HttpClientTest, ARedirectsCredentialsStayOutOfTheMessage) {
  auto client = NewClient();
  HttpResult r = client->Post(server_.Url("/moved-with-credentials"), "{}", {}, Deadline());
  EXPECT_EQ(r.failure, HttpFailure::kRedirect);
  EXPECT_THAT(r.error, HasSubstr("redirects to \"https://elsewhere.example:8443/h\""));
  EXPECT_THAT(r.error, Not(HasSubstr("pa55")));
  EXPECT_THAT(r.error, Not(HasSubstr("s3cret")));
}

// The one helper every message goes through (libcurl's URL API parses).
TEST(HttpClient, RedactUrlLeavesOutUserInfoQueryAndFragment) {
  EXPECT_EQ(RedactUrl("http://svc:pa55@host:8080/h?token=x#frag"), "http://host:8080/h");
  EXPECT_EQ(RedactUrl("https://svc:p%40ss%3A@host/h"), "https://host/h");
  EXPECT_EQ(RedactUrl("http://user@[::1]:9/a/b"), "http://[::1]:9/a/b");
  EXPECT_EQ(RedactUrl("ftp://u:pa55@host/x"), "ftp://host/x") << "any scheme";
  EXPECT_EQ(RedactUrl("http://[::1"), "") << "not parsed: nothing shown";
  EXPECT_TRUE(UrlHasCredentials("http://svc:pa55@host/h"));
  EXPECT_TRUE(UrlHasCredentials("http://svc@host/h"));
  EXPECT_FALSE(UrlHasCredentials("http://host/h?user=a"));
}

// A URL that is not one partq can use is refused at start without showing
// its credentials.
TEST(HttpHandlerTest, AnUnusableUrlIsRefusedWithoutItsCredentials) {
  for (const std::string spec : {"http:ftp://u:pa55@host/x", "http:http://u:pa55@host:99999/x"}) {
    auto h = ParseHttpSpec(spec, {});
    ASSERT_FALSE(h.ok()) << spec;
    EXPECT_THAT(std::string(h.status().message()), Not(HasSubstr("pa55"))) << h.status();
  }
  // Credentials twice: in the URL and as the Authorization value.
  HttpHandlerOptions o;
  o.url = "http://u:pa55@127.0.0.1:1/h";
  o.authorization = "Bearer t";
  auto twice = HttpHandler::Create(o);
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(std::string(twice.status().message()), HasSubstr("give the credentials once"));
  EXPECT_THAT(std::string(twice.status().message()), Not(HasSubstr("pa55")));
}

TEST_F(HttpClientTest, EmptyBodyFails) {
  auto client = NewClient();
  HttpResult r = client->Post(server_.Url("/empty"), "{}", {}, Deadline());
  EXPECT_EQ(r.failure, HttpFailure::kEmptyBody);
  EXPECT_THAT(r.error, HasSubstr("empty body"));
}

TEST_F(HttpClientTest, TricklingServerFailsByTheLowSpeedRuleLongBeforeTheDeadline) {
  auto client = NewClient();  // the defaults: 1024 bytes/s over 5 s windows
  const absl::Time start = absl::Now();
  HttpResult r = client->Post(server_.Url("/trickle"), "{}", {}, Deadline());
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(r.failure, HttpFailure::kTooSlow) << r.error;
  EXPECT_THAT(r.error, HasSubstr("HTTP 200 OK came too slowly"));
  EXPECT_THAT(r.error, HasSubstr("under the minimum of 1024 bytes/s"));
  EXPECT_THAT(r.error, ::testing::ContainsRegex("[0-9]+ of 100 body bytes received"));
  EXPECT_GE(took, absl::Seconds(5)) << "the first window is 5 s long";
  EXPECT_LT(took, kMuchSooner) << "deadline was " << kLongDeadline;
  // The handle is still good.
  HttpResult next = client->Post(server_.Url("/json"), "{}", {}, Deadline());
  EXPECT_TRUE(next.ok()) << next.error;
}

TEST_F(HttpClientTest, SilentServerFailsAtTheDeadlineNotByTheLowSpeedRule) {
  HttpClientOptions options;
  options.low_speed_window = absl::Seconds(1);  // a server thinking is not a slow response
  auto client = NewClient(options);
  const absl::Time start = absl::Now();
  HttpResult r = client->Post(server_.Url("/hang"), "{}", {}, Deadline(absl::Seconds(3)));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(r.failure, HttpFailure::kTimeout) << r.error;
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.error, HasSubstr("no response before the deadline"));
  EXPECT_GE(took, absl::Seconds(2));
  EXPECT_LT(took, kMuchSooner);
  HttpResult next = client->Post(server_.Url("/json"), "{}", {}, Deadline());
  EXPECT_TRUE(next.ok()) << next.error;
}

TEST_F(HttpClientTest, CancelEndsTheCallAndTheClientWorksAfter) {
  auto client = NewClient();
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    server_.hanging().WaitForNotificationWithTimeout(kLongDeadline);
    cancel = true;
  });
  const absl::Time start = absl::Now();
  HttpResult r = client->Post(server_.Url("/hang"), "{}", {}, Deadline(), &cancel);
  canceller.join();
  EXPECT_EQ(r.failure, HttpFailure::kCancelled) << r.error;
  EXPECT_LT(absl::Now() - start, kMuchSooner);
  HttpResult next = client->Post(server_.Url("/json"), "{}", {}, Deadline());
  EXPECT_TRUE(next.ok()) << next.error;
}

TEST_F(HttpClientTest, DeadlineAlreadyPassedSendsNothing) {
  auto client = NewClient();
  HttpResult r = client->Post(server_.Url("/json"), "{}", {}, absl::Now() - absl::Seconds(1));
  EXPECT_EQ(r.failure, HttpFailure::kTimeout);
  EXPECT_EQ(server_.connections(), 0);
}

TEST_F(HttpClientTest, DeclaredBodyOverTheCapFailsWithoutReadingIt) {
  auto client = NewClient();  // 16 MiB
  HttpResult r = client->Post(server_.Url("/declared-big"), "{}", {}, Deadline());
  EXPECT_EQ(r.failure, HttpFailure::kTooLarge) << r.error;
  EXPECT_THAT(r.error, HasSubstr("over the 16 MiB limit (Content-Length 16777217)"));
  EXPECT_TRUE(r.body.empty());
  HttpResult next = client->Post(server_.Url("/json"), "{}", {}, Deadline());
  EXPECT_TRUE(next.ok()) << next.error;
}

TEST_F(HttpClientTest, StreamedBodyOverTheCapFailsWhenItPassesTheCap) {
  HttpClientOptions options;
  options.max_response_bytes = 64 * 1024;
  auto client = NewClient(options);
  HttpResult r = client->Post(server_.Url("/streamed-big"), "{}", {}, Deadline());
  EXPECT_EQ(r.failure, HttpFailure::kTooLarge) << r.error;
  EXPECT_THAT(r.error, HasSubstr("over the 64 KiB limit"));
  EXPECT_TRUE(r.body.empty());
}

TEST_F(HttpClientTest, BodyOfExactlyTheCapIsRead) {
  HttpClientOptions options;
  options.max_response_bytes = std::string(R"({"ok":true})").size();
  auto client = NewClient(options);
  EXPECT_TRUE(client->Post(server_.Url("/json"), "{}", {}, Deadline()).ok());
  options.max_response_bytes -= 1;
  auto smaller = NewClient(options);
  EXPECT_EQ(smaller->Post(server_.Url("/json"), "{}", {}, Deadline()).failure,
            HttpFailure::kTooLarge);
}

TEST_F(HttpClientTest, ReusesOneConnectionAcrossCalls) {
  auto client = NewClient();
  for (int i = 0; i < 50; ++i) {
    HttpResult r = client->Post(server_.Url("/json"), "{}", {}, Deadline());
    ASSERT_TRUE(r.ok()) << i << ": " << r.error;
  }
  // A 4xx/5xx answer is complete too: the connection stays.
  EXPECT_EQ(client->Post(server_.Url("/error500"), "{}", {}, Deadline()).status, 500);
  EXPECT_TRUE(client->Post(server_.Url("/json"), "{}", {}, Deadline()).ok());
  EXPECT_EQ(server_.requests("/json"), 51);
  EXPECT_EQ(server_.connections(), 1);
  // The count sees a second connection when there is one.
  auto other = NewClient();
  EXPECT_TRUE(other->Post(server_.Url("/json"), "{}", {}, Deadline()).ok());
  EXPECT_EQ(server_.connections(), 2);
}

TEST_F(HttpClientTest, ReconnectsAfterTheServerClosedTheConnection) {
  auto client = NewClient();
  EXPECT_TRUE(client->Post(server_.Url("/json-close"), "{}", {}, Deadline()).ok());
  HttpResult r = client->Post(server_.Url("/json"), "{}", {}, Deadline());
  EXPECT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(server_.connections(), 2);
}

TEST_F(HttpClientTest, ClientsOnSeveralThreadsAtOnce) {
  constexpr int kThreads = 4;
  constexpr int kCalls = 20;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      auto client = HttpClient::Create();  // the first ones race to initialise libcurl
      if (!client.ok()) return;
      for (int j = 0; j < kCalls; ++j) {
        if ((*client)->Post(server_.Url("/json"), "{}", {}, Deadline()).ok()) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kThreads * kCalls);
  EXPECT_EQ(server_.connections(), kThreads);
}

TEST_F(HttpClientTest, UrlCredentialsAndQueryStayOutOfMessages) {
  auto client = NewClient();
  HttpResult r = client->Post(
      absl::StrCat("http://user:s3cret@127.0.0.1:", server_.port(), "/error500?token=abc"), "{}",
      {}, Deadline());
  EXPECT_EQ(r.status, 500);
  EXPECT_THAT(r.error, HasSubstr(absl::StrCat("127.0.0.1:", server_.port(), "/error500")));
  EXPECT_THAT(r.error, Not(HasSubstr("s3cret")));
  EXPECT_THAT(r.error, Not(HasSubstr("token")));
}

// A server that dies with the request says so in partq's words, not only
// libcurl's ("Empty reply from server"), naming the URL without its query.
TEST(HttpClient, AServerThatClosesTheConnectionBeforeAnsweringIsSaidSo) {
  DyingServer server("");
  ASSERT_GT(server.port(), 0);
  auto client = NewClient();
  HttpResult r = client->Post(server.Url(), "{}", {}, Deadline());
  EXPECT_EQ(r.failure, HttpFailure::kTransport) << r.error;
  EXPECT_THAT(r.error, HasSubstr(absl::StrCat("POST http://127.0.0.1:", server.port(),
                                              "/h: the handler's server closed the connection "
                                              "before answering")));
  EXPECT_THAT(r.error, Not(HasSubstr("token")));
}

TEST(HttpClient, AServerThatDiesInTheMiddleOfItsAnswerIsSaidSo) {
  DyingServer server(
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"ver");
  ASSERT_GT(server.port(), 0);
  auto client = NewClient();
  HttpResult r = client->Post(server.Url(), "{}", {}, Deadline());
  EXPECT_EQ(r.failure, HttpFailure::kTransport) << r.error;
  EXPECT_THAT(r.error, HasSubstr("the handler's server closed the connection in the middle of its "
                                 "HTTP 200 OK answer, after 5 of 100 body bytes"));
}

// The handler's server dies with a request that came over a kept-alive
// connection: libcurl connects anew, is refused and says "couldn't
// connect", but the request went out (the server may have run it). That is
// a broken connection, which uses the batch's attempts, not "nothing was
// sent", which uses none: a server that a poison item kills was
// throttling that item forever.
TEST(HttpClient, AServerGoneWithARequestOnAKeptConnectionIsNoRefusedConnect) {
  GoneAfterOneAnswer server;
  ASSERT_GT(server.port(), 0);
  auto client = NewClient();
  HttpResult first = client->Post(server.Url(), "{}", {}, Deadline());
  ASSERT_TRUE(first.ok()) << first.error;
  HttpResult r = client->Post(server.Url(), "{}", {}, Deadline());
  EXPECT_EQ(r.failure, HttpFailure::kTransport) << r.error;
  EXPECT_THAT(r.error, HasSubstr("the request went out on a kept-alive connection"));
  EXPECT_THAT(r.error, Not(HasSubstr("nothing was sent")));
}

TEST(HttpClient, ConnectionRefusedFails) {
  RefusingPort port;
  ASSERT_GT(port.port(), 0);
  auto client = NewClient();
  HttpResult r =
      client->Post(absl::StrCat("http://127.0.0.1:", port.port(), "/"), "{}", {}, Deadline());
  EXPECT_EQ(r.failure, HttpFailure::kConnect) << r.error;
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.error, HasSubstr("cannot connect"));
  EXPECT_THAT(r.error, HasSubstr(absl::StrCat(port.port())));
}

// Nothing listens (a sidecar that is not up yet): nothing was sent, so the
// handler throttles every item of the batch instead of failing it, and waits
// longer each time a retry finds the server still away. Batches that fail
// while a wait runs (other threads, items enqueued meanwhile) wait as long:
// they used to double it each, 1 s to 30 s within a tenth of a second of
// twenty single-item batches.
TEST(HttpHandlerTest, NoConnectionThrottlesEveryItemLongerEachTime) {
  RefusingPort port;
  ASSERT_GT(port.port(), 0);
  ManualClock clock;
  HttpHandlerOptions o;
  o.clock = &clock;
  o.url = absl::StrCat("http://127.0.0.1:", port.port(), "/");
  o.queue = "q";
  o.max_attempts = 3;
  auto h = HttpHandler::Create(std::move(o));
  ASSERT_TRUE(h.ok()) << h.status();
  Item a, b;
  a.id = 1;
  b.id = 2;
  HandlerCall ca, cb;
  ca.item = &a;
  cb.item = &b;
  ca.deadline = cb.deadline = Deadline();
  std::vector<HandlerCall*> calls = {&ca, &cb};
  for (absl::Duration expected : {absl::Seconds(1), absl::Seconds(2), absl::Seconds(4)}) {
    for (int batch = 0; batch < 5; ++batch) {  // the retry, then others before it is due
      std::vector<absl::Status> statuses;
      (*h)->HandleBatch(absl::MakeConstSpan(calls), &statuses);
      ASSERT_EQ(statuses.size(), 2u);
      for (const absl::Status& st : statuses) {
        EXPECT_TRUE(IsThrottled(st)) << st;
        EXPECT_EQ(RetryInOf(st), expected) << st << " (batch " << batch << ")";
        EXPECT_THAT(st.message(), HasSubstr("cannot connect"));
        EXPECT_THAT(st.message(), HasSubstr("nothing was sent, so no item used an attempt"));
      }
      clock.Advance(expected / 10);
    }
    clock.Advance(expected / 2);  // the wait is over: the retries are due
  }
}

TEST(HttpHandlerTest, AUrlLibcurlCannotUseIsRefusedAtStart) {
  for (const char* url : {"http://127.0.0.1:99999/", "http://", "ftp://127.0.0.1/"}) {
    HttpHandlerOptions o;
    o.url = url;
    auto h = HttpHandler::Create(std::move(o));
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << url;
  }
  // libcurl's reason; the URL itself only when libcurl could parse it (so
  // that its user info, if any, can be left out).
  HttpHandlerOptions o;
  o.url = "http://127.0.0.1:99999/";
  EXPECT_THAT(std::string(HttpHandler::Create(std::move(o)).status().message()),
              HasSubstr("not a usable URL: \"(not shown)\": Port number was not a decimal"));
  o.url = "ftp://u:pa55@127.0.0.1/x";
  EXPECT_THAT(std::string(HttpHandler::Create(std::move(o)).status().message()),
              HasSubstr("not an http or https URL: \"ftp://127.0.0.1/x\""));
}

TEST(HttpClient, UnresolvableHostFails) {
  auto client = NewClient();
  // .invalid never resolves (RFC 6761).
  HttpResult r = client->Post("http://partq-test.invalid/", "{}", {}, Deadline());
  if (r.failure == HttpFailure::kTimeout)
    GTEST_SKIP() << "the resolver did not answer: " << r.error;
  EXPECT_EQ(r.failure, HttpFailure::kConnect) << r.error;
  EXPECT_THAT(r.error, HasSubstr("cannot resolve"));
}

TEST(HttpClient, OnlyHttpAndHttpsUrls) {
  auto client = NewClient();
  for (const char* url : {"ftp://127.0.0.1/x", "file:///etc/passwd", "not a url", ""}) {
    HttpResult r = client->Post(url, "{}", {}, Deadline());
    EXPECT_EQ(r.failure, HttpFailure::kInvalidRequest) << url << ": " << r.error;
  }
}

TEST(HttpClient, CreateRefusesUnusableOptions) {
  HttpClientOptions no_ca;
  no_ca.ca_file = "/nonexistent/ca.pem";
  auto r = HttpClient::Create(no_ca);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("/nonexistent/ca.pem"));
  HttpClientOptions zero;
  zero.max_response_bytes = 0;
  EXPECT_EQ(HttpClient::Create(zero).status().code(), absl::StatusCode::kInvalidArgument);
  HttpClientOptions no_window;
  no_window.low_speed_window = absl::ZeroDuration();
  EXPECT_EQ(HttpClient::Create(no_window).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HttpClient, ParseRetryAfter) {
  const absl::Time now = absl::FromUnixSeconds(1445412480);  // Wed, 21 Oct 2015 07:28:00 GMT
  EXPECT_EQ(ParseRetryAfter("120", now), absl::Seconds(120));
  EXPECT_EQ(ParseRetryAfter(" 0 ", now), absl::ZeroDuration());
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2015 07:28:30 GMT", now), absl::Seconds(30));
  EXPECT_EQ(ParseRetryAfter("Wednesday, 21-Oct-15 07:29:00 GMT", now), absl::Seconds(60));
  EXPECT_EQ(ParseRetryAfter("Wed Oct 21 07:28:10 2015", now), absl::Seconds(10));
  EXPECT_EQ(ParseRetryAfter("Tue, 20 Oct 2015 07:28:00 GMT", now), absl::ZeroDuration());
  EXPECT_EQ(ParseRetryAfter("", now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("-5", now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("1.5", now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("soon", now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("99999999999999999999", now), std::nullopt);
}

TEST(HttpClient, IsJsonContentType) {
  EXPECT_TRUE(IsJsonContentType("application/json"));
  EXPECT_TRUE(IsJsonContentType("Application/JSON; charset=utf-8"));
  EXPECT_TRUE(IsJsonContentType("application/problem+json"));
  EXPECT_TRUE(IsJsonContentType(" application/vnd.partq.v1+json ;v=1"));
  EXPECT_FALSE(IsJsonContentType(""));
  EXPECT_FALSE(IsJsonContentType("text/html"));
  EXPECT_FALSE(IsJsonContentType("text/json"));
  EXPECT_FALSE(IsJsonContentType("application/jsonp"));
  EXPECT_FALSE(IsJsonContentType("application/x-ndjson"));
}

TEST(HttpClient, FailureNamesAreDistinct) {
  std::set<absl::string_view> names;
  for (int f = 0; f <= static_cast<int>(HttpFailure::kEmptyBody); ++f) {
    names.insert(HttpFailureName(static_cast<HttpFailure>(f)));
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(HttpFailure::kEmptyBody) + 1);
  EXPECT_EQ(names.count("unknown"), 0u);
}

// https against certificates made for this run: a private CA, a server
// certificate for 127.0.0.1, one for another host, and a client certificate.
class HttpsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/partq-http-tls.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = new std::string(tmpl);
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    ASSERT_TRUE(OpenSsl(absl::StrCat("req -x509 -new ", ec, " -keyout ca.key -out ca.pem -days 2",
                                     " -subj '/CN=partq test CA'")));
    int serial = 1;
    for (const auto& [name, ext] : std::vector<std::pair<std::string, std::string>>{
             {"server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"},
             {"elsewhere", "subjectAltName=DNS:elsewhere.invalid\nextendedKeyUsage=serverAuth\n"},
             {"client", "extendedKeyUsage=clientAuth\n"}}) {
      std::ofstream(Path(name + ".ext")) << ext;
      ASSERT_TRUE(OpenSsl(absl::StrCat("req -new ", ec, " -keyout ", name, ".key -out ", name,
                                       ".csr -subj '/CN=", name, "'")));
      ASSERT_TRUE(OpenSsl(absl::StrCat("x509 -req -in ", name, ".csr -CA ca.pem -CAkey ca.key",
                                       " -set_serial ", ++serial, " -days 2 -extfile ", name,
                                       ".ext -out ", name, ".crt")));
    }
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr) std::filesystem::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }

  static std::string Path(const std::string& name) { return *dir_ + "/" + name; }

  // Runs `openssl ARGS` in the certificate directory; its output goes to a
  // log that a failure shows.
  static bool OpenSsl(const std::string& args) {
    const std::string cmd =
        absl::StrCat("cd '", *dir_, "' && openssl ", args, " >>openssl.log 2>&1");
    if (std::system(cmd.c_str()) == 0) return true;
    ADD_FAILURE() << "failed: " << cmd << "\n" << ReadFile(Path("openssl.log"));
    return false;
  }

  static std::string ReadFile(const std::string& path) {
    std::stringstream out;
    out << std::ifstream(path).rdbuf();
    return out.str();
  }

  // https_test_server.py in a child process, serving certificate NAME.crt;
  // requiring a client certificate from `client_ca` when given.
  class Server {
   public:
    explicit Server(const std::string& name, const std::string& client_ca = "")
        : server_(Argv(name, client_ca), *dir_) {}
    // Whether it serves; otherwise, why not.
    ::testing::AssertionResult ok() const {
      if (server_.port() > 0) return ::testing::AssertionSuccess();
      return ::testing::AssertionFailure() << "https_test_server.py did not start:\n"
                                           << ReadFile(server_.log());
    }
    std::string Url() const { return absl::StrCat("https://127.0.0.1:", server_.port(), "/batch"); }

   private:
    static std::vector<std::string> Argv(const std::string& name, const std::string& client_ca) {
      std::vector<std::string> argv = {"/usr/bin/env",      "python3", HTTPS_TEST_SERVER,  "--cert",
                                       Path(name + ".crt"), "--key",   Path(name + ".key")};
      if (!client_ca.empty()) argv.insert(argv.end(), {"--client-ca", client_ca});
      return argv;
    }
    testing::PortFileServer server_;
  };

  static std::string* dir_;
};
std::string* HttpsTest::dir_ = nullptr;

TEST_F(HttpsTest, VerifiesTheServerWithThePrivateCaAndKeepsTheConnection) {
  Server server("server");
  ASSERT_TRUE(server.ok());
  HttpClientOptions options;
  options.ca_file = Path("ca.pem");
  auto client = NewClient(options);
  std::set<int> client_ports;
  for (int i = 0; i < 3; ++i) {
    HttpResult r = client->Post(server.Url(), "{}", {}, Deadline());
    ASSERT_TRUE(r.ok()) << r.error;
    client_ports.insert(nlohmann::json::parse(r.body)["client_port"].get<int>());
  }
  EXPECT_EQ(client_ports.size(), 1u) << "one TLS connection for the three calls";
}

TEST_F(HttpsTest, FailsVerificationWithoutTheCa) {
  Server server("server");
  ASSERT_TRUE(server.ok());
  auto client = NewClient();  // the system's CAs only
  HttpResult r = client->Post(server.Url(), "{}", {}, Deadline());
  EXPECT_EQ(r.failure, HttpFailure::kTls) << r.error;
  EXPECT_THAT(r.error, HasSubstr("TLS failed"));
  EXPECT_THAT(r.error, HasSubstr("certificate"));
  EXPECT_THAT(r.error, HasSubstr("ca_file"));
}

TEST_F(HttpsTest, FailsVerificationOfAnotherHostsCertificate) {
  Server server("elsewhere");
  ASSERT_TRUE(server.ok());
  HttpClientOptions options;
  options.ca_file = Path("ca.pem");
  auto client = NewClient(options);
  HttpResult r = client->Post(server.Url(), "{}", {}, Deadline());
  EXPECT_EQ(r.failure, HttpFailure::kTls) << r.error;
  EXPECT_THAT(r.error, HasSubstr("127.0.0.1"));
}

TEST_F(HttpsTest, InsecureAcceptsAnyCertificate) {
  Server server("elsewhere");
  ASSERT_TRUE(server.ok());
  HttpClientOptions options;
  options.insecure = true;
  auto client = NewClient(options);
  HttpResult r = client->Post(server.Url(), "{}", {}, Deadline());
  EXPECT_TRUE(r.ok()) << r.error;
}

TEST_F(HttpsTest, PresentsTheClientCertificateWhenTheServerAsks) {
  Server server("server", Path("ca.pem"));
  ASSERT_TRUE(server.ok());
  HttpClientOptions options;
  options.ca_file = Path("ca.pem");
  auto anonymous = NewClient(options);
  HttpResult refused = anonymous->Post(server.Url(), "{}", {}, Deadline());
  EXPECT_EQ(refused.failure, HttpFailure::kTls) << refused.error;
  EXPECT_THAT(refused.error, HasSubstr("client_cert_file"));
  EXPECT_EQ(refused.status, 0);
  options.client_cert_file = Path("client.crt");
  options.client_key_file = Path("client.key");
  auto client = NewClient(options);
  HttpResult r = client->Post(server.Url(), "{}", {}, Deadline());
  EXPECT_TRUE(r.ok()) << r.error;
}

}  // namespace
}  // namespace partq
