#include "coordinator/session.h"

#include <unistd.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "partitioner/assign.h"

namespace partq {
namespace {

std::string Hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

std::string PartList(const std::vector<OwnedPart>& parts) {
  return absl::StrJoin(parts, ",", [](std::string* out, const OwnedPart& p) {
    absl::StrAppend(out, p.part, "@", p.epoch.value);
  });
}

bool Transient(const absl::Status& st) {
  return absl::IsUnavailable(st) || absl::IsAborted(st) || absl::IsDeadlineExceeded(st);
}

}  // namespace

const char* Session::StateName(State s) {
  switch (s) {
    case State::kIdle: return "idle";
    case State::kJoining: return "joining";
    case State::kActive: return "active";
    case State::kLost: return "lost";
    case State::kLeaving: return "leaving";
    case State::kStopped: return "stopped";
  }
  return "?";
}

Session::Session(StoreFactory factory, SessionOptions options, PartListener* listener)
    : factory_(std::move(factory)),
      options_(std::move(options)),
      listener_(listener),
      metrics_(options_.metrics != nullptr ? *options_.metrics : SessionMetrics::Discard()) {}

Session::~Session() { Stop(); }

// The one place state changes; transitions outside this table are bugs.
void Session::SetState(State next) {
  absl::MutexLock lock(&mu_);
  const State prev = state_;
  bool valid = false;
  switch (next) {
    case State::kJoining: valid = prev == State::kIdle || prev == State::kLost; break;
    case State::kActive: valid = prev == State::kJoining; break;
    case State::kLost: valid = prev == State::kActive || prev == State::kJoining; break;
    case State::kLeaving: valid = prev == State::kActive || prev == State::kLost; break;
    case State::kStopped: valid = prev != State::kStopped; break;
    case State::kIdle: valid = false; break;
  }
  if (!valid) {
    PARTQ_LOG(Error) << "session " << id_ << ": invalid transition " << StateName(prev) << " -> "
                     << StateName(next);
    abort();
  }
  PARTQ_LOG(Debug) << "session " << id_ << ": " << StateName(prev) << " -> " << StateName(next);
  state_ = next;
}

Session::State Session::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

absl::Status Session::ended() const {
  absl::MutexLock lock(&mu_);
  return ended_;
}

SessionId Session::id() const {
  absl::MutexLock lock(&mu_);
  return id_;
}

std::vector<OwnedPart> Session::owned() const {
  absl::MutexLock lock(&mu_);
  return owned_;
}

std::optional<Epoch> Session::EpochOf(int part) const {
  absl::MutexLock lock(&mu_);
  for (const auto& p : owned_) {
    if (p.part == part) return p.epoch;
  }
  return std::nullopt;
}

int64_t Session::rounds() const {
  absl::MutexLock lock(&mu_);
  return rounds_;
}

bool Session::WaitStable(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&stable_), timeout);
}

void Session::SetItemsCallback(ItemsCallback cb) {
  absl::MutexLock lock(&mu_);
  items_cb_ = std::move(cb);
}

void Session::Poke() {
  absl::MutexLock lock(&mu_);
  poked_ = true;
}

absl::Status Session::EnsureStore() {
  if (store_ != nullptr) return absl::OkStatus();
  auto store = factory_();
  if (!store.ok()) return store.status();
  store_ = std::move(*store);
  return absl::OkStatus();
}

absl::Status Session::Join() {
  JoinRequest req;
  req.queue = options_.queue;
  req.instance_id = options_.instance_id;
  req.host = options_.host.empty() ? Hostname() : options_.host;
  req.pid = static_cast<int>(getpid());
  auto joined = store_->Join(req);
  if (!joined.ok()) return joined.status();
  std::vector<OwnedPart> kept = joined->kept;
  std::sort(kept.begin(), kept.end(),
            [](const OwnedPart& a, const OwnedPart& b) { return a.part < b.part; });
  {
    absl::MutexLock lock(&mu_);
    id_ = joined->id;
    incarnation_ = joined->incarnation;
    owned_ = kept;
    stable_ = false;
  }
  last_heartbeat_ok_ = absl::Now();
  PARTQ_LOG(Info) << "session " << joined->id << " joined " << options_.queue
                  << (kept.empty() ? "" : absl::StrCat(", kept parts ", PartList(kept)));
  SetState(State::kActive);
  if (!kept.empty()) listener_->OnAssign(kept);
  return absl::OkStatus();
}

absl::Status Session::Start(absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kIdle) return absl::FailedPreconditionError("session already started");
  }
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status st;
  for (;;) {
    st = EnsureStore();
    if (st.ok()) {
      auto config = store_->GetQueue(options_.queue);
      st = config.status();
      if (st.ok()) {
        config_ = *config;
        break;
      }
    }
    if (!Transient(st) || absl::Now() >= deadline) return st;
    store_.reset();
    absl::SleepFor(options_.retry_backoff);
  }
  SetState(State::kJoining);
  for (;;) {
    st = Join();
    if (st.ok()) break;
    if (!Transient(st) || absl::Now() >= deadline) {
      SetState(State::kStopped);
      return st;
    }
    store_.reset();
    absl::SleepFor(options_.retry_backoff);
    if (absl::Status e = EnsureStore(); !e.ok()) st = e;
  }
  thread_ = std::thread([this] { Run(); });
  if (!options_.poll_only) listen_thread_ = std::thread([this] { ListenLoop(); });
  return absl::OkStatus();
}

void Session::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kIdle) {
      state_ = State::kStopped;
      return;
    }
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  if (listen_thread_.joinable()) listen_thread_.join();
}

void Session::Abandon() {
  {
    absl::MutexLock lock(&mu_);
    abandon_ = true;
  }
  Stop();
}

void Session::LoseAll(const char* why) {
  std::vector<OwnedPart> lost;
  {
    absl::MutexLock lock(&mu_);
    lost.swap(owned_);
    stable_ = false;
  }
  PARTQ_LOG(Warning) << "session " << id() << " lost " << lost.size() << " parts: " << why;
  metrics_.Lost();
  metrics_.SetPartsOwned(0);
  SetState(State::kLost);
  listener_->OnLost(lost);
}

// OnRevoke may wait for in-flight batches (up to the drain timeout), and this
// thread is the one that heartbeats: a drain longer than the TTL would let
// the session expire mid-drain, its parts go ownerless and its finished acks
// be fenced (found by the handler_timeout fault scenario). So while the
// listener drains, a helper thread heartbeats on its own connection.
void Session::RevokeKeepingAlive(const std::vector<OwnedPart>& parts) {
  const absl::Duration every = options_.heartbeat_interval > absl::ZeroDuration()
                                   ? options_.heartbeat_interval
                                   : config_.session_ttl / 4;
  absl::Mutex done_mu;
  bool done = false;
  absl::Time last_ok = absl::InfinitePast();  // keepalive thread only, read after join
  std::thread keepalive([&] {
    std::unique_ptr<Store> store;
    SessionId me;
    int64_t inc;
    {
      absl::MutexLock lock(&mu_);
      me = id_;
      inc = incarnation_;
    }
    absl::MutexLock lock(&done_mu);
    while (!done_mu.AwaitWithTimeout(absl::Condition(&done), every)) {
      done_mu.Unlock();
      if (store == nullptr) {
        auto s = factory_();
        if (s.ok()) store = std::move(*s);
      }
      if (store != nullptr) {
        auto view = store->Heartbeat(options_.queue, me, inc);
        if (!view.ok()) {
          store.reset();
        } else if (view->alive) {
          last_ok = absl::Now();
        }
      }
      done_mu.Lock();
    }
  });
  listener_->OnRevoke(parts);
  {
    absl::MutexLock lock(&done_mu);
    done = true;
  }
  keepalive.join();
  last_heartbeat_ok_ = std::max(last_heartbeat_ok_, last_ok);
}

void Session::Run() {
  const absl::Duration ttl = config_.session_ttl;
  const absl::Duration hb_every = options_.heartbeat_interval > absl::ZeroDuration()
                                      ? options_.heartbeat_interval
                                      : ttl / 4;
  absl::Time next_hb = absl::Now() + hb_every;
  absl::Time next_tick = absl::Now();  // rebalance once right after joining
  absl::Time last_tick = absl::InfinitePast();
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this] { return poked_ || stopping_; };
      mu_.AwaitWithDeadline(absl::Condition(&wake), std::min(next_hb, next_tick));
      if (stopping_) break;
      // Group notices come in bursts (every join, release and acquire of any
      // member sends one), and each would make every member read the group:
      // 100 sessions starting together read it 36k times. Reading at most
      // once per min_tick_gap folds a burst into one read.
      if (poked_ && absl::Now() < last_tick + options_.min_tick_gap) {
        auto stop = [this] { return stopping_; };
        mu_.AwaitWithDeadline(absl::Condition(&stop), last_tick + options_.min_tick_gap);
        if (stopping_) break;
      }
      poked_ = false;
    }
    const absl::Time now = absl::Now();
    const bool heartbeat = now >= next_hb;
    last_tick = now;
    absl::Status st = Tick(heartbeat);
    metrics_.SetPartsOwned(owned().size());
    if (st.ok()) {
      if (heartbeat) next_hb = now + hb_every;
      bool stable;
      {
        absl::MutexLock lock(&mu_);
        stable = stable_;
      }
      next_tick = now + (stable ? (options_.poll_only ? options_.group_poll : hb_every)
                                : options_.handoff_poll);
      continue;
    }
    if (absl::IsNotFound(st)) {
      // The store found no queue (a re-join, or a heartbeat where the
      // session row outlives it): it was deleted while we ran. Retrying
      // cannot help, and a worker polling for a queue nobody will create
      // again is a silent fault; stop and let the owner report it.
      PARTQ_LOG(Error) << "session " << id() << ": " << st << "; stopping";
      if (state() == State::kActive) LoseAll("the queue is gone");
      absl::MutexLock lock(&mu_);
      ended_ = st;
      stopping_ = true;  // the listener thread too
      break;
    }
    PARTQ_LOG(Warning) << "session " << id() << ": " << st;
    if (absl::IsUnavailable(st)) store_.reset();
    // Without a heartbeat for a whole TTL the others may have expired us: stop
    // working on our parts (their acks would be fenced anyway) and re-join.
    if (state() == State::kActive && absl::Now() - last_heartbeat_ok_ > ttl) {
      LoseAll("no successful heartbeat within the session TTL");
    }
    next_tick = absl::Now() + options_.retry_backoff;
    // The heartbeat goes with the retry at the latest; one that just failed
    // (its time is past) goes with it too, not at once again: a loop that
    // retried at once would spin on a database that refuses connections.
    next_hb = heartbeat ? next_tick : std::min(next_hb, next_tick);
  }

  bool abandon;
  {
    absl::MutexLock lock(&mu_);
    abandon = abandon_;
  }
  if (!abandon && state() == State::kActive) {
    SetState(State::kLeaving);
    std::vector<OwnedPart> parts = owned();
    if (!parts.empty()) RevokeKeepingAlive(parts);
    absl::Status st;
    for (int attempt = 0; attempt < 5; ++attempt) {
      st = EnsureStore();
      if (st.ok()) st = store_->Leave(options_.queue, id(), incarnation_);
      if (st.ok() || !Transient(st)) break;
      store_.reset();
      absl::SleepFor(options_.retry_backoff);
    }
    if (!st.ok()) PARTQ_LOG(Warning) << "leave failed (the session will expire): " << st;
    absl::MutexLock lock(&mu_);
    owned_.clear();
  }
  SetState(State::kStopped);
  metrics_.SetPartsOwned(0);
  store_.reset();
}

absl::Status Session::Tick(bool heartbeat) {
  if (absl::Status st = EnsureStore(); !st.ok()) {
    if (heartbeat) metrics_.HeartbeatFailed();
    return st;
  }
  if (state() == State::kLost) {
    SetState(State::kJoining);
    if (absl::Status st = Join(); !st.ok()) {
      SetState(State::kLost);
      return st;
    }
  }
  absl::StatusOr<GroupView> view;
  if (heartbeat) {
    SessionId me;
    int64_t inc;
    {
      absl::MutexLock lock(&mu_);
      me = id_;
      inc = incarnation_;
    }
    view = store_->Heartbeat(options_.queue, me, inc);
    if (!view.ok()) {
      metrics_.HeartbeatFailed();
      return view.status();
    }
    if (!view->alive) {
      LoseAll("session row gone (expired, or replaced by a static re-join)");
      SetState(State::kJoining);
      if (absl::Status st = Join(); !st.ok()) {
        SetState(State::kLost);
        return st;
      }
      view = store_->ReadGroup(options_.queue);
      if (!view.ok()) return view.status();
    }
    last_heartbeat_ok_ = absl::Now();
    if (view->expired > 0) {
      metrics_.Expired(view->expired);
      PARTQ_LOG(Info) << "expired " << view->expired << " session(s) of " << options_.queue;
    }
  } else {
    view = store_->ReadGroup(options_.queue);
    if (!view.ok()) return view.status();
  }
  return Rebalance(*view);
}

absl::Status Session::Rebalance(const GroupView& view) {
  const int parts = config_.parts;
  const SessionId me = id();
  std::vector<std::string> members;
  members.reserve(view.members.size() + 1);
  bool found = false;
  for (const auto& m : view.members) {
    members.push_back(m.value);
    found = found || m == me;
  }
  if (!found) {  // a group read can race our own heartbeat; we are alive
    members.insert(std::upper_bound(members.begin(), members.end(), me.value), me.value);
  }
  std::vector<std::optional<std::string>> current(parts);
  std::map<int, Epoch> mine_in_db;
  for (const auto& o : view.owners) {
    if (o.part < 0 || o.part >= parts) continue;
    current[o.part] = o.session.value;
    if (o.session == me) mine_in_db[o.part] = o.epoch;
  }

  // Reconcile what we think we own with what the database says.
  std::vector<OwnedPart> lost, adopted;
  {
    absl::MutexLock lock(&mu_);
    std::vector<OwnedPart> keep;
    for (const auto& p : owned_) {
      auto it = mine_in_db.find(p.part);
      if (it != mine_in_db.end() && it->second == p.epoch) {
        keep.push_back(p);
      } else {
        lost.push_back(p);
      }
    }
    for (const auto& [part, epoch] : mine_in_db) {
      bool known = std::any_of(keep.begin(), keep.end(),
                               [part = part](const OwnedPart& p) { return p.part == part; });
      if (!known) {
        adopted.push_back({part, epoch});
        keep.push_back({part, epoch});
      }
    }
    std::sort(keep.begin(), keep.end(),
              [](const OwnedPart& a, const OwnedPart& b) { return a.part < b.part; });
    owned_ = std::move(keep);
  }
  if (!lost.empty()) {
    PARTQ_LOG(Warning) << "session " << me << " no longer owns " << PartList(lost);
    listener_->OnLost(lost);
  }
  if (!adopted.empty()) listener_->OnAssign(adopted);

  const Assignment target = config_.assignment == AssignmentKind::kSticky
                                ? StickyAssign(members, current, parts)
                                : LexicalAssign(members, parts);
  const auto plans = PlanMoves(members, current, target);
  const auto plan_it = plans.find(me.value);
  MemberPlan plan = plan_it == plans.end() ? MemberPlan{} : plan_it->second;
  {
    // A hand-off lasts from the first round that wants a part to the round
    // that acquires it; a part the plan no longer wants starts over.
    std::map<int, absl::Time> wanted;
    for (int part : plan.acquire) {
      auto it = wanted_since_.find(part);
      wanted[part] = it == wanted_since_.end() ? absl::Now() : it->second;
    }
    wanted_since_ = std::move(wanted);
  }
  bool changed = false;

  if (!plan.release.empty()) {
    std::vector<OwnedPart> give;
    {
      absl::MutexLock lock(&mu_);
      for (int part : plan.release) {
        for (const auto& p : owned_) {
          if (p.part == part) give.push_back(p);
        }
      }
    }
    PARTQ_LOG(Info) << "session " << me << " releasing " << PartList(give);
    const absl::Time revoke_start = absl::Now();
    RevokeKeepingAlive(give);
    if (absl::Status st = store_->ReleaseParts(options_.queue, me, give); !st.ok()) {
      // Still ours (same epochs): hand them back to the listener, so they are
      // not left unworked if the next round's plan no longer releases them.
      listener_->OnAssign(give);
      absl::MutexLock lock(&mu_);
      stable_ = false;
      return st;
    }
    metrics_.Revoked(absl::Now() - revoke_start);
    changed = true;
    absl::MutexLock lock(&mu_);
    owned_.erase(std::remove_if(owned_.begin(), owned_.end(),
                                [&](const OwnedPart& p) {
                                  return std::find(plan.release.begin(), plan.release.end(),
                                                   p.part) != plan.release.end();
                                }),
                 owned_.end());
  }

  bool pending = false;
  std::vector<int> want;
  for (int part : plan.acquire) {
    if (current[part].has_value()) {
      pending = true;  // its owner must release it first
    } else {
      want.push_back(part);
    }
  }
  if (!want.empty()) {
    auto got = store_->AcquireParts(options_.queue, me, want);
    if (!got.ok()) {
      absl::MutexLock lock(&mu_);
      stable_ = false;
      return got.status();
    }
    if (got->size() < want.size()) pending = true;  // someone else was quicker
    if (!got->empty()) {
      {
        absl::MutexLock lock(&mu_);
        owned_.insert(owned_.end(), got->begin(), got->end());
        std::sort(owned_.begin(), owned_.end(),
                  [](const OwnedPart& a, const OwnedPart& b) { return a.part < b.part; });
      }
      PARTQ_LOG(Info) << "session " << me << " acquired " << PartList(*got);
      listener_->OnAssign(*got);
      for (const auto& p : *got) {
        metrics_.HandedOff(absl::Now() - wanted_since_[p.part]);
        wanted_since_.erase(p.part);
      }
      changed = true;
    }
  }
  if (changed) metrics_.Rebalanced();
  absl::MutexLock lock(&mu_);
  stable_ = !pending;
  ++rounds_;
  return absl::OkStatus();
}

void Session::ListenLoop() {
  std::unique_ptr<Store> store;
  std::unique_ptr<Listener> listener;
  auto stopping = [this] {
    absl::MutexLock lock(&mu_);
    return stopping_;
  };
  while (!stopping()) {
    if (listener == nullptr) {
      absl::Status st;
      if (store == nullptr) {
        auto s = factory_();
        st = s.status();
        if (s.ok()) store = std::move(*s);
      }
      if (store != nullptr) {
        auto l = store->Listen(options_.queue);
        st = l.status();
        if (l.ok()) listener = std::move(*l);
      }
      if (absl::IsUnimplemented(st)) return;
      if (listener == nullptr) {
        store.reset();
        absl::SleepFor(options_.retry_backoff);
        continue;
      }
      // Notices may have been missed while we were not listening.
      Poke();
      ItemsCallback cb;
      {
        absl::MutexLock lock(&mu_);
        cb = items_cb_;
      }
      if (cb) cb(-1);
    }
    auto notices = listener->Wait(absl::Milliseconds(250));
    if (!notices.ok()) {
      listener.reset();
      store.reset();
      continue;
    }
    ItemsCallback cb;
    {
      absl::MutexLock lock(&mu_);
      cb = items_cb_;
    }
    for (const auto& n : *notices) {
      if (n.kind == Notice::Kind::kGroup) {
        Poke();
      } else if (cb) {
        cb(n.part);
      }
    }
  }
}

}  // namespace partq
