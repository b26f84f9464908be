#include "tests/observability/scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace partq::testing {

namespace {

bool HasLabels(const prometheus::ClientMetric& m,
               const std::map<std::string, std::string>& labels) {
  size_t found = 0;
  for (const auto& l : m.label) {
    auto it = labels.find(l.name);
    if (it != labels.end() && it->second == l.value) ++found;
  }
  return found == labels.size();
}

}  // namespace

std::optional<double> MetricValue(const prometheus::Registry& registry, const std::string& name,
                                  const std::map<std::string, std::string>& labels) {
  std::optional<double> out;
  for (const auto& family : registry.Collect()) {
    const bool count = family.name + "_count" == name;
    const bool sum = family.name + "_sum" == name;
    if (family.name != name && !count && !sum) continue;
    for (const auto& m : family.metric) {
      if (!HasLabels(m, labels)) continue;
      double v = 0;
      switch (family.type) {
        case prometheus::MetricType::Counter: v = m.counter.value; break;
        case prometheus::MetricType::Gauge: v = m.gauge.value; break;
        case prometheus::MetricType::Histogram:
          v = sum ? m.histogram.sample_sum : static_cast<double>(m.histogram.sample_count);
          break;
        default: continue;
      }
      out = out.value_or(0) + v;
    }
  }
  return out;
}

std::map<std::string, double> ParseSamples(const std::string& page) {
  std::map<std::string, double> out;
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    const std::string series = line.substr(0, space);
    double v = 0;
    if (!absl::SimpleAtod(line.substr(space + 1), &v)) continue;
    out[series] = v;
    const std::string bare = series.substr(0, series.find('{'));
    if (bare != series) out[bare] += v;
  }
  return out;
}

int HttpGet(int port, const std::string& path, std::string* body) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  const std::string req =
      absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return -1;
  }
  std::string resp;
  char buf[8192];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    resp.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  // "HTTP/1.1 200 OK\r\n...\r\n\r\nbody"
  const auto head_end = resp.find("\r\n\r\n");
  int code = -1;
  if (!absl::StartsWith(resp, "HTTP/1.") || resp.size() < 12 ||
      !absl::SimpleAtoi(resp.substr(9, 3), &code) || head_end == std::string::npos) {
    return -1;
  }
  *body = resp.substr(head_end + 4);
  return code;
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::string FindInPath(const std::string& name) {
  const char* path = getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace partq::testing
