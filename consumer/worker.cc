#include "consumer/worker.h"

#include <thread>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "store/shared_store.h"
#include "store/store_pool.h"

namespace partq {
namespace {

// How long a swept consumer waits on its own (ConsumerOptions::swept_poll_interval): a
// backstop only, as the sweep, notices and known due times wake it.
constexpr absl::Duration kSweptPollInterval = absl::Hours(1);

std::vector<std::unique_ptr<Consumer>> MakeConsumers(const StoreFactory& factory,
                                                     const std::vector<WorkerQueue>& queues,
                                                     bool valid,
                                                     std::shared_ptr<StorePool> claims) {
  std::vector<std::unique_ptr<Consumer>> consumers;
  if (!valid) return consumers;
  // What the queues' part-0 jobs can share, they share: one connection for
  // all of them, and one table keeper (the tables are every queue's), in the
  // first consumer, running while any of the queues' part 0 is ours.
  auto part0 = std::make_shared<SharedStore>(factory);
  // And the sessions' heartbeats go as one transaction, their notices come
  // on one connection, and between rounds they hold none of their own; the
  // claimers borrow their connections from one pool.
  std::shared_ptr<HeartbeatHub> hub;
  std::shared_ptr<NoticeHub> notices;
  if (queues.size() > 1) {
    hub = std::make_shared<HeartbeatHub>(factory, static_cast<int>(queues.size()));
    std::vector<std::string> names;
    for (const WorkerQueue& q : queues) names.push_back(q.options.queue);
    notices = std::make_shared<NoticeHub>(factory, std::move(names));
  }
  auto all = std::make_shared<std::vector<const Consumer*>>();
  for (const WorkerQueue& q : queues) {
    ConsumerOptions o = q.options;
    o.part0_store = part0;
    o.heartbeat_hub = hub;
    o.notice_hub = notices;
    o.claim_pool = claims;
    // And a sweep (Worker::Sweep) stands in for their idle polls.
    if (queues.size() > 1 && !o.poll_only) o.swept_poll_interval = kSweptPollInterval;
    if (!consumers.empty()) {
      o.vacuum_interval = absl::ZeroDuration();
    } else if (queues.size() > 1) {
      o.keeps_tables = [all] {
        for (const Consumer* c : *all) {
          if (c->session().EpochOf(0).has_value()) return true;
        }
        return false;
      };
    }
    consumers.push_back(std::make_unique<Consumer>(factory, o, q.handler, q.metrics));
  }
  for (const auto& c : consumers) all->push_back(c.get());
  return consumers;
}

// " (queue "q")" when there are several queues to tell apart, else nothing.
std::string OfQueue(const Consumer& c, size_t queues) {
  return queues > 1 ? absl::StrCat(" (queue \"", c.queue(), "\")") : "";
}

}  // namespace

Worker::Worker(StoreFactory factory, std::vector<WorkerQueue> queues)
    : invalid_(CheckQueues(queues)),
      pool_(queues.size() > 1 ? std::make_shared<StorePool>(factory) : nullptr),
      consumers_(MakeConsumers(factory, queues, invalid_.ok(), pool_)) {}

Worker::~Worker() { Stop(); }

absl::Status Worker::CheckQueues(const std::vector<WorkerQueue>& queues) {
  if (queues.empty()) return absl::InvalidArgumentError("a worker needs at least one queue");
  absl::flat_hash_set<std::string> seen;
  for (const WorkerQueue& q : queues) {
    if (!seen.insert(q.options.queue).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "queue \"", q.options.queue, "\" is named twice: one worker has one session per queue"));
    }
    if (q.handler == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("queue \"", q.options.queue, "\" has no handler"));
    }
  }
  return absl::OkStatus();
}

absl::Status Worker::Start() {
  if (!invalid_.ok()) return invalid_;
  if (absl::Status st = lifecycle_.BeginStart("worker"); !st.ok()) return st;
  absl::Status failed;
  size_t started = 0;
  for (; started < consumers_.size(); ++started) {
    Consumer& c = *consumers_[started];
    if (absl::Status st = c.Start(); !st.ok()) {
      failed = absl::Status(st.code(), absl::StrCat(st.message(), OfQueue(c, consumers_.size())));
      break;
    }
  }
  if (failed.ok()) {
    StartSweep();
    lifecycle_.EndStart(true);
    return failed;
  }
  // The consumers started are stopped, and a stopped Consumer does not start again
  // (base/service.h): so the worker is stopped too, and another Start fails.
  for (size_t i = 0; i < started; ++i) consumers_[i]->Stop();
  lifecycle_.EndStart(true);
  if (lifecycle_.BeginStop()) lifecycle_.EndStop();
  return failed;
}

void Worker::Stop() {
  if (!lifecycle_.BeginStop()) return;
  StopSweep();
  std::vector<std::thread> stoppers;
  for (const auto& c : consumers_)
    stoppers.emplace_back([consumer = c.get()] { consumer->Stop(); });
  for (auto& t : stoppers) t.join();
  lifecycle_.EndStop();
}

void Worker::Abandon() {
  if (!lifecycle_.BeginStop()) return;
  StopSweep();
  for (const auto& c : consumers_) c->Abandon();
  lifecycle_.EndStop();
}

void Worker::StartSweep() {
  std::vector<Consumer*> swept;
  for (const auto& c : consumers_) {
    if (c->options().swept_poll_interval > absl::ZeroDuration()) swept.push_back(c.get());
  }
  if (swept.empty()) return;
  sweeper_ = std::thread([this, swept = std::move(swept)] { SweepLoop(swept); });
}

void Worker::StopSweep() {
  {
    absl::MutexLock lock(&sweep_mu_);
    sweep_stop_ = true;
  }
  if (sweeper_.joinable()) sweeper_.join();
}

// Once every idle_poll_interval (the first swept queue's), one read for all the swept queues:
// those that hold items or a due schedule are poked, which is what each queue's own idle poll
// would have found. A read that fails, or a store that cannot answer, pokes them all.
void Worker::SweepLoop(const std::vector<Consumer*>& swept) {
  const absl::Duration every = swept.front()->options().idle_poll_interval;
  std::vector<std::string> names;
  for (const Consumer* c : swept) names.push_back(c->queue());
  for (;;) {
    {
      absl::MutexLock lock(&sweep_mu_);
      if (sweep_mu_.AwaitWithTimeout(absl::Condition(&sweep_stop_), every)) return;
    }
    absl::StatusOr<std::vector<std::string>> due = absl::UnavailableError("no connection");
    absl::StatusOr<std::unique_ptr<Store>> store = pool_->Take();
    if (store.ok()) due = (*store)->QueuesWithWork(names);
    if (!due.ok()) {
      if (!absl::IsUnimplemented(due.status())) PARTQ_LOG(Info) << "sweep: " << due.status();
      for (Consumer* c : swept) c->Poke();
      continue;
    }
    pool_->Give(*std::move(store));
    const absl::flat_hash_set<std::string> with_work(due->begin(), due->end());
    for (Consumer* c : swept) {
      if (with_work.contains(c->queue())) c->Poke();
    }
  }
}

bool Worker::Ready(std::string* why) const {
  if (consumers_.empty()) {
    *why = std::string(invalid_.message());
    return false;
  }
  for (const auto& c : consumers_) {
    const Session& session = c->session();
    const Session::State state = session.state();
    if (state != Session::State::kActive) {
      *why = absl::StrCat("session ", Session::StateName(state), OfQueue(*c, consumers_.size()));
      return false;
    }
    if (session.rounds() == 0) {
      *why =
          absl::StrCat("session joined, first rebalance not done", OfQueue(*c, consumers_.size()));
      return false;
    }
  }
  return true;
}

absl::Status Worker::Ended(std::string* queue) const {
  for (const auto& c : consumers_) {
    absl::Status st = c->session().ended();
    if (!st.ok()) {
      if (queue != nullptr) *queue = c->queue();
      return absl::Status(st.code(), absl::StrCat(st.message(), OfQueue(*c, consumers_.size())));
    }
  }
  return absl::OkStatus();
}

}  // namespace partq
