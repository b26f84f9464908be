#include "bench/tracking_store.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"

namespace partq::bench {
namespace {

int64_t Seq(const std::string& payload, int64_t capacity) {
  int64_t seq;
  if (!absl::SimpleAtoi(payload, &seq) || seq < 0 || seq >= capacity) return -1;
  return seq;
}

// Owner rows a group read returned: the owners, and in a delta the parts
// whose owner went.
int64_t OwnerRows(const GroupView& view) {
  return static_cast<int64_t>(view.owners.size() + view.unowned.size());
}

class TrackingStore : public Store {
 public:
  TrackingStore(std::unique_ptr<Store> inner, Tracker* tracker)
      : inner_(std::move(inner)), t_(tracker) {}

  absl::Status Migrate() override { return inner_->Migrate(); }
  absl::Status CheckSchema() override { return inner_->CheckSchema(); }
  absl::Status CreateQueue(const QueueConfig& c) override { return inner_->CreateQueue(c); }
  absl::StatusOr<QueueConfig> GetQueue(absl::string_view name) override {
    t_->Call("get_queue");
    return inner_->GetQueue(name);
  }
  absl::StatusOr<std::vector<QueueConfig>> ListQueues() override { return inner_->ListQueues(); }
  absl::StatusOr<DeletedQueue> DeleteQueue(absl::string_view name,
                                           QueueContents contents) override {
    return inner_->DeleteQueue(name, contents);
  }
  absl::Status SetDeadLetterTopic(absl::string_view name,
                                  const std::optional<std::string>& topic) override {
    return inner_->SetDeadLetterTopic(name, topic);
  }
  absl::StatusOr<JoinResult> Join(const JoinRequest& r) override {
    t_->Call("join");
    return inner_->Join(r);
  }
  absl::StatusOr<GroupView> HeartbeatSince(absl::string_view queue, const SessionId& session,
                                           int64_t incarnation, int64_t known,
                                           const FinishCounts& finished) override {
    t_->Call("heartbeat");
    auto view = inner_->HeartbeatSince(queue, session, incarnation, known, finished);
    if (view.ok()) t_->Add("heartbeat_owner_rows", OwnerRows(*view));
    return view;
  }
  absl::StatusOr<GroupView> ReadGroupSince(absl::string_view queue, int64_t known) override {
    t_->Call("read_group");
    auto view = inner_->ReadGroupSince(queue, known);
    if (view.ok()) t_->Add("read_group_owner_rows", OwnerRows(*view));
    return view;
  }
  absl::StatusOr<std::vector<OwnedPart>> AcquireParts(absl::string_view queue,
                                                      const SessionId& session,
                                                      const std::vector<int>& parts) override {
    t_->Call("acquire");
    return inner_->AcquireParts(queue, session, parts);
  }
  absl::Status ReleaseParts(absl::string_view queue, const SessionId& session,
                            const std::vector<OwnedPart>& parts) override {
    t_->Call("release");
    return inner_->ReleaseParts(queue, session, parts);
  }
  absl::Status Leave(absl::string_view queue, const SessionId& session,
                     int64_t incarnation) override {
    t_->Call("leave");
    return inner_->Leave(queue, session, incarnation);
  }
  absl::Status SetPaused(absl::string_view queue, bool paused) override {
    t_->Call("set_paused");
    return inner_->SetPaused(queue, paused);
  }
  absl::Status SetFairBy(absl::string_view queue, FairBy fair_by) override {
    t_->Call("set_fair_by");
    return inner_->SetFairBy(queue, fair_by);
  }
  absl::Status SetKeyConcurrency(absl::string_view queue, int n) override {
    t_->Call("set_key_concurrency");
    return inner_->SetKeyConcurrency(queue, n);
  }
  absl::Status SetMaxPayload(absl::string_view queue, int64_t bytes) override {
    t_->Call("set_max_payload");
    return inner_->SetMaxPayload(queue, bytes);
  }
  absl::Status ReleaseClaims(absl::string_view queue, const SessionId& session,
                             int64_t incarnation) override {
    t_->Call("release_claims");
    return inner_->ReleaseClaims(queue, session, incarnation);
  }
  absl::Status NotifyGroup(absl::string_view queue) override {
    t_->Call("notify_group");
    return inner_->NotifyGroup(queue);
  }
  absl::StatusOr<EnqueueResult> Enqueue(absl::string_view queue, const NewItem& item) override {
    return inner_->Enqueue(queue, item);
  }
  absl::StatusOr<int64_t> EnqueueBatch(absl::string_view queue,
                                       const std::vector<NewItem>& items) override {
    return inner_->EnqueueBatch(queue, items);
  }
  absl::StatusOr<std::vector<Item>> Claim(const ClaimRequest& request) override {
    t_->Call("claim");
    CountParts(request);
    auto r = inner_->Claim(request);
    if (r.ok()) t_->Claimed(*r, absl::Now());
    return r;
  }
  bool Begun() const override { return inner_->Begun(); }
  absl::StatusOr<FinishResult> Finish(const FinishRequest& request,
                                      const FinishBody& body) override {
    t_->Call("finish");
    absl::StatusOr<FinishResult> r;
    if (request.next && t_->counts_claim_parts()) {
      FinishRequest counted = request;
      counted.next = [this, &request]() {
        std::optional<ClaimRequest> claim = request.next();
        if (claim) {
          t_->Call("claim_ahead");
          CountParts(*claim);
        }
        return claim;
      };
      r = inner_->Finish(counted, body);
    } else {
      r = inner_->Finish(request, body);
    }
    if (r.ok()) {
      const absl::Time now = absl::Now();
      t_->Claimed(r->next, now);
      t_->Acked(request, *r, now);
    }
    return r;
  }
  absl::StatusOr<ItemState> GetItemState(absl::string_view queue, int64_t id) override {
    return inner_->GetItemState(queue, id);
  }
  absl::StatusOr<ItemDetail> DescribeItem(absl::string_view queue, int64_t id) override {
    return inner_->DescribeItem(queue, id);
  }
  absl::StatusOr<std::vector<TableVacuum>> VacuumQueueTables() override {
    return inner_->VacuumQueueTables();
  }
  absl::StatusOr<Pruned> Prune(absl::string_view queue, absl::Duration older_than,
                               bool dead) override {
    return inner_->Prune(queue, older_than, dead);
  }
  absl::StatusOr<ItemState> GetItemStateByDedupKey(absl::string_view queue,
                                                   absl::string_view dedup_key) override {
    return inner_->GetItemStateByDedupKey(queue, dedup_key);
  }
  absl::StatusOr<std::vector<CancelOutcome>> CancelItems(absl::string_view queue,
                                                         const std::vector<int64_t>& ids) override {
    return inner_->CancelItems(queue, ids);
  }
  absl::StatusOr<CancelOutcome> CancelByDedupKey(absl::string_view queue,
                                                 absl::string_view dedup_key) override {
    return inner_->CancelByDedupKey(queue, dedup_key);
  }
  absl::StatusOr<QueueStatus> Status(absl::string_view queue) override {
    return inner_->Status(queue);
  }
  absl::StatusOr<QueueOwners> Owners(absl::string_view queue) override {
    return inner_->Owners(queue);
  }
  absl::StatusOr<std::optional<absl::Duration>> NextDue(absl::string_view queue,
                                                    const std::vector<int>& parts) override {
    t_->Call("next_due");
    return inner_->NextDue(queue, parts);
  }
  absl::StatusOr<SnapshotBounds> CurrentSnapshot() override {
    t_->Call("current_snapshot");
    return inner_->CurrentSnapshot();
  }
  absl::StatusOr<std::vector<std::string>> QueuesWithWork(
      const std::vector<std::string>& queues) override {
    t_->Call("queues_with_work");
    return inner_->QueuesWithWork(queues);
  }
  absl::StatusOr<std::unique_ptr<Listener>> Listen(absl::string_view queue) override {
    t_->Call("listen");
    return inner_->Listen(queue);
  }
  absl::StatusOr<std::unique_ptr<Listener>> ListenMany(
      const std::vector<std::string>& queues) override {
    t_->Call("listen");
    return inner_->ListenMany(queues);
  }
  absl::StatusOr<std::unique_ptr<Listener>> ListenHere(absl::string_view queue) override {
    t_->Call("listen");
    return inner_->ListenHere(queue);
  }

 private:
  // Parts listed per claim, how many of them from the head (no cursor), and
  // whether the first one, which every claim reads, is read from the head.
  void CountParts(const ClaimRequest& request) {
    if (!t_->counts_claim_parts()) return;
    for (const ClaimPart& p : request.parts) {
      t_->Call("claim_part");
      if (!p.after) t_->Call("claim_part_head");
    }
    if (!request.parts.empty() && !request.parts[0].after) t_->Call("claim_lead_head");
  }

  std::unique_ptr<Store> inner_;
  Tracker* t_;
};

}  // namespace

Tracker::Tracker(int64_t capacity)
    : capacity_(capacity),
      claimed_us_(new std::atomic<int64_t>[capacity > 0 ? capacity : 1]()),
      acked_us_(new std::atomic<int64_t>[capacity > 0 ? capacity : 1]()) {}

void Tracker::Claimed(const std::vector<Item>& items, absl::Time when) {
  if (capacity_ == 0) return;
  const int64_t us = absl::ToUnixMicros(when);
  for (const Item& i : items) {
    const int64_t seq = Seq(i.payload, capacity_);
    int64_t zero = 0;
    if (seq >= 0) claimed_us_[seq].compare_exchange_strong(zero, us);
  }
}

void Tracker::Acked(const FinishRequest& request, const FinishResult& result, absl::Time when) {
  if (capacity_ > 0 && !result.acked.empty()) {
    const int64_t us = absl::ToUnixMicros(when);
    absl::flat_hash_map<int64_t, const std::string*> payload;
    for (const Item& i : request.items) payload[i.id] = &i.payload;
    for (int64_t id : result.acked) {
      auto it = payload.find(id);
      if (it == payload.end()) continue;
      const int64_t seq = Seq(*it->second, capacity_);
      if (seq >= 0) acked_us_[seq].store(us);
    }
  }
  if (result.acked.empty() && result.dead.empty()) return;
  absl::MutexLock lock(&mu_);
  acked_ += static_cast<int64_t>(result.acked.size() + result.dead.size());
}

void Tracker::Call(const char* what) {
  absl::MutexLock lock(&mu_);
  ++calls_[what];
}

void Tracker::Add(const char* what, int64_t n) {
  absl::MutexLock lock(&mu_);
  calls_[what] += n;
}

bool Tracker::WaitAcked(int64_t n, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto done = [&]() { return acked_.load() >= n; };
  return mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
}

std::map<std::string, int64_t> Tracker::calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

StoreFactory TrackingFactory(StoreFactory inner, Tracker* tracker) {
  return [inner = std::move(inner), tracker]() -> absl::StatusOr<std::unique_ptr<Store>> {
    auto s = inner();
    if (!s.ok()) return s.status();
    return std::unique_ptr<Store>(std::make_unique<TrackingStore>(std::move(*s), tracker));
  };
}

}  // namespace partq::bench
