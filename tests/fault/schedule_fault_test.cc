// Schedules through faults. PostgreSQL restarted just as a schedule ticks
// (RELIABILITY.md, "PostgreSQL restart at a tick"): two `partq worker` processes, a schedule every
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

// Issue 49: with a 4 s TTL a 1 s schedule lost 3 ticks when its firer (the
// worker owning part 0) was SIGKILLed, and as many when it was SIGSTOPped
// for 12 s: the next firer fired only the latest due tick. Three `partq
// worker` processes; the firer is killed, then the next firer stopped for
// 12 s and let go on. Every tick from the first to the last gets exactly one
// item: none twice, none missed.
TEST(Fault, AScheduleFirerKilledOrStoppedLosesNoTick) {
  auto server = EmbeddedPostgres::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string dsn = (*server)->dsn();
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--dsn", dsn});
    PartqResult r = Partq(args);
    EXPECT_EQ(r.code, 0) << r.err;
  };
  cli({"migrate"});
  cli({"queue", "create", "q", "--parts", "4", "--session-ttl", "4s"});
  cli({"schedule", "add", "sec", "q", "--every", "1s", "tick"});
  auto q = [&](const std::string& sql) { return QueryInt(dsn, sql); };
  auto fired = [&] { return q("SELECT fired FROM partq.schedules WHERE name = 'sec'"); };
  // The pid of the worker whose session owns part 0 (0: none owns it).
  auto firer = [&] {
    return q(
        "SELECT coalesce((SELECT s.pid FROM partq.session_parts p JOIN partq.sessions s "
        "ON s.id = p.session_id WHERE p.queue = 'q' AND p.part = 0 "
        "AND s.expires_at > now()), 0)");
  };
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{PartqBinary(), "worker", "q", "--dsn", dsn, "--handler", "noop",
                                 "--concurrency", "1", "--poll-interval", "100ms"},
        std::map<std::string, std::string>{},
        absl::StrCat((*server)->dir(), "/worker-", i, ".log")));
  }
  auto worker_of = [&](int64_t pid) -> ChildProcess* {
    for (auto& w : workers) {
      if (w->pid() == pid) return w.get();
    }
    return nullptr;
  };
  ChildProcess* first = nullptr;
  ASSERT_TRUE(WaitUntil([&] { return fired() >= 3 && (first = worker_of(firer())) != nullptr; }))
      << "the schedule never fired";

  first->Signal(SIGKILL);
  ASSERT_TRUE(first->Wait(absl::Seconds(30)).has_value());
  const int64_t at_kill = fired();
  ChildProcess* second = nullptr;
  ASSERT_TRUE(WaitUntil([&] {
    second = worker_of(firer());
    return second != nullptr && second != first && fired() >= at_kill + 8;
  })) << "no firer after the kill";

  second->Signal(SIGSTOP);
  const int64_t at_stop = fired();
  // Its session expires, another worker takes part 0 and fires on; 12 s.
  ASSERT_TRUE(WaitUntil([&] { return fired() >= at_stop + 12; }, absl::Seconds(60)))
      << "no firer while the last one was stopped";
  second->Signal(SIGCONT);
  const int64_t at_cont = fired();
  ASSERT_TRUE(WaitUntil([&] { return fired() >= at_cont + 3; }));

  for (auto& w : workers) {
    if (w.get() != first) w->Signal(SIGTERM);
  }
  for (auto& w : workers) {
    if (w.get() != first) {
      EXPECT_TRUE(w->Wait(absl::Seconds(30)).has_value());
    }
  }
  constexpr char kScheduled[] =
      "(SELECT dedup_key FROM partq.items UNION ALL SELECT dedup_key FROM partq.results "
      "UNION ALL SELECT dedup_key FROM partq.dead_items) k WHERE dedup_key LIKE 'schedule:%'";
  EXPECT_EQ(q(absl::StrCat("SELECT count(*) FROM (SELECT dedup_key FROM ", kScheduled,
                           " GROUP BY 1 HAVING count(*) > 1) d")),
            0)
      << "a tick got two items";
  const int64_t f = fired();
  const int64_t missed = q("SELECT missed FROM partq.schedules WHERE name = 'sec'");
  EXPECT_EQ(missed, 0) << "ticks the dead and the stopped firer missed were fired by the next";
  EXPECT_EQ(q(absl::StrCat("SELECT count(*) FROM ", kScheduled)), f);
  const int64_t ticks =
      q("SELECT (extract(epoch FROM last_tick) - floor(extract(epoch FROM created_at)))::bigint "
        "FROM partq.schedules WHERE name = 'sec'");
  EXPECT_EQ(f, ticks) << "every tick from the first to the last, once";
  printf("schedule_firer_killed_and_stopped: %lld ticks, %lld fired, %lld missed, 0 twice\n",
         static_cast<long long>(ticks), static_cast<long long>(f), static_cast<long long>(missed));
}

}  // namespace
}  // namespace partq::testing
