// Minimal leveled logging to stderr (abseil 20220623 has no logging library).
// Thread-safe: each line is written with one fwrite.
#ifndef PARTQ_BASE_LOG_H_
#define PARTQ_BASE_LOG_H_

#include <sstream>
#include <string>

namespace partq {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kOff = 4 };

// Lines below this level are dropped. Default kWarning, or $PARTQ_LOG
// (debug|info|warning|error|off).
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
void LogLine(LogLevel level, const std::string& line);

namespace internal {
class LogMessage {
 public:
  explicit LogMessage(LogLevel level) : level_(level) {}
  ~LogMessage() { LogLine(level_, stream_.str()); }
  std::ostringstream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};
}  // namespace internal

}  // namespace partq

// PARTQ_LOG(Info) << "..."; the stream is not evaluated below the level.
#define PARTQ_LOG(level)                                                                          \
  for (bool partq_log_on_ = ::partq::LogLevel::k##level >= ::partq::GetLogLevel(); partq_log_on_; \
       partq_log_on_ = false)                                                                     \
  ::partq::internal::LogMessage(::partq::LogLevel::k##level).stream()

#endif  // PARTQ_BASE_LOG_H_
