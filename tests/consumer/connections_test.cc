// How many server connections a worker holds (docs/guide/operations-and-roles.md, "Connections"),
// counted in pg_stat_activity by the application_name its stores connect
// with: 2 when idle (the session's, which also LISTENs, and the claimer's),
// one more on the owner of part 0 (its depth collector and schedule firer
// share it); once its handler threads have worked, one per thread, which the
// claimer shares (Consumer::HandOffLocked). And what the
// sharing must not cost: heartbeats go on while every handler is stuck, and
// an enqueue still wakes the worker (nothing else would: it polls every ten
// minutes).
#include <memory>
#include <pqxx/pqxx>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "consumer/consumer.h"
#include "consumer/handler.h"
#include "consumer/metrics.h"
#include "consumer/worker.h"
#include "gtest/gtest.h"
#include "pg/pg_store.h"
#include "prometheus/registry.h"
#include "tests/store/store_test_util.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using testing::TestSchema;
using testing::WaitUntil;

// A Consumer as `partq worker` runs it (with metrics, so with a queue
// collector), connecting as `app`.
struct Process {
  std::string app;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<ConsumerMetrics> metrics;
  std::unique_ptr<Consumer> consumer;

  // The sum of the family's counters, gauges and histogram counts.
  double Metric(const std::string& family) const {
    double sum = 0;
    for (const prometheus::MetricFamily& f : registry->Collect()) {
      if (f.name != family) continue;
      for (const prometheus::ClientMetric& m : f.metric) {
        sum += m.counter.value + m.gauge.value + static_cast<double>(m.histogram.sample_count);
      }
    }
    return sum;
  }
  bool OwnsPartZero() const { return consumer->session().EpochOf(0).has_value(); }
};

class ConnectionsTest : public ::testing::Test {
 protected:
  void CreateQueue(int parts) {
    store_testing::MakeQueue(*schema_.NewStore(), "q", parts, QueueConfig{}.session_ttl);
  }

  std::unique_ptr<Process> Start(const std::string& name, Handler* handler, int concurrency,
                                 absl::Duration poll = absl::Minutes(10)) {
    auto w = std::make_unique<Process>();
    w->app = absl::StrCat("partq worker ", schema_.name(), " ", name);
    PgOptions pg = schema_.options();
    pg.application_name = w->app;
    ConsumerOptions o;
    o.queue = "q";
    o.concurrency = concurrency;
    o.batch = 1;
    // Only a notice wakes the claimer in time (unless the test says).
    o.poll_interval = poll;
    o.rescan_interval = poll;
    o.heartbeat_interval = absl::Milliseconds(100);
    o.status_interval = absl::Milliseconds(100);
    o.schedule_poll_interval = absl::Milliseconds(200);
    o.quiet_poll_interval = absl::ZeroDuration();  // ExpectStays counts collections
    // Through a transaction pooler it must poll (LISTEN cannot work there).
    o.poll_only = pg.transaction_pooler;
    if (o.poll_only) o.poll_interval = absl::Milliseconds(100);
    w->metrics = std::make_unique<ConsumerMetrics>(*w->registry, "q");
    w->consumer = std::make_unique<Consumer>(PgStoreFactory(pg), o, handler, w->metrics.get());
    absl::Status st = w->consumer->Start();
    EXPECT_TRUE(st.ok()) << st;
    return w;
  }

  // The worker's connections now (its LISTEN included, on whichever one).
  int64_t Connections(const Process& w) {
    pqxx::connection c(schema_.dsn());
    pqxx::nontransaction tx(c);
    return tx
        .exec_params1(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 "
            "OR starts_with(application_name, $1 || '/')",
            w.app)[0]
        .as<int64_t>();
  }

  // Its claimer has claimed (so connected), and, on the owner of part 0, the
  // collector has collected (the firer connects when part 0 comes, and
  // shares the collector's connection).
  void AwaitAllConnected(const Process& w) {
    ASSERT_TRUE(w.consumer->session().WaitStable(absl::Seconds(60)));
    ASSERT_TRUE(WaitUntil([&] { return w.Metric("partq_claim_duration_seconds") >= 1; }));
    if (!w.OwnsPartZero()) return;
    ASSERT_TRUE(WaitUntil([&] { return w.Metric("partq_queue_collect_duration_seconds") > 0; }));
  }

  // `n` holds as its collector collects three more times (a firer round,
  // every 200 ms, runs meanwhile too).
  void ExpectStays(const Process& w, int64_t n) {
    for (int i = 0; i < 3; ++i) {
      const double took = w.Metric("partq_queue_collect_duration_seconds");
      ASSERT_TRUE(WaitUntil([&] {
        return !w.OwnsPartZero() || w.Metric("partq_queue_collect_duration_seconds") != took;
      }));
      EXPECT_EQ(Connections(w), n);
    }
  }

  TestSchema schema_;
};

// A worker of several queues (issue 52) shares what it can: one connection
// for every session's heartbeats (one transaction), one for their LISTEN,
// one for the part-0 jobs of all queues, and claim connections borrowed per
// claim (the pool keeps one once the others idled 10 s). So 4 however many
// queues, while idle; an enqueue still wakes its queue at once.
TEST_F(ConnectionsTest, AnIdleWorkerOfFiveQueuesHoldsFour) {
  std::vector<WorkerQueue> queues;
  auto noop = MakeHandler([](HandlerCall&) { return absl::OkStatus(); });
  auto registry = std::make_shared<prometheus::Registry>();
  std::vector<std::unique_ptr<ConsumerMetrics>> metrics;
  for (int i = 0; i < 5; ++i) {
    const std::string name = absl::StrCat("q", i);
    store_testing::MakeQueue(*schema_.NewStore(), name, 4, QueueConfig{}.session_ttl);
    ConsumerOptions o;
    o.queue = name;
    o.concurrency = 2;
    o.poll_interval = absl::Minutes(10);  // only a notice wakes a claimer in time
    o.rescan_interval = absl::Minutes(10);
    o.heartbeat_interval = absl::Milliseconds(200);  // the hub connects with the first
    metrics.push_back(std::make_unique<ConsumerMetrics>(*registry, name));
    queues.push_back({o, noop.get(), metrics.back().get()});
  }
  Process w;
  w.app = absl::StrCat("partq worker ", schema_.name(), " five");
  PgOptions pg = schema_.options();
  pg.application_name = w.app;
  partq::Worker worker(PgStoreFactory(pg), queues);
  ASSERT_TRUE(worker.Start().ok());
  std::string why;
  ASSERT_TRUE(WaitUntil([&] { return worker.Ready(&why); })) << why;
  // Sessions connect while they join and rebalance, and claimers while they
  // claim at the start: settled, 4 stay.
  ASSERT_TRUE(WaitUntil([&] {
    for (int i = 0; i < 4; ++i) {
      if (Connections(w) != 4) return false;
      absl::SleepFor(absl::Milliseconds(500));
    }
    return true;
  })) << Connections(w);
  NewItem item;
  item.payload = "wake";
  const absl::Time enqueued = absl::Now();
  ASSERT_TRUE(schema_.NewStore()->Enqueue("q3", item).ok());
  ASSERT_TRUE(WaitUntil([&] { return worker.consumers()[3]->stats().acked == 1; }));
  EXPECT_LT(absl::Now() - enqueued, absl::Seconds(5)) << "woken by its notice, not a poll";
  worker.Stop();
}

TEST_F(ConnectionsTest, IdleWorkersHoldTwoAndTheOwnerOfPartZeroThree) {
  CreateQueue(4);
  auto noop = MakeHandler([](HandlerCall&) { return absl::OkStatus(); });
  auto a = Start("a", noop.get(), 4);
  ASSERT_NO_FATAL_FAILURE(AwaitAllConnected(*a));
  ASSERT_TRUE(a->OwnsPartZero());  // alone: every part
  ASSERT_TRUE(WaitUntil([&] { return Connections(*a) == 3; })) << Connections(*a);
  ExpectStays(*a, 3);

  auto b = Start("b", noop.get(), 4);
  ASSERT_TRUE(WaitUntil([&] {
    return a->consumer->session().owned().size() == 2 &&
           b->consumer->session().owned().size() == 2 &&
           a->consumer->session().WaitStable(absl::ZeroDuration());
  }));
  Process& owner = a->OwnsPartZero() ? *a : *b;
  Process& other = a->OwnsPartZero() ? *b : *a;
  ASSERT_NO_FATAL_FAILURE(AwaitAllConnected(owner));
  ASSERT_NO_FATAL_FAILURE(AwaitAllConnected(other));
  // One that owned part 0 before closes the collector's and firer's
  // connection at their next round.
  ASSERT_TRUE(WaitUntil([&] { return Connections(other) == 2; })) << Connections(other);
  ASSERT_TRUE(WaitUntil([&] { return Connections(owner) == 3; })) << Connections(owner);
  ExpectStays(owner, 3);
  EXPECT_EQ(Connections(other), 2);
  b->consumer->Stop();
  a->consumer->Stop();
}

TEST_F(ConnectionsTest, ABusyWorkerHoldsOneMorePerHandlerThreadAndHeartbeatsMeanwhile) {
  constexpr int kConcurrency = 3;
  CreateQueue(4);
  absl::Mutex mu;
  int running = 0;
  bool release = false;
  auto stuck = MakeHandler([&](HandlerCall&) {
    absl::MutexLock lock(&mu);
    ++running;
    mu.Await(absl::Condition(&release));
    return absl::OkStatus();
  });
  auto w = Start("busy", stuck.get(), kConcurrency);
  // Before `w` goes, even when an assertion ends the test early.
  absl::Cleanup unstick = [&] {
    absl::MutexLock lock(&mu);
    release = true;
  };
  ASSERT_NO_FATAL_FAILURE(AwaitAllConnected(*w));
  constexpr int64_t idle = 3;  // it owns part 0
  ASSERT_TRUE(WaitUntil([&] { return Connections(*w) == idle; })) << Connections(*w);

  // Nothing polls for 10 minutes: a notice (LISTEN on the session's
  // connection) is what wakes it.
  std::vector<NewItem> items(2 * kConcurrency);
  for (size_t i = 0; i < items.size(); ++i) items[i].payload = absl::StrCat("p", i);
  ASSERT_TRUE(schema_.NewStore()->EnqueueBatch("q", items).ok());
  {
    absl::MutexLock lock(&mu);
    auto all_stuck = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return running == kConcurrency; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&all_stuck), absl::Seconds(60)));
  }
  // The claimer's connection went with the first batch's begun transaction
  // to the thread that ran it; it takes an idle thread's for its next claim.
  EXPECT_EQ(Connections(*w), idle - 1 + kConcurrency);

  // Every handler thread is stuck in a transaction: the session's own
  // connection still heartbeats (three beats past the one read now).
  const std::string beat =
      "SELECT (extract(epoch FROM heartbeat_at) * 1000000)::bigint FROM {schema}.sessions "
      "WHERE queue = 'q'";
  const int64_t before = schema_.QInt(beat);
  ASSERT_TRUE(WaitUntil([&] { return schema_.QInt(beat) > before; }));
  const int64_t second = schema_.QInt(beat);
  ASSERT_TRUE(WaitUntil([&] { return schema_.QInt(beat) > second; }));
  {
    absl::MutexLock lock(&mu);
    release = true;
  }
  ASSERT_TRUE(WaitUntil(
      [&] { return schema_.QInt("SELECT count(*) FROM {schema}.items WHERE queue = 'q'") == 0; }));
  EXPECT_EQ(Connections(*w), idle - 1 + kConcurrency);  // kept for the next batch
  w->consumer->Stop();
  EXPECT_EQ(w->consumer->stats().acked, static_cast<int64_t>(items.size()));
}

}  // namespace
}  // namespace partq
