// partq against a highly available PostgreSQL (ctest label `ha`, issue 29).
//
// Two PostgreSQL 15 nodes with synchronous replication, reached through the
// multi-host DSN docs/high-availability.md gives users. While three `partq
// worker` processes of two queues (issue 52: q, and k, which the bridge
// fills; a record handler each), a producer (`partq enqueue --stdin`,
// fed a steady stream of numbered lines) and `partq bridge ingest` (fed by
// librdkafka's mock cluster) run, the leader fails over: under Patroni by
// `patronictl switchover` and then by a SIGKILL of the leader's postgres;
// with no manager by a SIGKILL of the primary and `pg_ctl promote` of the
// standby. Checked for each failover: the workers and the bridge live on,
// the first ack on the new leader comes within 2 s of it accepting writes,
// and no part changes owner (the failover is shorter than the session TTL,
// so the sessions survive it). At the end: every enqueued item recorded
// exactly once, every line the producer reported enqueued is there (a chunk
// whose COMMIT broke is re-sent, and may then be there twice: it said so),
// every Kafka message in the queue exactly once, and each of them recorded by
// the workers exactly once.
//
// A failed test keeps its cluster's directory (servers' and processes' logs), and so does
// any run with PARTQ_HA_KEEP set; the first line the test prints names it.
//
// What was enqueued is logged by a trigger on partq's items table in the
// same transaction as the enqueue: ha_enqueued (id, queue, payload).
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/ha/ha_cluster.h"
#include "tests/kafka/kafka_env.h"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using testing::ChildProcess;
using testing::HaCluster;
using testing::ReadFile;

constexpr int kWorkers = 3;
constexpr int kParts = 16;
constexpr absl::Duration kSessionTtl = absl::Seconds(10);

// One statement on a fresh connection; its first value, or nullopt on any
// error (the cluster may be failing over).
std::optional<std::string> TryQuery(const std::string& dsn, const std::string& sql) {
  try {
    pqxx::connection c(
        dsn + (dsn.find('?') == std::string::npos ? " connect_timeout=2" : "&connect_timeout=2"));
    pqxx::work tx(c);
    pqxx::result r = tx.exec(sql);
    tx.commit();
    if (r.empty() || r[0][0].is_null()) return std::string();
    return r[0][0].c_str();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

int64_t ToInt(const std::optional<std::string>& s) {
  int64_t v = -1;
  if (!s || !absl::SimpleAtoi(*s, &v)) return -1;
  return v;
}

double ToDouble(const std::optional<std::string>& s) {
  double v = -1;
  if (!s || !absl::SimpleAtod(*s, &v)) return -1;
  return v;
}

// What one failover showed.
struct Failover {
  std::string name;
  double writable_after_s = -1;  // from the trigger to the first write the new leader took
  double first_ack_s = -1;       // from that write to the first ack on the new leader
  double pause_s = -1;           // the longest gap between two acks around the failover
  int64_t parts_moved = -1;
  int64_t sessions_before = -1, sessions_after = -1;
};

// The workload and its checks, on one cluster.
class HaRun {
 public:
  HaRun(HaCluster& cluster, testing::MockCluster& kafka) : c_(cluster), kafka_(kafka) {}
  ~HaRun() { Stop(); }

  void Start() {
    dsn_ = c_.Dsn();
    auto partq = [&](std::vector<std::string> args) {
      args.insert(args.end(), {"--dsn", dsn_});
      const testing::PartqResult r = testing::Partq(args);
      ASSERT_EQ(r.code, 0) << absl::StrJoin(args, " ") << ": " << r.err;
    };
    partq({"migrate"});
    partq({"queue", "create", "q", "--parts", absl::StrCat(kParts), "--session-ttl",
           absl::FormatDuration(kSessionTtl)});
    partq({"queue", "create", "k", "--parts", "4"});
    ASSERT_TRUE(TryQuery(dsn_, R"(
      CREATE TABLE public.ha_enqueued (id bigint, queue text, payload bytea);
      CREATE FUNCTION public.ha_log() RETURNS trigger LANGUAGE plpgsql AS
        $$BEGIN INSERT INTO public.ha_enqueued SELECT id, queue, payload FROM fresh;
                RETURN NULL; END$$;
      CREATE TRIGGER ha_log AFTER INSERT ON partq.items REFERENCING NEW TABLE AS fresh
        FOR EACH STATEMENT EXECUTE FUNCTION public.ha_log();
      CREATE TABLE public.ha_probe (at timestamptz DEFAULT clock_timestamp());)"))
        << "the enqueue log could not be made";
    kafka_.CreateTopic("events", 4);

    for (int i = 0; i < kWorkers; ++i) {
      workers_.push_back(std::make_unique<ChildProcess>(
          // Workers of two queues (issue 52): q, and k, which the bridge fills.
          std::vector<std::string>{testing::PartqBinary(), "worker", "q", "--handler",
                                   "record:effects", "--concurrency", "2", "--dsn", dsn_,
                                   "--drain-timeout", "10s", "--queue",
                                   "k:concurrency=1,handler=record:k_effects"},
          std::map<std::string, std::string>{}, Log(absl::StrCat("worker-", i))));
    }
    bridge_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{testing::PartqBinary(), "bridge", "ingest", "--brokers",
                                 kafka_.bootstraps(), "--topic", "events", "--queue", "k", "--dsn",
                                 dsn_},
        std::map<std::string, std::string>{}, Log("bridge"));
    feeder_ = std::thread([this] { FeedKafka(); });
    producer_ = std::thread([this] { Produce(); });
  }

  // Waits for `n` more acks than now.
  void WaitAcks(int64_t n) {
    const int64_t from = std::max<int64_t>(0, Acks());
    EXPECT_TRUE(testing::WaitUntil([&] { return Acks() >= from + n; }, absl::Seconds(60),
                                   absl::Milliseconds(100)))
        << "no " << n << " acks within 60 s (from " << from << ", now " << Acks() << ")";
  }

  // Fails the leader over with `act` (which returns the port of the node
  // that takes over) and measures it.
  Failover FailOver(const std::string& name, const std::function<absl::StatusOr<int>()>& act) {
    Failover f;
    f.name = name;
    WaitAcks(1000);
    const std::string owners_before = Owners();
    f.sessions_before = ToInt(TryQuery(dsn_,
                                       "SELECT count(*) FROM partq.sessions "
                                       "WHERE queue = 'q' AND expires_at > now()"));
    const std::optional<std::string> trigger_at = TryQuery(dsn_, "SELECT clock_timestamp()");
    const absl::Time t0 = absl::Now();
    absl::StatusOr<int> next = act();
    EXPECT_TRUE(next.ok()) << name << ": " << next.status();
    if (!next.ok()) return f;
    // The first write the new leader takes.
    std::optional<std::string> accepted;
    testing::WaitUntil(
        [&] {
          accepted = TryQuery(c_.NodeDsn(*next),
                              "INSERT INTO public.ha_probe DEFAULT VALUES RETURNING at");
          return accepted.has_value();
        },
        absl::Seconds(90), absl::Milliseconds(20));
    EXPECT_TRUE(accepted.has_value()) << name << ": the new leader took no write in 90 s";
    if (!accepted || !trigger_at) return f;
    f.writable_after_s = absl::ToDoubleSeconds(absl::Now() - t0);
    const std::string at = *accepted;
    const std::string first_ack_sql =
        absl::StrCat("SELECT extract(epoch FROM min(acked_at) - '", at,
                     "'::timestamptz) FROM partq.effects WHERE acked_at >= '", at, "'");
    testing::WaitUntil(
        [&] { return !TryQuery(c_.NodeDsn(*next), first_ack_sql).value_or("").empty(); },
        absl::Seconds(30), absl::Milliseconds(50));
    f.first_ack_s = ToDouble(TryQuery(c_.NodeDsn(*next), first_ack_sql));
    // Sessions that missed heartbeats during the failover would expire one
    // TTL after their last; their parts would move by then.
    absl::SleepFor(
        std::max(absl::ZeroDuration(), t0 + kSessionTtl + absl::Seconds(2) - absl::Now()));
    f.pause_s = ToDouble(TryQuery(
        dsn_, absl::StrCat("SELECT extract(epoch FROM max(gap)) FROM (SELECT acked_at - "
                           "lag(acked_at) OVER (ORDER BY acked_at) AS gap FROM partq.effects "
                           "WHERE acked_at BETWEEN '",
                           *trigger_at, "'::timestamptz - interval '1 s' AND '", at,
                           "'::timestamptz + interval '5 s') g")));
    const std::string owners_after = Owners();
    f.parts_moved = 0;
    for (int p = 0; p < kParts; ++p) {
      if (Field(owners_before, p) != Field(owners_after, p)) ++f.parts_moved;
    }
    f.sessions_after = ToInt(TryQuery(dsn_,
                                      "SELECT count(*) FROM partq.sessions "
                                      "WHERE queue = 'q' AND expires_at > now()"));
    for (int i = 0; i < kWorkers; ++i) {
      EXPECT_TRUE(workers_[i]->Running()) << name << ": worker " << i << " exited; its log:\n"
                                          << ReadFile(Log(absl::StrCat("worker-", i)));
    }
    EXPECT_TRUE(bridge_->Running()) << name << ": the bridge exited; its log:\n"
                                    << ReadFile(Log("bridge"));
    printf(
        "ha: %s: writable %.2f s after the trigger, first ack %.3f s after that, longest "
        "pause between acks %.2f s, parts moved %lld of %d, live sessions %lld -> %lld\n",
        name.c_str(), f.writable_after_s, f.first_ack_s, f.pause_s,
        static_cast<long long>(f.parts_moved), kParts, static_cast<long long>(f.sessions_before),
        static_cast<long long>(f.sessions_after));
    fflush(stdout);
    EXPECT_GE(f.first_ack_s, 0) << name;
    EXPECT_LE(f.first_ack_s, 2.0) << name << ": the first ack came too late after the new leader "
                                  << "took writes";
    EXPECT_EQ(f.parts_moved, 0) << name << ": owners before\n"
                                << owners_before << "after\n"
                                << owners_after;
    EXPECT_EQ(f.sessions_after, kWorkers) << name;
    return f;
  }

  // Stops the producers, lets the fleet drain, stops it and checks.
  void StopAndCheck() {
    Stop();
    // Drained: every Kafka message in k, and q and k empty.
    const bool drained = testing::WaitUntil(
        [&] {
          return ToInt(TryQuery(dsn_,
                                "SELECT count(*) FROM public.ha_enqueued WHERE queue = "
                                "'k'")) >= produced_kafka_ &&
                 ToInt(TryQuery(dsn_, "SELECT count(*) FROM partq.items")) == 0;
        },
        absl::Seconds(90), absl::Milliseconds(200));
    EXPECT_TRUE(drained) << "q still holds "
                         << ToInt(TryQuery(dsn_,
                                           "SELECT count(*) FROM partq.items WHERE queue = 'q'"))
                         << " items; k holds "
                         << ToInt(TryQuery(dsn_,
                                           "SELECT count(*) FROM public.ha_enqueued "
                                           "WHERE queue = 'k'"))
                         << " of " << produced_kafka_ << " Kafka messages";
    for (int i = 0; i < kWorkers; ++i) {
      EXPECT_TRUE(workers_[i]->Running()) << "worker " << i << " exited";
      workers_[i]->Signal(SIGTERM);
    }
    bridge_->Signal(SIGTERM);
    for (int i = 0; i < kWorkers; ++i) {
      const std::optional<int> st = workers_[i]->Wait(absl::Seconds(20));
      EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0)
          << "worker " << i << " did not stop cleanly on SIGTERM; its log:\n"
          << ReadFile(Log(absl::StrCat("worker-", i)));
    }
    const std::optional<int> bst = bridge_->Wait(absl::Seconds(20));
    EXPECT_TRUE(bst && WIFEXITED(*bst) && WEXITSTATUS(*bst) == 0)
        << "the bridge did not stop cleanly; its log:\n"
        << ReadFile(Log("bridge"));

    // Every item of q recorded once; nothing recorded that was not enqueued.
    const int64_t enqueued =
        ToInt(TryQuery(dsn_, "SELECT count(*) FROM public.ha_enqueued WHERE queue = 'q'"));
    const int64_t duplicates =
        ToInt(TryQuery(dsn_, "SELECT count(*) - count(DISTINCT item_id) FROM partq.effects"));
    const int64_t lost =
        ToInt(TryQuery(dsn_,
                       "SELECT count(*) FROM public.ha_enqueued e WHERE queue = 'q' AND NOT EXISTS "
                       "(SELECT 1 FROM partq.effects f WHERE f.item_id = e.id)"));
    const int64_t phantom =
        ToInt(TryQuery(dsn_,
                       "SELECT count(*) FROM partq.effects f WHERE NOT EXISTS (SELECT 1 FROM "
                       "public.ha_enqueued e WHERE e.id = f.item_id AND e.queue = 'q')"));
    const int64_t dead = ToInt(TryQuery(dsn_, "SELECT count(*) FROM partq.dead_items"));
    // Every line the producer reported enqueued is there; lines twice only
    // from chunks it reported in doubt and sent again.
    const std::string lines =
        absl::StrCat("SELECT g FROM generate_series(0, ", next_line_.load() - 1, ") g");
    const int64_t missing_lines = ToInt(
        TryQuery(dsn_, absl::StrCat("SELECT count(*) FROM (", lines,
                                    ") l WHERE NOT EXISTS (SELECT 1 FROM "
                                    "public.ha_enqueued e WHERE e.queue = 'q' AND e.payload = "
                                    "convert_to('L' || l.g, 'UTF8'))")));
    const int64_t twice_lines = ToInt(
        TryQuery(dsn_,
                 "SELECT count(*) - count(DISTINCT payload) FROM public.ha_enqueued WHERE queue = "
                 "'q'"));
    // Every item of k recorded once by the same workers' other session.
    const int64_t k_recorded = ToInt(TryQuery(
        dsn_,
        "SELECT count(DISTINCT item_id) FROM partq.k_effects f WHERE EXISTS (SELECT 1 FROM "
        "public.ha_enqueued e WHERE e.id = f.item_id AND e.queue = 'k')"));
    const int64_t k_twice =
        ToInt(TryQuery(dsn_, "SELECT count(*) - count(DISTINCT item_id) FROM partq.k_effects"));
    // Every Kafka message in k once.
    const int64_t k_rows =
        ToInt(TryQuery(dsn_, "SELECT count(*) FROM public.ha_enqueued WHERE queue = 'k'"));
    const int64_t k_missing = ToInt(TryQuery(
        dsn_, absl::StrCat("SELECT count(*) FROM generate_series(0, ", produced_kafka_ - 1,
                           ") g WHERE NOT EXISTS (SELECT 1 FROM public.ha_enqueued e WHERE "
                           "e.queue = 'k' AND e.payload = convert_to('m' || g, 'UTF8'))")));
    printf(
        "ha: %lld items enqueued by %lld lines (%d producer runs, %lld lines in doubt, %lld "
        "there twice), %lld recorded twice, %lld lost, %lld phantom, %lld dead; Kafka: %lld "
        "messages, %lld rows in the queue, %lld missing, %lld recorded by the workers (%lld "
        "twice)\n",
        static_cast<long long>(enqueued), static_cast<long long>(next_line_.load()),
        producer_runs_.load(), static_cast<long long>(in_doubt_lines_.load()),
        static_cast<long long>(twice_lines), static_cast<long long>(duplicates),
        static_cast<long long>(lost), static_cast<long long>(phantom), static_cast<long long>(dead),
        static_cast<long long>(produced_kafka_), static_cast<long long>(k_rows),
        static_cast<long long>(k_missing), static_cast<long long>(k_recorded),
        static_cast<long long>(k_twice));
    fflush(stdout);
    EXPECT_GT(enqueued, 0);
    EXPECT_EQ(duplicates, 0);
    EXPECT_EQ(lost, 0);
    EXPECT_EQ(phantom, 0);
    EXPECT_EQ(dead, 0);
    EXPECT_EQ(missing_lines, 0);
    EXPECT_GE(twice_lines, 0);
    EXPECT_LE(twice_lines, in_doubt_lines_.load());
    EXPECT_EQ(k_rows, produced_kafka_);
    EXPECT_EQ(k_missing, 0);
    EXPECT_EQ(k_recorded, k_rows) << "k's items recorded by the workers of both queues";
    EXPECT_EQ(k_twice, 0);
  }

 private:
  std::string Log(const std::string& name) const { return c_.dir() + "/" + name + ".log"; }

  int64_t Acks() const { return ToInt(TryQuery(dsn_, "SELECT count(*) FROM partq.effects")); }

  // "part session epoch" lines of q's owners.
  std::string Owners() const {
    return TryQuery(dsn_,
                    "SELECT string_agg(part || ' ' || session_id || ' ' || epoch, E'\\n' "
                    "ORDER BY part) FROM partq.session_parts WHERE queue = 'q'")
        .value_or("(no answer)");
  }
  static std::string Field(const std::string& owners, int part) {
    std::istringstream in(owners);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(absl::StrCat(part, " "), 0) == 0) return line;
    }
    return "";
  }

  void Stop() {
    if (!stop_file_.empty()) return;
    stop_file_ = c_.dir() + "/stop";
    std::ofstream(stop_file_) << "stop\n";
    stopping_ = true;
    if (producer_.joinable()) producer_.join();
    if (feeder_.joinable()) feeder_.join();
  }

  // Kafka messages m0, m1, ... at about 500/s.
  void FeedKafka() {
    while (!stopping_) {
      testing::ProduceKeyed(kafka_.bootstraps(), "events", 100, 10,
                            static_cast<int>(produced_kafka_));
      produced_kafka_ += 100;
      absl::SleepFor(absl::Milliseconds(200));
    }
  }

  // `partq enqueue q --stdin` fed lines L<next>, L<next+1>, ... at about
  // 1000/s until the stop file appears; when it exits with an error it is
  // started again from the first line it did not report enqueued (a chunk in
  // doubt is sent again), as a supervisor would.
  void Produce() {
    for (int run = 0;; ++run) {
      producer_runs_ = run + 1;
      const std::string log = Log(absl::StrCat("producer-", run));
      const std::string gen = absl::StrCat(
          "import os, sys, time\n"
          "i = ",
          next_line_.load(),
          "\n"
          "while not os.path.exists('",
          c_.dir(),
          "/stop'):\n"
          "    sys.stdout.write(''.join('L%d\\n' % j for j in range(i, i + 20)))\n"
          "    sys.stdout.flush()\n"
          "    i += 20\n"
          "    time.sleep(0.02)\n");
      ChildProcess p(
          {"/bin/sh", "-c",
           absl::StrCat("python3 -c \"$GEN\" 2>/dev/null | exec ", testing::PartqBinary(),
                        " enqueue q --stdin --chunk 50 --dsn '", dsn_, "'")},
          {{"GEN", gen}}, log);
      const std::optional<int> st = p.Wait(absl::Minutes(10));
      const std::string out = ReadFile(log);
      const bool ok = st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0;
      int64_t done = -1;
      if (ok) {
        // "partq: enqueued N items in ..."
        const size_t at = out.rfind("enqueued ");
        if (at != std::string::npos) {
          absl::SimpleAtoi(out.substr(at + 9, out.find(' ', at + 9) - at - 9), &done);
        }
      } else if (out.find("(nothing enqueued)") != std::string::npos ||
                 out.find("cannot connect to PostgreSQL") != std::string::npos) {
        done = 0;
      } else if (size_t at = out.find(" lines before them were"); at != std::string::npos) {
        // "... the N lines before them were ..."
        const size_t the = out.rfind("the ", at);
        absl::SimpleAtoi(out.substr(the + 4, at - the - 4), &done);
        if (size_t d = out.find("may or may not have been enqueued"); d != std::string::npos) {
          // "(lines A to B may or may not ...": A..B are sent again.
          const size_t lines = out.rfind("(lines ", d);
          int64_t a = 0, b = 0;
          const std::string range = out.substr(lines + 7, d - lines - 8);
          const size_t to = range.find(" to ");
          if (to != std::string::npos && absl::SimpleAtoi(range.substr(0, to), &a) &&
              absl::SimpleAtoi(range.substr(to + 4), &b)) {
            in_doubt_lines_ += b - a + 1;
          }
        }
      }
      EXPECT_GE(done, 0) << "producer run " << run << " ended unreadably:\n" << out;
      if (done < 0) return;
      next_line_ += done;
      if (ok) return;  // the stop file: it read to the end
      if (stopping_) {
        // It failed while being stopped; its unsent lines are not reported
        // enqueued, so nothing is owed.
        return;
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  }

  HaCluster& c_;
  testing::MockCluster& kafka_;
  std::string dsn_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
  std::unique_ptr<ChildProcess> bridge_;
  std::thread feeder_, producer_;
  std::atomic<bool> stopping_{false};
  std::string stop_file_;
  std::atomic<int64_t> produced_kafka_{0};
  std::atomic<int64_t> next_line_{0};  // lines L0..L<next_line_-1> reported enqueued
  std::atomic<int64_t> in_doubt_lines_{0};
  std::atomic<int> producer_runs_{0};
};

TEST(HaTest, PatroniSwitchoverAndLeaderCrashLoseAndRepeatNothing) {
  auto cluster = testing::PatroniCluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  printf("ha: Patroni cluster in %s\n%s", (*cluster)->dir().c_str(), (*cluster)->Members().c_str());
  testing::MockCluster kafka(3);
  HaRun run(**cluster, kafka);
  run.Start();
  if (HasFatalFailure()) return;
  // Patroni moves the leader only to the member it names synchronous: wait for
  // that first, so the figures measure the failover alone.
  ASSERT_TRUE((*cluster)
                  ->WaitSyncStandby(cluster.value()->Other((*cluster)->Leader()), absl::Seconds(60))
                  .ok());
  run.FailOver("patronictl switchover", [&] { return (*cluster)->Switchover(); });
  // The old leader rejoins as the synchronous standby before the next one.
  const int leader = (*cluster)->Leader();
  ASSERT_TRUE((*cluster)->WaitSynchronous(leader, absl::Seconds(90)).ok()) << (*cluster)->Members();
  ASSERT_TRUE((*cluster)->WaitSyncStandby(cluster.value()->Other(leader), absl::Seconds(60)).ok());
  run.FailOver("SIGKILL of the leader's postgres",
               [&] { return (*cluster)->KillLeaderPostgres(); });
  run.StopAndCheck();
  printf("%s", (*cluster)->Members().c_str());
  if (HasFailure() || getenv("PARTQ_HA_KEEP") != nullptr) (*cluster)->keep();
}

TEST(HaTest, PgCtlPromoteAfterAPrimaryCrashLosesAndRepeatsNothing) {
  auto cluster = testing::StreamingPair::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  printf("ha: primary and standby in %s\n", (*cluster)->dir().c_str());
  testing::MockCluster kafka(3);
  HaRun run(**cluster, kafka);
  run.Start();
  if (HasFatalFailure()) return;
  run.FailOver("SIGKILL of the primary, pg_ctl promote",
               [&] { return (*cluster)->KillPrimaryAndPromote(); });
  run.StopAndCheck();
  if (HasFailure() || getenv("PARTQ_HA_KEEP") != nullptr) (*cluster)->keep();
}

}  // namespace
}  // namespace partq
