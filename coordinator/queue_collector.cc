#include "coordinator/queue_collector.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace partq {
namespace {

prometheus::Gauge& Gauge(prometheus::Registry& r, const std::string& name, const std::string& help,
                         const std::string& queue) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({{"queue", queue}});
}

constexpr char kFromCollector[] =
    " From the queue's collector (the worker owning part 0); other workers export 0: "
    "use max by (queue).";

}  // namespace

QueueCollector::QueueCollector(StoreFactory factory, std::string queue,
                               std::function<bool()> is_collector, prometheus::Registry& r,
                               absl::Duration interval, Clock* clock)
    : QueueCollector(std::make_shared<SharedStore>(std::move(factory)), std::move(queue),
                     std::move(is_collector), r, interval, clock) {}

QueueCollector::QueueCollector(std::shared_ptr<SharedStore> store, std::string queue,
                               std::function<bool()> is_collector, prometheus::Registry& r,
                               absl::Duration interval, Clock* clock)
    : store_(std::move(store)),
      queue_(std::move(queue)),
      is_collector_(std::move(is_collector)),
      interval_(interval),
      clock_(clock),
      ready_(Gauge(r, "partq_queue_ready_items",
                   std::string("Items ready to be claimed now.") + kFromCollector, queue_)),
      delayed_(Gauge(
          r, "partq_queue_delayed_items",
          std::string("Items waiting for their run time (delayed or retrying).") + kFromCollector,
          queue_)),
      held_(Gauge(r, "partq_queue_held_items",
                  std::string("Items of queue groups not started yet (partq group start).") +
                      kFromCollector,
                  queue_)),
      groups_(prometheus::BuildGauge()
                  .Name("partq_queue_groups")
                  .Help(std::string("Queue groups by state: held (not started), started, ended "
                                    "(kept until the queue is deleted).") +
                        kFromCollector)
                  .Register(r)),
      groups_held_(groups_.Add({{"queue", queue_}, {"state", "held"}})),
      groups_started_(groups_.Add({{"queue", queue_}, {"state", "started"}})),
      groups_ended_(groups_.Add({{"queue", queue_}, {"state", "ended"}})),
      group_pending_(Gauge(r, "partq_queue_group_pending_items",
                           std::string("Items pending in the queue's groups that have not ended "
                                       "(held, ready, delayed or in flight).") +
                               kFromCollector,
                           queue_)),
      in_flight_(Gauge(r, "partq_queue_in_flight_items",
                       std::string("Items claimed by a worker and not finished.") + kFromCollector,
                       queue_)),
      dead_(Gauge(r, "partq_queue_dead_items",
                  std::string("Dead-lettered items kept in dead_items.") + kFromCollector, queue_)),
      cancelled_(
          Gauge(r, "partq_queue_cancelled_items",
                std::string("Records of cancelled items kept in cancelled_items.") + kFromCollector,
                queue_)),
      oldest_ready_age_(Gauge(r, "partq_queue_oldest_ready_age_seconds",
                              std::string("Age (since enqueue, database clock) of the oldest "
                                          "ready item; 0 when none is ready.") +
                                  kFromCollector,
                              queue_)),
      unowned_parts_(Gauge(
          r, "partq_queue_unowned_parts",
          std::string("Parts no live session owns (their items wait).") + kFromCollector, queue_)),
      sessions_(Gauge(r, "partq_sessions",
                      std::string("Live (unexpired) sessions of the queue.") + kFromCollector,
                      queue_)),
      paused_(Gauge(r, "partq_queue_paused",
                    std::string("1 while the queue is paused (partq queue pause): its workers "
                                "claim nothing.") +
                        kFromCollector,
                    queue_)),
      collector_(Gauge(r, "partq_queue_collector",
                       "1 while this worker collects the queue's depth gauges (owns part 0).",
                       queue_)),
      errors_(prometheus::BuildCounter()
                  .Name("partq_queue_collect_errors_total")
                  .Help("Queue status queries of the collector that failed.")
                  .Register(r)
                  .Add({{"queue", queue_}})),
      duration_(Gauge(r, "partq_queue_collect_duration_seconds",
                      absl::StrCat("How long the collector's last status query took; the next "
                                   "one waits at least ",
                                   kCollectSpacing, " times as long.", kFromCollector),
                      queue_)),
      horizon_age_(Gauge(r, "partq_vacuum_horizon_age_seconds",
                         std::string("How long the oldest transaction holding back the "
                                     "database's vacuum horizon has been open (0 for a "
                                     "replication slot; see partq status). While it is held, "
                                     "acked items' rows are not removed.") +
                             kFromCollector,
                         queue_)),
      horizon_xids_(Gauge(r, "partq_vacuum_horizon_age_xids",
                          std::string("Transactions begun since the database's vacuum horizon "
                                      "(age of the oldest snapshot or slot xmin).") +
                              kFromCollector,
                          queue_)) {}

QueueCollector::~QueueCollector() { Stop(); }

void QueueCollector::Start() {
  if (!lifecycle_.BeginStart("queue collector").ok()) return;
  thread_ = std::thread([this] { Run(); });
  lifecycle_.EndStart(true);
}

void QueueCollector::Stop() {
  if (lifecycle_.BeginStop()) {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
    {
      absl::MutexLock lock(&store_->mu);
      store_->NotNeededLocked(this);
    }
    lifecycle_.EndStop();
  }
  ZeroFill();  // whatever it published last is stale now, collected or not
}

void QueueCollector::Run() {
  for (;;) {
    if (absl::Status st = CollectOnce(); !st.ok()) {
      PARTQ_LOG(Warning) << "queue metrics of " << queue_ << ": " << st;
    }
    absl::Duration spacing, quiet_wait;
    {
      absl::MutexLock lock(&took_mu_);
      spacing = WaitAfter(interval_, last_took_);
      if (quiet_ && quiet_interval_ > spacing) quiet_wait = quiet_interval_ - spacing;
    }
    absl::MutexLock lock(&mu_);
    // The spacing first, whatever pokes come: a Consumer pokes on every
    // notice of its queue, and a busy queue's enqueue notices (dozens a
    // second) ran the status query back to back, the busiest backend beside
    // a held snapshot (bench/held_snapshot_ordered.sh).
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    clock_->AwaitWithTimeout(mu_, absl::Condition(&stopping), spacing);
    if (stopping_) return;
    // Then a quiet queue waits on, until a poke.
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || poked_; };
    if (quiet_wait > absl::ZeroDuration()) {
      clock_->AwaitWithTimeout(mu_, absl::Condition(&woken), quiet_wait);
    }
    if (stopping_) return;
    poked_ = false;
  }
}

void QueueCollector::SetQuietInterval(absl::Duration d) { quiet_interval_ = d; }

void QueueCollector::Poke() {
  absl::MutexLock lock(&mu_);
  poked_ = true;
}

absl::Status QueueCollector::CollectOnce() {
  {
    absl::MutexLock lock(&took_mu_);
    last_took_ = absl::ZeroDuration();
    quiet_ = false;
  }
  if (!is_collector_()) {
    // Part 0 went elsewhere: so does the connection, which only its owner
    // needs (once the others sharing it need it no longer either).
    {
      absl::MutexLock lock(&store_->mu);
      store_->NotNeededLocked(this);
    }
    ZeroFill();
    return absl::OkStatus();
  }
  collector_.Set(1);
  absl::StatusOr<QueueStatus> status;
  {
    absl::MutexLock lock(&store_->mu);
    if (absl::Status st = store_->EnsureLocked(this); !st.ok()) {
      errors_.Increment();
      return st;
    }
    const absl::Time start = clock_->Now();
    status = store_->store->Status(queue_);
    // Only a query that ran spaces out the next: a failure (a database that
    // is away, a connect that timed out) is retried after `interval`.
    if (status.ok()) {
      const absl::Duration took = clock_->Now() - start;
      absl::MutexLock took_lock(&took_mu_);
      last_took_ = took;
      duration_.Set(absl::ToDoubleSeconds(took));
    }
    if (!status.ok() && absl::IsUnavailable(status.status())) store_->store.reset();
  }
  if (!status.ok()) {
    errors_.Increment();
    return status.status();
  }
  // Part 0 may have moved during the query; a stale collector must not
  // overwrite the zeros it is about to export.
  if (!is_collector_()) {
    ZeroFill();
    return absl::OkStatus();
  }
  Publish(*status);
  const QueueTotals t = SumUp(*status);
  absl::MutexLock lock(&took_mu_);
  quiet_ = t.ready == 0 && t.delayed == 0 && t.in_flight == 0 && t.held == 0 &&
           status->groups.pending == 0 && t.unowned_parts == 0;
  return absl::OkStatus();
}

QueueTotals SumUp(const QueueStatus& status, absl::Duration since_read) {
  QueueTotals t;
  absl::flat_hash_set<std::string> live;
  for (const auto& s : status.sessions) {
    if (SessionLive(s.expires_in, since_read)) {
      live.insert(s.id.value);
      ++t.live_sessions;
    } else {
      ++t.expired_sessions;
    }
  }
  for (const auto& p : status.parts) {
    t.ready += p.ready;
    t.delayed += p.delayed;
    t.held += p.held;
    t.in_flight += p.in_flight;
    t.dead += p.dead;
    t.cancelled += p.cancelled;
    t.dead_last_minute += p.dead_last_minute;
    const bool unowned = !p.owner.has_value() || !live.count(p.owner->value);
    t.unowned_parts += unowned ? 1 : 0;
    t.in_flight_unowned += unowned ? p.in_flight : 0;
    t.oldest_ready_age = std::max(t.oldest_ready_age, p.oldest_ready_age);
  }
  return t;
}

OwnerTotals SumUp(const QueueOwners& owners, absl::Duration since_read) {
  OwnerTotals t;
  absl::flat_hash_set<std::string> live;
  for (const auto& s : owners.sessions) {
    if (SessionLive(s.expires_in, since_read)) {
      live.insert(s.id.value);
      ++t.live_sessions;
    } else {
      ++t.expired_sessions;
    }
  }
  for (const auto& o : owners.owners) t.unowned_parts += o && live.count(o->value) ? 0 : 1;
  return t;
}

void QueueCollector::Publish(const QueueStatus& status) {
  const QueueTotals t = SumUp(status);
  ready_.Set(static_cast<double>(t.ready));
  delayed_.Set(static_cast<double>(t.delayed));
  held_.Set(static_cast<double>(t.held));
  groups_held_.Set(static_cast<double>(status.groups.held));
  groups_started_.Set(static_cast<double>(status.groups.started));
  groups_ended_.Set(static_cast<double>(status.groups.ended));
  group_pending_.Set(static_cast<double>(status.groups.pending));
  in_flight_.Set(static_cast<double>(t.in_flight));
  dead_.Set(static_cast<double>(t.dead));
  cancelled_.Set(static_cast<double>(t.cancelled));
  oldest_ready_age_.Set(absl::ToDoubleSeconds(t.oldest_ready_age));
  unowned_parts_.Set(static_cast<double>(t.unowned_parts));
  sessions_.Set(static_cast<double>(t.live_sessions));
  paused_.Set(status.config.paused ? 1 : 0);
  horizon_age_.Set(status.horizon ? absl::ToDoubleSeconds(status.horizon->age) : 0);
  horizon_xids_.Set(status.horizon ? static_cast<double>(status.horizon->xid_age) : 0);
  collector_.Set(1);
}

void QueueCollector::ZeroFill() {
  for (prometheus::Gauge* g :
       {&ready_, &delayed_, &held_, &groups_held_, &groups_started_, &groups_ended_,
        &group_pending_, &in_flight_, &dead_, &cancelled_, &oldest_ready_age_, &unowned_parts_,
        &sessions_, &paused_, &collector_, &duration_, &horizon_age_, &horizon_xids_}) {
    g->Set(0);
  }
}

}  // namespace partq
