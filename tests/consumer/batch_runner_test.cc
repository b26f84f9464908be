// Running a batch's handlers in its Finish, and isolating failures, on
// MemStore (whose Tx undoes enqueues on a rollback, to a savepoint or of the
// whole transaction). Time is a ManualClock that handlers and savepoints move
// on, so costs, and what GroupRoundPays makes of them, are exact.
#include "consumer/batch_runner.h"

#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "gtest/gtest.h"
#include "store/mem_store.h"

namespace partq {
namespace {

// MemStore's transaction, with the time a round trip takes on each savepoint
// statement (PgStore's cost; MemStore's own is nothing).
class RoundTripTx : public Tx {
 public:
  RoundTripTx(Tx& tx, ManualClock& clock) : tx_(tx), clock_(clock) {}
  absl::StatusOr<std::vector<Row>> Exec(
      absl::string_view sql, const std::vector<std::optional<std::string>>& params) override {
    return tx_.Exec(sql, params);
  }
  absl::Status Savepoint(absl::string_view name) override {
    return RoundTrip(&Tx::Savepoint, name);
  }
  absl::Status ReleaseSavepoint(absl::string_view name) override {
    return RoundTrip(&Tx::ReleaseSavepoint, name);
  }
  absl::Status RollbackToSavepoint(absl::string_view name) override {
    return RoundTrip(&Tx::RollbackToSavepoint, name);
  }
  absl::Status RenewSavepoint(absl::string_view name) override {
    return RoundTrip(&Tx::RenewSavepoint, name);
  }
  absl::StatusOr<EnqueueResult> Enqueue(absl::string_view queue, const NewItem& item) override {
    return tx_.Enqueue(queue, item);
  }
  absl::Status Publish(const OutboxEvent& event) override { return tx_.Publish(event); }
  pqxx::transaction_base* pqxx() override { return tx_.pqxx(); }
  const std::string& schema() const override { return tx_.schema(); }
  int savepoints() const { return savepoints_; }

 private:
  absl::Status RoundTrip(absl::Status (Tx::*statement)(absl::string_view), absl::string_view name) {
    ++savepoints_;
    clock_.Advance(absl::Microseconds(100));
    return (tx_.*statement)(name);
  }
  Tx& tx_;
  ManualClock& clock_;
  int savepoints_ = 0;
};

// Enqueues a follow-up item ("after <payload>", dedup key "after-<payload>")
// into queue "follow" for every item, then fails the ones it is told to.
// Each item costs `cost` on the clock. Records every HandleBatch size and
// every item run alone.
class FollowUpHandler : public Handler {
 public:
  explicit FollowUpHandler(ManualClock& clock) : clock_(clock) {}

  std::set<std::string> failing;  // fail alone or in any company
  // Fails in a HandleBatch call of exactly `fails_in_company_of` items.
  std::string fails_in_company;
  size_t fails_in_company_of = 0;
  bool batch_throws = false;        // HandleBatch cannot say which failed
  std::set<std::string> throttled;  // answered Throttled(7 s), having done nothing
  std::set<std::string> dead_now;   // fail with DeadNow, after enqueueing
  absl::Duration cost = absl::Microseconds(2);
  std::string slow;  // this payload costs slow_cost instead
  absl::Duration slow_cost;

  std::vector<size_t> batches;
  std::vector<std::string> alone;

  absl::Status Handle(HandlerCall& call) override {
    alone.push_back(call.item->payload);
    return Work(call, 1);
  }
  void HandleBatch(absl::Span<HandlerCall* const> calls,
                   std::vector<absl::Status>* statuses) override {
    batches.push_back(calls.size());
    if (batch_throws) throw std::runtime_error("no idea which");
    statuses->clear();
    for (HandlerCall* c : calls) statuses->push_back(Work(*c, calls.size()));
  }

 private:
  absl::Status Work(HandlerCall& call, size_t company) {
    const std::string& p = call.item->payload;
    clock_.Advance(p == slow ? slow_cost : cost);
    if (throttled.count(p) > 0) {
      return Throttled(absl::UnavailableError(p + " throttled"), absl::Seconds(7));
    }
    NewItem f;
    f.payload = "after " + p;
    f.dedup_key = "after-" + p;
    auto r = call.tx->Enqueue("follow", f);
    if (!r.ok()) return r.status();
    if (dead_now.count(p) > 0) return DeadNow(absl::InvalidArgumentError(p + " can never work"));
    if (failing.count(p) > 0 || (p == fails_in_company && company == fails_in_company_of)) {
      return absl::InternalError(p + " fails after enqueueing");
    }
    call.result = "done " + p;
    return absl::OkStatus();
  }
  ManualClock& clock_;
};

// A handler whose statuses are final (Handler::StatusesAreFinal), as the
// exec and http handlers are: it writes a follow-up only for the items it
// answers ok, and with `cannot_say` gives no statuses for a batch of more
// than one (a failure without blame). Records the size of every HandleBatch
// call, a run alone (Handle) included.
class FinalHandler : public Handler {
 public:
  explicit FinalHandler(ManualClock& clock) : clock_(clock) {}

  std::set<std::string> failing;    // fail alone or in any company
  std::set<std::string> throttled;  // Throttled(7 s)
  std::set<std::string> dead_now;
  bool cannot_say = false;
  absl::Duration batch_cost;  // what each HandleBatch call costs on the clock
  std::vector<size_t> batches;
  std::vector<absl::Time> deadlines;  // of each call
  std::vector<bool> cancelled;        // each call's cancel flag, after `during`
  std::function<void()> during;       // run inside each call

  bool StatusesAreFinal() const override { return true; }
  absl::Status Handle(HandlerCall& call) override { return HandleAsBatch(*this, call); }
  void HandleBatch(absl::Span<HandlerCall* const> calls,
                   std::vector<absl::Status>* statuses) override {
    batches.push_back(calls.size());
    deadlines.push_back(calls[0]->deadline);
    if (during) during();
    cancelled.push_back(calls[0]->cancel != nullptr && calls[0]->cancel->load());
    clock_.Advance(batch_cost);
    statuses->clear();
    if (cannot_say && calls.size() > 1) return;
    for (HandlerCall* c : calls) statuses->push_back(Work(*c));
  }

 private:
  absl::Status Work(HandlerCall& call) {
    const std::string& p = call.item->payload;
    clock_.Advance(absl::Microseconds(2));
    if (throttled.count(p) > 0) {
      return Throttled(absl::UnavailableError(p + " throttled"), absl::Seconds(7));
    }
    if (dead_now.count(p) > 0) return DeadNow(absl::InvalidArgumentError(p + " can never work"));
    if (failing.count(p) > 0) return absl::InternalError(p + " failed");
    NewItem f;
    f.payload = "after " + p;
    f.dedup_key = "after-" + p;
    auto r = call.tx->Enqueue("follow", f);
    if (!r.ok()) return r.status();
    call.result = "done " + p;
    return absl::OkStatus();
  }
  ManualClock& clock_;
};

class BatchRunnerTest : public ::testing::Test {
 protected:
  static constexpr int kMaxAttempts = 3;

  void SetUp() override {
    QueueConfig q;
    q.name = "q";
    q.parts = 1;
    q.max_attempts = kMaxAttempts;
    ASSERT_TRUE(store_->CreateQueue(q).ok());
    q.name = "follow";
    ASSERT_TRUE(store_->CreateQueue(q).ok());
    JoinRequest j;
    j.queue = "q";
    auto joined = store_->Join(j);
    ASSERT_TRUE(joined.ok()) << joined.status();
    session_ = joined->id;
    auto parts = store_->AcquireParts("q", session_, {0});
    ASSERT_TRUE(parts.ok() && parts->size() == 1u);
    epoch_ = (*parts)[0].epoch;
  }

  // Enqueues p0..p<n-1> and claims them as one batch.
  Batch Claim(int n) {
    for (int i = 0; i < n; ++i) {
      NewItem item;
      item.payload = absl::StrCat("p", i);
      EXPECT_TRUE(store_->Enqueue("q", item).ok());
    }
    return ClaimReady(n);
  }

  // As Claim, but p<nth> comes on its `attempt`th attempt: its earlier ones
  // failed (retried at once; the others' attempts given back), so the store
  // holds the attempts a worker's claim would have met.
  Batch ClaimOnAttempt(int n, int nth, int attempt) {
    Batch b = Claim(n);
    for (int a = 1; a < attempt; ++a) {
      FinishRequest req;
      req.queue = "q";
      req.session = session_;
      req.items = b.items;
      req.parts = {{0, epoch_}};
      req.max_attempts = attempt + 1;
      auto failed = store_->Finish(req, [&](Tx&, absl::Span<const Item> items) {
        std::vector<Outcome> out;
        for (const Item& i : items) {
          Outcome o{i.id, i.part, Outcome::Kind::kRetry};
          o.refund_attempt = i.id != b.items[nth].id;
          out.push_back(o);
        }
        return absl::StatusOr<std::vector<Outcome>>(out);
      });
      EXPECT_TRUE(failed.ok() && failed->retried.size() == b.items.size()) << failed.status();
      b = ClaimReady(n);
    }
    EXPECT_EQ(b.items[nth].attempts, attempt);
    return b;
  }

  // Claims the n ready items as one batch.
  Batch ClaimReady(int n) {
    ClaimRequest c;
    c.queue = "q";
    c.session = session_;
    c.parts = {{0, epoch_, std::nullopt, n}};
    c.limit = n;
    c.include_suspect = false;
    auto items = store_->Claim(c);
    EXPECT_TRUE(items.ok()) << items.status();
    Batch b;
    if (items.ok()) b.items = *items;
    EXPECT_EQ(b.items.size(), static_cast<size_t>(n));
    return b;
  }

  // Finishes `batch` as the consumer does: the batch attempt, then the
  // isolating run if the attempt asks for one.
  absl::StatusOr<FinishResult> Finish(Batch& batch) { return Finish(batch, runner_); }
  absl::StatusOr<FinishResult> Finish(Batch& batch, BatchRunner& runner) {
    FinishRequest req;
    req.queue = "q";
    req.session = session_;
    req.items = batch.items;
    req.parts = {{0, epoch_}};
    req.max_attempts = kMaxAttempts;
    bool need_isolation = false;
    auto body = [&](Tx& tx, absl::Span<const Item> owned) {
      RoundTripTx rt(tx, clock_);
      ++transactions_;
      auto r = runner.Run(rt, owned, session_, gen_, batch, &need_isolation);
      savepoints_ += rt.savepoints();
      return r;
    };
    absl::StatusOr<FinishResult> r = store_->Finish(req, body);
    if (!r.ok() && need_isolation && !batch.isolate) {
      batch.isolate = true;
      need_isolation = false;
      r = store_->Finish(req, body);
    }
    return r;
  }

  bool FollowedUp(const std::string& payload) {
    auto st = store_->GetItemStateByDedupKey("follow", "after-" + payload);
    return st.ok() && st->kind == ItemState::Kind::kPending;
  }
  ItemState StateOf(const Item& item) {
    auto st = store_->GetItemState("q", item.id);
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? *st : ItemState{};
  }
  int64_t FollowUps() {
    auto st = store_->Status("follow");
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? st->parts[0].ready : -1;
  }

  ManualClock clock_;
  MemDatabase db_{&clock_};
  std::unique_ptr<Store> store_ = db_.Connect();
  SessionId session_;
  Epoch epoch_;
  FollowUpHandler handler_{clock_};
  BackoffPolicy backoff_{absl::Seconds(1), absl::Minutes(1), 0};
  absl::BitGen gen_;  // no jitter in backoff_: it draws nothing that matters
  BatchRunner runner_{&handler_, FailurePolicy(backoff_, kMaxAttempts), absl::Seconds(1), &clock_,
                      nullptr};
  int savepoints_ = 0;  // savepoint statements sent
  int transactions_ = 0;  // bodies of Finish run
  FinalHandler final_{clock_};
  BatchRunner final_runner_{&final_, FailurePolicy(backoff_, kMaxAttempts), absl::Seconds(1),
                            &clock_, nullptr};
};

TEST_F(BatchRunnerTest, ABatchThatSucceedsRunsOnceAndKeepsEveryWriteAndResult) {
  Batch b = Claim(5);
  auto r = Finish(b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->acked.size(), 5u);
  EXPECT_EQ(handler_.batches, std::vector<size_t>{5});
  EXPECT_TRUE(handler_.alone.empty());
  EXPECT_EQ(savepoints_, 0);
  EXPECT_EQ(FollowUps(), 5);
  const ItemState st = StateOf(b.items[2]);
  EXPECT_EQ(st.kind, ItemState::Kind::kDone);
  EXPECT_EQ(st.result, "done p2");
}

// The example of the brief: a handler that enqueues a follow-up then fails.
// Its enqueue is undone, the others' kept; the others ran again together
// under one savepoint, the failing one alone under its own.
TEST_F(BatchRunnerTest, AFailedItemsEnqueueIsUndoneAndTheOthersAreKept) {
  handler_.failing = {"p2"};
  Batch b = Claim(5);
  auto r = Finish(b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->acked.size(), 4u);
  EXPECT_EQ(r->retried, std::vector<int64_t>{b.items[2].id});
  EXPECT_EQ(b.blamed, std::vector<int64_t>{b.items[2].id});
  EXPECT_EQ(handler_.batches, (std::vector<size_t>{5, 4}));
  EXPECT_EQ(handler_.alone, std::vector<std::string>{"p2"});
  for (const std::string p : {"p0", "p1", "p3", "p4"}) EXPECT_TRUE(FollowedUp(p)) << p;
  EXPECT_FALSE(FollowedUp("p2"));
  EXPECT_EQ(FollowUps(), 4) << "the rolled-back batch attempt left nothing either";
  const ItemState failed = StateOf(b.items[2]);
  EXPECT_EQ(failed.kind, ItemState::Kind::kPending);
  EXPECT_EQ(failed.attempts, 1);
  EXPECT_EQ(failed.error, "p2 fails after enqueueing");
  EXPECT_EQ(StateOf(b.items[3]).result, "done p3");
}

// A group that fails again sheds the item it blames then; the next round
// (which still pays: cheap items, one rerun in four failed) succeeds.
TEST_F(BatchRunnerTest, AGroupThatFailsAgainShedsTheItemsItBlames) {
  handler_.failing = {"p2"};
  handler_.fails_in_company = "p4";
  handler_.fails_in_company_of = 4;
  Batch b = Claim(5);
  auto r = Finish(b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(handler_.batches, (std::vector<size_t>{5, 4, 3}));
  EXPECT_EQ(handler_.alone, (std::vector<std::string>{"p2", "p4"}));
  EXPECT_EQ(r->acked.size(), 4u);
  EXPECT_EQ(r->retried.size(), 1u);
  EXPECT_TRUE(FollowedUp("p4")) << "kept from its run alone";
  EXPECT_FALSE(FollowedUp("p2"));
  EXPECT_EQ(FollowUps(), 4);
  // One failure (p4's) in 4 + 3 + 1 reruns, the older ones weighing a little less.
  EXPECT_NEAR(runner_.RerunFailureRate(), 1.0 / 8, 0.01);
}

TEST_F(BatchRunnerTest, AHandlerThatCannotSayWhichFailedGetsEveryItemRunAlone) {
  handler_.failing = {"p1"};
  handler_.batch_throws = true;
  Batch b = Claim(4);
  auto r = Finish(b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(b.blamed.empty());
  EXPECT_EQ(handler_.batches, std::vector<size_t>{4});
  EXPECT_EQ(handler_.alone, (std::vector<std::string>{"p0", "p1", "p2", "p3"}));
  EXPECT_EQ(r->acked.size(), 3u);
  EXPECT_EQ(r->retried.size(), 1u);
  EXPECT_EQ(FollowUps(), 3);
  EXPECT_FALSE(FollowedUp("p1"));
}

// A lone item runs without a savepoint; when it fails, the rollback takes
// its enqueue and the rerun records the failure without running it again.
TEST_F(BatchRunnerTest, ALoneItemRunsWithoutASavepointAndOncePerAttempt) {
  handler_.failing = {"p0"};
  Batch b = Claim(1);
  auto r = Finish(b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(handler_.alone, std::vector<std::string>{"p0"});
  EXPECT_TRUE(handler_.batches.empty());
  EXPECT_EQ(savepoints_, 0);
  EXPECT_EQ(r->retried.size(), 1u);
  EXPECT_EQ(FollowUps(), 0);
  EXPECT_EQ(StateOf(b.items[0]).error, "p0 fails after enqueueing");
}

TEST_F(BatchRunnerTest, AFailureOnTheLastAttemptIsDead) {
  handler_.failing = {"p0"};
  Batch b = ClaimOnAttempt(2, 0, kMaxAttempts);  // p0 on its last attempt
  auto r = Finish(b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dead, std::vector<int64_t>{b.items[0].id});
  EXPECT_EQ(StateOf(b.items[0]).kind, ItemState::Kind::kDead);
  EXPECT_EQ(StateOf(b.items[0]).error, "p0 fails after enqueueing");
}

TEST_F(BatchRunnerTest, AnItemInACrashLoopIsDeadWithoutRunning) {
  Batch b = ClaimOnAttempt(3, 1, kMaxAttempts + 1);  // p1 past its last: a crash loop
  auto r = Finish(b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(handler_.batches, std::vector<size_t>{2});
  EXPECT_TRUE(handler_.alone.empty()) << "nor alone";
  EXPECT_EQ(r->dead, std::vector<int64_t>{b.items[1].id});
  EXPECT_EQ(r->acked.size(), 2u);
  EXPECT_FALSE(FollowedUp("p1"));
  EXPECT_NE(StateOf(b.items[1]).error.find("(crash loop)"), std::string::npos);
}

// A whole batch throttled (an HTTP 429): one rollback, then every item's
// retry recorded without running it again, its attempt given back even on
// its last attempt.
TEST_F(BatchRunnerTest, AThrottledBatchIsRetriedWithoutRunningItItemByItem) {
  handler_.throttled = {"p0", "p1", "p2", "p3", "p4"};
  Batch b = ClaimOnAttempt(5, 0, kMaxAttempts);  // p0 on its last attempt
  auto r = Finish(b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(handler_.batches, std::vector<size_t>{5});
  EXPECT_TRUE(handler_.alone.empty());
  EXPECT_EQ(savepoints_, 0);
  EXPECT_EQ(r->retried.size(), 5u);
  EXPECT_TRUE(r->dead.empty());
  for (const Item& item : b.items) {
    const ItemState st = StateOf(item);
    EXPECT_EQ(st.kind, ItemState::Kind::kPending);
    EXPECT_EQ(st.attempts, item.attempts - 1) << "being told to wait is not the item's failure";
    EXPECT_EQ(st.error, item.payload + " throttled");
  }
  // They come back after the 7 s the handler asked for, not the 1 s backoff.
  auto claim = [&] {
    ClaimRequest c;
    c.queue = "q";
    c.session = session_;
    c.parts = {{0, epoch_, std::nullopt, 5}};
    c.limit = 5;
    c.include_suspect = false;
    auto items = store_->Claim(c);
    EXPECT_TRUE(items.ok()) << items.status();
    return items.ok() ? items->size() : 0u;
  };
  clock_.Advance(absl::Seconds(6));
  EXPECT_EQ(claim(), 0u);
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(claim(), 5u);
}

// One item throttled among others: the others are acked together, and the
// throttled one is not run again, alone or in their group.
TEST_F(BatchRunnerTest, AThrottledItemIsNotRunAgainAndTheOthersAreAcked) {
  handler_.throttled = {"p1"};
  Batch b = Claim(4);
  auto r = Finish(b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(handler_.batches, (std::vector<size_t>{4, 3}));
  EXPECT_TRUE(handler_.alone.empty());
  EXPECT_EQ(r->acked.size(), 3u);
  EXPECT_EQ(r->retried, std::vector<int64_t>{b.items[1].id});
  EXPECT_EQ(FollowUps(), 3);
  EXPECT_EQ(StateOf(b.items[1]).attempts, 0);
}

TEST_F(BatchRunnerTest, ALoneThrottledItemRunsOnceAndKeepsItsAttempt) {
  handler_.throttled = {"p0"};
  Batch b = Claim(1);
  auto r = Finish(b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(handler_.alone, std::vector<std::string>{"p0"});
  EXPECT_EQ(r->retried.size(), 1u);
  EXPECT_EQ(StateOf(b.items[0]).attempts, 0);
}

// DeadNow is a failure like another: recorded from a run of the item alone
// (its enqueue undone), then dead on its first attempt.
TEST_F(BatchRunnerTest, DeadNowDeadLettersOnTheFirstAttempt) {
  handler_.dead_now = {"p1"};
  Batch b = Claim(3);
  auto r = Finish(b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(handler_.alone, std::vector<std::string>{"p1"});
  EXPECT_EQ(r->dead, std::vector<int64_t>{b.items[1].id});
  EXPECT_EQ(r->acked.size(), 2u);
  EXPECT_FALSE(FollowedUp("p1"));
  const ItemState st = StateOf(b.items[1]);
  EXPECT_EQ(st.kind, ItemState::Kind::kDead);
  EXPECT_EQ(st.error, "p1 can never work");
  EXPECT_EQ(st.attempts, 1);
}

TEST_F(BatchRunnerTest, AHandlerOverItsDeadlineHasFailed) {
  handler_.slow = "p1";
  handler_.slow_cost = absl::Seconds(2);  // the timeout is 1 s
  Batch b = Claim(3);
  auto r = Finish(b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(b.blamed.empty()) << "a batch over time cannot say which item was slow";
  EXPECT_EQ(handler_.alone, (std::vector<std::string>{"p0", "p1", "p2"}));
  EXPECT_EQ(r->acked.size(), 2u);
  EXPECT_EQ(r->retried, std::vector<int64_t>{b.items[1].id});
  EXPECT_EQ(StateOf(b.items[1]).error, "handler timed out after 2s (--handler-timeout is 1s)");
  EXPECT_FALSE(FollowedUp("p1"));
}

// Every item alone keeps a savepoint until the commit; past 48 the rest are
// left (kLeave) for another transaction, and stay claimed.
TEST_F(BatchRunnerTest, AnIsolatingRunKeepsAtMost48SavepointsAndLeavesTheRest) {
  handler_.batch_throws = true;
  handler_.failing = {"p3"};
  Batch b = Claim(60);
  auto r = Finish(b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->acked.size(), 48u);
  EXPECT_EQ(r->retried.size(), 1u) << "a failure keeps no savepoint";
  std::vector<int64_t> left;
  for (int i = 49; i < 60; ++i) left.push_back(b.items[i].id);
  EXPECT_EQ(b.left, left);
  EXPECT_EQ(handler_.alone.size(), 49u);
  EXPECT_EQ(FollowUps(), 48);
  EXPECT_EQ(StateOf(b.items[59]).kind, ItemState::Kind::kPending);
  EXPECT_EQ(StateOf(b.items[59]).attempts, 0) << "left, not failed";
}

// A handler whose statuses are final runs once per batch: each item's status
// is recorded as it is, in the same transaction, without a savepoint and
// without sending any item again. Only the items it answered ok wrote.
TEST_F(BatchRunnerTest, AFinalHandlersStatusesAreRecordedInOneTransactionWithoutARerun) {
  final_.failing = {"p2"};
  final_.dead_now = {"p3"};
  final_.throttled = {"p1"};
  Batch b = Claim(6);
  auto r = Finish(b, final_runner_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(final_.batches, std::vector<size_t>{6}) << "one call, nothing run again";
  EXPECT_EQ(transactions_, 1);
  EXPECT_EQ(savepoints_, 0);
  EXPECT_EQ(r->acked.size(), 3u);
  EXPECT_EQ(r->retried, (std::vector<int64_t>{b.items[1].id, b.items[2].id}));
  EXPECT_EQ(r->dead, std::vector<int64_t>{b.items[3].id});
  for (const std::string p : {"p0", "p4", "p5"}) EXPECT_TRUE(FollowedUp(p)) << p;
  EXPECT_EQ(FollowUps(), 3);
  EXPECT_EQ(StateOf(b.items[4]).result, "done p4");
  const ItemState failed = StateOf(b.items[2]);
  EXPECT_EQ(failed.attempts, 1);
  EXPECT_EQ(failed.error, "p2 failed");
  EXPECT_EQ(StateOf(b.items[1]).attempts, 0) << "throttled: the attempt given back (I9)";
  EXPECT_EQ(StateOf(b.items[3]).kind, ItemState::Kind::kDead);
}

// A lone failed item of a final handler is recorded in the transaction it
// ran in: no rollback and no second transaction.
TEST_F(BatchRunnerTest, AFinalHandlersLoneFailureTakesOneTransaction) {
  final_.failing = {"p0"};
  Batch b = Claim(1);
  auto r = Finish(b, final_runner_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(final_.batches, std::vector<size_t>{1});
  EXPECT_EQ(transactions_, 1);
  EXPECT_EQ(r->retried.size(), 1u);
  EXPECT_EQ(StateOf(b.items[0]).error, "p0 failed");
}

// A failure without blame (no statuses) from a final handler, which wrote
// nothing: each item then runs alone in the same transaction, without
// savepoints, so only the item at fault uses an attempt (I9).
TEST_F(BatchRunnerTest, AFinalHandlerThatCannotSayWhichRunsEachItemAloneInTheSameTransaction) {
  final_.cannot_say = true;
  final_.failing = {"p1"};
  Batch b = Claim(3);
  auto r = Finish(b, final_runner_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(final_.batches, (std::vector<size_t>{3, 1, 1, 1}));
  EXPECT_EQ(transactions_, 1);
  EXPECT_EQ(savepoints_, 0);
  EXPECT_EQ(r->acked.size(), 2u);
  EXPECT_EQ(r->retried, std::vector<int64_t>{b.items[1].id});
  EXPECT_EQ(FollowUps(), 2);
  EXPECT_EQ(StateOf(b.items[0]).kind, ItemState::Kind::kDone);
}

// A stop (Consumer::Stop) caps the deadline of the calls that start, and
// once its drain's end has passed no call starts: a batch whose handler
// failed without blame is not run again item by item (a child that keeps
// dying is not restarted for each), and the run returns the stop signal,
// so nothing of it commits and no item uses an attempt.
TEST_F(BatchRunnerTest, AStopCapsTheDeadlinesAndStartsNoCallPastTheDrainsEnd) {
  final_.cannot_say = true;
  final_.batch_cost = absl::Milliseconds(600);
  Batch b = Claim(3);
  const absl::Time drain_end = clock_.Now() + absl::Milliseconds(500);
  final_runner_.StopBy(drain_end);
  auto r = Finish(b, final_runner_);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(BatchRunner::IsStopSignal(r.status())) << r.status();
  EXPECT_EQ(final_.batches, std::vector<size_t>{3}) << "no item run alone past the drain's end";
  ASSERT_EQ(final_.deadlines.size(), 1u);
  EXPECT_EQ(final_.deadlines[0], drain_end) << "not the 1 s handler timeout";
  for (const Item& item : b.items) {
    const ItemState st = StateOf(item);
    EXPECT_EQ(st.kind, ItemState::Kind::kPending);
    EXPECT_EQ(st.attempts, 0) << "rolled back: no attempt used";
  }
  // And no call starts at all now.
  final_.batches.clear();
  EXPECT_TRUE(BatchRunner::IsStopSignal(Finish(b, final_runner_).status()));
  EXPECT_TRUE(final_.batches.empty());
}

// At the drain timeout the calls under way are given up: they see their
// cancel flag, and the run returns the stop signal after them.
TEST_F(BatchRunnerTest, CancelledCallsSeeTheirFlagAndTheRunStops) {
  Batch b = Claim(2);
  auto r = Finish(b, final_runner_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(final_.cancelled, std::vector<bool>{false});
  // A call under way when the drain ends: the flag it was given turns true,
  // and whatever it answered is not recorded.
  final_.during = [&] { final_runner_.CancelCalls(); };
  Batch c = Claim(2);
  EXPECT_TRUE(BatchRunner::IsStopSignal(Finish(c, final_runner_).status()));
  EXPECT_EQ(final_.cancelled, (std::vector<bool>{false, true}));
  for (const Item& item : c.items) {
    EXPECT_EQ(StateOf(item).kind, ItemState::Kind::kPending) << "rolled back";
    EXPECT_EQ(StateOf(item).attempts, 0);
  }
  // No call starts once calls are given up.
  final_.batches.clear();
  EXPECT_TRUE(BatchRunner::IsStopSignal(Finish(c, final_runner_).status()));
  EXPECT_TRUE(final_.batches.empty());
}

// The cost model of the group rounds.
TEST(GroupRoundPays, OnlyWhenTheRoundTripsItSavesOutweighTheWorkItRisks) {
  const absl::Duration sp = absl::Microseconds(100), cheap = absl::Microseconds(2),
                       slow = absl::Milliseconds(8);
  // Reruns that never fail: a group always pays, however slow its items.
  EXPECT_TRUE(BatchRunner::GroupRoundPays(0, 2, slow, sp));
  EXPECT_TRUE(BatchRunner::GroupRoundPays(0, 99, cheap, sp));
  EXPECT_FALSE(BatchRunner::GroupRoundPays(0, 1, cheap, sp));  // one item: alone
  // 1% of reruns fail: a group of 99 succeeds 37% of the time; worth it for
  // a batch INSERT, not for handlers of 8 ms (0.8 s risked to save 20 ms).
  EXPECT_TRUE(BatchRunner::GroupRoundPays(0.01, 99, cheap, sp));
  EXPECT_FALSE(BatchRunner::GroupRoundPays(0.01, 99, slow, sp));
  // 5%: a group of 95 almost never succeeds.
  EXPECT_FALSE(BatchRunner::GroupRoundPays(0.05, 95, cheap, sp));
  // 20% with slow handlers (Fault.HandlersFailingAtRandom).
  EXPECT_FALSE(BatchRunner::GroupRoundPays(0.2, 40, slow, sp));
  EXPECT_FALSE(BatchRunner::GroupRoundPays(1, 10, cheap, sp));
}

}  // namespace
}  // namespace partq
