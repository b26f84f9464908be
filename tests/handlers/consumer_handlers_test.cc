// Handlers that misbehave, seen from a real Consumer (on the in-memory store)
// the way a user sees them: exec children (test_child.py) and HTTP servers
// (http_test_server.py) that break the protocol in each way
// docs/handler-protocol.md lists. For each, the test checks a clear error in
// the log, in the item's last error (what `partq dead list` shows) and in
// partq_handler_request_failures_total{reason}; the item to blame retried
// and dead-lettered by the queue's policy while the others are acked
// (nothing lost); and the consumer still working afterwards. How each
// transport detects the fault (what is killed, buffered, parsed) is tested
// in exec_handler_test.cc and http_client_test.cc.
//
// No database: label unit. Nothing sleeps to wait; the handler timeouts are
// the faults under test, and generous enough that a healthy child on a
// loaded machine meets them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "consumer/consumer.h"
#include "consumer/metrics.h"
#include "handlers/exec_handler.h"
#include "handlers/handler_metrics.h"
#include "handlers/http_handler.h"
#include "nlohmann/json.hpp"
#include "store/fault_store.h"
#include "store/mem_store.h"
#include "tests/observability/scrape.h"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

constexpr char kQueue[] = "q";

std::string Quoted(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

// test_child.py serving (misbehaving as payloads ask).
std::string ServeCommand() {
  return absl::StrCat("exec ", Quoted(PYTHON3), " ", Quoted(TEST_CHILD), " serve");
}

std::string Tail(const std::string& log, size_t bytes = 3000) {
  return log.size() <= bytes ? log : "..." + log.substr(log.size() - bytes);
}

class ConsumerHandlersTest : public ::testing::Test {
 protected:
  // Each test creates its queue first.
  void CreateQueue(int max_attempts) {
    QueueConfig q;
    q.name = kQueue;
    q.parts = 1;  // items enqueued together are claimed as one batch
    q.max_attempts = max_attempts;
    ASSERT_TRUE(admin_->CreateQueue(q).ok());
    max_attempts_ = max_attempts;
  }

  std::vector<int64_t> Enqueue(const std::vector<std::string>& payloads) {
    std::vector<int64_t> ids;
    for (const std::string& p : payloads) {
      NewItem item;
      item.payload = p;
      auto r = admin_->Enqueue(kQueue, item);
      EXPECT_TRUE(r.ok()) << r.status();
      ids.push_back(r.ok() ? r->id : -1);
    }
    return ids;
  }

  ItemState State(int64_t id) {
    auto s = admin_->GetItemState(kQueue, id);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : ItemState();
  }

  std::shared_ptr<HandlerMetrics> Metrics(const std::string& transport) {
    return std::make_shared<HandlerMetrics>(registry_, kQueue, transport);
  }
  double Metric(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    return testing::MetricValue(registry_, name, labels).value_or(0);
  }
  double Failures(const std::string& reason) {
    return Metric("partq_handler_request_failures_total", {{"reason", reason}});
  }
  double ItemFailures(const std::string& reason) {
    return Metric("partq_item_failures_total", {{"reason", reason}});
  }

  ExecOptions Exec(const std::string& command) {
    ExecOptions o;
    o.command = command;
    o.queue = kQueue;
    o.max_attempts = max_attempts_;
    o.metrics = Metrics("exec");
    return o;
  }

  std::unique_ptr<Handler> HttpTo(const std::string& url) {
    HttpHandlerOptions o;
    o.url = url;
    o.queue = kQueue;
    o.max_attempts = max_attempts_;
    // The low-speed rule over 1 s windows rather than 5: a trickle fails in
    // 1-2 s per attempt.
    o.client.low_speed_window = absl::Seconds(1);
    o.metrics = Metrics("http");
    auto h = HttpHandler::Create(std::move(o));
    EXPECT_TRUE(h.ok()) << h.status();
    return h.ok() ? std::move(*h) : nullptr;
  }

  // What a run of the consumer left: whether it got done in time, its
  // counters, and the log written meanwhile.
  struct Run {
    bool done = false;
    std::string log;
    ConsumerStats stats;
  };

  // Runs a consumer on `handler` until `done(stats)` holds; then, if `after`
  // is given, enqueues it and waits for it to be acked too (the consumer
  // still works once the fault is over). The log is captured throughout.
  Run Consume(Handler& handler, absl::Duration handler_timeout,
              const std::function<bool(const ConsumerStats&)>& done,
              const std::string& after = "") {
    ConsumerOptions o;
    o.queue = kQueue;
    o.concurrency = 1;
    o.batch = 10;
    o.poll_only = true;
    o.poll_interval = absl::Milliseconds(20);
    o.rescan_interval = absl::Milliseconds(20);
    o.backoff.base = absl::Milliseconds(10);
    o.backoff.max = absl::Milliseconds(20);
    o.handler_timeout = handler_timeout;
    Run run;
    ::testing::internal::CaptureStderr();
    {
      ConsumerMetrics metrics(registry_, kQueue);
      Consumer c(faults_.Wrap(db_.Factory()), o, &handler, &metrics);
      if (c.Start().ok()) {
        run.done = testing::WaitUntil([&] { return done(c.stats()); }, absl::Minutes(2),
                                      absl::Milliseconds(10));
        if (run.done && !after.empty()) {
          const int64_t acked = c.stats().acked;
          after_id_ = Enqueue({after})[0];
          run.done = testing::WaitUntil([&] { return c.stats().acked == acked + 1; },
                                        absl::Minutes(1), absl::Milliseconds(10));
        }
        c.Stop();
      }
      run.stats = c.stats();
    }
    run.log = ::testing::internal::GetCapturedStderr();
    return run;
  }

  // The poison pattern: three good items and `poison` go in one batch. The
  // batch fails without blame, each item runs alone, and only the poison
  // item fails, at every attempt, until the queue's policy dead-letters it;
  // then an item enqueued afterwards is acked. Checks all of that, and that
  // the failure was said as `error` in the log and the item's last error,
  // counted under `reason` as a request failure and under `kind` as an item
  // failure (partq_item_failures_total), and logged as the item's failure.
  void ExpectPoisonDeadLettered(Handler& handler, const std::string& poison,
                                const std::string& reason, const std::string& kind,
                                const std::string& error, absl::Duration handler_timeout) {
    const std::vector<int64_t> ids = Enqueue({"a", "b", poison, "c"});
    const Run run = Consume(
        handler, handler_timeout, [](const ConsumerStats& s) { return s.acked + s.dead == 4; },
        "after");
    ASSERT_TRUE(run.done) << "acked " << run.stats.acked << ", dead " << run.stats.dead << "\n"
                          << Tail(run.log);
    EXPECT_EQ(run.stats.acked, 4);  // a, b, c, after
    EXPECT_EQ(run.stats.dead, 1);

    const ItemState dead = State(ids[2]);
    EXPECT_EQ(dead.kind, ItemState::Kind::kDead);
    EXPECT_EQ(dead.attempts, max_attempts_) << "dead-lettered by the retry policy";
    EXPECT_TRUE(absl::StrContains(dead.error, error)) << dead.error;
    for (size_t i : {0, 1, 3}) {
      const ItemState s = State(ids[i]);
      EXPECT_EQ(s.kind, ItemState::Kind::kDone) << i;
      EXPECT_EQ(s.result, std::vector<std::string>({"a", "b", "", "c"})[i]);
    }
    EXPECT_EQ(State(after_id_).result, "after");

    // Each attempt of the poison item alone failed the same way, and said so.
    EXPECT_GE(Failures(reason), max_attempts_) << Tail(run.log);
    EXPECT_TRUE(absl::StrContains(run.log, error)) << Tail(run.log);
    EXPECT_EQ(ItemFailures(kind), max_attempts_) << Tail(run.log);
    const std::string line = absl::StrCat("queue \"q\": item ", ids[2], " failed at attempt ",
                                          max_attempts_, " of ", max_attempts_, " (", kind, "): ");
    EXPECT_TRUE(absl::StrContains(run.log, line)) << line << "\n" << Tail(run.log);
    EXPECT_TRUE(absl::StrContains(run.log, "; dead-lettered (no attempts left)")) << Tail(run.log);
  }

  MemDatabase db_;
  std::unique_ptr<Store> admin_ = db_.Connect();
  FaultInjector faults_;  // injects nothing: counts the consumer's calls
  prometheus::Registry registry_;
  int max_attempts_ = 0;
  int64_t after_id_ = 0;
};

// --- exec ----------------------------------------------------------------------

// The handler timeout of the cases whose child hangs: each of the poison
// item's attempts waits it out. It also bounds a good item's run alone in a
// freshly restarted child (a Python start), which on a loaded 2-core machine
// took over 2 s.
constexpr absl::Duration kHangTimeout = absl::Seconds(5);

struct ExecCase {
  std::string name;
  std::string payload;                        // what makes test_child.py misbehave (see its modes)
  std::string reason;                         // partq_handler_request_failures_total{reason}
  std::string kind;                           // partq_item_failures_total{reason}
  std::string error;                          // in the log and the item's last error
  absl::Duration timeout = absl::Minutes(1);  // the consumer's handler timeout
};

void PrintTo(const ExecCase& c, std::ostream* os) { *os << c.name; }

class ExecPoisonTest : public ConsumerHandlersTest,
                       public ::testing::WithParamInterface<ExecCase> {};

TEST_P(ExecPoisonTest, ItemIsDeadLetteredByThePolicyTheOthersAreAckedAndTheChildRestarted) {
  const ExecCase& c = GetParam();
  CreateQueue(2);
  ExecHandler handler(Exec(ServeCommand()));
  ExpectPoisonDeadLettered(handler, c.payload, c.reason, c.kind, c.error, c.timeout);
  // Each failure killed the child; the next batch started another.
  EXPECT_GE(handler.stats().kills, max_attempts_);
  EXPECT_GE(Metric("partq_handler_restarts_total"), max_attempts_);
}

INSTANTIATE_TEST_SUITE_P(
    Children, ExecPoisonTest,
    ::testing::Values(
        ExecCase{"PartialLineThenSilence", "misbehave:partial-hang", "timeout", "timeout",
                 "of a line but not its end by the deadline", kHangTimeout},
        ExecCase{"HundredMegabyteLine", "misbehave:huge-line", "bad_reply", "protocol",
                 "wrote a reply line longer than the limit of 16777216 bytes"},
        ExecCase{"IdsItWasNotGiven", "misbehave:unknown-id", "bad_reply", "protocol",
                 "which was not in the batch"},
        ExecCase{"FewerResultsThanItems", "misbehave:fewer", "bad_reply", "protocol",
                 "no result for item"},
        ExecCase{"ExitsBeforeAnswering", "crash", "died", "crash",
                 "exited with status 3; its last stderr line: \"crashing on purpose\""},
        ExecCase{"NeverAnswers", "misbehave:never", "timeout", "timeout",
                 "did not answer by the deadline (it was killed by SIGKILL); the deadline is "
                 "the worker's --handler-timeout",
                 kHangTimeout}),
    [](const auto& test) { return test.param.name; });

// A command whose first starts exit at once (a handler that crashes on
// start-up while a database it needs comes up): the batch waits for the
// restarts, each with its backoff, and every item is acked once the child
// stays up.
TEST_F(ConsumerHandlersTest, ChildThatExitsAtOnceIsRestartedUntilItServes) {
  CreateQueue(2);
  const std::string starts = absl::StrCat(::testing::TempDir(), "/starts_", getpid());
  std::remove(starts.c_str());
  ExecHandler handler(Exec(absl::StrCat("echo started >> ", Quoted(starts), "; [ $(wc -l < ",
                                        Quoted(starts), ") -gt 3 ] || exit 3; ", ServeCommand())));
  const std::vector<int64_t> ids = Enqueue({"a", "b", "c"});
  const Run run = Consume(
      handler, absl::Minutes(1), [](const ConsumerStats& s) { return s.acked + s.dead == 3; },
      "after");
  ASSERT_TRUE(run.done) << Tail(run.log);
  EXPECT_EQ(run.stats.acked, 4);
  EXPECT_EQ(run.stats.dead, 0);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(State(ids[i]).kind, ItemState::Kind::kDone);
  EXPECT_EQ(Failures("died"), 3);
  EXPECT_EQ(Metric("partq_handler_restarts_total"), 3);
  EXPECT_EQ(handler.stats().starts, 4);
  EXPECT_TRUE(absl::StrContains(run.log, "exited with status 3")) << Tail(run.log);
  std::remove(starts.c_str());
}

// A command that never stays up: every item fails at each attempt and is
// dead-lettered by the policy, saying why; the consumer keeps running.
TEST_F(ConsumerHandlersTest, ChildThatAlwaysExitsDeadLettersEveryItemSayingWhy) {
  CreateQueue(2);
  ExecHandler handler(Exec("echo 'cannot connect to the database' >&2; exit 3"));
  const std::vector<int64_t> ids = Enqueue({"a", "b"});
  const Run run =
      Consume(handler, absl::Minutes(1), [](const ConsumerStats& s) { return s.dead == 2; });
  ASSERT_TRUE(run.done) << Tail(run.log);
  EXPECT_EQ(run.stats.acked, 0);
  for (int64_t id : ids) {
    const ItemState s = State(id);
    EXPECT_EQ(s.kind, ItemState::Kind::kDead);
    EXPECT_EQ(s.attempts, max_attempts_);
    EXPECT_TRUE(absl::StrContains(s.error, "exited with status 3")) << s.error;
    EXPECT_TRUE(absl::StrContains(s.error, "cannot connect to the database")) << s.error;
  }
  EXPECT_GE(Failures("died"), 2 * max_attempts_);
  EXPECT_TRUE(absl::StrContains(run.log, "exec[pid")) << "the child's stderr reaches the log";
}

// --- a stop ends within the drain timeout --------------------------------------

// Starts a consumer (drain timeout 1 s, handler timeout 30 s) on `handler`,
// waits until it holds the items it claimed and `under_way` (when given)
// says a handler call has begun, stops it, and returns how long the stop
// took. The log goes to *log.
absl::Duration StopWhileBusy(Handler& handler, MemDatabase& db, std::string* log,
                             const std::function<bool()>& under_way = nullptr) {
  ConsumerOptions o;
  o.queue = kQueue;
  o.concurrency = 2;
  o.batch = 5;
  o.poll_only = true;
  o.poll_interval = absl::Milliseconds(20);
  o.drain_timeout = absl::Seconds(1);
  o.handler_timeout = absl::Seconds(30);
  absl::Duration took = absl::InfiniteDuration();
  ::testing::internal::CaptureStderr();
  {
    Consumer c(db.Factory(), o, &handler);
    if (c.Start().ok() && testing::WaitUntil([&] {
          return c.in_flight() > 0 && (under_way == nullptr || under_way());
        })) {
      const absl::Time t0 = absl::Now();
      c.Stop();
      took = absl::Now() - t0;
    }
  }
  *log = ::testing::internal::GetCapturedStderr();
  return took;
}

// A child that never answers: the calls under way are given up at the
// drain's end (the child killed), and the items go back without using an
// attempt. The stop took the handler timeout (30 s) before.
TEST_F(ConsumerHandlersTest, AStopEndsWithinTheDrainTimeoutWhileAChildHangs) {
  CreateQueue(3);
  ExecHandler handler(Exec(ServeCommand()));
  std::vector<std::string> payloads(10, "misbehave:never");
  const std::vector<int64_t> ids = Enqueue(payloads);
  std::string log;
  // Claimed is not yet called: on a loaded machine a stop that came between
  // the two found no call to give up. A child started is a call under way.
  const absl::Duration took =
      StopWhileBusy(handler, db_, &log, [&] { return handler.stats().starts > 0; });
  // The drain's second, and some slack for a loaded machine (a bound, not
  // a measurement).
  EXPECT_LT(took, absl::Seconds(3)) << Tail(log);
  for (int64_t id : ids) {
    const ItemState s = State(id);
    EXPECT_EQ(s.kind, ItemState::Kind::kPending);
    EXPECT_EQ(s.attempts, 0) << "given back unfinished: not the item's failure";
  }
  EXPECT_TRUE(absl::StrContains(log, "giving up the handler calls still running")) << Tail(log);
}

// Children that die at once, over and over: no child is restarted and no
// item run alone past the drain's end (the issue's 13 s stop with a 10 s
// drain timeout).
TEST_F(ConsumerHandlersTest, AStopEndsWithinTheDrainTimeoutWhileChildrenKeepDying) {
  CreateQueue(100);
  ExecHandler handler(Exec("read line; echo 'cannot start' >&2; exit 3"));
  std::vector<std::string> payloads(20, "x");
  Enqueue(payloads);
  std::string log;
  const absl::Duration took = StopWhileBusy(handler, db_, &log);
  EXPECT_LT(took, absl::Seconds(3)) << Tail(log);
}

// --- failure hints (exec; the hints are the transport's, the policy the consumer's) ---

TEST_F(ConsumerHandlersTest, DeadTrueIsDeadLetteredAtItsFirstAttempt) {
  CreateQueue(5);
  ExecHandler handler(Exec(ServeCommand()));
  const std::vector<int64_t> ids = Enqueue({"a", "dead", "b"});
  const Run run = Consume(handler, absl::Minutes(1),
                          [](const ConsumerStats& s) { return s.acked + s.dead == 3; });
  ASSERT_TRUE(run.done) << Tail(run.log);
  EXPECT_EQ(run.stats.acked, 2);
  const ItemState dead = State(ids[1]);
  EXPECT_EQ(dead.kind, ItemState::Kind::kDead);
  EXPECT_EQ(dead.error, "can never succeed");
  // The handler answered: an item's failure, not the request's (and the
  // metrics are wired: the requests were counted).
  EXPECT_GE(Metric("partq_handler_requests_total"), 1);
  EXPECT_EQ(Metric("partq_handler_request_failures_total"), 0);
  EXPECT_EQ(dead.attempts, 1) << "dead: true gives up at once, with attempts left";
}

TEST_F(ConsumerHandlersTest, RetryInIsHonouredInsteadOfTheBackoff) {
  CreateQueue(5);
  ExecHandler handler(Exec(ServeCommand()));
  // Fails at attempt 1 asking for 1.5 s; the backoff policy would retry
  // within 20 ms.
  const std::vector<int64_t> ids = Enqueue({"retry:1.5"});
  const absl::Time start = absl::Now();
  const Run run =
      Consume(handler, absl::Minutes(1), [](const ConsumerStats& s) { return s.acked == 1; });
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(run.done) << Tail(run.log);
  EXPECT_EQ(State(ids[0]).result, "attempt 2");  // the attempt counted
  EXPECT_GE(took, absl::Milliseconds(1500));
}

// --- one reply, applied as it is -------------------------------------------------

// The requests a TEST_CHILD_TRACE child logged ("request: P,P,..."), in order.
std::vector<std::string> TracedRequests(const std::string& log) {
  std::vector<std::string> out;
  for (size_t at = log.find("request: "); at != std::string::npos;
       at = log.find("request: ", at + 1)) {
    const size_t end = log.find('\n', at);
    out.push_back(log.substr(at + 9, end == std::string::npos ? end : end - at - 9));
  }
  return out;
}

// Items `a effects dead c retry:1` in one batch: one request, whose reply is
// applied as it is in one ack. The good items are acked with their results
// and effects, `dead` is dead-lettered and `retry:1` retried as the reply
// says, and only the retry is ever sent again (its own next attempt).
TEST_F(ConsumerHandlersTest, ExecRepliesFailuresAreRecordedWithoutSendingTheBatchAgain) {
  CreateQueue(3);
  QueueConfig next;
  next.name = "next";
  next.parts = 1;
  ASSERT_TRUE(admin_->CreateQueue(next).ok());
  ExecHandler handler(Exec("TEST_CHILD_TRACE=1 " + ServeCommand()));
  const std::vector<int64_t> ids = Enqueue({"a", "effects", "dead", "c", "retry:1"});
  const Run run = Consume(handler, absl::Minutes(1),
                          [](const ConsumerStats& s) { return s.acked + s.dead == 5; });
  ASSERT_TRUE(run.done) << Tail(run.log);
  EXPECT_EQ(TracedRequests(run.log),
            (std::vector<std::string>{"a,effects,dead,c,retry:1", "retry:1"}))
      << Tail(run.log);
  EXPECT_EQ(State(ids[0]).result, "a");
  EXPECT_EQ(State(ids[1]).result, "done");
  EXPECT_EQ(State(ids[3]).result, "c");
  const ItemState dead = State(ids[2]);
  EXPECT_EQ(dead.kind, ItemState::Kind::kDead);
  EXPECT_EQ(dead.attempts, 1);
  EXPECT_EQ(dead.error, "can never succeed");
  const ItemState retried = State(ids[4]);
  EXPECT_EQ(retried.result, "attempt 2");
  // The effects of the one ok item that had some, once.
  auto next_status = admin_->Status("next");
  ASSERT_TRUE(next_status.ok());
  EXPECT_EQ(next_status->parts[0].ready + next_status->parts[0].delayed, 1);
  ASSERT_EQ(db_.Outbox().size(), 1u);
  EXPECT_EQ(db_.Outbox()[0].topic, "events");
  EXPECT_EQ(Metric("partq_handler_requests_total"), 2);
}

// 400 items through exec in batches of 10, every 20th one dead: 20 batches
// with a failure. Their dead-letterings are written together, a few at a
// time, not each by its batch's ack (which stays the lean one: issue 49);
// every item is asked of the handler once, the good ones acked with their
// results, the failing ones dead with the handler's error.
TEST_F(ConsumerHandlersTest, FailuresOfManyBatchesAreWrittenTogetherNotByEachBatchsAck) {
  CreateQueue(3);
  ExecHandler handler(Exec("TEST_CHILD_TRACE=1 " + ServeCommand()));
  std::vector<std::string> payloads;
  for (int i = 0; i < 400; ++i) payloads.push_back(i % 20 == 7 ? "dead" : absl::StrCat("p", i));
  const std::vector<int64_t> ids = Enqueue(payloads);
  const Run run = Consume(handler, absl::Minutes(1),
                          [](const ConsumerStats& s) { return s.acked + s.dead == 400; });
  ASSERT_TRUE(run.done) << Tail(run.log);
  EXPECT_EQ(run.stats.acked, 380);
  EXPECT_EQ(run.stats.dead, 20);
  EXPECT_EQ(run.stats.retried, 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    const ItemState st = State(ids[i]);
    if (payloads[i] == "dead") {
      EXPECT_EQ(st.kind, ItemState::Kind::kDead) << i;
      EXPECT_EQ(st.attempts, 1) << i;
      EXPECT_EQ(st.error, "can never succeed") << i;
    } else {
      EXPECT_EQ(st.result, payloads[i]) << i;
    }
  }
  size_t asked = 0;
  for (const std::string& request : TracedRequests(run.log)) {
    asked += std::vector<std::string>(absl::StrSplit(request, ',')).size();
  }
  EXPECT_EQ(asked, 400u) << "an item was sent again: " << Tail(run.log);
  EXPECT_GE(faults_.Calls("FinishWithFailures"), 1);
  EXPECT_LE(faults_.Calls("FinishWithFailures"), 10)
      << "one Finish that writes failures per failing batch (20) is what issue 49 removed";
}

// A failure deferred when the worker stops is written before its part goes:
// the stop's revoke waits for it, so the item is dead, not left in flight
// for the next owner to run again.
TEST_F(ConsumerHandlersTest, ADeferredFailureIsWrittenBeforeTheStopLetsItsPartGo) {
  CreateQueue(3);
  ExecHandler handler(Exec(ServeCommand()));
  const std::vector<int64_t> ids = Enqueue({"a", "dead"});
  const Run run =
      Consume(handler, absl::Minutes(1), [](const ConsumerStats& s) { return s.acked == 1; });
  ASSERT_TRUE(run.done) << Tail(run.log);
  EXPECT_EQ(run.stats.dead, 1) << Tail(run.log);
  const ItemState st = State(ids[1]);
  EXPECT_EQ(st.kind, ItemState::Kind::kDead);
  EXPECT_EQ(st.error, "can never succeed");
  auto status = admin_->Status(kQueue);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->parts[0].in_flight, 0);
}

// Each failure is logged once it commits, saying the queue, the item, its
// attempt, the error and what comes next, and counted by its kind (here
// the follow-up queue "next" was never created: the issue's typo).
TEST_F(ConsumerHandlersTest, EachItemFailureIsLoggedWithWhatComesNextAndCountedByKind) {
  CreateQueue(3);
  ExecHandler handler(Exec(ServeCommand()));
  const std::vector<int64_t> ids = Enqueue({"a", "dead", "retry:0.5", "effects:nosuchqueue"});
  const Run run = Consume(handler, absl::Minutes(1),
                          [](const ConsumerStats& s) { return s.acked + s.dead == 4; });
  ASSERT_TRUE(run.done) << Tail(run.log);
  for (const std::string& line :
       {absl::StrCat("queue \"q\": item ", ids[1],
                     " failed at attempt 1 of 3 (handler_error): can never succeed; "
                     "dead-lettered (the handler said it is dead)"),
        absl::StrCat("queue \"q\": item ", ids[2],
                     " failed at attempt 1 of 3 (handler_error): not yet; retry in 500ms"),
        absl::StrCat("queue \"q\": item ", ids[3],
                     " failed at attempt 1 of 3 (effect): effect enqueue[0] into \"next\": unknown "
                     "queue \"next\"; retry in ")}) {
    EXPECT_TRUE(absl::StrContains(run.log, line)) << line << "\n" << Tail(run.log);
  }
  EXPECT_TRUE(absl::StrContains(run.log, " W partq: queue \"q\": item ")) << "at warning";
  EXPECT_EQ(ItemFailures("handler_error"), 2);
  EXPECT_EQ(ItemFailures("effect"), 3);  // its three attempts
  EXPECT_EQ(ItemFailures("timeout"), 0);
}

// A flood of failures costs ten lines per 10 s and a line saying how many
// were left out; the metric counts them all.
TEST_F(ConsumerHandlersTest, ItemFailureLinesAreRateLimited) {
  CreateQueue(1);
  // A long error, of 2-byte characters, cut at 300 bytes where it would
  // split one: the line keeps 146 of them whole.
  std::string e_acute;
  for (int i = 0; i < 400; ++i) e_acute += "\xc3\xa9";
  auto failing = MakeHandler(
      [&](HandlerCall&) { return absl::InternalError(absl::StrCat("always:", e_acute)); });
  std::vector<std::string> payloads(30, "x");
  Enqueue(payloads);
  const Run run =
      Consume(*failing, absl::Minutes(1), [](const ConsumerStats& s) { return s.dead == 30; });
  ASSERT_TRUE(run.done) << Tail(run.log);
  size_t lines = 0;
  for (size_t at = run.log.find(" failed at attempt 1 of 1 "); at != std::string::npos;
       at = run.log.find(" failed at attempt 1 of 1 ", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 10u) << Tail(run.log);
  EXPECT_TRUE(absl::StrContains(run.log, "item failures: 20 lines not logged"))
      << "said at the stop: " << Tail(run.log);
  EXPECT_TRUE(
      absl::StrContains(run.log, absl::StrCat("): always:", e_acute.substr(0, 292), "...; ")))
      << Tail(run.log);
  EXPECT_FALSE(absl::StrContains(run.log, "\\x")) << "a character cut in two: " << Tail(run.log);
  EXPECT_EQ(ItemFailures("handler_error"), 30);
}

// An ok item whose effects cannot all be applied (its second enqueue goes
// to a queue that does not exist) fails alone: its first enqueue is undone,
// the other items' effects stay, and nothing is sent again but its retry.
TEST_F(ConsumerHandlersTest, AnItemWhoseEffectsFailLeavesNothingAndTheOthersKeepTheirs) {
  CreateQueue(2);
  QueueConfig next;
  next.name = "next";
  next.parts = 1;
  ASSERT_TRUE(admin_->CreateQueue(next).ok());
  ExecHandler handler(Exec("TEST_CHILD_TRACE=1 " + ServeCommand()));
  const std::vector<int64_t> ids =
      Enqueue({"effects:next", "effects:nosuchqueue", "effects:next", "effects:nosuchqueue", "b"});
  const Run run = Consume(handler, absl::Minutes(1),
                          [](const ConsumerStats& s) { return s.acked + s.dead == 5; });
  ASSERT_TRUE(run.done) << Tail(run.log);
  EXPECT_EQ(run.stats.acked, 3);
  EXPECT_EQ(run.stats.dead, 2);
  const std::vector<std::string> requests = TracedRequests(run.log);
  ASSERT_FALSE(requests.empty());
  EXPECT_EQ(requests[0], "effects:next,effects:nosuchqueue,effects:next,effects:nosuchqueue,b");
  for (size_t r = 1; r < requests.size(); ++r) {
    for (absl::string_view p : absl::StrSplit(requests[r], ',')) {
      EXPECT_EQ(p, "effects:nosuchqueue") << "only the failed items come back";
    }
  }
  const ItemState failed = State(ids[1]);
  EXPECT_EQ(failed.kind, ItemState::Kind::kDead);
  EXPECT_TRUE(absl::StrContains(failed.error, "effect enqueue[1] into \"nosuchqueue\""))
      << failed.error;
  // Two items with two follow-ups each into next; none of the failed one's.
  auto next_status = admin_->Status("next");
  ASSERT_TRUE(next_status.ok());
  EXPECT_EQ(next_status->parts[0].ready, 4);
  EXPECT_EQ(State(ids[0]).result, "done");
  EXPECT_EQ(State(ids[2]).result, "done");
}

// --- http ------------------------------------------------------------------------

// http_test_server.py, and a handler posting to one of its paths.
class HttpConsumerTest : public ConsumerHandlersTest {
 protected:
  void SetUp() override {
    server_ = std::make_unique<testing::PortFileServer>(
        std::vector<std::string>{PYTHON3, HTTP_TEST_SERVER}, ::testing::TempDir());
    ASSERT_GT(server_->port(), 0) << "http_test_server.py did not start; see " << server_->log();
  }

  std::unique_ptr<Handler> Http(const std::string& path) {
    return HttpTo(absl::StrCat("http://127.0.0.1:", server_->port(), path));
  }

  // The batches the server received, oldest first.
  nlohmann::json Received() {
    std::string body;
    if (testing::HttpGet(server_->port(), "/log", &body) != 200) return nlohmann::json::array();
    return nlohmann::json::parse(body);
  }

  std::unique_ptr<testing::PortFileServer> server_;
};

struct HttpCase {
  std::string name;
  std::string path;    // the server's misbehaviour (http_test_server.py)
  std::string reason;  // partq_handler_request_failures_total{reason}
  std::string kind;    // partq_item_failures_total{reason}
  std::string error;   // in the log and the item's last error
};

void PrintTo(const HttpCase& c, std::ostream* os) { *os << c.name; }

class HttpPoisonTest : public HttpConsumerTest, public ::testing::WithParamInterface<HttpCase> {};

TEST_P(HttpPoisonTest, ItemIsDeadLetteredByThePolicyAndTheOthersAreAcked) {
  const HttpCase& c = GetParam();
  CreateQueue(2);
  std::unique_ptr<Handler> handler = Http(c.path);
  ASSERT_NE(handler, nullptr);
  ExpectPoisonDeadLettered(*handler, "poison", c.reason, c.kind, c.error, absl::Minutes(1));
}

INSTANTIATE_TEST_SUITE_P(
    Servers, HttpPoisonTest,
    ::testing::Values(
        HttpCase{"HtmlErrorPage", "/html", "not_json", "protocol",
                 "HTTP 200 OK with content type \"text/html; charset=utf-8\", not JSON; body "
                 "\"<!DOCTYPE html>"},
        HttpCase{"InternalServerError", "/500", "server_error", "crash",
                 "HTTP 500 Internal Server Error, body \"Internal Server Error: KeyError"},
        HttpCase{"RedirectLoop", "/redirect", "redirect", "protocol",
                 "/redirect\"; redirects are not followed"},
        HttpCase{"TricklingBody", "/trickle", "too_slow", "timeout", "came too slowly"}),
    [](const auto& test) { return test.param.name; });

// 429 with Retry-After for the first batch, then served. The batch is not the
// items' fault: nothing is counted as a request failure, every item is acked.
// With the hints acted on, the batch comes back whole after Retry-After, its
// attempts given back.
TEST_F(HttpConsumerTest, ThrottledBatchComesBackWholeAfterRetryAfterWithItsAttemptsGivenBack) {
  CreateQueue(5);
  std::unique_ptr<Handler> handler = Http("/throttle?first=1&retry_after=1");
  ASSERT_NE(handler, nullptr);
  const std::vector<int64_t> ids = Enqueue({"a", "b", "c"});
  // Being told to wait is not a fault: logged at level info, but the first
  // time (then once a minute) as a warning, so that at the default level a
  // worker that waits says why (docs/guide/handlers.md).
  const LogLevel level = GetLogLevel();
  SetLogLevel(LogLevel::kWarning);
  const Run run = Consume(*handler, absl::Minutes(1),
                          [](const ConsumerStats& s) { return s.acked + s.dead == 3; });
  SetLogLevel(level);
  ASSERT_TRUE(run.done) << Tail(run.log);
  EXPECT_EQ(run.stats.acked, 3);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(State(ids[i]).result, std::vector<std::string>({"a", "b", "c"})[i]);
  }
  EXPECT_EQ(Metric("partq_handler_throttled_total"), 1);
  EXPECT_EQ(Metric("partq_handler_request_failures_total"), 0);
  EXPECT_TRUE(absl::StrContains(run.log, "HTTP 429 Too Many Requests, retry after 1s; retry in 1s"))
      << Tail(run.log);
  size_t warned = 0;
  for (size_t at = run.log.find("(throttled)"); at != std::string::npos;
       at = run.log.find("(throttled)", at + 1)) {
    ++warned;
  }
  EXPECT_EQ(warned, 1u) << "one of the batch's three, at warning: " << Tail(run.log);
  EXPECT_TRUE(absl::StrContains(run.log, " failed without using an attempt (throttled): "))
      << "no attempt number beside an attempt given back: " << Tail(run.log);
  EXPECT_FALSE(absl::StrContains(run.log, "retrying in 1s; retry in"))
      << "the wait said once in an item's line: " << Tail(run.log);

  const nlohmann::json received = Received();
  ASSERT_GE(received.size(), 2u) << received.dump();
  EXPECT_EQ(received[0]["status"], 429);
  EXPECT_EQ(received[0]["items"].size(), 3u);
  // One more request, for the whole batch, no sooner than Retry-After, each
  // item at attempt 1 again.
  ASSERT_EQ(received.size(), 2u) << received.dump();
  EXPECT_EQ(received[1]["status"], 200);
  EXPECT_GE(received[1]["at"].get<double>() - received[0]["at"].get<double>(), 1.0);
  ASSERT_EQ(received[1]["items"].size(), 3u) << "not split into one request per item";
  for (const auto& item : received[1]["items"]) EXPECT_EQ(item["attempt"], 1) << received.dump();
}

// The same through HTTP: `a effects fail c retry:1` get one POST; its reply
// is applied as it is, and only the retry is sent again.
TEST_F(HttpConsumerTest, RepliesFailuresAreRecordedWithoutSendingTheBatchAgain) {
  CreateQueue(3);
  QueueConfig next;
  next.name = "next";
  next.parts = 1;
  ASSERT_TRUE(admin_->CreateQueue(next).ok());
  std::unique_ptr<Handler> handler = Http("/ok");
  ASSERT_NE(handler, nullptr);
  const std::vector<int64_t> ids = Enqueue({"a", "effects", "fail", "c", "retry:1"});
  const Run run = Consume(*handler, absl::Minutes(1),
                          [](const ConsumerStats& s) { return s.acked + s.dead == 5; });
  ASSERT_TRUE(run.done) << Tail(run.log);
  const nlohmann::json received = Received();
  ASSERT_EQ(received.size(), 2u) << received.dump();
  std::vector<std::string> first;
  for (const auto& item : received[0]["items"]) first.push_back(item["payload"]);
  EXPECT_EQ(first, (std::vector<std::string>{"a", "effects", "fail", "c", "retry:1"}));
  ASSERT_EQ(received[1]["items"].size(), 1u);
  EXPECT_EQ(received[1]["items"][0]["payload"], "retry:1");
  EXPECT_EQ(received[1]["items"][0]["attempt"], 2);
  EXPECT_EQ(State(ids[0]).result, "a");
  EXPECT_EQ(State(ids[1]).result, "done");
  EXPECT_EQ(State(ids[3]).result, "c");
  EXPECT_EQ(State(ids[4]).result, "attempt 2");
  const ItemState dead = State(ids[2]);
  EXPECT_EQ(dead.kind, ItemState::Kind::kDead);
  EXPECT_EQ(dead.attempts, 1);
  EXPECT_EQ(dead.error, "failed as asked");
  auto next_status = admin_->Status("next");
  ASSERT_TRUE(next_status.ok());
  EXPECT_EQ(next_status->parts[0].ready + next_status->parts[0].delayed, 1);
  ASSERT_EQ(db_.Outbox().size(), 1u);
  EXPECT_EQ(db_.Outbox()[0].topic, "events");
}

// Every message names the URL the same way: without its query (nor user
// info), whichever way the batch failed.
TEST_F(HttpConsumerTest, ErrorsNameTheUrlWithoutItsQueryOrCredentials) {
  CreateQueue(1);
  for (const std::string path : {"/badreply", "/500"}) {
    std::unique_ptr<Handler> handler =
        HttpTo(absl::StrCat("http://svc:pa55@127.0.0.1:", server_->port(), path, "?token=s3cret"));
    ASSERT_NE(handler, nullptr);
    const int64_t id = Enqueue({"poison"})[0];
    const Run run =
        Consume(*handler, absl::Minutes(1), [](const ConsumerStats& s) { return s.dead == 1; });
    ASSERT_TRUE(run.done) << Tail(run.log);
    const std::string url = absl::StrCat("POST http://127.0.0.1:", server_->port(), path, ": ");
    const ItemState dead = State(id);
    EXPECT_TRUE(absl::StrContains(dead.error, url)) << dead.error;
    EXPECT_FALSE(absl::StrContains(dead.error, "s3cret")) << dead.error;
    EXPECT_FALSE(absl::StrContains(run.log, "s3cret")) << Tail(run.log);
    EXPECT_FALSE(absl::StrContains(dead.error, "pa55")) << dead.error;
    EXPECT_FALSE(absl::StrContains(run.log, "pa55")) << Tail(run.log);
  }
  // The credentials went to the server all the same, as basic auth.
  EXPECT_EQ(Received()[0]["authorization"], "Basic c3ZjOnBhNTU=");  // svc:pa55
}

// Credentials kept out of the URL: the Authorization value goes with every
// request.
TEST_F(HttpConsumerTest, TheAuthorizationValueGoesWithEveryRequest) {
  CreateQueue(1);
  HttpHandlerOptions o;
  o.url = absl::StrCat("http://127.0.0.1:", server_->port(), "/ok");
  o.queue = kQueue;
  o.authorization = "Bearer t0ken";
  auto handler = HttpHandler::Create(std::move(o));
  ASSERT_TRUE(handler.ok()) << handler.status();
  Enqueue({"a"});
  const Run run =
      Consume(**handler, absl::Minutes(1), [](const ConsumerStats& s) { return s.acked == 1; });
  ASSERT_TRUE(run.done) << Tail(run.log);
  EXPECT_EQ(Received()[0]["authorization"], "Bearer t0ken");
}

// --- the examples ---------------------------------------------------------------

// examples/python/handler.py (exec) and examples/node/server.mjs (http)
// through a real Consumer, their effects applied in the ack transactions
// (MemStore's Tx): a result and one follow-up per item, {"n": n*n} keyed as
// its item, and the bad payload dead-lettered. Both write the same bytes.
class ExampleTest : public ConsumerHandlersTest, public ::testing::WithParamInterface<std::string> {
 protected:
  std::unique_ptr<Handler> Example() {
    if (GetParam() == "PythonExec") {
      return std::make_unique<ExecHandler>(Exec(absl::StrCat(
          "FOLLOWUP_QUEUE=squares exec ", Quoted(PYTHON3), " ", Quoted(EXAMPLE_HANDLER))));
    }
    const int port = testing::FreePort();
    node_log_ = absl::StrCat(::testing::TempDir(), "/node_example_", port, ".log");
    node_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{NODE, NODE_EXAMPLE},
        std::map<std::string, std::string>{{"PORT", absl::StrCat(port)},
                                           {"FOLLOWUP_QUEUE", "squares"}},
        node_log_);
    std::string body;
    testing::WaitUntil(
        [&] { return testing::HttpGet(port, "/healthz", &body) == 200 || !node_->Running(); });
    EXPECT_TRUE(node_->Running()) << "see " << node_log_;
    return HttpTo(absl::StrCat("http://127.0.0.1:", port, "/"));
  }

  void TearDown() override {
    node_.reset();
    if (!node_log_.empty() && !HasFailure()) std::remove(node_log_.c_str());
  }

  std::string node_log_;
  std::unique_ptr<testing::ChildProcess> node_;
};

TEST_P(ExampleTest, ResultsAndFollowUpsCommitWithTheAcks) {
  CreateQueue(5);
  QueueConfig squares;
  squares.name = "squares";
  squares.parts = 4;
  ASSERT_TRUE(admin_->CreateQueue(squares).ok());
  std::vector<int64_t> ids;
  for (int i = 0; i < 20; ++i) {
    NewItem item;
    item.payload = i == 7 ? "not json" : absl::StrCat(R"({"n": )", i, "}");
    item.key = absl::StrCat("k", i);
    auto r = admin_->Enqueue(kQueue, item);
    ASSERT_TRUE(r.ok()) << r.status();
    ids.push_back(r->id);
  }
  std::unique_ptr<Handler> handler = Example();
  ASSERT_NE(handler, nullptr);
  const Run run = Consume(*handler, absl::Minutes(1),
                          [](const ConsumerStats& s) { return s.acked + s.dead == 20; });
  ASSERT_TRUE(run.done) << Tail(run.log);
  EXPECT_EQ(run.stats.acked, 19);
  EXPECT_EQ(run.stats.dead, 1);
  for (int i = 0; i < 20; ++i) {
    if (i == 7) continue;
    const ItemState s = State(ids[i]);
    EXPECT_EQ(s.kind, ItemState::Kind::kDone);
    EXPECT_EQ(s.result, absl::StrCat(i * i));
  }

  // The follow-ups, read back by a consumer of squares: one per item.
  absl::Mutex mu;
  std::map<std::string, std::string> follow_ups;  // payload by key
  int64_t seen = 0;
  auto record = MakeHandler([&](HandlerCall& call) {
    absl::MutexLock lock(&mu);
    ++seen;
    follow_ups[call.item->key.value_or("")] = call.item->payload;
    return absl::OkStatus();
  });
  ConsumerOptions o;
  o.queue = "squares";
  o.poll_only = true;
  o.poll_interval = absl::Milliseconds(20);
  {
    Consumer c(db_.Factory(), o, record.get());
    ASSERT_TRUE(c.Start().ok());
    EXPECT_TRUE(testing::WaitUntil([&] { return c.stats().acked == 19; }));
    c.Stop();
  }
  EXPECT_EQ(seen, 19);
  std::map<std::string, std::string> expected;
  for (int i = 0; i < 20; ++i) {
    if (i != 7) expected[absl::StrCat("k", i)] = absl::StrCat(R"({"n": )", i * i, "}");
  }
  EXPECT_EQ(follow_ups, expected);

  const ItemState dead = State(ids[7]);
  EXPECT_EQ(dead.kind, ItemState::Kind::kDead);
  EXPECT_TRUE(absl::StartsWith(dead.error, "bad payload: ")) << dead.error;
  EXPECT_EQ(dead.attempts, 1) << "dead: true gives up at once";
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleTest, ::testing::Values("PythonExec", "NodeHttp"),
                         [](const auto& test) { return test.param; });

}  // namespace
}  // namespace partq
