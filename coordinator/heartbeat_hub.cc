#include "coordinator/heartbeat_hub.h"

#include <utility>

namespace partq {

HeartbeatHub::HeartbeatHub(StoreFactory factory, int members, absl::Duration gather)
    : factory_(std::move(factory)), members_(members), gather_(gather) {}

absl::StatusOr<GroupView> HeartbeatHub::Heartbeat(HeartbeatRequest request) {
  Slot slot{std::move(request), std::nullopt};
  std::vector<Slot*> batch;
  {
    absl::MutexLock lock(&mu_);
    pending_.push_back(&slot);
    if (gathering_) {
      // Another caller leads this round: wait for its answer.
      auto answered = [&slot]() { return slot.answer.has_value(); };
      mu_.Await(absl::Condition(&answered));
      return *std::move(slot.answer);
    }
    gathering_ = true;
    auto all_came = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return static_cast<int>(pending_.size()) >= members_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&all_came), gather_);
    batch.swap(pending_);
    gathering_ = false;
  }
  Send(batch);
  absl::MutexLock lock(&mu_);
  return *std::move(slot.answer);
}

void HeartbeatHub::Send(const std::vector<Slot*>& batch) {
  std::vector<HeartbeatRequest> requests;
  requests.reserve(batch.size());
  for (const Slot* s : batch) requests.push_back(s->request);
  absl::StatusOr<std::vector<GroupView>> views;
  {
    absl::MutexLock lock(&send_mu_);
    if (store_ == nullptr) {
      absl::StatusOr<std::unique_ptr<Store>> s = factory_();
      if (s.ok()) {
        store_ = *std::move(s);
      } else {
        views = s.status();
      }
    }
    if (store_ != nullptr) {
      views = store_->HeartbeatMany(requests);
      if (!views.ok() && absl::IsUnavailable(views.status())) store_.reset();
    }
  }
  absl::MutexLock lock(&mu_);
  ++batches_;
  heartbeats_ += static_cast<int64_t>(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    if (views.ok()) {
      batch[i]->answer = std::move((*views)[i]);
    } else {
      batch[i]->answer = views.status();
    }
  }
}

int64_t HeartbeatHub::batches() const {
  absl::MutexLock lock(&mu_);
  return batches_;
}

int64_t HeartbeatHub::heartbeats() const {
  absl::MutexLock lock(&mu_);
  return heartbeats_;
}

}  // namespace partq
