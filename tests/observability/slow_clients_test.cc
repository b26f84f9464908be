// A real `partq worker` serving /metrics, /healthz, /readyz and the web console
// (cli/http_server.h), on a real PostgreSQL, against clients that connect and
// then send nothing, half a request or half a body: with 100 of them holding
// their connections, each endpoint still answers at once (on the metrics
// address with 300, coming and going); a body sent a byte at a time to the
// console is cut off at the request timeout.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "store/types.h"
#include "tests/observability/scrape.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using testing::ChildProcess;
using testing::HttpGet;
using testing::TestSchema;
using testing::WaitUntil;

// A connected socket to 127.0.0.1:port, from 127.0.0.`from` (each server
// holds at most 64 connections of one address), whose reads give up after
// `timeout`, or -1.
int Connect(int port, absl::Duration timeout = absl::Seconds(2), int from = 1) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in source{};
  source.sin_family = AF_INET;
  source.sin_addr.s_addr = htonl(INADDR_LOOPBACK - 1 + static_cast<uint32_t>(from));
  if (bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof(source)) != 0) {
    close(fd);
    return -1;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool Send(int fd, const std::string& s) {
  return send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
}

// The status line of the answer to GET `path`, or "" when none came within 2 s.
std::string Probe(int port, const std::string& path) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  std::string got;
  if (Send(fd, absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: 127.0.0.1:", port,
                            "\r\nConnection: close\r\n\r\n"))) {
    char buf[256];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) got.assign(buf, static_cast<size_t>(n));
  }
  close(fd);
  return got.substr(0, got.find("\r\n"));
}

// Whether the server still holds `fd` open: nothing to read, and no end of stream.
bool StillOpen(int fd) {
  char c;
  const ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

class SlowClientsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QueueConfig q;
    q.name = "jobs";
    q.parts = 2;
    ASSERT_TRUE(schema_.NewStore()->CreateQueue(q).ok());
    log_ = ::testing::TempDir() + "slow_clients.log";
    worker_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{testing::PartqBinary(), "worker", "jobs", "--dsn", schema_.dsn(),
                                 "--schema", schema_.name(), "--metrics-addr",
                                 absl::StrCat("127.0.0.1:", metrics_), "--console-listen",
                                 absl::StrCat("127.0.0.1:", console_), "--quiet"},
        std::map<std::string, std::string>{}, log_);
    std::string body;
    ASSERT_TRUE(WaitUntil([&] { return HttpGet(metrics_, "/readyz", &body) == 200; }))
        << "no /readyz on port " << metrics_ << " (see " << log_ << ")";
    ASSERT_TRUE(WaitUntil([&] { return HttpGet(console_, "/", &body) == 200; }))
        << "no console on port " << console_ << " (see " << log_ << ")";
  }
  void TearDown() override {
    for (int fd : held_) close(fd);
  }

  // A connection to `port`, from 127.0.0.(2 + i % 300 / 50), that sends, by `i` % 3, nothing, half
  // a request header, or a whole header of `with_body` ("METHOD PATH") and half of the body it
  // announces; -1 when it could not connect or send.
  int OpenSlow(int port, int i, const std::string& with_body) {
    const int fd = Connect(port, absl::Seconds(2), 2 + i % 300 / 50);
    if (fd < 0) return -1;
    bool sent = true;
    if (i % 3 == 1) {
      sent = Send(fd, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow:");
    } else if (i % 3 == 2) {
      sent = Send(fd, absl::StrCat(with_body,
                                   " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n"
                                   "Content-Type: application/x-www-form-urlencoded\r\n\r\nq=a"));
    }
    if (!sent) {
      close(fd);
      return -1;
    }
    return fd;
  }
  // `n` such connections, held until the test ends.
  void Hold(int port, const std::string& with_body, int n = 100) {
    for (int i = 0; i < n; ++i) {
      const int fd = OpenSlow(port, i, with_body);
      ASSERT_GE(fd, 0) << "connection " << i;
      held_.push_back(fd);
    }
  }
  // 300 connections as Hold makes them, three of them closed and opened
  // again every 50 ms for 7 s (longer than the request timeout), while
  // `paths` are probed in turn every 4 rounds: each probe must be answered.
  // The churn goes on past 7 s until 30 probes were made (a loaded machine
  // takes longer over each round), for at most a minute.
  void ChurnAndProbe(int port, const std::string& with_body,
                     const std::vector<std::string>& paths) {
    constexpr int kMinProbes = 30;
    Hold(port, with_body, 300);
    int probes = 0;
    int answered = 0;
    size_t next = 0;
    const absl::Time start = absl::Now();
    const absl::Time end = start + absl::Seconds(7);
    const absl::Time limit = start + absl::Minutes(1);
    for (int tick = 0; (absl::Now() < end || probes < kMinProbes) && absl::Now() < limit; ++tick) {
      for (int k = 0; k < 3; ++k, ++next) {
        int& fd = held_[next % held_.size()];
        close(fd);
        fd = OpenSlow(port, static_cast<int>(next), with_body);
        ASSERT_GE(fd, 0) << "reconnection " << next;
      }
      if (tick % 4 == 0) {
        const std::string& path = paths[static_cast<size_t>(probes) % paths.size()];
        ++probes;
        const std::string got = Probe(port, path);
        EXPECT_EQ(got, "HTTP/1.1 200 OK") << path << " at probe " << probes;
        answered += got == "HTTP/1.1 200 OK" ? 1 : 0;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    EXPECT_EQ(answered, probes);
    EXPECT_GE(probes, kMinProbes);
  }
  // Each held connection is still open (the server has not timed it out yet,
  // so the probes before this ran while they all were held).
  void ExpectAllHeld() {
    int open = 0;
    for (int fd : held_) open += StillOpen(fd) ? 1 : 0;
    EXPECT_EQ(open, static_cast<int>(held_.size()));
  }

  TestSchema schema_;
  int metrics_ = testing::FreePort();
  int console_ = testing::FreePort();
  std::string log_;
  std::unique_ptr<ChildProcess> worker_;
  std::vector<int> held_;
};

// The metrics address answers a request once its header is in (none of its
// endpoints reads a body), so the connections that sent a whole header got
// their answer; the others are still held.
TEST_F(SlowClientsTest, HealthAndMetricsAnswerWithAHundredSlowConnectionsOpen) {
  Hold(metrics_, "GET /metrics");
  EXPECT_EQ(Probe(metrics_, "/healthz"), "HTTP/1.1 200 OK");
  EXPECT_EQ(Probe(metrics_, "/readyz"), "HTTP/1.1 200 OK");
  EXPECT_EQ(Probe(metrics_, "/metrics"), "HTTP/1.1 200 OK");
  int open = 0;
  int answered = 0;
  for (size_t i = 0; i < held_.size(); ++i) {
    if (i % 3 != 2) {
      open += StillOpen(held_[i]) ? 1 : 0;
      continue;
    }
    char buf[16] = {};
    answered += read(held_[i], buf, 15) == 15 && absl::StartsWith(buf, "HTTP/1.1 200") ? 1 : 0;
  }
  EXPECT_EQ(open, 67);
  EXPECT_EQ(answered, 33);
}

// Issue 48's third review: with 300 such connections, each closed and
// opened again about 60 times a second, civetweb's 128 threads were all
// waiting and the probes failed. libmicrohttpd's threads wait on all of
// them: every probe is answered, for longer than the request timeout (5 s),
// on the metrics address and on the console.
TEST_F(SlowClientsTest, HealthAnswersWhileThreeHundredSlowClientsComeAndGo) {
  ChurnAndProbe(metrics_, "GET /metrics", {"/healthz", "/readyz"});
  EXPECT_EQ(Probe(metrics_, "/metrics"), "HTTP/1.1 200 OK");
}

TEST_F(SlowClientsTest, ConsoleAnswersWhileThreeHundredSlowClientsComeAndGo) {
  ChurnAndProbe(console_, "POST /api/queues", {"/", "/api/queues"});
}

// The fourth review held 10,000 connections from one address, each sending
// a byte every 3 s, and the probes failed: one address now gets at most 64
// connections (the rest are closed at once), and the probes, from another
// address, are answered.
TEST_F(SlowClientsTest, OneAddressHoldsAtMostSixtyFourConnections) {
  for (int port : {metrics_, console_}) {
    std::vector<int> mine;
    for (int i = 0; i < 100; ++i) {
      const int fd = Connect(port, absl::Milliseconds(500), 9);
      ASSERT_GE(fd, 0);
      held_.push_back(fd);
      mine.push_back(fd);
      ASSERT_TRUE(Send(fd, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow:"));
    }
    ASSERT_TRUE(WaitUntil([&] {
      int open = 0;
      for (int fd : mine) open += StillOpen(fd) ? 1 : 0;
      return open == 64;
    })) << "port "
        << port;
    EXPECT_EQ(Probe(port, "/healthz"), "HTTP/1.1 200 OK") << "port " << port;
  }
}

TEST_F(SlowClientsTest, ConsoleAnswersWithAHundredSlowConnectionsOpen) {
  Hold(console_, "POST /api/queues");
  EXPECT_EQ(Probe(console_, "/"), "HTTP/1.1 200 OK");
  EXPECT_EQ(Probe(console_, "/api/queues"), "HTTP/1.1 200 OK");
  ExpectAllHeld();
}

// A body that comes a byte every 100 ms (1000 bytes: 100 s) is not waited
// for past the request timeout: the connection is closed about 5 s after
// the header came (libmicrohttpd cannot answer before a body is in, so no
// 408 is sent; civetweb, before it, held a thread for it until then).
TEST_F(SlowClientsTest, ABodySentAByteAtATimeIsRefusedAfterTheRequestTimeout) {
  const int fd = Connect(console_, absl::Milliseconds(100));
  ASSERT_GE(fd, 0);
  held_.push_back(fd);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(Send(fd,
                   "POST /api/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n"
                   "Content-Type: application/x-www-form-urlencoded\r\n\r\n"));
  std::string got;
  bool closed = false;
  // Each read waits 100 ms (the socket's timeout) for the answer; then a byte more.
  for (int sent = 0; sent < 1000 && got.empty() && !closed; ++sent) {
    char buf[256];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) got.assign(buf, static_cast<size_t>(n));
    closed = n == 0 || (n < 0 && errno == ECONNRESET) || !Send(fd, "a");
  }
  const absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(closed || absl::StartsWith(got, "HTTP/1.1 408")) << got;
  const absl::Duration timeout = absl::Seconds(5);  // kHttpRequestTimeoutMs, cli/http_server.h
  EXPECT_GE(took, timeout);
  EXPECT_LT(took, timeout + absl::Seconds(3));
}

}  // namespace
}  // namespace partq
