// The metric probes on fresh registries (architecture.md, Conventions): sessions, the queue
// collector, the consumer and the producer, on MemStore.
#include "consumer/metrics.h"

#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "bridge/bridge_metrics.h"
#include "coordinator/queue_collector.h"
#include "coordinator/session.h"
#include "coordinator/session_metrics.h"
#include "gtest/gtest.h"
#include "producer/metrics.h"
#include "producer/producer.h"
#include "store/fault_store.h"
#include "store/mem_store.h"
#include "tests/observability/scrape.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using testing::MetricValue;

double V(const prometheus::Registry& r, const std::string& name) {
  auto v = MetricValue(r, name);
  EXPECT_TRUE(v.has_value()) << name << " is not registered";
  return v.value_or(-1);
}

using testing::WaitUntil;

class NullListener : public PartListener {
 public:
  void OnRevoke(const std::vector<OwnedPart>&) override {}
  void OnAssign(const std::vector<OwnedPart>&) override {}
  void OnLost(const std::vector<OwnedPart>&) override {}
};

class MetricsTest : public ::testing::Test {
 protected:
  void CreateQueue(int parts) {
    QueueConfig q;
    q.name = "q";
    q.parts = parts;
    q.session_ttl = absl::Seconds(10);  // database time: moved by clock_ only
    ASSERT_TRUE(db_.Connect()->CreateQueue(q).ok());
  }
  std::unique_ptr<Session> NewSession(SessionMetrics* metrics,
                                      absl::Duration heartbeat = absl::Milliseconds(5)) {
    SessionOptions o;
    o.queue = "q";
    o.heartbeat_interval = heartbeat;
    o.poll_only = true;  // MemStore has no LISTEN: re-read the group often
    o.group_poll = absl::Milliseconds(5);
    o.handoff_poll = absl::Milliseconds(2);
    o.retry_backoff = absl::Milliseconds(2);
    o.metrics = metrics;
    return std::make_unique<Session>(faults_.Wrap(db_.Factory()), o, &listener_);
  }

  ManualClock clock_;
  MemDatabase db_{&clock_};
  FaultInjector faults_{&clock_};
  NullListener listener_;
};

TEST_F(MetricsTest, SessionReportsPartsRebalancesAndHandOffs) {
  CreateQueue(4);
  prometheus::Registry ra, rb;
  SessionMetrics ma(ra, "q"), mb(rb, "q");
  auto a = NewSession(&ma);
  ASSERT_TRUE(a->Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return V(ra, "partq_parts_owned") == 4; }));
  EXPECT_EQ(V(ra, "partq_rebalances_total"), 1);
  EXPECT_EQ(V(ra, "partq_handoff_duration_seconds_count"), 4);  // four free parts

  auto b = NewSession(&mb);
  ASSERT_TRUE(b->Start().ok());
  ASSERT_TRUE(WaitUntil([&] {
    return V(ra, "partq_parts_owned") == 2 && V(rb, "partq_parts_owned") == 2 &&
           b->WaitStable(absl::ZeroDuration());
  }));
  EXPECT_EQ(V(ra, "partq_rebalances_total"), 2);  // acquired 4, released 2
  EXPECT_EQ(V(ra, "partq_revoke_duration_seconds_count"), 1);
  EXPECT_EQ(V(rb, "partq_handoff_duration_seconds_count"), 2);  // waited for a's release
  EXPECT_EQ(V(rb, "partq_revoke_duration_seconds_count"), 0);
  EXPECT_EQ(V(ra, "partq_heartbeat_failures_total"), 0);

  // b dies; once the TTL passed on the database clock, a's heartbeat expires it.
  b->Abandon();
  EXPECT_EQ(V(rb, "partq_parts_owned"), 0);
  clock_.Advance(absl::Seconds(11));
  ASSERT_TRUE(WaitUntil([&] {
    return V(ra, "partq_session_expirations_total") == 1 && V(ra, "partq_parts_owned") == 4;
  }));
  EXPECT_EQ(V(ra, "partq_sessions_lost_total"), 0);
  a->Stop();
  EXPECT_EQ(V(ra, "partq_parts_owned"), 0);
}

TEST_F(MetricsTest, SessionCountsHeartbeatFailuresAndLoss) {
  CreateQueue(2);
  prometheus::Registry r;
  SessionMetrics m(r, "q");
  // Heartbeats only after a failed group read (a failure brings the next one
  // forward).
  auto s = NewSession(&m, absl::Hours(1));
  ASSERT_TRUE(s->Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return V(r, "partq_parts_owned") == 2; }));
  faults_.FailNext(3);
  ASSERT_TRUE(WaitUntil([&] {
    return V(r, "partq_heartbeat_failures_total") >= 1 && s->WaitStable(absl::ZeroDuration());
  }));
  EXPECT_EQ(V(r, "partq_sessions_lost_total"), 0);
  // Another member expires our row; after the next failure our heartbeat
  // finds it gone, and the session re-joins.
  clock_.Advance(absl::Seconds(11));
  ASSERT_TRUE(db_.Connect()->Heartbeat("q", SessionId{"nobody"}, 1).ok());
  faults_.FailNext(1);
  ASSERT_TRUE(WaitUntil(
      [&] { return V(r, "partq_sessions_lost_total") == 1 && V(r, "partq_parts_owned") == 2; }));
  s->Stop();
}

TEST_F(MetricsTest, SessionWithoutMetricsRuns) {
  CreateQueue(2);
  auto s = NewSession(nullptr);
  ASSERT_TRUE(s->Start().ok());
  ASSERT_TRUE(s->WaitStable(absl::Seconds(10)));
  s->Stop();
}

// A part whose owner's session has expired counts as unowned (its items
// wait: only a live member's heartbeat deletes that session and frees it),
// and the expired session is not a live one. `partq status` read a crashed
// worker's session as a live owner for as long as no other worker ran.
TEST(QueueTotals, APartOfAnExpiredSessionHasNoLiveOwner) {
  QueueStatus st;
  SessionInfo live, dead;
  live.id = SessionId{"live"};
  live.expires_in = absl::Seconds(3);
  dead.id = SessionId{"dead"};
  dead.expires_in = absl::Seconds(-1);
  st.sessions = {live, dead};
  st.parts.resize(4);
  st.parts[0].owner = live.id;
  st.parts[1].owner = dead.id;
  st.parts[1].ready = 5;
  st.parts[1].oldest_ready_age = absl::Seconds(7);
  st.parts[2].owner = dead.id;
  st.parts[3].delayed = 2;  // no owner at all
  const QueueTotals t = SumUp(st);
  EXPECT_EQ(t.unowned_parts, 3);
  EXPECT_EQ(t.live_sessions, 1);
  EXPECT_EQ(t.expired_sessions, 1);
  EXPECT_EQ(t.ready, 5);
  EXPECT_EQ(t.delayed, 2);
  EXPECT_EQ(t.oldest_ready_age, absl::Seconds(7));
}

TEST_F(MetricsTest, CollectorPublishesOnlyWhileItIsTheCollector) {
  CreateQueue(4);
  auto store = db_.Connect();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store->Enqueue("q", NewItem{"x"}).ok());
  NewItem later{"later"};
  later.delay = absl::Hours(1);
  ASSERT_TRUE(store->Enqueue("q", later).ok());
  clock_.Advance(absl::Seconds(30));

  prometheus::Registry r;
  bool collector = true;
  QueueCollector c(
      faults_.Wrap(db_.Factory()), "q", [&] { return collector; }, r);
  ASSERT_TRUE(c.CollectOnce().ok());
  EXPECT_EQ(V(r, "partq_queue_ready_items"), 5);
  EXPECT_EQ(V(r, "partq_queue_delayed_items"), 1);
  EXPECT_EQ(V(r, "partq_queue_in_flight_items"), 0);
  EXPECT_EQ(V(r, "partq_queue_dead_items"), 0);
  EXPECT_EQ(V(r, "partq_queue_cancelled_items"), 0);
  EXPECT_EQ(V(r, "partq_queue_oldest_ready_age_seconds"), 30);
  EXPECT_EQ(V(r, "partq_queue_unowned_parts"), 4);
  EXPECT_EQ(V(r, "partq_sessions"), 0);
  EXPECT_EQ(V(r, "partq_queue_collector"), 1);

  // Part 0 moved elsewhere: this process exports zeros, not its last values.
  collector = false;
  ASSERT_TRUE(c.CollectOnce().ok());
  for (const char* name : {"partq_queue_ready_items", "partq_queue_delayed_items",
                           "partq_queue_oldest_ready_age_seconds", "partq_queue_unowned_parts",
                           "partq_queue_collector"}) {
    EXPECT_EQ(V(r, name), 0) << name;
  }

  // A failed query counts an error and keeps the last values.
  collector = true;
  ASSERT_TRUE(c.CollectOnce().ok());
  faults_.FailNext(1);
  EXPECT_FALSE(c.CollectOnce().ok());
  EXPECT_EQ(V(r, "partq_queue_collect_errors_total"), 1);
  EXPECT_EQ(V(r, "partq_queue_ready_items"), 5);

  // Stop zero-fills: a worker that leaves exports nothing stale.
  c.Start();
  c.Stop();
  EXPECT_EQ(V(r, "partq_queue_ready_items"), 0);
  c.Stop();  // twice is fine
}

// The database's vacuum horizon, as Status read it, is published with the
// queue's gauges, and zero-filled with them.
TEST_F(MetricsTest, CollectorPublishesTheVacuumHorizon) {
  prometheus::Registry r;
  QueueCollector c(
      db_.Factory(), "q", [] { return true; }, r);
  QueueStatus st;
  st.horizon =
      VacuumHorizon{"transaction", "pid 7 (psql, idle in transaction)", absl::Seconds(600), 123456};
  c.Publish(st);
  EXPECT_EQ(V(r, "partq_vacuum_horizon_age_seconds"), 600);
  EXPECT_EQ(V(r, "partq_vacuum_horizon_age_xids"), 123456);
  st.horizon.reset();  // none holds it (or MemStore)
  c.Publish(st);
  EXPECT_EQ(V(r, "partq_vacuum_horizon_age_seconds"), 0);
  EXPECT_EQ(V(r, "partq_vacuum_horizon_age_xids"), 0);
  st.horizon = VacuumHorizon{"replication slot", "slot standby1", absl::ZeroDuration(), 99};
  c.Publish(st);
  EXPECT_EQ(V(r, "partq_vacuum_horizon_age_xids"), 99);
  c.ZeroFill();
  EXPECT_EQ(V(r, "partq_vacuum_horizon_age_xids"), 0);
}

// A slow status query (a backlog of millions) spaces the next one out: at
// most 1/kCollectSpacing of the time goes to collecting, whatever `interval`.
// On the test's clock: the collector's thread is its only user, so after each
// step AwaitWaiters(1) says it has done what the step made due.
TEST_F(MetricsTest, CollectorSpacesOutSlowStatusQueries) {
  EXPECT_EQ(QueueCollector::WaitAfter(absl::Seconds(5), absl::Milliseconds(10)), absl::Seconds(5));
  EXPECT_EQ(QueueCollector::WaitAfter(absl::Seconds(5), absl::Seconds(1)),
            absl::Seconds(QueueCollector::kCollectSpacing));

  CreateQueue(4);
  faults_.SlowCallsOf("Status", absl::Milliseconds(100));
  auto run_for = [&](absl::Duration d) {
    for (absl::Duration done; done < d; done += absl::Milliseconds(10)) {
      ASSERT_TRUE(clock_.AwaitWaiters(1));
      clock_.Advance(absl::Milliseconds(10));
    }
    ASSERT_TRUE(clock_.AwaitWaiters(1));
  };
  prometheus::Registry r;
  QueueCollector c(
      faults_.Wrap(db_.Factory()), "q", [] { return true; }, r, absl::Milliseconds(10), &clock_);
  c.Start();
  // At a 10 ms interval about ten queries would run in this second; after
  // one of 100 ms the next waits 2 s.
  run_for(absl::Seconds(1));
  EXPECT_GE(V(r, "partq_queue_collect_duration_seconds"), 0.1);
  c.Stop();
  EXPECT_EQ(faults_.Calls("Status"), 1);
  EXPECT_EQ(V(r, "partq_queue_collect_duration_seconds"), 0);  // zero-filled

  // A query that fails (the database is away) does not: the collector
  // tries again after `interval`, so it reports soon after the database is back.
  faults_.FailCallsOf("Status");
  QueueCollector again(
      faults_.Wrap(db_.Factory()), "q", [] { return true; }, r, absl::Milliseconds(10), &clock_);
  again.Start();
  run_for(absl::Seconds(1));
  EXPECT_GE(faults_.Calls("Status"), 1 + 3);  // about 9 of 110 ms each
  // Stop ends the wait between rounds, not a query under way: let that end.
  faults_.SlowCallsOf("Status", absl::ZeroDuration());
  clock_.Advance(absl::Milliseconds(100));
  ASSERT_TRUE(clock_.AwaitWaiters(1));
  again.Stop();
}

// A poke ends a quiet wait, never the spacing: a Consumer pokes its
// collector on every notice of its queue, and a busy queue's enqueue notices
// (dozens a second) ran the status query back to back, the busiest backend
// beside a held snapshot (bench/held_snapshot_ordered.sh). Poked every 10 ms,
// the collector still waits 2 s after a query of 100 ms.
TEST_F(MetricsTest, PokesDoNotCutTheCollectorsSpacingShort) {
  CreateQueue(4);
  faults_.SlowCallsOf("Status", absl::Milliseconds(100));
  prometheus::Registry r;
  QueueCollector c(
      faults_.Wrap(db_.Factory()), "q", [] { return true; }, r, absl::Milliseconds(10), &clock_);
  c.Start();
  auto poke_for = [&](absl::Duration d) {
    for (absl::Duration done; done < d; done += absl::Milliseconds(10)) {
      ASSERT_TRUE(clock_.AwaitWaiters(1));
      c.Poke();
      clock_.Advance(absl::Milliseconds(10));
    }
    ASSERT_TRUE(clock_.AwaitWaiters(1));
  };
  poke_for(absl::Seconds(1));
  EXPECT_EQ(faults_.Calls("Status"), 1) << "a poke ran a round within the spacing";
  poke_for(absl::Milliseconds(1300));  // past 2.1 s: the second query and its 100 ms
  EXPECT_EQ(faults_.Calls("Status"), 2);
  c.Stop();
}

TEST_F(MetricsTest, ConsumerProbeCountsOutcomes) {
  prometheus::Registry r;
  ConsumerMetrics m(r, "q");
  m.SetConcurrency(3);
  std::vector<Item> items(3);
  for (int i = 0; i < 3; ++i) {
    items[i].id = i + 1;
    items[i].enqueued_at = absl::Now() - absl::Seconds(2);
    items[i].run_at = items[i].enqueued_at;
  }
  m.Claimed(items.size());
  m.ClaimQuery(absl::Milliseconds(3), items, absl::Now());
  m.HandlerCall(absl::Milliseconds(10));
  FinishResult fr;
  fr.acked = {1};
  fr.retried = {2};
  fr.dead = {3};
  m.Finished(fr, items, absl::Now(), absl::Now());
  m.FinishError();
  EXPECT_EQ(V(r, "partq_worker_concurrency"), 3);
  EXPECT_EQ(V(r, "partq_items_claimed_total"), 3);
  EXPECT_EQ(V(r, "partq_items_acked_total"), 1);
  EXPECT_EQ(V(r, "partq_items_nacked_total"), 1);
  EXPECT_EQ(V(r, "partq_items_dead_lettered_total"), 1);
  EXPECT_EQ(V(r, "partq_items_fenced_total"), 0);
  EXPECT_EQ(V(r, "partq_ack_errors_total"), 1);
  EXPECT_EQ(V(r, "partq_claim_duration_seconds_count"), 1);
  EXPECT_EQ(V(r, "partq_item_wait_seconds_count"), 3);
  EXPECT_GE(V(r, "partq_item_wait_seconds_sum"), 6);
  EXPECT_EQ(V(r, "partq_handler_duration_seconds_count"), 1);
  EXPECT_EQ(V(r, "partq_item_latency_seconds_count"), 1);  // acked items only
  EXPECT_EQ(V(r, "partq_ack_duration_seconds_count"), 1);
  // The session probe lives in the same registry.
  EXPECT_EQ(V(r, "partq_parts_owned"), 0);
}

TEST_F(MetricsTest, ProducerCountsEnqueuedItemsButNotDuplicates) {
  CreateQueue(2);
  prometheus::Registry r;
  ProducerMetrics m(r);
  Producer p(db_.Connect(), &m);
  NewItem a{"a"};
  a.dedup_key = "k";
  ASSERT_TRUE(p.Enqueue("q", a).ok());
  auto dup = p.Enqueue("q", a);
  ASSERT_TRUE(dup.ok());
  EXPECT_TRUE(dup->duplicate);
  ASSERT_TRUE(p.EnqueueBatch("q", std::vector<NewItem>(4, NewItem{"b"})).ok());
  EXPECT_EQ(V(r, "partq_items_enqueued_total"), 5);
  EXPECT_FALSE(p.Enqueue("nope", NewItem{"c"}).ok());
  EXPECT_EQ(V(r, "partq_items_enqueued_total"), 5);
}

// Cancels count where a process cancels through its Producer (only items
// removed), and the collector exports the queue's records of cancelled items.
TEST_F(MetricsTest, CancelsAreCountedByTheProducerAndRecordsByTheCollector) {
  CreateQueue(2);
  prometheus::Registry r;
  ProducerMetrics m(r);
  Producer p(db_.Connect(), &m);
  std::vector<int64_t> ids;
  for (const char* k : {"a", "b", "c"}) {
    NewItem item{"x"};
    item.dedup_key = k;
    auto e = p.Enqueue("q", item);
    ASSERT_TRUE(e.ok()) << e.status();
    ids.push_back(e->id);
  }
  ASSERT_TRUE(p.Cancel("q", {ids[0], ids[1], 999999}).ok());
  EXPECT_EQ(V(r, "partq_items_cancelled_total"), 2);
  ASSERT_TRUE(p.Cancel("q", {ids[0]}).ok());  // already cancelled: not again
  ASSERT_TRUE(p.CancelByDedupKey("q", "c").ok());
  ASSERT_TRUE(p.CancelByDedupKey("q", "c").ok());
  EXPECT_EQ(V(r, "partq_items_cancelled_total"), 3);

  QueueCollector c(
      db_.Factory(), "q", [] { return true; }, r);
  ASSERT_TRUE(c.CollectOnce().ok());
  EXPECT_EQ(V(r, "partq_queue_cancelled_items"), 3);
  EXPECT_EQ(V(r, "partq_queue_ready_items"), 0);
}

TEST_F(MetricsTest, BridgeProbeLabelsByTopicAndQueueOnly) {
  prometheus::Registry r;
  BridgeMetrics m(r);
  m.SetLag("events", "q", 42);
  m.SetLag("events", "q", 7);  // a gauge: the last value
  m.SetPaused("events", "q", 3);
  m.Ingested("events", "q", 100);
  m.Ingested("events", "q", 20);
  m.IngestBatch("q", 100);
  m.IngestBatch("q", 20);
  m.IngestConflict("q");
  m.IngestError("q");
  m.Delivered("results", 5);
  m.Delivered("events.dlq", 2);
  m.DeliveryFailed("results", 1);
  EXPECT_EQ(V(r, "partq_bridge_lag_messages"), 7);
  EXPECT_EQ(V(r, "partq_bridge_paused_partitions"), 3);
  EXPECT_EQ(V(r, "partq_bridge_messages_in_total"), 120);
  EXPECT_EQ(V(r, "partq_bridge_ingest_batch_messages_count"), 2);
  EXPECT_EQ(V(r, "partq_bridge_ingest_batch_messages_sum"), 120);
  EXPECT_EQ(V(r, "partq_bridge_ingest_conflicts_total"), 1);
  EXPECT_EQ(V(r, "partq_bridge_ingest_errors_total"), 1);
  EXPECT_EQ(V(r, "partq_bridge_messages_out_total"), 7);
  EXPECT_EQ(V(r, "partq_bridge_delivery_failures_total"), 1);
  for (const auto& family : r.Collect()) {
    for (const auto& metric : family.metric) {
      for (const auto& label : metric.label) {
        EXPECT_TRUE(label.name == "topic" || label.name == "queue")
            << family.name << " has label " << label.name;
      }
    }
  }
}

}  // namespace
}  // namespace partq
