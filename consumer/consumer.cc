#include "consumer/consumer.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "consumer/metrics.h"
#include "coordinator/queue_collector.h"

namespace partq {
namespace {

// Returned by the body to make Finish roll back so the batch can run again
// with one savepoint per item (or a lone item's failure be recorded).
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
  session_->SetItemsCallback([this](int part) {
    absl::MutexLock lock(&mu_);
    NoticeLocked(part);
  });
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
  auto done = (*store)->Finish(
      setup, [this](Tx& tx, absl::Span<const Item>) -> absl::StatusOr<std::vector<Outcome>> {
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

void Consumer::MarkLocked(PartState& st) {
  st.rescan = true;
  st.hungry = true;
  st.noticed = notice_gen_;
}

void Consumer::NoticeLocked(int part) {
  ++notice_gen_;
  for (auto& [p, st] : parts_) {
    if (part < 0 || p == part) MarkLocked(st);
  }
}

void Consumer::PollLocked() {
  ++notice_gen_;
  for (auto& [p, st] : parts_) {
    if (!st.hungry) MarkLocked(st);
  }
}

bool Consumer::WantClaimLocked() const {
  return std::any_of(parts_.begin(), parts_.end(), [](const auto& p) { return p.second.hungry; });
}

void Consumer::DropQueuedLocked(const std::vector<int>& parts) {
  const std::set<int> gone(parts.begin(), parts.end());
  for (auto& b : queue_) {
    b.items.erase(std::remove_if(b.items.begin(), b.items.end(),
                                 [&](const Item& i) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                   if (gone.count(i.part) == 0) return false;
                                   // A dropped suspect never reaches a worker,
                                   // which is what would clear the flag.
                                   if (i.id == suspect_id_) suspect_id_ = 0;
                                   in_flight_.erase(i.id);
                                   return true;
                                 }),
                  b.items.end());
  }
  queue_.erase(
      std::remove_if(queue_.begin(), queue_.end(), [](const Batch& b) { return b.items.empty(); }),
      queue_.end());
}

// Stop claiming in the parts, drop their unstarted items (they stay ready in
// the database for the next owner) and wait, up to the drain timeout, for
// started ones to finish.
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
  for (const auto& p : parts) {
    PartState st;
    st.epoch = p.epoch;
    parts_[p.part] = st;
  }
  suspects_pending_ = true;  // a dead owner's items were marked when we took them
}

void Consumer::OnLost(const std::vector<OwnedPart>& parts) {
  std::vector<int> nums;
  for (const auto& p : parts) nums.push_back(p.part);
  absl::MutexLock lock(&mu_);
  for (int p : nums) parts_.erase(p);
  DropQueuedLocked(nums);
}

std::optional<ClaimRequest> Consumer::MakeClaimLocked(const SessionId& session, int batches,
                                                      const std::vector<Item>& finishing) {
  const absl::Time now = absl::Now();
  // One suspect in flight at a time; the ack of the one in flight may claim
  // the next.
  const bool slot_free =
      suspect_id_ == 0 || std::any_of(finishing.begin(), finishing.end(),
                                      [&](const Item& i) { return i.id == suspect_id_; });
  std::vector<int> hungry;
  for (auto& [part, st] : parts_) {
    if (batches <= 0 || !st.hungry) continue;
    if (config_.ordered || !st.cursor || now - st.last_rescan >= options_.rescan_interval) {
      st.rescan = true;
    }
    hungry.push_back(part);
  }
  if (hungry.empty() && !(slot_free && suspects_pending_)) return std::nullopt;
  const int limit = options_.batch * std::max(1, batches);
  // Parts take turns: each claim starts one part further on and reads parts
  // only until it has `limit` items, so a batch mostly comes from one part
  // (its ack then locks one session_parts row and rewrites one claim record,
  // and its rows sit together). A part is read from its cursor, or from its
  // head when due.
  if (!hungry.empty()) {
    std::rotate(hungry.begin(), hungry.begin() + rotation_++ % hungry.size(), hungry.end());
  }
  ClaimRequest req;
  req.queue = options_.queue;
  req.session = session;
  req.limit = limit;
  req.ordered = config_.ordered;
  for (int part : hungry) {
    const PartState& st = parts_.at(part);
    ClaimPart cp;
    cp.part = part;
    cp.epoch = st.epoch;
    if (!st.rescan) cp.after = st.cursor;
    cp.limit = limit;
    req.parts.push_back(cp);
    // A backlog: this part fills a batch by itself. A one-part claim is
    // also the one the store can pipeline with the ack (PgStore, Finish).
    if (req.parts.size() == 1 && st.full && limit == options_.batch) break;
  }
  // Suspects appear when parts are assigned (a dead owner's claims are
  // marked then), so the probe runs while the last one found some, and with
  // every read from a part's head as a safety net.
  req.include_suspect =
      slot_free && (suspects_pending_ || std::any_of(req.parts.begin(), req.parts.end(),
                                                     [](const ClaimPart& p) { return !p.after; }));
  absl::flat_hash_set<int64_t> done;
  done.reserve(finishing.size());
  for (const Item& item : finishing) done.insert(item.id);
  for (const auto& [id, part] : in_flight_) {
    if (done.count(id) == 0) req.in_flight.emplace_back(part, id);
  }
  claim_gen_ = notice_gen_;
  return req;
}

void Consumer::AcceptClaimLocked(const ClaimRequest& req, std::vector<Item> items,
                                 absl::Time started, Batch* keep) {
  // Per part: items taken (not counting a suspect) and the last key.
  std::map<int, std::pair<int, ItemKey>> got;
  int taken_normal = 0;
  for (const Item& item : items) {
    if (item.suspect) continue;
    auto& g = got[item.part];
    const ItemKey key{item.priority, item.id};
    g.second = g.first == 0 ? key : std::max(g.second, key);
    ++g.first;
    ++taken_normal;
  }
  // The claim read its parts in order until it had req.limit items: if it
  // got fewer, it read every part to its end; if not, every part before the
  // last one it took from, while the last may have more and the ones after
  // it were not read at all.
  const bool full = taken_normal >= req.limit;
  int last = -1;
  for (size_t i = 0; i < req.parts.size(); ++i) {
    if (got.count(req.parts[i].part)) last = static_cast<int>(i);
  }
  for (size_t i = 0; i < req.parts.size(); ++i) {
    const ClaimPart& cp = req.parts[i];
    if (full && static_cast<int>(i) > last) break;  // not read
    auto it = parts_.find(cp.part);
    if (it == parts_.end() || it->second.epoch != cp.epoch) continue;  // revoked meanwhile
    PartState& st = it->second;
    auto g = got.find(cp.part);
    const int n = g == got.end() ? 0 : g->second.first;
    const bool to_the_end = !full || static_cast<int>(i) < last;
    const std::optional<ItemKey> before = st.cursor;
    if (n > 0) st.cursor = before ? std::max(*before, g->second.second) : g->second.second;
    st.full = !to_the_end && n >= std::min(cp.limit, req.limit);
    if (!cp.after) {
      st.last_rescan = started;
      // Stopped early, before where the cursor was: more may wait between.
      st.rescan = !to_the_end && n > 0 && before.has_value() && g->second.second < *before;
    }
    st.hungry = !to_the_end || st.rescan;
    if (st.noticed > claim_gen_) {  // noticed while this claim was under way
      st.rescan = true;
      st.hungry = true;
    }
  }
  if (req.include_suspect) {
    suspects_pending_ =
        std::any_of(items.begin(), items.end(), [](const Item& i) { return i.suspect; });
  }
  int64_t taken = 0;
  std::optional<Batch> suspect;
  std::vector<Batch> normal;
  for (auto& item : items) {
    auto it = parts_.find(item.part);
    if (it == parts_.end() || it->second.epoch != item.claim_epoch) continue;  // revoked meanwhile
    in_flight_[item.id] = item.part;
    ++taken;
    if (item.suspect) {
      suspect_id_ = item.id;
      suspect.emplace();
      suspect->isolate = true;
      suspect->items.push_back(std::move(item));
      continue;
    }
    if (normal.empty() || static_cast<int>(normal.back().items.size()) >= options_.batch) {
      normal.emplace_back();
    }
    normal.back().items.push_back(std::move(item));
  }
  // The claimer's own next batch first (it began its transaction already),
  // then a suspect, alone, at the front of the queue (abandoned items are
  // old ones, and the next suspect is claimed only when this one is
  // finished), then the rest in order.
  auto next = normal.begin();
  if (keep != nullptr) {
    if (suspect) {
      *keep = *std::move(suspect);
      suspect.reset();
    } else if (next != normal.end()) {
      *keep = std::move(*next++);
    }
    for (const auto& i : keep->items) ++busy_parts_[i.part];
  }
  if (suspect) queue_.push_front(*std::move(suspect));
  for (; next != normal.end(); ++next) queue_.push_back(std::move(*next));
  stats_.claimed += taken;
  if (metrics_ != nullptr) metrics_->Claimed(taken);
}

void Consumer::ClaimLoop() {
  std::unique_ptr<Store> store;
  for (;;) {
    const SessionId session = session_->id();
    std::optional<ClaimRequest> req;
    absl::Time started;
    {
      absl::MutexLock lock(&mu_);
      // Claims here feed workers that wait with nothing queued; busy workers
      // claim ahead themselves as they finish.
      auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !claiming_ && static_cast<int>(queue_.size()) < idle_workers_;
      };
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || (room() && WantClaimLocked());
      };
      // A poll every poll_interval, for whatever comes without a notice (a
      // retry or a delayed item coming due, or anything at all without
      // LISTEN) in the parts that have gone quiet; the busy ones read their
      // heads every rescan_interval anyway. Due by the clock, not by a quiet
      // interval: notices for one part must not postpone another's poll.
      mu_.AwaitWithTimeout(
          absl::Condition(&ready),
          std::max(absl::ZeroDuration(), last_poll_ + options_.poll_interval - absl::Now()));
      if (absl::Now() >= last_poll_ + options_.poll_interval) {
        PollLocked();
        last_poll_ = absl::Now();
      }
      if (stopping_) return;
      if (!room()) continue;
      req = MakeClaimLocked(session, idle_workers_ - static_cast<int>(queue_.size()), {});
      if (!req) continue;
      claiming_ = true;
      started = absl::Now();
    }
    if (store == nullptr) {
      auto s = factory_();
      if (s.ok()) store = std::move(*s);
    }
    absl::StatusOr<std::vector<Item>> items =
        store ? store->Claim(*req) : absl::UnavailableError("no connection");
    const absl::Time claim_end = absl::Now();
    absl::MutexLock lock(&mu_);
    claiming_ = false;
    if (!items.ok()) {
      PARTQ_LOG(Warning) << "claim: " << items.status();
      store.reset();
      mu_.Unlock();
      absl::SleepFor(options_.retry_backoff);
      mu_.Lock();
      continue;
    }
    if (metrics_ != nullptr) metrics_->ClaimQuery(claim_end - started, *items, claim_end);
    AcceptClaimLocked(*req, *std::move(items), started);
  }
}

void Consumer::WorkLoop(int index) {
  std::unique_ptr<Store> store;
  // A batch this worker claimed ahead in its last ack, whose transaction
  // that ack's COMMIT already began on `store` (FinishRequest::begin_next):
  // it goes next, even if empty, so the transaction ends.
  std::optional<Batch> kept;
  for (;;) {
    Batch batch;
    if (kept) {
      batch = *std::move(kept);
      kept.reset();
    } else {
      absl::MutexLock lock(&mu_);
      ++idle_workers_;
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      --idle_workers_;
      if (queue_.empty()) return;  // stopping
      batch = std::move(queue_.front());
      queue_.pop_front();
      for (const auto& i : batch.items) ++busy_parts_[i.part];
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
      if (store != nullptr && Process(*store, batch, &kept)) break;
      store.reset();
      bool give_up;
      {
        absl::MutexLock lock(&mu_);
        // Parts revoked or lost meanwhile: the new owner will take the items.
        give_up = stopping_ ||
                  std::none_of(batch.items.begin(), batch.items.end(),
                               [this](const Item& i) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                 auto it = parts_.find(i.part);
                                 return it != parts_.end() && it->second.epoch == i.claim_epoch;
                               });
      }
      if (give_up) break;
      absl::SleepFor(options_.retry_backoff);
    }
    absl::MutexLock lock(&mu_);
    ReleaseLocked(batch.items);
  }
}

void Consumer::ReleaseLocked(const std::vector<Item>& items) {
  for (const auto& i : items) {
    if (--busy_parts_[i.part] == 0) busy_parts_.erase(i.part);
    if (i.id == suspect_id_) suspect_id_ = 0;
    in_flight_.erase(i.id);
    // Ordered: the key's next item may be claimed now, and it sorts before
    // the cursor. No notice says so; read the part's head at once.
    if (config_.ordered) NoticeLocked(i.part);
  }
}

void Consumer::CountLocked(const FinishResult& r, const std::vector<Item>& items, absl::Time start,
                           absl::Time end) {
  stats_.acked += r.acked.size();
  stats_.retried += r.retried.size();
  stats_.dead += r.dead.size();
  stats_.fenced += r.fenced.size();
  if (metrics_ != nullptr) metrics_->Finished(r, items, start, end);
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

void Consumer::NoteRerun(size_t runs, size_t failed) {
  // Counts that decay by item, not by call (a group round is many items, a
  // run alone one): the last hundred or so reruns weigh.
  const double decay = std::pow(0.99, static_cast<double>(runs));
  absl::MutexLock lock(&mu_);
  rerun_runs_ = rerun_runs_ * decay + static_cast<double>(runs);
  rerun_failed_ = rerun_failed_ * decay + static_cast<double>(failed);
}

double Consumer::RerunFailureRate() const {
  absl::MutexLock lock(&mu_);
  return rerun_runs_ > 0 ? rerun_failed_ / rerun_runs_ : 0;
}

bool Consumer::GroupRoundPays(double rerun_failure_rate, size_t items, absl::Duration item_cost,
                              absl::Duration savepoint_cost) {
  const double g = static_cast<double>(items);
  const double item = absl::ToDoubleMicroseconds(item_cost);
  const double sp = absl::ToDoubleMicroseconds(savepoint_cost);
  const double success = std::pow(1 - rerun_failure_rate, g);
  // The round costs g items and a savepoint; if it succeeds it saves running
  // the g items alone, each with its savepoint. (If it fails, they run alone
  // anyway.) With reruns that never fail it pays for any g >= 2.
  return g * item + sp < success * g * (item + sp);
}

absl::StatusOr<std::vector<Outcome>> Consumer::RunHandlers(Tx& tx, absl::Span<const Item> items,
                                                           Batch& batch, bool* need_isolation) {
  const bool isolate = batch.isolate;
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
  // Runs item i alone (its own deadline); a handler over time has failed.
  auto run_alone = [&](size_t i) {
    const absl::Time t0 = absl::Now();
    calls[i].deadline = t0 + options_.handler_timeout;
    absl::Status st = CallHandle(*handler_, calls[i]);
    if (metrics_ != nullptr) metrics_->HandlerCall(absl::Now() - t0);
    if (st.ok() && absl::Now() > calls[i].deadline) {
      st = absl::DeadlineExceededError(
          absl::StrCat("handler timed out after ", absl::FormatDuration(absl::Now() - t0)));
    }
    return st;
  };
  auto ack = [&](size_t i) {
    outcomes[i].id = items[i].id;
    outcomes[i].part = items[i].part;
    outcomes[i].kind = Outcome::Kind::kAck;
    outcomes[i].result = std::move(calls[i].result);
  };
  // A lone item runs without a savepoint (two round trips fewer). If it
  // fails, the transaction rolls back, its writes with it, and the rerun
  // records the failure without running the handler again: its failure is
  // its own, unlike an item of a batch whose transaction another item broke.
  if (items.size() == 1 && batch.items.size() == 1 && run.size() == 1) {
    const size_t i = run_index[0];
    if (batch.failed_alone && batch.failed_alone->first == items[i].id) {
      outcomes[i] = Failure(items[i], batch.failed_alone->second);
      return outcomes;
    }
    if (!isolate) {
      const absl::Status st = run_alone(i);
      if (st.ok()) {
        ack(i);
        return outcomes;
      }
      batch.failed_alone.emplace(items[i].id, std::string(st.message()));
      *need_isolation = true;
      return IsolateSignal();
    }
  }
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
    batch.item_cost = (absl::Now() - t0) / static_cast<int64_t>(run.size());
    const bool told = statuses.size() == run.size() && absl::Now() <= deadline;
    bool all_ok = told;
    for (const auto& st : statuses) all_ok = all_ok && st.ok();
    if (!all_ok) {
      batch.blamed.clear();
      for (size_t k = 0; told && k < run.size(); ++k) {
        if (!statuses[k].ok()) batch.blamed.push_back(items[run_index[k]].id);
      }
      *need_isolation = true;
      return IsolateSignal();
    }
    for (size_t i : run_index) ack(i);
    return outcomes;
  }
  // Isolating. The items the batch attempt did not blame may run again
  // together under a savepoint: with a bad item among cheap ones (a batch
  // INSERT), a batch then costs a savepoint or two instead of two round trips
  // per item. A group that fails again sheds the items it blames now and may
  // try again (a flaky downstream fails others each time), up to
  // kGroupRounds. Each round runs only if it is expected to cost less than
  // running its items alone (GroupRoundPays): a failed round runs every item
  // of it once more, which for slow handlers, or when reruns fail often,
  // costs more than the round trips it could save. Blamed items, and
  // whatever remains, run alone after the group.
  constexpr int kGroupRounds = 8;
  // Savepoints whose writes this transaction keeps until its commit (a group
  // that succeeded, items alone that succeeded). PostgreSQL keeps the ids of
  // 64 subtransactions per session in shared memory; past that, every other
  // session's visibility checks of rows this transaction wrote go through
  // pg_subtrans until it ends. So after kMaxKeptSavepoints (room left for
  // the handler's own) the items still to run alone are left (kLeave) for
  // another transaction, which Process runs right after this one commits.
  constexpr int kMaxKeptSavepoints = 48;
  int kept_savepoints = 0;
  batch.left.clear();
  std::vector<size_t> alone;  // positions in `run`
  std::vector<size_t> group;
  std::vector<bool> unblamed(run.size(), false);
  {
    const absl::flat_hash_set<int64_t> blamed(batch.blamed.begin(), batch.blamed.end());
    for (size_t k = 0; k < run.size(); ++k) {
      unblamed[k] = !blamed.empty() && blamed.count(items[run_index[k]].id) == 0;
      (unblamed[k] ? group : alone).push_back(k);
    }
  }
  absl::Duration item_cost = batch.item_cost;
  for (int round = 0; group.size() >= 2 && round < kGroupRounds; ++round) {
    const absl::Time s0 = absl::Now();
    if (absl::Status sp = tx.Savepoint("partq_group"); !sp.ok()) return sp;
    const absl::Duration savepoint_cost = 2 * (absl::Now() - s0);  // with its RELEASE
    if (!GroupRoundPays(RerunFailureRate(), group.size(), item_cost, savepoint_cost)) break;
    std::vector<HandlerCall*> calls_of_group;
    const absl::Time t0 = absl::Now();
    for (size_t k : group) {
      run[k]->deadline = t0 + options_.handler_timeout;
      calls_of_group.push_back(run[k]);
    }
    std::vector<absl::Status> statuses;
    bool told = true;
    try {
      handler_->HandleBatch(absl::MakeConstSpan(calls_of_group), &statuses);
    } catch (...) {
      told = false;
    }
    const absl::Time t1 = absl::Now();
    if (metrics_ != nullptr) metrics_->HandlerCall(t1 - t0);
    item_cost = (t1 - t0) / static_cast<int64_t>(group.size());
    told = told && statuses.size() == group.size() && t1 <= t0 + options_.handler_timeout;
    const bool ok = told && std::all_of(statuses.begin(), statuses.end(),
                                        [](const absl::Status& st) { return st.ok(); });
    if (ok) {
      if (absl::Status r = tx.ReleaseSavepoint("partq_group"); !r.ok()) return r;
      NoteRerun(group.size(), 0);
      ++kept_savepoints;
      for (size_t k : group) ack(run_index[k]);
      group.clear();
      break;
    }
    if (absl::Status r = tx.RollbackToSavepoint("partq_group"); !r.ok()) return r;
    for (size_t k : group) calls[run_index[k]].result.reset();
    if (!told) break;  // it cannot say which: all of them alone
    std::vector<size_t> still;
    for (size_t j = 0; j < group.size(); ++j) {
      (statuses[j].ok() ? still : alone).push_back(group[j]);
    }
    NoteRerun(group.size(), group.size() - still.size());
    group = std::move(still);
  }
  alone.insert(alone.end(), group.begin(), group.end());
  std::sort(alone.begin(), alone.end());
  // Each item alone runs under the savepoint partq_item, and one round trip
  // between two items moves it on: after a success, "RELEASE SAVEPOINT;
  // SAVEPOINT" (the item's writes stay, the next item gets a savepoint of
  // its own; one is open at a time); after a failure, the ROLLBACK TO that
  // undid its writes leaves the savepoint in place, clean. The last one is
  // left to the commit.
  bool open = false;   // partq_item is established
  bool holds = false;  // and holds an acked item's writes
  for (size_t k : alone) {
    const size_t i = run_index[k];
    if (kept_savepoints >= kMaxKeptSavepoints) {
      outcomes[i].id = items[i].id;
      outcomes[i].part = items[i].part;
      outcomes[i].kind = Outcome::Kind::kLeave;
      batch.left.push_back(items[i].id);
      continue;
    }
    if (!open || holds) {
      absl::Status sp = open ? tx.RenewSavepoint("partq_item") : tx.Savepoint("partq_item");
      if (!sp.ok()) return sp;
      open = true;
      holds = false;
    }
    const absl::Status st = run_alone(i);
    if (unblamed[k]) NoteRerun(1, st.ok() ? 0 : 1);
    if (st.ok()) {
      holds = true;
      ++kept_savepoints;
      ack(i);
    } else {
      if (absl::Status r = tx.RollbackToSavepoint("partq_item"); !r.ok()) return r;
      outcomes[i] = Failure(items[i], std::string(st.message()));
    }
  }
  return outcomes;
}

namespace {

// The fence of a Finish of `items`: each part at the epoch they were claimed.
std::vector<OwnedPart> FenceOf(const std::vector<Item>& items) {
  std::map<int, Epoch> fence;
  for (const auto& i : items) fence[i.part] = i.claim_epoch;
  std::vector<OwnedPart> parts;
  for (const auto& [part, epoch] : fence) parts.push_back({part, epoch});
  return parts;
}

}  // namespace

bool Consumer::Process(Store& store, Batch& batch, std::optional<Batch>* kept) {
  FinishRequest req;
  req.queue = options_.queue;
  req.begin_next = true;  // the first batch claimed ahead is this worker's next
  req.session = session_->id();
  req.max_attempts = config_.max_attempts;
  req.items = batch.items;
  req.parts = FenceOf(batch.items);
  // Claim ahead in this ack, if the store asks (after the handler ran) and
  // then no claim is under way and the claimed batches do not cover the idle
  // workers and this one. A second attempt of the same Finish gets the same
  // claim.
  std::optional<ClaimRequest> ahead;
  absl::Time claim_started;
  // The batch whose handlers the current Finish runs: `batch`, or what an
  // isolating run left for another transaction (Batch::left).
  Batch* current = &batch;
  req.next = [&]() -> std::optional<ClaimRequest> {
    // Only the transaction that finishes the batch's last items claims.
    if (!current->left.empty()) return std::nullopt;
    absl::MutexLock lock(&mu_);
    if (ahead) return ahead;
    const int short_by = idle_workers_ + 1 - static_cast<int>(queue_.size());
    // The ack of a suspect looks for the next one even when the queue is full.
    const bool next_suspect = suspect_id_ != 0 && batch.items.size() == 1 &&
                              batch.items[0].id == suspect_id_ && suspects_pending_;
    if (claiming_ || stopping_ || ((short_by <= 0 || !WantClaimLocked()) && !next_suspect)) {
      return std::nullopt;
    }
    ahead = MakeClaimLocked(req.session, WantClaimLocked() ? short_by : 0, batch.items);
    if (ahead) {
      claiming_ = true;
      claim_started = absl::Now();
    }
    return ahead;
  };

  const absl::Time t0 = absl::Now();
  bool need_isolation = false;
  auto body = [&](Tx& tx, absl::Span<const Item> owned) {
    return RunHandlers(tx, owned, batch, &need_isolation);
  };
  absl::StatusOr<FinishResult> r = store.Finish(req, body);
  if (!r.ok() && need_isolation && !batch.isolate) {
    batch.isolate = true;
    need_isolation = false;
    r = store.Finish(req, body);
  }
  // An isolating run that left items: they go in transactions of their own,
  // one after another (each may leave some again), as the same batch.
  Batch rest;
  while (r.ok() && !current->left.empty()) {
    const absl::flat_hash_set<int64_t> left(current->left.begin(), current->left.end());
    Batch next;
    for (const Item& i : current->items) {
      if (left.count(i.id)) next.items.push_back(i);
    }
    next.isolate = true;
    next.blamed = batch.blamed;
    next.item_cost = batch.item_cost;
    rest = std::move(next);
    current = &rest;
    FinishRequest sub = req;
    sub.items = rest.items;
    sub.parts = FenceOf(rest.items);
    absl::StatusOr<FinishResult> more =
        store.Finish(sub, [&](Tx& tx, absl::Span<const Item> owned) {
          return RunHandlers(tx, owned, rest, &need_isolation);
        });
    if (!more.ok()) {
      // The earlier transactions committed: count what they finished, and
      // leave the retry only the rest. Retrying the whole batch ran the
      // committed items' handlers again, for the store to report them fenced.
      std::vector<Item> done;
      for (Item& i : batch.items) {
        if (!left.count(i.id)) done.push_back(std::move(i));
      }
      batch = std::move(rest);
      batch.left.clear();  // of the rolled-back transaction
      absl::MutexLock lock(&mu_);
      CountLocked(*r, done, t0, absl::Now());
      ReleaseLocked(done);
      r = more.status();
      break;
    }
    for (auto [from, to] : {std::pair{&more->acked, &r->acked},
                            {&more->retried, &r->retried},
                            {&more->dead, &r->dead},
                            {&more->fenced, &r->fenced}}) {
      to->insert(to->end(), from->begin(), from->end());
    }
    r->next = std::move(more->next);
    r->next_begun = more->next_begun;
  }
  const absl::Time t1 = absl::Now();
  absl::MutexLock lock(&mu_);
  if (ahead) {
    claiming_ = false;
    if (r.ok()) {
      if (metrics_ != nullptr) metrics_->Waited(r->next, t1);
      if (r->next_begun) kept->emplace();
      AcceptClaimLocked(*ahead, std::move(r->next), claim_started,
                        r->next_begun ? &**kept : nullptr);
    }
  }
  if (!r.ok()) {
    PARTQ_LOG(Warning) << "finishing " << batch.items.size() << " items: " << r.status();
    ++stats_.finish_errors;
    if (metrics_ != nullptr) metrics_->FinishError();
    return false;
  }
  CountLocked(*r, batch.items, t0, t1);
  return true;
}

}  // namespace partq
