// The session protocol (join, heartbeat, expiry, rebalance, leave, static
// membership) on MemStore, with a manual database clock.
#include "coordinator/session.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "store/mem_store.h"
#include "gtest/gtest.h"
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

class SessionTest : public ::testing::Test {
 protected:
  void CreateQueue(int parts, AssignmentKind kind = AssignmentKind::kLexical) {
    QueueConfig q;
    q.name = "q";
    q.parts = parts;
    q.assignment = kind;
    q.session_ttl = absl::Seconds(10);  // database time: moved by clock_ only
    ASSERT_TRUE(db_.Connect()->CreateQueue(q).ok());
  }

  Session* Add(const std::string& instance, absl::Duration retry_backoff = absl::Milliseconds(2)) {
    auto listener = std::make_unique<RecordingListener>(&registry_, instance);
    SessionOptions o;
    o.queue = "q";
    o.instance_id = instance;
    o.heartbeat_interval = absl::Milliseconds(5);  // real time between ticks
    o.handoff_poll = absl::Milliseconds(2);
    o.retry_backoff = retry_backoff;
    auto s = std::make_unique<Session>(db_.Factory(), o, listener.get());
    EXPECT_TRUE(s->Start().ok());
    listeners_.push_back(std::move(listener));
    sessions_.push_back(std::move(s));
    return sessions_.back().get();
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

  // Moves the database clock forward in steps, letting `live` heartbeat at
  // each step so that only the others expire.
  void AdvanceDbClock(absl::Duration total, const std::vector<Session*>& live) {
    const absl::Duration step = absl::Seconds(1);
    for (absl::Duration done; done < total; done += step) {
      clock_.Advance(step);
      int64_t hb = db_.Calls("Heartbeat");
      ASSERT_TRUE(WaitUntil([&] { return db_.Calls("Heartbeat") >= hb + 2 * (int64_t)live.size(); }));
    }
  }

  ManualClock clock_;
  MemDatabase db_{&clock_};
  Registry registry_;
  std::vector<std::unique_ptr<RecordingListener>> listeners_;
  std::vector<std::unique_ptr<Session>> sessions_;
};

TEST_F(SessionTest, SeedExampleTwoThenThirdInTheMiddle) {
  CreateQueue(8);
  Session* a = Add("a");
  Session* c = Add("c");
  ASSERT_TRUE(WaitUntil([&] { return Converged({a, c}, 8); }));
  EXPECT_EQ(Parts(*a), Range(0, 4));
  EXPECT_EQ(Parts(*c), Range(4, 8));

  Session* b = Add("b");  // sorts between a and c
  ASSERT_TRUE(WaitUntil([&] { return Converged({a, b, c}, 8); }));
  EXPECT_EQ(Parts(*a), (std::vector<int>{0, 1}));
  EXPECT_EQ(Parts(*b), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(Parts(*c), (std::vector<int>{5, 6, 7}));
}

TEST_F(SessionTest, GracefulLeaveHandsPartsOverWithoutExpiry) {
  CreateQueue(8);
  Session* a = Add("a");
  Session* b = Add("b");
  Session* c = Add("c");
  ASSERT_TRUE(WaitUntil([&] { return Converged({a, b, c}, 8); }));
  b->Stop();  // the database clock does not move: no expiry can help
  ASSERT_TRUE(WaitUntil([&] { return Converged({a, c}, 8); }));
  EXPECT_EQ(Parts(*a), Range(0, 4));
  EXPECT_EQ(Parts(*c), Range(4, 8));
  EXPECT_EQ(b->state(), Session::State::kStopped);
}

TEST_F(SessionTest, SilentSessionLosesPartsAfterTtlAndNotBefore) {
  CreateQueue(6);
  Session* a = Add("a");
  Session* b = Add("b");
  ASSERT_TRUE(WaitUntil([&] { return Converged({a, b}, 6); }));
  const auto b_parts = Parts(*b);
  const auto b_owned = b->owned();
  b->Abandon();  // stops heartbeating, deletes nothing: a crash
  registry_.Drop("b", b_owned);  // a dead process holds nothing

  AdvanceDbClock(absl::Seconds(9), {a});  // within the 10 s TTL
  EXPECT_EQ(Parts(*a), Range(0, 3)) << "parts moved before the TTL";
  auto status = db_.Connect()->Status("q");
  ASSERT_TRUE(status.ok());
  for (int p : b_parts) EXPECT_TRUE(status->parts[p].owner.has_value());

  AdvanceDbClock(absl::Seconds(3), {a});  // past the TTL
  ASSERT_TRUE(WaitUntil([&] { return Converged({a}, 6); }));
}

TEST_F(SessionTest, StaticRejoinWithinTtlKeepsPartsAndMovesNothingElse) {
  CreateQueue(9);
  Session* a = Add("a");
  Session* b = Add("b");
  Session* c = Add("c");
  ASSERT_TRUE(WaitUntil([&] { return Converged({a, b, c}, 9); }));
  const auto a_before = a->owned();
  const auto b_before = b->owned();
  const auto c_before = c->owned();
  b->Abandon();  // pod restart: same instance id comes back within the TTL
  Session* b2 = Add("b");
  ASSERT_TRUE(WaitUntil([&] { return Converged({a, b2, c}, 9); }));
  EXPECT_EQ(a->owned(), a_before);
  EXPECT_EQ(c->owned(), c_before);
  ASSERT_EQ(Parts(*b2), (std::vector<int>{3, 4, 5}));
  for (size_t i = 0; i < b_before.size(); ++i) {
    EXPECT_LT(b_before[i].epoch, b2->owned()[i].epoch) << "old incarnation not fenced";
  }
}

TEST_F(SessionTest, StickyJoinMovesOnlyItsShare) {
  CreateQueue(12, AssignmentKind::kSticky);
  Session* a = Add("a");
  Session* b = Add("b");
  Session* c = Add("c");
  ASSERT_TRUE(WaitUntil([&] { return Converged({a, b, c}, 12); }));
  std::map<int, std::string> before;
  for (auto [s, n] : {std::pair{a, "a"}, {b, "b"}, {c, "c"}}) {
    for (int p : Parts(*s)) before[p] = n;
  }
  Session* d = Add("0");  // sorts first: lexical would shift everything
  ASSERT_TRUE(WaitUntil([&] { return Converged({a, b, c, d}, 12); }));
  EXPECT_EQ(Parts(*d).size(), 3u);  // floor(12 / 4)
  int moved = 0;
  for (auto [s, n] : {std::pair{a, "a"}, {b, "b"}, {c, "c"}}) {
    EXPECT_EQ(Parts(*s).size(), 3u);
    for (int p : Parts(*s)) moved += before[p] != n;
  }
  EXPECT_EQ(moved, 0) << "sticky moved parts between old members";
}

TEST_F(SessionTest, SurvivesDatabaseErrorsAndConverges) {
  CreateQueue(16);
  Session* a = Add("a");
  Session* b = Add("b");
  ASSERT_TRUE(WaitUntil([&] { return Converged({a, b}, 16); }));
  db_.FailNext(20);
  Session* c = Add("c");  // Start retries through the failures
  ASSERT_TRUE(WaitUntil([&] { return Converged({a, b, c}, 16); }));
}

// A release that fails after OnRevoke leaves the parts ours in the database;
// if the next plan keeps them, the listener must be told it has them again,
// or nobody works them (a stuck state found in review).
TEST_F(SessionTest, PartsWhoseReleaseFailedAreHandedBackToTheListener) {
  CreateQueue(8);
  Session* a = Add("a");
  Session* b = Add("b");
  ASSERT_TRUE(WaitUntil([&] { return Converged({a, b}, 8); }));
  db_.FailCallsOf("ReleaseParts");
  const int64_t releases = db_.Calls("ReleaseParts");
  Session* c = Add("c");  // a and b revoke parts for c, and cannot release them
  ASSERT_TRUE(WaitUntil([&] { return db_.Calls("ReleaseParts") >= releases + 4; }));
  c->Stop();  // the plan for {a, b} is what they hold again
  ASSERT_TRUE(WaitUntil([&] { return Converged({a, b}, 8); }));
  db_.FailCallsOf("ReleaseParts", false);
  EXPECT_EQ(registry_.Of("a"), Parts(*a));
  EXPECT_EQ(registry_.Of("b"), Parts(*b));
}

TEST_F(SessionTest, ExpiredSessionNoticesAndRejoins) {
  CreateQueue(4);
  Session* a = Add("a");
  ASSERT_TRUE(WaitUntil([&] { return Converged({a}, 4); }));
  // Someone else expires a: delete its row as if its heartbeats had stopped.
  auto other = db_.Connect();
  ASSERT_TRUE(other->Leave("q", a->id(), 1).ok());
  ASSERT_TRUE(WaitUntil([&] { return listeners_[0]->lost() > 0; }));
  ASSERT_TRUE(WaitUntil([&] { return Converged({a}, 4); }));
  EXPECT_EQ(a->state(), Session::State::kActive);
}

// A heartbeat that fails is retried after retry_backoff, not at once: the
// failed heartbeat's time is past, and a loop that kept it as the next
// wake-up spun, reconnecting hundreds of times a second to a database that
// refused every call (found with a deleted queue).
TEST_F(SessionTest, FailingHeartbeatsRetryAfterTheBackoff) {
  CreateQueue(4);
  Session* a = Add("a", absl::Milliseconds(50));
  ASSERT_TRUE(WaitUntil([&] { return Converged({a}, 4); }));
  db_.FailCallsOf("Heartbeat");
  const int64_t before = db_.Calls("Heartbeat");
  const absl::Time t0 = absl::Now();
  absl::SleepFor(absl::Milliseconds(500));
  const int64_t failed = db_.Calls("Heartbeat") - before;
  // As long as this thread really slept (more on a loaded machine).
  const int64_t slept_ms = absl::ToInt64Milliseconds(absl::Now() - t0);
  db_.FailCallsOf("Heartbeat", false);
  // One every 50 ms at the most (and the one under way when failures began);
  // without the backoff it made thousands.
  EXPECT_GE(failed, 3);
  EXPECT_LE(failed, slept_ms / 50 + 2) << slept_ms << " ms";
  ASSERT_TRUE(WaitUntil([&] { return Converged({a}, 4); }));
}

// A queue deleted under a session: the re-join finds no queue, and the
// session stops and says why instead of retrying for ever.
TEST_F(SessionTest, DeletedQueueEndsTheSession) {
  CreateQueue(4);
  Session* a = Add("a");
  ASSERT_TRUE(WaitUntil([&] { return Converged({a}, 4); }));
  EXPECT_TRUE(a->ended().ok());
  auto other = db_.Connect();
  ASSERT_TRUE(other->DeleteQueue("q", QueueContents::kDelete).ok());
  ASSERT_TRUE(WaitUntil([&] { return a->state() == Session::State::kStopped; }));
  EXPECT_TRUE(absl::IsNotFound(a->ended())) << a->ended();
  EXPECT_TRUE(Parts(*a).empty());
  EXPECT_TRUE(registry_.Of("a").empty());
}

TEST_F(SessionTest, StopBeforeStartAndTwiceIsSafe) {
  CreateQueue(2);
  RecordingListener l(&registry_, "x");
  SessionOptions o;
  o.queue = "q";
  Session s(db_.Factory(), o, &l);
  s.Stop();
  s.Stop();
  EXPECT_EQ(s.state(), Session::State::kStopped);
}

TEST_F(SessionTest, UnknownQueueFailsToStart) {
  RecordingListener l(&registry_, "x");
  SessionOptions o;
  o.queue = "nope";
  Session s(db_.Factory(), o, &l);
  EXPECT_TRUE(absl::IsNotFound(s.Start()));
}

}  // namespace
}  // namespace partq
