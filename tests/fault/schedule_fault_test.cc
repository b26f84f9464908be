// PostgreSQL restarted just as a schedule ticks (RELIABILITY.md, "PostgreSQL
// restart at a tick"): two `partq worker` processes, a schedule every
// second, and the server restarted (fast and immediate, alternately) 30 ms
// before a tick, six times. Whatever the firing transaction was doing when
// the server went (not begun, holding the row, committing), no tick gets
// two items, and every tick from the first to the last fired is either
// fired or counted missed.
#include <csignal>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "pg/embedded_postgres.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq::testing {
namespace {

TEST(Fault, PostgresRestartAtATick) {
  auto server = EmbeddedPostgres::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string dsn = (*server)->dsn();
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--dsn", dsn});
    PartqResult r = Partq(args);
    EXPECT_EQ(r.code, 0) << r.err;
  };
  cli({"migrate"});
  cli({"queue", "create", "q", "--parts", "4", "--session-ttl", "2s"});
  cli({"schedule", "add", "sec", "q", "--every", "1s", "tick"});
  auto q = [&](const std::string& sql) { return QueryInt(dsn, sql); };
  auto fired = [&] { return q("SELECT fired FROM partq.schedules WHERE name = 'sec'"); };

  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{PartqBinary(), "worker", "q", "--dsn", dsn, "--handler", "noop",
                                 "--concurrency", "1", "--poll-interval", "100ms"},
        std::map<std::string, std::string>{},
        absl::StrCat((*server)->dir(), "/worker-", i, ".log")));
  }
  ASSERT_TRUE(WaitUntil([&] { return fired() >= 2; })) << "the schedule never fired";

  for (int round = 0; round < 6; ++round) {
    // 30 ms before the next tick, on the server's clock.
    ASSERT_TRUE(WaitUntil(
        [&] {
          return q("SELECT (clock_timestamp() >= next_tick - interval '30 milliseconds')::int "
                   "FROM partq.schedules WHERE name = 'sec'") == 1;
        },
        absl::Seconds(30), absl::Milliseconds(2)));
    const auto mode =
        round % 2 == 0 ? EmbeddedPostgres::StopMode::kImmediate : EmbeddedPostgres::StopMode::kFast;
    absl::Status st = (*server)->Restart(mode);
    ASSERT_TRUE(st.ok()) << st;
    const int64_t before = fired();
    ASSERT_TRUE(WaitUntil([&] { return fired() >= before + 2; }))
        << "round " << round << ": the schedule stopped firing after the restart";
  }
  for (auto& w : workers) w->Signal(SIGTERM);
  for (auto& w : workers) EXPECT_TRUE(w->Wait(absl::Seconds(30)).has_value());

  constexpr char kScheduled[] =
      "(SELECT dedup_key FROM partq.items UNION ALL SELECT dedup_key FROM partq.results "
      "UNION ALL SELECT dedup_key FROM partq.dead_items) k WHERE dedup_key LIKE 'schedule:%'";
  EXPECT_EQ(q(absl::StrCat("SELECT count(*) FROM (SELECT dedup_key FROM ", kScheduled,
                           " GROUP BY 1 HAVING count(*) > 1) d")),
            0)
      << "a tick got two items";
  const int64_t f = fired();
  const int64_t missed = q("SELECT missed FROM partq.schedules WHERE name = 'sec'");
  EXPECT_EQ(q(absl::StrCat("SELECT count(*) FROM ", kScheduled)), f);
  // Ticks from the first after the add to the last fired.
  const int64_t ticks =
      q("SELECT (extract(epoch FROM last_tick) - floor(extract(epoch FROM created_at)))::bigint "
        "FROM partq.schedules WHERE name = 'sec'");
  EXPECT_EQ(f + missed, ticks) << f << " fired, " << missed << " missed";
  printf("pg_restart_at_tick: 6 restarts, %lld ticks: %lld fired, %lld missed, 0 twice\n",
         static_cast<long long>(ticks), static_cast<long long>(f), static_cast<long long>(missed));
}

}  // namespace
}  // namespace partq::testing
