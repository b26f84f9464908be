#include "coordinator/session.h"

#include <unistd.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/log.h"
#include "coordinator/rebalance.h"

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
    case State::kIdle:
      return "idle";
    case State::kJoining:
      return "joining";
    case State::kActive:
      return "active";
    case State::kLost:
      return "lost";
    case State::kLeaving:
      return "leaving";
    case State::kStopped:
      return "stopped";
  }
  return "?";
}

Session::Session(StoreFactory factory, SessionOptions options, PartListener* listener)
    : factory_(std::move(factory)),
      options_(std::move(options)),
      clock_(options_.clock),
      listener_(listener),
      metrics_(options_.metrics != nullptr ? *options_.metrics : SessionMetrics::Discard()) {}

Session::~Session() { Stop(); }

void Session::SetState(State next) {
  absl::MutexLock lock(&mu_);
  SetStateLocked(next);
}

// The one place state changes; transitions outside this table are bugs.
void Session::SetStateLocked(State next) {
  const State prev = state_;
  bool valid = false;
  switch (next) {
    case State::kJoining:
      valid = prev == State::kIdle || prev == State::kLost;
      break;
    case State::kActive:
      valid = prev == State::kJoining;
      break;
    case State::kLost:
      valid = prev == State::kActive || prev == State::kJoining;
      break;
    case State::kLeaving:
      valid = prev == State::kActive || prev == State::kLost;
      break;
    case State::kStopped:
      valid = prev != State::kStopped;
      break;
    case State::kIdle:
      valid = false;
      break;
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
  return parts_.Held();
}

std::optional<Epoch> Session::EpochOf(int part) const {
  absl::MutexLock lock(&mu_);
  return parts_.EpochOf(part);
}

int64_t Session::rounds() const {
  absl::MutexLock lock(&mu_);
  return rounds_;
}

int64_t Session::plans() const {
  absl::MutexLock lock(&mu_);
  return plans_;
}

bool Session::WaitStable(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return clock_->AwaitWithTimeout(mu_, absl::Condition(&stable_), timeout);
}

void Session::SetItemsCallback(ItemsCallback cb) {
  absl::MutexLock lock(&mu_);
  items_cb_ = std::move(cb);
}

void Session::SetNoticeCallback(NoticeCallback cb) {
  absl::MutexLock lock(&mu_);
  notice_cb_ = std::move(cb);
}

void Session::SetPausedCallback(PausedCallback cb) {
  absl::MutexLock lock(&mu_);
  paused_cb_ = std::move(cb);
}

bool Session::paused() const {
  absl::MutexLock lock(&mu_);
  return paused_;
}

void Session::SetRateCallback(RateCallback cb) {
  absl::MutexLock lock(&mu_);
  rate_cb_ = std::move(cb);
}

void Session::SetFinishedCallback(FinishedCallback cb) {
  absl::MutexLock lock(&mu_);
  finished_cb_ = std::move(cb);
}

FinishCounts Session::Finished() const {
  FinishedCallback cb;
  {
    absl::MutexLock lock(&mu_);
    cb = finished_cb_;
  }
  return cb ? cb() : FinishCounts{};
}

void Session::NoteRate(std::optional<double> rate) {
  RateCallback cb;
  {
    absl::MutexLock lock(&mu_);
    if (rate == rate_) return;
    rate_ = rate;
    cb = rate_cb_;
  }
  PARTQ_LOG(Info) << "queue " << options_.queue << ": "
                  << (rate ? absl::StrCat("rate limit ", *rate, " items/s") : "no rate limit");
  if (cb) cb(rate, queue_parts());
}

int Session::queue_parts() const {
  absl::MutexLock lock(&mu_);
  return queue_parts_;
}

void Session::NoteParts(int parts) {
  RateCallback cb;
  std::optional<double> rate;
  int before;
  {
    absl::MutexLock lock(&mu_);
    // A count only grows; a view from a store that does not say (0) keeps
    // ours.
    if (parts <= queue_parts_) return;
    before = queue_parts_;
    queue_parts_ = parts;
    if (rate_) cb = rate_cb_;
    rate = rate_;
  }
  PARTQ_LOG(Info) << "queue " << options_.queue << " grew from " << before << " to " << parts
                  << " parts";
  if (cb) cb(rate, parts);
}

void Session::NotePaused(bool paused) {
  PausedCallback cb;
  {
    absl::MutexLock lock(&mu_);
    if (paused == paused_) return;
    paused_ = paused;
    cb = paused_cb_;
  }
  PARTQ_LOG(Info) << "queue " << options_.queue << (paused ? " paused" : " resumed");
  if (cb) cb(paused);
}

void Session::Poke() {
  absl::MutexLock lock(&mu_);
  poked_ = true;
}

absl::Status Session::EnsureStore() {
  if (store_ != nullptr) return absl::OkStatus();
  auto store = factory_();
  if (!store.ok()) return store.status();
  if (!options_.poll_only && options_.notices != nullptr) {
    // The process listens for all its queues on one connection.
    absl::MutexLock lock(&mu_);
    listening_ = Listening::kOwn;
  } else if (!options_.poll_only) {
    // Heartbeats and LISTEN on one connection: half the connections of an
    // idle worker (docs/guide/operations-and-roles.md, "Connections").
    auto l = (*store)->ListenHere(options_.queue);
    if (!l.ok() && absl::IsUnavailable(l.status())) return l.status();
    absl::MutexLock lock(&mu_);
    if (l.ok()) {
      listening_ = Listening::kOnSession;
      session_listener_ = std::move(*l);
      ++listeners_made_;
    } else {
      // The listener thread tries its own connection (and reports why
      // that fails, if it does).
      listening_ = Listening::kOwn;
    }
  }
  store_ = std::move(*store);
  return absl::OkStatus();
}

bool Session::ClosesBetweenRounds() const {
  return options_.hub != nullptr && (options_.poll_only || options_.notices != nullptr);
}

absl::Status Session::Join() {
  JoinRequest req;
  req.queue = options_.queue;
  req.instance_id = options_.instance_id;
  req.host = options_.host.empty() ? Hostname() : options_.host;
  req.pid = static_cast<int>(getpid());
  const absl::Time sent = clock_->Now();
  auto joined = store_->Join(req);
  if (!joined.ok()) return joined.status();
  known_generation_ = kNoGeneration;
  std::vector<OwnedPart> kept = joined->kept;
  std::sort(kept.begin(), kept.end(),
            [](const OwnedPart& a, const OwnedPart& b) { return a.part < b.part; });
  absl::MutexLock callbacks(&listener_mu_);  // the lease thread waits for the kept parts' OnAssign
  {
    absl::MutexLock lock(&mu_);
    id_ = joined->id;
    incarnation_ = joined->incarnation;
    parts_.set_who(absl::StrCat("session ", id_.value));
    parts_.Set(kept, PartState::kOwned);
    stable_ = false;
  }
  Renewed(sent);
  PARTQ_LOG(Info) << "session " << joined->id << " joined " << options_.queue
                  << (kept.empty() ? "" : absl::StrCat(", kept parts ", PartList(kept)));
  SetState(State::kActive);
  // Before the kept parts reach the listener: a static member restarting on
  // a paused queue must not claim in them (its first group view comes later).
  NotePaused(joined->paused);
  NoteRate(joined->rate);
  if (!kept.empty()) listener_->OnAssign(kept);
  return absl::OkStatus();
}

absl::Status Session::Rejoin() {
  SetState(State::kJoining);
  absl::Status st = Join();
  if (!st.ok()) SetState(State::kLost);
  return st;
}

absl::Status Session::Start(absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kIdle) return absl::FailedPreconditionError("session already started");
  }
  const absl::Time deadline = clock_->Now() + timeout;
  absl::Status st;
  for (;;) {
    st = EnsureStore();
    if (st.ok()) {
      auto config = store_->GetQueue(options_.queue);
      st = config.status();
      if (st.ok()) {
        config_ = *config;
        absl::MutexLock lock(&mu_);
        queue_parts_ = config_.parts;
        break;
      }
    }
    if (!Transient(st) || clock_->Now() >= deadline) return st;
    store_.reset();
    clock_->SleepFor(options_.retry_backoff);
  }
  heartbeat_.emplace(clock_,
                     options_.heartbeat_interval > absl::ZeroDuration()
                         ? options_.heartbeat_interval
                         : DefaultHeartbeatInterval(config_.session_ttl),
                     config_.session_ttl, /*aligned=*/options_.hub != nullptr);
  SetState(State::kJoining);
  for (;;) {
    // A reconnect that failed leaves no store to join through: wait and
    // connect again (a server restarting refuses connections for seconds).
    st = EnsureStore();
    if (st.ok()) st = Join();
    if (st.ok()) break;
    if (!Transient(st) || clock_->Now() >= deadline) {
      SetState(State::kStopped);
      return st;
    }
    store_.reset();
    clock_->SleepFor(options_.retry_backoff);
  }
  thread_ = std::thread([this] { Run(); });
  lease_thread_ = std::thread([this] { LeaseLoop(); });
  if (!options_.poll_only) listen_thread_ = std::thread([this] { ListenLoop(); });
  return absl::OkStatus();
}

void Session::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kIdle) {
      SetStateLocked(State::kStopped);
      return;
    }
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  if (listen_thread_.joinable()) listen_thread_.join();
  if (lease_thread_.joinable()) lease_thread_.join();
}

void Session::Abandon() {
  {
    absl::MutexLock lock(&mu_);
    abandon_ = true;
  }
  Stop();
}

void Session::Lose(const std::vector<OwnedPart>& parts, Loss loss, const char* why) {
  absl::MutexLock callbacks(&listener_mu_);
  LoseLocked(parts, loss, why);
}

// Only the parts still owned at those epochs: the lease thread may have lost
// some since the caller listed them.
void Session::LoseLocked(const std::vector<OwnedPart>& parts, Loss loss, const char* why) {
  std::vector<OwnedPart> lost;
  {
    absl::MutexLock lock(&mu_);
    for (const OwnedPart& p : parts) {
      if (parts_.state(p.part) == PartState::kOwned && parts_.EpochOf(p.part) == p.epoch) {
        lost.push_back(p);
      }
    }
    parts_.Set(lost, PartState::kLost);
    if (loss == Loss::kSession) stable_ = false;
  }
  if (!lost.empty() || loss == Loss::kSession) {
    PARTQ_LOG(Warning) << "session " << id() << " lost " << lost.size() << " parts"
                       << (lost.empty() ? "" : absl::StrCat(" (", PartList(lost), ")")) << ": "
                       << why;
  }
  if (loss == Loss::kSession) {
    metrics_.Lost();
    metrics_.SetPartsOwned(0);
    SetState(State::kLost);
  }
  if (!lost.empty()) listener_->OnLost(lost);
}

// While the lease has lapsed, parts the database gives us (an acquisition, or
// the view listing them as ours) may already be expired by the time anyone
// acts on them: they go straight to lost, unreported, and the first round
// after a heartbeat that renews the lease adopts those still ours.
void Session::Assign(const std::vector<OwnedPart>& parts) {
  absl::MutexLock callbacks(&listener_mu_);
  {
    absl::MutexLock lock(&mu_);
    parts_.Set(parts, PartState::kOwned);
    if (LapsedLocked()) {
      parts_.Set(parts, PartState::kLost);
      stable_ = false;
      return;
    }
  }
  listener_->OnAssign(parts);
}

void Session::Renewed(absl::Time sent) {
  heartbeat_->AliveAt(sent);
  absl::MutexLock lock(&mu_);
  lease_start_ = std::max(lease_start_, sent);
}

bool Session::LapsedLocked() const { return clock_->Now() >= lease_start_ + config_.session_ttl; }

// Waits for the lease's end, which each renewal moves on; at the end, the
// owned parts are lost (revoking ones are being given up on the session
// thread, and the listener already stopped working on them). A lapsed lease
// is lost once: the thread then waits for a renewal or a re-join.
void Session::LeaseLoop() {
  absl::Time lapsed = absl::InfinitePast();  // the lease start that lapsed last
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      const absl::Time start = lease_start_;
      const bool armed = state_ == State::kActive && start != lapsed;
      const bool active = state_ == State::kActive;
      auto moved = [&] {
        return stopping_ || lease_start_ != start || (state_ == State::kActive) != active;
      };
      if (clock_->AwaitWithDeadline(mu_, absl::Condition(&moved),
                                    armed ? start + config_.session_ttl : absl::InfiniteFuture())) {
        if (stopping_) return;
        continue;
      }
      lapsed = start;
    }
    absl::MutexLock callbacks(&listener_mu_);
    std::vector<OwnedPart> owned;
    {
      absl::MutexLock lock(&mu_);
      if (state_ != State::kActive || !LapsedLocked()) continue;  // renewed meanwhile
      for (const OwnedPart& p : parts_.Held()) {
        if (parts_.state(p.part) == PartState::kOwned) owned.push_back(p);
      }
    }
    LoseLocked(owned, Loss::kParts,
               "the session TTL passed since its last heartbeat that answered was sent");
  }
}

// OnRevoke may wait for in-flight batches (up to the drain timeout), and this
// thread is the one that heartbeats: a drain longer than the TTL would let
// the session expire mid-drain, its parts go ownerless and its finished acks
// be fenced (found by the handler_timeout fault scenario). So while the
// listener drains, a helper thread heartbeats on its own connection.
void Session::RevokeKeepingAlive(const std::vector<OwnedPart>& parts) {
  const absl::Duration every = heartbeat_->interval();
  SessionId me;
  int64_t inc;
  {
    absl::MutexLock lock(&mu_);
    me = id_;
    inc = incarnation_;
    revoked_ = false;
  }
  // Only `alive` is used here: passing the generation spares the owner rows.
  const int64_t known = known_generation_;
  absl::Time last_alive = absl::InfinitePast();  // keepalive thread only, read after join
  std::thread keepalive([&] {
    std::unique_ptr<Store> store;
    // Waits on mu_, not on a mutex of this frame: a ManualClock's Advance
    // may still touch a wait's mutex after the wait has ended.
    absl::MutexLock lock(&mu_);
    while (!clock_->AwaitWithTimeout(mu_, absl::Condition(&revoked_), every)) {
      mu_.Unlock();
      if (store == nullptr) {
        auto s = factory_();
        if (s.ok()) store = std::move(*s);
      }
      absl::Time alive = absl::InfinitePast();
      if (store != nullptr) {
        const absl::Time sent = clock_->Now();
        auto view = store->HeartbeatSince(options_.queue, me, inc, known, FinishCounts{});
        if (!view.ok()) {
          store.reset();
        } else if (view->alive) {
          alive = last_alive = sent;
        }
      }
      mu_.Lock();
      lease_start_ = std::max(lease_start_, alive);  // the lease thread renews meanwhile
    }
  });
  listener_->OnRevoke(parts);
  {
    absl::MutexLock lock(&mu_);
    revoked_ = true;
  }
  keepalive.join();
  heartbeat_->AliveAt(last_alive);
}

void Session::Run() {
  heartbeat_->Sent(clock_->Now());        // the join was the first heartbeat
  absl::Time next_round = clock_->Now();  // rebalance once right after joining
  absl::Time last_round = absl::InfinitePast();
  while (AwaitRound(next_round, last_round)) {
    const absl::Time now = clock_->Now();
    const bool heartbeat = heartbeat_->Due(now);
    last_round = now;
    {
      absl::MutexLock lock(&mu_);
      in_round_ = true;
    }
    absl::Status st = Tick(heartbeat);
    {
      absl::MutexLock lock(&mu_);
      in_round_ = false;
    }
    metrics_.SetPartsOwned(owned().size());
    if (st.ok()) {
      if (heartbeat) heartbeat_->Sent(now);
      bool stable;
      {
        absl::MutexLock lock(&mu_);
        stable = stable_;
      }
      next_round =
          now + (stable ? (options_.poll_only ? options_.group_poll : heartbeat_->interval())
                        : options_.handoff_poll);
      // With the process's hubs, a settled session needs no connection
      // between rounds: its heartbeats and notices come through them.
      if (stable && ClosesBetweenRounds()) store_.reset();
      continue;
    }
    if (absl::IsNotFound(st)) {
      // The store found no queue (the group read at the delete's notice, a
      // re-join, or a heartbeat where the session row outlives it): it was
      // deleted while we ran. Retrying cannot help, and a worker polling
      // for a queue nobody will create again is a silent fault; stop and
      // let the owner report it.
      PARTQ_LOG(Error) << "session " << id() << ": the queue is gone, deleted while it ran ("
                       << st.message() << "); stopping";
      if (state() == State::kActive) Lose(owned(), Loss::kSession, "the queue is gone");
      absl::MutexLock lock(&mu_);
      ended_ = st;
      stopping_ = true;  // the listener thread too
      break;
    }
    RoundFailed(st, heartbeat, &next_round);
  }
  Leave();
}

bool Session::AwaitRound(absl::Time next_round, absl::Time last_round) {
  absl::MutexLock lock(&mu_);
  auto wake = [this] { return poked_ || stopping_; };
  clock_->AwaitWithDeadline(mu_, absl::Condition(&wake), std::min(heartbeat_->next(), next_round));
  if (stopping_) return false;
  // Group notices come in bursts (every join, release and acquire of any
  // member sends one), and each would make every member read the group: 100
  // sessions starting together read it 36k times. Reading at most once per
  // min_tick_gap folds a burst into one read.
  if (poked_ && clock_->Now() < last_round + options_.min_tick_gap) {
    auto stop = [this] { return stopping_; };
    clock_->AwaitWithDeadline(mu_, absl::Condition(&stop), last_round + options_.min_tick_gap);
    if (stopping_) return false;
  }
  poked_ = false;
  return true;
}

void Session::RoundFailed(const absl::Status& st, bool heartbeat, absl::Time* next_round) {
  PARTQ_LOG(Warning) << "session " << id() << ": " << st;
  if (absl::IsUnavailable(st)) store_.reset();
  // Without a heartbeat for a whole TTL the others may have expired us: stop
  // working on our parts (their acks would be fenced anyway) and re-join.
  if (state() == State::kActive && heartbeat_->Expired()) {
    Lose(owned(), Loss::kSession, "no successful heartbeat within the session TTL");
  }
  *next_round = clock_->Now() + options_.retry_backoff;
  heartbeat_->Retry(*next_round, heartbeat);
}

// What the drain finished (and anything else since the last heartbeat)
// would otherwise never be counted: the session row goes with the leave.
// One more heartbeat, only when there is something to say; best effort (a
// failure costs a few seconds of counts, not the leave).
void Session::ReportLastFinished() {
  const FinishCounts finished = Finished();
  if ((finished - reported_).empty() || !EnsureStore().ok()) return;
  int64_t inc;
  {
    absl::MutexLock lock(&mu_);
    inc = incarnation_;
  }
  auto view = store_->Heartbeat(options_.queue, id(), inc, finished - reported_);
  if (view.ok() && view->alive) {
    reported_ = finished;
  } else if (!view.ok()) {
    store_.reset();
  }
}

void Session::Leave() {
  bool abandon;
  {
    absl::MutexLock lock(&mu_);
    abandon = abandon_;
  }
  if (!abandon && state() == State::kActive) {
    SetState(State::kLeaving);
    std::vector<OwnedPart> held;
    {
      absl::MutexLock lock(&mu_);
      held = parts_.Held();
      parts_.Set(held, PartState::kRevoking);
    }
    if (!held.empty()) RevokeKeepingAlive(held);
    ReportLastFinished();
    // A static member keeps its session and parts for its restart: only what
    // it claimed and did not finish goes back (no attempt counted).
    const bool keep = !options_.instance_id.empty() && !options_.leave_on_stop;
    absl::Status st;
    for (int attempt = 0; attempt < 5; ++attempt) {
      st = EnsureStore();
      if (st.ok()) {
        st = keep ? store_->ReleaseClaims(options_.queue, id(), incarnation_)
                  : store_->Leave(options_.queue, id(), incarnation_);
      }
      if (st.ok() || !Transient(st)) break;
      store_.reset();
      clock_->SleepFor(options_.retry_backoff);
    }
    // Given up either way: a failed leave only means the others wait for
    // the TTL instead of taking the parts at once.
    if (!st.ok() && !keep) {
      PARTQ_LOG(Warning) << "leave failed (the session will expire): " << st;
    } else if (!st.ok()) {
      // Its unfinished claims are then abandoned: one attempt each, as after a crash.
      PARTQ_LOG(Warning) << "releasing the claims of static member \"" << options_.instance_id
                         << "\" failed: " << st;
    } else if (keep) {
      PARTQ_LOG(Info) << "static member \"" << options_.instance_id << "\" stopped; its "
                      << held.size() << " parts stay reserved for it until its session TTL";
    }
    absl::MutexLock lock(&mu_);
    parts_.Set(held, PartState::kReleased);
  }
  SetState(State::kStopped);
  metrics_.SetPartsOwned(0);
  store_.reset();
}

absl::Status Session::Tick(bool heartbeat) {
  // A heartbeat through the hub needs no connection of ours; what follows it
  // (a re-join, a group read, a rebalance) connects when it needs one.
  const bool lazy = heartbeat && options_.hub != nullptr && state() != State::kLost;
  if (absl::Status st = lazy ? absl::OkStatus() : EnsureStore(); !st.ok()) {
    if (heartbeat) metrics_.HeartbeatFailed();
    return st;
  }
  if (state() == State::kLost) {
    if (absl::Status st = Rejoin(); !st.ok()) return st;
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
    // Counts not carried (a failed heartbeat, or one that found our row
    // gone) go with the next one.
    const FinishCounts finished = Finished();
    const absl::Time sent = clock_->Now();
    view = options_.hub != nullptr
               ? options_.hub->Heartbeat(HeartbeatRequest{options_.queue, me, inc,
                                                          known_generation_, finished - reported_})
               : store_->HeartbeatSince(options_.queue, me, inc, known_generation_,
                                        finished - reported_);
    if (!view.ok()) {
      metrics_.HeartbeatFailed();
      return view.status();
    }
    if (view->alive) reported_ = finished;
    if (!view->alive) {
      Lose(owned(), Loss::kSession, "session row gone (expired, or replaced by a static re-join)");
      if (absl::Status st = EnsureStore(); !st.ok()) return st;
      if (absl::Status st = Rejoin(); !st.ok()) return st;
      view = store_->ReadGroupSince(options_.queue, known_generation_);  // whole: a new id
      if (!view.ok()) return view.status();
    }
    Renewed(sent);  // after a re-join, its own (later) send time stays
    if (view->expired > 0) {
      metrics_.Expired(view->expired);
      PARTQ_LOG(Info) << "expired " << view->expired << " session(s) of " << options_.queue;
    }
  } else {
    view = store_->ReadGroupSince(options_.queue, known_generation_);
    if (!view.ok()) return view.status();
  }
  NotePaused(view->paused);  // before any part is assigned in this round
  NoteRate(view->rate);
  NoteParts(view->parts);  // before the round plans with it
  const bool unchanged = view->unchanged;
  return Rebalance(Remember(*std::move(view)), unchanged);
}

// Unchanged means no transaction changed members or owners since the last
// whole view (our own acquisitions and releases included: they move the
// generation too), and nobody's TTL ran out, so that view is still the group.
// What the queue row says (paused, rate, parts) is read fresh every time and is
// taken from this view either way. A delta (the owners changed since our
// generation, and the members whole) is applied to the last view: that view
// and the changes since its generation make the group at the new one.
const GroupView& Session::Remember(GroupView&& view) {
  if (view.unchanged || view.delta) {
    last_view_.alive = view.alive;
    last_view_.expired = view.expired;
    last_view_.paused = view.paused;
    last_view_.rate = view.rate;
    last_view_.parts = view.parts;
  }
  if (view.unchanged) return last_view_;
  known_generation_ = view.generation;
  if (!view.delta) {
    last_view_ = std::move(view);
    return last_view_;
  }
  std::map<int, PartOwner> owners;
  for (PartOwner& o : last_view_.owners) owners[o.part] = std::move(o);
  for (int part : view.unowned) owners.erase(part);
  for (PartOwner& o : view.owners) owners[o.part] = std::move(o);
  last_view_.owners.clear();
  for (auto& [part, o] : owners) last_view_.owners.push_back(std::move(o));
  last_view_.members = std::move(view.members);
  last_view_.generation = view.generation;
  return last_view_;
}

absl::Status Session::Rebalance(const GroupView& view, bool unchanged) {
  const SessionId me = id();
  // The count read in the same snapshot as the owners: members that read
  // different counts would plan different targets.
  const int parts = view.parts > 0 ? view.parts : queue_parts();
  std::vector<OwnedPart> held = owned();
  if (unchanged && settled_.has_value() && settled_->parts == parts && settled_->held == held) {
    absl::MutexLock lock(&mu_);
    stable_ = true;
    ++rounds_;
    return absl::OkStatus();
  }
  settled_.reset();
  {
    absl::MutexLock lock(&mu_);
    ++plans_;
  }
  const Reconciled reconciled = Reconcile(me, held, view, parts);
  if (!reconciled.lost.empty()) {
    Lose(reconciled.lost, Loss::kParts, "the database no longer lists them as ours");
  }
  if (!reconciled.adopted.empty()) Assign(reconciled.adopted);

  const RoundPlan plan = PlanRound(me, view, parts, config_.assignment);
  TrackHandOffs(plan.wanted);
  bool changed = false;
  if (!plan.release.empty()) {
    if (absl::Status st = Release(plan.release); !st.ok()) return st;
    changed = true;
  }
  bool pending = plan.pending();  // their owners must release them first
  if (!plan.acquire.empty()) {
    auto got = Acquire(plan.acquire);
    if (!got.ok()) return got.status();
    pending = pending || got->size() < plan.acquire.size();  // someone else was quicker
    changed = changed || !got->empty();
  }
  if (changed) metrics_.Rebalanced();
  if (reconciled.lost.empty() && reconciled.adopted.empty() && plan.release.empty() &&
      plan.wanted.empty()) {
    settled_ = Settled{parts, std::move(held)};
  }
  absl::MutexLock lock(&mu_);
  stable_ = !pending;
  ++rounds_;
  return absl::OkStatus();
}

// A hand-off lasts from the first round that wants a part to the round that
// acquires it; a part the plan no longer wants starts over.
void Session::TrackHandOffs(const std::vector<int>& wanted) {
  std::map<int, absl::Time> since;
  for (int part : wanted) {
    auto it = wanted_since_.find(part);
    since[part] = it == wanted_since_.end() ? clock_->Now() : it->second;
  }
  wanted_since_ = std::move(since);
}

absl::Status Session::Release(const std::vector<int>& parts) {
  std::vector<OwnedPart> give;
  {
    absl::MutexLock lock(&mu_);
    give = parts_.HeldOf(parts);
    parts_.Set(give, PartState::kRevoking);
  }
  PARTQ_LOG(Info) << "session " << id() << " releasing " << PartList(give);
  const absl::Time revoke_start = clock_->Now();
  RevokeKeepingAlive(give);
  absl::Status released = EnsureStore();
  if (released.ok()) released = store_->ReleaseParts(options_.queue, id(), give);
  if (absl::Status st = released; !st.ok()) {
    // Still ours (same epochs): hand them back to the listener, so they are
    // not left unworked if the next round's plan no longer releases them.
    {
      absl::MutexLock lock(&mu_);
      stable_ = false;
    }
    Assign(give);
    return st;
  }
  metrics_.Revoked(clock_->Now() - revoke_start);
  absl::MutexLock lock(&mu_);
  parts_.Set(give, PartState::kReleased);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<OwnedPart>> Session::Acquire(const std::vector<int>& parts) {
  if (absl::Status st = EnsureStore(); !st.ok()) return st;
  auto got = store_->AcquireParts(options_.queue, id(), parts);
  if (!got.ok()) {
    absl::MutexLock lock(&mu_);
    stable_ = false;
    return got.status();
  }
  if (got->empty()) return got;
  PARTQ_LOG(Info) << "session " << id() << " acquired " << PartList(*got);
  Assign(*got);
  const absl::Time now = clock_->Now();
  for (const auto& p : *got) {
    metrics_.HandedOff(now - wanted_since_[p.part]);
    wanted_since_.erase(p.part);
  }
  return got;
}

void Session::ListenerRestarted() {
  listening_now_ = true;
  Poke();
  ItemsCallback cb;
  {
    absl::MutexLock lock(&mu_);
    cb = items_cb_;
  }
  if (cb) cb(-1, std::nullopt);
  NoticeCallback any;
  {
    absl::MutexLock lock(&mu_);
    any = notice_cb_;
  }
  if (any) any(Notice::Kind::kGroup);  // anything may have changed meanwhile
}

void Session::Dispatch(const std::vector<Notice>& notices) {
  ItemsCallback cb;
  NoticeCallback any;
  {
    absl::MutexLock lock(&mu_);
    cb = items_cb_;
    any = notice_cb_;
  }
  for (const auto& n : notices) {
    if (any) any(n.kind);
    if (n.kind == Notice::Kind::kGroup) {
      Poke();
    } else if (n.kind == Notice::Kind::kReleased) {
      // Only a member waiting for parts cares who released what (a join
      // storm's releases would otherwise make the whole fleet read the group
      // for each one); one that holds its target reads the change with its
      // next heartbeat, and a round that turns it unstable polls on its own.
      // A round under way may have read the group before this release and
      // end waiting for the part: it reads again at once, not at its poll.
      absl::MutexLock lock(&mu_);
      if (!stable_ || in_round_) poked_ = true;
    } else if (n.kind == Notice::Kind::kSchedules) {
      // For the schedule firer alone (the notice callback above).
    } else if (cb) {
      cb(n.part, n.from);
    }
  }
}

void Session::ListenLoop() {
  std::shared_ptr<Listener> listener;
  int64_t seen = 0;
  for (;;) {
    bool fresh;
    {
      absl::MutexLock lock(&mu_);
      // Not a timed wait: Stop, or the session thread's next connection,
      // ends it (and a ManualClock's waiters do not count it).
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || listening_ == Listening::kOwn || session_listener_ != nullptr;
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      if (listening_ == Listening::kOwn) break;
      fresh = listeners_made_ != seen;
      seen = listeners_made_;
      listener = session_listener_;
    }
    // Notices may have been missed while nobody listened.
    if (fresh) ListenerRestarted();
    // Bounded on the real clock: it only bounds how late a Stop is seen.
    auto notices = listener->Wait(absl::Milliseconds(250));
    if (!notices.ok()) {
      // Its store is gone: the session thread connects again and listens
      // on the new connection.
      listening_now_ = false;
      absl::MutexLock lock(&mu_);
      if (session_listener_ == listener) session_listener_.reset();
      continue;
    }
    Dispatch(*notices);
  }
  ListenOnOwnConnection();
}

void Session::ListenOnOwnConnection() {
  std::unique_ptr<Listener> listener;
  auto stopping = [this] {
    absl::MutexLock lock(&mu_);
    return stopping_;
  };
  while (!stopping()) {
    if (listener == nullptr) {
      absl::Status st;
      if (options_.notices != nullptr) {
        auto l = options_.notices->Listen(options_.queue);
        st = l.status();
        if (l.ok()) listener = std::move(*l);
      } else {
        // The store only opens the listener, which has a connection of its
        // own: it is not kept.
        auto store = factory_();
        st = store.status();
        if (store.ok()) {
          auto l = (*store)->Listen(options_.queue);
          st = l.status();
          if (l.ok()) listener = std::move(*l);
        }
      }
      if (absl::IsUnimplemented(st)) return;
      if (listener == nullptr) {
        // Stop ends the backoff: on a ManualClock nothing else would.
        absl::MutexLock lock(&mu_);
        clock_->AwaitWithTimeout(mu_, absl::Condition(&stopping_), options_.retry_backoff);
        continue;
      }
      ListenerRestarted();
    }
    // A blocking read of the LISTEN socket, bounded on the real clock: it
    // only bounds how late a Stop is seen, so it needs no injected time.
    auto notices = listener->Wait(absl::Milliseconds(250));
    if (!notices.ok()) {
      listening_now_ = false;
      listener.reset();
      continue;
    }
    Dispatch(*notices);
  }
}

}  // namespace partq
