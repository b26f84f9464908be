// The lifecycle every partq service keeps — Session, Consumer,
// QueueCollector, BridgeIngest, BridgePublish — after River's
// startstop.Service, so that a program (or a test) can stop whatever it holds
// without knowing how far it got:
//
//   Start()  runs once. A second Start, or one after Stop, fails with
//            FailedPrecondition and changes nothing. A Start that fails
//            leaves the service as it found it (not running; Start may be
//            tried again).
//   Stop()   is safe before Start (the service is then stopped and never
//            starts), twice, and from several threads at once: one caller
//            does the stopping, the others return once it is done. A Stop
//            while a Start is under way waits for the Start to end, then
//            stops what it started.
//   ~T()     Stops.
//
// StartStop is the state those rules need, for a service to hold and
// consult at the top and bottom of its Start and Stop:
//
//   absl::Status Foo::Start() {
//     if (absl::Status st = lifecycle_.BeginStart("foo"); !st.ok()) return st;
//     absl::Status st = StartThreads();
//     lifecycle_.EndStart(st.ok());
//     return st;
//   }
//   void Foo::Stop() {
//     if (!lifecycle_.BeginStop()) return;
//     StopThreads();
//     lifecycle_.EndStop();
//   }
#ifndef PARTQ_BASE_SERVICE_H_
#define PARTQ_BASE_SERVICE_H_

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace partq {

class StartStop {
 public:
  enum class State { kNew, kStarting, kRunning, kStopping, kStopped };

  StartStop() = default;
  StartStop(const StartStop&) = delete;
  StartStop& operator=(const StartStop&) = delete;

  // At the top of Start(). OK: the caller starts the service, then calls
  // EndStart. FailedPrecondition, naming `service`, when it is starting or
  // running already, or has been stopped.
  absl::Status BeginStart(absl::string_view service) ABSL_LOCKS_EXCLUDED(mu_);
  // At the end of a Start that BeginStart let through: `started` (running)
  // or not (new again).
  void EndStart(bool started) ABSL_LOCKS_EXCLUDED(mu_);

  // At the top of Stop(). true: the service is running and this caller
  // stops it, then calls EndStop. false: there is nothing to stop (never
  // started: it is stopped from now on; or already stopped), after waiting
  // out a Start or a Stop under way in another thread.
  bool BeginStop() ABSL_LOCKS_EXCLUDED(mu_);
  void EndStop() ABSL_LOCKS_EXCLUDED(mu_);

  State state() const ABSL_LOCKS_EXCLUDED(mu_);
  bool running() const { return state() == State::kRunning; }

 private:
  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kNew;
};

}  // namespace partq

#endif  // PARTQ_BASE_SERVICE_H_
