#include "store/fault_store.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace partq {
namespace {

// Forwards every call to `inner_` once the injector let it through (leveldb's
// EnvWrapper forwards the same way; the faults are all in FaultInjector).
class FaultStore : public Store {
 public:
  FaultStore(FaultInjector* faults, std::unique_ptr<Store> inner)
      : faults_(faults), inner_(std::move(inner)) {}

  absl::Status Migrate() override {
    return Call("Migrate", [&] { return inner_->Migrate(); });
  }
  absl::Status CheckSchema() override {
    return Call("CheckSchema", [&] { return inner_->CheckSchema(); });
  }
  absl::Status CreateQueue(const QueueConfig& config) override {
    return Call("CreateQueue", [&] { return inner_->CreateQueue(config); });
  }
  absl::StatusOr<QueueConfig> GetQueue(absl::string_view name) override {
    return Call("GetQueue", [&] { return inner_->GetQueue(name); });
  }
  absl::StatusOr<std::vector<QueueConfig>> ListQueues() override {
    return Call("ListQueues", [&] { return inner_->ListQueues(); });
  }
  absl::StatusOr<DeletedQueue> DeleteQueue(absl::string_view name,
                                           QueueContents contents) override {
    return Call("DeleteQueue", [&] { return inner_->DeleteQueue(name, contents); });
  }
  absl::Status SetDeadLetterTopic(absl::string_view queue,
                                  const std::optional<std::string>& topic) override {
    return Call("SetDeadLetterTopic", [&] { return inner_->SetDeadLetterTopic(queue, topic); });
  }
  absl::StatusOr<JoinResult> Join(const JoinRequest& request) override {
    return Call("Join", [&] { return inner_->Join(request); });
  }
  absl::StatusOr<GroupView> HeartbeatSince(absl::string_view queue, const SessionId& session,
                                           int64_t incarnation, int64_t known,
                                           const FinishCounts& finished) override {
    return Whole(Call("Heartbeat", [&] {
      return inner_->HeartbeatSince(queue, session, incarnation, known, finished);
    }));
  }
  absl::StatusOr<GroupView> ReadGroupSince(absl::string_view queue, int64_t known) override {
    return Whole(Call("ReadGroup", [&] { return inner_->ReadGroupSince(queue, known); }));
  }
  absl::StatusOr<std::vector<OwnedPart>> AcquireParts(absl::string_view queue,
                                                      const SessionId& session,
                                                      const std::vector<int>& parts) override {
    return Call("AcquireParts", [&] { return inner_->AcquireParts(queue, session, parts); });
  }
  absl::Status ReleaseParts(absl::string_view queue, const SessionId& session,
                            const std::vector<OwnedPart>& parts) override {
    return Call("ReleaseParts", [&] { return inner_->ReleaseParts(queue, session, parts); });
  }
  absl::Status Leave(absl::string_view queue, const SessionId& session,
                     int64_t incarnation) override {
    return Call("Leave", [&] { return inner_->Leave(queue, session, incarnation); });
  }
  absl::Status SetPaused(absl::string_view queue, bool paused) override {
    return Call("SetPaused", [&] { return inner_->SetPaused(queue, paused); });
  }
  absl::StatusOr<int> GrowParts(absl::string_view queue, int parts) override {
    return Call("GrowParts", [&] { return inner_->GrowParts(queue, parts); });
  }
  absl::Status SetFairBy(absl::string_view queue, FairBy fair_by) override {
    return Call("SetFairBy", [&] { return inner_->SetFairBy(queue, fair_by); });
  }
  absl::Status SetKeyConcurrency(absl::string_view queue, int n) override {
    return Call("SetKeyConcurrency", [&] { return inner_->SetKeyConcurrency(queue, n); });
  }
  absl::Status SetMaxPayload(absl::string_view queue, int64_t bytes) override {
    return Call("SetMaxPayload", [&] { return inner_->SetMaxPayload(queue, bytes); });
  }
  absl::Status ReleaseClaims(absl::string_view queue, const SessionId& session,
                             int64_t incarnation) override {
    return Call("ReleaseClaims",
                [&] { return inner_->ReleaseClaims(queue, session, incarnation); });
  }
  absl::Status NotifyGroup(absl::string_view queue) override {
    return Call("NotifyGroup", [&] { return inner_->NotifyGroup(queue); });
  }
  absl::StatusOr<EnqueueResult> Enqueue(absl::string_view queue, const NewItem& item) override {
    return Call("Enqueue", [&] { return inner_->Enqueue(queue, item); });
  }
  absl::StatusOr<int64_t> EnqueueBatch(absl::string_view queue,
                                       const std::vector<NewItem>& items) override {
    return Call("EnqueueBatch", [&] { return inner_->EnqueueBatch(queue, items); });
  }
  absl::StatusOr<std::vector<Item>> Claim(const ClaimRequest& request) override {
    if (std::any_of(request.parts.begin(), request.parts.end(),
                    [](const ClaimPart& p) { return p.above; })) {
      faults_->Count("ClaimFromAFloor");
    }
    return Call("Claim", [&] { return inner_->Claim(request); });
  }
  bool Begun() const override { return inner_->Begun(); }
  absl::StatusOr<FinishResult> Finish(const FinishRequest& request,
                                      const FinishBody& body) override {
    absl::StatusOr<FinishResult> r = Call("Finish", [&] { return inner_->Finish(request, body); });
    // Finishes that wrote failures (issue 49: not one per failing batch).
    if (r.ok() && (!r->retried.empty() || !r->dead.empty())) faults_->Count("FinishWithFailures");
    return r;
  }
  absl::StatusOr<ItemState> GetItemState(absl::string_view queue, int64_t id) override {
    return Call("GetItemState", [&] { return inner_->GetItemState(queue, id); });
  }
  absl::StatusOr<ItemDetail> DescribeItem(absl::string_view queue, int64_t id) override {
    return Call("DescribeItem", [&] { return inner_->DescribeItem(queue, id); });
  }
  absl::StatusOr<ItemState> GetItemStateByDedupKey(absl::string_view queue,
                                                   absl::string_view dedup_key) override {
    return Call("GetItemStateByDedupKey",
                [&] { return inner_->GetItemStateByDedupKey(queue, dedup_key); });
  }
  absl::StatusOr<QueueStatus> Status(absl::string_view queue) override {
    return Call("Status", [&] { return inner_->Status(queue); });
  }
  absl::StatusOr<QueueOwners> Owners(absl::string_view queue) override {
    return Call("Owners", [&] { return inner_->Owners(queue); });
  }
  absl::StatusOr<std::optional<absl::Duration>> NextDue(absl::string_view queue,
                                                    const std::vector<int>& parts) override {
    return Call("NextDue", [&] { return inner_->NextDue(queue, parts); });
  }
  absl::StatusOr<SnapshotBounds> CurrentSnapshot() override {
    return Call("CurrentSnapshot", [&] { return inner_->CurrentSnapshot(); });
  }
  absl::StatusOr<std::vector<std::string>> QueuesWithWork(
      const std::vector<std::string>& queues) override {
    return Call("QueuesWithWork", [&] { return inner_->QueuesWithWork(queues); });
  }
  absl::StatusOr<std::unique_ptr<Listener>> Listen(absl::string_view queue) override {
    return Call("Listen", [&] { return inner_->Listen(queue); });
  }
  absl::StatusOr<std::unique_ptr<Listener>> ListenMany(
      const std::vector<std::string>& queues) override {
    return Call("Listen", [&] { return inner_->ListenMany(queues); });
  }
  absl::StatusOr<std::vector<CancelOutcome>> CancelItems(absl::string_view queue,
                                                         const std::vector<int64_t>& ids) override {
    return Call("CancelItems", [&] { return inner_->CancelItems(queue, ids); });
  }
  absl::StatusOr<CancelOutcome> CancelByDedupKey(absl::string_view queue,
                                                 absl::string_view dedup_key) override {
    return Call("CancelByDedupKey", [&] { return inner_->CancelByDedupKey(queue, dedup_key); });
  }
  absl::StatusOr<std::vector<DeadItem>> ListDead(absl::string_view queue, int limit) override {
    return Call("ListDead", [&] { return inner_->ListDead(queue, limit); });
  }
  absl::StatusOr<Requeued> RequeueDead(absl::string_view queue,
                                       const std::vector<int64_t>& ids) override {
    return Call("RequeueDead", [&] { return inner_->RequeueDead(queue, ids); });
  }
  absl::Status AddSchedule(const ScheduleSpec& spec) override {
    return Call("AddSchedule", [&] { return inner_->AddSchedule(spec); });
  }
  absl::StatusOr<std::vector<Schedule>> ListSchedules(absl::string_view queue) override {
    return Call("ListSchedules", [&] { return inner_->ListSchedules(queue); });
  }
  absl::Status DeleteSchedule(absl::string_view name) override {
    return Call("DeleteSchedule", [&] { return inner_->DeleteSchedule(name); });
  }
  absl::StatusOr<FiredSchedules> FireSchedules(absl::string_view queue) override {
    return Call("FireSchedules", [&] { return inner_->FireSchedules(queue); });
  }
  absl::StatusOr<DeadDeleted> DeleteDead(absl::string_view queue,
                                         const std::vector<int64_t>& ids) override {
    return Call("DeleteDead", [&] { return inner_->DeleteDead(queue, ids); });
  }
  absl::StatusOr<std::vector<TableVacuum>> VacuumQueueTables() override {
    return Call("VacuumQueueTables", [&] { return inner_->VacuumQueueTables(); });
  }
  absl::StatusOr<Pruned> Prune(absl::string_view queue, absl::Duration older_than,
                               bool dead) override {
    return Call("Prune", [&] { return inner_->Prune(queue, older_than, dead); });
  }

 private:
  // Counts the group views that came back whole (FaultInjector::Calls of
  // "WholeGroupView").
  absl::StatusOr<GroupView> Whole(absl::StatusOr<GroupView> view) {
    if (view.ok() && !view->unchanged && !view->delta) faults_->Count("WholeGroupView");
    return view;
  }

  template <typename F>
  auto Call(const char* method, F call) -> decltype(call()) {
    const absl::Duration hold = faults_->AnswerDelay(method);
    if (absl::Status st = faults_->Enter(method); !st.ok()) return st;
    auto answer = call();
    faults_->HoldAnswer(hold);
    return answer;
  }

  FaultInjector* const faults_;
  const std::unique_ptr<Store> inner_;
};

}  // namespace

std::unique_ptr<Store> FaultInjector::Wrap(std::unique_ptr<Store> store) {
  return std::make_unique<FaultStore>(this, std::move(store));
}

StoreFactory FaultInjector::Wrap(StoreFactory factory) {
  return [this, factory = std::move(factory)]() -> absl::StatusOr<std::unique_ptr<Store>> {
    auto store = factory();
    if (!store.ok()) return store.status();
    return Wrap(std::move(*store));
  };
}

void FaultInjector::FailNext(int n, absl::Status status) {
  absl::MutexLock lock(&mu_);
  fail_next_ = n;
  fail_status_ = std::move(status);
}

void FaultInjector::FailCallsOf(const std::string& method, bool fail) {
  absl::MutexLock lock(&mu_);
  if (fail) {
    failing_.insert(method);
  } else {
    failing_.erase(method);
  }
}

namespace {
// A delay of `method` in `delays`; zero or less removes it.
void SetDelay(std::map<std::string, absl::Duration>& delays, const std::string& method,
              absl::Duration d) {
  if (d > absl::ZeroDuration()) {
    delays[method] = d;
  } else {
    delays.erase(method);
  }
}
}  // namespace

void FaultInjector::SlowCallsOf(const std::string& method, absl::Duration d) {
  absl::MutexLock lock(&mu_);
  SetDelay(slow_, method, d);
}

void FaultInjector::SlowAnswersOf(const std::string& method, absl::Duration d) {
  absl::MutexLock lock(&mu_);
  SetDelay(slow_answers_, method, d);
}

int64_t FaultInjector::Calls(const std::string& method) const {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(method);
  return it == calls_.end() ? 0 : it->second;
}

void FaultInjector::Count(const char* what) {
  absl::MutexLock lock(&mu_);
  ++calls_[what];
}

absl::Status FaultInjector::Enter(const char* method) {
  absl::Duration slow;
  {
    absl::MutexLock lock(&mu_);
    ++calls_[method];
    if (auto it = slow_.find(method); it != slow_.end()) slow = it->second;
    // A call that is not slow is counted and decided at one instant: a test
    // that sees it counted and then lifts a failure knows it failed.
    if (slow <= absl::ZeroDuration()) return FailureLocked(method);
  }
  // Not under mu_: other stores' calls go on meanwhile, as other connections'
  // would.
  clock_->SleepFor(slow);
  absl::MutexLock lock(&mu_);
  return FailureLocked(method);
}

absl::Duration FaultInjector::AnswerDelay(const char* method) const {
  absl::MutexLock lock(&mu_);
  auto it = slow_answers_.find(method);
  return it == slow_answers_.end() ? absl::ZeroDuration() : it->second;
}

void FaultInjector::HoldAnswer(absl::Duration d) {
  if (d > absl::ZeroDuration()) clock_->SleepFor(d);
}

absl::Status FaultInjector::FailureLocked(const char* method) {
  if (failing_.count(method) > 0) {
    return absl::UnavailableError(absl::StrCat("injected failure of ", method));
  }
  if (fail_next_ > 0) {
    --fail_next_;
    return fail_status_;
  }
  return absl::OkStatus();
}

}  // namespace partq
