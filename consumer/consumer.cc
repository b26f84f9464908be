#include "consumer/consumer.h"

#include <algorithm>
#include <set>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "consumer/metrics.h"
#include "coordinator/log.h"
#include "coordinator/queue_collector.h"

namespace partq {
namespace {

// Returned by the body to make Finish roll back so the batch can run again
// with one savepoint per item.
absl::Status IsolateSignal() { return absl::AbortedError("partq: isolating a failed item"); }

}  // namespace

Consumer::Consumer(StoreFactory factory, ConsumerOptions options, Handler* handler,
                   ConsumerMetrics* metrics)
    : factory_(std::move(factory)),
      options_(std::move(options)),
      handler_(handler),
      metrics_(metrics) {
  SessionOptions so;
  so.queue = options_.queue;
  so.instance_id = options_.instance_id;
  so.poll_only = options_.poll_only;
  so.heartbeat_interval = options_.heartbeat_interval;
  so.retry_backoff = options_.retry_backoff;
  if (metrics_ != nullptr) so.metrics = &metrics_->session();
  session_ = std::make_unique<Session>(factory_, so, static_cast<PartListener*>(this));
  session_->SetItemsCallback([this](int) { Wake(); });
  if (metrics_ != nullptr) {
    collector_ = std::make_unique<QueueCollector>(
        factory_, options_.queue, [this] { return session_->EpochOf(0).has_value(); },
        metrics_->registry(), options_.status_interval);
  }
}

Consumer::~Consumer() { Stop(); }

absl::Status Consumer::Start() {
  if (options_.concurrency < 1 || options_.concurrency > 1024) {
    return absl::InvalidArgumentError("concurrency must be between 1 and 1024");
  }
  if (options_.batch < 1 || options_.batch > 10000) {
    return absl::InvalidArgumentError("batch must be between 1 and 10000");
  }
  // Setup runs before joining so a broken handler (say, a table it cannot
  // create) fails here, not item by item.
  auto store = factory_();
  if (!store.ok()) return store.status();
  auto config = (*store)->GetQueue(options_.queue);
  if (!config.ok()) return config.status();
  config_ = *config;
  FinishRequest setup;
  setup.queue = options_.queue;
  auto done = (*store)->Finish(setup, [this](Tx& tx, absl::Span<const Item>)
                                          -> absl::StatusOr<std::vector<Outcome>> {
    absl::Status st = handler_->Setup(tx);
    if (!st.ok()) return st;
    return std::vector<Outcome>{};
  });
  if (!done.ok()) return done.status();
  store->reset();

  if (absl::Status st = session_->Start(); !st.ok()) return st;
  {
    absl::MutexLock lock(&mu_);
    started_ = true;
  }
  claimer_ = std::thread([this] { ClaimLoop(); });
  for (int i = 0; i < options_.concurrency; ++i) {
    workers_.emplace_back([this, i] { WorkLoop(i); });
  }
  if (metrics_ != nullptr) metrics_->SetConcurrency(options_.concurrency);
  if (collector_ != nullptr) collector_->Start();
  return absl::OkStatus();
}

void Consumer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_) return;
  }
  if (collector_ != nullptr) collector_->Stop();
  // Revokes every part (OnRevoke drains), then leaves the group.
  session_->Stop();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    started_ = false;
  }
  if (claimer_.joinable()) claimer_.join();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  workers_.clear();
}

void Consumer::Abandon() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_) return;
    stopping_ = true;
    started_ = false;
    queue_.clear();
  }
  if (collector_ != nullptr) collector_->Stop();
  session_->Abandon();
  if (claimer_.joinable()) claimer_.join();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  workers_.clear();
}

ConsumerStats Consumer::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

int64_t Consumer::in_flight() const {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (const auto& b : queue_) n += b.items.size();
  for (const auto& [part, count] : busy_parts_) n += count;
  return n;
}

void Consumer::Wake() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

void Consumer::DropQueuedLocked(const std::vector<int>& parts) {
  const std::set<int> gone(parts.begin(), parts.end());
  for (auto& b : queue_) {
    b.items.erase(std::remove_if(b.items.begin(), b.items.end(),
                                 [&](const Item& i) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                   if (gone.count(i.part) == 0) return false;
                                   // A dropped suspect never reaches a worker,
                                   // which is what would clear the flag.
                                   if (i.suspect) suspect_in_flight_ = false;
                                   return true;
                                 }),
                  b.items.end());
  }
  queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                              [](const Batch& b) { return b.items.empty(); }),
               queue_.end());
}

// Stop claiming in the parts, drop their unstarted items (the release refunds
// those claims) and wait, up to the drain timeout, for started ones to finish.
void Consumer::OnRevoke(const std::vector<OwnedPart>& parts) {
  std::vector<int> nums;
  for (const auto& p : parts) nums.push_back(p.part);
  absl::MutexLock lock(&mu_);
  for (int p : nums) parts_.erase(p);
  DropQueuedLocked(nums);
  auto drained = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (claiming_) return false;
    for (int p : nums) {
      auto it = busy_parts_.find(p);
      if (it != busy_parts_.end() && it->second > 0) return false;
    }
    return true;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&drained), options_.drain_timeout)) {
    PARTQ_LOG(Warning) << "drain timeout: releasing parts with items still in flight (their "
                          "acks will be fenced)";
  }
  DropQueuedLocked(nums);  // a claim that was under way may have queued more
}

void Consumer::OnAssign(const std::vector<OwnedPart>& parts) {
  absl::MutexLock lock(&mu_);
  for (const auto& p : parts) parts_[p.part] = p.epoch;
  ++assigned_gen_;
  wake_ = true;
}

void Consumer::OnLost(const std::vector<OwnedPart>& parts) {
  std::vector<int> nums;
  for (const auto& p : parts) nums.push_back(p.part);
  absl::MutexLock lock(&mu_);
  for (int p : nums) parts_.erase(p);
  DropQueuedLocked(nums);
}

void Consumer::ClaimLoop() {
  std::unique_ptr<Store> store;
  for (;;) {
    ClaimRequest req;
    int64_t probe_gen = 0;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        if (stopping_) return true;
        // Keep one batch prefetched beyond the workers that are idle.
        return wake_ && !parts_.empty() &&
               static_cast<int>(queue_.size()) <= std::max(0, idle_workers_ - 1);
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), options_.poll_interval);
      if (stopping_) return;
      // A poll (timeout) claims too, if there is room.
      if (parts_.empty() || static_cast<int>(queue_.size()) > std::max(0, idle_workers_ - 1)) {
        continue;
      }
      wake_ = false;
      req.queue = options_.queue;
      req.limit = options_.batch;
      req.ordered = config_.ordered;
      const absl::Time now = absl::Now();
      req.include_suspect =
          !suspect_in_flight_ &&
          (clean_gen_ < assigned_gen_ || now - last_probe_ >= options_.suspect_probe_interval);
      if (req.include_suspect) last_probe_ = now;
      probe_gen = assigned_gen_;
      for (const auto& [part, epoch] : parts_) req.parts.push_back({part, epoch});
      claiming_ = true;
    }
    if (store == nullptr) {
      auto s = factory_();
      if (s.ok()) store = std::move(*s);
    }
    const absl::Time claim_start = absl::Now();
    absl::StatusOr<std::vector<Item>> items =
        store ? store->Claim(req) : absl::UnavailableError("no connection");
    const absl::Time claim_end = absl::Now();
    absl::MutexLock lock(&mu_);
    claiming_ = false;
    if (!items.ok()) {
      PARTQ_LOG(Warning) << "claim: " << items.status();
      store.reset();
      wake_ = true;
      mu_.Unlock();
      absl::SleepFor(options_.retry_backoff);
      mu_.Lock();
      continue;
    }
    stats_.claimed += items->size();
    if (metrics_ != nullptr) {
      metrics_->Claimed(items->size());
      metrics_->ClaimQuery(claim_end - claim_start, *items, claim_end);
    }
    // A probe that found nothing clears the parts assigned before it was
    // issued; one that found a suspect may have left more (one per claim).
    if (req.include_suspect &&
        std::none_of(items->begin(), items->end(), [](const Item& i) { return i.suspect; })) {
      clean_gen_ = std::max(clean_gen_, probe_gen);
    }
    Batch normal;
    for (auto& item : *items) {
      auto it = parts_.find(item.part);
      if (it == parts_.end() || it->second != item.claim_epoch) continue;  // revoked meanwhile
      if (item.suspect) {
        suspect_in_flight_ = true;
        Batch alone;
        alone.isolate = true;
        alone.items.push_back(std::move(item));
        queue_.push_back(std::move(alone));
      } else {
        normal.items.push_back(std::move(item));
      }
    }
    if (!normal.items.empty()) queue_.push_back(std::move(normal));
    // A full batch means more may be ready: claim again as soon as there is room.
    if (static_cast<int>(items->size()) >= req.limit) wake_ = true;
  }
}

void Consumer::WorkLoop(int index) {
  std::unique_ptr<Store> store;
  for (;;) {
    Batch batch;
    {
      absl::MutexLock lock(&mu_);
      ++idle_workers_;
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      --idle_workers_;
      if (queue_.empty()) return;  // stopping
      batch = std::move(queue_.front());
      queue_.pop_front();
      for (const auto& i : batch.items) ++busy_parts_[i.part];
      wake_ = true;  // room for the claimer to prefetch
    }
    for (;;) {
      if (store == nullptr) {
        auto s = factory_();
        if (s.ok()) {
          store = std::move(*s);
        } else {
          PARTQ_LOG(Warning) << "worker " << index << ": " << s.status();
        }
      }
      if (store != nullptr && Process(*store, batch)) break;
      store.reset();
      bool give_up;
      {
        absl::MutexLock lock(&mu_);
        // Parts revoked or lost meanwhile: the new owner will take the items.
        give_up = stopping_ || std::none_of(batch.items.begin(), batch.items.end(),
                                            [this](const Item& i) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                              auto it = parts_.find(i.part);
                                              return it != parts_.end() &&
                                                     it->second == i.claim_epoch;
                                            });
      }
      if (give_up) break;
      absl::SleepFor(options_.retry_backoff);
    }
    absl::MutexLock lock(&mu_);
    for (const auto& i : batch.items) {
      if (--busy_parts_[i.part] == 0) busy_parts_.erase(i.part);
      if (i.suspect) suspect_in_flight_ = false;
    }
    wake_ = true;
  }
}

Outcome Consumer::Failure(const Item& item, const std::string& error) {
  Outcome o;
  o.id = item.id;
  o.part = item.part;
  o.error = error;
  if (item.attempts >= config_.max_attempts) {
    o.kind = Outcome::Kind::kDead;
  } else {
    o.kind = Outcome::Kind::kRetry;
    thread_local absl::BitGen gen;
    o.retry_delay = RetryDelay(options_.backoff, item.attempts, gen);
  }
  return o;
}

absl::StatusOr<std::vector<Outcome>> Consumer::RunHandlers(Tx& tx, absl::Span<const Item> items,
                                                           bool isolate, bool* need_isolation) {
  std::vector<Outcome> outcomes(items.size());
  std::vector<HandlerCall> calls(items.size());
  std::vector<HandlerCall*> run;
  std::vector<size_t> run_index;
  const SessionId session = session_->id();
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options_.handler_timeout;
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& item = items[i];
    if (item.attempts > config_.max_attempts) {
      // Claimed more often than allowed without ever finishing: every worker
      // that took it died or lost its session. Do not run it again.
      Outcome& o = outcomes[i];
      o.id = item.id;
      o.part = item.part;
      o.kind = Outcome::Kind::kDead;
      o.error = absl::StrCat("gave up after ", item.attempts - 1,
                             " attempts: the worker processing it died or lost its session "
                             "each time (crash loop)");
      continue;
    }
    calls[i].item = &item;
    calls[i].tx = &tx;
    calls[i].session = &session;
    calls[i].deadline = deadline;
    run.push_back(&calls[i]);
    run_index.push_back(i);
  }
  auto ack = [&](size_t i) {
    outcomes[i].id = items[i].id;
    outcomes[i].part = items[i].part;
    outcomes[i].kind = Outcome::Kind::kAck;
    outcomes[i].result = std::move(calls[i].result);
  };
  if (!isolate) {
    std::vector<absl::Status> statuses;
    const absl::Time t0 = absl::Now();
    try {
      handler_->HandleBatch(absl::MakeConstSpan(run), &statuses);
    } catch (...) {
      *need_isolation = true;
      return IsolateSignal();
    }
    if (metrics_ != nullptr) metrics_->HandlerCall(absl::Now() - t0);
    bool all_ok = statuses.size() == run.size() && absl::Now() <= deadline;
    for (const auto& st : statuses) all_ok = all_ok && st.ok();
    if (!all_ok) {
      *need_isolation = true;
      return IsolateSignal();
    }
    for (size_t i : run_index) ack(i);
    return outcomes;
  }
  for (size_t k = 0; k < run.size(); ++k) {
    const size_t i = run_index[k];
    auto sp = tx.Exec("SAVEPOINT partq_item");
    const bool savepoints = sp.ok();
    if (!sp.ok() && !absl::IsUnimplemented(sp.status())) return sp.status();
    const absl::Time t0 = absl::Now();
    calls[i].deadline = t0 + options_.handler_timeout;
    absl::Status st = CallHandle(*handler_, calls[i]);
    if (metrics_ != nullptr) metrics_->HandlerCall(absl::Now() - t0);
    if (st.ok() && absl::Now() > calls[i].deadline) {
      st = absl::DeadlineExceededError(
          absl::StrCat("handler timed out after ", absl::FormatDuration(absl::Now() - t0)));
    }
    if (st.ok()) {
      if (savepoints) {
        if (auto r = tx.Exec("RELEASE SAVEPOINT partq_item"); !r.ok()) return r.status();
      }
      ack(i);
    } else {
      if (savepoints) {
        if (auto r = tx.Exec("ROLLBACK TO SAVEPOINT partq_item"); !r.ok()) return r.status();
      }
      outcomes[i] = Failure(items[i], std::string(st.message()));
    }
  }
  return outcomes;
}

bool Consumer::Process(Store& store, Batch& batch) {
  FinishRequest req;
  req.queue = options_.queue;
  req.session = session_->id();
  req.max_attempts = config_.max_attempts;
  req.items = batch.items;
  std::map<int, Epoch> fence;
  for (const auto& i : batch.items) fence[i.part] = i.claim_epoch;
  for (const auto& [part, epoch] : fence) req.parts.push_back({part, epoch});

  const absl::Time t0 = absl::Now();
  bool need_isolation = false;
  // A lone item gets its savepoint at once: rerunning it would only repeat
  // the handler.
  if (batch.items.size() == 1) batch.isolate = true;
  auto body = [&](Tx& tx, absl::Span<const Item> owned) {
    return RunHandlers(tx, owned, batch.isolate, &need_isolation);
  };
  absl::StatusOr<FinishResult> r = store.Finish(req, body);
  if (!r.ok() && need_isolation && !batch.isolate) {
    batch.isolate = true;
    need_isolation = false;
    r = store.Finish(req, body);
  }
  if (!r.ok()) {
    PARTQ_LOG(Warning) << "finishing " << batch.items.size() << " items: " << r.status();
    absl::MutexLock lock(&mu_);
    ++stats_.finish_errors;
    if (metrics_ != nullptr) metrics_->FinishError();
    return false;
  }
  const absl::Time t1 = absl::Now();
  absl::MutexLock lock(&mu_);
  stats_.acked += r->acked.size();
  stats_.retried += r->retried.size();
  stats_.dead += r->dead.size();
  stats_.fenced += r->fenced.size();
  if (metrics_ != nullptr) {
    metrics_->Finished(*r, batch.items, t0, t1);
  }
  return true;
}

}  // namespace partq
