// Waiting for a condition that background threads or processes make true.
// Tests wait on progress, never for a fixed time (architecture.md, Conventions); the timeout
// only bounds a failing test.
#ifndef PARTQ_TESTS_TESTING_WAIT_H_
#define PARTQ_TESTS_TESTING_WAIT_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace partq::testing {

// Polls `condition` every `every` until it holds (true) or `timeout` passes
// (then one last check decides).
template <typename F>
bool WaitUntil(F condition, absl::Duration timeout = absl::Seconds(60),
               absl::Duration every = absl::Milliseconds(5)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (condition()) return true;
    absl::SleepFor(every);
  }
  return condition();
}

}  // namespace partq::testing

#endif  // PARTQ_TESTS_TESTING_WAIT_H_
