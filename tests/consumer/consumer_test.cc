// The item lifecycle against a real PostgreSQL: exactly-once acks (I2, I3),
// no loss (I4), per-key order (I7), retries, dead letters, wake-ups, drain.
#include "consumer/consumer.h"

#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <pqxx/pqxx>
#include <set>
#include <stdexcept>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "bench/tracking_store.h"
#include "consumer/builtin_handlers.h"
#include "consumer/metrics.h"
#include "consumer/worker.h"
#include "coordinator/heartbeat.h"
#include "gtest/gtest.h"
#include "partitioner/part.h"
#include "pg/migrations.h"
#include "pg/pg_store.h"
#include "producer/producer.h"
#include "prometheus/registry.h"
#include "store/fault_store.h"
#include "store/throughput.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using testing::ChildProcess;
using testing::TestSchema;

using testing::WaitUntil;

class ConsumerTest : public ::testing::Test {
 protected:
  void CreateQueue(const std::string& name, int parts, absl::Duration ttl = absl::Seconds(10),
                   int max_attempts = 25, bool ordered = false) {
    QueueConfig q;
    q.name = name;
    q.parts = parts;
    q.session_ttl = ttl;
    q.max_attempts = max_attempts;
    q.ordered = ordered;
    ASSERT_TRUE(schema_.NewStore()->CreateQueue(q).ok());
  }

  void EnqueueN(const std::string& queue, int n, const std::string& prefix = "p") {
    std::vector<NewItem> items(n);
    for (int i = 0; i < n; ++i) items[i].payload = absl::StrCat(prefix, i);
    auto r = schema_.NewStore()->EnqueueBatch(queue, items);
    ASSERT_TRUE(r.ok()) << r.status();
  }

  // A handler that writes one row per item into {schema}.writes and then
  // fails for payload `failing`; counts runs per payload in `runs` if given.
  static std::unique_ptr<Handler> WritesThenFailsOn(std::string failing, absl::Mutex* mu = nullptr,
                                                    std::map<std::string, int>* runs = nullptr) {
    return MakeHandler([failing, mu, runs](HandlerCall& call) -> absl::Status {
      if (runs != nullptr) {
        absl::MutexLock l(mu);
        ++(*runs)[call.item->payload];
      }
      auto r =
          call.tx->Exec("INSERT INTO \"" + call.tx->schema() + "\".writes (item_id) VALUES ($1)",
                        {std::to_string(call.item->id)});
      if (!r.ok()) return r.status();
      if (call.item->payload == failing) {
        return absl::InternalError(failing + " fails after writing");
      }
      return absl::OkStatus();
    });
  }

  // `n` items in one part, one batch of `n`, one attempt each: every item
  // but p3 (whose handler fails) recorded once in `writes` (with the
  // transaction that wrote it), p3 dead.
  void RunItemsWhereP3Fails(Handler& handler, int n = 10) {
    CreateQueue("q", 1, absl::Seconds(10), /*max_attempts=*/1);
    EnqueueN("q", n);
    schema_.Q("CREATE TABLE {schema}.writes (item_id bigint, tx bigint DEFAULT txid_current())");
    ConsumerOptions o = Options("q");
    o.concurrency = 1;
    o.batch = n;
    Consumer c(schema_.Factory(), o, &handler);
    ASSERT_TRUE(c.Start().ok());
    ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }));
    c.Stop();
    ExpectExactlyOnce("writes", n - 1);
    EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.dead_items "
                           "WHERE last_error LIKE '%p3 fails after writing%'"),
              1);
  }

  // A handler that notes when each payload reached it, and how long after
  // its enqueue an item was picked up: for the tests of idle workers.
  class Pickups {
   public:
    Handler* handler() { return handler_.get(); }
    // Enqueues `item` into `queue` and returns how long after the enqueue
    // its handler call began (infinite if not within 10 s).
    absl::Duration After(Producer& p, const std::string& queue, const NewItem& item) {
      const absl::Time t0 = absl::Now();
      EXPECT_TRUE(p.Enqueue(queue, item).ok());
      const bool seen = WaitUntil(
          [&] {
            absl::MutexLock l(&mu_);
            return at_.count(item.payload) > 0;
          },
          absl::Seconds(10));
      EXPECT_TRUE(seen) << item.payload << " was not picked up";
      absl::MutexLock l(&mu_);
      return seen ? at_[item.payload] - t0 : absl::InfiniteDuration();
    }

   private:
    absl::Mutex mu_;
    std::map<std::string, absl::Time> at_ ABSL_GUARDED_BY(mu_);
    std::unique_ptr<Handler> handler_ = MakeHandler([this](HandlerCall& call) {
      absl::MutexLock l(&mu_);
      at_[call.item->payload] = absl::Now();
      return absl::OkStatus();
    });
  };

  int64_t Left(const std::string& queue) {
    return schema_.QInt("SELECT count(*) FROM {schema}.items WHERE queue = '" + queue + "'");
  }

  // Every enqueued id recorded exactly once; returns the number recorded.
  void ExpectExactlyOnce(const std::string& table, int64_t expected) {
    EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}." + table), expected);
    EXPECT_EQ(schema_.QInt("SELECT count(DISTINCT item_id) FROM {schema}." + table), expected);
    EXPECT_EQ(schema_.QInt("SELECT count(*) FROM (SELECT item_id FROM {schema}." + table +
                           " GROUP BY 1 HAVING count(*) > 1) d"),
              0);
  }

  // A started --poll-only consumer of queue "q" running `handler`, its
  // store's calls counted by `faults`.
  std::unique_ptr<Consumer> StartPollOnly(FaultInjector& faults, Handler* handler) {
    ConsumerOptions o = Options("q");
    o.poll_only = true;
    auto c = std::make_unique<Consumer>(faults.Wrap(schema_.Factory()), o, handler);
    EXPECT_TRUE(c->Start().ok());
    return c;
  }

  ConsumerOptions Options(const std::string& queue) {
    ConsumerOptions o;
    o.queue = queue;
    o.concurrency = 2;
    o.batch = 50;
    o.poll_interval = absl::Milliseconds(100);
    o.backoff.base = absl::Milliseconds(10);
    o.backoff.max = absl::Milliseconds(50);
    return o;
  }

  std::vector<std::string> Worker(const std::string& queue, const std::string& handler,
                                  std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {
        testing::PartqBinary(), "worker",    queue,   "--dsn",   schema_.dsn(),   "--schema",
        schema_.name(),         "--handler", handler, "--quiet", "--concurrency", "2",
        "--poll-interval",      "100ms"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  // SIGTERMs a worker process: it must drain and exit 0 within 30 s. Call as
  // ASSERT_NO_FATAL_FAILURE(StopCleanly(w)), so a worker that does not stop ends the test.
  static void StopCleanly(ChildProcess& w) {
    w.Signal(SIGTERM);
    auto st = w.Wait(absl::Seconds(30));
    ASSERT_TRUE(st.has_value()) << "the worker did not stop within 30 s of SIGTERM";
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << "wait status " << *st;
  }

  TestSchema schema_;
};

TEST_F(ConsumerTest, ThreeConsumersDrainWithRecordHandlerExactlyOnce) {
  CreateQueue("q", 12);
  EnqueueN("q", 6000);
  auto handler = ParseHandlerSpec("record:effects");
  ASSERT_TRUE(handler.ok());
  std::vector<std::unique_ptr<Consumer>> consumers;
  for (int i = 0; i < 3; ++i) {
    consumers.push_back(
        std::make_unique<Consumer>(schema_.Factory(), Options("q"), handler->get()));
    ASSERT_TRUE(consumers.back()->Start().ok());
  }
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }));
  for (auto& c : consumers) c->Stop();
  ExpectExactlyOnce("effects", 6000);
  int64_t acked = 0;
  for (auto& c : consumers) acked += c->stats().acked;
  EXPECT_EQ(acked, 6000);
}

// The library's Worker (consumer/worker.h, issue 52): two queues in one
// object, each with its own handler and options, drained exactly once; ready
// once both sessions are; Stop leaves both groups.
TEST_F(ConsumerTest, AWorkerOfTwoQueuesDrainsEachWithItsOwnHandler) {
  CreateQueue("mails", 4);
  CreateQueue("thumbs", 8);
  EnqueueN("mails", 1500);
  EnqueueN("thumbs", 2500);
  // The record handler's table, with the transaction of each row: two batches' transactions
  // may begin in the same microsecond, so acked_at cannot tell them apart.
  schema_.Q(
      "CREATE TABLE {schema}.thumb_effects (item_id bigint NOT NULL, session_id uuid NOT "
      "NULL, acked_at timestamptz NOT NULL DEFAULT now(), "
      "xid xid8 NOT NULL DEFAULT pg_current_xact_id())");
  auto mails = ParseHandlerSpec("record:mail_effects");
  auto thumbs = ParseHandlerSpec("record:thumb_effects");
  ASSERT_TRUE(mails.ok() && thumbs.ok());
  ConsumerOptions thumbs_options = Options("thumbs");
  thumbs_options.batch = 7;
  partq::Worker worker(schema_.Factory(),
                       {{Options("mails"), mails->get()}, {thumbs_options, thumbs->get()}});
  std::string why;
  EXPECT_FALSE(worker.Ready(&why));
  ASSERT_TRUE(worker.Start().ok());
  ASSERT_EQ(worker.consumers().size(), 2u);
  EXPECT_TRUE(WaitUntil([&] { return worker.Ready(&why); })) << why;
  ASSERT_TRUE(WaitUntil([&] { return Left("mails") == 0 && Left("thumbs") == 0; }));
  EXPECT_TRUE(worker.Ended().ok());
  worker.Stop();
  ExpectExactlyOnce("mail_effects", 1500);
  ExpectExactlyOnce("thumb_effects", 2500);
  EXPECT_EQ(worker.consumers()[0]->stats().acked, 1500);
  EXPECT_EQ(worker.consumers()[1]->stats().acked, 2500);
  EXPECT_LE(schema_.QInt("SELECT max(n) FROM (SELECT count(*) AS n FROM {schema}.thumb_effects "
                         "GROUP BY xid) b"),
            7);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.sessions"), 0) << "sessions left";
}

// A Worker of several queues sweeps for its idle queues (issue 52): their claimers make no
// claims of their own while idle, one read a sweep asks which queues hold work, and an item
// written without a notice (by hand) is found by the next sweep, not by a poll of its queue.
TEST_F(ConsumerTest, AWorkerOfSeveralQueuesFindsWhatCameWithoutANoticeByItsSweep) {
  CreateQueue("a", 4);
  CreateQueue("b", 4);
  Pickups picked;
  FaultInjector faults(Clock::Real());
  ConsumerOptions a = Options("a");
  ConsumerOptions b = Options("b");
  for (ConsumerOptions* o : {&a, &b}) {
    o->poll_interval = absl::Milliseconds(100);
    o->idle_poll_interval = absl::Milliseconds(500);  // the sweep's period
  }
  partq::Worker worker(faults.Wrap(schema_.Factory()),
                       {{a, picked.handler()}, {b, picked.handler()}});
  ASSERT_TRUE(worker.Start().ok());
  std::string why;
  ASSERT_TRUE(WaitUntil([&] { return worker.Ready(&why); })) << why;
  for (const auto& c : worker.consumers()) {
    EXPECT_EQ(c->options().swept_poll_interval, absl::Hours(1));
    ASSERT_TRUE(WaitUntil([&] { return c->session().listening(); }));
  }
  absl::SleepFor(absl::Seconds(1));  // the first polls find nothing
  const int64_t claims = faults.Calls("Claim");
  const int64_t sweeps = faults.Calls("QueuesWithWork");
  absl::SleepFor(absl::Seconds(3));  // 6 sweeps, 30 poll intervals, 6 idle poll intervals
  EXPECT_LE(faults.Calls("Claim") - claims, 1) << "idle queues went on polling";
  EXPECT_GE(faults.Calls("QueuesWithWork") - sweeps, 4) << "no sweeps";
  // No notice for this one: only a sweep can find it.
  const absl::Time t0 = absl::Now();
  schema_.Q(
      "INSERT INTO {schema}.items (id, queue, part, payload) "
      "VALUES (nextval('{schema}.items_id_seq'), 'b', 1, 'by hand')");
  ASSERT_TRUE(WaitUntil([&] { return Left("b") == 0; }, absl::Seconds(10)))
      << "the sweep did not find the item";
  EXPECT_LT(absl::Now() - t0, absl::Seconds(3));
  worker.Stop();
}

// A Worker refuses queues it cannot serve before anything starts, and one
// whose consumer fails to start stops the others, names the queue and stays
// stopped.
TEST_F(ConsumerTest, AWorkerRefusesBadQueuesAndStopsWhatStartedWhenOneFails) {
  CreateQueue("q", 4);
  auto handler = ParseHandlerSpec("noop");
  ASSERT_TRUE(handler.ok());
  {
    partq::Worker twice(schema_.Factory(),
                        {{Options("q"), handler->get()}, {Options("q"), handler->get()}});
    absl::Status st = twice.Start();
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
    EXPECT_NE(st.message().find("queue \"q\" is named twice"), absl::string_view::npos) << st;
    EXPECT_TRUE(twice.consumers().empty());
    partq::Worker none(schema_.Factory(), {});
    EXPECT_TRUE(absl::IsInvalidArgument(none.Start()));
    partq::Worker unhandled(schema_.Factory(), {{Options("q"), nullptr}});
    EXPECT_TRUE(absl::IsInvalidArgument(unhandled.Start()));
  }
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.sessions"), 0);
  partq::Worker worker(schema_.Factory(),
                       {{Options("q"), handler->get()}, {Options("nosuch"), handler->get()}});
  absl::Status st = worker.Start();
  EXPECT_TRUE(absl::IsNotFound(st)) << st;
  EXPECT_NE(st.message().find("(queue \"nosuch\")"), absl::string_view::npos) << st;
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.sessions"), 0)
      << "the first queue's session was left running";
  EXPECT_TRUE(absl::IsFailedPrecondition(worker.Start()));
}

// Issue 27: the owner of part 0 vacuums the items table once the drain
// leaves it past its threshold (10,000 dead rows), not at autovacuum's next
// visit (it is kept away here); a consumer with the keeper off does not.
TEST_F(ConsumerTest, TheOwnerOfPartZeroVacuumsTheItemsTheDrainLeftDead) {
  CreateQueue("q", 4);
  schema_.Q("ALTER TABLE {schema}.items SET (autovacuum_enabled = false)");
  auto vacuums = [&] {
    return schema_.QInt(
        "SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = '{schema}.items'::regclass");
  };
  auto handler = ParseHandlerSpec("noop");
  ASSERT_TRUE(handler.ok());
  {
    ConsumerOptions off = Options("q");
    off.vacuum_interval = absl::ZeroDuration();
    Consumer c(schema_.Factory(), off, handler->get());
    ASSERT_TRUE(c.Start().ok());
    EnqueueN("q", 12000);
    ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }));
    absl::SleepFor(absl::Seconds(1));
    c.Stop();
    EXPECT_EQ(vacuums(), 0) << "the keeper ran with vacuum_interval zero";
  }
  prometheus::Registry registry;
  ConsumerMetrics metrics(registry, "q");
  ConsumerOptions on = Options("q");
  on.vacuum_interval = absl::Milliseconds(200);
  Consumer c(schema_.Factory(), on, handler->get(), &metrics);
  ASSERT_TRUE(c.Start().ok());
  EnqueueN("q", 12000);
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }));
  EXPECT_TRUE(WaitUntil([&] { return vacuums() >= 1; })) << "no vacuum of items";
  EXPECT_TRUE(WaitUntil([&] {
    for (const auto& family : registry.Collect()) {
      if (family.name != "partq_table_vacuums_total") continue;
      for (const auto& m : family.metric) {
        for (const auto& l : m.label) {
          if (l.name == "table" && l.value == "items" && m.counter.value >= 1) return true;
        }
      }
    }
    return false;
  })) << "partq_table_vacuums_total{table=\"items\"} did not count it";
  c.Stop();
}

// A worker whose role owns neither the queue's tables nor the database may
// not vacuum them: once the dead rows pass the threshold its keeper asks once,
// is denied, logs a warning and asks no more, and the worker drains as before
// (docs/guide/operations-and-roles.md, "Running it hard": then autovacuum alone keeps the tables).
TEST_F(ConsumerTest, AWorkerWhoseRoleMayNotVacuumAsksOnceAndDrainsAsBefore) {
  CreateQueue("q", 4);
  schema_.Q("ALTER TABLE {schema}.items SET (autovacuum_enabled = false)");
  const std::string role = absl::StrCat("partq_worker_", absl::Uniform<uint32_t>(absl::BitGen()));
  schema_.Q(absl::StrCat("CREATE ROLE ", role, " LOGIN"));
  auto drop_role = absl::MakeCleanup([&] {
    schema_.Q(absl::StrCat("DROP OWNED BY ", role));
    schema_.Q(absl::StrCat("DROP ROLE ", role));
  });
  for (const char* grant :
       {"GRANT USAGE ON SCHEMA {schema} TO ", "GRANT ALL ON ALL TABLES IN SCHEMA {schema} TO ",
        "GRANT ALL ON ALL SEQUENCES IN SCHEMA {schema} TO "}) {
    schema_.Q(absl::StrCat(grant, role));
  }
  auto dead = [&] {
    return schema_.QInt(
        "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = '{schema}.items'::regclass");
  };
  auto vacuums = [&] {
    return schema_.QInt(
        "SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = '{schema}.items'::regclass");
  };
  PgOptions as_role = schema_.options();
  as_role.dsn = absl::StrCat(as_role.dsn, " user=", role);
  FaultInjector faults(Clock::Real());
  auto handler = ParseHandlerSpec("noop");
  ASSERT_TRUE(handler.ok());
  prometheus::Registry registry;
  ConsumerMetrics metrics(registry, "q");
  ConsumerOptions on = Options("q");
  on.vacuum_interval = absl::Milliseconds(100);
  Consumer c(faults.Wrap(PgStoreFactory(as_role)), on, handler->get(), &metrics);
  ASSERT_TRUE(c.Start().ok());
  EnqueueN("q", 100);
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; })) << "the worker did not drain";
  // Below the threshold the keeper asks every interval (and is told nothing
  // is due), so a stop after the denial below is the denial's doing.
  ASSERT_TRUE(WaitUntil([&] { return faults.Calls("VacuumQueueTables") >= 3; }))
      << "the keeper never asked";
  // Dead rows in the shared items table, made here: a worker's own
  // connections report theirs only once idle for 10 s (PostgreSQL's stats).
  CreateQueue("other", 1);
  EnqueueN("other", 12000);
  schema_.Q("DELETE FROM {schema}.items WHERE queue = 'other'");
  ASSERT_TRUE(WaitUntil([&] { return dead() >= 10000; }));
  // Past the threshold: the next round is denied and the last.
  ASSERT_TRUE(WaitUntil([&] {
    const int64_t before = faults.Calls("VacuumQueueTables");
    absl::SleepFor(absl::Seconds(1));  // ten intervals
    return faults.Calls("VacuumQueueTables") == before;
  })) << "the keeper went on asking after it was denied";
  EXPECT_EQ(vacuums(), 0);
  // A denial is no failed round.
  for (const auto& family : registry.Collect()) {
    if (family.name == "partq_table_vacuum_errors_total") {
      EXPECT_EQ(family.metric[0].counter.value, 0);
    }
  }
  EXPECT_GE(dead(), 10000);
  // The worker still works.
  EnqueueN("q", 100);
  EXPECT_TRUE(WaitUntil([&] { return Left("q") == 0; })) << "the worker stopped draining";
  c.Stop();
}

// Cancel against the claim design (store.h, "Claims live in memory"):
// three consumers drain a queue while a thread cancels random ids, again and
// again, many of them claimed or being claimed at that moment. Every item
// ends exactly once, acked or cancelled, never both; no handler runs a
// cancelled item; no Finish is refused (fenced) or fails.
TEST_F(ConsumerTest, CancelsRacingThreeConsumersEndEachItemOnceAckedOrCancelled) {
  constexpr int kItems = 4000;
  CreateQueue("q", 8);
  EnqueueN("q", kItems);
  std::vector<int64_t> ids;
  for (const auto& row : schema_.Q("SELECT id FROM {schema}.items ORDER BY id")) {
    ids.push_back(std::stoll(*row[0]));
  }
  ASSERT_EQ(ids.size(), static_cast<size_t>(kItems));
  schema_.Q("CREATE TABLE {schema}.writes (item_id bigint)");
  absl::Mutex mu;
  std::multiset<int64_t> ran;  // every handler run, committed or not
  auto handler = MakeHandler([&](HandlerCall& call) -> absl::Status {
    {
      absl::MutexLock l(&mu);
      ran.insert(call.item->id);
    }
    absl::SleepFor(absl::Milliseconds(1));  // work, so that items stay in flight a while
    auto r = call.tx->Exec("INSERT INTO \"" + call.tx->schema() + "\".writes VALUES ($1)",
                           {std::to_string(call.item->id)});
    return r.status();
  });
  // Small batches: many claims, so many claim records for cancels to meet.
  ConsumerOptions o = Options("q");
  o.batch = 10;
  std::vector<std::unique_ptr<Consumer>> consumers;
  auto store = schema_.NewStore();
  std::set<int64_t> cancelled;
  std::map<CancelOutcome::Kind, int64_t> outcomes;
  absl::BitGen gen;
  // Ids from anywhere, and from the heads of the parts, where the owners
  // are claiming (the lowest ids left: keyless items spread over the parts
  // in runs of 32 ids).
  auto cancel_some = [&] {
    std::vector<int64_t> head;
    for (const auto& row : schema_.Q("SELECT id FROM {schema}.items ORDER BY id LIMIT 200")) {
      head.push_back(std::stoll(*row[0]));
    }
    std::vector<int64_t> pick;
    for (int k = 0; k < 2; ++k) pick.push_back(ids[absl::Uniform<size_t>(gen, 0, ids.size())]);
    for (int k = 0; k < 6 && !head.empty(); ++k) {
      pick.push_back(head[absl::Uniform<size_t>(gen, 0, head.size())]);
    }
    auto got = store->CancelItems("q", pick);
    ASSERT_TRUE(got.ok()) << got.status();
    for (const CancelOutcome& c : *got) {
      ++outcomes[c.kind];
      if (c.kind == CancelOutcome::Kind::kCancelled) {
        EXPECT_TRUE(cancelled.insert(c.id).second) << "cancelled twice: " << c.id;
      }
    }
  };
  cancel_some();  // some before any worker runs, so cancels surely happen
  for (int i = 0; i < 3; ++i) {
    consumers.push_back(std::make_unique<Consumer>(schema_.Factory(), o, handler.get()));
    ASSERT_TRUE(consumers.back()->Start().ok());
  }
  while (Left("q") > 0) cancel_some();
  for (auto& c : consumers) c->Stop();

  printf("cancel outcomes: %lld cancelled, %lld in flight, %lld done, %lld already cancelled\n",
         static_cast<long long>(outcomes[CancelOutcome::Kind::kCancelled]),
         static_cast<long long>(outcomes[CancelOutcome::Kind::kInFlight]),
         static_cast<long long>(outcomes[CancelOutcome::Kind::kDone]),
         static_cast<long long>(outcomes[CancelOutcome::Kind::kAlreadyCancelled]));
  EXPECT_GT(cancelled.size(), 0u);
  EXPECT_EQ(outcomes[CancelOutcome::Kind::kDead] + outcomes[CancelOutcome::Kind::kUnknown], 0);
  // Cancelled exactly as reported, each acked item once, and never both.
  std::set<int64_t> recorded;
  for (const auto& row : schema_.Q("SELECT id FROM {schema}.cancelled_items")) {
    recorded.insert(std::stoll(*row[0]));
  }
  EXPECT_EQ(recorded, cancelled);
  ExpectExactlyOnce("writes", kItems - static_cast<int64_t>(cancelled.size()));
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.writes w JOIN {schema}.cancelled_items c "
                         "ON c.id = w.item_id"),
            0);
  {
    absl::MutexLock l(&mu);
    for (int64_t id : cancelled) EXPECT_EQ(ran.count(id), 0u) << "a handler ran cancelled " << id;
  }
  int64_t acked = 0;
  for (auto& c : consumers) {
    acked += c->stats().acked;
    EXPECT_EQ(c->stats().fenced, 0);
    EXPECT_EQ(c->stats().finish_errors, 0);
  }
  EXPECT_EQ(acked, kItems - static_cast<int64_t>(cancelled.size()));
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.dead_items"), 0);
}

// `partq queue pause`: a LISTEN consumer and a --poll-only one stop claiming
// (the flag reaches them in a group view: a notice, or the next group poll),
// keep their parts, and after `resume` drain what came meanwhile, each item
// once, without a rebalance.
TEST_F(ConsumerTest, APausedQueueIsNotClaimedAndResumesWhereItWas) {
  CreateQueue("q", 4, absl::Seconds(1));  // a short TTL: rounds every 333 ms
  auto handler = ParseHandlerSpec("record:effects");
  ASSERT_TRUE(handler.ok());
  ConsumerOptions polling = Options("q");
  polling.poll_only = true;
  Consumer a(schema_.Factory(), Options("q"), handler->get());
  Consumer b(schema_.Factory(), polling, handler->get());
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  EnqueueN("q", 100, "a");
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }));

  const testing::PartqResult paused =
      testing::Partq({"queue", "pause", "q", "--dsn", schema_.dsn(), "--schema", schema_.name()});
  ASSERT_EQ(paused.code, 0) << paused.err;
  ASSERT_TRUE(WaitUntil([&] { return a.session().paused() && b.session().paused(); }));
  const std::string owners_sql =
      "SELECT string_agg(part || ':' || epoch, ',' ORDER BY part) FROM {schema}.session_parts";
  const auto owners = schema_.Q(owners_sql);
  EnqueueN("q", 200, "b");
  // Nothing is claimed while both sessions run three more rounds (heartbeats
  // and group reads) and the claimers poll every 100 ms.
  const int64_t a_rounds = a.session().rounds(), b_rounds = b.session().rounds();
  ASSERT_TRUE(WaitUntil([&] {
    return a.session().rounds() >= a_rounds + 3 && b.session().rounds() >= b_rounds + 3;
  }));
  EXPECT_EQ(Left("q"), 200);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.effects"), 100);
  const testing::PartqResult listed = testing::Partq(
      {"queue", "list", "--json", "--dsn", schema_.dsn(), "--schema", schema_.name()});
  EXPECT_NE(listed.out.find("\"paused\": true"), std::string::npos) << listed.out;

  const testing::PartqResult resumed =
      testing::Partq({"queue", "resume", "q", "--dsn", schema_.dsn(), "--schema", schema_.name()});
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }));
  EXPECT_FALSE(a.session().paused());
  EXPECT_EQ(schema_.Q(owners_sql), owners) << "pausing moved parts";
  a.Stop();
  b.Stop();
  ExpectExactlyOnce("effects", 300);
  EXPECT_GT(a.stats().acked, 0);
  EXPECT_GT(b.stats().acked, 0);
  const testing::PartqResult unknown = testing::Partq(
      {"queue", "pause", "nosuch", "--dsn", schema_.dsn(), "--schema", schema_.name()});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.err.find("unknown queue \"nosuch\""), std::string::npos) << unknown.err;
}

// A --poll-only consumer reads its part from its poll floor once snapshots say
// nothing below it can commit (consumer/claim_scheduler.h, "poll-only
// floors"), not from the head every second; and it still finds, within a
// few rescan_intervals rather than at its next read from the head (a
// minute), an item whose transaction took its id before later items were
// done and committed only after, and an item of a priority that runs first.
TEST_F(ConsumerTest, APollOnlyConsumerReadsFromItsFloorAndStillFindsALateCommitAndAPriority) {
  CreateQueue("q", 1);
  auto handler = ParseHandlerSpec("record:effects");
  ASSERT_TRUE(handler.ok());
  FaultInjector faults;
  std::unique_ptr<Consumer> c = StartPollOnly(faults, handler->get());
  int64_t sent = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        EnqueueN("q", 5);
        sent += 5;
        return faults.Calls("ClaimFromAFloor") > 0 && Left("q") == 0;
      },
      absl::Seconds(30)))
      << "claims from a floor: " << faults.Calls("ClaimFromAFloor");
  // The late one: its id and xid taken, its transaction open while later items are done.
  pqxx::connection late_conn(schema_.dsn());
  pqxx::work late(late_conn);
  const int64_t late_id = late.exec1(absl::StrCat(
      "SELECT id FROM ", schema_.name(), ".enqueue_item('q', convert_to('late', 'UTF8'))"))[0]
                              .as<int64_t>();
  const absl::Time later_from = absl::Now();
  while (absl::Now() - later_from < absl::Seconds(3)) {  // snapshots, floor reads
    EnqueueN("q", 5);
    sent += 5;
    absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }));
  const int64_t floor_reads = faults.Calls("ClaimFromAFloor");
  late.commit();
  const absl::Time committed = absl::Now();
  ASSERT_TRUE(WaitUntil(
      [&] {
        return schema_.QInt(absl::StrCat("SELECT count(*) FROM {schema}.effects WHERE item_id = ",
                                         late_id)) == 1;
      },
      absl::Seconds(20)));
  EXPECT_LT(absl::Now() - committed, absl::Seconds(10)) << "found by a read from the head";
  // One that runs first: its id is past the floor, its priority before it.
  schema_.Q("SELECT {schema}.enqueue_item('q', convert_to('first', 'UTF8'), priority => -5)");
  const absl::Time enqueued = absl::Now();
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }, absl::Seconds(20)));
  EXPECT_LT(absl::Now() - enqueued, absl::Seconds(10)) << "found by a read from the head";
  EXPECT_GT(faults.Calls("ClaimFromAFloor"), floor_reads) << "no read from the floor since";
  EXPECT_GT(faults.Calls("CurrentSnapshot"), 2);
  c->Stop();
  ExpectExactlyOnce("effects", sent + 2);  // and the late one and the first
  EXPECT_EQ(c->stats().finish_errors, 0);
}

// Poll floors need ids handed out in time order: with a CACHE on the items'
// id sequence (each backend takes a run of ids ahead), a poll-only consumer
// is told so by its first snapshot, asks for no more, and reads from the
// heads; every item is still done once. (The warning it logs then is not
// checked: base/log.h has no sink a test can read.)
TEST_F(ConsumerTest, APollOnlyConsumerReadsFromTheHeadsWhenTheIdSequenceHasACache) {
  CreateQueue("q", 1);
  schema_.Q("ALTER SEQUENCE {schema}.items_id_seq CACHE 20");
  auto handler = ParseHandlerSpec("record:effects");
  ASSERT_TRUE(handler.ok());
  FaultInjector faults;
  std::unique_ptr<Consumer> c = StartPollOnly(faults, handler->get());
  int64_t sent = 0;
  const absl::Time from = absl::Now();
  while (absl::Now() - from < absl::Seconds(3)) {  // time for snapshots and floor reads
    EnqueueN("q", 5);
    sent += 5;
    absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }));
  c->Stop();
  EXPECT_EQ(faults.Calls("CurrentSnapshot"), 1) << "told once, it asks no more";
  EXPECT_EQ(faults.Calls("ClaimFromAFloor"), 0);
  ExpectExactlyOnce("effects", sent);
  EXPECT_EQ(c->stats().finish_errors, 0);
}

// A fleet-wide rate limit (queue set --rate), kept per part by its owner:
// 100 items/s over 8 parts with two consumers. The upper bound is the
// property (a slow machine only spreads the acks out further); the lower one
// is generous. Removing the limit takes effect while they run.
TEST_F(ConsumerTest, ARateLimitHoldsTheFleetToItAndCanBeLiftedLive) {
  CreateQueue("q", 8, absl::Seconds(2));
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--dsn", schema_.dsn(), "--schema", schema_.name()});
    const testing::PartqResult r = testing::Partq(args);
    EXPECT_EQ(r.code, 0) << r.err;
  };
  cli({"queue", "set", "q", "--rate", "100/s"});
  auto handler = ParseHandlerSpec("record:effects");
  ASSERT_TRUE(handler.ok());
  Consumer a(schema_.Factory(), Options("q"), handler->get());
  Consumer b(schema_.Factory(), Options("q"), handler->get());
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  EnqueueN("q", 2000);
  ASSERT_TRUE(
      WaitUntil([&] { return schema_.QInt("SELECT count(*) FROM {schema}.effects") >= 300; },
                absl::Seconds(60)));
  // The first 300 acks: at 100/s plus at most each part's burst (8 parts x
  // max(1, 12.5/s x 200 ms) = 20 items), they span at least 2.79 s.
  const double span = std::stod(
      *schema_.Q("SELECT extract(epoch FROM max(acked_at) - min(acked_at)) FROM "
                 "(SELECT acked_at FROM {schema}.effects ORDER BY acked_at LIMIT 300) f")[0][0]);
  printf("first 300 acks under 100/s took %.2f s\n", span);
  EXPECT_GE(span, 2.7);
  EXPECT_LE(span, 15.0);
  cli({"queue", "set", "q", "--rate", "none"});
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }, absl::Seconds(60)));
  a.Stop();
  b.Stop();
  ExpectExactlyOnce("effects", 2000);
}

TEST_F(ConsumerTest, FourWorkerProcessesDrain50kExactlyOnce) {
  CreateQueue("big", 16);
  EnqueueN("big", 50000);
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < 4; ++i) {
    workers.push_back(std::make_unique<ChildProcess>(Worker("big", "record:effects")));
  }
  ASSERT_TRUE(WaitUntil([&] { return Left("big") == 0; }, absl::Minutes(3)));
  for (auto& w : workers) w->Signal(SIGTERM);
  for (auto& w : workers) {
    auto st = w->Wait(absl::Seconds(30));
    ASSERT_TRUE(st.has_value());
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
  }
  ExpectExactlyOnce("effects", 50000);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.sessions"), 0) << "workers left";
}

// `partq worker A B`: a session per queue in one process (issue 52). Two such
// processes share both queues; one is SIGKILLed mid-drain and the other takes
// its parts of both queues over: every item of each queue recorded once.
TEST_F(ConsumerTest, WorkersOfTwoQueuesEachDrainBothExactlyOnceAcrossASigkill) {
  // A 2 s TTL: the killed worker's parts of both queues move on that soon.
  CreateQueue("mails", 4, absl::Seconds(2));
  CreateQueue("thumbs", 8, absl::Seconds(2));
  EnqueueN("mails", 6000);
  EnqueueN("thumbs", 9000);
  const int64_t mails_lo = schema_.QInt("SELECT min(id) FROM {schema}.items WHERE queue = 'mails'");
  const int64_t mails_hi = schema_.QInt("SELECT max(id) FROM {schema}.items WHERE queue = 'mails'");
  ASSERT_EQ(mails_hi - mails_lo, 5999);
  ASSERT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE queue = 'thumbs' AND id <= " +
                         std::to_string(mails_hi)),
            0);
  ChildProcess a(Worker("mails", "record:effects", {"thumbs"}));
  ChildProcess b(Worker("mails", "record:effects", {"thumbs"}));
  ASSERT_TRUE(WaitUntil([&] { return Left("mails") + Left("thumbs") < 12000; }, absl::Minutes(1)));
  EXPECT_EQ(schema_.QInt("SELECT count(DISTINCT queue) FROM {schema}.sessions"), 2);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.sessions"), 4) << "a session per queue";
  a.Signal(SIGKILL);
  ASSERT_TRUE(a.Wait(absl::Seconds(10)).has_value());
  ASSERT_TRUE(
      WaitUntil([&] { return Left("mails") == 0 && Left("thumbs") == 0; }, absl::Minutes(3)));
  // The drain may end before the killed worker's sessions expire (what was
  // left of its parts can be done already); b removes them at their TTL.
  EXPECT_TRUE(WaitUntil([&] { return schema_.QInt("SELECT count(*) FROM {schema}.sessions") == 2; },
                        absl::Seconds(30)))
      << "the killed worker's sessions were not removed";
  ASSERT_NO_FATAL_FAILURE(StopCleanly(b));
  ExpectExactlyOnce("effects", 15000);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.effects WHERE item_id BETWEEN " +
                         std::to_string(mails_lo) + " AND " + std::to_string(mails_hi)),
            6000)
      << "each queue's items, not the other's twice";
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.sessions"), 0) << "workers left";
}

// --queue NAME:SETTINGS gives one queue of a worker its own handler and
// sizes; the others keep the command's (issue 52).
TEST_F(ConsumerTest, AQueuesOwnSettingsApplyToThatQueueAlone) {
  CreateQueue("mails", 4);
  CreateQueue("thumbs", 4);
  EnqueueN("mails", 700);
  EnqueueN("thumbs", 900);
  ChildProcess w(Worker("mails", "record:mail_effects",
                        {"--queue", "thumbs:concurrency=1,batch=7,handler=record:thumb_effects"}));
  ASSERT_TRUE(
      WaitUntil([&] { return Left("mails") == 0 && Left("thumbs") == 0; }, absl::Minutes(2)));
  ASSERT_NO_FATAL_FAILURE(StopCleanly(w));
  ExpectExactlyOnce("mail_effects", 700);
  ExpectExactlyOnce("thumb_effects", 900);
  // thumbs ran one thread with batches of at most 7: no ack of its took more.
  EXPECT_LE(schema_.QInt("SELECT max(n) FROM (SELECT count(*) AS n FROM {schema}.thumb_effects "
                         "GROUP BY session_id, acked_at) b"),
            7);
  EXPECT_GT(schema_.QInt("SELECT max(n) FROM (SELECT count(*) AS n FROM {schema}.mail_effects "
                         "GROUP BY session_id, acked_at) b"),
            7);
}

// --queues-file F: the same entries as --queue, one a line, for a worker of
// many queues (issue 52); comments and blank lines are skipped, and a queue
// named only there is served with the command's flags.
TEST_F(ConsumerTest, AWorkerServesTheQueuesItsFileNamesWithTheirSettings) {
  CreateQueue("mails", 4);
  CreateQueue("thumbs", 4);
  CreateQueue("idle", 2);
  EnqueueN("mails", 700);
  EnqueueN("thumbs", 900);
  char tmpl[] = "/tmp/partq-queues-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  absl::Cleanup rm = [&] { std::filesystem::remove_all(dir); };
  const std::string file = dir + "/queues";
  std::ofstream(file) << "# the worker's queues\n"
                         "\n"
                         "  mails\n"
                         "thumbs:concurrency=1,batch=7,handler=record:thumb_effects\n";
  std::vector<std::string> argv = Worker("idle", "record:mail_effects", {"--queues-file", file});
  ChildProcess w(argv);
  ASSERT_TRUE(
      WaitUntil([&] { return Left("mails") == 0 && Left("thumbs") == 0; }, absl::Minutes(2)));
  EXPECT_EQ(schema_.QInt("SELECT count(DISTINCT queue) FROM {schema}.sessions"), 3)
      << "a session for the queue on the command line and each in the file";
  ASSERT_NO_FATAL_FAILURE(StopCleanly(w));
  ExpectExactlyOnce("mail_effects", 700);
  ExpectExactlyOnce("thumb_effects", 900);
  EXPECT_LE(schema_.QInt("SELECT max(n) FROM (SELECT count(*) AS n FROM {schema}.thumb_effects "
                         "GROUP BY session_id, acked_at) b"),
            7)
      << "thumbs ran with the file's batch";
}

TEST_F(ConsumerTest, SessionThatLostItsPartCannotAckAndNewOwnerProcessesOnce) {
  CreateQueue("q", 1, absl::Seconds(30));
  EnqueueN("q", 20);
  auto a = schema_.NewStore();
  auto b = schema_.NewStore();
  auto ja = a->Join({"q", "", "h", 1});
  ASSERT_TRUE(ja.ok());
  auto pa = a->AcquireParts("q", ja->id, {0});
  ASSERT_TRUE(pa.ok() && pa->size() == 1);
  ClaimRequest cr;
  cr.queue = "q";
  cr.session = ja->id;
  cr.parts = {ClaimPart{0, (*pa)[0].epoch, std::nullopt, 20}};
  auto claimed = a->Claim(cr);
  ASSERT_TRUE(claimed.ok());
  ASSERT_EQ(claimed->size(), 20u);

  // A's session expires mid-batch (deleted as another member would); B takes
  // the part over.
  schema_.Q("DELETE FROM {schema}.sessions WHERE id = '" + ja->id.value + "'");
  auto jb = b->Join({"q", "", "h", 2});
  ASSERT_TRUE(jb.ok());
  auto pb = b->AcquireParts("q", jb->id, {0});
  ASSERT_TRUE(pb.ok() && pb->size() == 1);

  FinishRequest fr;
  fr.queue = "q";
  fr.session = ja->id;
  fr.parts = *pa;
  fr.items = *claimed;
  bool ran = false;  // in the run that committed
  auto fa = a->Finish(
      fr, [&](Tx& tx, absl::Span<const Item> owned) -> absl::StatusOr<std::vector<Outcome>> {
        ran = !owned.empty();
        std::vector<Outcome> out;
        for (const auto& i : owned) out.push_back({i.id, i.part});
        return out;
      });
  ASSERT_TRUE(fa.ok()) << fa.status();
  EXPECT_TRUE(fa->acked.empty());
  EXPECT_EQ(fa->fenced.size(), 20u);
  EXPECT_FALSE(ran) << "A's committed run had items of a part it no longer owns";
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE abandoned_epoch IS NOT NULL "
                         "AND attempts = 1"),
            20)
      << "B's acquisition found A's claim record";

  // B processes each of them exactly once (as suspects: one at a time).
  auto handler = ParseHandlerSpec("record:effects");
  ASSERT_TRUE(handler.ok());
  Consumer consumer(schema_.Factory(), Options("q"), handler->get());
  ASSERT_TRUE(b->Leave("q", jb->id, jb->incarnation).ok());
  ASSERT_TRUE(consumer.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }));
  consumer.Stop();
  ExpectExactlyOnce("effects", 20);
}

// The same consumer loses its part mid-batch and takes it back at a new
// epoch (its session expired under load and it joined again): the new
// tenure's first read and suspect probe pass over the batch's items, which
// are still in flight; the batch's Finish is then fenced. Those items (marked
// abandoned by the takeover) must still run, at once: a consumer that listens
// reads its parts from their heads only when told, and once left them
// unclaimed for good (HandlerFault.ExecWorkersAndTheirChildrenSigkilledMidBatch,
// 10 of 3,000 for 3 minutes; ClaimScheduler::Release).
TEST_F(ConsumerTest, ABatchFencedAfterItsPartCameBackToTheSameConsumerRunsAgainAtOnce) {
  CreateQueue("q", 1, absl::Seconds(2));
  EnqueueN("q", 10);
  schema_.Q("CREATE TABLE {schema}.writes (item_id bigint)");
  absl::Notification entered, go_on;
  std::atomic<int> calls{0};
  std::unique_ptr<Handler> handler = MakeHandler([&](HandlerCall& call) -> absl::Status {
    if (calls.fetch_add(1) == 0) {  // the first batch's first item waits
      entered.Notify();
      go_on.WaitForNotification();
    }
    auto r = call.tx->Exec("INSERT INTO \"" + call.tx->schema() + "\".writes VALUES ($1)",
                           {std::to_string(call.item->id)});
    return r.status();
  });
  ConsumerOptions o = Options("q");
  o.concurrency = 1;
  o.batch = 10;
  o.poll_interval = absl::Seconds(30);  // only notices and its own bookkeeping wake it
  Consumer c(schema_.Factory(), o, handler.get());
  // A failed ASSERT below must not leave the handler waiting: Stop joins it.
  auto release = absl::MakeCleanup([&] {
    if (!go_on.HasBeenNotified()) go_on.Notify();
  });
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(entered.WaitForNotificationWithTimeout(absl::Seconds(10)));
  const int64_t epoch = schema_.QInt("SELECT epoch FROM {schema}.session_parts WHERE part = 0");
  // Expired, as another member's heartbeat would delete it: the consumer
  // joins again and takes part 0 back at a new epoch.
  schema_.Q("DELETE FROM {schema}.sessions");
  ASSERT_TRUE(WaitUntil(
      [&] {
        return schema_.QInt(
                   "SELECT coalesce(max(epoch), 0) FROM {schema}.session_parts "
                   "WHERE part = 0") > epoch;
      },
      absl::Seconds(15)))
      << "the consumer did not take its part back";
  // Its first read of the new tenure (it skips the running batch): no sign
  // of it to wait for, so a pause; released before that read, the batch
  // would not be skipped, and the test would not exercise the fixes.
  absl::SleepFor(absl::Milliseconds(500));
  go_on.Notify();
  EXPECT_TRUE(WaitUntil([&] { return Left("q") == 0; }, absl::Seconds(10)))
      << Left("q") << " items left unclaimed";
  c.Stop();
  EXPECT_GE(c.stats().fenced, 10);  // (another lapse under load may fence a suspect's ack too)
  ExpectExactlyOnce("writes", 10);
}

// A drain goes on from each part's cursor: the part's head (where the items
// acked a moment ago still sit in the index) is read again only when the part
// is assigned, on a notice or a poll, and once per rescan_interval; and the
// acks claim the next batch ahead, so the claimer's own queries are few.
TEST_F(ConsumerTest, ADrainReadsOnFromTheCursorAndClaimsAheadInTheAck) {
  CreateQueue("q", 4);
  bench::Tracker tracker;
  tracker.CountClaimParts();
  ConsumerOptions o = Options("q");
  o.batch = 20;
  o.concurrency = 1;
  auto handler = ParseHandlerSpec("record:effects");
  ASSERT_TRUE(handler.ok());
  Consumer c(bench::TrackingFactory(schema_.Factory(), &tracker), o, handler->get());
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(c.session().WaitStable(absl::Seconds(10)));
  const auto before = tracker.calls();
  const absl::Time t0 = absl::Now();
  EnqueueN("q", 6000);
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }, absl::Minutes(2)));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  c.Stop();
  ExpectExactlyOnce("effects", 6000);
  auto calls = tracker.calls();
  for (auto& [k, v] : calls) v -= before.count(k) ? before.at(k) : 0;
  const int64_t claims = calls["claim"] + calls["claim_ahead"];
  EXPECT_GE(claims, 6000 / 20) << "batches of 20";
  EXPECT_GE(calls["claim_ahead"], claims * 9 / 10)
      << calls["claim"] << " claims of their own, " << calls["claim_ahead"] << " ahead";
  // Reads from the head: each part once for the enqueue's notice, once per
  // second (rescan_interval), and a few for the polls and the drain's end.
  EXPECT_LE(calls["claim_lead_head"], 4 * (static_cast<int64_t>(seconds) + 4))
      << claims << " claims in " << seconds << " s, " << calls["claim"] << " claims of their own";
  EXPECT_GE(calls["claim_part"], claims) << "every claim lists the parts it may read";
}

// An item that sorts before a part's cursor (a higher priority, enqueued
// while the part drains) is not left for later: its notice sends the next
// claim of that part to the head.
TEST_F(ConsumerTest, AHigherPriorityItemEnqueuedMidDrainIsTakenAtOnce) {
  CreateQueue("q", 1);
  ConsumerOptions o = Options("q");
  o.batch = 10;
  o.concurrency = 1;
  auto handler = ParseHandlerSpec("record:effects");
  ASSERT_TRUE(handler.ok());
  Consumer c(schema_.Factory(), o, handler->get());
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(c.session().WaitStable(absl::Seconds(10)));
  EnqueueN("q", 5000);
  ASSERT_TRUE(WaitUntil([&] { return Left("q") < 4500; }));
  Producer p(schema_.NewStore());
  NewItem urgent;
  urgent.payload = "urgent";
  urgent.priority = -1;
  auto u = p.Enqueue("q", urgent);
  ASSERT_TRUE(u.ok()) << u.status();
  const int64_t left_then = Left("q");
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }, absl::Minutes(2)));
  c.Stop();
  ExpectExactlyOnce("effects", 5001);
  // Items acked after the urgent one: most of what was left when it came.
  const int64_t after = schema_.QInt(
      absl::StrCat("SELECT count(*) FROM {schema}.effects WHERE acked_at > (SELECT acked_at FROM "
                   "{schema}.effects WHERE item_id = ",
                   u->id, ")"));
  EXPECT_GT(after, left_then / 2) << "the urgent item waited behind the backlog";
}

TEST_F(ConsumerTest, RolledBackTransactionalEnqueueLeavesNothing) {
  CreateQueue("q", 4);
  pqxx::connection c(schema_.dsn());
  {
    pqxx::work tx(c);
    NewItem item;
    item.payload = "never";
    ASSERT_TRUE(EnqueueInTx(tx, schema_.options(), "q", item).ok());
    tx.abort();
  }
  EXPECT_EQ(Left("q"), 0);
  {
    pqxx::work tx(c);
    NewItem item;
    item.payload = "once";
    auto r = EnqueueInTx(tx, schema_.options(), "q", item);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(Left("q"), 0) << "visible before commit";
    tx.commit();
  }
  EXPECT_EQ(Left("q"), 1);
}

TEST_F(ConsumerTest, DedupKeyReturnsLiveItemAndIsFreeAfterDone) {
  CreateQueue("q", 4);
  Producer p(schema_.NewStore());
  NewItem item;
  item.payload = "x";
  item.dedup_key = "order-1";
  auto first = p.Enqueue("q", item);
  auto again = p.Enqueue("q", item);
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_FALSE(first->duplicate);
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(first->id, again->id);

  auto handler = MakeHandler([](HandlerCall& call) {
    call.result = "result-of-" + call.item->payload;
    return absl::OkStatus();
  });
  Consumer c(schema_.Factory(), Options("q"), handler.get());
  ASSERT_TRUE(c.Start().ok());
  auto done = p.WaitByDedupKey("q", "order-1", absl::Seconds(30));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->kind, ItemState::Kind::kDone);
  EXPECT_EQ(done->result.value_or(""), "result-of-x");
  auto byid = p.Wait("q", first->id, absl::Seconds(5));
  ASSERT_TRUE(byid.ok());
  EXPECT_EQ(byid->result.value_or(""), "result-of-x");
  c.Stop();
  auto third = p.Enqueue("q", item);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->duplicate);
  EXPECT_NE(third->id, first->id);
}

// A caller picks its dedup key before it enqueues, so a wait by the key may
// begin first: it waits for the item to appear, and says there is no such
// item only when none came within its timeout.
TEST_F(ConsumerTest, AWaitByDedupKeyThatBeginsBeforeTheEnqueueWaitsForIt) {
  CreateQueue("q", 2);
  Producer p(schema_.NewStore());
  absl::StatusOr<ItemState> never = p.WaitByDedupKey("q", "never", absl::Milliseconds(300));
  EXPECT_EQ(never.status().code(), absl::StatusCode::kNotFound) << never.status();
  EXPECT_TRUE(absl::StrContains(never.status().message(), "none was there within 300ms"))
      << never.status();
  auto handler = MakeHandler([](HandlerCall& call) {
    call.result = "done " + call.item->payload;
    return absl::OkStatus();
  });
  Consumer c(schema_.Factory(), Options("q"), handler.get());
  ASSERT_TRUE(c.Start().ok());
  std::thread later([&] {
    absl::SleepFor(absl::Milliseconds(500));
    Producer q(schema_.NewStore());
    NewItem item;
    item.payload = "late";
    item.dedup_key = "late-1";
    EXPECT_TRUE(q.Enqueue("q", item).ok());
  });
  absl::StatusOr<ItemState> done = p.WaitByDedupKey("q", "late-1", absl::Seconds(30));
  later.join();
  c.Stop();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->kind, ItemState::Kind::kDone);
  EXPECT_EQ(done->result.value_or(""), "done late");
}

TEST_F(ConsumerTest, PrioritiesFirstAndDelayedItemsWait) {
  CreateQueue("q", 1);
  Producer p(schema_.NewStore());
  NewItem late;
  late.payload = "delayed";
  late.delay = absl::Seconds(5);
  ASSERT_TRUE(p.Enqueue("q", late).ok());
  for (int prio : {5, 1, 3, -2, 1}) {
    NewItem it;
    it.payload = absl::StrCat("prio", prio);
    it.priority = prio;
    ASSERT_TRUE(p.Enqueue("q", it).ok());
  }
  absl::Mutex mu;
  std::vector<std::pair<std::string, absl::Time>> seen;
  auto handler = MakeHandler([&](HandlerCall& call) {
    absl::MutexLock l(&mu);
    seen.push_back({call.item->payload, absl::Now()});
    return absl::OkStatus();
  });
  ConsumerOptions o = Options("q");
  o.concurrency = 1;
  o.batch = 1;
  const absl::Time start = absl::Now();
  Consumer c(schema_.Factory(), o, handler.get());
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }));
  c.Stop();
  ASSERT_EQ(seen.size(), 6u);
  std::vector<std::string> order;
  for (auto& s : seen) order.push_back(s.first);
  EXPECT_EQ(order,
            (std::vector<std::string>{"prio-2", "prio1", "prio1", "prio3", "prio5", "delayed"}));
  EXPECT_GE(seen.back().second - start, absl::Milliseconds(4500)) << "delayed item ran early";
}

TEST_F(ConsumerTest, FailuresRetryWithBackoffThenDeadLetterWithTheError) {
  CreateQueue("q", 2, absl::Seconds(10), /*max_attempts=*/3);
  Producer p(schema_.NewStore());
  NewItem bad;
  bad.payload = "bad";
  auto id = p.Enqueue("q", bad);
  ASSERT_TRUE(id.ok());
  absl::Mutex mu;
  std::vector<absl::Time> tries;
  auto handler = MakeHandler([&](HandlerCall&) -> absl::Status {
    absl::MutexLock l(&mu);
    tries.push_back(absl::Now());
    return absl::InternalError("boom: downstream said no");
  });
  ConsumerOptions o = Options("q");
  o.backoff.base = absl::Milliseconds(200);
  o.backoff.max = absl::Seconds(5);
  o.backoff.jitter = 0;
  o.poll_interval = absl::Milliseconds(20);
  Consumer c(schema_.Factory(), o, handler.get());
  ASSERT_TRUE(c.Start().ok());
  auto st = p.Wait("q", id->id, absl::Seconds(30));
  c.Stop();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->kind, ItemState::Kind::kDead);
  EXPECT_NE(st->error.find("boom: downstream said no"), std::string::npos) << st->error;
  EXPECT_EQ(st->attempts, 3);
  ASSERT_EQ(tries.size(), 3u);
  // 200 ms after the first failure, 400 ms after the second.
  EXPECT_GE(tries[1] - tries[0], absl::Milliseconds(190));
  EXPECT_GE(tries[2] - tries[1], absl::Milliseconds(390));
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.dead_items WHERE last_error LIKE "
                         "'%downstream said no%'"),
            1);
}

// `partq status` rates (migration 17): the workers' heartbeats carry what
// they finished, so the queue's per-minute throughput adds up to the drain:
// every ack, every failed attempt that was retried, every dead-lettered item,
// counted once (not one more for the heartbeat that carries the last counts
// when a worker stops).
TEST_F(ConsumerTest, HeartbeatsCarryTheDrainIntoTheQueuesThroughputExactly) {
  constexpr int kOk = 600, kBad = 5;
  // TTL 1 s: the workers heartbeat every 333 ms.
  CreateQueue("q", 4, absl::Seconds(1), /*max_attempts=*/2);
  EnqueueN("q", kOk, "ok");
  EnqueueN("q", kBad, "bad");
  auto handler = MakeHandler([](HandlerCall& call) -> absl::Status {
    if (call.item->payload.rfind("bad", 0) == 0) return absl::InternalError("bad item");
    return absl::OkStatus();
  });
  auto finished = [&] {
    auto st = schema_.NewStore()->Status("q");
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? Total(st->throughput) : FinishCounts{};
  };
  const FinishCounts drained{kOk, kBad, kBad};  // each bad item: one retry, then dead
  std::vector<std::unique_ptr<Consumer>> consumers;
  for (int i = 0; i < 2; ++i) {
    consumers.push_back(std::make_unique<Consumer>(schema_.Factory(), Options("q"), handler.get()));
    ASSERT_TRUE(consumers.back()->Start().ok());
  }
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }));
  // While they run, their heartbeats bring the counts in.
  ASSERT_TRUE(
      WaitUntil([&] { return finished() == drained; }, absl::Seconds(60), absl::Milliseconds(50)))
      << finished().acked << " acked, " << finished().retried << " retried, " << finished().dead
      << " dead";
  // As the workers counted them, and the rates say the queue moved.
  FinishCounts counted;
  for (auto& c : consumers) {
    const ConsumerStats s = c->stats();
    counted = counted + FinishCounts{s.acked, s.retried, s.dead};
  }
  EXPECT_EQ(counted, drained);
  auto st = schema_.NewStore()->Status("q");
  ASSERT_TRUE(st.ok());
  EXPECT_GT(RecentRates(*st, DefaultHeartbeatInterval(absl::Seconds(1))).acked, 0);
  for (auto& c : consumers) c->Stop();
  EXPECT_EQ(finished(), drained) << "stopping reports nothing twice";

  // A worker that stops right after a drain sends its last counts before it
  // leaves: none wait for a heartbeat that would never come.
  CreateQueue("q2", 2, absl::Seconds(30));
  EnqueueN("q2", 100);
  ConsumerOptions o = Options("q2");
  o.heartbeat_interval = absl::Hours(1);
  Consumer c(schema_.Factory(), o, handler.get());
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return Left("q2") == 0; }));
  c.Stop();
  auto st2 = schema_.NewStore()->Status("q2");
  ASSERT_TRUE(st2.ok());
  EXPECT_EQ(Total(st2->throughput), (FinishCounts{100, 0, 0}));
}

TEST_F(ConsumerTest, FailedItemRollsBackOnlyItsOwnWrites) {
  CreateQueue("q", 1, absl::Seconds(10), /*max_attempts=*/1);
  EnqueueN("q", 10);
  auto handler = WritesThenFailsOn("p3");
  schema_.Q("CREATE TABLE {schema}.writes (item_id bigint)");
  ConsumerOptions o = Options("q");
  o.concurrency = 1;
  Consumer c(schema_.Factory(), o, handler.get());
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }));
  c.Stop();
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.writes"), 9);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.dead_items"), 1);
}

// Batch 1 (lone items run without a savepoint): a failing item's writes roll
// back with its transaction and its handler runs once per attempt, not
// twice; the other items' writes commit.
TEST_F(ConsumerTest, ALoneFailingItemRunsOncePerAttemptAndOnlyItsWritesRollBack) {
  CreateQueue("q", 1, absl::Seconds(10), /*max_attempts=*/2);
  EnqueueN("q", 6);
  schema_.Q("CREATE TABLE {schema}.writes (item_id bigint)");
  absl::Mutex mu;
  std::map<std::string, int> runs;
  auto handler = WritesThenFailsOn("p3", &mu, &runs);
  ConsumerOptions o = Options("q");
  o.concurrency = 1;
  o.batch = 1;
  o.backoff.base = absl::Milliseconds(10);
  o.backoff.jitter = 0;
  Consumer c(schema_.Factory(), o, handler.get());
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }));
  c.Stop();
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.writes"), 5);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.dead_items "
                         "WHERE attempts = 2 AND last_error LIKE '%p3 fails after writing%'"),
            1);
  absl::MutexLock l(&mu);
  EXPECT_EQ(runs["p3"], 2) << "once per attempt";
  for (const auto& [payload, n] : runs) {
    if (payload != "p3") EXPECT_EQ(n, 1) << payload;
  }
}

// A handler that writes a row per item and fails `failing`, alone or in a
// batch; in a batch of exactly `also_at` items it also fails `also` (a
// failure that depends on the company, so the isolating run's group fails).
// A batch of exactly `throw_at` items throws (it cannot say which failed).
// Records the size of every HandleBatch call and every item run alone.
class BlameHandler : public Handler {
 public:
  BlameHandler(std::string failing, std::string also = "", size_t also_at = 0, size_t throw_at = 0)
      : failing_(std::move(failing)),
        also_(std::move(also)),
        also_at_(also_at),
        throw_at_(throw_at) {}
  absl::Status Handle(HandlerCall& call) override {
    {
      absl::MutexLock l(&mu_);
      alone_.push_back(call.item->payload);
    }
    return Write(call, 1);
  }
  void HandleBatch(absl::Span<HandlerCall* const> calls,
                   std::vector<absl::Status>* statuses) override {
    {
      absl::MutexLock l(&mu_);
      batches_.push_back(calls.size());
    }
    if (calls.size() == throw_at_) throw std::runtime_error("no idea which");
    statuses->clear();
    for (HandlerCall* c : calls) statuses->push_back(Write(*c, calls.size()));
  }
  std::vector<size_t> batches() {
    absl::MutexLock l(&mu_);
    return batches_;
  }
  std::vector<std::string> alone() {
    absl::MutexLock l(&mu_);
    return alone_;
  }

 private:
  absl::Status Write(HandlerCall& call, size_t company) {
    auto r = call.tx->Exec("INSERT INTO \"" + call.tx->schema() + "\".writes (item_id) VALUES ($1)",
                           {std::to_string(call.item->id)});
    if (!r.ok()) return r.status();
    if (call.item->payload == failing_ || (company == also_at_ && call.item->payload == also_)) {
      return absl::InternalError(call.item->payload + " fails after writing");
    }
    return absl::OkStatus();
  }
  const std::string failing_, also_;
  const size_t also_at_, throw_at_;
  absl::Mutex mu_;
  std::vector<size_t> batches_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> alone_ ABSL_GUARDED_BY(mu_);
};

// One item of a batch fails: the isolating run takes the other nine together
// under one savepoint and only the blamed one alone, instead of ten alone.
TEST_F(ConsumerTest, ABatchWithOneFailingItemRerunsTheOthersTogether) {
  BlameHandler handler("p3");
  RunItemsWhereP3Fails(handler);
  EXPECT_EQ(handler.batches(), (std::vector<size_t>{10, 9}));
  EXPECT_EQ(handler.alone(), (std::vector<std::string>{"p3"}));
}

// The group of items the batch attempt did not blame fails again, blaming
// another item: nothing of the failed round commits, the blamed item runs
// alone and succeeds, and only the item that fails on its own is dead.
// Whether the group tries a third round depends on timing (GroupRoundPays:
// a rerun just failed); either way the outcome is the same.
TEST_F(ConsumerTest, AnIsolatingGroupThatFailsAgainShedsTheItemsItBlames) {
  BlameHandler handler("p3", "p5", /*also_at=*/9);
  RunItemsWhereP3Fails(handler);
  const std::vector<size_t> batches = handler.batches();
  const std::vector<std::string> alone = handler.alone();
  if (batches.size() == 3) {
    EXPECT_EQ(batches, (std::vector<size_t>{10, 9, 8}));
    EXPECT_EQ(alone, (std::vector<std::string>{"p3", "p5"}));
  } else {
    EXPECT_EQ(batches, (std::vector<size_t>{10, 9}));
    EXPECT_EQ(alone.size(), 10u);
  }
}

// A group that cannot say which item failed (it threw) is rolled back and
// every item of it runs alone.
TEST_F(ConsumerTest, AnIsolatingGroupThatCannotSayWhichFailedRunsItsItemsAlone) {
  BlameHandler handler("p3", "", 0, /*throw_at=*/9);
  RunItemsWhereP3Fails(handler);
  EXPECT_EQ(handler.batches(), (std::vector<size_t>{10, 9}));
  EXPECT_EQ(handler.alone().size(), 10u);  // p3 and the nine of the group
}

// A batch of 100 whose handler throws (it cannot say which item failed):
// every item runs alone, and a transaction keeps at most 48 of them (each
// keeps a subtransaction until the commit, and PostgreSQL tracks 64 per
// session before other sessions' visibility checks slow down); the rest go
// in the next transactions, at once, as the same batch. Nothing is lost or
// run twice; only p3, which fails alone, is dead.
TEST_F(ConsumerTest, AnIsolatingRunOfManyItemsCommitsAtMost48PerTransaction) {
  BlameHandler handler("p3", "", 0, /*throw_at=*/100);
  RunItemsWhereP3Fails(handler, 100);
  EXPECT_EQ(schema_.QInt("SELECT count(DISTINCT tx) FROM {schema}.writes"), 3);
  EXPECT_EQ(schema_.QInt("SELECT max(n) FROM (SELECT count(*) AS n FROM {schema}.writes "
                         "GROUP BY tx) t"),
            48);  // p0..p48 but p3, p49..p96, p97..p99
  std::vector<std::string> alone;
  for (int i = 0; i < 100; ++i) alone.push_back(absl::StrCat("p", i));
  EXPECT_EQ(handler.alone(), alone);
  EXPECT_EQ(handler.batches(), std::vector<size_t>{100});
}

// The connection drops in the second transaction of an isolating run (after
// the first committed 48 items and p3's failure): the retry runs only the
// items that had not committed (p49..p99; p49..p60 ran in the lost
// transaction too), and what committed is counted once, not as fenced.
TEST_F(ConsumerTest, AnIsolatingRunThatLosesItsConnectionRetriesOnlyWhatDidNotCommit) {
  absl::Mutex mu;
  std::map<std::string, int> runs;
  bool killed = false;
  class Handler100 : public Handler {
   public:
    explicit Handler100(std::function<absl::Status(HandlerCall&)> f) : f_(std::move(f)) {}
    absl::Status Handle(HandlerCall& call) override { return f_(call); }
    void HandleBatch(absl::Span<HandlerCall* const>, std::vector<absl::Status>*) override {
      throw std::runtime_error("no idea which");  // every item runs alone
    }

   private:
    std::function<absl::Status(HandlerCall&)> f_;
  } handler([&](HandlerCall& call) -> absl::Status {
    {
      absl::MutexLock l(&mu);
      ++runs[call.item->payload];
      if (call.item->payload == "p60" && !killed) {
        killed = true;
        auto r = call.tx->Exec("SELECT pg_terminate_backend(pg_backend_pid())", {});
        return r.ok() ? absl::InternalError("still connected") : r.status();
      }
    }
    auto r = call.tx->Exec("INSERT INTO \"" + call.tx->schema() + "\".writes (item_id) VALUES ($1)",
                           {std::to_string(call.item->id)});
    if (!r.ok()) return r.status();
    if (call.item->payload == "p3") return absl::InternalError("p3 fails after writing");
    return absl::OkStatus();
  });
  CreateQueue("q", 1, absl::Seconds(10), /*max_attempts=*/1);
  EnqueueN("q", 100);
  schema_.Q("CREATE TABLE {schema}.writes (item_id bigint)");
  ConsumerOptions o = Options("q");
  o.concurrency = 1;
  o.batch = 100;
  o.retry_backoff = absl::Milliseconds(50);
  Consumer c(schema_.Factory(), o, &handler);
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }));
  c.Stop();
  ExpectExactlyOnce("writes", 99);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.dead_items"), 1);
  const ConsumerStats st = c.stats();
  EXPECT_EQ(st.acked, 99);
  EXPECT_EQ(st.dead, 1);
  EXPECT_EQ(st.fenced, 0);
  EXPECT_EQ(st.finish_errors, 1);
  absl::MutexLock l(&mu);
  for (int i = 0; i < 100; ++i) {
    const std::string p = absl::StrCat("p", i);
    EXPECT_EQ(runs[p], i >= 49 && i <= 60 ? 2 : 1) << p;
  }
}

// Polls are due by the clock: enqueue notices for one part, arriving faster
// than the poll interval, must not keep a retry in another, quiet part
// waiting (it comes due without a notice).
TEST_F(ConsumerTest, ARetryInAQuietPartIsTakenWhileAnotherPartKeepsGettingNotices) {
  CreateQueue("q", 2);
  std::string key_of[2];
  for (int k = 0; key_of[0].empty() || key_of[1].empty(); ++k) {
    const std::string key = absl::StrCat("k", k);
    if (key_of[PartForKey(key, 2)].empty()) key_of[PartForKey(key, 2)] = key;
  }
  std::atomic<int> flaky_runs{0};
  auto handler = MakeHandler([&](HandlerCall& call) -> absl::Status {
    if (call.item->payload == "flaky" && flaky_runs++ == 0) return absl::InternalError("once");
    return absl::OkStatus();
  });
  ConsumerOptions o = Options("q");
  o.poll_interval = absl::Milliseconds(300);
  o.backoff.base = absl::Milliseconds(50);
  o.backoff.jitter = 0;
  Consumer c(schema_.Factory(), o, handler.get());
  ASSERT_TRUE(c.Start().ok());
  std::atomic<bool> stop{false};
  std::thread chatter([&] {  // part 0 gets an item (and a notice) every 50 ms
    Producer q(schema_.NewStore());
    const absl::Time until = absl::Now() + absl::Seconds(30);
    while (!stop && absl::Now() < until) {
      EXPECT_TRUE(q.Enqueue("q", NewItem{"chatter", key_of[0]}).ok());
      absl::SleepFor(absl::Milliseconds(50));
    }
  });
  // Let the chatter flow (and the consumer's LISTEN be up) first.
  ASSERT_TRUE(WaitUntil([&] { return c.stats().acked >= 10; }));
  Producer p(schema_.NewStore());
  const absl::Time start = absl::Now();
  auto flaky_id = p.Enqueue("q", NewItem{"flaky", key_of[1]});
  ASSERT_TRUE(flaky_id.ok()) << flaky_id.status();
  auto st = p.Wait("q", flaky_id->id, absl::Seconds(25));
  const absl::Duration took = absl::Now() - start;
  stop = true;
  chatter.join();
  c.Stop();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->kind, ItemState::Kind::kDone);
  EXPECT_EQ(flaky_runs.load(), 2);
  // Due 50 ms after its failure, found by the next poll (300 ms): well under
  // the 30 s the chatter would otherwise hold it back.
  EXPECT_LT(took, absl::Seconds(5));
}

// An item whose transaction commits after the consumer has read past its id
// (ids come from a sequence, commits in any order) is behind the cursor; its
// notice carries its key, and the consumer reads from just before it at once
// (the poll is ten minutes away and reads no head). Then a long run of
// producers racing each other: every item acked, none left behind.
TEST_F(ConsumerTest, ALateCommitBehindTheCursorIsTakenAtOnce) {
  CreateQueue("q", 1);
  auto handler = ParseHandlerSpec("record:effects");
  ASSERT_TRUE(handler.ok());
  ConsumerOptions o = Options("q");
  o.poll_interval = absl::Minutes(10);
  Consumer c(schema_.Factory(), o, handler->get());
  ASSERT_TRUE(c.Start().ok());
  Producer p(schema_.NewStore());
  ASSERT_TRUE(p.Enqueue("q", NewItem{"first"}).ok());
  ASSERT_TRUE(WaitUntil([&] { return c.stats().acked == 1; }));
  pqxx::connection late(schema_.dsn());
  pqxx::work tx(late);
  const int64_t late_id =
      tx.exec1(WithSchema("SELECT {schema}.enqueue('q', 'late')", schema_.name()))[0].as<int64_t>();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(p.Enqueue("q", NewItem{"after"}).ok());
  ASSERT_TRUE(WaitUntil([&] { return c.stats().acked == 6; }));  // past the late id
  tx.commit();
  const absl::Time committed = absl::Now();
  auto st = p.Wait("q", late_id, absl::Seconds(20));
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->kind, ItemState::Kind::kDone);
  EXPECT_LT(absl::Now() - committed, absl::Seconds(5));

  std::vector<std::thread> producers;
  for (int t = 0; t < 4; ++t) {
    producers.emplace_back([&] {
      Producer q(schema_.NewStore());
      for (int b = 0; b < 200; ++b) {
        std::vector<NewItem> batch(20, NewItem{"racing"});
        EXPECT_TRUE(q.EnqueueBatch("q", batch).ok());
        absl::SleepFor(absl::Milliseconds(2));  // a pace the consumer keeps up with
      }
    });
  }
  for (auto& t : producers) t.join();
  EXPECT_TRUE(WaitUntil([&] { return Left("q") == 0; }, absl::Seconds(20)))
      << Left("q") << " items left behind";
  c.Stop();
  ExpectExactlyOnce("effects", 7 + 4 * 200 * 20);
}

// In an ordered queue a key's next item becomes claimable when the previous
// one is acked, without any notice; the consumer reads the part's head at
// once, not at the next poll.
TEST_F(ConsumerTest, AnOrderedKeysNextItemIsTakenAtOnceNotAtTheNextPoll) {
  CreateQueue("q", 1, absl::Seconds(10), 25, /*ordered=*/true);
  Producer p(schema_.NewStore());
  int64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    auto r = p.Enqueue("q", NewItem{absl::StrCat("v", i), std::string("key")});
    ASSERT_TRUE(r.ok()) << r.status();
    last = r->id;
  }
  auto handler = MakeHandler([](HandlerCall&) { return absl::OkStatus(); });
  ConsumerOptions o = Options("q");
  o.poll_interval = absl::Seconds(10);
  Consumer c(schema_.Factory(), o, handler.get());
  const absl::Time start = absl::Now();
  ASSERT_TRUE(c.Start().ok());
  auto st = p.Wait("q", last, absl::Seconds(60));
  const absl::Duration took = absl::Now() - start;
  c.Stop();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->kind, ItemState::Kind::kDone);
  EXPECT_LT(took, absl::Seconds(5)) << "five items one after another, not a poll (10 s) each";
}

TEST_F(ConsumerTest, OrderedQueueAcksEachKeyInEnqueueOrderDespiteFailures) {
  CreateQueue("q", 4, absl::Seconds(10), 100, /*ordered=*/true);
  std::vector<NewItem> items;
  for (int i = 0; i < 600; ++i) {
    NewItem it;
    it.key = absl::StrCat("k", i % 6);
    it.payload = absl::StrCat(i);
    items.push_back(it);
  }
  ASSERT_TRUE(schema_.NewStore()->EnqueueBatch("q", items).ok());
  auto handler = ParseHandlerSpec("fail:0.2,record:effects");
  ASSERT_TRUE(handler.ok());
  std::vector<std::unique_ptr<Consumer>> cs;
  for (int i = 0; i < 2; ++i) {
    ConsumerOptions o = Options("q");
    o.concurrency = 3;
    o.backoff.base = absl::Milliseconds(1);
    o.backoff.max = absl::Milliseconds(5);
    o.poll_interval = absl::Milliseconds(10);
    cs.push_back(std::make_unique<Consumer>(schema_.Factory(), o, handler->get()));
    ASSERT_TRUE(cs.back()->Start().ok());
  }
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }, absl::Minutes(2)));
  for (auto& c : cs) c->Stop();
  ExpectExactlyOnce("effects", 600);
  // Within each key, commit order (acked_at is the ack transaction's start,
  // and the next item of a key is claimed only after the previous committed)
  // follows enqueue order.
  EXPECT_EQ(schema_.QInt(R"(
      SELECT count(*) FROM (
        SELECT e.item_id, lag(e.item_id) OVER (PARTITION BY k ORDER BY e.acked_at, e.item_id) AS prev
        FROM {schema}.effects e
        JOIN (SELECT item_id, 'k' || ((item_id - (SELECT min(item_id) FROM {schema}.effects)) % 6) AS k
              FROM {schema}.effects) ks USING (item_id)) x
      WHERE prev > item_id)"),
            0);
}

// Fair share by key: one key's backlog, enqueued first, does not hold back
// the keys enqueued after it. Counted as the handler runs (no times): when
// the last item of the small keys runs, most of the big key's are still
// waiting; without fair share none of theirs would run before the big
// key's in their part.
TEST_F(ConsumerTest, AFairQueueServesSmallKeysWhileABigKeysBacklogWaits) {
  QueueConfig q;
  q.name = "q";
  q.parts = 2;
  q.fair_by = FairBy::kKey;
  ASSERT_TRUE(schema_.NewStore()->CreateQueue(q).ok());
  constexpr int kBig = 4000, kKeys = 20, kEach = 20;
  std::vector<NewItem> items;
  for (int i = 0; i < kBig; ++i) items.push_back(NewItem{absl::StrCat("big", i), "big"});
  for (int i = 0; i < kKeys * kEach; ++i) {
    items.push_back(NewItem{absl::StrCat("small", i), absl::StrCat("k", i % kKeys)});
  }
  ASSERT_TRUE(schema_.NewStore()->EnqueueBatch("q", items).ok());
  schema_.Q("CREATE TABLE {schema}.writes (item_id bigint)");
  absl::Mutex mu;
  int big_run = 0, small_run = 0, big_when_small_done = -1;
  auto handler = MakeHandler([&](HandlerCall& call) -> absl::Status {
    auto r = call.tx->Exec("INSERT INTO \"" + call.tx->schema() + "\".writes VALUES ($1)",
                           {std::to_string(call.item->id)});
    if (!r.ok()) return r.status();
    absl::MutexLock l(&mu);
    if (call.item->key == std::optional<std::string>("big")) {
      ++big_run;
    } else if (++small_run == kKeys * kEach) {
      big_when_small_done = big_run;
    }
    return absl::OkStatus();
  });
  ConsumerOptions o = Options("q");
  o.batch = 20;
  Consumer c(schema_.Factory(), o, handler.get());
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }, absl::Minutes(2)));
  c.Stop();
  ExpectExactlyOnce("writes", kBig + kKeys * kEach);
  absl::MutexLock l(&mu);
  ASSERT_GE(big_when_small_done, 0);
  RecordProperty("big_items_run_when_the_small_keys_were_done", big_when_small_done);
  EXPECT_LT(big_when_small_done, kBig / 4)
      << "the small keys finished only after " << big_when_small_done << " of the big key's "
      << kBig << " items";
}

// Invariant I18: with key concurrency N, at most N items of a key run at
// once across the fleet. Three consumers (three workers each, small
// batches) drain six keys and keyless items; the handler counts, under a
// mutex, how many items of its key are running, and waits a little (at most
// 10 ms, or until another of its key runs) so items of a key get the chance
// to overlap; the assertion does not depend on how much they do.
TEST_F(ConsumerTest, KeyConcurrencyRunsAtMostNItemsOfAKeyAtOnceAcrossConsumers) {
  constexpr int kN = 2, kKeys = 6, kEach = 40, kKeyless = 60;
  QueueConfig q;
  q.name = "q";
  q.parts = 4;
  q.key_concurrency = kN;
  ASSERT_TRUE(schema_.NewStore()->CreateQueue(q).ok());
  std::vector<NewItem> items;
  for (int i = 0; i < kKeys * kEach; ++i) {
    items.push_back(NewItem{absl::StrCat("p", i), absl::StrCat("k", i % kKeys)});
  }
  for (int i = 0; i < kKeyless; ++i) items.push_back(NewItem{absl::StrCat("free", i)});
  ASSERT_TRUE(schema_.NewStore()->EnqueueBatch("q", items).ok());
  schema_.Q("CREATE TABLE {schema}.writes (item_id bigint)");
  absl::Mutex mu;
  std::map<std::string, int> running;
  int most = 0;  // the most items of one key seen running at once
  auto handler = MakeHandler([&](HandlerCall& call) -> absl::Status {
    const std::optional<std::string> key = call.item->key;
    if (key) {
      absl::MutexLock l(&mu);
      most = std::max(most, ++running[*key]);
      mu.AwaitWithTimeout(absl::Condition(
                              +[](int* n) { return *n >= kN; }, &running[*key]),
                          absl::Milliseconds(10));
    }
    auto r = call.tx->Exec("INSERT INTO \"" + call.tx->schema() + "\".writes VALUES ($1)",
                           {std::to_string(call.item->id)});
    if (key) {
      absl::MutexLock l(&mu);
      --running[*key];
    }
    return r.ok() ? absl::OkStatus() : r.status();
  });
  std::vector<std::unique_ptr<Consumer>> cs;
  for (int i = 0; i < 3; ++i) {
    ConsumerOptions o = Options("q");
    o.concurrency = 3;
    o.batch = 2;
    cs.push_back(std::make_unique<Consumer>(schema_.Factory(), o, handler.get()));
    ASSERT_TRUE(cs.back()->Start().ok());
  }
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }, absl::Minutes(2)));
  for (auto& c : cs) c->Stop();
  ExpectExactlyOnce("writes", kKeys * kEach + kKeyless);
  absl::MutexLock l(&mu);
  RecordProperty("most_items_of_a_key_at_once", most);
  EXPECT_GE(most, 1);
  EXPECT_LE(most, kN);
}

TEST_F(ConsumerTest, IdleWorkerPicksUpANewItemWithinMilliseconds) {
  CreateQueue("q", 8);
  Pickups picked;
  ConsumerOptions o = Options("q");
  o.poll_interval = absl::Seconds(30);  // only a NOTIFY can wake it in time
  Consumer c(schema_.Factory(), o, picked.handler());
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(c.session().WaitStable(absl::Seconds(10)));
  Producer p(schema_.NewStore());
  std::vector<absl::Duration> lat;
  for (int i = 0; i < 15; ++i) {
    absl::SleepFor(absl::Milliseconds(50));  // idle between items
    NewItem it;
    it.payload = absl::StrCat("i", i);
    lat.push_back(picked.After(p, "q", it));
  }
  c.Stop();
  std::sort(lat.begin(), lat.end());
  EXPECT_LT(lat[lat.size() / 2], absl::Milliseconds(50)) << "median pick-up latency";
}

// An idle worker with LISTEN makes no claims: it waits for a notice, or for
// its parts' first delayed item to come due (Store::NextDue), not for a poll
// every poll_interval (issue 47: 100 idle workers made 1.32 transactions a
// second each). A delayed item enqueued meanwhile runs when it comes due.
TEST_F(ConsumerTest, AnIdleWorkerMakesNoClaimsUntilANoticeOrADelayedItemComesDue) {
  CreateQueue("q", 4);
  Pickups picked;
  FaultInjector faults(Clock::Real());
  ConsumerOptions o = Options("q");
  o.poll_interval = absl::Milliseconds(100);
  o.idle_poll_interval = absl::Seconds(60);
  Consumer c(faults.Wrap(schema_.Factory()), o, picked.handler());
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(c.session().WaitStable(absl::Seconds(10)));
  ASSERT_TRUE(WaitUntil([&] { return c.session().listening(); }));
  absl::SleepFor(absl::Milliseconds(500));  // the first polls find nothing
  const int64_t claims = faults.Calls("Claim");
  absl::SleepFor(absl::Seconds(2));  // 20 poll intervals
  EXPECT_LE(faults.Calls("Claim") - claims, 1) << "an idle worker went on polling";
  // A delayed item: its notice's claim finds it not due; the worker polls
  // when it is, without claims in between.
  Producer p(schema_.NewStore());
  NewItem later;
  later.payload = "later";
  later.delay = absl::Seconds(2);
  const absl::Duration waited = picked.After(p, "q", later);
  EXPECT_GE(waited, absl::Seconds(2));
  EXPECT_LT(waited, absl::Seconds(4)) << "found only by a late poll";
  printf("a 2 s delay was picked up %s after its due time\n",
         absl::FormatDuration(waited - absl::Seconds(2)).c_str());
  EXPECT_LE(faults.Calls("Claim") - claims, 6) << "claims while the delayed item waited";
  // A plain item: its notice wakes the worker at once.
  NewItem now;
  now.payload = "now";
  EXPECT_LT(picked.After(p, "q", now), absl::Seconds(1));
  c.Stop();
}

TEST_F(ConsumerTest, SigtermDrainsAndLosesNothing) {
  CreateQueue("q", 8, absl::Seconds(30));
  EnqueueN("q", 3000);
  schema_.Q(
      "CREATE TABLE {schema}.effects (item_id bigint NOT NULL, session_id uuid NOT NULL, "
      "acked_at timestamptz NOT NULL DEFAULT now())");
  ChildProcess a(Worker("q", "sleep:1,record:effects", {"--batch", "20"}));
  ChildProcess b(Worker("q", "sleep:1,record:effects", {"--batch", "20"}));
  ASSERT_TRUE(WaitUntil([&] { return schema_.QInt("SELECT count(*) FROM {schema}.effects") > 300; },
                        absl::Minutes(1)));
  const absl::Time t0 = absl::Now();
  ASSERT_NO_FATAL_FAILURE(StopCleanly(a));
  // b owns every part at once (a handed over, no TTL wait).
  EXPECT_TRUE(WaitUntil(
      [&] {
        return schema_.QInt("SELECT count(DISTINCT session_id) FROM {schema}.session_parts") == 1 &&
               schema_.QInt("SELECT count(*) FROM {schema}.session_parts") == 8;
      },
      absl::Seconds(20)));
  // Well inside the 30 s TTL: the parts were handed over, not expired.
  EXPECT_LT(absl::Now() - t0, absl::Seconds(25));
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }, absl::Minutes(2)));
  ASSERT_NO_FATAL_FAILURE(StopCleanly(b));
  ExpectExactlyOnce("effects", 3000);
}

TEST_F(ConsumerTest, PoisonItemThatKillsWorkersIsDeadLetteredAndTheRestAreUnaffected) {
  CreateQueue("q", 2, absl::Seconds(2), /*max_attempts=*/3);
  EnqueueN("q", 500);
  ASSERT_TRUE(schema_.NewStore()->Enqueue("q", NewItem{"POISON"}).ok());
  EnqueueN("q", 500, "after");
  // A supervisor: restart the worker whenever it dies (like Kubernetes).
  int restarts = 0;
  const absl::Time deadline = absl::Now() + absl::Minutes(3);
  while (Left("q") > 0 && absl::Now() < deadline) {
    ChildProcess w(Worker("q", "crash:POISON,record:effects", {"--instance-id", "w1"}));
    while (w.Running() && Left("q") > 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    if (!w.Running()) ++restarts;
    w.Signal(SIGTERM);
    w.Wait(absl::Seconds(30));
  }
  EXPECT_EQ(Left("q"), 0);
  EXPECT_GE(restarts, 3);
  ExpectExactlyOnce("effects", 1000);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.dead_items WHERE payload = 'POISON' "
                         "AND last_error LIKE '%crash loop%'"),
            1);
  // "gave up after 3 attempts", and its dead row says 3: the claim that found
  // the crash loop did not run it.
  EXPECT_EQ(schema_.QInt("SELECT attempts FROM {schema}.dead_items WHERE payload = 'POISON'"), 3);
}

}  // namespace
}  // namespace partq
