// Fault injection against real `partq worker` processes and a real
// PostgreSQL (ctest label `fault`). Each scenario drains a queue while one
// kind of fault is injected again and again, then proves invariants I3 and
// I4 from the database (tests/fault/fault_harness.h) and prints one summary
// line; RELIABILITY.md records them.
//
// Sizing: the handlers sleep 8 ms per item, so even an idle machine needs
// 12 s or more to drain 12k items with 8 handler threads (~20-30 s on a loaded
// 2-core one): long enough for several faults each, and the minimum fault
// counts asserted below hold at that lower bound. No assertion
// is tighter than the protocol's own bounds (TTL plus rebalance ticks).
#include <signal.h>

#include <algorithm>
#include <pqxx/pqxx>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "pg/pg_store.h"
#include "tests/fault/fault_harness.h"
#include "tests/fault/tcp_proxy.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq::testing {
namespace {

constexpr char kHandler[] = "sleep:8,record:effects";

ScenarioOptions Options(const std::string& name, int items, int max_attempts = 25,
                        const std::string& poison = "") {
  ScenarioOptions o;
  o.name = name;
  o.items = items;
  o.max_attempts = max_attempts;
  o.poison_payload = poison;
  return o;
}

WorkerSpec Spec(const std::string& handler, const std::string& instance_id = "",
                std::vector<std::string> extra = {}, int dsn_port = 0) {
  WorkerSpec w;
  w.handler = handler;
  w.instance_id = instance_id;
  w.extra = std::move(extra);
  w.dsn_port = dsn_port;
  return w;
}

int RandomIndex(const std::vector<int>& v) {
  thread_local absl::BitGen gen;
  return v[absl::Uniform<size_t>(gen, 0, v.size())];
}

// Four workers drain the scenario's queue while one of them, at random, is
// SIGKILLed every 1.5 s mid-batch (the supervisor restarts it): two static
// members (a restart takes its parts back at once) and two dynamic ones
// (their parts wait for the TTL). Nothing lost, nothing twice, no item dead.
void DrainUnderSigkills(FaultScenario& s) {
  s.Add(Spec(kHandler, "w1"));
  s.Add(Spec(kHandler, "w2"));
  s.Add(Spec(kHandler));
  s.Add(Spec(kHandler));
  CheckResult r = s.Run(absl::Milliseconds(1500), [&](int) {
    return s.Signal(RandomIndex(s.Active()), SIGKILL) > 0 ? 1 : 0;
  });
  ExpectExactlyOnce(s, r, 0);
  EXPECT_GE(s.faults(), 5);
}

TEST(Fault, SigkillWorkersMidBatch) {
  FaultScenario s(Options("sigkill", 12000));
  ASSERT_TRUE(s.SetUp());
  DrainUnderSigkills(s);
}

// Queue groups (tests/pg/group_test.cc has the race of two acks): 600
// groups of 20 items spread over every part, all started, drained while
// workers are SIGKILLed every 1.5 s, so some die holding a group's last items
// or in the middle of the ack that would end it. Every group ends exactly
// once: one end item each, counting all 20 items, and none left pending.
TEST(Fault, SigkillWhileGroupsFinishEndsEachGroupOnce) {
  constexpr int kPerGroup = 20, kGroups = 600;
  ScenarioOptions o = Options("groups", kGroups * kPerGroup);
  o.more_queues = {"ends"};
  o.item = [](int i) {
    NewItem it;
    it.payload = absl::StrCat("p", i);
    it.group = absl::StrCat("g", i / kPerGroup);
    return it;
  };
  FaultScenario s(o);
  ASSERT_TRUE(s.SetUp());
  {
    PgOptions pg;
    pg.dsn = s.dsn();
    auto store = ConnectPg(pg);
    ASSERT_TRUE(store.ok()) << store.status();
    for (int g = 0; g < kGroups; ++g) {
      const std::string id = absl::StrCat("g", g);
      ASSERT_TRUE((*store)->CreateGroup("q", {id, "ends", std::to_string(g)}).ok());
      ASSERT_TRUE((*store)->StartGroup("q", id).ok());
    }
  }
  DrainUnderSigkills(s);
  pqxx::connection c(s.dsn());
  pqxx::nontransaction q(c);
  EXPECT_EQ(q.exec1("SELECT count(*) FROM partq.groups WHERE ended_at IS NOT NULL AND "
                    "pending = 0 AND done = 20 AND end_item IS NOT NULL")[0]
                .as<int64_t>(),
            kGroups);
  const pqxx::result ends = q.exec(
      "SELECT convert_from(payload, 'UTF8')::jsonb ->> 'group', count(*), "
      "min((convert_from(payload, 'UTF8')::jsonb ->> 'done')::int) "
      "FROM partq.items WHERE queue = 'ends' GROUP BY 1");
  EXPECT_EQ(ends.size(), static_cast<size_t>(kGroups));
  for (const pqxx::row& row : ends) {
    EXPECT_EQ(row[1].as<int64_t>(), 1) << row[0].c_str();
    EXPECT_EQ(row[2].as<int>(), kPerGroup) << row[0].c_str();
  }
}

// Workers of two queues (`partq worker q --queue side:handler=...`, issue 52): a scenario
// whose workers also serve `side`, kSide items recorded into side_effects by its own handler,
// so the shared heartbeats, LISTEN connection, claim pool and sweep of a worker of several
// queues go through the same faults. Start() sets a scenario up with its workers; Check()
// proves side drained exactly once (the scenario's own checks prove the first queue).
class SideQueue {
 public:
  static constexpr int kSide = 4000;
  explicit SideQueue(bool on) : on_(on) {}
  // Scenario `name` of 12,000 items (and side, when on).
  ScenarioOptions OptionsFor(const std::string& name) const {
    ScenarioOptions o = Options(name, 12000);
    if (on_) o.more_queues = {"side"};
    return o;
  }
  // Sets `s` up, side's items enqueued, and adds a worker (kHandler, and side's handler when
  // on) per instance id ("": a dynamic member).
  void Start(FaultScenario& s, const std::vector<std::string>& instance_ids) const {
    ASSERT_TRUE(s.SetUp());
    ASSERT_NO_FATAL_FAILURE(Enqueue(s));
    for (const std::string& id : instance_ids) s.Add(Spec(kHandler, id, WorkerArgs()));
  }
  void Enqueue(FaultScenario& s) const {
    if (!on_) return;
    PgOptions pg;
    pg.dsn = s.dsn();
    auto store = ConnectPg(pg);
    ASSERT_TRUE(store.ok()) << store.status();
    std::vector<NewItem> items(kSide);
    for (int i = 0; i < kSide; ++i) items[i].payload = absl::StrCat("s", i);
    ASSERT_TRUE((*store)->EnqueueBatch("side", items).ok());
  }
  std::vector<std::string> WorkerArgs() const {
    if (!on_) return {};
    return {"--queue", "side:handler=sleep:2,record:side_effects"};
  }
  void Check(FaultScenario& s) const {
    if (!on_) return;
    pqxx::connection c(s.dsn());
    pqxx::nontransaction q(c);
    const pqxx::row done =
        q.exec1("SELECT count(*), count(DISTINCT item_id) FROM partq.side_effects");
    EXPECT_EQ(done[0].as<int64_t>(), kSide) << "side: items recorded twice or lost";
    EXPECT_EQ(done[1].as<int64_t>(), kSide);
    EXPECT_EQ(q.exec1("SELECT count(*) FROM partq.items WHERE queue = 'side'")[0].as<int64_t>(), 0);
    EXPECT_EQ(q.exec1("SELECT count(*) FROM partq.dead_items")[0].as<int64_t>(), 0);
  }

 private:
  const bool on_;
};

TEST(Fault, SigkillWorkersOfTwoQueues) {
  const SideQueue side(true);
  FaultScenario s(side.OptionsFor("two_queues"));
  ASSERT_NO_FATAL_FAILURE(side.Start(s, {"w1", "w2", "", ""}));
  CheckResult r = s.Run(absl::Milliseconds(1500), [&](int) {
    return s.Signal(RandomIndex(s.Active()), SIGKILL) > 0 ? 1 : 0;
  });
  ExpectExactlyOnce(s, r, 0);
  EXPECT_GE(s.faults(), 5);
  side.Check(s);
}

void SigstopPastTheTtl(const std::string& name, const SideQueue& side) {
  FaultScenario s(side.OptionsFor(name));
  ASSERT_NO_FATAL_FAILURE(side.Start(s, {"", "", "", ""}));
  const absl::Duration pause = s.options().ttl + absl::Milliseconds(1500);
  CheckResult r = s.Run(absl::Milliseconds(500), [&](int) {
    const int victim = RandomIndex(s.Active());
    if (s.Signal(victim, SIGSTOP) < 0) return 0;
    absl::SleepFor(pause);  // its session expires; another member reaps it
    s.Signal(victim, SIGCONT);
    return 1;
  });
  ExpectExactlyOnce(s, r, 0);
  EXPECT_GE(s.faults(), 3);
  side.Check(s);
}

TEST(Fault, SigstopPastTheTtlThenSigcont) { SigstopPastTheTtl("sigstop", SideQueue(false)); }

TEST(Fault, SigstopPastTheTtlThenSigcontWorkersOfTwoQueues) {
  SigstopPastTheTtl("sigstop_two_queues", SideQueue(true));
}

void PostgresRestarted(const std::string& name, const SideQueue& side) {
  FaultScenario s(side.OptionsFor(name));
  ASSERT_NO_FATAL_FAILURE(side.Start(s, {"", "", ""}));
  CheckResult r = s.Run(absl::Seconds(4), [&](int round) {
    const auto mode = round % 2 == 0 ? EmbeddedPostgres::StopMode::kFast
                                     : EmbeddedPostgres::StopMode::kImmediate;
    absl::Status st = s.server().Restart(mode);
    EXPECT_TRUE(st.ok()) << st;
    return st.ok() ? 1 : 0;
  });
  ExpectExactlyOnce(s, r, 0);
  EXPECT_GE(s.faults(), 2);
  side.Check(s);
}

TEST(Fault, PostgresRestartedFastAndImmediate) {
  PostgresRestarted("pg_restart", SideQueue(false));
}

TEST(Fault, PostgresRestartedUnderWorkersOfTwoQueues) {
  PostgresRestarted("pg_restart_two_queues", SideQueue(true));
}

// Every connection of the workers (their LISTEN connections, named `partq worker/listen`
// in a worker of several queues, too) terminated again and again.
void ConnectionsTerminated(const std::string& name, const SideQueue& side) {
  FaultScenario s(side.OptionsFor(name));
  ASSERT_NO_FATAL_FAILURE(side.Start(s, {"", "", ""}));
  int64_t backends = 0;
  CheckResult r = s.Run(absl::Milliseconds(1500), [&](int) {
    try {
      pqxx::connection c(s.dsn());
      pqxx::nontransaction tx(c);
      backends += tx.exec1(
                        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM "
                        "pg_stat_activity WHERE starts_with(application_name, 'partq worker')")[0]
                      .as<int64_t>();
      return 1;
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
      return 0;
    }
  });
  printf("pg_terminate_backend: %lld worker backends terminated in %lld rounds\n",
         static_cast<long long>(backends), static_cast<long long>(s.faults()));
  ExpectExactlyOnce(s, r, 0);
  EXPECT_GE(s.faults(), 5);
  EXPECT_GT(backends, s.faults());
  side.Check(s);
}

TEST(Fault, WorkerConnectionsTerminated) {
  ConnectionsTerminated("pg_terminate_backend", SideQueue(false));
}

TEST(Fault, ConnectionsOfWorkersOfTwoQueuesTerminated) {
  ConnectionsTerminated("pg_terminate_two_queues", SideQueue(true));
}

TEST(Fault, NetworkDroppedResetAndStalledByAProxy) {
  FaultScenario s(Options("network_proxy", 12000));
  ASSERT_TRUE(s.SetUp());
  auto proxy = TcpProxy::Start(s.port());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  for (int i = 0; i < 3; ++i) s.Add(Spec(kHandler, "", {}, (*proxy)->port()));
  int drops = 0, resets = 0, stalls = 0;
  CheckResult r = s.Run(absl::Seconds(3), [&](int round) {
    switch (round % 3) {
      case 0:
        (*proxy)->DropAll();
        ++drops;
        break;
      case 1:
        (*proxy)->ResetAll();
        ++resets;
        break;
      default:
        // Longer than the TTL: every session behind the proxy expires.
        (*proxy)->Stall(s.options().ttl + absl::Milliseconds(500));
        ++stalls;
        break;
    }
    return 1;
  });
  printf("network_proxy: %d drops, %d resets, %d stalls\n", drops, resets, stalls);
  ExpectExactlyOnce(s, r, 0);
  EXPECT_GE(stalls, 1);
}

// A rolling restart, as Kubernetes does one to a StatefulSet of static
// members (KIP-345): each of ten workers in turn gets SIGTERM, drains, exits
// and is started again with its instance id. Its parts wait for it (the
// session TTL, 10 s, is longer than a restart) and nobody else's move: the
// monitor sees no part change owner, and each restart is measured from the
// SIGTERM to the new incarnation owning every part the old one had.
TEST(Fault, RollingRestartOfStaticMembersMovesNoPart) {
  ScenarioOptions o = Options("rolling_restart", 30000);
  o.ttl = absl::Seconds(10);
  FaultScenario s(o);
  ASSERT_TRUE(s.SetUp());
  constexpr int kWorkers = 10;
  for (int i = 0; i < kWorkers; ++i) s.Add(Spec(kHandler, absl::StrCat("w", i)));
  std::vector<absl::Duration> took;
  int64_t moves_before = -1;  // the moves of the fleet's first assignment, before the restarts
  CheckResult r = s.Run(absl::Milliseconds(500), [&](int round) {
    if (round >= kWorkers) return 0;
    if (round == 0) {
      // The fleet settled first: every member owns 3 or 4 of the 32 parts.
      EXPECT_TRUE(WaitUntil(
          [&] {
            return QueryInt(s.dsn(),
                            "SELECT count(*) FROM (SELECT s.instance_id, count(*) AS n FROM "
                            "partq.session_parts sp JOIN partq.sessions s ON s.id = "
                            "sp.session_id GROUP BY 1) o WHERE n BETWEEN 3 AND 4") == kWorkers;
          },
          absl::Seconds(30), absl::Milliseconds(20)))
          << "the fleet did not settle";
      absl::SleepFor(absl::Milliseconds(200));  // the monitor has seen it
      moves_before = s.moves();
    }
    const std::string instance = absl::StrCat("w", round);
    const std::string parts_sql = absl::StrCat(
        "SELECT count(*), coalesce(min(s.incarnation), 0) FROM partq.session_parts sp JOIN "
        "partq.sessions s ON s.id = sp.session_id WHERE s.instance_id = '",
        instance, "'");
    auto before = Query(s.dsn(), parts_sql);
    const int64_t parts = std::stoll(*before[0][0]);
    const int64_t incarnation = std::stoll(*before[0][1]);
    const absl::Time t0 = absl::Now();
    s.Restart(round);
    // Back: a new incarnation owns as many parts as the old one did.
    const bool back = WaitUntil(
        [&] {
          auto now = Query(s.dsn(), parts_sql);
          return std::stoll(*now[0][0]) == parts && std::stoll(*now[0][1]) > incarnation;
        },
        absl::Seconds(15), absl::Milliseconds(20));
    EXPECT_TRUE(back) << instance << " did not take its " << parts << " parts back";
    took.push_back(absl::Now() - t0);
    return 1;
  });
  ExpectExactlyOnce(s, r, 0);
  EXPECT_EQ(s.faults(), kWorkers) << "the queue drained before every worker was restarted";
  const int64_t moved = s.moves() - moves_before;
  EXPECT_EQ(moved, 0) << "parts moved between members during a rolling restart";
  absl::Duration longest;
  for (absl::Duration d : took) longest = std::max(longest, d);
  printf("rolling restart: %zu restarts, the longest %.0f ms from SIGTERM to owning its parts "
         "again; %lld parts changed owner\n",
         took.size(), absl::ToDoubleMilliseconds(longest), static_cast<long long>(moved));
  EXPECT_LT(longest, o.ttl) << "a restart took longer than the TTL";
}

TEST(Fault, MembershipChurnEverySecond) {
  FaultScenario s(Options("churn", 12000));
  ASSERT_TRUE(s.SetUp());
  for (int i = 0; i < 3; ++i) s.Add(Spec(kHandler));
  CheckResult r = s.Run(absl::Seconds(1), [&](int round) {
    const auto active = s.Active();
    thread_local absl::BitGen gen;
    const bool join = active.size() <= 2 || (active.size() < 5 && absl::Bernoulli(gen, 0.5));
    if (join) {
      s.Add(Spec(kHandler));
    } else {
      s.Retire(RandomIndex(active));
    }
    return 1;
  });
  ExpectExactlyOnce(s, r, 0);
  EXPECT_GE(s.faults(), 5);
}

TEST(Fault, HandlersFailingAtRandom) {
  // 20% of calls fail; with 3 attempts about 0.8% of items are dead-lettered.
  FaultScenario s(Options("handler_fail", 12000, 3));
  ASSERT_TRUE(s.SetUp());
  for (int i = 0; i < 3; ++i) s.Add(Spec("fail:0.2,sleep:8,record:effects"));
  CheckResult r = s.Run(absl::Seconds(1), [](int) { return 0; },
                        [&] { return s.Logged().retried + s.Logged().dead; });
  ExpectExactlyOnce(s, r, -1);
  EXPECT_GT(r.dead, 0);
  EXPECT_LT(r.dead, r.items / 20);
  for (const auto& e : r.dead_errors) EXPECT_TRUE(absl::StrContains(e, "injected failure")) << e;
  EXPECT_GT(s.faults(), r.items / 10);
}

TEST(Fault, HandlersTimingOut) {
  // Two workers run a handler that always outlives --handler-timeout (every
  // item they take fails with a timeout and is retried), two a normal one;
  // every 3 s a slow and a normal worker leave and come back in the other
  // role, so parts keep moving between them. Items end acked by a normal
  // worker or dead-lettered after 2 timeouts; never both, never neither.
  // (With 3, a quick run could end with none dead: one run in about ten
  // once the normal workers drained faster than the slow ones retried.)
  FaultScenario s(Options("handler_timeout", 8000, 2));
  ASSERT_TRUE(s.SetUp());
  const WorkerSpec slow = Spec("sleep:100,record:effects", "", {"--handler-timeout", "50ms"});
  const WorkerSpec normal = Spec(kHandler);
  std::vector<int> slow_workers = {s.Add(slow), s.Add(slow)};
  std::vector<int> normal_workers = {s.Add(normal), s.Add(normal)};
  CheckResult r = s.Run(
      absl::Seconds(3),
      [&](int round) {
        const size_t k = round % 2;
        s.Retire(slow_workers[k]);
        s.Retire(normal_workers[k]);
        slow_workers[k] = s.Add(slow);
        normal_workers[k] = s.Add(normal);
        return 0;  // role swaps are not faults; the timeouts are
      },
      [&] { return s.Logged().retried + s.Logged().dead; });
  ExpectExactlyOnce(s, r, -1);
  EXPECT_GT(s.faults(), 0);
  EXPECT_GT(r.dead, 0) << "no item timed out its way to the dead letters";
  for (const auto& e : r.dead_errors) EXPECT_TRUE(absl::StrContains(e, "timeout") ||
                                                  absl::StrContains(e, "timed out")) << e;
}

TEST(Fault, PoisonItemCrashesEveryWorkerThatTakesIt) {
  FaultScenario s(Options("poison", 12000, 3, "POISON"));
  ASSERT_TRUE(s.SetUp());
  for (int i = 0; i < 3; ++i) {
    s.Add(Spec("crash:POISON,sleep:8,record:effects", absl::StrCat("w", i + 1)));
  }
  CheckResult r = s.Run(absl::Seconds(1), [](int) { return 0; },
                        [&] { return s.restarts(); });
  ExpectExactlyOnce(s, r, 1);
  ASSERT_EQ(r.dead_errors.size(), 1u);
  EXPECT_TRUE(absl::StrContains(r.dead_errors[0], "crash loop")) << r.dead_errors[0];
  EXPECT_GE(s.restarts(), 3);
}

// Queue "q" (4 parts) in `schema`, and a proxy in front of the suite's server.
void QueueBehindAProxy(const TestSchema& schema, std::unique_ptr<TcpProxy>* proxy) {
  QueueConfig q;
  q.name = "q";
  q.parts = 4;
  ASSERT_TRUE(schema.NewStore()->CreateQueue(q).ok());
  const std::string& dsn = schema.dsn();
  const size_t at = dsn.find("port=");
  ASSERT_NE(at, std::string::npos) << dsn;
  auto started = TcpProxy::Start(std::stoi(dsn.substr(at + 5)));
  ASSERT_TRUE(started.ok()) << started.status();
  *proxy = std::move(*started);
}

std::string ProxyDsn(const TcpProxy& proxy) {
  return absl::StrCat("host=127.0.0.1 port=", proxy.port(), " user=postgres dbname=postgres");
}

// A connection that breaks after the server received a chunk's COMMIT (here a
// proxy forwards it and closes the connection before the reply; a failover
// does the same): the chunk may be there or not, and `enqueue --stdin` must
// not say "not enqueued" of it. Here the server committed it.
TEST(Fault, EnqueueStdinNamesTheLinesInDoubtWhenACommitBreaks) {
  TestSchema schema;
  std::unique_ptr<TcpProxy> proxy;
  ASSERT_NO_FATAL_FAILURE(QueueBehindAProxy(schema, &proxy));
  // Chunks of 10 lines, one COMMIT each: the second is lines 11 to 20.
  proxy->CutAfterClientSends("COMMIT", 2);
  std::string input;
  for (int i = 1; i <= 25; ++i) absl::StrAppend(&input, "line-", i, "\n");
  const PartqResult r = Partq({"enqueue", "q", "--stdin", "--chunk", "10", "--dsn",
                               ProxyDsn(*proxy), "--schema", schema.name()},
                              input);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "the connection broke during COMMIT")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err,
                                "(lines 11 to 20 may or may not have been enqueued; the 10 lines "
                                "before them were, lines after them were not)"))
      << r.err;
  EXPECT_EQ(schema.QInt("SELECT count(*) FROM {schema}.items"), 20);
  EXPECT_EQ(schema.QInt("SELECT count(*) FROM {schema}.items WHERE payload = 'line-20'"), 1);
}

// The same for a single enqueue: its INSERT commits as it runs, so a
// connection cut after the server got it leaves the item there, and the
// command must not say it failed plainly.
TEST(Fault, EnqueueNamesTheItemInDoubtWhenTheConnectionBreaksAsItRuns) {
  TestSchema schema;
  std::unique_ptr<TcpProxy> proxy;
  ASSERT_NO_FATAL_FAILURE(QueueBehindAProxy(schema, &proxy));
  // The payload travels in the statement's Bind message: cut right after it.
  proxy->CutAfterClientSends("payload-to-cut-after", 1);
  const PartqResult r = Partq(
      {"enqueue", "q", "payload-to-cut-after", "--dsn", ProxyDsn(*proxy), "--schema", schema.name()});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "(the item may or may not have been enqueued")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "a --dedup-key makes that safe")) << r.err;
  EXPECT_TRUE(WaitUntil([&] {
    return schema.QInt("SELECT count(*) FROM {schema}.items WHERE payload = "
                       "'payload-to-cut-after'") == 1;
  })) << "the server committed it";
}

}  // namespace
}  // namespace partq::testing
