#include "cli/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace partq::cli {
namespace {

prometheus::MetricFamily One(const char* name, const char* help, prometheus::MetricType type,
                             double value) {
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  return prometheus::MetricFamily{name, help, type, {m}};
}

// The fields of /proc/self/stat after the command name (which may hold
// spaces and parentheses, so the split starts after the last ')'): the
// first is field 3 (state) of proc(5).
std::vector<std::string> StatFields() {
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return {};
  return absl::StrSplit(text.substr(close + 1), ' ', absl::SkipWhitespace());
}

// System boot time (seconds since the epoch), from /proc/stat's btime line.
bool BootTime(double* out) {
  std::ifstream in("/proc/stat");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("btime ", 0) == 0) return absl::SimpleAtod(line.substr(6), out);
  }
  return false;
}

}  // namespace

std::vector<prometheus::MetricFamily> ProcessMetrics() {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  // proc(5) numbers fields from 1; StatFields()[0] is field 3.
  const std::vector<std::string> f = StatFields();
  auto field = [&](size_t n, double* v) {
    return n - 3 < f.size() && absl::SimpleAtod(f[n - 3], v);
  };
  double utime, stime, start, vsize, rss, boot;
  if (ticks > 0 && field(14, &utime) && field(15, &stime)) {
    out.push_back(One("process_cpu_seconds_total",
                      "Total user and system CPU time spent in seconds.", MetricType::Counter,
                      (utime + stime) / ticks));
  }
  if (page > 0 && field(24, &rss)) {
    out.push_back(One("process_resident_memory_bytes", "Resident memory size in bytes.",
                      MetricType::Gauge, rss * page));
  }
  if (field(23, &vsize)) {
    out.push_back(One("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                      MetricType::Gauge, vsize));
  }
  if (ticks > 0 && field(22, &start) && BootTime(&boot)) {
    out.push_back(One("process_start_time_seconds",
                      "Start time of the process since unix epoch in seconds.", MetricType::Gauge,
                      boot + start / ticks));
  }
  std::error_code ec;
  auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
  if (!ec) {
    const auto fds = std::distance(it, std::filesystem::directory_iterator());
    out.push_back(One("process_open_fds", "Number of open file descriptors.", MetricType::Gauge,
                      static_cast<double>(fds)));
  }
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    out.push_back(One("process_max_fds", "Maximum number of open file descriptors.",
                      MetricType::Gauge, static_cast<double>(lim.rlim_cur)));
  }
  return out;
}

}  // namespace partq::cli
