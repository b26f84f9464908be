#include "store/mem_store.h"

#include <algorithm>
#include <climits>
#include <set>
#include <tuple>

#include "absl/random/random.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/utf8.h"
#include "nlohmann/json.hpp"
#include "partitioner/part.h"
#include "store/validate.h"

namespace partq {

class MemStore : public Store {
 public:
  MemStore(MemDatabase* db, int64_t max_payload_bytes)
      : db_(db), max_payload_bytes_(max_payload_bytes) {}

  absl::Status Migrate() override {
    absl::MutexLock l(&db_->mu_);
    return db_->Enter("Migrate");
  }
  absl::Status CheckSchema() override {
    absl::MutexLock l(&db_->mu_);
    return db_->Enter("CheckSchema");
  }

  absl::Status CreateQueue(const QueueConfig& config) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("CreateQueue"); !st.ok()) return st;
    if (absl::Status st = ValidateQueueConfig(config); !st.ok()) return st;
    QueueConfig created = config;
    created.paused = false;  // as PgStore: a queue starts running
    if (!db_->queues_.emplace(config.name, created).second) {
      return absl::AlreadyExistsError(absl::StrCat("queue \"", config.name, "\" already exists"));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<QueueConfig> GetQueue(absl::string_view name) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("GetQueue"); !st.ok()) return st;
    absl::StatusOr<QueueConfig*> q = db_->QueueLocked(name);
    if (!q.ok()) return q.status();
    return **q;
  }
  absl::StatusOr<std::vector<QueueConfig>> ListQueues() override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("ListQueues"); !st.ok()) return st;
    std::vector<QueueConfig> out;
    for (const auto& [name, q] : db_->queues_) out.push_back(q);
    return out;
  }
  absl::Status SetDeadLetterTopic(absl::string_view name,
                                  const std::optional<std::string>& topic) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("SetDeadLetterTopic"); !st.ok()) return st;
    if (absl::Status st = ValidateQueueName(name); !st.ok()) return st;
    if (topic) {
      if (absl::Status st = ValidateTopicName(*topic); !st.ok()) return st;
    }
    absl::StatusOr<QueueConfig*> q = db_->QueueLocked(name);
    if (!q.ok()) return q.status();
    (*q)->dlq_topic = topic;
    return absl::OkStatus();
  }
  absl::Status SetPaused(absl::string_view name, bool paused) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("SetPaused"); !st.ok()) return st;
    if (absl::Status st = ValidateQueueName(name); !st.ok()) return st;
    absl::StatusOr<QueueConfig*> q = db_->QueueLocked(name);
    if (!q.ok()) return q.status();
    (*q)->paused = paused;
    return absl::OkStatus();
  }
  absl::StatusOr<int> GrowParts(absl::string_view name, int parts) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("GrowParts"); !st.ok()) return st;
    if (absl::Status st = ValidateQueueName(name); !st.ok()) return st;
    if (absl::Status st = ValidateGrowth(name, 1, parts); !st.ok()) return st;
    absl::StatusOr<QueueConfig*> q = db_->QueueLocked(name);
    if (!q.ok()) return q.status();
    const int before = (*q)->parts;
    if (absl::Status st = ValidateGrowth(name, before, parts); !st.ok()) return st;
    if (parts > before) {
      (*q)->grown_from.push_back(before);
      (*q)->parts = parts;
    }
    return before;
  }
  absl::Status SetFairBy(absl::string_view name, FairBy fair_by) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("SetFairBy"); !st.ok()) return st;
    if (absl::Status st = ValidateQueueName(name); !st.ok()) return st;
    absl::StatusOr<QueueConfig*> q = db_->QueueLocked(name);
    if (!q.ok()) return q.status();
    (*q)->fair_by = fair_by;
    return absl::OkStatus();
  }
  absl::Status SetKeyConcurrency(absl::string_view name, int n) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("SetKeyConcurrency"); !st.ok()) return st;
    if (absl::Status st = ValidateQueueName(name); !st.ok()) return st;
    if (absl::Status st = ValidateKeyConcurrency(n); !st.ok()) return st;
    absl::StatusOr<QueueConfig*> q = db_->QueueLocked(name);
    if (!q.ok()) return q.status();
    if (absl::Status st = ValidateKeyConcurrencyFor(name, (*q)->ordered, n); !st.ok()) return st;
    (*q)->key_concurrency = n;
    return absl::OkStatus();
  }
  absl::Status SetMaxPayload(absl::string_view name, int64_t bytes) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("SetMaxPayload"); !st.ok()) return st;
    if (absl::Status st = ValidateQueueName(name); !st.ok()) return st;
    if (absl::Status st = ValidateMaxPayload(bytes); !st.ok()) return st;
    absl::StatusOr<QueueConfig*> q = db_->QueueLocked(name);
    if (!q.ok()) return q.status();
    (*q)->max_payload_bytes = bytes;
    return absl::OkStatus();
  }
  absl::StatusOr<DeletedQueue> DeleteQueue(absl::string_view name,
                                           QueueContents contents) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("DeleteQueue"); !st.ok()) return st;
    const std::string q(name);
    if (absl::StatusOr<QueueConfig*> found = db_->QueueLocked(q); !found.ok()) {
      return found.status();
    }
    auto in_queue = [&q](const auto& entry) { return entry.second.queue == q; };
    DeletedQueue out;
    out.items = std::count_if(db_->items_.begin(), db_->items_.end(), in_queue);
    out.dead_items = std::count_if(db_->dead_.begin(), db_->dead_.end(), in_queue);
    if (contents == QueueContents::kRefuse && (out.items > 0 || out.dead_items > 0)) {
      return absl::FailedPreconditionError(
          absl::StrCat("queue \"", q, "\" still holds work (items: ", out.items,
                       ", dead items: ", out.dead_items, "); nothing was deleted"));
    }
    db_->queues_.erase(q);
    db_->MoveGenerationLocked(q);  // its members and owners go with it
    for (auto it = db_->sessions_.begin(); it != db_->sessions_.end();) {
      it = it->second.queue == q ? db_->sessions_.erase(it) : std::next(it);
    }
    for (auto it = db_->owners_.begin(); it != db_->owners_.end();) {
      it = it->first.first == q ? db_->owners_.erase(it) : std::next(it);
    }
    for (auto it = db_->items_.begin(); it != db_->items_.end();) {
      it = in_queue(*it) ? db_->items_.erase(it) : std::next(it);
    }
    for (auto it = db_->dead_.begin(); it != db_->dead_.end();) {
      it = in_queue(*it) ? db_->dead_.erase(it) : std::next(it);
    }
    for (auto it = db_->claims_.begin(); it != db_->claims_.end();) {
      it = it->first.first == q ? db_->claims_.erase(it) : std::next(it);
    }
    for (auto it = db_->schedules_.begin(); it != db_->schedules_.end();) {
      if (it->second.spec.queue != q) {
        ++it;
        continue;
      }
      ++out.schedules;
      it = db_->schedules_.erase(it);
    }
    for (auto it = db_->throughput_.begin(); it != db_->throughput_.end();) {
      it = std::get<0>(it->first) == q ? db_->throughput_.erase(it) : std::next(it);
    }
    for (auto it = db_->results_.begin(); it != db_->results_.end();) {
      it = it->second.queue == q ? db_->results_.erase(it) : std::next(it);
    }
    for (auto it = db_->cancelled_.begin(); it != db_->cancelled_.end();) {
      it = in_queue(*it) ? db_->cancelled_.erase(it) : std::next(it);
    }
    return out;
  }

  absl::StatusOr<JoinResult> Join(const JoinRequest& req) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("Join"); !st.ok()) return st;
    absl::StatusOr<QueueConfig*> q = db_->QueueLocked(req.queue);
    if (!q.ok()) return q.status();
    if (req.instance_id.size() > 255) {
      return absl::InvalidArgumentError("instance id is longer than 255 characters");
    }
    const absl::Time now = db_->clock_->Now();
    JoinResult out;
    std::string id;
    if (req.instance_id.empty()) {
      id = NewSessionId();
    } else {
      // Stable for (queue, instance), as PgStore's md5-based uuid is, but
      // readable and sorting by instance name, which tests of the layers
      // above rely on (tests/coordinator/session_test.cc): not a uuid.
      id = absl::StrCat("static-", req.queue, "/", req.instance_id);
    }
    auto [it, inserted] = db_->sessions_.try_emplace(id);
    MemDatabase::Session& s = it->second;
    // A new member, one back from past its TTL, or parts at new epochs.
    bool moved = inserted || s.expires_at < now;
    if (inserted) s.started_at = now;
    if (!inserted) {
      ++s.incarnation;
      for (auto& [key, owner] : db_->owners_) {
        if (owner.session == id) {
          owner.epoch = db_->next_epoch_++;
          out.kept.push_back({key.second, Epoch{owner.epoch}});
          db_->AbandonLocked(key.first, key.second, owner.epoch);
          moved = true;
        }
      }
    }
    if (moved) db_->MoveGenerationLocked(req.queue);
    s.queue = req.queue;
    s.instance_id = req.instance_id;
    s.host = req.host;
    s.pid = req.pid;
    s.heartbeat_at = now;
    s.expires_at = now + (*q)->session_ttl;
    out.id = SessionId{id};
    out.incarnation = s.incarnation;
    out.paused = (*q)->paused;
    return out;
  }

  absl::StatusOr<GroupView> HeartbeatSince(absl::string_view queue, const SessionId& session,
                                           int64_t incarnation, int64_t known,
                                           const FinishCounts& finished) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("Heartbeat"); !st.ok()) return st;
    const std::string q(queue);
    absl::StatusOr<QueueConfig*> config = db_->QueueLocked(q);
    if (!config.ok()) return config.status();
    const absl::Time now = db_->clock_->Now();
    bool alive = false;
    auto it = db_->sessions_.find(session.value);
    if (it != db_->sessions_.end() && it->second.incarnation == incarnation) {
      if (it->second.expires_at < now) db_->MoveGenerationLocked(q);  // back among the members
      it->second.heartbeat_at = now;
      it->second.expires_at = now + (*config)->session_ttl;
      alive = true;
      if (!finished.empty()) {
        const absl::Time minute =
            absl::UnixEpoch() + absl::Floor(now - absl::UnixEpoch(), absl::Minutes(1));
        FinishCounts& c = db_->throughput_[{q, minute, session.value}];
        c = c + finished;
      }
    }
    int64_t expired = 0;
    db_->ExpireLocked(q, session.value, &expired);
    // Whole after an expiry, as PgStore's (whose delta cannot see the
    // deletions of its own statement).
    GroupView view = db_->ViewLocked(q, expired > 0 ? kNoGeneration : known);
    view.alive = alive;
    view.expired = expired;
    return view;
  }

  absl::StatusOr<GroupView> ReadGroupSince(absl::string_view queue, int64_t known) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("ReadGroup"); !st.ok()) return st;
    if (absl::StatusOr<QueueConfig*> q = db_->QueueLocked(queue); !q.ok()) return q.status();
    return db_->ViewLocked(std::string(queue), known);
  }

  absl::StatusOr<std::vector<OwnedPart>> AcquireParts(absl::string_view queue,
                                                      const SessionId& session,
                                                      const std::vector<int>& parts) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("AcquireParts"); !st.ok()) return st;
    absl::StatusOr<QueueConfig*> q = db_->QueueLocked(queue);
    if (!q.ok()) return q.status();
    std::set<int> wanted(parts.begin(), parts.end());
    if (!wanted.empty() && *wanted.begin() < 0) {
      return absl::InvalidArgumentError(absl::StrCat("negative part ", *wanted.begin()));
    }
    auto s = db_->sessions_.find(session.value);
    if (s == db_->sessions_.end() || s->second.queue != queue) {
      return absl::FailedPreconditionError(
          absl::StrCat("session ", session.value, " is gone (expired or left): join again"));
    }
    std::vector<OwnedPart> got;
    for (int p : wanted) {  // ascending, as PgStore returns them
      if (p >= (*q)->parts) break;
      auto [it, inserted] =
          db_->owners_.try_emplace({std::string(queue), p}, MemDatabase::Owner{session.value, 0});
      if (!inserted) continue;
      it->second.epoch = db_->next_epoch_++;
      got.push_back({p, Epoch{it->second.epoch}});
      db_->AbandonLocked(std::string(queue), p, it->second.epoch);
    }
    if (!got.empty()) db_->MoveGenerationLocked(std::string(queue));
    return got;
  }

  absl::Status ReleaseParts(absl::string_view queue, const SessionId& session,
                            const std::vector<OwnedPart>& parts) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("ReleaseParts"); !st.ok()) return st;
    if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
    for (const auto& p : parts) {
      auto it = db_->owners_.find({std::string(queue), p.part});
      if (it == db_->owners_.end() || it->second.session != session.value ||
          it->second.epoch != p.epoch.value) {
        continue;
      }
      db_->claims_.erase({std::string(queue), p.part});
      db_->owners_.erase(it);
      db_->MoveGenerationLocked(std::string(queue));
    }
    return absl::OkStatus();
  }

  absl::Status ReleaseClaims(absl::string_view queue, const SessionId& session,
                             int64_t incarnation) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("ReleaseClaims"); !st.ok()) return st;
    if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
    auto it = db_->sessions_.find(session.value);
    if (it == db_->sessions_.end() || it->second.incarnation != incarnation) {
      return absl::OkStatus();
    }
    for (const auto& [key, owner] : db_->owners_) {
      if (key.first != queue || owner.session != session.value) continue;
      auto rec = db_->claims_.find(key);
      if (rec != db_->claims_.end() && rec->second.epoch == owner.epoch) rec->second.ids.clear();
    }
    return absl::OkStatus();
  }

  absl::Status Leave(absl::string_view queue, const SessionId& session,
                     int64_t incarnation) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("Leave"); !st.ok()) return st;
    if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
    auto it = db_->sessions_.find(session.value);
    if (it == db_->sessions_.end() || it->second.incarnation != incarnation) {
      return absl::OkStatus();
    }
    for (auto o = db_->owners_.begin(); o != db_->owners_.end();) {
      if (o->second.session == session.value) {
        db_->claims_.erase(o->first);
        o = db_->owners_.erase(o);
      } else {
        ++o;
      }
    }
    db_->sessions_.erase(it);
    db_->MoveGenerationLocked(std::string(queue));
    return absl::OkStatus();
  }

  absl::Status NotifyGroup(absl::string_view queue) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("NotifyGroup"); !st.ok()) return st;
    return ValidateQueueName(queue);
  }

  absl::StatusOr<EnqueueResult> Enqueue(absl::string_view queue, const NewItem& item) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("Enqueue"); !st.ok()) return st;
    return EnqueueLocked(std::string(queue), item);
  }

  absl::Status AddSchedule(const ScheduleSpec& spec) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("AddSchedule"); !st.ok()) return st;
    absl::StatusOr<Timing> timing = ValidateSchedule(spec, max_payload_bytes_);
    if (!timing.ok()) return timing.status();
    if (absl::StatusOr<QueueConfig*> q = db_->QueueLocked(spec.queue); !q.ok()) return q.status();
    if (auto it = db_->schedules_.find(spec.name); it != db_->schedules_.end()) {
      return absl::AlreadyExistsError(
          absl::StrCat("schedule \"", spec.name, "\" already exists (on queue \"",
                       it->second.spec.queue, "\"); delete it first to change it"));
    }
    Schedule s;
    s.spec = spec;
    s.created_at = db_->clock_->Now();
    const absl::Time first = timing->Next(s.created_at);
    if (first == absl::InfiniteFuture()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cron expression \"", spec.cron, "\" never fires (no matching day within 8 years)"));
    }
    s.next_tick = first;
    db_->schedules_.emplace(spec.name, std::move(s));
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<Schedule>> ListSchedules(absl::string_view queue) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("ListSchedules"); !st.ok()) return st;
    if (!queue.empty()) {
      if (absl::StatusOr<QueueConfig*> q = db_->QueueLocked(queue); !q.ok()) return q.status();
    }
    std::vector<Schedule> out;
    for (const auto& [name, s] : db_->schedules_) {
      if (queue.empty() || s.spec.queue == queue) out.push_back(s);
    }
    return out;
  }
  absl::Status DeleteSchedule(absl::string_view name) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("DeleteSchedule"); !st.ok()) return st;
    if (db_->schedules_.erase(std::string(name)) == 0) {
      return absl::NotFoundError(absl::StrCat("unknown schedule \"", name, "\""));
    }
    return absl::OkStatus();
  }
  // Under the database's lock a firing cannot race another, so there is no
  // compare-and-set to make: the tick moves with the item.
  absl::StatusOr<FiredSchedules> FireSchedules(absl::string_view queue) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("FireSchedules"); !st.ok()) return st;
    if (absl::StatusOr<QueueConfig*> q = db_->QueueLocked(queue); !q.ok()) return q.status();
    FiredSchedules out;
    out.db_now = db_->clock_->Now();
    const absl::Duration ttl = (*db_->QueueLocked(queue))->session_ttl;
    for (auto& [name, s] : db_->schedules_) {
      if (s.spec.queue != queue || !s.next_tick) continue;
      // Each due tick inside the catch-up window, one by one, as PgStore's
      // rounds fire them.
      while (s.next_tick && *s.next_tick <= out.db_now) {
        absl::StatusOr<Timing> timing = ValidateSchedule(s.spec, max_payload_bytes_);
        if (!timing.ok()) return timing.status();  // validated when added
        const FirePlan plan = PlanCatchUp(*timing, *s.next_tick, out.db_now,
                                          CatchUpOf(s.spec, *timing, ttl, *s.next_tick));
        absl::StatusOr<EnqueueResult> r =
            EnqueueLocked(s.spec.queue, ScheduledItem(s.spec, plan.tick));
        if (!r.ok()) return r.status();
        s.next_tick = plan.next == absl::InfiniteFuture() ? std::nullopt
                                                          : std::optional<absl::Time>(plan.next);
        s.last_tick = plan.tick;
        ++s.fired;
        s.missed += plan.missed;
        out.fired.push_back(
            ScheduleFiring{name, plan.tick, plan.missed, out.db_now - plan.tick, *r});
      }
      if (s.next_tick && (!out.next_due || *s.next_tick < *out.next_due))
        out.next_due = s.next_tick;
    }
    return out;
  }

  absl::StatusOr<int64_t> EnqueueBatch(absl::string_view queue,
                                       const std::vector<NewItem>& items) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("EnqueueBatch"); !st.ok()) return st;
    // All or none: every item is checked before the first is written.
    absl::StatusOr<QueueConfig*> q = db_->QueueLocked(queue);
    if (!q.ok()) return q.status();
    for (size_t i = 0; i < items.size(); ++i) {
      if (absl::Status st = CheckItem(items[i]); !st.ok()) {
        return absl::Status(st.code(), absl::StrCat("item ", i, " of the batch: ", st.message()));
      }
    }
    int64_t written = 0;
    for (const auto& item : items) {
      absl::StatusOr<EnqueueResult> r = EnqueueLocked(std::string(queue), item);
      if (!r.ok()) return r.status();  // cannot happen: checked above
      written += r->duplicate ? 0 : 1;
    }
    return written;
  }

  absl::StatusOr<std::vector<Item>> Claim(const ClaimRequest& req) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("Claim"); !st.ok()) return st;
    if (absl::Status st = ValidateQueueName(req.queue); !st.ok()) return st;
    return db_->ClaimLocked(req, {});
  }

  absl::StatusOr<FinishResult> Finish(const FinishRequest& req, const FinishBody& body) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("Finish"); !st.ok()) return st;
    if (absl::Status st = ValidateQueueName(req.queue); !st.ok()) return st;
    // The fence: an item is ours when the request lists its part at its
    // claim epoch, the part is still ours at that epoch, and the item is
    // there with the attempts it was claimed with (an item that no claim
    // made, attempts 0, as it is): the same Finish sent again after its
    // COMMIT's answer was lost finds its retry written and must not count
    // the attempt twice. The database is locked throughout, so the body
    // sees only those, as PgStore's second run (locking first) would.
    FinishResult result;
    std::vector<Item> owned;
    for (const auto& item : req.items) {
      const bool listed = std::any_of(req.parts.begin(), req.parts.end(), [&](const OwnedPart& p) {
        return p.part == item.part && p.epoch == item.claim_epoch;
      });
      auto o = db_->owners_.find({req.queue, item.part});
      auto there = db_->items_.find(item.id);
      const bool ok = listed && o != db_->owners_.end() && o->second.session == req.session.value &&
                      o->second.epoch == item.claim_epoch.value && there != db_->items_.end() &&
                      (item.attempts < 1 || there->second.item.attempts == item.attempts - 1);
      if (ok) {
        owned.push_back(item);
      } else {
        result.fenced.push_back(item.id);
      }
    }
    MemTx tx(this);
    auto outcomes = body(tx, owned);
    if (!outcomes.ok()) {
      tx.Abort();
      return outcomes.status();
    }
    if (!tx.error().ok()) {
      // A failed statement the body did not roll back to a savepoint.
      tx.Abort();
      return tx.error();
    }
    if (absl::Status st = CheckOutcomes(*outcomes, owned); !st.ok()) {
      tx.Abort();
      return st;
    }
    const absl::Time now = db_->clock_->Now();
    std::set<int64_t> batch;
    for (const auto& item : req.items) batch.insert(item.id);
    for (const auto& oc : *outcomes) {
      if (oc.kind == Outcome::Kind::kLeave) continue;
      auto s = db_->items_.find(oc.id);
      auto& st = s->second;
      const bool refund = oc.kind == Outcome::Kind::kRetry && oc.refund_attempt;
      const bool dead = oc.kind == Outcome::Kind::kDead ||
                        (oc.kind == Outcome::Kind::kRetry && !refund &&
                         st.item.attempts + 1 >= std::max(1, req.max_attempts));
      if (oc.kind == Outcome::Kind::kAck) {
        if (oc.result || st.item.dedup_key) {
          db_->results_[oc.id] = {req.queue, st.item.dedup_key, oc.result, now};
        }
        db_->items_.erase(s);
        result.acked.push_back(oc.id);
      } else if (dead) {
        Unrecord(req.queue, st.item.part, oc.id);
        st.last_error = oc.error;
        if (!oc.refund_attempt) st.item.attempts += 1;
        st.failed_at = now;
        db_->dead_[oc.id] = st;
        db_->items_.erase(s);
        result.dead.push_back(oc.id);
      } else {
        Unrecord(req.queue, st.item.part, oc.id);
        if (!refund) st.item.attempts += 1;
        st.item.run_at = now + std::max(absl::ZeroDuration(), oc.retry_delay);
        st.later = true;
        st.abandoned_epoch = 0;
        st.last_error = oc.error;
        result.retried.push_back(oc.id);
      }
    }
    if (req.next) {
      if (std::optional<ClaimRequest> claim = req.next()) {
        result.next = db_->ClaimLocked(*claim, batch);
      }
    }
    return result;
  }

  absl::StatusOr<ItemState> GetItemState(absl::string_view queue, int64_t id) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("GetItemState"); !st.ok()) return st;
    if (absl::StatusOr<QueueConfig*> q = db_->QueueLocked(queue); !q.ok()) return q.status();
    ItemState out;
    out.id = id;
    bool elsewhere = false;
    if (auto it = db_->items_.find(id); it != db_->items_.end()) {
      elsewhere = it->second.queue != queue;
      if (!elsewhere) {
        out.kind = ItemState::Kind::kPending;
        out.attempts = it->second.item.attempts;
        out.error = it->second.last_error;
      }
    } else if (auto d = db_->dead_.find(id); d != db_->dead_.end()) {
      elsewhere = d->second.queue != queue;
      if (!elsewhere) {
        out.kind = ItemState::Kind::kDead;
        out.error = d->second.last_error;
        out.attempts = d->second.item.attempts;
      }
    } else if (auto r = db_->results_.find(id); r != db_->results_.end()) {
      elsewhere = r->second.queue != queue;
      if (!elsewhere) {
        out.kind = ItemState::Kind::kDone;
        out.result = r->second.result;
      }
    } else if (auto c = db_->cancelled_.find(id); c != db_->cancelled_.end()) {
      elsewhere = c->second.queue != queue;
      if (!elsewhere) {
        out.kind = ItemState::Kind::kCancelled;
        out.attempts = c->second.item.attempts;
      }
    } else if (id >= 1 && id < db_->next_item_) {
      // Allocated and kept nowhere: acked without a result (ids are shared
      // by all queues, and a vanished one does not say which it had).
      out.kind = ItemState::Kind::kDone;
    }
    return out;
  }

  absl::StatusOr<ItemDetail> DescribeItem(absl::string_view queue, int64_t id) override {
    absl::StatusOr<ItemState> state = GetItemState(queue, id);
    if (!state.ok()) return state.status();
    ItemDetail d;
    d.state = *std::move(state);
    if (d.state.kind != ItemState::Kind::kPending) return d;
    absl::ReleasableMutexLock l(&db_->mu_);
    auto it = db_->items_.find(id);
    if (it == db_->items_.end()) {  // finished meanwhile: what it became
      l.Release();
      state = GetItemState(queue, id);
      if (!state.ok()) return state.status();
      d.state = *std::move(state);
      return d;
    }
    const Item& item = it->second.item;
    d.part = item.part;
    d.key = item.key;
    d.group = item.group;
    d.priority = item.priority;
    d.enqueued_at = item.enqueued_at;
    if (item.run_at != absl::InfiniteFuture()) d.run_at = item.run_at;
    d.db_now = db_->clock_->Now();
    d.payload_bytes = static_cast<int64_t>(item.payload.size());
    d.payload_head = item.payload.substr(0, kItemPayloadHead);
    auto rec = db_->claims_.find({std::string(queue), item.part});
    auto owner = db_->owners_.find({std::string(queue), item.part});
    d.in_flight =
        rec != db_->claims_.end() && owner != db_->owners_.end() &&
        rec->second.epoch == owner->second.epoch &&
        std::find(rec->second.ids.begin(), rec->second.ids.end(), id) != rec->second.ids.end();
    return d;
  }

  absl::StatusOr<ItemState> GetItemStateByDedupKey(absl::string_view queue,
                                                   absl::string_view key) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("GetItemStateByDedupKey"); !st.ok()) return st;
    if (absl::StatusOr<QueueConfig*> q = db_->QueueLocked(queue); !q.ok()) return q.status();
    auto is_it = [&](const std::string& q, const std::optional<std::string>& k) {
      return q == queue && k == std::optional<std::string>(std::string(key));
    };
    // The live item first, else the newest finished one.
    for (const auto& [id, s] : db_->items_) {
      if (!is_it(s.queue, s.item.dedup_key)) continue;
      ItemState out;
      out.kind = ItemState::Kind::kPending;
      out.id = id;
      out.attempts = s.item.attempts;
      out.error = s.last_error;
      return out;
    }
    ItemState out;
    for (const auto& [id, r] : db_->results_) {
      if (!is_it(r.queue, r.dedup_key) || id < out.id) continue;
      out = ItemState{ItemState::Kind::kDone, id, r.result, "", 0};
    }
    for (const auto& [id, d] : db_->dead_) {
      if (!is_it(d.queue, d.item.dedup_key) || id < out.id) continue;
      out = ItemState{ItemState::Kind::kDead, id, std::nullopt, d.last_error, d.item.attempts};
    }
    for (const auto& [id, c] : db_->cancelled_) {
      if (!is_it(c.queue, c.item.dedup_key) || id < out.id) continue;
      out = ItemState{ItemState::Kind::kCancelled, id, std::nullopt, "", c.item.attempts};
    }
    return out;
  }

  absl::StatusOr<std::vector<CancelOutcome>> CancelItems(absl::string_view queue,
                                                         const std::vector<int64_t>& ids) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("CancelItems"); !st.ok()) return st;
    if (absl::StatusOr<QueueConfig*> q = db_->QueueLocked(queue); !q.ok()) return q.status();
    if (absl::Status st = ValidateItemIds(ids); !st.ok()) return st;
    std::vector<CancelOutcome> out;
    std::set<int64_t> seen;
    for (int64_t id : ids) {
      if (!seen.insert(id).second) continue;
      out.push_back({id, db_->CancelLocked(std::string(queue), id)});
    }
    return out;
  }

  absl::StatusOr<CancelOutcome> CancelByDedupKey(absl::string_view queue,
                                                 absl::string_view key) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("CancelByDedupKey"); !st.ok()) return st;
    if (absl::StatusOr<QueueConfig*> q = db_->QueueLocked(queue); !q.ok()) return q.status();
    if (absl::Status st = ValidateKeyText("dedup key", key); !st.ok()) return st;
    auto is_it = [&](const std::string& q, const std::optional<std::string>& k) {
      return q == queue && k == std::optional<std::string>(std::string(key));
    };
    for (const auto& [id, s] : db_->items_) {
      if (is_it(s.queue, s.item.dedup_key)) {
        return CancelOutcome{id, db_->CancelLocked(s.queue, id)};
      }
    }
    // None live: the newest finished one says what became of the key.
    CancelOutcome out;
    for (const auto& [id, r] : db_->results_) {
      if (is_it(r.queue, r.dedup_key) && id > out.id) out = {id, CancelOutcome::Kind::kDone};
    }
    for (const auto& [id, d] : db_->dead_) {
      if (is_it(d.queue, d.item.dedup_key) && id > out.id) out = {id, CancelOutcome::Kind::kDead};
    }
    for (const auto& [id, c] : db_->cancelled_) {
      if (is_it(c.queue, c.item.dedup_key) && id > out.id) {
        out = {id, CancelOutcome::Kind::kAlreadyCancelled};
      }
    }
    return out;
  }

  absl::StatusOr<QueueStatus> Status(absl::string_view queue) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("Status"); !st.ok()) return st;
    absl::StatusOr<QueueConfig*> config = db_->QueueLocked(queue);
    if (!config.ok()) return config.status();
    const QueueConfig& q = **config;
    QueueStatus out;
    out.config = q;
    out.db_now = db_->clock_->Now();
    out.parts.resize(q.parts);
    for (int p = 0; p < q.parts; ++p) {
      out.parts[p].part = p;
      auto o = db_->owners_.find({q.name, p});
      if (o != db_->owners_.end()) {
        out.parts[p].owner = SessionId{o->second.session};
        out.parts[p].epoch = Epoch{o->second.epoch};
      }
    }
    for (const auto& [id, s] : db_->sessions_) {
      if (s.queue != q.name) continue;
      SessionInfo info;
      info.id = SessionId{id};
      info.instance_id = s.instance_id;
      info.host = s.host;
      info.pid = s.pid;
      info.since_heartbeat = out.db_now - s.heartbeat_at;
      info.expires_in = s.expires_at - out.db_now;
      info.since_start = out.db_now - s.started_at;
      std::set<std::string> also;
      for (const auto& [other_id, o] : db_->sessions_) {
        if (s.pid != 0 && o.host == s.host && o.pid == s.pid && o.queue != s.queue &&
            o.expires_at > out.db_now) {
          also.insert(o.queue);
        }
      }
      info.also_serves.assign(also.begin(), also.end());
      for (const auto& p : out.parts) info.parts_owned += p.owner && p.owner->value == id;
      out.sessions.push_back(info);
    }
    std::set<int64_t> flying;
    for (const auto& [key, rec] : db_->claims_) {
      if (key.first == q.name) flying.insert(rec.ids.begin(), rec.ids.end());
    }
    for (const auto& [id, s] : db_->items_) {
      if (s.queue != q.name) continue;
      auto& ps = out.parts[s.item.part];
      if (flying.count(id) > 0) {
        ++ps.in_flight;
      } else if (s.item.run_at > out.db_now) {
        ++ps.delayed;
      } else {
        ++ps.ready;
        ps.oldest_ready_age = std::max(ps.oldest_ready_age, out.db_now - s.item.enqueued_at);
      }
    }
    for (const auto& [id, s] : db_->dead_) {
      if (s.queue != q.name) continue;
      ++out.parts[s.item.part].dead;
      if (s.failed_at > out.db_now - absl::Minutes(1)) ++out.parts[s.item.part].dead_last_minute;
    }
    for (const auto& [id, s] : db_->cancelled_) {
      if (s.queue == q.name) ++out.parts[s.item.part].cancelled;
    }
    std::map<std::string, SessionInfo*> by_id;
    for (SessionInfo& s : out.sessions) by_id[s.id.value] = &s;
    for (auto it = db_->throughput_.lower_bound({q.name, out.db_now - absl::Hours(1), ""});
         it != db_->throughput_.end() && std::get<0>(it->first) == q.name; ++it) {
      const auto& [name, minute, session] = it->first;
      if (out.throughput.empty() || out.throughput.back().minute != minute) {
        out.throughput.push_back({minute, {}});
      }
      out.throughput.back().counts = out.throughput.back().counts + it->second;
      auto s = by_id.find(session);
      // As PgStore's: the minutes that may cover the one before its last heartbeat.
      if (s != by_id.end() &&
          minute >= out.db_now - s->second->since_heartbeat - absl::Minutes(2) - q.session_ttl) {
        s->second->throughput.push_back({minute, it->second});
      }
    }
    return out;
  }

  absl::StatusOr<std::optional<absl::Duration>> NextDue(absl::string_view queue,
                                                        const std::vector<int>& parts) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("NextDue"); !st.ok()) return st;
    if (absl::StatusOr<QueueConfig*> q = db_->QueueLocked(queue); !q.ok()) return q.status();
    const std::set<int> want(parts.begin(), parts.end());
    const absl::Time now = db_->clock_->Now();
    std::optional<absl::Duration> first;
    for (const auto& [id, s] : db_->items_) {
      if (s.queue != queue || want.count(s.item.part) == 0) continue;
      if (!s.later || s.item.run_at == absl::InfiniteFuture()) continue;
      const absl::Duration in = std::max(s.item.run_at - now, absl::ZeroDuration());
      if (!first || in < *first) first = in;
    }
    return first;
  }

  absl::StatusOr<QueueOwners> Owners(absl::string_view queue) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("Owners"); !st.ok()) return st;
    absl::StatusOr<QueueConfig*> config = db_->QueueLocked(queue);
    if (!config.ok()) return config.status();
    const QueueConfig& q = **config;
    QueueOwners out;
    out.owners.resize(q.parts);
    for (int p = 0; p < q.parts; ++p) {
      auto o = db_->owners_.find({q.name, p});
      if (o != db_->owners_.end()) out.owners[p] = SessionId{o->second.session};
    }
    for (const auto& [id, s] : db_->sessions_) {
      if (s.queue == q.name) {
        const absl::Time now = db_->clock_->Now();
        out.sessions.push_back(
            {SessionId{id}, s.host, s.pid, now - s.heartbeat_at, s.expires_at - now});
      }
    }
    std::sort(out.sessions.begin(), out.sessions.end(),
              [](const auto& a, const auto& b) { return a.id.value < b.id.value; });
    out.has_items = std::any_of(db_->items_.begin(), db_->items_.end(),
                                [&](const auto& kv) { return kv.second.queue == q.name; });
    return out;
  }

  absl::StatusOr<std::unique_ptr<Listener>> Listen(absl::string_view) override {
    return absl::UnimplementedError("MemStore has no LISTEN");
  }

  absl::StatusOr<std::vector<DeadItem>> ListDead(absl::string_view queue, int limit) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("ListDead"); !st.ok()) return st;
    if (absl::StatusOr<QueueConfig*> q = db_->QueueLocked(queue); !q.ok()) return q.status();
    std::vector<DeadItem> out;
    for (const auto& [id, d] : db_->dead_) {
      if (d.queue != queue) continue;
      out.push_back({id, d.item.part, d.item.key, d.item.dedup_key, d.item.attempts,
                     d.item.enqueued_at, d.failed_at, d.last_error,
                     static_cast<int64_t>(d.item.payload.size()),
                     d.item.payload.substr(0, kDeadPayloadHead)});
    }
    // Newest first: by failure time, then id, as PgStore orders them.
    std::sort(out.begin(), out.end(), [](const DeadItem& a, const DeadItem& b) {
      return std::tie(b.failed_at, b.id) < std::tie(a.failed_at, a.id);
    });
    if (static_cast<int>(out.size()) > std::max(0, limit)) out.resize(std::max(0, limit));
    return out;
  }

  absl::StatusOr<Requeued> RequeueDead(absl::string_view queue,
                                       const std::vector<int64_t>& ids) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("RequeueDead"); !st.ok()) return st;
    if (absl::StatusOr<QueueConfig*> q = db_->QueueLocked(queue); !q.ok()) return q.status();
    const std::set<int64_t> asked(ids.begin(), ids.end());
    const absl::Time now = db_->clock_->Now();
    Requeued out;
    for (auto it = db_->dead_.begin(); it != db_->dead_.end();) {
      MemDatabase::StoredItem& d = it->second;
      if (d.queue != queue || (!asked.empty() && asked.count(it->first) == 0)) {
        ++it;
        continue;
      }
      const bool key_taken =
          d.item.dedup_key && std::any_of(db_->items_.begin(), db_->items_.end(), [&](auto& kv) {
            return kv.second.queue == d.queue && kv.second.item.dedup_key == d.item.dedup_key;
          });
      if (key_taken) {
        ++out.kept;
        out.kept_ids.push_back(it->first);
        ++it;
        continue;
      }
      // A new item in all but its id and enqueue time.
      d.item.attempts = 0;
      d.item.run_at = now;
      d.later = true;
      d.abandoned_epoch = 0;
      d.last_error.clear();
      d.failed_at = absl::Time();
      out.requeued_ids.push_back(it->first);
      db_->items_.emplace(it->first, std::move(d));
      it = db_->dead_.erase(it);
      ++out.requeued;
    }
    return out;
  }

  absl::StatusOr<DeadDeleted> DeleteDead(absl::string_view queue,
                                         const std::vector<int64_t>& ids) override {
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("DeleteDead"); !st.ok()) return st;
    if (absl::StatusOr<QueueConfig*> q = db_->QueueLocked(queue); !q.ok()) return q.status();
    std::set<int64_t> asked(ids.begin(), ids.end());
    DeadDeleted out;
    for (auto it = db_->dead_.begin(); it != db_->dead_.end();) {
      if (it->second.queue == queue && (ids.empty() || asked.count(it->first) > 0)) {
        asked.erase(it->first);
        it = db_->dead_.erase(it);
        ++out.deleted;
      } else {
        ++it;
      }
    }
    out.missing_ids.assign(asked.begin(), asked.end());
    return out;
  }

  absl::StatusOr<Pruned> Prune(absl::string_view queue, absl::Duration older_than,
                               bool dead) override {
    if (older_than < absl::ZeroDuration()) {
      return absl::InvalidArgumentError("a retention age cannot be negative");
    }
    absl::MutexLock l(&db_->mu_);
    if (auto st = db_->Enter("Prune"); !st.ok()) return st;
    if (absl::StatusOr<QueueConfig*> q = db_->QueueLocked(queue); !q.ok()) return q.status();
    const absl::Time cutoff = db_->clock_->Now() - older_than;
    Pruned out;
    auto prune = [&](auto& records, auto at, int64_t* count) {
      for (auto it = records.begin(); it != records.end();) {
        if (it->second.queue == queue && at(it->second) <= cutoff) {
          it = records.erase(it);
          ++*count;
        } else {
          ++it;
        }
      }
    };
    prune(
        db_->results_, [](const MemDatabase::Result& r) { return r.finished_at; }, &out.results);
    // A cancelled record's failed_at is when it was cancelled (CancelLocked).
    prune(
        db_->cancelled_, [](const MemDatabase::StoredItem& c) { return c.failed_at; },
        &out.cancelled);
    if (dead) {
      prune(
          db_->dead_, [](const MemDatabase::StoredItem& d) { return d.failed_at; }, &out.dead);
    }
    return out;  // MemStore has no queue groups
  }

 private:
  // A dynamic member's id: random, in UUID form (members sort by it).
  std::string NewSessionId() ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_->mu_) {
    return absl::StrFormat("%08x-0000-4000-8000-%012x", absl::Uniform<uint32_t>(gen_),
                           db_->next_session_++);
  }

  // What every store refuses (ValidateNewItem), and keys that are not
  // UTF-8: PostgreSQL's text columns refuse those.
  absl::Status CheckItem(const NewItem& item) const {
    if (absl::Status st = ValidateNewItem(item, max_payload_bytes_); !st.ok()) return st;
    // Refused rather than enqueued as an item of no group: a test that
    // meant a group would pass without one.
    if (item.group) return absl::UnimplementedError("queue groups need PostgreSQL");
    for (const std::optional<std::string>* k : {&item.key, &item.dedup_key}) {
      if (*k && !IsValidUtf8(**k)) {
        return absl::InvalidArgumentError("keys and dedup keys must be UTF-8 text");
      }
    }
    return absl::OkStatus();
  }

  // One outcome per item the body was given, none twice (PgStore's rule).
  static absl::Status CheckOutcomes(const std::vector<Outcome>& outcomes,
                                    const std::vector<Item>& given) {
    if (outcomes.size() != given.size()) {
      return absl::InternalError(absl::StrCat("finish: the handler returned ", outcomes.size(),
                                              " outcomes for ", given.size(), " items"));
    }
    std::set<int64_t> left;
    for (const Item& i : given) left.insert(i.id);
    for (const Outcome& o : outcomes) {
      if (left.erase(o.id) == 0) {
        return absl::InternalError(absl::StrCat("finish: the handler returned an outcome for item ",
                                                o.id, ", which it was not given, or twice"));
      }
    }
    return absl::OkStatus();
  }

  // A retried or dead item is no longer in flight: off its part's record.
  void Unrecord(const std::string& queue, int part, int64_t id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_->mu_) {
    auto rec = db_->claims_.find({queue, part});
    if (rec == db_->claims_.end()) return;
    auto& ids = rec->second.ids;
    ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
  }

  // The Tx of a Finish, run while the database is locked: its enqueues and
  // publishes are written at once and undone on a rollback (to a savepoint,
  // or of the whole transaction), so no other handle ever sees them before
  // the commit. A statement that fails (a savepoint that does not exist,
  // headers that are not JSON) leaves it aborted, as PostgreSQL does, until
  // a rollback to a savepoint; input refused before any statement would run
  // (a malformed topic or item, an unknown queue) does not.
  class MemTx : public Tx {
   public:
    explicit MemTx(MemStore* store) : store_(store) {}
    absl::StatusOr<std::vector<Row>> Exec(absl::string_view,
                                          const std::vector<std::optional<std::string>>&) override {
      return absl::UnimplementedError("MemStore runs no SQL");
    }
    absl::Status Savepoint(absl::string_view name) override {
      if (!error_.ok()) return Aborted();
      savepoints_.emplace_back(std::string(name), undo_.size());
      return absl::OkStatus();
    }
    absl::Status ReleaseSavepoint(absl::string_view name) override {
      if (!error_.ok()) return Aborted();
      auto it = Find(name);
      if (it == savepoints_.end()) return Fail(NoSavepoint(name));
      savepoints_.erase(it, savepoints_.end());
      return absl::OkStatus();
    }
    absl::Status RollbackToSavepoint(absl::string_view name) override {
      auto it = Find(name);
      if (it == savepoints_.end()) return Fail(NoSavepoint(name));
      UndoTo(it->second);
      savepoints_.erase(std::next(it), savepoints_.end());
      error_ = absl::OkStatus();
      return absl::OkStatus();
    }
    absl::Status RenewSavepoint(absl::string_view name) override {
      if (absl::Status st = ReleaseSavepoint(name); !st.ok()) return st;
      return Savepoint(name);
    }
    absl::StatusOr<EnqueueResult> Enqueue(absl::string_view queue,
                                          const NewItem& item) override
        ABSL_NO_THREAD_SAFETY_ANALYSIS {  // Finish holds the database lock
      if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
      if (absl::Status st = store_->CheckItem(item); !st.ok()) return st;
      if (!error_.ok()) return Aborted();
      auto r = store_->EnqueueLocked(std::string(queue), item);
      if (r.ok() && !r->duplicate) undo_.push_back({Undo::kItem, r->id});
      return r;
    }
    absl::Status Publish(const OutboxEvent& event) override ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (absl::Status st = ValidateTopicName(event.topic); !st.ok()) return st;
      if (!error_.ok()) return Aborted();
      if (event.headers_json && !nlohmann::json::accept(*event.headers_json)) {
        return Fail(absl::InvalidArgumentError(absl::StrCat(
            "invalid value: the headers are not JSON: ", absl::CHexEscape(*event.headers_json))));
      }
      store_->db_->outbox_.push_back(event);
      undo_.push_back({Undo::kOutbox, 0});
      return absl::OkStatus();
    }
    pqxx::transaction_base* pqxx() override { return nullptr; }
    const std::string& schema() const override { return schema_; }

    // The last failed statement not rolled back to a savepoint (OK if none):
    // the transaction cannot commit.
    const absl::Status& error() const { return error_; }
    // The whole transaction rolls back.
    void Abort() { UndoTo(0); }

   private:
    struct Undo {
      enum Kind { kItem, kOutbox } kind;
      int64_t id;
    };
    std::vector<std::pair<std::string, size_t>>::iterator Find(absl::string_view name) {
      // The newest savepoint of that name, as SQL finds it.
      for (auto it = savepoints_.end(); it != savepoints_.begin();) {
        --it;
        if (it->first == name) return it;
      }
      return savepoints_.end();
    }
    static absl::Status NoSavepoint(absl::string_view name) {
      return absl::InternalError(absl::StrCat("savepoint \"", name, "\" does not exist"));
    }
    absl::Status Fail(absl::Status st) {
      error_ = st;
      return st;
    }
    static absl::Status Aborted() {
      return absl::InternalError(
          "current transaction is aborted, commands ignored until end of transaction block");
    }
    void UndoTo(size_t size) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      while (undo_.size() > size) {
        const Undo u = undo_.back();
        undo_.pop_back();
        if (u.kind == Undo::kItem) {
          store_->db_->items_.erase(u.id);
        } else {
          store_->db_->outbox_.pop_back();
        }
      }
    }

    MemStore* const store_;
    std::vector<Undo> undo_;
    std::vector<std::pair<std::string, size_t>> savepoints_;
    absl::Status error_;
    std::string schema_ = "mem";
  };

  absl::StatusOr<EnqueueResult> EnqueueLocked(const std::string& queue, const NewItem& item)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_->mu_) {
    // The item is checked before the queue is looked up, as PgStore does.
    if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
    if (absl::Status st = CheckItem(item); !st.ok()) return st;
    absl::StatusOr<QueueConfig*> q = db_->QueueLocked(queue);
    if (!q.ok()) return q.status();
    if (item.dedup_key) {
      for (const auto& [id, s] : db_->items_) {
        if (s.queue == queue && s.item.dedup_key == item.dedup_key) {
          return EnqueueResult{id, s.item.part, true};
        }
      }
    }
    const absl::Time now = db_->clock_->Now();
    MemDatabase::StoredItem s;
    s.queue = queue;
    s.item.id = db_->next_item_++;
    s.item.part = item.key ? PartForKey(*item.key, (*q)->parts) : PartForId(s.item.id, (*q)->parts);
    s.item.key = item.key;
    s.item.dedup_key = item.dedup_key;
    s.item.priority = item.priority;
    s.item.payload = item.payload;
    s.item.enqueued_at = now;
    // A negative delay means now.
    s.item.run_at = now + std::max(absl::ZeroDuration(), item.delay);
    s.later = item.delay > absl::ZeroDuration();
    const EnqueueResult r{s.item.id, s.item.part, false};
    db_->items_.emplace(s.item.id, std::move(s));
    return r;
  }

  MemDatabase* const db_;
  const int64_t max_payload_bytes_;
  absl::BitGen gen_;
};

std::unique_ptr<Store> MemDatabase::Connect(int64_t max_payload_bytes) {
  return std::make_unique<MemStore>(this, max_payload_bytes);
}

StoreFactory MemDatabase::Factory() {
  return [this]() -> absl::StatusOr<std::unique_ptr<Store>> { return Connect(); };
}

absl::StatusOr<QueueConfig*> MemDatabase::QueueLocked(absl::string_view name) {
  if (absl::Status st = ValidateQueueName(name); !st.ok()) return st;
  auto it = queues_.find(std::string(name));
  if (it == queues_.end()) return absl::NotFoundError(absl::StrCat("unknown queue \"", name, "\""));
  return &it->second;
}

std::vector<OutboxEvent> MemDatabase::Outbox() const {
  absl::MutexLock l(&mu_);
  return outbox_;
}

void MemDatabase::ExpireLocked(const std::string& queue, const std::string& except,
                               int64_t* expired) {
  const absl::Time now = clock_->Now();
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (it->second.queue == queue && it->first != except && it->second.expires_at < now) {
      for (auto o = owners_.begin(); o != owners_.end();) {
        o = o->second.session == it->first ? owners_.erase(o) : std::next(o);
      }
      it = sessions_.erase(it);
      ++*expired;
      MoveGenerationLocked(queue);
    } else {
      ++it;
    }
  }
}

GroupView MemDatabase::ViewLocked(const std::string& queue, int64_t known) {
  GroupView view;
  if (auto q = queues_.find(queue); q != queues_.end()) {
    view.paused = q->second.paused;
    view.parts = q->second.parts;
  }
  const absl::Time now = clock_->Now();
  auto g = generations_.find(queue);
  view.generation = g == generations_.end() ? 0 : g->second;
  if (known >= 0 && known == view.generation) {
    view.unchanged = std::none_of(sessions_.begin(), sessions_.end(), [&](const auto& s) {
      return s.second.queue == queue && s.second.expires_at < now;
    });
    if (view.unchanged) return view;
  }
  for (const auto& [id, s] : sessions_) {
    if (s.queue == queue && s.expires_at >= now) view.members.push_back(SessionId{id});
  }
  if (known >= 0 && known <= view.generation && known >= view.generation - kGroupChangesKept) {
    view.delta = true;
    for (const auto& [part, generation] : owner_changed_[queue]) {
      if (generation <= known) continue;
      auto o = owners_.find({queue, part});
      if (o == owners_.end()) {
        view.unowned.push_back(part);
      } else {
        view.owners.push_back({part, SessionId{o->second.session}, Epoch{o->second.epoch}});
      }
    }
    return view;
  }
  for (const auto& [key, o] : owners_) {
    if (key.first == queue) {
      view.owners.push_back({key.second, SessionId{o.session}, Epoch{o.epoch}});
    }
  }
  return view;
}

// Stamps the parts whose owner differs from the last move's with the new
// generation: what PgStore's triggers log row by row (migration 22), found
// here by comparing, so no path that changes owners can forget it.
void MemDatabase::MoveGenerationLocked(const std::string& queue) {
  const int64_t generation = ++generations_[queue];
  std::map<int, std::pair<std::string, int64_t>> now;
  for (auto o = owners_.lower_bound({queue, INT_MIN});
       o != owners_.end() && o->first.first == queue; ++o) {
    now[o->first.second] = {o->second.session, o->second.epoch};
  }
  std::map<int, std::pair<std::string, int64_t>>& before = last_owners_[queue];
  std::map<int, int64_t>& stamped = owner_changed_[queue];
  for (const auto& [part, owner] : now) {
    auto it = before.find(part);
    if (it == before.end() || it->second != owner) stamped[part] = generation;
  }
  for (const auto& [part, owner] : before) {
    if (now.count(part) == 0) stamped[part] = generation;
  }
  before = std::move(now);
}

CancelOutcome::Kind MemDatabase::CancelLocked(const std::string& queue, int64_t id) {
  using Kind = CancelOutcome::Kind;
  auto it = items_.find(id);
  if (it == items_.end()) {
    if (auto d = dead_.find(id); d != dead_.end()) {
      return d->second.queue == queue ? Kind::kDead : Kind::kUnknown;
    }
    if (auto c = cancelled_.find(id); c != cancelled_.end()) {
      return c->second.queue == queue ? Kind::kAlreadyCancelled : Kind::kUnknown;
    }
    if (auto r = results_.find(id); r != results_.end()) {
      return r->second.queue == queue ? Kind::kDone : Kind::kUnknown;
    }
    // As GetItemState: allocated and kept nowhere is an ack without a result.
    return id >= 1 && id < next_item_ ? Kind::kDone : Kind::kUnknown;
  }
  if (it->second.queue != queue) return Kind::kUnknown;
  const int part = it->second.item.part;
  // In flight: on the claim record of the part's owner at its epoch. A
  // record whose owner is gone (died) names items nobody runs.
  auto rec = claims_.find({queue, part});
  auto owner = owners_.find({queue, part});
  if (rec != claims_.end() && owner != owners_.end() && owner->second.epoch == rec->second.epoch &&
      std::find(rec->second.ids.begin(), rec->second.ids.end(), id) != rec->second.ids.end()) {
    return Kind::kInFlight;
  }
  StoredItem gone = std::move(it->second);
  gone.failed_at = clock_->Now();  // when it was cancelled
  items_.erase(it);
  cancelled_.emplace(id, std::move(gone));
  return Kind::kCancelled;
}

void MemDatabase::AbandonLocked(const std::string& queue, int part, int64_t epoch) {
  auto rec = claims_.find({queue, part});
  if (rec != claims_.end() && rec->second.epoch >= epoch) return;
  if (rec != claims_.end()) {
    for (int64_t id : rec->second.ids) {
      auto it = items_.find(id);
      if (it == items_.end() || it->second.queue != queue || it->second.item.part != part) continue;
      it->second.item.attempts += 1;
      it->second.abandoned_epoch = rec->second.epoch;
    }
  }
  claims_[{queue, part}] = ClaimRecord{epoch, {}};  // this tenure's, empty
}

std::vector<const MemDatabase::StoredItem*> MemDatabase::FairLocked(const ClaimRequest& req,
                                                                    const ClaimPart& cp,
                                                                    absl::Time now,
                                                                    const std::set<int64_t>& skip) {
  // As PgStore's FairItems (pg_store_sql.cc) reads: keys in turn from after
  // key_after and around, at most 2 * limit of them, each for an even share
  // of twice the limit (at most the limit) in id order from after its key
  // cursor; then keyless items among the part's first 2 * limit items due
  // (not in flight, not abandoned), their keys' bounds or cursors
  // notwithstanding. Looking behind (ClaimPart::behind), what came due
  // behind the keys' cursors comes first, in run_at order.
  const int limit = cp.limit;
  const std::string from = cp.key_after.value_or("");
  std::set<std::string> keys;
  std::vector<const StoredItem*> ready;   // id order
  std::vector<const StoredItem*> due;     // id order: where keyless items are looked for
  std::vector<const StoredItem*> behind;  // came due behind a key's cursor
  const int bound = KeyBound(req);
  std::map<std::string, int> older;  // bounded: older live items of a key
  const std::set<int> earlier = EarlierPartsLocked(req, cp);  // their items come first
  const std::map<std::string, int64_t> cursors(cp.key_cursors.begin(), cp.key_cursors.end());
  for (const auto& [key, id] : cursors) keys.insert(key);  // visited, items or not
  for (const auto& [id, s] : items_) {
    if (s.queue != req.queue) continue;
    if (earlier.count(s.item.part) > 0 && s.item.key) ++older[*s.item.key];
    if (s.item.part != cp.part) continue;
    auto c = s.item.key ? cursors.find(*s.item.key) : cursors.end();
    if (s.item.key) keys.insert(*s.item.key);
    const bool held = bound > 0 && s.item.key && older[*s.item.key]++ >= bound;
    if (s.item.run_at > now || s.abandoned_epoch != 0 || skip.count(id) > 0) continue;
    due.push_back(&s);
    if (held) continue;
    if (c != cursors.end() && id <= c->second) {  // read on from its cursor
      if (cp.behind && s.later) behind.push_back(&s);
      continue;
    }
    ready.push_back(&s);
  }
  std::stable_sort(behind.begin(), behind.end(), [](const StoredItem* a, const StoredItem* b) {
    return a->item.run_at < b->item.run_at;
  });
  std::vector<const StoredItem*> out(behind.begin(),
                                     behind.begin() + std::min<size_t>(behind.size(), limit));
  std::vector<std::string> turns(keys.upper_bound(from), keys.end());
  turns.insert(turns.end(), keys.begin(), keys.upper_bound(from));
  if (static_cast<int>(turns.size()) > 2 * limit) turns.resize(2 * limit);
  if (!turns.empty()) {
    const int visited = static_cast<int>(turns.size());
    const int share = std::min(limit, (2 * limit + visited - 1) / visited);
    std::map<std::string, size_t> pos;
    for (size_t i = 0; i < turns.size(); ++i) pos[turns[i]] = i;
    std::map<std::pair<int, size_t>, const StoredItem*> by_turn;  // (turn, key's place)
    std::map<std::string, int> taken;
    for (const StoredItem* s : ready) {
      if (!s->item.key) continue;
      auto p = pos.find(*s->item.key);
      if (p == pos.end()) continue;
      int& n = taken[*s->item.key];
      if (n >= share) continue;
      by_turn[{++n, p->second}] = s;
    }
    for (const auto& [turn, s] : by_turn) {
      if (static_cast<int>(out.size()) >= limit) break;
      out.push_back(s);
    }
  }
  if (static_cast<int>(out.size()) < limit) {
    std::vector<const StoredItem*> head = due;
    std::stable_sort(head.begin(), head.end(), [](const StoredItem* a, const StoredItem* b) {
      return ItemKey{a->item.priority, a->item.id} < ItemKey{b->item.priority, b->item.id};
    });
    if (static_cast<int>(head.size()) > 2 * limit) head.resize(2 * limit);
    for (const StoredItem* s : head) {
      if (static_cast<int>(out.size()) >= limit) break;
      if (!s->item.key) out.push_back(s);
    }
  }
  return out;
}

std::vector<Item> MemDatabase::ClaimLocked(const ClaimRequest& req,
                                           const std::set<int64_t>& extra_skip) {
  const absl::Time now = clock_->Now();
  std::set<int64_t> skip = extra_skip;
  for (const auto& [part, id] : req.in_flight) skip.insert(id);
  auto ours = [&](int part, int64_t epoch) {
    auto o = owners_.find({req.queue, part});
    return o != owners_.end() && o->second.epoch == epoch;
  };
  auto out_item = [&](const StoredItem& s, int64_t epoch, bool suspect) {
    Item it = s.item;
    it.attempts = s.item.attempts + 1;
    it.claim_epoch = Epoch{epoch};
    it.suspect = suspect;
    it.locator = 0;
    return it;
  };
  std::vector<Item> out;
  std::map<int, int64_t> taken_in;  // part -> epoch, for the records
  int64_t bytes = 0;                // the payloads taken, for max_bytes
  auto full = [&] { return req.max_bytes > 0 && bytes >= req.max_bytes; };
  for (const ClaimPart& cp : req.parts) {
    const int room = req.limit - static_cast<int>(out.size());
    if (room <= 0 || full()) break;
    if (!ours(cp.part, cp.epoch.value)) continue;
    std::vector<const StoredItem*> cands;
    if (req.fair) {
      cands = FairLocked(req, cp, now, skip);
      if (static_cast<int>(cands.size()) > room) cands.resize(room);
    } else {
      cands = InOrderLocked(req, cp, now, skip);
      if (static_cast<int>(cands.size()) > std::min(cp.limit, room)) {
        cands.resize(std::min(cp.limit, room));
      }
    }
    size_t taken = 0;
    for (; taken < cands.size() && !full(); ++taken) {
      out.push_back(out_item(*cands[taken], cp.epoch.value, false));
      bytes += static_cast<int64_t>(cands[taken]->item.payload.size());
    }
    if (taken > 0) taken_in[cp.part] = cp.epoch.value;
  }
  if (req.include_suspect && !req.session.value.empty()) {
    int64_t best_epoch = 0;
    const StoredItem* best = SuspectLocked(req, now, skip, &best_epoch);
    if (best != nullptr) {
      out.push_back(out_item(*best, best_epoch, true));
      taken_in[best->item.part] = best_epoch;
    }
  }
  // One order for the whole claim, suspect included, as PgStore returns it.
  std::sort(out.begin(), out.end(), [](const Item& a, const Item& b) {
    return ItemKey{a.priority, a.id} < ItemKey{b.priority, b.id};
  });
  RecordClaimLocked(req, taken_in, out);
  return out;
}

std::set<int> MemDatabase::EarlierPartsLocked(const ClaimRequest& req, const ClaimPart& cp) {
  std::set<int> earlier;
  if (KeyBound(req) == 0) return earlier;
  if (auto q = queues_.find(req.queue); q != queues_.end()) {
    for (int c : q->second.grown_from) {
      if (c <= cp.part) earlier.insert(cp.part % c);
    }
  }
  return earlier;
}

std::vector<const MemDatabase::StoredItem*> MemDatabase::InOrderLocked(
    const ClaimRequest& req, const ClaimPart& cp, absl::Time now, const std::set<int64_t>& skip) {
  std::vector<const StoredItem*> cands;
  // Ordered or bounded per key: the older live items of each key so far.
  const int bound = KeyBound(req);
  std::map<std::string, int> older;
  const std::set<int> earlier = EarlierPartsLocked(req, cp);
  // Ordered (not fair): released keys, whose next item is read behind `after` too.
  std::map<std::string, int64_t> released;
  const bool key_heads = !req.fair && req.ordered && cp.key_heads;
  if (!req.fair && req.ordered && !key_heads) {
    released.insert(cp.key_cursors.begin(), cp.key_cursors.end());
  }
  for (const auto& [id, s] : items_) {  // id order
    if (s.queue != req.queue) continue;
    if (earlier.count(s.item.part) > 0 && s.item.key) ++older[*s.item.key];
    if (s.item.part != cp.part) continue;
    // The first item of a released key after its id: that key's next.
    bool next_of_released = false;
    if (s.item.key) {
      if (auto r = released.find(*s.item.key); r != released.end() && id > r->second) {
        next_of_released = true;
        released.erase(r);
      }
    }
    if (bound > 0 && s.item.key && older[*s.item.key]++ >= bound) continue;
    if (s.item.run_at > now || s.abandoned_epoch != 0) continue;
    const ItemKey k{s.item.priority, s.item.id};
    // Behind `after`, only what came due there and a released key's next,
    // or with key_heads, a key's first items (within its bound: above);
    // up to the cursor, not what is in flight.
    const bool behind = cp.after && !(*cp.after < k);
    const bool head_of_key = key_heads && s.item.key.has_value();
    // A read from a floor at priority 0 or later reads the higher priorities from the head.
    const bool above =
        cp.above && !cp.key_heads && cp.after && cp.after->priority >= 0 && k.priority < 0;
    if (behind && !head_of_key && (key_heads || !cp.behind || !s.later) && !next_of_released &&
        !above) {
      continue;
    }
    if ((behind || !cp.cursor || !(*cp.cursor < k)) && skip.count(id) > 0) continue;
    cands.push_back(&s);
  }
  std::stable_sort(cands.begin(), cands.end(), [](const StoredItem* a, const StoredItem* b) {
    return ItemKey{a->item.priority, a->item.id} < ItemKey{b->item.priority, b->item.id};
  });
  return cands;
}

const MemDatabase::StoredItem* MemDatabase::SuspectLocked(const ClaimRequest& req, absl::Time now,
                                                          const std::set<int64_t>& skip,
                                                          int64_t* epoch) {
  const StoredItem* best = nullptr;
  for (const auto& [id, s] : items_) {
    if (s.queue != req.queue || s.abandoned_epoch == 0 || s.item.run_at > now) continue;
    if (skip.count(id) > 0) continue;
    auto o = owners_.find({req.queue, s.item.part});
    if (o == owners_.end() || o->second.session != req.session.value) continue;
    if (best == nullptr ||
        ItemKey{s.item.priority, id} < ItemKey{best->item.priority, best->item.id}) {
      best = &s;
      *epoch = o->second.epoch;
    }
  }
  return best;
}

void MemDatabase::RecordClaimLocked(const ClaimRequest& req, const std::map<int, int64_t>& taken_in,
                                    const std::vector<Item>& out) {
  for (const auto& [part, epoch] : taken_in) {
    ClaimRecord rec{epoch, {}};
    for (const auto& [p, id] : req.in_flight) {
      if (p == part) rec.ids.push_back(id);
    }
    for (const Item& it : out) {
      if (it.part == part) rec.ids.push_back(it.id);
    }
    auto slot = claims_.find({req.queue, part});
    if (slot != claims_.end() && slot->second.epoch == epoch) slot->second = std::move(rec);
  }
}

}  // namespace partq
