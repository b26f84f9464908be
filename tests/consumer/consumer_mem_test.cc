// A whole Consumer (session, claimer, workers) on MemStore, with one
// ManualClock as the consumer's clock and the database's: retries come due,
// polls fire and drains time out when the test moves the time on, never by
// sleeping. (consumer_test runs the database side on PostgreSQL.)
//
// MemStore has no LISTEN, so new items are found by the poll; and it holds
// its one lock for a whole Finish, handler included, so a batch is kept in
// flight here by a Finish that is slow on the clock before it reaches the
// store (store/fault_store.h), not by a blocked handler.
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/clock.h"
#include "base/log.h"
#include "consumer/consumer.h"
#include "consumer/metrics.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "store/fault_store.h"
#include "store/mem_store.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using testing::WaitUntil;

class ConsumerMemTest : public ::testing::Test {
 protected:
  void CreateQueue(int parts, int max_attempts = 25) {
    QueueConfig q;
    q.name = "q";
    q.parts = parts;
    q.max_attempts = max_attempts;
    // The session heartbeats on the test's clock, every TTL / 3: the longest
    // TTL a queue may have keeps that far apart from every advance here.
    q.session_ttl = absl::Hours(24);
    ASSERT_TRUE(db_.Connect()->CreateQueue(q).ok());
  }

  std::vector<int64_t> Enqueue(int n, const std::string& prefix = "p") {
    auto store = db_.Connect();
    std::vector<int64_t> ids;
    for (int i = 0; i < n; ++i) {
      NewItem item;
      item.payload = absl::StrCat(prefix, i);
      auto r = store->Enqueue("q", item);
      EXPECT_TRUE(r.ok()) << r.status();
      if (r.ok()) ids.push_back(r->id);
    }
    return ids;
  }

  ConsumerOptions Options() {
    ConsumerOptions o;
    o.queue = "q";
    o.concurrency = 2;
    o.batch = 10;
    o.clock = &clock_;
    o.poll_interval = absl::Seconds(1);
    o.rescan_interval = absl::Seconds(1);
    o.drain_timeout = absl::Seconds(5);
    o.backoff.base = absl::Seconds(1);
    o.backoff.max = absl::Minutes(1);
    o.backoff.jitter = 0;
    o.retry_backoff = absl::Minutes(10);
    return o;
  }

  ItemState StateOf(int64_t id) {
    auto st = db_.Connect()->GetItemState("q", id);
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? *st : ItemState{};
  }

  bool Owned(int part) {
    auto owners = db_.Connect()->Owners("q");
    return owners.ok() && owners->owners[part].has_value();
  }

  // Moves the clock on by `step` at a time until `done` holds: for waits
  // the test cannot see begin (it never advances a clock a wait has not
  // reached yet in vain: the time stays moved on).
  template <typename F>
  bool AdvanceUntil(F done, absl::Duration step) {
    return WaitUntil([&] {
      if (done()) return true;
      clock_.Advance(step);
      return false;
    });
  }

  ManualClock clock_;
  MemDatabase db_{&clock_};
  FaultInjector faults_{&clock_};
  // What the consumers connect with: the database, through the faults.
  StoreFactory factory_ = faults_.Wrap(db_.Factory());
};

TEST_F(ConsumerMemTest, DrainsEveryItemExactlyOnceAndFindsNewOnesAtThePoll) {
  CreateQueue(4);
  Enqueue(400);
  absl::Mutex mu;
  std::map<int64_t, int> runs;
  auto handler = MakeHandler([&](HandlerCall& call) {
    absl::MutexLock l(&mu);
    ++runs[call.item->id];
    return absl::OkStatus();
  });
  ConsumerOptions o = Options();
  o.concurrency = 3;
  Consumer c(factory_, o, handler.get());
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return c.stats().acked == 400; }));
  // Without LISTEN, items enqueued now are found by the poll, on the clock.
  Enqueue(5, "late");
  clock_.Advance(o.poll_interval);
  ASSERT_TRUE(WaitUntil([&] { return c.stats().acked == 405; }));
  c.Stop();
  const ConsumerStats st = c.stats();
  EXPECT_EQ(st.claimed, 405);
  EXPECT_EQ(st.retried + st.dead + st.fenced + st.finish_errors, 0);
  EXPECT_EQ(c.in_flight(), 0);
  {
    absl::MutexLock l(&mu);
    EXPECT_EQ(runs.size(), 405u);
    for (const auto& [id, n] : runs) EXPECT_EQ(n, 1) << id;
  }
  auto status = db_.Connect()->Status("q");
  ASSERT_TRUE(status.ok());
  for (const auto& p : status->parts) EXPECT_EQ(p.ready + p.delayed + p.in_flight, 0) << p.part;
}

TEST_F(ConsumerMemTest, AFailingItemRetriesWhenItsBackoffHasPassedThenIsDead) {
  CreateQueue(1, /*max_attempts=*/3);
  const int64_t id = Enqueue(1, "bad")[0];
  absl::Mutex mu;
  std::vector<absl::Time> tries;
  auto handler = MakeHandler([&](HandlerCall&) -> absl::Status {
    absl::MutexLock l(&mu);
    tries.push_back(clock_.Now());
    return absl::InternalError("boom: downstream said no");
  });
  const absl::Time t0 = clock_.Now();
  Consumer c(factory_, Options(), handler.get());
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return c.stats().retried == 1; }));
  clock_.Advance(absl::Seconds(1));  // the first backoff (and a poll)
  ASSERT_TRUE(WaitUntil([&] { return c.stats().retried == 2; }));
  clock_.Advance(absl::Seconds(2));  // the second, doubled
  ASSERT_TRUE(WaitUntil([&] { return c.stats().dead == 1; }));
  c.Stop();
  {
    absl::MutexLock l(&mu);
    EXPECT_EQ(tries, (std::vector<absl::Time>{t0, t0 + absl::Seconds(1), t0 + absl::Seconds(3)}));
  }
  const ItemState st = StateOf(id);
  EXPECT_EQ(st.kind, ItemState::Kind::kDead);
  EXPECT_EQ(st.attempts, 3);
  EXPECT_EQ(st.error, "boom: downstream said no");
  EXPECT_EQ(c.stats().acked, 0);
}

// A flood of failures logs ten lines, then says how many it left out when
// the window ends, whether or not another failure comes: before, the count
// waited for the next failure or the stop, so a tail of the log showed
// nothing of the flood's last dead letters.
TEST_F(ConsumerMemTest, TheCountOfFailureLinesLeftOutIsLoggedWhenTheWindowEnds) {
  CreateQueue(1, /*max_attempts=*/1);
  Enqueue(30, "bad");
  auto handler = MakeHandler([](HandlerCall&) { return absl::InternalError("boom"); });
  ::testing::internal::CaptureStderr();
  Consumer c(factory_, Options(), handler.get());
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return c.stats().dead == 30; }));
  clock_.Advance(absl::Seconds(10));  // the failure log's window
  absl::SleepFor(absl::Seconds(1));   // for the claim loop to wake (real time)
  LogLine(LogLevel::kWarning, "test: before the stop");
  c.Stop();
  const std::string log = ::testing::internal::GetCapturedStderr();
  const std::string said = "item failures: 20 lines not logged over the last 10s";
  const size_t count = log.find(said);
  ASSERT_NE(count, std::string::npos) << log;
  EXPECT_LT(count, log.find("test: before the stop")) << "said at the stop only: " << log;
  EXPECT_EQ(log.find("not logged", count + said.size()), std::string::npos) << "twice: " << log;
}

// A handler that returns after its deadline (here: it takes 2 s of the
// clock, the timeout is 1 s) has failed, even though it said OK; the others
// of its batch are acked.
TEST_F(ConsumerMemTest, AHandlerOverItsTimeoutFailsAndTheRestOfItsBatchIsAcked) {
  CreateQueue(1, /*max_attempts=*/1);
  const std::vector<int64_t> ids = Enqueue(3);
  auto handler = MakeHandler([&](HandlerCall& call) {
    if (call.item->payload == "p1") clock_.Advance(absl::Seconds(2));
    return absl::OkStatus();
  });
  ConsumerOptions o = Options();
  o.concurrency = 1;
  o.handler_timeout = absl::Seconds(1);
  Consumer c(factory_, o, handler.get());
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return c.stats().acked + c.stats().dead == 3; }));
  c.Stop();
  EXPECT_EQ(c.stats().acked, 2);
  EXPECT_EQ(c.stats().dead, 1);
  const ItemState slow = StateOf(ids[1]);
  EXPECT_EQ(slow.kind, ItemState::Kind::kDead);
  EXPECT_EQ(slow.error, "handler timed out after 2s (--handler-timeout is 1s)");
  EXPECT_EQ(StateOf(ids[0]).kind, ItemState::Kind::kDone);
}

// A batch whose finish fails is retried after retry_backoff on the clock.
TEST_F(ConsumerMemTest, AFinishThatFailsIsRetriedAfterTheRetryBackoff) {
  CreateQueue(1);
  auto handler = MakeHandler([](HandlerCall&) { return absl::OkStatus(); });
  ConsumerOptions o = Options();
  Consumer c(factory_, o, handler.get());
  ASSERT_TRUE(c.Start().ok());  // its Setup finishes first
  faults_.FailCallsOf("Finish");
  const int64_t id = Enqueue(1)[0];
  clock_.Advance(o.poll_interval);
  ASSERT_TRUE(WaitUntil([&] { return c.stats().finish_errors == 1; }));
  faults_.FailCallsOf("Finish", false);
  const absl::Time failed_at = clock_.Now();
  ASSERT_TRUE(AdvanceUntil([&] { return c.stats().acked == 1; }, absl::Minutes(1)));
  EXPECT_GE(clock_.Now() - failed_at, o.retry_backoff);
  c.Stop();
  EXPECT_EQ(c.stats().finish_errors, 1);
  EXPECT_EQ(StateOf(id).kind, ItemState::Kind::kDone);
}

// A claim that fails (the claimer's connection) is retried after
// retry_backoff on the clock; nothing else claims meanwhile.
TEST_F(ConsumerMemTest, AClaimThatFailsIsRetriedAfterTheRetryBackoff) {
  CreateQueue(1);
  Enqueue(3);
  auto handler = MakeHandler([](HandlerCall&) { return absl::OkStatus(); });
  ConsumerOptions o = Options();
  faults_.FailCallsOf("Claim");
  Consumer c(factory_, o, handler.get());
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return faults_.Calls("Claim") >= 1; }));
  faults_.FailCallsOf("Claim", false);
  const absl::Time failed_at = clock_.Now();
  ASSERT_TRUE(AdvanceUntil([&] { return c.stats().acked == 3; }, absl::Minutes(1)));
  EXPECT_GE(clock_.Now() - failed_at, o.retry_backoff);
  c.Stop();
}

// Stop waits for in-flight batches up to drain_timeout, then gives the parts
// up anyway: the batch here cannot finish in time (its Finish takes a day on
// the clock before it reaches the store). The item stays for the next owner,
// with no attempt counted; when the late Finish reaches the store, the drain
// is over, so its handler does not run and nothing is written (the stop
// signal: not a fenced ack, nor a finish error).
TEST_F(ConsumerMemTest, StopGivesUpOnAnInFlightBatchAfterTheDrainTimeout) {
  CreateQueue(1);
  auto handler = MakeHandler([](HandlerCall&) { return absl::OkStatus(); });
  ConsumerOptions o = Options();
  o.concurrency = 1;
  Consumer c(factory_, o, handler.get());
  ASSERT_TRUE(c.Start().ok());  // its Setup finishes first
  const absl::Duration slow = absl::Hours(24);
  faults_.SlowCallsOf("Finish", slow);
  const int64_t id = Enqueue(1)[0];
  clock_.Advance(o.poll_interval);
  ASSERT_TRUE(WaitUntil([&] { return faults_.Calls("Finish") == 2; }));
  EXPECT_EQ(c.in_flight(), 1);

  const absl::Time stop_began = clock_.Now();
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    c.Stop();
    stopped = true;
  });
  ASSERT_TRUE(WaitUntil([&] { return c.session().state() == Session::State::kLeaving; }));
  ASSERT_TRUE(AdvanceUntil([&] { return !Owned(0); }, absl::Seconds(1)));
  EXPECT_GE(clock_.Now() - stop_began, o.drain_timeout) << "released before the drain timeout";
  EXPECT_LT(clock_.Now() - stop_began, slow) << "the batch was not still in flight";
  EXPECT_FALSE(stopped) << "its worker is still finishing the batch";
  ASSERT_TRUE(AdvanceUntil([&] { return stopped.load(); }, absl::Hours(1)));
  stopper.join();
  const ConsumerStats st = c.stats();
  EXPECT_EQ(st.fenced, 0);
  EXPECT_EQ(st.acked, 0);
  EXPECT_EQ(st.finish_errors, 0);
  const ItemState item = StateOf(id);
  EXPECT_EQ(item.kind, ItemState::Kind::kPending);
  EXPECT_EQ(item.attempts, 0) << "a graceful stop is not a failed attempt";
}

// A graceful stop hands its parts over before it waits for the part-0
// owner's queue status query (its metrics), which reads the whole queue: in
// `partq demo` (500k items, under load) one took 6 s, and a stop that first
// waited for it held its parts as long. Here the query is slow on the clock,
// which the test does not move until the part is free.
TEST_F(ConsumerMemTest, AStopHandsItsPartsOverWithoutWaitingForTheQueueStatusQuery) {
  CreateQueue(1);
  auto handler = MakeHandler([](HandlerCall&) { return absl::OkStatus(); });
  ConsumerOptions o = Options();
  o.status_interval = absl::Seconds(1);
  prometheus::Registry registry;
  ConsumerMetrics metrics(registry, "q");
  faults_.SlowCallsOf("Status", absl::Hours(1));
  Consumer c(factory_, o, handler.get(), &metrics);
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return Owned(0); }));
  ASSERT_TRUE(AdvanceUntil([&] { return faults_.Calls("Status") >= 1; }, absl::Seconds(1)));

  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    c.Stop();
    stopped = true;
  });
  EXPECT_TRUE(WaitUntil([&] { return !Owned(0); })) << "the stop waited for the status query";
  EXPECT_FALSE(stopped) << "the status query was not still running";
  ASSERT_TRUE(AdvanceUntil([&] { return stopped.load(); }, absl::Minutes(10)));
  stopper.join();
}

}  // namespace
}  // namespace partq
