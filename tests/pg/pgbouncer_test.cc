// partq behind a real PgBouncer (Debian's pgbouncer 1.18), started here on a
// free port in front of the suite's PostgreSQL (TestDsn): auth_type trust,
// a pool of 4 server connections, so in transaction mode the transactions of
// the many client connections below really move between server connections.
//
// Transaction mode with --pool-mode transaction: the CLI, workers (record:
// and sql: handlers) draining exactly once. Transaction mode without it: a
// clear error, not a hang. Session mode: LISTEN wakes a worker.
#include <libpq-fe.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/observability/scrape.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using testing::ChildProcess;
using testing::PartqResult;
using testing::ReadFile;

// One PgBouncer in `pool_mode`, `pool_size` server connections, in front of the server of
// `server_dsn`, as its database "partq"; stopped and its directory removed on destruction (its log
// kept when the test failed).
class PgBouncer {
 public:
  static absl::StatusOr<std::unique_ptr<PgBouncer>> Start(const std::string& server_dsn,
                                                          const std::string& pool_mode,
                                                          int pool_size) {
    std::string binary = testing::FindInPath("pgbouncer");
    if (binary.empty() && access("/usr/sbin/pgbouncer", X_OK) == 0) binary = "/usr/sbin/pgbouncer";
    if (binary.empty()) {
      return absl::FailedPreconditionError(
          "no pgbouncer (install Debian's pgbouncer: scripts/lib.sh PARTQ_PACKAGES)");
    }
    // Where the server is, as libpq reads the suite's DSN.
    std::map<std::string, std::string> server = {{"host", "127.0.0.1"}, {"port", "5432"}};
    char* error = nullptr;
    PQconninfoOption* options = PQconninfoParse(server_dsn.c_str(), &error);
    if (options == nullptr) {
      std::string message = error != nullptr ? error : "";
      PQfreemem(error);
      return absl::InvalidArgumentError(absl::StrCat("the suite's DSN: ", message));
    }
    for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
      if (o->val != nullptr && *o->val != '\0') server[o->keyword] = o->val;
    }
    PQconninfoFree(options);
    if (!server.count("user")) server["user"] = "postgres";
    if (!server.count("dbname")) server["dbname"] = server["user"];

    std::unique_ptr<PgBouncer> b(new PgBouncer());
    std::string tmpl = (std::filesystem::temp_directory_path() / "partq-pgbouncer-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return absl::InternalError("mkdtemp");
    b->dir_ = tmpl;
    // Readable by the server user pgbouncer runs as (it refuses root); it
    // writes nothing here: its log goes to the child's output.
    chmod(b->dir_.c_str(), 0755);
    b->port_ = testing::FreePort();
    b->user_ = server["user"];
    std::string target;
    for (const char* key : {"host", "port", "dbname", "user", "password"}) {
      if (server.count(key)) absl::StrAppend(&target, " ", key, "=", server[key]);
    }
    std::ofstream(b->dir_ + "/userlist.txt") << "\"" << b->user_ << "\" \"\"\n";
    std::ofstream(b->dir_ + "/pgbouncer.ini")
        << "[databases]\npartq =" << target << "\n\n[pgbouncer]\n"
        << "listen_addr = 127.0.0.1\nlisten_port = " << b->port_ << "\n"
        << "unix_socket_dir =\nauth_type = trust\nauth_file = " << b->dir_ << "/userlist.txt\n"
        << "pool_mode = " << pool_mode << "\n"
        << "default_pool_size = " << pool_size << "\nmax_client_conn = 500\n";
    b->log_ = b->dir_ + "/pgbouncer.log";
    b->process_ =
        std::make_unique<ChildProcess>(testing::AsServerOwner({binary, b->dir_ + "/pgbouncer.ini"}),
                                       std::map<std::string, std::string>{}, b->log_);
    const bool up = testing::WaitUntil(
        [&] {
          if (!b->process_->Running()) return true;
          try {
            pqxx::connection c(b->Dsn());
            pqxx::nontransaction(c).exec("SELECT 1");
            return true;
          } catch (const std::exception&) {
            return false;
          }
        },
        absl::Seconds(30), absl::Milliseconds(50));
    if (!up || !b->process_->Running()) {
      return absl::UnavailableError(
          absl::StrCat("pgbouncer did not start; its log:\n", ReadFile(b->log_)));
    }
    return b;
  }

  ~PgBouncer() {
    if (process_ != nullptr) {
      process_->Signal(SIGINT);  // "safe shutdown"; the destructor kills it if need be
      process_->Wait(absl::Seconds(10));
      process_.reset();
    }
    const bool failed = ::testing::Test::HasFailure();
    if (failed) std::fprintf(stderr, "pgbouncer's log:\n%s\n", ReadFile(log_).c_str());
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string Dsn() const {
    return absl::StrCat("host=127.0.0.1 port=", port_, " user=", user_, " dbname=partq");
  }

 private:
  PgBouncer() = default;
  std::string dir_, log_, user_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

class PgBouncerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::BitGen gen;
    schema_ = absl::StrCat("t_pgb_", absl::Uniform<uint64_t>(gen));
  }
  void TearDown() override {
    workers_.clear();  // killed, if still running
    testing::Query(testing::TestDsn(), absl::StrCat("DROP SCHEMA IF EXISTS ", schema_, " CASCADE"));
    for (const std::string& log : logs_) std::remove(log.c_str());
  }

  // In session mode each client connection holds a server connection for
  // its life, so the pool must have one for every connection partq opens.
  void StartBouncer(const std::string& pool_mode, int pool_size = 4) {
    auto b = PgBouncer::Start(testing::TestDsn(), pool_mode, pool_size);
    ASSERT_TRUE(b.ok()) << b.status();
    bouncer_ = std::move(*b);
  }

  // `args` through the bouncer, on this test's schema, with `extra`
  // (--pool-mode transaction, or nothing).
  std::vector<std::string> Through(std::vector<std::string> args,
                                   const std::vector<std::string>& extra) const {
    args.insert(args.end(), {"--dsn", bouncer_->Dsn(), "--schema", schema_});
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  PartqResult Run(const std::vector<std::string>& args, const std::string& input = "") const {
    return testing::Partq(Through(args, mode_), input);
  }

  // `partq worker QUEUE args...` through the bouncer, logging to a file of its own.
  ChildProcess& StartWorker(const std::string& queue, const std::vector<std::string>& args) {
    char tmpl[] = "/tmp/partq-pgbouncer-worker-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd >= 0) close(fd);
    logs_.push_back(tmpl);
    std::vector<std::string> argv = {testing::PartqBinary(), "worker", queue};
    for (const std::string& a : Through(args, mode_)) argv.push_back(a);
    workers_.push_back(
        std::make_unique<ChildProcess>(argv, std::map<std::string, std::string>{}, logs_.back()));
    return *workers_.back();
  }
  // Stops every worker with SIGTERM; each must drain and exit 0.
  void StopWorkers() {
    for (auto& w : workers_) w->Signal(SIGTERM);
    for (size_t i = 0; i < workers_.size(); ++i) {
      std::optional<int> status = workers_[i]->Wait(absl::Seconds(30));
      EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
          << "worker " << i << ":\n"
          << ReadFile(logs_[i]);
    }
    workers_.clear();
  }
  std::string WorkerLogs() const {
    std::string out;
    for (const std::string& l : logs_) absl::StrAppend(&out, l, ":\n", ReadFile(l), "\n");
    return out;
  }

  // Straight to the server, for assertions.
  int64_t QInt(const std::string& sql) const {
    return testing::QueryInt(testing::TestDsn(), absl::StrReplaceAll(sql, {{"{schema}", schema_}}));
  }

  std::string schema_;
  std::unique_ptr<PgBouncer> bouncer_;
  std::vector<std::string> mode_ = {"--pool-mode", "transaction"};
  std::vector<std::unique_ptr<ChildProcess>> workers_;
  std::vector<std::string> logs_;
};

std::string Lines(int from, int to) {
  std::string out;
  for (int i = from; i <= to; ++i) absl::StrAppend(&out, "payload-", i, "\n");
  return out;
}

// The commands a user runs, each a new client of the pool.
TEST_F(PgBouncerTest, TheCliWorksThroughATransactionPooler) {
  StartBouncer("transaction");
  PartqResult r = Run({"migrate"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = Run({"migrate"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (int i = 0; i < 2; ++i) {
    r = Run({"queue", "create", "q", "--parts", "8"});
    ASSERT_EQ(r.code, 0) << r.err;
  }
  r = Run({"queue", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "q")) << r.out;
  // Ten single enqueues (the report: 9 of 10 failed) and one with a key
  // and a dedup key.
  for (int i = 0; i < 10; ++i) {
    r = Run({"enqueue", "q", absl::StrCat("single-", i)});
    EXPECT_EQ(r.code, 0) << r.err;
  }
  r = Run({"enqueue", "q", "--key", "k", "--dedup-key", "d-1", "keyed"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = Run({"enqueue", "q", "--stdin", "--chunk", "40"}, Lines(1, 100));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(QInt("SELECT count(*) FROM {schema}.items"), 111);
  r = Run({"status", "q"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "111 ready")) << r.out;
  r = Run({"status", "q", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;

  // wait: not done yet, then done once a worker acked it.
  r = Run({"wait", "q", "--dedup-key", "d-1", "--timeout", "200ms"});
  EXPECT_EQ(r.code, 3) << r.err;
  StartWorker("q", {"--handler", "record:effects", "--poll-interval", "100ms", "--quiet"});
  r = Run({"wait", "q", "--dedup-key", "d-1", "--timeout", "60s"});
  EXPECT_EQ(r.code, 0) << r.err << WorkerLogs();
  ASSERT_TRUE(testing::WaitUntil([&] { return QInt("SELECT count(*) FROM {schema}.items") == 0; },
                                 absl::Seconds(60)))
      << WorkerLogs();
  StopWorkers();
  EXPECT_EQ(QInt("SELECT count(*) FROM {schema}.effects"), 111);
  EXPECT_EQ(QInt("SELECT count(DISTINCT item_id) FROM {schema}.effects"), 111);
}

// Several workers on 4 server connections drain a queue through a record:
// handler and another through a sql: handler, each item exactly once; the
// sql: handler's statement sees jit off in its transaction. --pool-mode
// transaction implies --poll-only: half the workers say it, half do not.
TEST_F(PgBouncerTest, WorkersDrainExactlyOnceThroughATransactionPooler) {
  StartBouncer("transaction");
  ASSERT_EQ(Run({"migrate"}).code, 0);
  ASSERT_EQ(Run({"queue", "create", "rec", "--parts", "16"}).code, 0);
  ASSERT_EQ(Run({"queue", "create", "sq", "--parts", "4", "--ordered"}).code, 0);
  testing::Query(testing::TestDsn(),
                 absl::StrCat("CREATE TABLE ", schema_, ".sql_effects (item_id bigint, jit text)"));
  constexpr int kRecords = 20000, kSql = 2000;
  PartqResult r = Run({"enqueue", "rec", "--stdin"}, Lines(1, kRecords));
  ASSERT_EQ(r.code, 0) << r.err;
  r = Run({"enqueue", "sq", "--stdin"}, Lines(1, kSql));
  ASSERT_EQ(r.code, 0) << r.err;

  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> args = {
        "--handler", "record:effects",  "--concurrency", "2", "--batch",
        "50",        "--poll-interval", "100ms"};
    if (i % 2 == 0) args.push_back("--poll-only");
    StartWorker("rec", args);
  }
  const std::string sql =
      absl::StrCat("sql:INSERT INTO ", schema_, ".sql_effects VALUES ($1, current_setting('jit'))");
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> args = {"--handler",       sql,    "--concurrency", "2",
                                     "--poll-interval", "100ms"};
    if (i % 2 == 0) args.push_back("--poll-only");
    StartWorker("sq", args);
  }
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        for (auto& w : workers_) {
          if (!w->Running()) return true;  // reported below
        }
        return QInt("SELECT count(*) FROM {schema}.items") == 0;
      },
      absl::Minutes(3), absl::Milliseconds(100)))
      << WorkerLogs();
  for (size_t i = 0; i < workers_.size(); ++i) {
    ASSERT_TRUE(workers_[i]->Running()) << "worker " << i << " exited:\n" << ReadFile(logs_[i]);
  }
  ASSERT_EQ(QInt("SELECT count(*) FROM {schema}.items"), 0);
  StopWorkers();
  EXPECT_EQ(QInt("SELECT count(*) FROM {schema}.effects"), kRecords);
  EXPECT_EQ(QInt("SELECT count(DISTINCT item_id) FROM {schema}.effects"), kRecords);
  EXPECT_EQ(QInt("SELECT count(*) FROM {schema}.sql_effects"), kSql);
  EXPECT_EQ(QInt("SELECT count(DISTINCT item_id) FROM {schema}.sql_effects"), kSql);
  EXPECT_EQ(QInt("SELECT count(*) FROM {schema}.sql_effects WHERE jit = 'off'"), kSql);
  EXPECT_EQ(QInt("SELECT count(*) FROM {schema}.dead_items"), 0);
}

// Without --pool-mode, partq prepares statements by name, and the pool hands
// the next statement (or the next process) another server connection: each
// command must end, quickly, with an error that says what to set.
TEST_F(PgBouncerTest, WithoutThePoolModeATransactionPoolerFailsWithAClearError) {
  StartBouncer("transaction");
  mode_.clear();
  {
    // Set up straight on the server.
    PgOptions o;
    o.dsn = testing::TestDsn();
    o.schema = schema_;
    auto store = ConnectPg(o);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Migrate().ok());
    QueueConfig q;
    q.name = "q";
    q.parts = 4;
    ASSERT_TRUE((*store)->CreateQueue(q).ok());
  }
  int failed = 0;
  for (int i = 0; i < 4; ++i) {
    char tmpl[] = "/tmp/partq-pgbouncer-enqueue-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd >= 0) close(fd);
    logs_.push_back(tmpl);
    std::vector<std::string> argv = {testing::PartqBinary()};
    for (const std::string& a : Through({"enqueue", "q", absl::StrCat("x", i)}, {})) {
      argv.push_back(a);
    }
    ChildProcess enqueue(argv, {}, logs_.back());
    std::optional<int> status = enqueue.Wait(absl::Seconds(60));
    ASSERT_TRUE(status.has_value()) << "enqueue " << i << " hung:\n" << ReadFile(logs_.back());
    if (WIFEXITED(*status) && WEXITSTATUS(*status) == 0) continue;
    ++failed;
    const std::string err = ReadFile(logs_.back());
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << err;
    EXPECT_TRUE(absl::StrContains(err, "--pool-mode transaction")) << err;
    EXPECT_TRUE(absl::StrContains(err, "prepared statement")) << err;
  }
  EXPECT_GE(failed, 1) << "the pool reuses its last server connection, where the first "
                          "enqueue left its prepared statement";
}

// In session mode a client keeps its server connection, so LISTEN works: a
// worker without --poll-only, polling only every minute, picks an item up
// on its notice.
TEST_F(PgBouncerTest, ASessionPoolerPassesNoticesToAListeningWorker) {
  StartBouncer("session", /*pool_size=*/20);
  mode_ = {"--pool-mode", "session"};
  ASSERT_EQ(Run({"migrate"}).code, 0);
  ASSERT_EQ(Run({"queue", "create", "q", "--parts", "4"}).code, 0);
  StartWorker("q", {"--handler", "record:effects", "--poll-interval", "60s"});
  // Once the worker took its first item, it has read its parts: the next
  // one can only come to it by its notice (or a minute later).
  ASSERT_EQ(Run({"enqueue", "q", "first"}).code, 0);
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        return testing::QueryInt(testing::TestDsn(),
                                 absl::StrCat("SELECT count(*) FROM pg_tables WHERE schemaname = '",
                                              schema_, "' AND tablename = 'effects'")) == 1 &&
               QInt("SELECT count(*) FROM {schema}.effects") == 1;
      },
      absl::Seconds(60), absl::Milliseconds(20)))
      << WorkerLogs();
  const absl::Time enqueued = absl::Now();
  ASSERT_EQ(Run({"enqueue", "q", "second"}).code, 0);
  ASSERT_TRUE(testing::WaitUntil([&] { return QInt("SELECT count(*) FROM {schema}.effects") == 2; },
                                 absl::Seconds(50), absl::Milliseconds(10)))
      << WorkerLogs();
  const absl::Duration took = absl::Now() - enqueued;
  std::printf("[ pgbouncer ] session mode: picked up %s after the enqueue began (poll: 60s)\n",
              absl::FormatDuration(took).c_str());
  EXPECT_LT(took, absl::Seconds(20)) << "well before the poll interval";
  StopWorkers();
}

}  // namespace
}  // namespace partq
