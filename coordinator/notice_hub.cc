#include "coordinator/notice_hub.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace partq {

// What the hub's thread and its listeners share.
struct NoticeHub::State {
  struct Inbox {
    std::string queue;
    int64_t generation = 0;  // of the connection it was made on
    std::vector<Notice> notices;
  };
  absl::Mutex mu;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  bool connected ABSL_GUARDED_BY(mu) = false;
  // Moves with every connection made and every one lost: an inbox of an
  // older generation is broken.
  int64_t generation ABSL_GUARDED_BY(mu) = 0;
  int64_t connections ABSL_GUARDED_BY(mu) = 0;
  std::set<Inbox*> inboxes ABSL_GUARDED_BY(mu);
};

class NoticeHub::HubListener final : public Listener {
 public:
  HubListener(std::shared_ptr<State> state, std::string queue, int64_t generation)
      : state_(std::move(state)) {
    inbox_.queue = std::move(queue);
    inbox_.generation = generation;
    absl::MutexLock lock(&state_->mu);
    state_->inboxes.insert(&inbox_);
  }
  ~HubListener() override {
    absl::MutexLock lock(&state_->mu);
    state_->inboxes.erase(&inbox_);
  }

  absl::StatusOr<std::vector<Notice>> Wait(absl::Duration timeout) override {
    State& s = *state_;
    absl::MutexLock lock(&s.mu);
    auto ready = [this, &s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
      return s.stopping || s.generation != inbox_.generation || !inbox_.notices.empty();
    };
    s.mu.AwaitWithTimeout(absl::Condition(&ready), timeout);
    if (s.stopping || s.generation != inbox_.generation) {
      return absl::UnavailableError("the process's listener connection was lost");
    }
    return std::exchange(inbox_.notices, {});
  }

 private:
  const std::shared_ptr<State> state_;
  State::Inbox inbox_;  // guarded by state_->mu
};

NoticeHub::NoticeHub(StoreFactory factory, std::vector<std::string> queues,
                     absl::Duration retry_backoff)
    : factory_(std::move(factory)),
      queues_(std::move(queues)),
      retry_backoff_(retry_backoff),
      state_(std::make_shared<State>()) {}

NoticeHub::~NoticeHub() {
  {
    absl::MutexLock lock(&state_->mu);
    state_->stopping = true;
  }
  absl::MutexLock lock(&start_mu_);
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<std::unique_ptr<Listener>> NoticeHub::Listen(const std::string& queue) {
  if (std::find(queues_.begin(), queues_.end(), queue) == queues_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue \"", queue, "\" is not one the process listens for"));
  }
  {
    absl::MutexLock lock(&start_mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  }
  int64_t generation;
  {
    absl::MutexLock lock(&state_->mu);
    if (!state_->connected) {
      return absl::UnavailableError("the process's listener connection is not open yet");
    }
    generation = state_->generation;
  }
  return std::unique_ptr<Listener>(std::make_unique<HubListener>(state_, queue, generation));
}

int64_t NoticeHub::connections() const {
  absl::MutexLock lock(&state_->mu);
  return state_->connections;
}

void NoticeHub::Run() {
  std::unique_ptr<Listener> listener;
  absl::Status last_error;
  for (;;) {
    {
      absl::MutexLock lock(&state_->mu);
      if (state_->stopping) return;
    }
    if (listener == nullptr) {
      absl::StatusOr<std::unique_ptr<Store>> store = factory_();
      absl::StatusOr<std::unique_ptr<Listener>> l =
          store.ok() ? (*store)->ListenMany(queues_) : store.status();
      if (!l.ok()) {
        if (l.status() != last_error) PARTQ_LOG(Warning) << "listening: " << l.status();
        last_error = l.status();
        absl::MutexLock lock(&state_->mu);
        state_->mu.AwaitWithTimeout(absl::Condition(&state_->stopping), retry_backoff_);
        continue;
      }
      last_error = absl::OkStatus();
      listener = *std::move(l);
      absl::MutexLock lock(&state_->mu);
      state_->connected = true;
      ++state_->generation;
      ++state_->connections;
    }
    // Bounded: it only bounds how late the hub's end is seen.
    absl::StatusOr<std::vector<Notice>> notices = listener->Wait(absl::Milliseconds(250));
    absl::MutexLock lock(&state_->mu);
    if (!notices.ok()) {
      listener.reset();
      state_->connected = false;
      ++state_->generation;  // every listener's next Wait fails
      continue;
    }
    for (Notice& n : *notices) {
      for (State::Inbox* inbox : state_->inboxes) {
        if (inbox->queue == n.queue) inbox->notices.push_back(n);
      }
    }
  }
}

}  // namespace partq
