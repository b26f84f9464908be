#include "tests/fault/fault_harness.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <pqxx/pqxx>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "pg/pg_store.h"
#include "gtest/gtest.h"

namespace partq::testing {
namespace {

constexpr char kQueue[] = "q";

std::string DsnForPort(int port) {
  return absl::StrCat("host=127.0.0.1 port=", port, " user=postgres dbname=postgres");
}

// Rows of one query on a fresh connection, or nullopt if the server is away.
std::optional<pqxx::result> TryQuery(const std::string& dsn, const std::string& sql) {
  try {
    pqxx::connection c(dsn);
    pqxx::nontransaction tx(c);
    return tx.exec(sql);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Parts with no live owner: no session_parts row, or one whose session has
// expired (its owner is dead or paused, and no one has reaped it yet).
std::string UnownedPartsSql(int parts) {
  return absl::StrCat(
      "SELECT p FROM generate_series(0, ", parts - 1,
      ") p WHERE NOT EXISTS (SELECT 1 FROM partq.session_parts sp JOIN partq.sessions s "
      "ON s.id = sp.session_id WHERE sp.queue = '",
      kQueue, "' AND sp.part = p AND s.expires_at > now())");
}

}  // namespace

void ExpectExactlyOnce(FaultScenario& s, const CheckResult& r, int64_t expected_dead) {
  EXPECT_EQ(r.duplicates, 0) << "I3: items acknowledged more than once";
  EXPECT_EQ(r.lost, 0) << "I4: items neither recorded nor dead-lettered";
  EXPECT_EQ(r.phantom, 0) << "recorded ids that were never enqueued";
  EXPECT_EQ(r.left, 0) << "items left in the queue";
  EXPECT_EQ(r.unowned_parts_at_end, 0) << "parts without a live owner at the end";
  EXPECT_EQ(r.sessions_at_end, r.workers_at_end) << "workers without a live session at the end";
  // I5 with room for a loaded 2-core machine: each membership change gets a
  // TTL plus a rebalance tick; faults every 1.5 s can chain a few of those
  // (RELIABILITY.md: 3.4 s at worst, 2 s TTL). Six TTLs means a stuck part.
  EXPECT_LE(s.max_unowned(), 6 * s.options().ttl) << "I5: a part went without a live owner";
  if (expected_dead >= 0) {
    EXPECT_EQ(r.dead, expected_dead);
  }
  EXPECT_EQ(r.recorded + r.dead, r.items);
  if (::testing::Test::HasFailure()) s.DumpLogs();
}

FaultScenario::FaultScenario(ScenarioOptions options) : options_(std::move(options)) {}

FaultScenario::~FaultScenario() {
  stop_ = true;
  if (supervisor_.joinable()) supervisor_.join();
  if (monitor_.joinable()) monitor_.join();
  absl::MutexLock lock(&mu_);
  for (auto& w : workers_) {
    if (w.process) w.process->Signal(SIGCONT);
  }
  workers_.clear();  // SIGKILLs what is left
  // PARTQ_FAULT_KEEP_LOGS=1 keeps the worker logs of passing runs too.
  if (!dir_.empty() && !::testing::Test::HasFailure() &&
      std::getenv("PARTQ_FAULT_KEEP_LOGS") == nullptr) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  } else if (!dir_.empty()) {
    fprintf(stderr, "worker logs kept in %s\n", dir_.c_str());
  }
}

bool FaultScenario::SetUp() {
  std::string tmpl = absl::StrCat("/tmp/partq-fault-", options_.name, "-XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return false;
  }
  dir_ = tmpl;
  EmbeddedPostgres::Options o;
  // fsync=off: restarts (even immediate ones) never lose the OS page cache
  // here, so WAL replay is complete either way, and the loaded test machine
  // is spared the flushes.
  o.settings = {"max_connections=200", "fsync=off"};
  auto server = EmbeddedPostgres::Start(o);
  if (!server.ok()) {
    ADD_FAILURE() << "embedded PostgreSQL: " << server.status();
    return false;
  }
  server_ = std::move(*server);
  dsn_ = server_->dsn();
  PgOptions pg;
  pg.dsn = dsn_;
  pg.application_name = "partq fault harness";
  auto store = ConnectPg(pg);
  if (!store.ok()) {
    ADD_FAILURE() << store.status();
    return false;
  }
  if (absl::Status st = (*store)->Migrate(); !st.ok()) {
    ADD_FAILURE() << st;
    return false;
  }
  std::vector<std::string> queues = {kQueue};
  queues.insert(queues.end(), options_.more_queues.begin(), options_.more_queues.end());
  for (const std::string& name : queues) {
    QueueConfig q;
    q.name = name;
    q.parts = options_.parts;
    q.session_ttl = options_.ttl;
    q.max_attempts = options_.max_attempts;
    if (absl::Status st = (*store)->CreateQueue(q); !st.ok()) {
      ADD_FAILURE() << st;
      return false;
    }
  }
  std::vector<NewItem> batch;
  for (int i = 0; i < options_.items; ++i) {
    NewItem it;
    if (options_.item) {
      it = options_.item(i);
    } else {
      it.payload = absl::StrCat("p", i);
    }
    if (!options_.poison_payload.empty() && i == options_.items / 2) {
      it.payload = options_.poison_payload;
    }
    batch.push_back(std::move(it));
    if (batch.size() == 5000 || i + 1 == options_.items) {
      auto n = (*store)->EnqueueBatch(kQueue, batch);
      if (!n.ok()) {
        ADD_FAILURE() << n.status();
        return false;
      }
      batch.clear();
    }
  }
  auto ids = TryQuery(dsn_, "SELECT id, payload FROM partq.items");
  if (!ids || static_cast<int>(ids->size()) != options_.items) {
    ADD_FAILURE() << "could not read back the enqueued ids";
    return false;
  }
  for (const auto& row : *ids) enqueued_[row[0].as<int64_t>()] = pqxx::binarystring(row[1]).str();
  supervisor_ = std::thread([this] { Supervise(); });
  monitor_ = std::thread([this] { Monitor(); });
  return true;
}

std::vector<std::string> FaultScenario::Argv(const WorkerSpec& spec) const {
  std::vector<std::string> argv = {
      PartqBinary(), "worker", kQueue, "--dsn",
      spec.dsn_port ? DsnForPort(spec.dsn_port) : dsn_,
      "--handler", spec.handler, "--concurrency", "2", "--batch", "50", "--poll-interval",
      "100ms", "--retry-base", "10ms", "--retry-max", "100ms", "--drain-timeout", "5s"};
  if (!spec.instance_id.empty()) {
    argv.push_back("--instance-id");
    argv.push_back(spec.instance_id);
  }
  argv.insert(argv.end(), spec.extra.begin(), spec.extra.end());
  return argv;
}

std::string FaultScenario::LogPath(int index) const {
  return absl::StrCat(dir_, "/worker-", index, ".log");
}

int FaultScenario::Add(WorkerSpec spec) {
  absl::MutexLock lock(&mu_);
  const int index = static_cast<int>(workers_.size());
  Worker w;
  w.spec = std::move(spec);
  w.process = std::make_unique<ChildProcess>(Argv(w.spec), w.spec.env, LogPath(index));
  workers_.push_back(std::move(w));
  return index;
}

void FaultScenario::Restart(int index) {
  absl::MutexLock lock(&mu_);
  workers_[index].restarting = true;
  workers_[index].process->Signal(SIGTERM);
}

void FaultScenario::Retire(int index) {
  absl::MutexLock lock(&mu_);
  workers_[index].retired = true;
  workers_[index].process->Signal(SIGTERM);
}

int FaultScenario::Signal(int index, int sig) {
  absl::MutexLock lock(&mu_);
  Worker& w = workers_[index];
  if (!w.process->Running()) return -1;
  w.process->Signal(sig);
  return w.process->pid();
}

std::vector<pid_t> FaultScenario::Children(int index) {
  pid_t parent;
  {
    absl::MutexLock lock(&mu_);
    Worker& w = workers_[index];
    if (!w.process->Running()) return {};
    parent = w.process->pid();
  }
  std::vector<pid_t> out;
  for (const ProcessInfo& p : AllProcesses()) {
    if (p.ppid == parent && p.state != 'Z') out.push_back(p.pid);
  }
  return out;
}

std::vector<int> FaultScenario::Active() {
  absl::MutexLock lock(&mu_);
  std::vector<int> out;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!workers_[i].retired) out.push_back(static_cast<int>(i));
  }
  return out;
}

void FaultScenario::Supervise() {
  while (!stop_) {
    {
      absl::MutexLock lock(&mu_);
      for (size_t i = 0; i < workers_.size(); ++i) {
        Worker& w = workers_[i];
        if (w.process->Running() || w.retired) continue;
        const int status = w.process->Wait(absl::ZeroDuration()).value_or(-1);
        const bool planned = w.restarting && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        w.restarting = false;
        if (!planned && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
          // Not one of ours (SIGKILL, crash:PAYLOAD): say why, it may be a bug.
          fprintf(stderr, "worker %zu exited on its own (%s %d); restarting\n", i,
                  WIFSIGNALED(status) ? "signal" : "status",
                  WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        }
        ++restarts_;
        ++w.generation;
        w.process =
            std::make_unique<ChildProcess>(Argv(w.spec), w.spec.env, LogPath(static_cast<int>(i)));
      }
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

void FaultScenario::Monitor() {
  const std::string sql = UnownedPartsSql(options_.parts);
  const std::string owners_sql = absl::StrCat(
      "SELECT sp.part, coalesce(s.instance_id, s.id::text) FROM partq.session_parts sp JOIN "
      "partq.sessions s ON s.id = sp.session_id WHERE sp.queue = '",
      kQueue, "'");
  std::vector<absl::Time> since(options_.parts, absl::InfiniteFuture());
  std::vector<std::string> owner(options_.parts);  // the last member seen owning each part
  std::unique_ptr<pqxx::connection> conn;
  while (!stop_) {
    absl::SleepFor(absl::Milliseconds(30));
    {
      absl::MutexLock lock(&mon_mu_);
      if (!monitoring_) {
        std::fill(since.begin(), since.end(), absl::InfiniteFuture());
        continue;
      }
    }
    std::vector<bool> unowned(options_.parts, false);
    std::vector<std::string> now_owner(options_.parts);
    try {
      if (conn == nullptr) conn = std::make_unique<pqxx::connection>(dsn_);
      pqxx::nontransaction tx(*conn);
      for (const auto& row : tx.exec(sql)) unowned[row[0].as<int>()] = true;
      for (const auto& row : tx.exec(owners_sql)) {
        now_owner[row[0].as<int>()] = row[1].as<std::string>();
      }
    } catch (const std::exception&) {
      // The server is restarting: no sample. A stretch that began before
      // the outage keeps running until a sample shows the part owned.
      conn.reset();
      continue;
    }
    const absl::Time now = absl::Now();
    absl::MutexLock lock(&mon_mu_);
    for (int p = 0; p < options_.parts; ++p) {
      if (!now_owner[p].empty()) {
        if (!owner[p].empty() && owner[p] != now_owner[p]) ++moves_;
        owner[p] = now_owner[p];
      }
      if (unowned[p] && since[p] == absl::InfiniteFuture()) since[p] = now;
      if (since[p] != absl::InfiniteFuture()) {
        max_unowned_ = std::max(max_unowned_, now - since[p]);
        if (!unowned[p]) since[p] = absl::InfiniteFuture();
      }
    }
  }
}

int64_t FaultScenario::moves() const {
  absl::MutexLock lock(&mon_mu_);
  return moves_;
}

absl::Duration FaultScenario::max_unowned() const {
  absl::MutexLock lock(&mon_mu_);
  return max_unowned_;
}

int64_t FaultScenario::Left() {
  auto r =
      TryQuery(dsn_, absl::StrCat("SELECT count(*) FROM partq.items WHERE queue = '", kQueue, "'"));
  if (!r) return -1;
  return (*r)[0][0].as<int64_t>();
}

int64_t FaultScenario::LiveSessions() {
  // The scenario's queue's: a worker of several queues has a session in each.
  auto r = TryQuery(dsn_, absl::StrCat("SELECT count(*) FROM partq.sessions WHERE queue = '",
                                       kQueue, "' AND expires_at > now()"));
  return r ? (*r)[0][0].as<int64_t>() : -1;
}

bool FaultScenario::WaitAllOwned(absl::Duration timeout) {
  const std::string sql = UnownedPartsSql(options_.parts);
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    auto r = TryQuery(dsn_, sql);
    if (r && r->empty()) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

CheckResult FaultScenario::Run(absl::Duration every, const std::function<int(int)>& inject,
                               const std::function<int64_t()>& count_after) {
  const absl::Time start = absl::Now();
  EXPECT_TRUE(WaitAllOwned(absl::Seconds(60))) << "the fleet never owned every part";
  {
    absl::MutexLock lock(&mon_mu_);
    monitoring_ = true;
  }
  int round = 0;
  absl::Time next = absl::Now() + every;
  while (absl::Now() - start < options_.deadline) {
    const int64_t left = Left();
    if (left == 0) break;
    if (absl::Now() >= next) {
      faults_ += inject(round++);
      next = absl::Now() + every;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  // Faults are over; every part must find a live owner again within the
  // protocol's bound (TTL plus a rebalance tick), with a wide margin for a
  // loaded machine.
  CheckResult r;
  if (!WaitAllOwned(options_.ttl * 5 + absl::Seconds(20))) {
    auto rows = TryQuery(dsn_, UnownedPartsSql(options_.parts));
    r.unowned_parts_at_end = rows ? static_cast<int64_t>(rows->size()) : options_.parts;
  }
  // And every supervised worker has a live session again.
  r.workers_at_end = static_cast<int64_t>(Active().size());
  const absl::Time sessions_deadline = absl::Now() + options_.ttl * 5 + absl::Seconds(20);
  while ((r.sessions_at_end = LiveSessions()) != r.workers_at_end &&
         absl::Now() < sessions_deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  {
    absl::MutexLock lock(&mon_mu_);
    monitoring_ = false;
  }
  stop_ = true;
  if (supervisor_.joinable()) supervisor_.join();
  {
    absl::MutexLock lock(&mu_);
    for (auto& w : workers_) {
      w.process->Signal(SIGCONT);
      w.process->Signal(SIGTERM);
    }
    for (auto& w : workers_) {
      if (!w.process->Wait(absl::Seconds(30))) {
        ADD_FAILURE() << "worker " << w.process->pid() << " did not stop on SIGTERM in 30s";
        w.process->Signal(SIGKILL);
        w.process->Wait(absl::Seconds(10));
      }
    }
  }
  if (count_after) faults_ += count_after();
  const CheckResult at_end = r;
  r = Check();
  r.unowned_parts_at_end = at_end.unowned_parts_at_end;
  r.sessions_at_end = at_end.sessions_at_end;
  r.workers_at_end = at_end.workers_at_end;
  printf("%s wall_s=%.1f\n", Summary(r).c_str(), absl::ToDoubleSeconds(absl::Now() - start));
  fflush(stdout);
  return r;
}

CheckResult FaultScenario::Check() {
  CheckResult r;
  r.items = static_cast<int64_t>(enqueued_.size());
  std::map<int64_t, int64_t> recorded;
  std::set<int64_t> dead;
  std::set<std::string> errors;
  const std::string in_queue = absl::StrCat(" WHERE queue = '", kQueue, "'");
  auto effects = TryQuery(dsn_, options_.done_sql);
  auto dead_rows = TryQuery(dsn_, "SELECT id, last_error FROM partq.dead_items" + in_queue);
  auto left = TryQuery(dsn_, "SELECT count(*) FROM partq.items" + in_queue);
  if (!effects || !dead_rows || !left) {
    ADD_FAILURE() << "checker could not read the database";
    r.lost = r.items;
    return r;
  }
  for (const auto& row : *effects) recorded[row[0].as<int64_t>()] = row[1].as<int64_t>();
  for (const auto& row : *dead_rows) {
    dead.insert(row[0].as<int64_t>());
    errors.insert(row[1].as<std::string>());
  }
  r.left = (*left)[0][0].as<int64_t>();
  for (const auto& [id, n] : recorded) {
    r.duplicates += n - 1;
    if (dead.count(id)) ++r.duplicates;
    if (!enqueued_.count(id)) ++r.phantom;
  }
  for (int64_t id : dead) {
    if (!enqueued_.count(id)) ++r.phantom;
  }
  for (const auto& [id, payload] : enqueued_) {
    if (!recorded.count(id) && !dead.count(id)) ++r.lost;
  }
  r.recorded = static_cast<int64_t>(recorded.size());
  r.dead = static_cast<int64_t>(dead.size());
  r.dead_errors.assign(errors.begin(), errors.end());
  return r;
}

std::string FaultScenario::Summary(const CheckResult& r) const {
  return absl::StrFormat(
      "scenario=%s items=%d faults=%d duplicates=%d lost=%d dead=%d max_unowned_ms=%d "
      "restarts=%d",
      options_.name, r.items, faults_, r.duplicates, r.lost, r.dead,
      absl::ToInt64Milliseconds(max_unowned()), restarts_.load());
}

FaultScenario::LoggedStats FaultScenario::Logged() {
  LoggedStats s;
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < workers_.size(); ++i) {
    std::ifstream in(LogPath(static_cast<int>(i)));
    for (std::string line; std::getline(in, line);) {
      long long a, r, t, d, f;
      // After the line's time and level ("12:00:00.000 I ").
      const size_t at = line.find("partq: worker stopped: ");
      if (at != std::string::npos &&
          sscanf(line.c_str() + at,
                 "partq: worker stopped: %lld acked, %lld retried, %lld throttled (back without "
                 "using an attempt), %lld dead-lettered, %lld fenced",
                 &a, &r, &t, &d, &f) == 5) {
        s.acked += a;
        s.retried += r;
        s.throttled += t;
        s.dead += d;
        s.fenced += f;
      }
    }
  }
  return s;
}

std::vector<std::string> FaultScenario::LogPaths() {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (size_t i = 0; i < workers_.size(); ++i) out.push_back(LogPath(static_cast<int>(i)));
  return out;
}

void FaultScenario::DumpLogs() {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < workers_.size(); ++i) {
    std::ifstream in(LogPath(static_cast<int>(i)));
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    fprintf(stderr, "--- worker %zu (%zu log lines, last 15)\n", i, lines.size());
    for (size_t k = lines.size() > 15 ? lines.size() - 15 : 0; k < lines.size(); ++k) {
      fprintf(stderr, "  %s\n", lines[k].c_str());
    }
  }
}

}  // namespace partq::testing
