#include "base/log_limiter.h"

#include "absl/strings/str_cat.h"

namespace partq {

std::string LogLimiter::Dropped::Describe() const {
  // Lines admitted as 0 bytes (a budget of lines only) say no size.
  const std::string size =
      bytes == 0 ? "" : absl::StrCat(" (", bytes, bytes == 1 ? " byte)" : " bytes)");
  return absl::StrCat(lines, lines == 1 ? " line" : " lines", size, " not logged over the last ",
                      absl::FormatDuration(absl::Trunc(over, absl::Milliseconds(1))));
}

LogLimiter::LogLimiter(int64_t max_lines, int64_t max_bytes, absl::Duration interval, Clock* clock)
    : max_lines_(max_lines),
      max_bytes_(max_bytes),
      interval_(interval),
      clock_(clock != nullptr ? clock : Clock::Real()) {}

LogLimiter::Verdict LogLimiter::Admit(size_t bytes) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  if (now >= window_start_ + interval_) {
    window_start_ = now;
    lines_ = 0;
    bytes_ = 0;
  }
  const int64_t n = static_cast<int64_t>(bytes);
  Verdict v;
  // The first line of a window is admitted whatever its size (a line over
  // max_bytes alone would otherwise never be seen, nor its count).
  if (lines_ < max_lines_ && (lines_ == 0 || bytes_ + n <= max_bytes_)) {
    ++lines_;
    bytes_ += n;
    v.log = true;
    v.dropped = TakeDroppedLocked(now);
    return v;
  }
  if (dropped_lines_ == 0) {
    first_dropped_ = now;
    v.first_dropped = true;
  }
  ++dropped_lines_;
  dropped_bytes_ += n;
  return v;
}

LogLimiter::Dropped LogLimiter::TakeDropped() {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  return TakeDroppedLocked(now);
}

absl::Time LogLimiter::DroppedDueAt() {
  absl::MutexLock lock(&mu_);
  return dropped_lines_ > 0 ? window_start_ + interval_ : absl::InfiniteFuture();
}

LogLimiter::Dropped LogLimiter::TakeDroppedIfDue() {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  if (dropped_lines_ == 0 || now < window_start_ + interval_) return Dropped();
  return TakeDroppedLocked(now);
}

LogLimiter::Dropped LogLimiter::TakeDroppedLocked(absl::Time now) {
  Dropped d;
  d.lines = dropped_lines_;
  d.bytes = dropped_bytes_;
  d.over = dropped_lines_ > 0 ? now - first_dropped_ : absl::ZeroDuration();
  dropped_lines_ = 0;
  dropped_bytes_ = 0;
  return d;
}

}  // namespace partq
