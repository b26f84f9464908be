// Exactly once for handlers in other languages, under SIGKILL, against a real
// PostgreSQL (ctest label `fault`). Real `partq worker` processes drain a
// queue of {"n": i} items (keyed k<i>) through the exec example
// (examples/python/handler.py, a child per worker thread) or the http example
// (examples/node/server.mjs, one server the test starts), with
// FOLLOWUP_QUEUE=squares, while workers — and, on exec, their children — are
// SIGKILLed mid-batch again and again and the supervisor restarts them. A
// killed batch may have been answered by the handler, its effects never
// committed; it runs again. At the end, from the database: every source item
// has exactly one result, i*i, and squares holds exactly one follow-up per
// source item, {"n": i*i} keyed as its source; nothing lost, nothing dead.
//
// The kills are paced by progress (one each time another tenth of the items
// is done), not by the clock, so a fast machine gets as many as a slow one.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/fault/fault_harness.h"
#include "tests/observability/scrape.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq::testing {
namespace {

constexpr int kItems = 3000;
constexpr int kKills = 9;  // one per tenth of the items, but the last

ScenarioOptions Options(const std::string& name) {
  ScenarioOptions o;
  o.name = name;
  o.items = kItems;
  o.item = [](int i) {
    NewItem item;
    item.payload = absl::StrCat(R"({"n": )", i, "}");
    item.key = absl::StrCat("k", i);
    return item;
  };
  o.more_queues = {"squares"};
  o.done_sql = "SELECT id, count(*) FROM partq.results WHERE queue = 'q' GROUP BY 1";
  return o;
}

// Batches of 10: more batches in flight for the kills to cut.
WorkerSpec Spec(const std::string& handler, const std::string& instance_id,
                std::map<std::string, std::string> env = {}) {
  WorkerSpec w;
  w.handler = handler;
  w.instance_id = instance_id;
  w.extra = {"--batch", "10"};
  w.env = std::move(env);
  return w;
}

// Four workers: two static members (a restart takes its parts back at once),
// two dynamic (their parts wait for the TTL).
void AddWorkers(FaultScenario& s, const std::string& handler,
                const std::map<std::string, std::string>& env = {}) {
  s.Add(Spec(handler, "w1", env));
  s.Add(Spec(handler, "w2", env));
  s.Add(Spec(handler, "", env));
  s.Add(Spec(handler, "", env));
}

// Applies `fault` to the active workers in a random order until it hits one
// (returns > 0: a worker just restarted may have no children yet); returns
// what it returned, or 0.
int OnSomeWorker(FaultScenario& s, const std::function<int(int)>& fault) {
  thread_local absl::BitGen gen;
  std::vector<int> workers = s.Active();
  std::shuffle(workers.begin(), workers.end(), gen);
  for (int w : workers) {
    if (const int n = fault(w); n > 0) return n;
  }
  return 0;
}

// An injector for FaultScenario::Run, called every 100 ms: for each tenth
// of the items done since its last call, `kill` injects one fault (returns
// how many). One per call at most let a drain faster than a tenth per
// 100 ms end before the tests' minimum of kills (4 of 5, 1 run in 5).
std::function<int(int)> PacedByProgress(FaultScenario& s, std::function<int(int)> kill) {
  return [&s, kill, next = 1](int) mutable {
    const int64_t left = s.Left();
    int injected = 0;
    while (next <= kKills && left >= 0 && kItems - left >= next * kItems / 10) {
      injected += kill(next++);
    }
    return injected;
  };
}

// The n of a payload {"n": N}, or -1.
int64_t NOf(absl::string_view payload) {
  int64_t n = -1;
  if (absl::ConsumePrefix(&payload, R"({"n": )") && absl::ConsumeSuffix(&payload, "}")) {
    (void)absl::SimpleAtoi(payload, &n);
  }
  return n;
}

// Beyond the harness's check (one result row per item, none lost or dead):
// each result is n*n, and squares holds one follow-up per source item,
// {"n": n*n}, with the source's key.
void ExpectOneResultAndOneFollowUpEach(FaultScenario& s) {
  std::map<std::string, int64_t> n_of_key;  // k<i> -> i
  std::map<int64_t, int64_t> n_of_id;
  for (const auto& [id, payload] : s.enqueued()) {
    const int64_t n = NOf(payload);
    n_of_id[id] = n;
    n_of_key[absl::StrCat("k", n)] = n;
  }
  int64_t wrong_results = 0;
  for (const auto& row : Query(s.dsn(),
                               "SELECT id, convert_from(result, 'UTF8') FROM partq.results "
                               "WHERE queue = 'q'")) {
    int64_t id = 0;
    ASSERT_TRUE(row[0] && absl::SimpleAtoi(*row[0], &id));
    const int64_t n = n_of_id.count(id) ? n_of_id[id] : -1;
    if (!row[1] || *row[1] != absl::StrCat(n * n)) ++wrong_results;
  }
  EXPECT_EQ(wrong_results, 0);

  std::map<int64_t, int> follow_ups;  // by source n
  int64_t strays = 0;
  for (const auto& row : Query(s.dsn(),
                               "SELECT key, convert_from(payload, 'UTF8') "
                               "FROM partq.items WHERE queue = 'squares'")) {
    auto it = row[0] ? n_of_key.find(*row[0]) : n_of_key.end();
    if (it == n_of_key.end() || !row[1] || NOf(*row[1]) != it->second * it->second) {
      ++strays;
      continue;
    }
    ++follow_ups[it->second];
  }
  int64_t missing = 0, duplicated = 0;
  for (const auto& [key, n] : n_of_key) {
    const int count = follow_ups.count(n) ? follow_ups[n] : 0;
    missing += count == 0;
    duplicated += count > 1 ? count - 1 : 0;
  }
  EXPECT_EQ(missing, 0) << "source items without a follow-up";
  EXPECT_EQ(duplicated, 0) << "follow-ups enqueued more than once";
  EXPECT_EQ(strays, 0) << "follow-ups that match no source item";
  EXPECT_EQ(QueryInt(s.dsn(), "SELECT count(*) FROM partq.items WHERE queue = 'squares'"), kItems);
  EXPECT_EQ(QueryInt(s.dsn(),
                     "SELECT count(DISTINCT payload) FROM partq.items "
                     "WHERE queue = 'squares'"),
            kItems);
}

// Items the handler logged at attempt 2 or later ("item 17 (attempt 2):
// 16^2 = 256"): claimed again after a kill cut their batch, answered by the
// handler before it or not. A lower bound: a SIGKILLed worker loses the
// lines of its children it had not copied to its log yet.
int64_t RunsAgain(const std::vector<std::string>& logs) {
  int64_t n = 0;
  for (const std::string& path : logs) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      n += absl::StrContains(line, "^2 = ") && !absl::StrContains(line, "(attempt 1)");
    }
  }
  return n;
}

TEST(HandlerFault, ExecWorkersAndTheirChildrenSigkilledMidBatch) {
  FaultScenario s(Options("exec_sigkill"));
  ASSERT_TRUE(s.SetUp());
  AddWorkers(s, absl::StrCat("exec:exec ", PYTHON3, " ", EXAMPLE_HANDLER),
             {{"FOLLOWUP_QUEUE", "squares"}});
  int worker_kills = 0, child_kills = 0;
  CheckResult r = s.Run(absl::Milliseconds(100), PacedByProgress(s, [&](int k) {
                          if (k % 2 == 1) {  // a worker, its children with it
                            const int n = OnSomeWorker(
                                s, [&](int w) { return s.Signal(w, SIGKILL) > 0 ? 1 : 0; });
                            worker_kills += n;
                            return n;
                          }
                          // A worker's children only: the worker starts others.
                          const int n = OnSomeWorker(s, [&](int w) {
                            int killed = 0;
                            for (pid_t pid : s.Children(w)) killed += ::kill(pid, SIGKILL) == 0;
                            return killed;
                          });
                          child_kills += n;
                          return n;
                        }));
  printf("exec_sigkill: %d worker kills, %d child kills; at least %lld items at attempt 2+\n",
         worker_kills, child_kills, static_cast<long long>(RunsAgain(s.LogPaths())));
  ExpectExactlyOnce(s, r, 0);
  ExpectOneResultAndOneFollowUpEach(s);
  EXPECT_GE(worker_kills, 3);
  EXPECT_GE(child_kills, 3);
}

TEST(HandlerFault, HttpWorkersSigkilledMidBatch) {
  FaultScenario s(Options("http_sigkill"));
  ASSERT_TRUE(s.SetUp());
  const int port = FreePort();
  const std::string server_log = absl::StrCat(::testing::TempDir(), "/node_server_", port, ".log");
  ChildProcess server({NODE, NODE_EXAMPLE},
                      {{"PORT", absl::StrCat(port)}, {"FOLLOWUP_QUEUE", "squares"}}, server_log);
  std::string body;
  ASSERT_TRUE(WaitUntil([&] {
    return HttpGet(port, "/healthz", &body) == 200 || !server.Running();
  })) << "no /healthz on port "
      << port;
  ASSERT_TRUE(server.Running()) << "see " << server_log;
  AddWorkers(s, absl::StrCat("http:http://127.0.0.1:", port, "/"));
  int kills = 0;
  CheckResult r = s.Run(absl::Milliseconds(100), PacedByProgress(s, [&](int) {
                          const int n = OnSomeWorker(
                              s, [&](int w) { return s.Signal(w, SIGKILL) > 0 ? 1 : 0; });
                          kills += n;
                          return n;
                        }));
  printf("http_sigkill: %d worker kills; at least %lld items at attempt 2+\n", kills,
         static_cast<long long>(RunsAgain({server_log})));
  ExpectExactlyOnce(s, r, 0);
  ExpectOneResultAndOneFollowUpEach(s);
  EXPECT_GE(kills, 5);
  // The server stops on SIGTERM, cleanly.
  server.Signal(SIGTERM);
  const std::optional<int> status = server.Wait(absl::Seconds(30));
  ASSERT_TRUE(status.has_value()) << "node did not stop on SIGTERM";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status;
  if (!::testing::Test::HasFailure()) std::remove(server_log.c_str());
}

}  // namespace
}  // namespace partq::testing
