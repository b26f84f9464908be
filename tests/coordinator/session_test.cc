// The session protocol (join, heartbeat, expiry, rebalance, leave, static
// membership) on MemStore behind a FaultInjector, with one ManualClock for the
// sessions and their database: time is moved on, never slept.
#include "coordinator/session.h"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "gtest/gtest.h"
#include "store/fault_store.h"
#include "store/mem_store.h"
#include "store/throughput.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

// MemStore's Owners says what its Status says of the group, and whether items
// are left (PgStore's: pg_store_test).
TEST(MemStoreOwners, SayWhatStatusSaysOfTheGroup) {
  MemDatabase db;
  auto store = db.Connect();
  QueueConfig q;
  q.name = "q";
  q.parts = 4;
  ASSERT_TRUE(store->CreateQueue(q).ok());
  JoinRequest j;
  j.queue = "q";
  auto joined = store->Join(j);
  ASSERT_TRUE(joined.ok()) << joined.status();
  ASSERT_TRUE(store->AcquireParts("q", joined->id, {1, 3}).ok());
  auto agree = [&](bool items) {
    auto o = store->Owners("q");
    auto s = store->Status("q");
    ASSERT_TRUE(o.ok() && s.ok());
    ASSERT_EQ(o->sessions.size(), 1u);
    EXPECT_EQ(o->sessions[0].id, s->sessions[0].id);
    EXPECT_EQ(o->sessions[0].pid, s->sessions[0].pid);
    ASSERT_EQ(o->owners.size(), 4u);
    for (int p = 0; p < 4; ++p) EXPECT_EQ(o->owners[p], s->parts[p].owner) << p;
    EXPECT_EQ(o->owners[1], joined->id);
    EXPECT_FALSE(o->owners[0].has_value());
    EXPECT_EQ(o->has_items, items);
  };
  agree(false);
  NewItem item;
  item.payload = "x";
  ASSERT_TRUE(store->Enqueue("q", item).ok());
  agree(true);
  EXPECT_EQ(store->Owners("nope").status().code(), absl::StatusCode::kNotFound);
}

// MemStore's DeleteQueue keeps a queue that holds items or dead items unless
// told to delete them, as PgStore's does (pg_store_test).
TEST(MemStoreDeleteQueue, RefusesAQueueThatHoldsWorkUnlessToldToDeleteIt) {
  MemDatabase db;
  auto store = db.Connect();
  QueueConfig q;
  q.name = "q";
  q.parts = 1;
  q.max_attempts = 1;
  ASSERT_TRUE(store->CreateQueue(q).ok());
  NewItem item;
  item.payload = "x";
  ASSERT_TRUE(store->Enqueue("q", item).ok());
  ASSERT_TRUE(store->Enqueue("q", item).ok());
  // One of the two dies.
  JoinRequest j;
  j.queue = "q";
  auto joined = store->Join(j);
  ASSERT_TRUE(joined.ok()) << joined.status();
  auto parts = store->AcquireParts("q", joined->id, {0});
  ASSERT_TRUE(parts.ok() && parts->size() == 1u);
  ClaimRequest claim;
  claim.queue = "q";
  claim.session = joined->id;
  claim.parts = {{0, (*parts)[0].epoch, std::nullopt, 1}};
  claim.limit = 1;
  auto claimed = store->Claim(claim);
  ASSERT_TRUE(claimed.ok() && claimed->size() == 1u);
  FinishRequest finish;
  finish.queue = "q";
  finish.session = joined->id;
  finish.parts = *parts;
  finish.items = *claimed;
  auto finished = store->Finish(
      finish, [](Tx&, absl::Span<const Item> items) -> absl::StatusOr<std::vector<Outcome>> {
        return std::vector<Outcome>{{items[0].id, items[0].part, Outcome::Kind::kDead}};
      });
  ASSERT_TRUE(finished.ok() && finished->dead.size() == 1u) << finished.status();

  auto refused = store->DeleteQueue("q", QueueContents::kRefuse);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            "queue \"q\" still holds work (items: 1, dead items: 1); nothing was deleted");
  EXPECT_TRUE(store->GetQueue("q").ok());
  auto status = store->Status("q");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->parts[0].dead, 1);

  auto gone = store->DeleteQueue("q", QueueContents::kDelete);
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_EQ(gone->items, 1);
  EXPECT_EQ(gone->dead_items, 1);
  EXPECT_EQ(store->GetQueue("q").status().code(), absl::StatusCode::kNotFound);
  // Created again, the queue starts empty: nothing of the old one is left.
  ASSERT_TRUE(store->CreateQueue(q).ok());
  status = store->Status("q");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->parts[0].ready + status->parts[0].dead, 0);
  EXPECT_TRUE(store->DeleteQueue("q", QueueContents::kRefuse).ok());
}

// Records part ownership as the sessions report it, and fails the test if a
// part is ever assigned to a session while another one still holds it (I1 as
// the listeners see it).
class Registry {
 public:
  void Assign(const std::string& who, const std::vector<OwnedPart>& parts) {
    absl::MutexLock l(&mu_);
    for (const auto& p : parts) {
      auto it = owner_.find(p.part);
      if (it != owner_.end() && it->second != who) {
        ADD_FAILURE() << "part " << p.part << " assigned to " << who << " while " << it->second
                      << " holds it";
      }
      owner_[p.part] = who;
      ++assigns_;
    }
  }
  void Drop(const std::string& who, const std::vector<OwnedPart>& parts) {
    absl::MutexLock l(&mu_);
    for (const auto& p : parts) {
      auto it = owner_.find(p.part);
      if (it != owner_.end() && it->second == who) owner_.erase(it);
    }
  }
  int64_t assigns() const {
    absl::MutexLock l(&mu_);
    return assigns_;
  }
  // The parts `who` was told it owns.
  std::vector<int> Of(const std::string& who) const {
    absl::MutexLock l(&mu_);
    std::vector<int> out;
    for (const auto& [part, owner] : owner_) {
      if (owner == who) out.push_back(part);
    }
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<int, std::string> owner_ ABSL_GUARDED_BY(mu_);
  int64_t assigns_ ABSL_GUARDED_BY(mu_) = 0;
};

class RecordingListener : public PartListener {
 public:
  RecordingListener(Registry* reg, std::string name) : reg_(reg), name_(std::move(name)) {}
  void OnRevoke(const std::vector<OwnedPart>& parts) override {
    reg_->Drop(name_, parts);
    absl::MutexLock l(&mu_);
    revoked_ += parts.size();
  }
  void OnAssign(const std::vector<OwnedPart>& parts) override { reg_->Assign(name_, parts); }
  void OnLost(const std::vector<OwnedPart>& parts) override {
    reg_->Drop(name_, parts);
    absl::MutexLock l(&mu_);
    lost_ += parts.size();
  }
  int64_t lost() const {
    absl::MutexLock l(&mu_);
    return lost_;
  }

 private:
  Registry* reg_;
  std::string name_;
  mutable absl::Mutex mu_;
  int64_t revoked_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t lost_ ABSL_GUARDED_BY(mu_) = 0;
};

using testing::WaitUntil;

std::vector<int> Parts(const Session& s) {
  std::vector<int> out;
  for (const auto& p : s.owned()) out.push_back(p.part);
  return out;
}

std::vector<int> Range(int from, int to) {
  std::vector<int> out;
  for (int i = from; i < to; ++i) out.push_back(i);
  return out;
}

constexpr absl::Duration kTtl = absl::Seconds(10);
constexpr absl::Duration kHeartbeat = absl::Seconds(1);
constexpr absl::Duration kHandoffPoll = absl::Milliseconds(100);
constexpr absl::Duration kRetry = absl::Milliseconds(100);
// The clock moves in steps no longer than any of the periods above, so every
// timed wait ends at its deadline.
constexpr absl::Duration kStep = absl::Milliseconds(100);

class SessionTest : public ::testing::Test {
 protected:
  void CreateQueue(int parts, AssignmentKind kind = AssignmentKind::kLexical) {
    QueueConfig q;
    q.name = "q";
    q.parts = parts;
    q.assignment = kind;
    q.session_ttl = kTtl;
    ASSERT_TRUE(db_.Connect()->CreateQueue(q).ok());
  }

  SessionOptions Options(const std::string& instance, absl::Duration retry_backoff = kRetry) {
    SessionOptions o;
    o.queue = "q";
    o.instance_id = instance;
    o.leave_on_stop = leave_on_stop_;
    o.heartbeat_interval = kHeartbeat;
    o.handoff_poll = kHandoffPoll;
    o.retry_backoff = retry_backoff;
    o.clock = &clock_;
    return o;
  }

  // A session, not started.
  Session* New(const std::string& instance, absl::Duration retry_backoff = kRetry) {
    auto listener = std::make_unique<RecordingListener>(&registry_, instance);
    auto s = std::make_unique<Session>(faults_.Wrap(db_.Factory()),
                                       Options(instance, retry_backoff), listener.get());
    listeners_.push_back(std::move(listener));
    sessions_.push_back(std::move(s));
    return sessions_.back().get();
  }

  // Start retries on the clock only when the store fails; none does here.
  Session* Add(const std::string& instance, absl::Duration retry_backoff = kRetry) {
    Session* s = New(instance, retry_backoff);
    EXPECT_TRUE(s->Start().ok());
    return s;
  }

  // Threads of the sessions that run: each session's thread waits on the
  // clock between rounds, and its lease thread for the lease's end.
  int Running() {
    int n = 0;
    for (const auto& s : sessions_) {
      const Session::State st = s->state();
      n += st != Session::State::kIdle && st != Session::State::kStopped;
    }
    return 2 * n;
  }

  // Starts `s` on a thread of its own while this thread moves the clock, on
  // which Start waits between its retries; Start's status, or
  // DeadlineExceeded if it did not return within RunUntil's limit.
  absl::Status StartMovingTheClock(Session* s) {
    absl::Status started = absl::UnknownError("not yet");
    std::atomic<bool> done{false};
    // Until it has joined, Start's thread is s's only one (Running() counts
    // two for s once it is joining); once joined, Start starts s's threads
    // and returns, which the test waits for (kStartReturning) lest it move
    // the clock on while Start's thread is not yet done.
    starting_ = [&] {
      if (done) return 0;
      switch (s->state()) {
        case Session::State::kIdle:
          return 1;
        case Session::State::kJoining:
          return -1;
        case Session::State::kStopped:
          return 0;
        default:
          return kStartReturning;
      }
    };
    std::thread starter([&] {
      started = s->Start();
      done = true;
    });
    const bool returned = RunUntil([&] { return done.load(); });
    starter.join();
    starting_ = nullptr;
    return returned ? started : absl::DeadlineExceededError("Start did not return");
  }

  // Waits until every running session (and `starting_`) is back in a timed
  // wait: what the last step of the clock made due has been done.
  void Settle() {
    ASSERT_TRUE(WaitUntil([&] {
      const int starting = starting_ ? starting_() : 0;
      if (starting == kStartReturning) return false;
      return clock_.AwaitWaiters(Running() + starting, absl::ZeroDuration());
    }));
  }
  static constexpr int kStartReturning = 1000;

  // Moves the clock on in steps until `done` holds, letting the sessions run
  // after each; false if it did not within `limit` of clock time. The default
  // limit stays within the TTL, so no live session expires meanwhile.
  bool RunUntil(const std::function<bool()>& done, absl::Duration limit = kTtl - kHeartbeat,
                absl::Duration step = kStep) {
    const absl::Time end = clock_.Now() + limit;
    for (;;) {
      Settle();
      if (done()) return true;
      if (clock_.Now() >= end) return false;
      clock_.Advance(step);
    }
  }
  void RunFor(absl::Duration d, absl::Duration step = kStep) {
    EXPECT_FALSE(RunUntil([] { return false; }, d, step));
  }

  // Every live session stable and every part owned exactly once.
  bool Converged(const std::vector<Session*>& live, int parts) {
    std::multiset<int> seen;
    for (Session* s : live) {
      if (!s->WaitStable(absl::ZeroDuration())) return false;
      for (int p : Parts(*s)) seen.insert(p);
    }
    if (static_cast<int>(seen.size()) != parts) return false;
    for (int p = 0; p < parts; ++p) {
      if (seen.count(p) != 1) return false;
    }
    return true;
  }

  // When the database last saw `s` heartbeat (or join).
  absl::Time LastSeen(const Session& s) {
    auto status = db_.Connect()->Status("q");
    EXPECT_TRUE(status.ok()) << status.status();
    for (const SessionInfo& info : status->sessions) {
      if (info.id == s.id()) return status->db_now - info.since_heartbeat;
    }
    ADD_FAILURE() << "no session " << s.id();
    return absl::InfinitePast();
  }

  ManualClock clock_;
  MemDatabase db_{&clock_};
  FaultInjector faults_{&clock_};
  Registry registry_;
  std::vector<std::unique_ptr<RecordingListener>> listeners_;
  std::vector<std::unique_ptr<Session>> sessions_;
  // Threads other than the sessions' own that use the clock now.
  std::function<int()> starting_;
  // The sessions here are static members (named, for readable tests); unless a
  // test says otherwise they leave on Stop() like dynamic ones.
  bool leave_on_stop_ = true;
};

TEST_F(SessionTest, SeedExampleTwoThenThirdInTheMiddle) {
  CreateQueue(8);
  Session* a = Add("a");
  Session* c = Add("c");
  ASSERT_TRUE(RunUntil([&] { return Converged({a, c}, 8); }));
  EXPECT_EQ(Parts(*a), Range(0, 4));
  EXPECT_EQ(Parts(*c), Range(4, 8));

  Session* b = Add("b");  // sorts between a and c
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b, c}, 8); }));
  EXPECT_EQ(Parts(*a), (std::vector<int>{0, 1}));
  EXPECT_EQ(Parts(*b), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(Parts(*c), (std::vector<int>{5, 6, 7}));
}

TEST_F(SessionTest, GracefulLeaveHandsPartsOverWithoutExpiry) {
  CreateQueue(8);
  Session* a = Add("a");
  Session* b = Add("b");
  Session* c = Add("c");
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b, c}, 8); }));
  b->Stop();
  const absl::Time left = clock_.Now();
  ASSERT_TRUE(RunUntil([&] { return Converged({a, c}, 8); }));
  // At the others' next heartbeat, long before b's row could have expired.
  EXPECT_LE(clock_.Now() - left, kHeartbeat);
  EXPECT_EQ(Parts(*a), Range(0, 4));
  EXPECT_EQ(Parts(*c), Range(4, 8));
  EXPECT_EQ(b->state(), Session::State::kStopped);
}

TEST_F(SessionTest, SilentSessionLosesPartsAfterTtlAndNotBefore) {
  CreateQueue(6);
  Session* a = Add("a");
  Session* b = Add("b");
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b}, 6); }));
  const auto b_parts = Parts(*b);
  const auto b_owned = b->owned();
  const absl::Time b_seen = LastSeen(*b);
  b->Abandon();                  // stops heartbeating, deletes nothing: a crash
  registry_.Drop("b", b_owned);  // a dead process holds nothing

  RunFor(b_seen + kTtl - clock_.Now());  // up to the TTL, a heartbeating
  EXPECT_EQ(Parts(*a), Range(0, 3)) << "parts moved before the TTL";
  auto status = db_.Connect()->Status("q");
  ASSERT_TRUE(status.ok());
  for (int p : b_parts) EXPECT_TRUE(status->parts[p].owner.has_value());

  ASSERT_TRUE(RunUntil([&] { return Converged({a}, 6); }, absl::Seconds(3)));  // past the TTL
  // At a's first heartbeat after it.
  EXPECT_GT(clock_.Now(), b_seen + kTtl);
  EXPECT_LE(clock_.Now(), b_seen + kTtl + kHeartbeat);
}

TEST_F(SessionTest, StaticRejoinWithinTtlKeepsPartsAndMovesNothingElse) {
  CreateQueue(9);
  Session* a = Add("a");
  Session* b = Add("b");
  Session* c = Add("c");
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b, c}, 9); }));
  const auto a_before = a->owned();
  const auto b_before = b->owned();
  const auto c_before = c->owned();
  b->Abandon();  // pod restart: same instance id comes back within the TTL
  Session* b2 = Add("b");
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b2, c}, 9); }));
  EXPECT_EQ(a->owned(), a_before);
  EXPECT_EQ(c->owned(), c_before);
  ASSERT_EQ(Parts(*b2), (std::vector<int>{3, 4, 5}));
  for (size_t i = 0; i < b_before.size(); ++i) {
    EXPECT_LT(b_before[i].epoch, b2->owned()[i].epoch) << "old incarnation not fenced";
  }
}

// KIP-345: a static member that stops (SIGTERM in a rolling restart) drains
// and keeps its session and parts; its restart within the TTL takes them back
// and nothing else moves; one that does not come back loses them at its TTL.
TEST_F(SessionTest, AStoppedStaticMemberKeepsItsPartsForItsRestartUntilItsTtl) {
  CreateQueue(9);
  Session* a = Add("a");
  leave_on_stop_ = false;
  Session* b = Add("b");
  leave_on_stop_ = true;
  Session* c = Add("c");
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b, c}, 9); }));
  const auto a_before = a->owned();
  const auto b_before = b->owned();
  const auto c_before = c->owned();
  b->Stop();
  EXPECT_EQ(b->state(), Session::State::kStopped);
  EXPECT_TRUE(registry_.Of("b").empty()) << "b revoked (drained) its parts";
  const absl::Time b_seen = LastSeen(*b);
  RunFor(b_seen + kTtl - kHeartbeat - clock_.Now());
  EXPECT_EQ(a->owned(), a_before) << "parts moved while b's were reserved";
  EXPECT_EQ(c->owned(), c_before);
  auto status = db_.Connect()->Status("q");
  ASSERT_TRUE(status.ok());
  for (const OwnedPart& p : b_before) {
    ASSERT_TRUE(status->parts[p.part].owner.has_value());
    EXPECT_EQ(*status->parts[p.part].owner, b->id()) << p.part;
  }

  leave_on_stop_ = false;
  Session* b2 = Add("b");
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b2, c}, 9); }, kHeartbeat));
  EXPECT_EQ(a->owned(), a_before);
  EXPECT_EQ(c->owned(), c_before);
  ASSERT_EQ(b2->owned().size(), b_before.size());
  for (size_t i = 0; i < b_before.size(); ++i) {
    EXPECT_EQ(b2->owned()[i].part, b_before[i].part);
    EXPECT_LT(b_before[i].epoch, b2->owned()[i].epoch) << "old incarnation not fenced";
  }

  // Stopped for good: its parts wait for its TTL, then move.
  b2->Stop();
  const absl::Time b2_seen = LastSeen(*b2);
  RunFor(b2_seen + kTtl - clock_.Now());
  EXPECT_EQ(a->owned(), a_before);
  ASSERT_TRUE(RunUntil([&] { return Converged({a, c}, 9); }, absl::Seconds(3)));
  EXPECT_GT(clock_.Now(), b2_seen + kTtl);
}

// A static member restarting on a paused queue takes its parts back in its
// join: it must know the queue is paused by then, before any group view.
TEST_F(SessionTest, AJoinSaysTheQueueIsPausedBeforeItHandsOverKeptParts) {
  CreateQueue(4);
  leave_on_stop_ = false;
  Session* a = Add("a");
  ASSERT_TRUE(RunUntil([&] { return Converged({a}, 4); }));
  a->Stop();
  ASSERT_TRUE(db_.Connect()->SetPaused("q", true).ok());
  Session* a2 = New("a");
  bool paused_at_assign = false;
  a2->SetPausedCallback(
      [&](bool paused) { paused_at_assign = paused && registry_.Of("a").empty(); });
  ASSERT_TRUE(a2->Start().ok());
  EXPECT_TRUE(a2->paused()) << "known from the join, before the first round";
  EXPECT_TRUE(paused_at_assign) << "told before the kept parts reached the listener";
  EXPECT_EQ(registry_.Of("a").size(), 4u) << "and it has them back";
}

TEST_F(SessionTest, AStaticMemberWithLeaveOnStopHandsItsPartsOverAtOnce) {
  CreateQueue(6);
  Session* a = Add("a");
  Session* b = Add("b");  // leave_on_stop_ is the fixture's default
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b}, 6); }));
  b->Stop();
  const absl::Time left = clock_.Now();
  ASSERT_TRUE(RunUntil([&] { return Converged({a}, 6); }));
  EXPECT_LE(clock_.Now() - left, kHeartbeat);
  auto status = db_.Connect()->Status("q");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->sessions.size(), 1u);
}

TEST_F(SessionTest, StickyJoinMovesOnlyItsShare) {
  CreateQueue(12, AssignmentKind::kSticky);
  Session* a = Add("a");
  Session* b = Add("b");
  Session* c = Add("c");
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b, c}, 12); }));
  std::map<int, std::string> before;
  for (auto [s, n] : {std::pair{a, "a"}, {b, "b"}, {c, "c"}}) {
    for (int p : Parts(*s)) before[p] = n;
  }
  Session* d = Add("0");  // sorts first: lexical would shift everything
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b, c, d}, 12); }));
  EXPECT_EQ(Parts(*d).size(), 3u);  // floor(12 / 4)
  int moved = 0;
  for (auto [s, n] : {std::pair{a, "a"}, {b, "b"}, {c, "c"}}) {
    EXPECT_EQ(Parts(*s).size(), 3u);
    for (int p : Parts(*s)) moved += before[p] != n;
  }
  EXPECT_EQ(moved, 0) << "sticky moved parts between old members";
}

// Store::GrowParts while the group runs: the sessions see the count in
// their next view and take the new parts; sticky keeps each old part where
// it was.
TEST_F(SessionTest, AGrownQueueIsRebalancedOntoItsNewParts) {
  CreateQueue(4, AssignmentKind::kSticky);
  Session* a = Add("a");
  Session* b = Add("b");
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b}, 4); }));
  std::map<int, Session*> before;
  for (Session* s : {a, b}) {
    for (int p : Parts(*s)) before[p] = s;
  }
  auto grown = db_.Connect()->GrowParts("q", 8);
  ASSERT_TRUE(grown.ok()) << grown.status();
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b}, 8); }));
  for (Session* s : {a, b}) {
    EXPECT_EQ(s->queue_parts(), 8);
    EXPECT_EQ(Parts(*s).size(), 4u);
    for (int p : Parts(*s)) {
      if (p < 4) EXPECT_EQ(before[p], s) << "part " << p << " moved";
    }
  }
}

TEST_F(SessionTest, SurvivesDatabaseErrorsAndConverges) {
  CreateQueue(16);
  Session* a = Add("a");
  Session* b = Add("b");
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b}, 16); }));
  faults_.FailNext(20);
  // Start retries through the failures, on the clock this thread moves.
  Session* c = New("c");
  absl::Status started = StartMovingTheClock(c);
  ASSERT_TRUE(started.ok()) << started;
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b, c}, 16); }));
}

// A join that fails and a reconnect that fails after it (a server
// restarting while a session starts): Start went on to join through the
// store it had just dropped, and the process crashed (issue 27's soak, a
// session joining as the server restarted). It must wait and retry.
TEST_F(SessionTest, StartOutlastsAJoinAndAReconnectThatFail) {
  CreateQueue(4);
  StoreFactory inner = faults_.Wrap(db_.Factory());
  std::atomic<int> connects{0};
  StoreFactory restarting = [&]() -> absl::StatusOr<std::unique_ptr<Store>> {
    const int n = ++connects;
    if (n == 2 || n == 3) return absl::UnavailableError("the database system is starting up");
    if (n >= 4) faults_.FailCallsOf("Join", false);
    return inner();
  };
  faults_.FailCallsOf("Join");
  auto listener = std::make_unique<RecordingListener>(&registry_, "c");
  sessions_.push_back(std::make_unique<Session>(restarting, Options("c"), listener.get()));
  listeners_.push_back(std::move(listener));
  Session* c = sessions_.back().get();
  absl::Status started = StartMovingTheClock(c);
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_GE(connects.load(), 4);
  ASSERT_TRUE(RunUntil([&] { return Converged({c}, 4); }));
  // Stopped here, not by the fixture: its factory refers to this body's
  // locals, and its listener thread may connect again until it stops.
  c->Stop();
}

// A release that fails after OnRevoke leaves the parts ours in the database;
// if the next plan keeps them, the listener must be told it has them again,
// or nobody works them (a stuck state found in review).
TEST_F(SessionTest, PartsWhoseReleaseFailedAreHandedBackToTheListener) {
  CreateQueue(8);
  Session* a = Add("a");
  Session* b = Add("b");
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b}, 8); }));
  faults_.FailCallsOf("ReleaseParts");
  const int64_t releases = faults_.Calls("ReleaseParts");
  Session* c = Add("c");  // a and b revoke parts for c, and cannot release them
  ASSERT_TRUE(RunUntil([&] { return faults_.Calls("ReleaseParts") >= releases + 4; }));
  c->Stop();  // the plan for {a, b} is what they hold again
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b}, 8); }));
  faults_.FailCallsOf("ReleaseParts", false);
  EXPECT_EQ(registry_.Of("a"), Parts(*a));
  EXPECT_EQ(registry_.Of("b"), Parts(*b));
}

TEST_F(SessionTest, ExpiredSessionNoticesAndRejoins) {
  CreateQueue(4);
  Session* a = Add("a");
  ASSERT_TRUE(RunUntil([&] { return Converged({a}, 4); }));
  // Someone else expires a: delete its row as if its heartbeats had stopped.
  auto other = db_.Connect();
  ASSERT_TRUE(other->Leave("q", a->id(), 1).ok());
  ASSERT_TRUE(RunUntil([&] { return listeners_[0]->lost() > 0 && Converged({a}, 4); }));
  EXPECT_EQ(a->state(), Session::State::kActive);
}

// Heartbeats that fail for longer than the TTL: the session stops counting on
// its parts (reports them lost) at the TTL after the last heartbeat that
// answered was sent, not before, and re-joins once the database answers.
TEST_F(SessionTest, NoSuccessfulHeartbeatWithinTheTtlLosesTheParts) {
  CreateQueue(4);
  Session* a = Add("a");
  ASSERT_TRUE(RunUntil([&] { return Converged({a}, 4); }));
  const absl::Time seen = LastSeen(*a);
  faults_.FailCallsOf("Heartbeat");
  ASSERT_TRUE(RunUntil([&] { return listeners_[0]->lost() > 0; }, kTtl + kHeartbeat));
  EXPECT_EQ(clock_.Now(), seen + kTtl);
  EXPECT_TRUE(a->owned().empty());
  // The next failed heartbeat gives the session up: it re-joins.
  ASSERT_TRUE(RunUntil([&] { return a->state() == Session::State::kLost; }, kRetry));
  EXPECT_TRUE(a->owned().empty());
  faults_.FailCallsOf("Heartbeat", false);
  ASSERT_TRUE(RunUntil([&] { return Converged({a}, 4); }));
  EXPECT_EQ(a->state(), Session::State::kActive);
}

// A heartbeat that hangs: the database saw the last one that answered no
// earlier than it was sent, so the others may expire the session once the TTL
// has passed since then. Its parts are lost at that moment, while the hanging
// heartbeat has not answered; when it answers alive (nobody expired the
// session meanwhile), the parts the group still lists as ours come back at
// the same epochs.
TEST_F(SessionTest, AHeartbeatThatHangsLosesThePartsAtTheTtlAfterTheLastOneThatAnsweredWasSent) {
  CreateQueue(4);
  Session* a = Add("a");
  ASSERT_TRUE(RunUntil([&] { return Converged({a}, 4); }));
  const std::vector<OwnedPart> before = a->owned();
  const absl::Time sent = LastSeen(*a);  // the database's clock is the session's
  faults_.SlowCallsOf("Heartbeat", 2 * kTtl);
  const int64_t heartbeats = faults_.Calls("Heartbeat");
  ASSERT_TRUE(RunUntil([&] { return listeners_[0]->lost() > 0; }, kTtl + kHeartbeat));
  EXPECT_EQ(clock_.Now(), sent + kTtl);
  EXPECT_EQ(faults_.Calls("Heartbeat"), heartbeats + 1) << "one heartbeat, still hanging";
  EXPECT_EQ(listeners_[0]->lost(), 4);
  EXPECT_TRUE(a->owned().empty());
  EXPECT_TRUE(registry_.Of("a").empty());
  EXPECT_EQ(a->state(), Session::State::kActive) << "no answer yet says it was expired";

  faults_.SlowCallsOf("Heartbeat", absl::ZeroDuration());
  ASSERT_TRUE(RunUntil([&] { return Converged({a}, 4); }, 2 * kTtl));
  EXPECT_GE(clock_.Now(), sent + kHeartbeat + 2 * kTtl) << "back only once the heartbeat answered";
  EXPECT_EQ(a->owned(), before);
  EXPECT_EQ(registry_.Of("a"), Range(0, 4));
}

// A heartbeat the database applies at once but whose answer comes back after
// the session's lease has lapsed (the TTL since the heartbeat before it was
// sent), though before the database's own expiry: the session lost its parts
// at the lapse, and the answer renews a lease nobody else saw end, so no
// generation moved and the view comes back unchanged. The round must still
// plan, because the session holds less than the last round that settled (a
// round that skipped its plan for the unchanged view left the parts the
// database lists as ours unworked for good).
TEST_F(SessionTest, AnAnswerThatComesAfterTheLeaseLapsedTakesThePartsBackThoughTheViewIsUnchanged) {
  CreateQueue(4);
  Session* a = Add("a");
  ASSERT_TRUE(RunUntil([&] { return Converged({a}, 4); }));
  RunFor(2 * kHeartbeat);  // settled: its idle rounds skip the plan
  const std::vector<OwnedPart> before = a->owned();
  const int64_t plans = a->plans();
  const int64_t heartbeats = faults_.Calls("Heartbeat");
  // The next heartbeat is sent an interval after the last one; its answer
  // comes half an interval before the database would expire the session.
  faults_.SlowAnswersOf("Heartbeat", kTtl - kHeartbeat / 2);
  ASSERT_TRUE(RunUntil([&] { return faults_.Calls("Heartbeat") > heartbeats; }, kHeartbeat));
  faults_.SlowAnswersOf("Heartbeat", absl::ZeroDuration());  // only that one
  const absl::Time sent = clock_.Now();
  ASSERT_EQ(LastSeen(*a), sent) << "the database took the heartbeat at once";
  ASSERT_TRUE(RunUntil([&] { return listeners_[0]->lost() > 0; }, kTtl));
  EXPECT_EQ(clock_.Now(), sent - kHeartbeat + kTtl) << "the lease of the heartbeat before";
  EXPECT_TRUE(a->owned().empty());
  EXPECT_EQ(a->state(), Session::State::kActive);
  const int64_t whole = faults_.Calls("WholeGroupView");

  ASSERT_TRUE(RunUntil([&] { return Converged({a}, 4); }, kHeartbeat));
  EXPECT_EQ(clock_.Now(), sent + kTtl - kHeartbeat / 2) << "back as the answer came";
  EXPECT_EQ(faults_.Calls("WholeGroupView"), whole) << "an unchanged view";
  EXPECT_GT(a->plans(), plans);
  EXPECT_EQ(a->owned(), before) << "the same epochs: nobody else owned them meanwhile";
  EXPECT_EQ(registry_.Of("a"), Range(0, 4));
  RunFor(2 * kTtl);  // and it keeps them
  EXPECT_EQ(a->owned(), before);
}

// A stable session heartbeats once per interval, and does nothing else.
TEST_F(SessionTest, HeartbeatsComeOncePerInterval) {
  CreateQueue(4);
  Session* a = Add("a");
  ASSERT_TRUE(RunUntil([&] { return Converged({a}, 4); }));
  const int64_t heartbeats = faults_.Calls("Heartbeat");
  const int64_t reads = faults_.Calls("ReadGroup");
  RunFor(5 * kHeartbeat);
  EXPECT_EQ(faults_.Calls("Heartbeat") - heartbeats, 5);
  EXPECT_EQ(faults_.Calls("ReadGroup") - reads, 0);
}

// While the group does not change, heartbeats read no member or owner (the
// group generation, Store::HeartbeatSince); after a change, only the owners
// that changed; a change, and a member that only went silent, are still seen.
TEST_F(SessionTest, IdleHeartbeatsReadTheGroupOnlyWhenItChanged) {
  CreateQueue(8, AssignmentKind::kSticky);
  Session* a = Add("a");
  Session* b = Add("b");
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b}, 8); }));
  RunFor(kHeartbeat);  // each heartbeat reads the other's last acquisitions once
  const int64_t whole = faults_.Calls("WholeGroupView");
  const int64_t heartbeats = faults_.Calls("Heartbeat");
  // Nor do their rounds plan again: a plan over the same group and the same
  // parts held would find nothing to do again (a plan is O(parts)).
  const int64_t a_plans = a->plans();
  const int64_t b_plans = b->plans();
  const int64_t a_rounds = a->rounds();
  RunFor(5 * kHeartbeat);
  EXPECT_EQ(faults_.Calls("Heartbeat") - heartbeats, 10);
  EXPECT_EQ(faults_.Calls("WholeGroupView") - whole, 0);
  EXPECT_EQ(a->rounds() - a_rounds, 5);
  EXPECT_EQ(a->plans(), a_plans);
  EXPECT_EQ(b->plans(), b_plans);
  Session* c = Add("c");
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b, c}, 8); }));
  // The newcomer reads the whole group once; the others, and it from then
  // on, only the owners that changed (GroupView::delta).
  EXPECT_EQ(faults_.Calls("WholeGroupView") - whole, 1);
  EXPECT_GT(a->plans(), a_plans);
  EXPECT_GT(b->plans(), b_plans);
  // c stops heartbeating: no row changes until its TTL has passed.
  const auto c_owned = c->owned();
  c->Abandon();
  registry_.Drop("c", c_owned);  // a dead process holds nothing
  ASSERT_TRUE(RunUntil([&] { return Converged({a, b}, 8); }, kTtl + 2 * kHeartbeat));
}

// While a part it wants still has an owner, a session re-reads the group every
// handoff_poll (a group notice usually comes sooner; MemStore sends none).
TEST_F(SessionTest, APendingHandOffIsPolledEveryHandoffPoll) {
  CreateQueue(4);
  Session* a = Add("a");
  ASSERT_TRUE(RunUntil([&] { return Converged({a}, 4); }));
  a->Abandon();  // its row and parts stay until the TTL: b waits for 2 and 3
  Session* b = Add("b");
  Settle();  // its first round, right after the join
  ASSERT_FALSE(b->WaitStable(absl::ZeroDuration()));
  const int64_t heartbeats = faults_.Calls("Heartbeat");
  const int64_t reads = faults_.Calls("ReadGroup");
  RunFor(kHeartbeat);
  EXPECT_EQ(faults_.Calls("Heartbeat") - heartbeats, 1);
  EXPECT_EQ(faults_.Calls("ReadGroup") - reads, kHeartbeat / kHandoffPoll - 1);
  EXPECT_TRUE(Parts(*b).empty());
}

// A heartbeat that fails is retried after retry_backoff, not at once: the
// failed heartbeat's time is past, and a loop that kept it as the next
// wake-up spun, reconnecting hundreds of times a second to a database that
// refused every call (found with a deleted queue).
TEST_F(SessionTest, FailingHeartbeatsRetryAfterTheBackoff) {
  constexpr absl::Duration kBackoff = absl::Milliseconds(50);
  constexpr absl::Duration kFine = absl::Milliseconds(10);
  CreateQueue(4);
  Session* a = Add("a", kBackoff);
  ASSERT_TRUE(RunUntil([&] { return Converged({a}, 4); }));
  faults_.FailCallsOf("Heartbeat");
  const int64_t first = faults_.Calls("Heartbeat") + 1;
  ASSERT_TRUE(RunUntil([&] { return faults_.Calls("Heartbeat") == first; }, 2 * kHeartbeat, kFine));
  // While the clock stands still the session waits: no spinning.
  EXPECT_EQ(faults_.Calls("Heartbeat"), first);
  const absl::Time t0 = clock_.Now();
  RunFor(absl::Milliseconds(500), kFine);
  const int64_t failed = faults_.Calls("Heartbeat") - first;
  const int64_t elapsed_ms = absl::ToInt64Milliseconds(clock_.Now() - t0);
  faults_.FailCallsOf("Heartbeat", false);
  // One every 50 ms at the most (and the one under way when failures began);
  // without the backoff it made thousands.
  EXPECT_GE(failed, 3);
  EXPECT_LE(failed, elapsed_ms / 50 + 2) << elapsed_ms << " ms";
  EXPECT_EQ(failed, elapsed_ms / 50) << "one exactly every backoff";
  ASSERT_TRUE(RunUntil([&] { return Converged({a}, 4); }));
}

// What the consumer finished reaches the queue's throughput with the
// heartbeats: each carries what is new since the last one that succeeded, so
// a failed heartbeat's counts go with the next and none is counted twice; a
// stopping session sends what is left before it leaves.
TEST_F(SessionTest, HeartbeatsCarryWhatTheConsumerFinishedOnceEach) {
  CreateQueue(2);
  std::atomic<int64_t> acked{0};
  Session* a = New("a");
  a->SetFinishedCallback([&] { return FinishCounts{acked.load(), 1, 0}; });
  ASSERT_TRUE(a->Start().ok());
  ASSERT_TRUE(RunUntil([&] { return Converged({a}, 2); }));
  auto reported = [&] {
    auto st = db_.Connect()->Status("q");
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? Total(st->throughput).acked : -1;
  };
  acked = 10;
  ASSERT_TRUE(RunUntil([&] { return reported() == 10; }, 2 * kHeartbeat));
  faults_.FailCallsOf("Heartbeat");
  acked = 25;
  const int64_t calls = faults_.Calls("Heartbeat");
  ASSERT_TRUE(RunUntil([&] { return faults_.Calls("Heartbeat") >= calls + 2; }, 3 * kHeartbeat));
  EXPECT_EQ(reported(), 10) << "failed heartbeats carried nothing";
  faults_.FailCallsOf("Heartbeat", false);
  ASSERT_TRUE(RunUntil([&] { return reported() == 25; }, 2 * kHeartbeat));
  RunFor(3 * kHeartbeat);
  EXPECT_EQ(reported(), 25) << "nothing counted twice";
  acked = 31;  // finished since the last heartbeat
  a->Stop();
  EXPECT_EQ(reported(), 31);
  auto st = db_.Connect()->Status("q");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(Total(st->throughput).retried, 1);
}

// A queue deleted under a session: the re-join finds no queue, and the
// session stops and says why instead of retrying for ever.
TEST_F(SessionTest, DeletedQueueEndsTheSession) {
  CreateQueue(4);
  Session* a = Add("a");
  ASSERT_TRUE(RunUntil([&] { return Converged({a}, 4); }));
  EXPECT_TRUE(a->ended().ok());
  auto other = db_.Connect();
  ASSERT_TRUE(other->DeleteQueue("q", QueueContents::kDelete).ok());
  ASSERT_TRUE(RunUntil([&] { return a->state() == Session::State::kStopped; }));
  EXPECT_TRUE(absl::IsNotFound(a->ended())) << a->ended();
  EXPECT_TRUE(Parts(*a).empty());
  EXPECT_TRUE(registry_.Of("a").empty());
}

TEST_F(SessionTest, StopBeforeStartAndTwiceIsSafe) {
  CreateQueue(2);
  RecordingListener l(&registry_, "x");
  Session s(db_.Factory(), Options("x"), &l);
  s.Stop();
  s.Stop();
  EXPECT_EQ(s.state(), Session::State::kStopped);
  EXPECT_EQ(s.Start().code(), absl::StatusCode::kFailedPrecondition) << "a stopped session started";
  EXPECT_EQ(s.state(), Session::State::kStopped);
}

TEST_F(SessionTest, StopAfterStartTwiceIsSafe) {
  CreateQueue(2);
  Session* a = Add("a");
  ASSERT_TRUE(RunUntil([&] { return Converged({a}, 2); }));
  a->Stop();
  a->Stop();
  EXPECT_EQ(a->state(), Session::State::kStopped);
  EXPECT_TRUE(a->owned().empty());
  EXPECT_EQ(a->Start().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(SessionTest, UnknownQueueFailsToStart) {
  RecordingListener l(&registry_, "x");
  SessionOptions o = Options("x");
  o.queue = "nope";
  Session s(db_.Factory(), o, &l);
  EXPECT_TRUE(absl::IsNotFound(s.Start()));
}

}  // namespace
}  // namespace partq
