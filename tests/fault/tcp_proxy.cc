#include "tests/fault/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

namespace partq::testing {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

// Writes all of buf; false if the peer is gone.
bool SendAll(int fd, const char* buf, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    buf += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

void CloseFd(int fd, bool reset) {
  if (fd < 0) return;
  if (reset) {
    linger l{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  }
  close(fd);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpProxy>> TcpProxy::Start(int upstream_port) {
  std::unique_ptr<TcpProxy> p(new TcpProxy());
  p->upstream_port_ = upstream_port;
  p->listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
  if (p->listen_fd_ < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  int one = 1;
  setsockopt(p->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr = Loopback(0);
  socklen_t len = sizeof(addr);
  if (bind(p->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(p->listen_fd_, 128) != 0 ||
      getsockname(p->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return absl::InternalError(absl::StrCat("proxy listen: ", strerror(errno)));
  }
  p->port_ = ntohs(addr.sin_port);
  p->thread_ = std::thread([raw = p.get()] { raw->Loop(); });
  return p;
}

TcpProxy::~TcpProxy() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  CloseAll(false);
  if (listen_fd_ >= 0) close(listen_fd_);
}

int TcpProxy::CloseAll(bool reset) {
  absl::MutexLock lock(&mu_);
  const int n = static_cast<int>(pairs_.size());
  for (auto& p : pairs_) {
    CloseFd(p.client, reset);
    CloseFd(p.server, reset);
  }
  pairs_.clear();
  return n;
}

int TcpProxy::DropAll() { return CloseAll(false); }
int TcpProxy::ResetAll() { return CloseAll(true); }

void TcpProxy::Stall(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  stalled_until_ = absl::Now() + d;
}

void TcpProxy::CutAfterClientSends(std::string needle, int nth) {
  absl::MutexLock lock(&mu_);
  cut_needle_ = std::move(needle);
  cut_countdown_ = nth;
}

int TcpProxy::connections() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(pairs_.size());
}

// The loop holds mu_ while it forwards, so a command never closes a socket
// under a read or write in progress.
void TcpProxy::Loop() {
  std::vector<pollfd> fds;
  char buf[65536];
  while (!stop_) {
    {
      absl::MutexLock lock(&mu_);
      fds.clear();
      if (absl::Now() >= stalled_until_) {
        fds.push_back({listen_fd_, POLLIN, 0});
        for (const auto& p : pairs_) {
          fds.push_back({p.client, POLLIN, 0});
          fds.push_back({p.server, POLLIN, 0});
        }
      }
    }
    if (fds.empty()) {
      absl::SleepFor(absl::Milliseconds(10));
      continue;
    }
    if (poll(fds.data(), fds.size(), 10) <= 0) continue;
    absl::MutexLock lock(&mu_);
    if (absl::Now() < stalled_until_) continue;
    // A command may have closed everything since the poll: only act on fds
    // that still belong to a pair.
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      for (size_t k = 0; k < pairs_.size(); ++k) {
        Pair& p = pairs_[k];
        if (p.client != fds[i].fd && p.server != fds[i].fd) continue;
        const int from = fds[i].fd;
        const int to = from == p.client ? p.server : p.client;
        ssize_t n = recv(from, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
        const bool cut = n > 0 && from == p.client && cut_countdown_ > 0 &&
                         absl::string_view(buf, static_cast<size_t>(n)).find(cut_needle_) !=
                             absl::string_view::npos &&
                         --cut_countdown_ == 0;
        if (n <= 0 || !SendAll(to, buf, static_cast<size_t>(n)) || cut) {
          CloseFd(p.client, false);
          CloseFd(p.server, false);
          pairs_.erase(pairs_.begin() + static_cast<std::ptrdiff_t>(k));
        }
        break;
      }
    }
    if (fds[0].revents & POLLIN) {
      int client = accept(listen_fd_, nullptr, nullptr);
      if (client < 0) continue;
      int server = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in up = Loopback(upstream_port_);
      if (server < 0 || connect(server, reinterpret_cast<sockaddr*>(&up), sizeof(up)) != 0) {
        CloseFd(server, false);
        CloseFd(client, true);  // like a refused connection
        continue;
      }
      int one = 1;
      setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      pairs_.push_back({client, server});
    }
  }
}

}  // namespace partq::testing
