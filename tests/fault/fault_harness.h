// The fault-injection harness: one scenario = its own PostgreSQL server, one
// queue, N items enqueued up front, a fleet of real `partq worker` processes
// draining them under a supervisor (a dead worker is restarted, like a
// Kubernetes pod), faults injected by the scenario while they drain, and a
// checker that reads the database back and proves invariants I3 and I4:
// every enqueued item is in the `effects` table (written by the record
// handler inside the ack transaction; or whatever ScenarioOptions::done_sql
// names) exactly once, or in dead_items where the scenario expects dead
// letters; nothing is left in the queue; every part has a live owner at the
// end. A monitor thread polls part ownership every ~30 ms and reports the
// longest continuous stretch any part had no live owner (no session_parts
// row, or one whose session has expired).
//
// Threads: the scenario (test) thread drives Run(); the supervisor and the
// monitor run on their own threads. Worker-fleet methods are thread-safe.
#ifndef PARTQ_TESTS_FAULT_FAULT_HARNESS_H_
#define PARTQ_TESTS_FAULT_FAULT_HARNESS_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "pg/embedded_postgres.h"
#include "store/types.h"
#include "tests/testing/process.h"

namespace partq::testing {

struct ScenarioOptions {
  std::string name;
  int items = 12000;
  int parts = 32;
  absl::Duration ttl = absl::Seconds(2);
  int max_attempts = 25;
  // Item payloads equal to this are enqueued once, in the middle (poison).
  std::string poison_payload;
  // Where faults stop and the run gives up waiting for the queue to drain.
  absl::Duration deadline = absl::Minutes(3);
  // Item i; null: payload "p<i>", no key. (The poison payload still
  // replaces the middle one's.)
  std::function<NewItem(int)> item;
  // Queues created beside the scenario's own (with its parts and TTL): where
  // a handler enqueues follow-ups. The checker looks only at the scenario's.
  std::vector<std::string> more_queues;
  // Rows (item id, count) of what proves an item done, one row per id: by
  // default the rows record:effects wrote. Handlers that return results:
  // "SELECT id, count(*) FROM partq.results WHERE queue = 'q' GROUP BY 1".
  std::string done_sql = "SELECT item_id, count(*) FROM partq.effects GROUP BY 1";
};

// How to start one worker: the handler, an optional static instance id and
// extra flags. `dsn_port` is the port the worker connects to (a proxy's, or
// zero for the server's).
struct WorkerSpec {
  std::string handler = "sleep:2,record:effects";
  std::string instance_id;  // empty: dynamic membership
  std::vector<std::string> extra;
  int dsn_port = 0;
  std::map<std::string, std::string> env;  // added to the worker's environment
};

struct CheckResult {
  int64_t items = 0;
  int64_t recorded = 0;    // distinct item ids in effects
  int64_t duplicates = 0;  // extra effects rows, plus items both recorded and dead
  int64_t lost = 0;        // enqueued, neither recorded nor dead
  int64_t dead = 0;
  int64_t phantom = 0;     // recorded or dead ids that were never enqueued
  int64_t left = 0;        // rows still in items
  int64_t unowned_parts_at_end = 0;
  // Live sessions and supervised workers once the faults are over: equal
  // when every worker (a paused one included) noticed and re-joined.
  int64_t sessions_at_end = 0;
  int64_t workers_at_end = 0;
  std::vector<std::string> dead_errors;  // distinct last_error values
};

class FaultScenario;

// The assertions every scenario shares: I3 (no duplicates), I4 (no loss,
// nothing left), a live owner for every part at the end (I5 within six
// TTLs), and `expected_dead` dead letters (-1: any number). Dumps the worker
// logs on failure.
void ExpectExactlyOnce(FaultScenario& s, const CheckResult& r, int64_t expected_dead);

class FaultScenario {
 public:
  explicit FaultScenario(ScenarioOptions options);
  ~FaultScenario();

  // Starts the server, migrates, creates the queue and enqueues the items.
  // Fails the current test (ADD_FAILURE) and returns false on error.
  bool SetUp();

  EmbeddedPostgres& server() { return *server_; }
  const std::string& dsn() const { return dsn_; }
  int port() const { return server_->port(); }
  const ScenarioOptions& options() const { return options_; }

  // The fleet. Add() starts a worker; the supervisor restarts it whenever it
  // exits, until Retire() (graceful stop: SIGTERM, not restarted).
  int Add(WorkerSpec spec);
  void Retire(int index);
  // Stops worker `index` gracefully (SIGTERM) for the supervisor to start it
  // again with the same spec: a rolling restart's step.
  void Restart(int index);
  // Sends `sig` to worker `index` if running; returns its pid or -1.
  int Signal(int index, int sig);
  // The processes worker `index` started and that still run (an exec
  // handler's children), at this moment.
  std::vector<pid_t> Children(int index);
  // Indexes of workers that are supervised (not retired).
  std::vector<int> Active();
  int restarts() const { return restarts_.load(); }

  // Runs `inject` every `every` (it gets the fault number and returns how
  // many faults it injected) until the queue is empty, then waits for all
  // parts to have live owners, stops the workers gracefully and checks.
  // Prints the summary line and returns the result.
  // `count_after`, if given, runs once the workers have stopped and adds to
  // the fault count (faults the workers injected themselves: handler
  // failures, timeouts).
  CheckResult Run(absl::Duration every, const std::function<int(int)>& inject,
                  const std::function<int64_t()>& count_after = nullptr);

  int64_t faults() const { return faults_; }
  // What was enqueued: payload by item id.
  const std::map<int64_t, std::string>& enqueued() const { return enqueued_; }
  absl::Duration max_unowned() const;
  // Times the monitor saw a part's owner change to another member (a static
  // member is its instance id across incarnations, a dynamic one its session).
  int64_t moves() const;
  // Items still in the queue (-1 if the server cannot be reached).
  int64_t Left();
  // Each worker's log (all its restarts), by index.
  std::vector<std::string> LogPaths();
  // Dumps the tail of each worker log to stderr (for failures).
  void DumpLogs();
  // Totals of the "worker stopped: N acked, N retried, N throttled (...), N
  // dead-lettered, N fenced" lines that gracefully stopped workers wrote to
  // their logs.
  struct LoggedStats {
    int64_t acked = 0, retried = 0, throttled = 0, dead = 0, fenced = 0;
  };
  LoggedStats Logged();
  // Summary line for RELIABILITY.md.
  std::string Summary(const CheckResult& r) const;

 private:
  struct Worker {
    WorkerSpec spec;
    std::unique_ptr<ChildProcess> process;
    bool retired = false;
    bool restarting = false;  // stopped by Restart(): start again, say nothing
    int generation = 0;
  };
  std::vector<std::string> Argv(const WorkerSpec& spec) const;
  std::string LogPath(int index) const;
  void Supervise();
  void Monitor();
  CheckResult Check();
  bool WaitAllOwned(absl::Duration timeout);
  int64_t LiveSessions();

  const ScenarioOptions options_;
  std::unique_ptr<EmbeddedPostgres> server_;
  std::string dsn_;
  std::string dir_;
  std::map<int64_t, std::string> enqueued_;
  int64_t faults_ = 0;
  std::atomic<int> restarts_{0};
  std::atomic<bool> stop_{false};

  absl::Mutex mu_;
  std::vector<Worker> workers_ ABSL_GUARDED_BY(mu_);
  std::thread supervisor_;

  mutable absl::Mutex mon_mu_;
  bool monitoring_ ABSL_GUARDED_BY(mon_mu_) = false;
  absl::Duration max_unowned_ ABSL_GUARDED_BY(mon_mu_);
  int64_t moves_ ABSL_GUARDED_BY(mon_mu_) = 0;
  std::thread monitor_;
};

}  // namespace partq::testing

#endif  // PARTQ_TESTS_FAULT_FAULT_HARNESS_H_
