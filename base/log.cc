#include "base/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/utf8.h"

namespace partq {
namespace {

LogLevel FromEnv() {
  const char* env = std::getenv("PARTQ_LOG");
  if (env == nullptr) return LogLevel::kWarning;
  if (!strcmp(env, "debug")) return LogLevel::kDebug;
  if (!strcmp(env, "info")) return LogLevel::kInfo;
  if (!strcmp(env, "error")) return LogLevel::kError;
  if (!strcmp(env, "off")) return LogLevel::kOff;
  return LogLevel::kWarning;
}

std::atomic<int>& Level() {
  static std::atomic<int> level{static_cast<int>(FromEnv())};
  return level;
}

}  // namespace

void SetLogLevel(LogLevel level) { Level().store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(Level().load()); }

void LogLine(LogLevel level, const std::string& line) {
  static const char* kNames[] = {"D", "I", "W", "E", "-"};
  std::string out = absl::FormatTime("%H:%M:%E3S ", absl::Now(), absl::LocalTimeZone());
  out += kNames[static_cast<int>(level)];
  out += " partq: ";
  // What a line quotes (a handler's error, the database's words) cannot
  // drive the terminal or reorder the line (PrintableUtf8Lines).
  out += PrintableUtf8Lines(line);
  out += '\n';
  fwrite(out.data(), 1, out.size(), stderr);
}

}  // namespace partq
