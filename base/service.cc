#include "base/service.h"

#include "absl/strings/str_cat.h"

namespace partq {

absl::Status StartStop::BeginStart(absl::string_view service) {
  absl::MutexLock lock(&mu_);
  switch (state_) {
    case State::kNew:
      state_ = State::kStarting;
      return absl::OkStatus();
    case State::kStarting:
    case State::kRunning:
      return absl::FailedPreconditionError(absl::StrCat(service, " already started"));
    case State::kStopping:
    case State::kStopped:
      break;
  }
  // A stopped service has let go of what it held; starting it again would
  // need all of it afresh, which is what a new object is for.
  return absl::FailedPreconditionError(absl::StrCat(service, " was stopped; make a new one"));
}

void StartStop::EndStart(bool started) {
  absl::MutexLock lock(&mu_);
  state_ = started ? State::kRunning : State::kNew;
}

bool StartStop::BeginStop() {
  absl::MutexLock lock(&mu_);
  // A Start under way is waited out, so that what it started is stopped; a
  // Stop under way, so that no caller returns before the service has stopped.
  auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state_ != State::kStarting && state_ != State::kStopping;
  };
  mu_.Await(absl::Condition(&settled));
  if (state_ == State::kRunning) {
    state_ = State::kStopping;
    return true;
  }
  state_ = State::kStopped;
  return false;
}

void StartStop::EndStop() {
  absl::MutexLock lock(&mu_);
  state_ = State::kStopped;
}

StartStop::State StartStop::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

}  // namespace partq
