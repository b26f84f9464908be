// Faults for tests, between any Store and its caller (architecture.md, Conventions): the way
// leveldb's FaultInjectionTestEnv wraps an Env, a FaultInjector wraps stores
// (or a StoreFactory, so every connection a component makes is wrapped) and
// decides, before each call reaches the store, whether it fails, how long it
// takes, and counts it; and after, how long its answer takes to come back.
// The wrapped store is untouched: faults compose with any store (MemStore in
// unit tests, PgStore too).
//
//   ManualClock clock;
//   MemDatabase db(&clock);
//   FaultInjector faults(&clock);
//   Session s(faults.Wrap(db.Factory()), options, &listener);
//   faults.FailCallsOf("ReleaseParts");  // the database refuses releases
//
// A method is named as in store.h ("Heartbeat", "ReleaseParts", ...). Every
// Store method goes through the injector, Listen included; the Listener it
// returns and the Tx a Finish body gets are the wrapped store's own.
// ListenHere is not passed on (a wrapped store answers Unimplemented), so a
// session on a wrapped store listens on a connection of its own, and the
// injector's call counts stay what they were.
//
// Thread-safe: the injector's settings may change while wrapped stores are in
// use on other threads. The injector must outlive the stores it wrapped.
#ifndef PARTQ_STORE_FAULT_STORE_H_
#define PARTQ_STORE_FAULT_STORE_H_

#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "store/store.h"

namespace partq {

class FaultInjector {
 public:
  // Slow calls wait on `clock`, which must outlive the injector.
  explicit FaultInjector(Clock* clock = Clock::Real()) : clock_(clock) {}
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  // `store` with every call going through this injector first.
  std::unique_ptr<Store> Wrap(std::unique_ptr<Store> store);
  // A factory whose stores are wrapped; `factory`'s own errors pass through.
  StoreFactory Wrap(StoreFactory factory);

  // The next `n` calls (of any method, on any wrapped store) fail with
  // `status`, as after a dropped connection.
  void FailNext(int n, absl::Status status = absl::UnavailableError("injected failure"));
  // Calls of `method` fail with Unavailable until FailCallsOf(method, false).
  void FailCallsOf(const std::string& method, bool fail = true);
  // Calls of `method` take `d` longer (on the clock) before they reach the
  // store, as a query that scans a big table holds its connection. Zero: no
  // longer slow.
  void SlowCallsOf(const std::string& method, absl::Duration d);
  // Calls of `method` reach the store at once and their answer comes `d`
  // later (on the clock), as a reply held up on its way back: the database
  // has done the work, the caller does not know yet. Zero: no longer slow.
  void SlowAnswersOf(const std::string& method, absl::Duration d);
  // Calls of `method` so far, failed ones included (for cost assertions).
  // A call that is not slow is counted together with its failure, so once
  // Calls shows it, lifting FailCallsOf no longer lets it through.
  // Also "WholeGroupView": heartbeats and group reads that returned members
  // and owners (GroupView::unchanged false); "FinishWithFailures": Finishes
  // that committed a retry or a dead item; "ClaimFromAFloor": Claims that read
  // a part from a poll-only consumer's floor (ClaimPart::above).
  int64_t Calls(const std::string& method) const;
  // Counts `what` as Calls reports it (the wrapped stores' results).
  void Count(const char* what);

  // What a wrapped store does before each call: count it, make it slow, and
  // return the injected failure, if any (then the store is not called).
  absl::Status Enter(const char* method);
  // How long the answer of a call of `method` starting now is held back
  // (SlowAnswersOf), and the holding, on the clock, after the store answered.
  // A wrapped store asks before Enter counts the call, so a test that sees
  // the call counted may change the setting without touching that call.
  absl::Duration AnswerDelay(const char* method) const;
  void HoldAnswer(absl::Duration d);

 private:
  // The injected failure of a call of `method` now, if any.
  absl::Status FailureLocked(const char* method) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Clock* const clock_;
  mutable absl::Mutex mu_;
  int fail_next_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status fail_status_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> failing_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Duration> slow_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Duration> slow_answers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace partq

#endif  // PARTQ_STORE_FAULT_STORE_H_
