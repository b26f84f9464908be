// A budget for lines of one kind in the log, so that a flood (every item of
// a queue failing, a child writing gigabytes to stderr) costs a bounded
// number of lines and says how much it left out.
//
// The budget is `max_lines` lines and `max_bytes` bytes per window of
// `interval`; a window starts with the first line offered after the last one
// ended. A line over the budget is dropped and counted; the next line the
// budget admits carries the count of those dropped before it, for the caller
// to log first ("N lines (B bytes) not logged"), and TakeDropped() hands over
// what is left at the end (a child's stderr closed, a worker stopping).
//
// Thread-safe. Time comes from the given Clock.
#ifndef PARTQ_BASE_LOG_LIMITER_H_
#define PARTQ_BASE_LOG_LIMITER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace partq {

class LogLimiter {
 public:
  // What was dropped since the last admitted line.
  struct Dropped {
    int64_t lines = 0;
    int64_t bytes = 0;
    absl::Duration over;  // from the first dropped line to now
    bool any() const { return lines > 0; }
    // "N line(s) (B bytes) not logged over the last D" for a log line (no
    // size when the lines were admitted as 0 bytes).
    std::string Describe() const;
  };
  struct Verdict {
    bool log = false;  // log this line
    Dropped dropped;   // when log: the lines dropped before it
    // When not logged: the first line dropped since the last count was
    // taken, so the caller can see that DroppedDueAt() moved.
    bool first_dropped = false;
  };

  // `clock` (Clock::Real() when null) must outlive the limiter.
  LogLimiter(int64_t max_lines, int64_t max_bytes, absl::Duration interval, Clock* clock = nullptr);

  // Whether a line of `bytes` bytes may be logged now; counts it either way.
  Verdict Admit(size_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // The lines dropped since the last admitted one, and forgets them.
  Dropped TakeDropped() ABSL_LOCKS_EXCLUDED(mu_);
  // When the window with dropped lines ends (InfiniteFuture when none are
  // dropped): a caller that logs their count then, rather than at the next
  // admitted line, does not leave a flood's end unsaid until the next one.
  absl::Time DroppedDueAt() ABSL_LOCKS_EXCLUDED(mu_);
  // TakeDropped() once DroppedDueAt() has passed; nothing before.
  Dropped TakeDroppedIfDue() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Dropped TakeDroppedLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t max_lines_;
  const int64_t max_bytes_;
  const absl::Duration interval_;
  Clock* const clock_;
  absl::Mutex mu_;
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t lines_ ABSL_GUARDED_BY(mu_) = 0;  // admitted in this window
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_lines_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time first_dropped_ ABSL_GUARDED_BY(mu_);
};

}  // namespace partq

#endif  // PARTQ_BASE_LOG_LIMITER_H_
