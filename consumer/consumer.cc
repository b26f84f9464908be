#include "consumer/consumer.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/utf8.h"
#include "consumer/metrics.h"
#include "consumer/schedule_firer.h"
#include "consumer/table_keeper.h"
#include "coordinator/queue_collector.h"
#include "store/store_pool.h"

namespace partq {

Consumer::Consumer(StoreFactory factory, ConsumerOptions options, Handler* handler,
                   ConsumerMetrics* metrics)
    : factory_(std::move(factory)),
      options_(std::move(options)),
      clock_(options_.clock),
      handler_(handler),
      metrics_(metrics) {
  SessionOptions so;
  so.queue = options_.queue;
  so.instance_id = options_.instance_id;
  so.leave_on_stop = options_.leave_on_stop;
  so.poll_only = options_.poll_only;
  so.heartbeat_interval = options_.heartbeat_interval;
  so.hub = options_.heartbeat_hub.get();
  so.notices = options_.notice_hub.get();
  so.retry_backoff = options_.retry_backoff;
  so.clock = clock_;
  if (metrics_ != nullptr) so.metrics = &metrics_->session();
  session_ = std::make_unique<Session>(factory_, so, static_cast<PartListener*>(this));
  session_->SetItemsCallback([this](int part, std::optional<ItemKey> from) {
    absl::MutexLock lock(&mu_);
    scheduler_.Notice(part, from);
    noticed_ = true;
  });
  session_->SetPausedCallback([this](bool paused) {
    absl::MutexLock lock(&mu_);
    scheduler_.SetPaused(paused);
  });
  session_->SetRateCallback([this](std::optional<double> per_second, int parts) {
    absl::MutexLock lock(&mu_);
    scheduler_.SetRate(per_second, parts);
  });
  // The consumer's own counts, read once a heartbeat (nothing is added to
  // the finish path for the queue's throughput).
  session_->SetFinishedCallback([this] {
    absl::MutexLock lock(&mu_);
    return FinishCounts{stats_.acked, stats_.retried, stats_.dead};
  });
  // The owner of part 0 collects the queue's depth, fires its schedules and
  // vacuums its tables: the three jobs take turns on one connection.
  std::shared_ptr<SharedStore> part0 = options_.part0_store;
  if (part0 == nullptr) part0 = std::make_shared<SharedStore>(factory_);
  auto owns_part0 = [this] { return session_->EpochOf(0).has_value(); };
  // With notices the part-0 jobs of a quiet queue wait for one (below).
  const absl::Duration quiet = options_.poll_only ? absl::ZeroDuration()
                               : options_.swept_poll_interval > absl::ZeroDuration()
                                   ? options_.swept_poll_interval
                                   : options_.quiet_poll_interval;
  if (metrics_ != nullptr) {
    collector_ = std::make_unique<QueueCollector>(part0, options_.queue, owns_part0,
                                                  metrics_->registry(), options_.status_interval,
                                                  clock_);
    collector_->SetQuietInterval(quiet);
  }
  ScheduleFirerOptions fo;
  fo.queue = options_.queue;
  fo.poll_interval = options_.schedule_poll_interval;
  fo.quiet_poll_interval = quiet;
  fo.retry_backoff = std::max(options_.retry_backoff, absl::Milliseconds(100));
  fo.clock = clock_;
  firer_ = std::make_unique<ScheduleFirer>(part0, fo, owns_part0, metrics_);
  TableKeeperOptions ko;
  ko.queue = options_.queue;
  ko.interval = options_.vacuum_interval;
  ko.clock = clock_;
  keeper_ = std::make_unique<TableKeeper>(
      std::move(part0), ko, options_.keeps_tables ? options_.keeps_tables : owns_part0, metrics_);
  session_->SetNoticeCallback([this](Notice::Kind kind) {
    if (collector_ != nullptr) collector_->Poke();
    if (kind == Notice::Kind::kSchedules || kind == Notice::Kind::kGroup) firer_->Poke();
  });
}

Consumer::~Consumer() { Stop(); }

absl::Status Consumer::Start() {
  if (absl::Status st = lifecycle_.BeginStart("consumer"); !st.ok()) return st;
  absl::Status st = StartThreads();
  lifecycle_.EndStart(st.ok());
  return st;
}

absl::Status Consumer::StartThreads() {
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

  runner_ =
      std::make_unique<BatchRunner>(handler_, FailurePolicy(options_.backoff, config_.max_attempts),
                                    options_.handler_timeout, clock_, metrics_);
  {
    // Before joining: a static re-join assigns the parts it kept at once.
    absl::MutexLock lock(&mu_);
    ClaimSchedulerOptions so;
    so.queue = options_.queue;
    so.batch = options_.batch;
    so.max_claim_bytes = options_.claim_bytes;
    so.notices = !options_.poll_only;
    so.rescan_interval = options_.rescan_interval;
    so.ordered = config_.ordered;
    so.fair = config_.fair_by == FairBy::kKey;
    so.key_concurrency = config_.key_concurrency;
    scheduler_ = ClaimScheduler(so);
    // An ordered or key-bound queue holds items back behind older ones of
    // their key, which may finish in another part (after a grow) with no
    // notice here: it polls as before, never idle.
    holds_back_ = config_.ordered || config_.key_concurrency > 0;
  }
  if (absl::Status st = session_->Start(); !st.ok()) return st;
  claimer_ = std::thread([this] { ClaimLoop(); });
  for (int i = 0; i < options_.concurrency; ++i) {
    workers_.emplace_back([this, i] { WorkLoop(i); });
  }
  if (metrics_ != nullptr) metrics_->SetConcurrency(options_.concurrency);
  if (collector_ != nullptr) collector_->Start();
  firer_->Start();
  keeper_->Start();
  return absl::OkStatus();
}

void Consumer::Stop() {
  if (!lifecycle_.BeginStop()) return;
  // The drain's end: handler calls that start from now on end by it, none
  // starts after it, and OnRevoke gives up those still running at it, so
  // the stop ends within drain_timeout whatever the handler does (a child
  // that keeps dying is not restarted past it, nor its items run alone).
  if (runner_ != nullptr) runner_->StopBy(clock_->Now() + options_.drain_timeout);
  // Revokes every part (OnRevoke drains), then leaves the group. Before the
  // part-0 jobs stop: stopping them waits for the query they are in, and the
  // queue's status reads the whole queue (6 s with a 500k backlog under load
  // in `partq demo`), which would hold the parts that long. Once part 0 is
  // gone they only wait for that query and do nothing more.
  session_->Stop();
  if (collector_ != nullptr) collector_->Stop();
  firer_->Stop();
  keeper_->Stop();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (claimer_.joinable()) claimer_.join();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  workers_.clear();
  if (const LogLimiter::Dropped d = failure_log_.TakeDropped(); d.any()) {
    PARTQ_LOG(Warning) << "item failures: " << d.Describe()
                       << " (partq_item_failures_total counts every one)";
  }
  lifecycle_.EndStop();
}

void Consumer::Abandon() {
  if (!lifecycle_.BeginStop()) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    scheduler_.ClearQueued();
  }
  if (collector_ != nullptr) collector_->Stop();
  firer_->Stop();
  keeper_->Stop();
  session_->Abandon();
  if (claimer_.joinable()) claimer_.join();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  workers_.clear();
  lifecycle_.EndStop();
}

ConsumerStats Consumer::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

int64_t Consumer::in_flight() const {
  absl::MutexLock lock(&mu_);
  return scheduler_.held();
}

// Stop claiming in the parts, drop their unstarted items (they stay ready in
// the database for the next owner) and wait, up to the drain timeout, for
// started ones to finish.
void Consumer::OnRevoke(const std::vector<OwnedPart>& parts) {
  std::vector<int> nums;
  for (const auto& p : parts) nums.push_back(p.part);
  absl::MutexLock lock(&mu_);
  scheduler_.Remove(nums);
  // Still ours until released: deferred failures there are written first.
  for (const auto& p : parts) revoking_[p.part] = p.epoch;
  flush_now_ = !deferred_.empty();
  auto drained = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return scheduler_.Drained(nums); };
  if (!clock_->AwaitWithTimeout(mu_, absl::Condition(&drained), options_.drain_timeout)) {
    if (runner_ != nullptr && runner_->Stopping()) {
      // Stopping: the handler calls still running are given up; their
      // items go back to the queue unfinished (BatchRunner::CancelCalls).
      PARTQ_LOG(Warning) << "drain timeout (--drain-timeout " << options_.drain_timeout
                         << "): giving up the handler calls still running; their items go "
                            "back to the queue";
      runner_->CancelCalls();
    } else {
      PARTQ_LOG(Warning) << "drain timeout: giving parts up with items still in flight (their "
                            "acks will be fenced once the parts have a new owner or epoch)";
    }
  }
  for (int p : nums) revoking_.erase(p);
  DropDeferredLocked(nums);     // past the drain timeout: not written
  scheduler_.DropQueued(nums);  // a claim that was under way may have queued more
}

void Consumer::Poke() {
  {
    absl::MutexLock lock(&mu_);
    scheduler_.Poll();
  }
  if (firer_ != nullptr) firer_->Poke();
  if (collector_ != nullptr) collector_->Poke();
}

void Consumer::OnAssign(const std::vector<OwnedPart>& parts) {
  {
    absl::MutexLock lock(&mu_);
    scheduler_.Assign(parts);
  }
  // Part 0 makes this worker the firer: what came due meanwhile fires now.
  for (const OwnedPart& p : parts) {
    if (p.part == 0) firer_->Poke();
  }
}

void Consumer::OnLost(const std::vector<OwnedPart>& parts) {
  std::vector<int> nums;
  for (const auto& p : parts) nums.push_back(p.part);
  absl::MutexLock lock(&mu_);
  scheduler_.Remove(nums);
  DropDeferredLocked(nums);
}

bool Consumer::RoomLocked() const {
  // Claims here feed workers that wait with nothing queued; busy workers
  // claim ahead themselves as they finish.
  return !scheduler_.claiming() && static_cast<int>(scheduler_.queued()) < idle_workers_;
}

std::string Consumer::AwaitClaimLocked(absl::Time next_poll) {
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || failures_dropped_ || (RoomLocked() && scheduler_.WantClaim(clock_->Now()));
  };
  // A poll every poll_interval, for whatever comes without a notice (a
  // retry or a delayed item coming due, or anything at all without
  // LISTEN) in the parts that have gone quiet; the busy ones find what
  // came due with every claim. Due by the clock, not by a quiet
  // interval: notices for one part must not postpone another's poll.
  // Under a rate limit, also when a part's budget next allows an item
  // (a budget there already is for `ready` to see, with room). Idle (the
  // last poll found nothing, nothing in flight): next_poll is when the
  // parts' first retry or delayed item comes due (ClaimLoop).
  const absl::Time now_before = clock_->Now();
  const absl::Time budget_at = scheduler_.RateReadyAt(now_before);
  // Also when the failure log's window with dropped lines ends, to say
  // how many: a flood that stops must not leave it unsaid until the next.
  clock_->AwaitWithDeadline(
      mu_, absl::Condition(&ready),
      std::min({next_poll, budget_at > now_before ? budget_at : absl::InfiniteFuture(),
                failure_log_.DroppedDueAt()}));
  failures_dropped_ = false;
  if (const LogLimiter::Dropped d = failure_log_.TakeDroppedIfDue(); d.any()) {
    return absl::StrCat("item failures: ", d.Describe(),
                        " (partq_item_failures_total counts every one)");
  }
  return "";
}

void Consumer::ClaimLoop() {
  std::unique_ptr<Store> store;
  bool parked = false;  // `store` is a worker's (ClaimStore)
  absl::Time next_poll = clock_->Now() + options_.poll_interval;
  for (;;) {
    std::optional<ClaimRequest> req;
    absl::Time started;
    bool after_poll = false;  // this claim follows a poll
    bool probe = false;       // ask for a snapshot (ClaimScheduler::WantsSnapshot)
    {
      std::string dropped;  // logged when mu_ is let go, whatever follows
      auto log_dropped = absl::MakeCleanup([&dropped] {
        if (!dropped.empty()) LogLine(LogLevel::kWarning, dropped);
      });
      absl::MutexLock lock(&mu_);
      dropped = AwaitClaimLocked(next_poll);
      const absl::Time now = clock_->Now();
      if (now >= next_poll) {
        scheduler_.Poll();
        next_poll = now + options_.poll_interval;
        after_poll = true;
      }
      if (stopping_) return;
      probe = scheduler_.WantsSnapshot(now);  // poll-only: claim or not, once a rescan_interval
      if (probe) scheduler_.SnapshotAsked(now);
      if (RoomLocked()) {
        // The session as of now, not before a re-join (docs/architecture.md: suspects).
        req = scheduler_.BeginClaim(session_->id(),
                                    idle_workers_ - static_cast<int>(scheduler_.queued()), {}, now);
      }
      if (!req && !probe) continue;
      if (req) {
        // For the idle worker it feeds (HandOffLocked); not for a poll alone,
        // which mostly finds nothing, and then the begun transaction costs a
        // COMMIT. A notice since the last claim says something came.
        req->begin_after = noticed_ || !after_poll;
        noticed_ = false;
      }
    }
    if (store == nullptr) store = ClaimStore(&parked);
    if (probe) NoteSnapshot(store.get());
    started = clock_->Now();
    if (!req) {
      store = ReturnClaimStore(std::move(store), parked);
      continue;
    }
    absl::StatusOr<std::vector<Item>> items =
        store ? store->Claim(*req) : absl::UnavailableError("no connection");
    const absl::Time claim_end = clock_->Now();
    if (!items.ok()) {
      {
        absl::MutexLock lock(&mu_);
        scheduler_.FailClaim();
      }
      last_store_failure_ns_ = absl::ToUnixNanos(claim_end);
      PARTQ_LOG(Warning) << "claim: " << items.status();
      store.reset();
      clock_->SleepFor(options_.retry_backoff);
      continue;
    }
    if (metrics_ != nullptr) metrics_->ClaimQuery(claim_end - started, *items, claim_end);
    const bool found = !items->empty();
    std::vector<int> idle_parts;
    std::unique_ptr<Store> closing;  // closed outside the lock
    {
      absl::MutexLock lock(&mu_);
      CountClaimedLocked(scheduler_.AcceptClaim(*req, *std::move(items), started));
      if (store->Begun()) closing = HandOffLocked(std::move(store));
      if (found) {
        next_poll = std::min(next_poll, claim_end + options_.poll_interval);
      } else if (IdleLocked(claim_end)) {
        idle_parts = scheduler_.PartNumbers();
      }
    }
    // Idle after a poll: wait for what comes due. After a notice whose item
    // is not due yet (a delayed one): poll when it is, if that is sooner.
    if (!idle_parts.empty() && store != nullptr) {
      const absl::Time due = NextIdlePoll(*store, idle_parts, claim_end);
      next_poll = after_poll ? due : std::min(next_poll, due);
    }
    store = ReturnClaimStore(std::move(store), parked);
  }
}

void Consumer::NoteSnapshot(Store* store) {
  absl::StatusOr<SnapshotBounds> snapshot =
      store ? store->CurrentSnapshot() : absl::UnavailableError("no connection");
  if (snapshot.ok() && snapshot->id_cache > 1) {  // said once: it asks no more
    LogLine(
        LogLevel::kWarning,
        absl::StrCat("queue \"", options_.queue,
                     "\": no poll floors: the schema's items_id_seq has CACHE ", snapshot->id_cache,
                     ", so its ids are not handed out in time order and every poll reads the "
                     "parts from their heads; after ALTER SEQUENCE <schema>.items_id_seq "
                     "CACHE 1, restart the workers once every connection that enqueues has "
                     "reconnected (each spends the ids it cached first)"));
  }
  absl::MutexLock lock(&mu_);
  scheduler_.NoteSnapshot(snapshot);
}

bool Consumer::IdleLocked(absl::Time claim_end) {
  // Listening, nothing held back or wanted, and no store failure for an
  // idle_poll_interval (what failed may have come meanwhile).
  return session_->listening() && !holds_back_ && scheduler_.held() == 0 &&
         !scheduler_.WantClaim() &&
         (last_store_failure_ns_.load() == INT64_MIN ||
          claim_end - absl::FromUnixNanos(last_store_failure_ns_.load()) >=
              options_.idle_poll_interval);
}

std::unique_ptr<Store> Consumer::ReturnClaimStore(std::unique_ptr<Store> store, bool parked) {
  // A shared claimer's connection goes back for the next claim of any
  // queue; a worker's, to the workers; the claim loop's own, it keeps.
  if (parked && store != nullptr) {
    absl::MutexLock lock(&mu_);
    parked_.push_back(std::move(store));
  } else if (options_.claim_pool != nullptr) {
    options_.claim_pool->Give(std::move(store));
  }
  return store;
}

std::unique_ptr<Store> Consumer::ClaimStore(bool* parked) {
  {
    absl::MutexLock lock(&mu_);
    *parked = !parked_.empty();
    if (*parked) {
      std::unique_ptr<Store> s = std::move(parked_.back());
      parked_.pop_back();
      return s;
    }
  }
  auto s = options_.claim_pool != nullptr ? options_.claim_pool->Take() : factory_();
  return s.ok() ? std::move(*s) : nullptr;
}

std::unique_ptr<Store> Consumer::HandOffLocked(std::unique_ptr<Store> store) {
  if (stopping_ || scheduler_.queued() == 0) return store;
  handoffs_.push_back(std::move(store));
  return nullptr;
}

bool Consumer::TakeHandoffLocked(Batch* batch, std::unique_ptr<Store>* store,
                                 std::vector<std::unique_ptr<Store>>* closing) {
  if (handoffs_.empty()) return false;
  if (scheduler_.TakeQueued(batch)) {
    *store = std::move(handoffs_.front());
    handoffs_.pop_front();
    return true;
  }
  // Their batches went (a revoke, a loss, Abandon): nothing to run on them.
  for (auto& s : handoffs_) closing->push_back(std::move(s));
  handoffs_.clear();
  return false;
}

// An idle worker's next poll: when the first retry or delayed item of its
// parts comes due, at the latest after idle_poll_interval; a notice wakes it
// before. What it cannot learn (an error, a store without NextDue), it polls
// for as a busy one does.
absl::Time Consumer::NextIdlePoll(Store& store, const std::vector<int>& parts, absl::Time now) {
  absl::StatusOr<std::optional<absl::Duration>> due = store.NextDue(options_.queue, parts);
  if (!due.ok()) {
    if (!absl::IsUnimplemented(due.status())) PARTQ_LOG(Info) << "next due: " << due.status();
    return now + options_.poll_interval;
  }
  // Swept: the Worker's sweep pokes this queue when something came without a notice.
  const absl::Duration most = options_.swept_poll_interval > absl::ZeroDuration()
                                  ? options_.swept_poll_interval
                                  : options_.idle_poll_interval;
  const absl::Duration wait = due->has_value() ? std::min(**due, most) : most;
  if (wait > absl::ZeroDuration()) {
    due_now_streak_ = 0;
    return now + wait;
  }
  // Due already: it came due since the claim read (poll again at once), or
  // it cannot be claimed yet (held back by its key: then poll as a busy
  // worker does, not in a loop).
  return now + (due_now_streak_++ == 0 ? absl::ZeroDuration() : options_.poll_interval);
}

void Consumer::WorkLoop(int index) {
  std::unique_ptr<Store> store;
  absl::BitGen gen;  // this worker's retry jitter (FailurePolicy)
  // A batch this worker claimed ahead in its last ack, whose transaction
  // that ack's COMMIT already began on `store` (FinishRequest::begin_next):
  // it goes next, even if empty, so the transaction ends.
  std::optional<Batch> kept;
  for (;;) {
    Batch batch;
    bool flush_alone = false;  // no batch: deferred failures to write
    std::vector<std::unique_ptr<Store>> closing;  // closed outside the lock
    if (kept) {
      batch = *std::move(kept);
      kept.reset();
    } else {
      absl::MutexLock lock(&mu_);
      // Idle, its connection is the claimer's to use (ClaimStore).
      if (store != nullptr && !store->Begun()) parked_.push_back(std::move(store));
      ++idle_workers_;
      AwaitWorkLocked();
      --idle_workers_;
      // A claim for idle workers began this batch's transaction.
      if (!TakeHandoffLocked(&batch, &store, &closing)) {
        if (store == nullptr && !parked_.empty()) {
          store = std::move(parked_.back());
          parked_.pop_back();
        }
        // Nothing queued but deferred failures due: an empty batch, whose
        // Process writes them alone.
        flush_alone = !stopping_ && scheduler_.queued() == 0 && FlushDueLocked();
        if (!flush_alone && !scheduler_.TakeQueued(&batch)) return;  // stopping
      }
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
      const Processed done =
          store != nullptr ? Process(*store, gen, batch, &kept, flush_alone) : Processed::kFailed;
      // Stopped (Run's stop signal): the batch is given up; not a failure.
      if (done != Processed::kFailed) break;
      last_store_failure_ns_ = absl::ToUnixNanos(clock_->Now());
      store.reset();
      bool give_up;
      {
        absl::MutexLock lock(&mu_);
        // Parts revoked or lost meanwhile: the new owner will take the items.
        give_up = stopping_ || !scheduler_.HoldsAny(batch.items);
      }
      // A flush of deferred failures alone (an empty batch) is given up
      // after the backoff: they stay in flight for the next one.
      if (give_up && !flush_alone) break;
      clock_->SleepFor(options_.retry_backoff);
      if (give_up) break;
    }
    absl::MutexLock lock(&mu_);
    scheduler_.Release(batch.items);
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

void Consumer::CountClaimedLocked(int64_t n) {
  stats_.claimed += n;
  if (metrics_ != nullptr) metrics_->Claimed(n);
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

// The items of `current` that its isolating run left (their ids `left`), as
// a batch of their own that isolates at once, knowing what `batch`'s attempt
// learned.
Batch LeftOver(const Batch& current, const absl::flat_hash_set<int64_t>& left, const Batch& batch) {
  Batch next;
  for (const Item& i : current.items) {
    if (left.count(i.id)) next.items.push_back(i);
  }
  next.isolate = true;
  next.blamed = batch.blamed;
  next.item_cost = batch.item_cost;
  return next;
}

// Adds what the Finish `from` of left-over items finished to `to`, the
// batch's result so far; the claim ahead is the last Finish's.
void AddFinished(FinishResult& from, FinishResult* to) {
  for (auto [f, t] : {std::pair{&from.acked, &to->acked},
                      {&from.retried, &to->retried},
                      {&from.dead, &to->dead},
                      {&from.fenced, &to->fenced}}) {
    t->insert(t->end(), f->begin(), f->end());
  }
  to->next = std::move(from.next);
  to->next_begun = from.next_begun;
}

}  // namespace

Consumer::Processed Consumer::Process(Store& store, absl::BitGenRef gen, Batch& batch,
                                      std::optional<Batch>* kept, bool flush_alone) {
  // Deferred failures due are written in this Finish (all of them alone).
  std::vector<Deferred> flushing;
  {
    absl::MutexLock lock(&mu_);
    flushing = TakeDeferredLocked(/*all=*/flush_alone);
  }
  if (flush_alone && flushing.empty()) return Processed::kDone;  // another worker wrote them
  FinishRequest req;
  req.queue = options_.queue;
  req.begin_next = true;  // the first batch claimed ahead is this worker's next
  req.session = session_->id();
  req.max_attempts = config_.max_attempts;
  req.items = batch.items;
  for (const Deferred& d : flushing) req.items.push_back(d.item);
  req.parts = FenceOf(req.items);
  // Claim ahead in this ack, if the store asks (after the handler ran) and
  // then no claim is under way and the claimed batches do not cover the idle
  // workers and this one. A second attempt of the same Finish gets the same
  // claim.
  std::optional<ClaimRequest> ahead;
  absl::Time claim_started;
  // The batch whose handlers the current Finish runs: `batch`, or what an
  // isolating run left for another transaction (Batch::left).
  Batch* current = &batch;
  // What the body defers of the batch's failures (they stay in flight).
  std::vector<Deferred> deferring;
  req.next = [&]() -> std::optional<ClaimRequest> {
    // Only the transaction that finishes the batch's last items claims.
    if (!current->left.empty()) return std::nullopt;
    // What this transaction finishes: the claim must skip the rest of what
    // is in flight, deferred failures too, and its record keep listing them.
    std::vector<Item> adjusted;
    const std::vector<Item>& finishing = deferring.empty() && flushing.empty()
                                             ? batch.items
                                             : (adjusted = Finishing(batch, deferring, flushing));
    absl::MutexLock lock(&mu_);
    if (ahead) return ahead;
    if (stopping_) return std::nullopt;
    const std::optional<int> batches =
        scheduler_.ClaimAheadBatches(idle_workers_, finishing, clock_->Now());
    if (!batches) return std::nullopt;
    // The session as of now, as ClaimLoop's: the handler may have run
    // across a re-join, and req.session (the fence's) is the old one.
    ahead = scheduler_.BeginClaim(session_->id(), *batches, finishing, clock_->Now());
    if (ahead) claim_started = clock_->Now();
    return ahead;
  };

  const absl::Time t0 = clock_->Now();
  bool need_isolation = false;
  auto body = [&](Tx& tx, absl::Span<const Item> owned) {
    return RunBody(tx, owned, flushing, req.session, gen, batch, &need_isolation, &deferring);
  };
  absl::StatusOr<FinishResult> r = store.Finish(req, body);
  if (!r.ok() && need_isolation && !batch.isolate) {
    batch.isolate = true;
    need_isolation = false;
    r = store.Finish(req, body);
  }
  const bool flushed = r.ok();  // the first transaction, with what it flushed, committed
  // The failures of the transactions that committed, to report.
  std::vector<FailureNote> notes;
  if (r.ok()) notes = std::move(batch.failures);
  for (const Deferred& d : flushing) notes.push_back(d.note);
  // An isolating run that left items: they go in transactions of their own,
  // one after another (each may leave some again), as the same batch.
  Batch rest;
  while (r.ok() && !current->left.empty()) {
    const absl::flat_hash_set<int64_t> left(current->left.begin(), current->left.end());
    rest = LeftOver(*current, left, batch);
    current = &rest;
    FinishRequest sub = req;
    sub.items = rest.items;
    sub.parts = FenceOf(rest.items);
    absl::StatusOr<FinishResult> more =
        store.Finish(sub, [&](Tx& tx, absl::Span<const Item> owned) {
          return runner_->Run(tx, owned, req.session, gen, rest, &need_isolation);
        });
    if (!more.ok()) {
      // The earlier transactions committed: count what they finished, and
      // leave the retry only the rest. Retrying the whole batch ran the
      // committed items' handlers again, for the store to report them fenced.
      CutToUncommitted(*r, notes, left, t0, rest, batch);
      r = more.status();
      break;
    }
    AddFinished(*more, &*r);
    notes.insert(notes.end(), rest.failures.begin(), rest.failures.end());
  }
  if (r.ok()) ReportFailures(notes, *r);
  const Processed done = Settle(std::move(r), ahead, claim_started, batch, t0, kept);
  if (!deferring.empty() || !flushing.empty()) {
    SettleDeferred(flushed, std::move(deferring), std::move(flushing), batch);
  }
  return done;
}

absl::StatusOr<std::vector<Outcome>> Consumer::RunBody(Tx& tx, absl::Span<const Item> owned,
                                                       const std::vector<Deferred>& flushing,
                                                       const SessionId& session,
                                                       absl::BitGenRef gen, Batch& batch,
                                                       bool* need_isolation,
                                                       std::vector<Deferred>* deferring) {
  deferring->clear();  // of an earlier call, rolled back
  std::vector<Outcome> flushed;
  std::vector<Item> own;
  absl::Span<const Item> run = owned;
  if (!flushing.empty()) {
    absl::flat_hash_map<int64_t, const Outcome*> noted;
    for (const Deferred& d : flushing) noted[d.item.id] = &d.note.outcome;
    for (const Item& i : owned) {
      auto it = noted.find(i.id);
      if (it != noted.end()) {
        flushed.push_back(*it->second);
      } else {
        own.push_back(i);
      }
    }
    run = own;
  }
  // The runner as ever (it answers a stop even for no items), but not for a
  // flush alone.
  absl::StatusOr<std::vector<Outcome>> outs = std::vector<Outcome>{};
  if (flushing.empty() || !run.empty()) {
    outs = runner_->Run(tx, run, session, gen, batch, need_isolation);
  }
  if (!outs.ok()) return outs;
  DeferFailures(batch, run, &*outs, deferring);
  outs->insert(outs->end(), flushed.begin(), flushed.end());
  return outs;
}

void Consumer::DeferFailures(const Batch& batch, absl::Span<const Item> run,
                             std::vector<Outcome>* outs, std::vector<Deferred>* deferring) const {
  if (batch.isolate || batch.failures.empty() || !handler_->StatusesAreFinal()) return;
  absl::flat_hash_map<int64_t, size_t> at;
  for (size_t i = 0; i < run.size(); ++i) at[run[i].id] = i;
  for (const FailureNote& note : batch.failures) {
    const Outcome& o = note.outcome;
    const bool failed = o.kind == Outcome::Kind::kRetry || o.kind == Outcome::Kind::kDead;
    auto it = at.find(o.id);
    // The handler's own answer only: crashes, timeouts and the like, a
    // suspect's end and given-back attempts go as they did.
    if (!failed || o.refund_attempt || note.kind != FailureKind::kHandlerError || it == at.end() ||
        run[it->second].suspect || (*outs)[it->second].id != o.id) {
      continue;
    }
    (*outs)[it->second].kind = Outcome::Kind::kLeave;
    deferring->push_back({run[it->second], note});
  }
}

std::vector<Item> Consumer::Finishing(const Batch& batch, const std::vector<Deferred>& deferring,
                                      const std::vector<Deferred>& flushing) {
  absl::flat_hash_set<int64_t> left;
  for (const Deferred& d : deferring) left.insert(d.item.id);
  std::vector<Item> out;
  for (const Item& i : batch.items) {
    if (left.count(i.id) == 0) out.push_back(i);
  }
  for (const Deferred& d : flushing) out.push_back(d.item);
  return out;
}

bool Consumer::DeferrableLocked(const Item& item) const {
  if (scheduler_.HoldsAny({item})) return true;
  auto it = revoking_.find(item.part);
  return it != revoking_.end() && it->second == item.claim_epoch;
}

bool Consumer::FlushDueLocked() const {
  return !deferred_.empty() && (flush_now_ || deferred_.size() >= kDeferredMax ||
                                clock_->Now() >= deferred_since_ + kDeferredAge);
}

std::vector<Consumer::Deferred> Consumer::TakeDeferredLocked(bool all) {
  std::vector<Deferred> out;
  if (deferred_.empty() || (!all && !FlushDueLocked())) return out;
  // Of a part lost meanwhile (or held again at a newer epoch): their Finish
  // would be fenced, and one Finish holds one epoch per part.
  DropDeferredLocked([this](const Item& i)
                         ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !DeferrableLocked(i); });
  out.swap(deferred_);
  flush_now_ = false;
  return out;
}

void Consumer::SettleDeferred(bool flushed, std::vector<Deferred> deferring,
                              std::vector<Deferred> flushing, Batch& batch) {
  absl::MutexLock lock(&mu_);
  if (!flushed) {
    // Not written: still in flight, for the next flush (or the drop of a
    // part that goes meanwhile). What the batch deferred was rolled back.
    deferring = std::move(flushing);
    flushing.clear();
  } else if (!deferring.empty()) {
    absl::flat_hash_set<int64_t> ids;
    for (const Deferred& d : deferring) ids.insert(d.item.id);
    batch.items.erase(std::remove_if(batch.items.begin(), batch.items.end(),
                                     [&](const Item& i) { return ids.count(i.id) > 0; }),
                      batch.items.end());
  }
  std::vector<Item> done;
  for (Deferred& d : deferring) {
    // A part lost or revoked meanwhile (OnLost, a revoke past its drain
    // timeout, both of which dropped the others): released unwritten.
    if (!DeferrableLocked(d.item)) {
      done.push_back(std::move(d.item));
      continue;
    }
    if (deferred_.empty()) deferred_since_ = clock_->Now();
    // A revoke under way waits for it: written at once.
    flush_now_ = flush_now_ || revoking_.count(d.item.part) > 0;
    deferred_.push_back(std::move(d));
  }
  for (Deferred& d : flushing) done.push_back(std::move(d.item));
  scheduler_.Release(done);
}

void Consumer::DropDeferredLocked(absl::FunctionRef<bool(const Item&)> drop) {
  std::vector<Item> dropped;
  auto it = std::remove_if(deferred_.begin(), deferred_.end(), [&](const Deferred& d) {
    if (!drop(d.item)) return false;
    dropped.push_back(d.item);
    return true;
  });
  deferred_.erase(it, deferred_.end());
  scheduler_.Release(dropped);
}

void Consumer::DropDeferredLocked(const std::vector<int>& parts) {
  const absl::flat_hash_set<int> gone(parts.begin(), parts.end());
  DropDeferredLocked([&](const Item& i) { return gone.count(i.part) > 0; });
}

void Consumer::AwaitWorkLocked() {
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || scheduler_.queued() > 0 || (flush_now_ && !deferred_.empty());
  };
  auto ready_or_deferred = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ready() || !deferred_.empty();
  };
  while (!ready() && !FlushDueLocked()) {
    if (deferred_.empty()) {
      mu_.Await(absl::Condition(&ready_or_deferred));
    } else {
      clock_->AwaitWithDeadline(mu_, absl::Condition(&ready), deferred_since_ + kDeferredAge);
    }
  }
}

void Consumer::CutToUncommitted(const FinishResult& r, const std::vector<FailureNote>& notes,
                                const absl::flat_hash_set<int64_t>& left, absl::Time t0,
                                Batch& rest, Batch& batch) {
  std::vector<Item> done;
  for (Item& i : batch.items) {
    if (!left.count(i.id)) done.push_back(std::move(i));
  }
  batch = std::move(rest);
  batch.left.clear();  // of the rolled-back transaction
  ReportFailures(notes, r);
  absl::MutexLock lock(&mu_);
  CountLocked(r, done, t0, clock_->Now());
  scheduler_.Release(done);
}

Consumer::Processed Consumer::Settle(absl::StatusOr<FinishResult> r,
                                     const std::optional<ClaimRequest>& ahead,
                                     absl::Time claim_started, const Batch& batch, absl::Time t0,
                                     std::optional<Batch>* kept) {
  const absl::Time t1 = clock_->Now();
  absl::MutexLock lock(&mu_);
  if (ahead) {
    if (r.ok()) {
      if (metrics_ != nullptr) metrics_->Waited(r->next, t1);
      if (r->next_begun) kept->emplace();
      CountClaimedLocked(scheduler_.AcceptClaim(*ahead, std::move(r->next), claim_started,
                                                r->next_begun ? &**kept : nullptr));
    } else {
      scheduler_.FailClaim();
    }
  }
  if (!r.ok() && BatchRunner::IsStopSignal(r.status())) {
    PARTQ_LOG(Info) << batch.items.size() << " items: " << r.status().message();
    return Processed::kStopped;  // the caller gives the batch up
  }
  if (!r.ok()) {
    PARTQ_LOG(Warning) << "finishing " << batch.items.size() << " items: " << r.status();
    ++stats_.finish_errors;
    if (metrics_ != nullptr) metrics_->FinishError();
    return Processed::kFailed;
  }
  CountLocked(*r, batch.items, t0, t1);
  return Processed::kDone;
}

namespace {

// The longest piece of an item's error a log line quotes.
constexpr size_t kLoggedErrorBytes = 300;

// What became of an item after `note` (`dead`: it was dead-lettered), for
// its log line.
std::string NextStep(const FailureNote& note, bool dead, int max_attempts) {
  const Outcome& o = note.outcome;
  if (!dead) {
    return absl::StrCat("retry in ",
                        absl::FormatDuration(absl::Trunc(o.retry_delay, absl::Milliseconds(1))));
  }
  if (note.kind == FailureKind::kCrash && o.refund_attempt) return "dead-lettered (crash loop)";
  return note.attempt >= max_attempts || o.kind == Outcome::Kind::kRetry
             ? "dead-lettered (no attempts left)"
             : "dead-lettered (the handler said it is dead)";
}

}  // namespace

void Consumer::ReportFailures(const std::vector<FailureNote>& notes, const FinishResult& r) {
  if (notes.empty()) return;
  // Only what committed: a fenced item's failure is its next owner's to say.
  const absl::flat_hash_set<int64_t> retried(r.retried.begin(), r.retried.end());
  const absl::flat_hash_set<int64_t> dead(r.dead.begin(), r.dead.end());
  int64_t throttled = 0;
  for (const FailureNote& note : notes) {
    const bool is_dead = dead.count(note.outcome.id) > 0;
    if (!is_dead && retried.count(note.outcome.id) == 0) continue;
    if (metrics_ != nullptr) metrics_->ItemFailed(note.kind);
    if (note.kind == FailureKind::kThrottled && !is_dead) ++throttled;
    // Being told to wait is not a fault: info, but a warning once a minute
    // (the docs promise a worker that waits says why). The rest: warning.
    const bool throttle = note.kind == FailureKind::kThrottled;
    const int64_t now = throttle ? absl::ToUnixMicros(clock_->Now()) : 0;
    int64_t last = throttle ? throttle_warned_us_.load() : 0;
    LogLevel level = LogLevel::kWarning;
    if (throttle && last != INT64_MIN && now - last < absl::ToInt64Microseconds(absl::Minutes(1))) {
      level = LogLevel::kInfo;
    }
    if (level < GetLogLevel()) continue;
    // Admitted first: in a flood the dropped lines are not even made.
    const LogLimiter::Verdict v = failure_log_.Admit(0);
    if (!v.log) {
      if (v.first_dropped) {
        // The claim loop says the count when the window ends (ClaimLoop).
        absl::MutexLock lock(&mu_);
        failures_dropped_ = true;
      }
      continue;
    }
    if (v.dropped.any()) {
      LogLine(LogLevel::kWarning, absl::StrCat("item failures: ", v.dropped.Describe(),
                                               " (partq_item_failures_total counts every one)"));
    }
    // The minute's warning is taken only by a line that is logged; another
    // thread's may have taken it meanwhile.
    if (throttle && level == LogLevel::kWarning &&
        !throttle_warned_us_.compare_exchange_strong(last, now)) {
      level = LogLevel::kInfo;
      if (level < GetLogLevel()) continue;
    }
    const std::string& error = note.outcome.error;
    // An attempt given back (throttled, a crash loop's suspects) is not
    // counted, so naming its number would read as one used.
    const std::string at =
        !is_dead && note.outcome.refund_attempt
            ? std::string(" failed without using an attempt")
            : absl::StrCat(" failed at attempt ", note.attempt, " of ", config_.max_attempts);
    LogLine(level, absl::StrCat("queue \"", options_.queue, "\": item ", note.outcome.id, at, " (",
                                FailureKindName(note.kind),
                                "): ", PrintableUtf8(CutAtCharacter(error, kLoggedErrorBytes)),
                                error.size() > kLoggedErrorBytes ? "..." : "", "; ",
                                NextStep(note, is_dead, config_.max_attempts)));
  }
  if (throttled > 0) {
    absl::MutexLock lock(&mu_);
    stats_.throttled += throttled;
  }
}

}  // namespace partq
