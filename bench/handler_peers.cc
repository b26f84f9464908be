#include "bench/handler_peers.h"

#include <CivetServer.h>
#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "handlers/child_process.h"

namespace partq::bench {
namespace {

using json = nlohmann::json;

bool WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Answers each POST with EchoReply, headers and body in one write: with
// TCP_NODELAY a response in two writes costs a second packet, and without
// it Nagle holds the body until the client ACKs the headers.
class EchoHandler : public CivetHandler {
 public:
  explicit EchoHandler(PeerOptions options) : options_(options) {}
  bool handlePost(CivetServer*, mg_connection* conn) override {
    const mg_request_info* info = mg_get_request_info(conn);
    // Read straight into the body: civetweb's worker threads have small
    // stacks, which a 64 KiB buffer on the stack overflows.
    std::string body(info->content_length > 0 ? static_cast<size_t>(info->content_length) : 4096,
                     '\0');
    size_t got = 0;
    for (int n; (n = mg_read(conn, &body[got], body.size() - got)) > 0;) {
      got += static_cast<size_t>(n);
      if (got == body.size()) body.resize(body.size() * 2);
    }
    body.resize(got);
    absl::StatusOr<std::string> reply = EchoReply(body, options_);
    const bool ok = reply.ok();
    const std::string& content = ok ? *reply : std::string(reply.status().message());
    const std::string out =
        absl::StrCat(ok ? "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        : "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n",
                     "Content-Length: ", content.size(), "\r\n\r\n", content);
    mg_write(conn, out.data(), out.size());
    return true;
  }

 private:
  const PeerOptions options_;
};

}  // namespace

namespace {

// Whether `item` is one PeerOptions::fail_every fails now.
bool FailsNow(const json& item, int fail_every) {
  int64_t k = 0;
  const std::string& payload = item.at("payload").get_ref<const std::string&>();
  return fail_every > 0 && absl::SimpleAtoi(payload, &k) && FailsEvery(fail_every, k);
}

}  // namespace

absl::StatusOr<std::string> EchoReply(absl::string_view request, const PeerOptions& options) {
  try {
    const json r = json::parse(request.begin(), request.end());
    if (r.at("version") != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("bench peer: protocol version ", r.at("version").dump(), " unknown"));
    }
    json results = json::array();
    for (const json& item : r.at("items")) {
      if (FailsNow(item, options.fail_every)) {
        results.push_back({{"id", item.at("id")},
                           {"ok", false},
                           {"error", "failing on purpose (bench-peer --fail-every)"},
                           {"dead", true}});
      } else if (options.with_result) {
        results.push_back({{"id", item.at("id")},
                           {"ok", true},
                           {"result", item.at("payload")},
                           {"result_encoding", item.at("payload_encoding")}});
      } else {
        results.push_back({{"id", item.at("id")}, {"ok", true}});
      }
    }
    const json reply = {{"version", 1}, {"batch", r.at("batch")}, {"results", std::move(results)}};
    return reply.dump();
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("bench peer: bad request: ", e.what()));
  }
}

int RunExecPeer(const PeerOptions& options) {
  std::string pending;
  size_t scanned = 0;  // no '\n' in pending before this
  std::vector<char> chunk(64 << 10);
  for (;;) {
    const ssize_t n = read(STDIN_FILENO, chunk.data(), chunk.size());
    if (n == 0) return 0;
    if (n < 0) {
      if (errno == EINTR) continue;
      perror("partq bench-peer exec: reading stdin");
      return 1;
    }
    pending.append(chunk.data(), static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', scanned)) != std::string::npos; scanned = start) {
      absl::StatusOr<std::string> reply =
          EchoReply(absl::string_view(pending).substr(start, nl - start), options);
      start = nl + 1;
      if (!reply.ok()) {
        fprintf(stderr, "partq bench-peer exec: %s\n",
                std::string(reply.status().message()).c_str());
        return 1;
      }
      reply->push_back('\n');
      if (!WriteAll(STDOUT_FILENO, *reply)) return 1;
    }
    pending.erase(0, start);
    scanned = pending.size();
  }
}

int RunHttpPeer(const PeerOptions& options) {
  // One thread per connection (civetweb's model): a peer serves one
  // session, so a few suffice. Keep-alive is off by default in civetweb, and
  // its 500 ms idle limit would drop the connection between the warm-up and
  // the drain.
  const std::vector<std::string> civetweb = {
      "listening_ports",       "127.0.0.1:0", "num_threads", "4", "enable_keep_alive", "yes",
      "keep_alive_timeout_ms", "60000",       "tcp_nodelay", "1"};
  std::unique_ptr<CivetServer> server;
  try {
    server = std::make_unique<CivetServer>(civetweb);
  } catch (const CivetException& e) {
    fprintf(stderr, "partq bench-peer http: cannot start: %s\n", e.what());
    return 1;
  }
  EchoHandler handler(options);
  server->addHandler("/", handler);
  const std::vector<int> ports = server->getListeningPorts();
  if (ports.empty() || ports[0] <= 0) {
    fprintf(stderr, "partq bench-peer http: no listening port\n");
    return 1;
  }
  fprintf(stderr, "partq bench-peer http: ready on http://127.0.0.1:%d/\n", ports[0]);
  fflush(stderr);
  for (char c;;) {
    const ssize_t n = read(STDIN_FILENO, &c, 1);
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    break;  // the end of stdin (or an error): the bench is gone
  }
  server->removeHandler("/");
  server->close();
  return 0;
}

struct PeerServer::Ready {
  absl::Mutex mu;
  std::string url ABSL_GUARDED_BY(mu);
};

absl::StatusOr<std::unique_ptr<PeerServer>> PeerServer::Start(const std::string& command,
                                                              absl::Duration timeout) {
  std::unique_ptr<PeerServer> peer(new PeerServer());
  peer->ready_ = std::make_shared<Ready>();
  ChildOptions co;
  co.command = command;
  co.on_stderr_line = [ready = peer->ready_](pid_t, absl::string_view line) {
    constexpr absl::string_view kReady = "ready on ";
    const size_t at = line.find(kReady);
    if (at == absl::string_view::npos) return;
    absl::string_view url = line.substr(at + kReady.size());
    url = url.substr(0, url.find(' '));
    absl::MutexLock lock(&ready->mu);
    if (ready->url.empty()) ready->url = std::string(url);
  };
  auto child = ChildProcess::Start(std::move(co));
  if (!child.ok()) return child.status();
  peer->child_ = std::move(*child);
  const absl::Time deadline = absl::Now() + timeout;
  Ready& ready = *peer->ready_;
  for (;;) {
    {
      absl::MutexLock lock(&ready.mu);
      // Woken by the ready line; a tenth of a second at most otherwise, to
      // notice a command that died.
      ready.mu.AwaitWithDeadline(absl::Condition(
                                     +[](std::string* url) { return !url->empty(); }, &ready.url),
                                 std::min(deadline, absl::Now() + absl::Milliseconds(100)));
      if (!ready.url.empty()) {
        peer->url_ = ready.url;
        return peer;
      }
    }
    if (absl::Status idle = peer->child_->CheckIdle(); !idle.ok()) {
      return absl::UnavailableError(absl::StrCat("bench: handler peer `", command,
                                                 "` ended before it was ready: ", idle.message()));
    }
    if (absl::Now() >= deadline) {
      return absl::UnavailableError(absl::StrCat(
          "bench: handler peer `", command, "` did not say \"ready on http://...\" within ",
          absl::FormatDuration(timeout), "; its last stderr line: \"",
          peer->child_->last_stderr_line(), "\""));
    }
  }
}

PeerServer::~PeerServer() {
  if (child_) child_->Kill();
}

std::string ShellQuote(absl::string_view s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

}  // namespace partq::bench
