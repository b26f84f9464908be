// Bad input to the real `partq` binary: each case must end with a clear
// message on stderr, a non-zero exit status (2 for usage errors, 1 for the
// rest) and nothing written to the database.
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/utf8.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pg/embedded_postgres.h"
#include "tests/observability/scrape.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using testing::Partq;
using testing::TestSchema;
using Result = testing::PartqResult;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result r = Partq(With({"queue", "create", "q", "--parts", "4"}));
    ASSERT_EQ(r.code, 0) << r.err;
  }

  // `args` plus this test's --dsn and --schema.
  std::vector<std::string> With(std::vector<std::string> args) const {
    args.insert(args.end(), {"--dsn", schema_.dsn(), "--schema", schema_.name()});
    return args;
  }

  // Starts `partq worker QUEUE EXTRA...` for this test's schema, its output
  // in a file of its own (`*log`; the caller removes it).
  std::unique_ptr<testing::ChildProcess> StartWorker(const std::string& queue,
                                                     const std::vector<std::string>& extra,
                                                     std::string* log) const {
    char tmpl[] = "/tmp/partq-worker-log-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd >= 0) close(fd);
    *log = tmpl;
    std::vector<std::string> args = {"worker", queue};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<std::string> argv = {testing::PartqBinary()};
    for (const auto& a : With(args)) argv.push_back(a);
    return std::make_unique<testing::ChildProcess>(argv, std::map<std::string, std::string>{},
                                                   *log);
  }

  int64_t Items() const { return schema_.QInt("SELECT count(*) FROM {schema}.items"); }
  int64_t Queues() const { return schema_.QInt("SELECT count(*) FROM {schema}.queues"); }

  // Exit status `code`, stderr containing `message`, nothing on stdout, and
  // no item or queue written.
  void ExpectRejected(const std::vector<std::string>& args, int code, const std::string& message,
                      const std::string& input = "") {
    SCOPED_TRACE(
        absl::StrCat("partq ", args.empty() ? "" : args[0], " ... expecting \"", message, "\""));
    Result r = Partq(args, input);
    EXPECT_EQ(r.code, code) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, message)) << "stderr: " << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(Items(), 0);
    EXPECT_EQ(Queues(), 1);
  }

  TestSchema schema_;
};

TEST_F(BadInputTest, UnknownQueue) {
  const std::string msg = absl::StrCat(
      "unknown queue \"nosuch\" in schema \"", schema_.name(),
      "\" (create it with: partq queue create nosuch --parts N --schema ", schema_.name(), ")");
  ExpectRejected(With({"enqueue", "nosuch", "hello"}), 1, msg);
  ExpectRejected(With({"enqueue", "nosuch", "--stdin"}), 1, msg, "a\nb\n");
  ExpectRejected(With({"worker", "nosuch"}), 1, msg);
  for (const std::vector<std::string>& worker :
       {std::vector<std::string>{"worker", "nosuch"}, {"worker", "q", "nosuch"}}) {
    Result alone = Partq(With(worker));
    EXPECT_FALSE(absl::StrContains(alone.err, "no --handler"))
        << "its error comes alone: " << alone.err;
  }
  // Several queues: one unknown is named, and nothing starts.
  ExpectRejected(With({"worker", "q", "nosuch"}), 1, msg);
  ExpectRejected(With({"status", "nosuch"}), 1, msg);
  ExpectRejected(With({"wait", "nosuch", "1", "--timeout", "1s"}), 1, msg);
}

TEST_F(BadInputTest, InvalidQueueNames) {
  for (const std::string& name :
       {std::string("q; DROP TABLE items"), std::string("q'--"), std::string("\"q\""),
        std::string("q)"), std::string(64, 'a'), std::string(""), std::string("q\\x00"),
        std::string("q name"), std::string(".q")}) {
    ExpectRejected(With({"queue", "create", name, "--parts", "4"}), 2, "invalid queue name");
    ExpectRejected(With({"enqueue", name, "payload"}), 2, "invalid queue name");
    ExpectRejected(With({"worker", name}), 2, "invalid queue name");
    ExpectRejected(With({"worker", "q", name}), 2, "invalid queue name");
  }
  ExpectRejected(With({"worker", "q", "q"}), 2, "queue \"q\" is named twice");
  ExpectRejected(With({"worker", "q", "--queue", "q:batch=5", "--queue", "q:batch=6"}), 2,
                 "--queue q: queue \"q\" is given twice");
  ExpectRejected(With({"worker", "--queue", "q:concurrency=0"}), 2,
                 "--queue q: concurrency must be between 1 and 1024, not \"0\"");
  ExpectRejected(With({"worker", "--queue", "q:batch=10001"}), 2,
                 "--queue q: batch must be between 1 and 10000, not \"10001\"");
  ExpectRejected(With({"worker", "--queue", "q:handler-timeout=forever"}), 2,
                 "--queue q: handler-timeout must be a duration from 1ms to 24h, not \"forever\"");
  ExpectRejected(With({"worker", "--queue", "q:bogus=1"}), 2,
                 "--queue q: \"bogus=1\" is not one of concurrency=N, batch=N, "
                 "handler-timeout=DURATION or handler=SPEC (last)");
  ExpectRejected(With({"worker", "--queue", "q:handler="}), 2, "--queue q: handler= is empty");
  ExpectRejected(With({"worker", "--queue", "q;x:batch=1"}), 2, "invalid queue name");
  // --queues-file: the same entries, each error at its file and line; nothing starts.
  char tmpl[] = "/tmp/partq-queues-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string file = dir + "/queues";
  auto queues_file = [&](const std::string& text) {
    std::ofstream(file, std::ios::trunc) << text;
    return With({"worker", "--queues-file", file});
  };
  ExpectRejected(queues_file("# a\nq:batch=0\n"), 2,
                 file + ":2: queue q: batch must be between 1 and 10000, not \"0\"");
  ExpectRejected(queues_file("q\n\n  q:batch=5\n"), 2,
                 file + ":3: queue \"q\" is given twice: put its settings in one");
  ExpectRejected(queues_file("q;x\n"), 2, file + ":1: invalid queue name");
  ExpectRejected(queues_file("q:handler=\n"), 2, file + ":1: queue q: handler= is empty");
  ExpectRejected(queues_file("# nothing\n\n"), 2, "names no queue (one NAME[:SETTINGS] a line)");
  std::ofstream(file, std::ios::trunc) << "q:batch=5\n";
  ExpectRejected(With({"worker", "--queue", "q:batch=6", "--queues-file", file}), 2,
                 file + ":1: queue \"q\" is given twice");
  ExpectRejected(With({"worker", "--queues-file", dir + "/nosuch"}), 2,
                 "--queues-file: cannot read \"" + dir + "/nosuch\"");
  std::filesystem::remove_all(dir);
  // A name that looks like an option is refused as one.
  ExpectRejected(With({"queue", "create", "-q", "--parts", "4"}), 2, "unknown option \"-q\"");
  // 63 characters is the limit, not an error.
  Result ok = Partq(With({"queue", "create", std::string(63, 'a'), "--parts", "1"}));
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(Queues(), 2);
}

TEST_F(BadInputTest, InvalidSchemaNames) {
  for (const std::string& schema :
       {std::string("x; DROP SCHEMA public"), std::string("x\""), std::string("X"),
        std::string(64, 'a'), std::string(""), std::string("pg_x"), std::string("1x"),
        std::string("information_schema"), std::string("pg_catalog")}) {
    Result r = Partq({"enqueue", "q", "x", "--dsn", schema_.dsn(), "--schema", schema});
    EXPECT_EQ(r.code, 2) << schema;
    EXPECT_TRUE(absl::StrContains(r.err, "invalid schema name")) << r.err;
    r = Partq({"migrate", "--dsn", schema_.dsn(), "--schema", schema});
    EXPECT_EQ(r.code, 2) << schema;
    EXPECT_TRUE(absl::StrContains(r.err, "invalid schema name")) << r.err;
  }
  EXPECT_EQ(Items(), 0);
}

TEST_F(BadInputTest, OutOfRangeParts) {
  for (const char* parts : {"0", "4097", "-1"}) {
    ExpectRejected(With({"queue", "create", "p", "--parts", parts}), 2,
                   "--parts must be between 1 and 4096");
  }
  ExpectRejected(With({"queue", "create", "p", "--parts", "abc"}), 2,
                 "--parts: \"abc\" is not a whole number");
  ExpectRejected(With({"queue", "create", "p", "--parts", "1.5"}), 2, "is not a whole number");
  ExpectRejected(With({"queue", "create", "p", "--parts", "99999999999999999999"}), 2,
                 "--parts: \"99999999999999999999\" is not a whole number");
  ExpectRejected(
      {"queue", "create", "p", "--dsn", schema_.dsn(), "--schema", schema_.name(), "--parts"}, 2,
      "--parts needs a value");
  ExpectRejected(With({"queue", "create", "p"}), 2, "queue create needs --parts N");
}

// A worker whose queue is deleted under it stops with an error that says so
// (exit 1), quickly and without flooding its log: it used to retry the
// re-join at once, thousands of times a second, for ever.
TEST_F(BadInputTest, WorkerOfADeletedQueueStopsAndSaysWhy) {
  // A TTL of an hour: the worker heartbeats every 20 minutes, so only the
  // delete's notice can stop it within the bound below.
  Result made = Partq(With({"queue", "create", "slow", "--parts", "4", "--session-ttl", "1h"}));
  ASSERT_EQ(made.code, 0) << made.err;
  std::string log;
  auto worker = StartWorker("slow", {"--handler", "noop"}, &log);
  ASSERT_TRUE(testing::WaitUntil([&] { return absl::StrContains(ReadFile(log), "joined"); },
                                 absl::Seconds(30)));
  Result del = Partq(With({"queue", "delete", "slow"}));
  ASSERT_EQ(del.code, 0) << del.err;
  // The delete's notice makes it re-read the group at once; it then drains.
  // The bound is for a loaded machine, where that has taken over 10 s.
  const std::optional<int> status = worker->Wait(absl::Seconds(60));
  ASSERT_TRUE(status.has_value()) << "the worker is still running:\n" << ReadFile(log);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << *status;
  const std::string out = ReadFile(log);
  EXPECT_TRUE(absl::StrContains(out, "partq: error: queue \"slow\" was deleted while this worker "
                                     "ran (partq queue delete); nothing is left to work on\n"))
      << out;
  EXPECT_LT(std::count(out.begin(), out.end(), '\n'), 12) << out;
  std::remove(log.c_str());
}

// A password in --dsn (`--dsn V` and `--dsn=V`) is not left in the command
// line other local users can read (/proc/PID/cmdline, ps), while the worker
// runs on that DSN; nor is the client key's passphrase (sslpassword).
TEST_F(BadInputTest, APasswordInTheDsnIsHiddenFromTheCommandLine) {
  std::vector<std::unique_ptr<testing::ChildProcess>> workers;
  std::vector<std::string> logs;
  for (const bool joined : {false, true, true}) {
    const std::string key = workers.size() == 2 ? "sslpassword" : "password";
    const std::string dsn = absl::StrCat(schema_.dsn(), " ", key, "=s3cret-pw");
    char tmpl[] = "/tmp/partq-worker-log-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd >= 0) close(fd);
    logs.push_back(tmpl);
    std::vector<std::string> argv = {
        testing::PartqBinary(), "worker", "q", "--handler", "noop", "--schema", schema_.name()};
    if (joined) {
      argv.push_back("--dsn=" + dsn);
    } else {
      argv.insert(argv.end(), {"--dsn", dsn});
    }
    workers.push_back(std::make_unique<testing::ChildProcess>(
        argv, std::map<std::string, std::string>{}, logs.back()));
  }
  for (size_t i = 0; i < workers.size(); ++i) {
    ASSERT_TRUE(testing::WaitUntil([&] { return absl::StrContains(ReadFile(logs[i]), "joined"); },
                                   absl::Seconds(30)))
        << ReadFile(logs[i]);
    std::string cmdline = ReadFile(absl::StrCat("/proc/", workers[i]->pid(), "/cmdline"));
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    EXPECT_FALSE(absl::StrContains(cmdline, "s3cret")) << cmdline;
    EXPECT_TRUE(
        absl::StrContains(cmdline, i == 2 ? "sslpassword=xxxxxxxxx" : " password=xxxxxxxxx"))
        << cmdline;
    EXPECT_FALSE(absl::StrContains(ReadFile(logs[i]), "s3cret")) << ReadFile(logs[i]);
  }
  // They work on it: an item enqueued is acknowledged.
  Result e = Partq(With({"enqueue", "q", "x"}));
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_TRUE(testing::WaitUntil([&] { return Items() == 0; }, absl::Seconds(30)));
  for (auto& w : workers) w->Signal(SIGTERM);
  for (auto& w : workers) EXPECT_TRUE(w->Wait(absl::Seconds(20)).has_value());
  for (const auto& l : logs) std::remove(l.c_str());
}

// An http: handler's URL password (--handler, and --queue Q:handler=) is
// x'd out of the command line as a DSN's is (issue 48's second review), and
// so are its query string's values (a token there: the fourth review).
TEST_F(BadInputTest, AHandlerUrlsPasswordIsHiddenFromTheCommandLine) {
  char tmpl[] = "/tmp/partq-worker-log-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd >= 0) close(fd);
  testing::ChildProcess worker(
      {testing::PartqBinary(), "worker", "--queue", "q:handler=http://svc:h00k-pw@127.0.0.1:9/h",
       "--handler", "http://svc:h00k-pw2@127.0.0.1:9/h?x=1&token=h00k-tok#f", "--schema",
       schema_.name(), "--dsn", schema_.dsn()},
      std::map<std::string, std::string>{}, tmpl);
  ASSERT_TRUE(testing::WaitUntil([&] { return absl::StrContains(ReadFile(tmpl), "joined"); },
                                 absl::Seconds(30)))
      << ReadFile(tmpl);
  std::string cmdline = ReadFile(absl::StrCat("/proc/", worker.pid(), "/cmdline"));
  std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
  EXPECT_FALSE(absl::StrContains(cmdline, "h00k")) << cmdline;
  EXPECT_TRUE(absl::StrContains(cmdline, "q:handler=http://svc:xxxxxxx@127.0.0.1:9/h")) << cmdline;
  EXPECT_TRUE(absl::StrContains(cmdline, "http://svc:xxxxxxxx@127.0.0.1:9/h?x=x&token=xxxxxxxx#f"))
      << cmdline;
  worker.Signal(SIGTERM);
  EXPECT_TRUE(worker.Wait(absl::Seconds(20)).has_value());
  std::remove(tmpl);
}

// libpq quotes back what it cannot parse in a URI, the password with it: the
// message partq prints has it replaced.
TEST(BadConnection, AMalformedUriDoesNotPrintItsPassword) {
  for (const std::string& dsn : {std::string("postgresql://u:s3cret%zz@127.0.0.1:1/db"),
                                 std::string("postgresql://u:s3cret@[::1/db"),
                                 std::string("postgresql://127.0.0.1:1/db?%70assword=s3cret%zz")}) {
    Result r = Partq({"migrate", "--dsn", dsn});
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "malformed connection string")) << r.err;
    EXPECT_FALSE(absl::StrContains(r.err, "s3cret")) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "xxxxx")) << r.err;
  }
}

// What the CLI prints from the database is escaped for the terminal: a
// U+202E (RIGHT-TO-LEFT OVERRIDE) in a handler's error would show
// "exe.txt" as "txt.exe", an ESC sequence would drive the terminal.
TEST_F(BadInputTest, TextFromTheDatabaseIsEscapedForTheTerminal) {
  const std::string rlo = "\xE2\x80\xAE";
  const std::string error = "invoice" + rlo + "txt.exe \x1b[2J done";
  const int64_t id = schema_.QInt(
      "INSERT INTO {schema}.dead_items (id, queue, part, priority, attempts, enqueued_at, "
      "last_error, payload) VALUES (nextval('{schema}.items_id_seq'), 'q', 0, 0, 1, now(), "
      "convert_from('\\x" +
      absl::BytesToHexString(error) + "', 'UTF8'), '') RETURNING id");
  Result list = Partq(With({"dead", "list", "q"}));
  EXPECT_EQ(list.code, 0) << list.err;
  EXPECT_TRUE(absl::StrContains(list.out, "invoice\\u202etxt.exe \\x1b[2J done")) << list.out;
  Result json = Partq(With({"dead", "list", "q", "--json"}));
  EXPECT_EQ(json.code, 0) << json.err;
  EXPECT_TRUE(absl::StrContains(json.out, "invoice\\u202etxt.exe \\u001b[2J done")) << json.out;
  Result wait = Partq(With({"wait", "q", absl::StrCat(id), "--timeout", "1s"}));
  EXPECT_EQ(wait.code, 4) << wait.err;
  EXPECT_TRUE(absl::StrContains(wait.err, "invoice\\u202etxt.exe \\x1b[2J done")) << wait.err;
  for (const Result* r : {&list, &json, &wait}) {
    EXPECT_FALSE(absl::StrContains(r->out + r->err, rlo));
    EXPECT_FALSE(absl::StrContains(r->out + r->err, "\x1b"));
  }
}

// A bad value is echoed cut to a line, with its length: not a 100 KB message.
TEST_F(BadInputTest, ALongBadValueIsCutInTheMessage) {
  const std::string id(100000, 'g');
  ExpectRejected(With({"enqueue", "q", "x", "--group", id}), 2,
                 "invalid group id \"" + std::string(kMaxQuotedBytes, 'g') +
                     "\"... (100000 bytes) (use 1-200 bytes of text)");
  Result r = Partq(With({"enqueue", "q", "x", "--group", id}));
  EXPECT_LT(r.err.size(), 400u) << r.err.size();
  r = Partq(With({"queue", "create", std::string(100000, 'q') + "!", "--parts", "1"}));
  EXPECT_EQ(r.code, 2);
  EXPECT_LT(r.err.size(), 400u) << r.err.size();
  EXPECT_TRUE(absl::StrContains(r.err, "\"... (100001 bytes)")) << r.err;
}

// Keys are text: bytes that are not UTF-8 are refused before they reach the
// server, naming the flag, with --stdin too; nothing is written.
TEST_F(BadInputTest, AKeyThatIsNotUtf8IsRefusedNamingTheFlag) {
  const std::string bad = "k\xff\xfe";
  ExpectRejected(With({"enqueue", "q", "x", "--key", bad}), 2,
                 "--key \"k\\xff\\xfe\" is not valid UTF-8");
  ExpectRejected(With({"enqueue", "q", "x", "--dedup-key", bad}), 2,
                 "--dedup-key \"k\\xff\\xfe\" is not valid UTF-8");
  ExpectRejected(With({"enqueue", "q", "--stdin", "--key", bad}), 2, "--key \"k\\xff", "a\nb\n");
  ExpectRejected(With({"wait", "q", "--dedup-key", bad, "--timeout", "1s"}), 2,
                 "--dedup-key \"k\\xff");
  // Well-formed UTF-8 beyond ASCII is a key like any other.
  Result ok = Partq(With({"enqueue", "q", "x", "--key", "kunde-\xc3\xa4\xe2\x82\xac"}));
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(Items(), 1);
}

// `partq dead` refuses what it cannot mean before connecting.
TEST_F(BadInputTest, DeadSubcommandsAndIds) {
  ExpectRejected(With({"dead"}), 2, "dead needs a subcommand");
  ExpectRejected(With({"dead", "frob", "q"}), 2, "unknown dead subcommand \"frob\"");
  ExpectRejected(With({"dead", "list"}), 2, "usage: partq dead list QUEUE");
  ExpectRejected(With({"dead", "list", "q", "--limit", "0"}), 2, "--limit must be between");
  ExpectRejected(With({"dead", "requeue", "q"}), 2, "usage: partq dead requeue QUEUE ID...");
  ExpectRejected(With({"dead", "requeue", "q", "5", "--all"}), 2, "usage: partq dead requeue");
  ExpectRejected(With({"dead", "requeue", "q", "x1"}), 2, "item id must be a positive whole");
  ExpectRejected(With({"dead", "list", "nosuch"}), 1, "unknown queue \"nosuch\"");
  ExpectRejected(With({"dead", "requeue", "nosuch", "--all"}), 1, "unknown queue \"nosuch\"");
  // Ids that are not dead items of the queue: exit 1, after requeuing any that were.
  Result missing = Partq(With({"dead", "requeue", "q", "99999", "99998"}));
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.out, "requeued 0 items\n");
  EXPECT_TRUE(absl::StrContains(
      missing.err,
      "2 of the 2 ids are not dead items of q: 99998, 99999 (`partq dead list q` shows them)"))
      << missing.err;
  ExpectRejected(With({"dead", "delete", "q"}), 2, "usage: partq dead delete QUEUE ID...");
  ExpectRejected(With({"dead", "delete", "q", "5", "--all"}), 2, "usage: partq dead delete");
  ExpectRejected(With({"dead", "delete", "nosuch", "--all"}), 1, "unknown queue \"nosuch\"");
  // Deleting a queue that is not there: no hint to create it, which is no fix.
  Result no_queue = Partq(With({"queue", "delete", "nosuch"}));
  EXPECT_EQ(no_queue.code, 1);
  EXPECT_TRUE(absl::StrContains(no_queue.err, "unknown queue \"nosuch\"")) << no_queue.err;
  EXPECT_FALSE(absl::StrContains(no_queue.err, "create it with")) << no_queue.err;
  Result gone = Partq(With({"dead", "delete", "q", "99999"}));
  EXPECT_EQ(gone.code, 1);
  EXPECT_EQ(gone.out, "deleted 0 dead items\n");
  EXPECT_TRUE(absl::StrContains(
      gone.err, "1 of the 1 ids are not dead items of q: 99999 (`partq dead list q` shows them)"))
      << gone.err;
  Result all = Partq(With({"dead", "delete", "q", "--all"}));
  EXPECT_EQ(all.code, 0) << all.err;
  EXPECT_EQ(all.out, "deleted 0 dead items\n");
  Result none = Partq(With({"dead", "list", "q", "--json"}));
  EXPECT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(absl::StripAsciiWhitespace(none.out), "[]");
  // As text, an empty list says so instead of printing a bare header.
  Result empty = Partq(With({"dead", "list", "q"}));
  EXPECT_EQ(empty.code, 0) << empty.err;
  EXPECT_EQ(empty.out, "no dead items in q\n");
}

// `partq prune` wants an age, refuses a bad one before connecting, and
// deletes what finished before it: here one acked item's result.
TEST_F(BadInputTest, PruneNeedsAValidAgeAndDeletesWhatFinishedBeforeIt) {
  ExpectRejected(With({"prune", "q"}), 2, "--older-than is required, e.g. 7d or 24h");
  ExpectRejected(With({"prune"}), 2, "usage: partq prune QUEUE --older-than AGE");
  ExpectRejected(With({"prune", "q", "--older-than", "7x"}), 2, "\"7x\" is not a duration");
  ExpectRejected(With({"prune", "q", "--older-than", "-1d"}), 2, "--older-than must be between");
  ExpectRejected(With({"prune", "nosuch", "--older-than", "1d"}), 1, "unknown queue \"nosuch\"");
  Result enq = Partq(With({"enqueue", "q", "--dedup-key", "kept-a-while", "x"}));
  ASSERT_EQ(enq.code, 0) << enq.err;
  Result cancelled = Partq(With({"cancel", "q", std::string(absl::StripAsciiWhitespace(enq.out))}));
  ASSERT_EQ(cancelled.code, 0) << cancelled.err;
  Result young = Partq(With({"prune", "q", "--older-than", "7d"}));
  EXPECT_EQ(young.code, 0) << young.err;
  EXPECT_EQ(young.out,
            "pruned from q what finished more than 7d ago: 0 results, 0 cancelled records, "
            "0 ended groups\n");
  Result all = Partq(With({"prune", "q", "--older-than", "0s", "--dead", "--json"}));
  EXPECT_EQ(all.code, 0) << all.err;
  for (const char* field : {"\"cancelled\": 1", "\"dead\": 0", "\"results\": 0"}) {
    EXPECT_TRUE(absl::StrContains(all.out, field)) << field << " in " << all.out;
  }
  Result wait = Partq(With({"wait", "q", "--dedup-key", "kept-a-while", "--timeout", "1s"}));
  EXPECT_EQ(wait.code, 1) << "the cancel record is gone: " << wait.out << wait.err;
}

// The console will not serve other machines without a token, nor read a
// token a person could guess.
TEST_F(BadInputTest, ConsoleRefusesAnOpenAddressWithoutAToken) {
  ExpectRejected(With({"console", "--listen", "0.0.0.0:1"}), 2,
                 "refusing to serve the console on \"0.0.0.0\" (reachable from other machines) "
                 "without a token: give --token-file FILE");
  ExpectRejected(With({"worker", "q", "--console-listen", "10.1.2.3:1"}), 2,
                 "without a token: give --console-token-file FILE");
  ExpectRejected(With({"console", "--token-file", "/nonexistent/partq-token"}), 2,
                 "--token-file: cannot read /nonexistent/partq-token");
  ExpectRejected(With({"worker", "q", "--console-read-only"}), 2,
                 "--console-read-only, --console-token-file and --console-allowed-host go with "
                 "--console-listen ADDR");
  ExpectRejected(With({"console", "--allowed-host", "ok.example,bad name"}), 2,
                 "--allowed-host: \"bad name\" is not a host name or address");
}

// A command given too many or too few words names the word, not only the
// usage line.
TEST_F(BadInputTest, ExtraAndMissingArgumentsAreNamed) {
  // A worker takes several queues (issue 52): a second word is a queue, checked as one.
  ExpectRejected(With({"worker", "dd", "del"}), 1, "unknown queue \"dd\"");
  ExpectRejected(With({"worker"}), 2, "QUEUE is missing (usage: partq worker QUEUE");
  ExpectRejected(With({"status", "q", "x", "y"}), 2, "unexpected arguments \"x\" \"y\"");
  ExpectRejected(With({"migrate", "now"}), 2, "unexpected argument \"now\"");
  ExpectRejected(With({"queue", "create"}), 2, "NAME is missing (usage: partq queue create");
  ExpectRejected(With({"queue", "delete", "a", "b"}), 2, "unexpected argument \"b\"");
  ExpectRejected(With({"dead", "list", "q", "extra"}), 2, "unexpected argument \"extra\"");
  ExpectRejected(With({"dead", "list", "q", "--all"}), 2, "--all goes with dead requeue");
}

// Connection flags may also come before the command, as with psql; a `--`
// in the command's words still ends its options.
TEST_F(BadInputTest, ConnectionFlagsBeforeTheCommand) {
  ExpectRejected({"--dsn", schema_.dsn()}, 2, "a command is missing");
  // A flag without its value is named, not the word after it taken for the command.
  ExpectRejected({"--dsn", "--schema", schema_.name(), "status", "q"}, 2,
                 "--dsn needs a value (got the option --schema");
  ExpectRejected({"--schema", schema_.name(), "--bogus", "enqueue", "q", "x"}, 2,
                 "unknown option \"--bogus\" before the command: only connection flags "
                 "(--dsn, --max-payload, --pool-mode, --schema) may come first");
  // A pool mode partq cannot run under, or that is no pool mode at all.
  ExpectRejected({"--pool-mode", "statement", "--dsn", schema_.dsn(), "enqueue", "q", "x"}, 2,
                 "--pool-mode statement: partq needs transactions of several statements");
  ExpectRejected(With({"enqueue", "q", "x", "--pool-mode", "transactions"}), 2,
                 "--pool-mode (or PARTQ_POOL_MODE): \"transactions\" is not one of none, "
                 "session, transaction");
  Result r =
      Partq({"--dsn", schema_.dsn(), "--schema=" + schema_.name(), "enqueue", "q", "--", "--odd"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE payload = '--odd'"), 1);
  Result help = Partq({"--dsn", schema_.dsn(), "help", "status"});
  EXPECT_EQ(help.code, 0) << help.err;
  EXPECT_TRUE(absl::StrContains(help.out, "partq status")) << help.out;
}

// `partq item` shows one item now, without waiting: a delayed one's due
// time, key and priority, in text and --json; no such item is exit 1, an id
// that is not one is bad input.
TEST_F(BadInputTest, ItemShowsOneItemWithoutWaiting) {
  Result later =
      Partq(With({"enqueue", "q", "--delay", "1h", "--key", "k1", "--priority", "2", "later"}));
  ASSERT_EQ(later.code, 0) << later.err;
  const std::string id(absl::StripAsciiWhitespace(later.out));
  Result shown = Partq(With({"item", "q", id}));
  EXPECT_EQ(shown.code, 0) << shown.err;
  // An hour's delay read as one (absl::FormatDuration), not in seconds.
  EXPECT_TRUE(
      absl::StrContains(shown.out, absl::StrCat("item ", id, " of queue q: delayed, due in 59m")))
      << shown.out;
  EXPECT_TRUE(absl::StrContains(shown.out, "(no attempt used); key \"k1\", priority 2"))
      << shown.out;
  EXPECT_TRUE(absl::StrContains(shown.out, "; payload (5 bytes): later\n")) << shown.out;
  Result json = Partq(With({"item", "q", id, "--json"}));
  EXPECT_EQ(json.code, 0) << json.err;
  EXPECT_TRUE(absl::StrContains(json.out, "\"state\": \"delayed\"")) << json.out;
  EXPECT_TRUE(absl::StrContains(json.out, "\"key\": \"k1\"")) << json.out;
  EXPECT_TRUE(absl::StrContains(json.out, "\"payload\": \"later\"")) << json.out;
  EXPECT_TRUE(absl::StrContains(json.out, "\"payload_encoding\": \"utf8\"")) << json.out;
  EXPECT_TRUE(absl::StrContains(json.out, "\"payload_truncated\": false")) << json.out;
  for (const auto& [args, code, words] :
       std::vector<std::tuple<std::vector<std::string>, int, std::string>>{
           {{"item", "q", "999999999"}, 1, "no such item: item 999999999 of queue q"},
           {{"item", "q", "x1"}, 2, "item id must be a positive whole"},
           {{"item", "q"}, 2, "usage: partq item QUEUE ID"},
           {{"item", "nosuch", id}, 1, "unknown queue \"nosuch\""}}) {
    Result r = Partq(With(args));
    EXPECT_EQ(r.code, code) << words << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, words)) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

// `partq wait` tells its outcomes apart by exit status: 0 done, 3 not
// finished in time, 4 dead-lettered, 1 no such item.
TEST_F(BadInputTest, WaitsExitStatusSaysHowTheItemEnded) {
  ASSERT_EQ(Partq(With({"queue", "create", "d", "--parts", "1", "--max-attempts", "1"})).code, 0);
  Result later = Partq(With({"enqueue", "q", "--delay", "1h", "later"}));
  Result done = Partq(With({"enqueue", "q", "--dedup-key", "k1", "done"}));
  Result doomed = Partq(With({"enqueue", "d", "doomed"}));
  ASSERT_EQ(later.code + done.code + doomed.code, 0) << later.err << done.err << doomed.err;
  auto id = [](const Result& r) { return std::string(absl::StripAsciiWhitespace(r.out)); };

  Result waited = Partq(With({"wait", "q", id(later), "--timeout", "200ms"}));
  EXPECT_EQ(waited.code, 3) << waited.err;
  EXPECT_TRUE(absl::StrContains(waited.err, "not finished within")) << waited.err;
  waited = Partq(With({"wait", "q", "999999999"}));
  EXPECT_EQ(waited.code, 1) << waited.err;
  EXPECT_TRUE(absl::StrContains(waited.err, "no such item: item 999999999 of queue q"))
      << waited.err;

  std::string log_q, log_d;
  auto acker = StartWorker("q", {"--handler", "noop"}, &log_q);
  auto failer = StartWorker("d", {"--handler", "fail:1"}, &log_d);
  waited = Partq(With({"wait", "q", "--dedup-key", "k1", "--timeout", "30s"}));
  EXPECT_EQ(waited.code, 0) << waited.err;
  waited = Partq(With({"wait", "d", id(doomed), "--timeout", "30s"}));
  EXPECT_EQ(waited.code, 4) << waited.err;
  EXPECT_TRUE(absl::StrContains(waited.err, "dead-lettered after 1 attempt: ")) << waited.err;
  std::remove(log_q.c_str());
  std::remove(log_d.c_str());
}

// `wait --json` says how the item ended and tells an empty result from none
// (printed, both are nothing), bytes that are not UTF-8 in base64; `dead
// list --json` shows each payload's head the same way.
TEST_F(BadInputTest, WaitAndDeadListJsonShowResultsAndPayloadsAsBytes) {
  ASSERT_EQ(Partq(With({"queue", "create", "d", "--parts", "1", "--max-attempts", "1"})).code, 0);
  auto id = [](const Result& r) { return std::string(absl::StripAsciiWhitespace(r.out)); };
  std::map<std::string, std::string> ids;
  for (const char* p : {"empty", "binary", "none"}) {
    Result r = Partq(With({"enqueue", "q", p}));
    ASSERT_EQ(r.code, 0) << r.err;
    ids[p] = id(r);
  }
  const std::string long_payload(300, 'x');
  Result doomed = Partq(With({"enqueue", "d", long_payload}));
  ASSERT_EQ(doomed.code, 0) << doomed.err;
  // "€" (3 bytes) at bytes 255-257: the head's cut splits it.
  const std::string euro = std::string(254, 'y') + "\xe2\x82\xac" + "tail";
  Result split = Partq(With({"enqueue", "d", euro}));
  ASSERT_EQ(split.code, 0) << split.err;
  std::string log_q, log_d;
  auto acker = StartWorker("q",
                           {"--handler",
                            "sql:SELECT CASE convert_from($2, 'UTF8') WHEN 'empty' THEN ''::bytea "
                            "WHEN 'binary' THEN '\\x00ff41'::bytea END"},
                           &log_q);
  auto failer = StartWorker("d", {"--handler", "fail:1"}, &log_d);
  auto wait_json = [&](const std::string& queue, const std::string& item, int code) {
    Result w = Partq(With({"wait", queue, item, "--timeout", "30s", "--json"}));
    EXPECT_EQ(w.code, code) << w.err;
    return nlohmann::json::parse(w.out, nullptr, /*allow_exceptions=*/false);
  };
  nlohmann::json j = wait_json("q", ids["empty"], 0);
  EXPECT_EQ(j["state"], "done");
  EXPECT_EQ(j["result"], "");
  EXPECT_EQ(j["result_encoding"], "utf8");
  j = wait_json("q", ids["binary"], 0);
  EXPECT_EQ(j["result"], absl::Base64Escape(std::string("\x00\xff"
                                                        "A",
                                                        3)));
  EXPECT_EQ(j["result_encoding"], "base64");
  j = wait_json("q", ids["none"], 0);
  EXPECT_EQ(j["id"], std::stoll(ids["none"]));
  EXPECT_TRUE(j["result"].is_null()) << j.dump();
  j = wait_json("d", id(doomed), 4);
  EXPECT_EQ(j["state"], "dead");
  EXPECT_EQ(j["attempts"], 1);
  EXPECT_TRUE(j["result"].is_null()) << "every state has the key: " << j.dump();
  EXPECT_TRUE(absl::StrContains(j["error"].get<std::string>(), "fail")) << j.dump();
  EXPECT_EQ(wait_json("d", id(split), 4)["state"], "dead");

  Result listed = Partq(With({"dead", "list", "d", "--json"}));
  ASSERT_EQ(listed.code, 0) << listed.err;
  const nlohmann::json dead = nlohmann::json::parse(listed.out, nullptr, false);
  ASSERT_EQ(dead.size(), 2u) << listed.out;
  std::map<int64_t, nlohmann::json> by_id;
  for (const auto& d : dead) by_id[d["id"].get<int64_t>()] = d;
  const nlohmann::json& x = by_id[std::stoll(id(doomed))];
  EXPECT_EQ(x["payload"], std::string(256, 'x')) << "its first 256 bytes";
  EXPECT_EQ(x["payload_encoding"], "utf8");
  EXPECT_EQ(x["payload_bytes"], 300);
  EXPECT_EQ(x["payload_truncated"], true);
  const nlohmann::json& e = by_id[std::stoll(id(split))];
  EXPECT_EQ(e["payload"], std::string(254, 'y')) << "text up to the character the cut split";
  EXPECT_EQ(e["payload_encoding"], "utf8");
  EXPECT_EQ(e["payload_truncated"], true);

  // A dead item whose dedup key a live item holds stays dead: requeue exits
  // 3, names it and says what to do.
  Result keyed = Partq(With({"enqueue", "d", "--dedup-key", "kd", "keyed"}));
  ASSERT_EQ(keyed.code, 0) << keyed.err;
  EXPECT_EQ(wait_json("d", id(keyed), 4)["state"], "dead");
  failer.reset();  // no worker of d: the next item stays live
  Result live = Partq(With({"enqueue", "d", "--dedup-key", "kd", "live"}));
  ASSERT_EQ(live.code, 0) << live.err;
  Result requeued = Partq(With({"dead", "requeue", "d", id(keyed)}));
  EXPECT_EQ(requeued.code, 3) << requeued.err;
  EXPECT_TRUE(absl::StrContains(requeued.out, absl::StrCat("requeued 0 items; 1 item left dead (",
                                                           id(keyed), "): a live item has")))
      << requeued.out;
  EXPECT_TRUE(absl::StrContains(requeued.out, absl::StrCat("partq dead delete d ", id(keyed))))
      << requeued.out;
  std::remove(log_q.c_str());
  std::remove(log_d.c_str());
}

// `partq cancel`: one line per item, and an exit status that says whether
// all of them were cancelled (0), some came too late (3) or some are not
// items of the queue (4); `partq wait` on a cancelled item exits 5.
TEST_F(BadInputTest, CancelSaysWhatBecameOfEachItemAndExitsByTheWorst) {
  auto id = [](const Result& r) { return std::string(absl::StripAsciiWhitespace(r.out)); };
  Result a = Partq(With({"enqueue", "q", "--delay", "1h", "a"}));
  Result b = Partq(With({"enqueue", "q", "--dedup-key", "kb", "b"}));
  Result c = Partq(With({"enqueue", "q", "c"}));
  ASSERT_EQ(a.code + b.code + c.code, 0) << a.err << b.err << c.err;

  Result r = Partq(With({"cancel", "q", id(a)}));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, absl::StrCat("item ", id(a), ": cancelled\n"));
  Result waited = Partq(With({"wait", "q", id(a), "--timeout", "30s"}));
  EXPECT_EQ(waited.code, 5) << waited.err;
  EXPECT_TRUE(absl::StrContains(waited.err, "was cancelled")) << waited.err;

  r = Partq(With({"cancel", "q", id(a), "999999999"}));
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_EQ(r.out, absl::StrCat("item ", id(a),
                                ": already cancelled\nitem 999999999: unknown, not cancelled (no "
                                "such item in queue q)\n"));
  r = Partq(With({"cancel", "q", "--dedup-key", "kb"}));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, absl::StrCat("item ", id(b), ": cancelled\n"));
  r = Partq(With({"cancel", "q", "--dedup-key", "nobody"}));
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_EQ(r.out, "dedup key \"nobody\": unknown, not cancelled (no such item in queue q)\n");

  // Done: acknowledged by a worker before the cancel.
  std::string log;
  auto worker = StartWorker("q", {"--handler", "noop"}, &log);
  waited = Partq(With({"wait", "q", id(c), "--timeout", "30s"}));
  EXPECT_EQ(waited.code, 0) << waited.err;
  r = Partq(With({"cancel", "q", id(c)}));
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(r.out,
            absl::StrCat("item ", id(c), ": done, not cancelled (it was acknowledged already)\n"));
  std::remove(log.c_str());
}

// Bad input is refused before anything is cancelled: an id that is not a
// number among good ones cancels none of them.
TEST_F(BadInputTest, CancelRefusesBadInputAndCancelsNothing) {
  Result a = Partq(With({"enqueue", "q", "a"}));
  ASSERT_EQ(a.code, 0) << a.err;
  const std::string good(absl::StripAsciiWhitespace(a.out));
  auto rejected = [&](const std::vector<std::string>& args, int code, const std::string& msg) {
    SCOPED_TRACE(msg);
    Result r = Partq(With(args));
    EXPECT_EQ(r.code, code) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, msg)) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(Items(), 1);
  };
  rejected({"cancel", "q", good, "12x"}, 2,
           "item id must be a positive whole number (got \"12x\")");
  rejected({"cancel", "q", "0"}, 2, "item id must be a positive whole number (got \"0\")");
  rejected({"cancel", "q", "-3"}, 2, "");
  rejected({"cancel", "q"}, 2, "ID is missing");
  rejected({"cancel"}, 2, "usage: partq cancel QUEUE ID...");
  rejected({"cancel", "q", good, "--dedup-key", "k"}, 2, "usage: partq cancel");
  rejected({"cancel", "nosuch", good}, 1, "unknown queue \"nosuch\"");
  rejected({"cancel", "nosuch", "--dedup-key", "k"}, 1, "unknown queue \"nosuch\"");
  rejected({"cancel", "bad name", good}, 2, "invalid queue name");
}

// `echo hi | partq enqueue q` (no PAYLOAD, no --stdin) used to enqueue one
// empty item and drop the input. With stdin a pipe or a file it is refused;
// '' is an empty payload on purpose.
TEST_F(BadInputTest, EnqueueWithoutPayloadRefusesPipedInput) {
  ExpectRejected(With({"enqueue", "q"}), 2, "pass --stdin", "hi\n");  // stdin a file
  std::vector<std::string> piped = {testing::PartqBinary()};
  for (const auto& a : With({"enqueue", "q"})) piped.push_back(a);
  std::string out;
  EXPECT_EQ(testing::RunCommand(piped, &out, {}, "hi\n"), 2) << out;  // stdin a pipe
  EXPECT_EQ(Items(), 0);
  Result empty = Partq(With({"enqueue", "q", ""}), "hi\n");
  EXPECT_EQ(empty.code, 0) << empty.err;
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE length(payload) = 0"), 1);
}

// --drain-timeout bounds how long a stopping worker takes, even when a
// handler runs on: it used to release the parts after the timeout and then
// wait for the handler (10 s here) before exiting.
TEST_F(BadInputTest, AStoppingWorkerDoesNotOutwaitTheDrainTimeout) {
  ASSERT_EQ(Partq(With({"enqueue", "q", "x"})).code, 0);
  std::string log;
  auto worker = StartWorker("q", {"--handler", "sleep:10000", "--drain-timeout", "1s"}, &log);
  // The item is claimed (attempts counted) once its handler runs.
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        return schema_.QInt(
                   "SELECT count(*) FROM {schema}.part_claims "
                   "WHERE cardinality(ids) > 0") > 0;
      },
      absl::Seconds(30)));
  // The claim commits before its handler call starts; a stop between the two
  // gives the call the drain's end as its deadline (BatchRunner::StopBy), and
  // it ends in time. Here the call must already run on past it.
  absl::SleepFor(absl::Seconds(1));
  const absl::Time t0 = absl::Now();
  worker->Signal(SIGTERM);
  const std::optional<int> status = worker->Wait(absl::Seconds(9));
  const absl::Duration took = absl::Now() - t0;
  ASSERT_TRUE(status.has_value()) << "still running 9 s after SIGTERM:\n" << ReadFile(log);
  // 1 s drain + 3 s grace, and slack for a loaded machine (it took 10 s).
  EXPECT_LT(took, absl::Seconds(8)) << ReadFile(log);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << *status;
  const std::string out = ReadFile(log);
  EXPECT_TRUE(absl::StrContains(out, "exiting without them")) << out;
  EXPECT_EQ(Items(), 1);  // not acked: it runs again elsewhere
  std::remove(log.c_str());
}

// `partq bridge` used to answer a missing flag with only its usage line, a
// low water above the high water with "batch >= 1 and 0 <= low water <=
// high water >= 1", and to accept any --topic. Each now names the flag.
TEST_F(BadInputTest, BridgeFlagsAreNamed) {
  const std::vector<std::string> ingest = {"bridge",  "ingest", "--brokers", "127.0.0.1:1",
                                           "--topic", "t",      "--queue",   "q"};
  auto without = [&](const std::string& flag) {
    std::vector<std::string> out;
    for (size_t i = 0; i < ingest.size(); ++i) {
      if (ingest[i] == "--" + flag) {
        ++i;
        continue;
      }
      out.push_back(ingest[i]);
    }
    return With(out);
  };
  ExpectRejected(without("brokers"), 2,
                 "bridge ingest needs --brokers HOST:PORT[,HOST:PORT...] (Kafka bootstrap "
                 "servers)");
  ExpectRejected(without("topic"), 2, "bridge ingest needs --topic TOPIC");
  ExpectRejected(without("queue"), 2, "bridge ingest needs --queue QUEUE");
  auto plus = [&](std::vector<std::string> extra) {
    std::vector<std::string> out = ingest;
    out.insert(out.end(), extra.begin(), extra.end());
    return With(out);
  };
  ExpectRejected(plus({"--high-water", "10", "--low-water", "20"}), 2,
                 "--low-water (20) must not be above --high-water (10)");
  ExpectRejected(plus({"--low-water", "200000"}), 2,
                 "--low-water (200000) must not be above --high-water (100000)");
  ExpectRejected(plus({"--high-water", "0"}), 2, "--high-water must be between 1 and");
  ExpectRejected(plus({"--batch", "0"}), 2, "--batch must be between 1 and 100000");
  ExpectRejected(plus({"extra"}), 2,
                 "bridge ingest takes no arguments, only flags (got \"extra\")");
  for (const std::string& topic :
       {std::string("bad topic"), std::string(".."), std::string("t/u"), std::string(250, 't')}) {
    std::vector<std::string> args = ingest;
    args[5] = topic;
    ExpectRejected(With(args), 2, "--topic: invalid Kafka topic name");
  }
  std::vector<std::string> bad_queue = ingest;
  bad_queue[7] = "q;--";
  ExpectRejected(With(bad_queue), 2, "--queue: invalid queue name");

  ExpectRejected(With({"bridge", "publish"}), 2,
                 "bridge publish needs --brokers HOST:PORT[,HOST:PORT...] (Kafka bootstrap "
                 "servers)");
  ExpectRejected(With({"bridge", "publish", "--brokers", "127.0.0.1:1", "--drain-timeout", "x"}), 2,
                 "--drain-timeout: \"x\" is not a duration");
  ExpectRejected(With({"bridge", "publish", "--brokers", "127.0.0.1:1", "--drain-timeout", "2h"}),
                 2, "--drain-timeout must be between");
  ExpectRejected(With({"bridge", "publish", "--brokers", "127.0.0.1:1", "--topic", "t"}), 2,
                 "unknown option --topic");
  // What the guarantees rest on cannot be changed through --kafka-config:
  // every guarded property of each bridge.
  ExpectRejected(plus({"--kafka-config", "session.timeout.ms=6000,enable.auto.commit=true"}), 2,
                 "--kafka-config: enable.auto.commit is set by partq: offsets commit with the "
                 "items");
  for (const char* key :
       {"bootstrap.servers", "group.id", "group.instance.id", "enable.auto.offset.store",
        "isolation.level", "statistics.interval.ms"}) {
    ExpectRejected(plus({"--kafka-config", absl::StrCat(key, "=x")}), 2,
                   absl::StrCat("--kafka-config: ", key, " is set by partq"));
  }
  for (const char* key :
       {"bootstrap.servers", "enable.idempotence", "acks", "statistics.interval.ms"}) {
    ExpectRejected(With({"bridge", "publish", "--brokers", "127.0.0.1:1", "--kafka-config",
                         absl::StrCat(key, "=x")}),
                   2, absl::StrCat("--kafka-config: ", key, " is set by partq"));
  }
}

// Kafka secrets need not be in the command line: --kafka-config-file and
// $PARTQ_KAFKA_SASL_PASSWORD. Every message about them names the file and
// line, never a value; a key set in two places is refused.
TEST_F(BadInputTest, KafkaSecretsFromAFileOrTheEnvironmentAreNeverShown) {
  char tmpl[] = "/tmp/partq-kafka-XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  const std::string file = tmpl;
  auto publish = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"bridge", "publish", "--brokers", "127.0.0.1:1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return With(args);
  };
  auto expect_hidden = [&](const std::vector<std::string>& args, const std::string& message) {
    ExpectRejected(args, 2, message);
    Result r = Partq(args);
    EXPECT_FALSE(absl::StrContains(r.err, "s3cret")) << r.err;
  };
  std::ofstream(file) << "# TLS\nsecurity.protocol=SSL\nsasl.password s3cret\n";
  expect_hidden(publish({"--kafka-config-file", file}),
                absl::StrCat("--kafka-config-file ", file,
                             " line 3: expected key=value (or a # comment); the line is not "
                             "shown, it may hold a secret"));
  std::ofstream(file) << "sasl.password=s3cret\n";
  expect_hidden(publish({"--kafka-config-file", file, "--kafka-config", "sasl.password=s3cret2"}),
                absl::StrCat("sasl.password is set both in --kafka-config-file ", file,
                             " and in --kafka-config: set it in one place"));
  setenv("PARTQ_KAFKA_SASL_PASSWORD", "s3cret3", 1);
  expect_hidden(publish({"--kafka-config-file", file}),
                absl::StrCat("sasl.password is set both in --kafka-config-file ", file,
                             " and in $PARTQ_KAFKA_SASL_PASSWORD: set it in one place"));
  unsetenv("PARTQ_KAFKA_SASL_PASSWORD");
  // The file's properties reach librdkafka (and its guard).
  std::ofstream(file) << "security.protocol=bogus\n";
  ExpectRejected(publish({"--kafka-config-file", file}), 2,
                 "kafka config security.protocol=bogus: Invalid value \"bogus\"");
  std::ofstream(file) << "acks=1\n";
  ExpectRejected(publish({"--kafka-config-file", file}), 2, "acks is set by partq");
  std::remove(file.c_str());
  ExpectRejected(publish({"--kafka-config-file", file}), 2,
                 absl::StrCat("--kafka-config-file: cannot read ", file));
}

// A secret given in --kafka-config anyway is masked in the command line, as
// a --dsn password is.
TEST_F(BadInputTest, AKafkaSecretInTheCommandLineIsMasked) {
  char tmpl[] = "/tmp/partq-publish-log-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd >= 0) close(fd);
  const std::string log = tmpl;
  const int port = testing::FreePort();
  std::vector<std::string> argv = {testing::PartqBinary()};
  for (const auto& a :
       With({"bridge", "publish", "--brokers", "127.0.0.1:1", "--kafka-config",
             "sasl.password=s3cret-pw,client.id=c,ssl.key.password=s3cret-too",
             "--metrics-addr", absl::StrCat("127.0.0.1:", port)})) {
    argv.push_back(a);
  }
  testing::ChildProcess publish(argv, {}, log);
  std::string body;
  ASSERT_TRUE(testing::WaitUntil([&] { return testing::HttpGet(port, "/healthz", &body) == 200; },
                                 absl::Seconds(30)))
      << ReadFile(log);
  std::string cmdline = ReadFile(absl::StrCat("/proc/", publish.pid(), "/cmdline"));
  std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
  EXPECT_TRUE(absl::StrContains(
      cmdline, "sasl.password=xxxxxxxxx,client.id=c,ssl.key.password=xxxxxxxxxx"))
      << cmdline;
  EXPECT_FALSE(absl::StrContains(cmdline, "s3cret")) << cmdline;
  EXPECT_FALSE(absl::StrContains(ReadFile(log), "s3cret")) << ReadFile(log);
  std::remove(log.c_str());
}

// A publisher whose brokers never answer used to ignore SIGTERM: it waited
// for delivery reports for ever (message.timeout.ms=0). It now waits at most
// --drain-timeout, says how many rows it left, exits 1, and the rows stay in
// the outbox. Its /readyz says no broker is reachable meanwhile.
TEST_F(BadInputTest, AStoppingPublisherDoesNotOutwaitTheDrainTimeout) {
  schema_.Q(
      "INSERT INTO {schema}.outbox (topic, payload) "
      "SELECT 'results', convert_to('r' || i, 'UTF8') FROM generate_series(1, 5) i");
  char tmpl[] = "/tmp/partq-publish-log-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd >= 0) close(fd);
  const std::string log = tmpl;
  const int port = testing::FreePort();
  std::vector<std::string> argv = {testing::PartqBinary()};
  for (const auto& a : With({"bridge", "publish", "--brokers", "127.0.0.1:1", "--drain-timeout",
                             "1s", "--metrics-addr", absl::StrCat("127.0.0.1:", port)})) {
    argv.push_back(a);
  }
  testing::ChildProcess publish(argv, {}, log);
  // The reason comes from librdkafka's all-brokers-down event, served while
  // the publisher waits for the reports of its first round: the rows are in
  // hand when the signal comes.
  std::string body;
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        return testing::HttpGet(port, "/readyz", &body) == 503 &&
               absl::StrContains(body, "no Kafka broker reachable at 127.0.0.1:1");
      },
      absl::Seconds(30)))
      << body << ReadFile(log);
  const absl::Time t0 = absl::Now();
  publish.Signal(SIGTERM);
  const std::optional<int> status = publish.Wait(absl::Seconds(9));
  const absl::Duration took = absl::Now() - t0;
  ASSERT_TRUE(status.has_value()) << "still running 9 s after SIGTERM:\n" << ReadFile(log);
  EXPECT_LT(took, absl::Seconds(4)) << ReadFile(log);  // 1 s drain, and slack
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << *status;
  const std::string out = ReadFile(log);
  EXPECT_TRUE(absl::StrContains(
      out,
      "partq: bridge stopped after the 1s drain timeout with 5 outbox row(s) not confirmed "
      "delivered; they stay in the outbox and are sent on the next start"))
      << out;
  EXPECT_TRUE(absl::StrContains(out, "no Kafka broker reachable at 127.0.0.1:1")) << out;
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.outbox"), 5);
  std::remove(log.c_str());
}

TEST_F(BadInputTest, InvalidDeadLetterTopics) {
  for (const std::string& topic :
       {std::string("a b"), std::string("x;DROP TABLE queues"), std::string("'q'"),
        std::string(".."), std::string(250, 't'), std::string("t/u")}) {
    ExpectRejected(With({"queue", "create", "p", "--parts", "4", "--dlq-topic", topic}), 2,
                   "--dlq-topic: invalid Kafka topic name");
    ExpectRejected(With({"queue", "set", "q", "--dlq-topic", topic}), 2,
                   "--dlq-topic: invalid Kafka topic name");
  }
  ExpectRejected(With({"queue", "set", "q"}), 2, "queue set needs a setting to change");
  ExpectRejected(With({"queue", "set", "q", "--parts", "8", "--dlq-topic", "t"}), 2,
                 "queue set changes one setting at a time");
  ExpectRejected(With({"queue", "set", "nosuch", "--dlq-topic", "t"}), 1,
                 "unknown queue \"nosuch\"");
  ExpectRejected(With({"queue", "set", "q;--", "--dlq-topic", "t"}), 2, "invalid queue name");
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.queues WHERE dlq_topic IS NOT NULL"), 0);
}

TEST_F(BadInputTest, MalformedDurationsAndNumbers) {
  ExpectRejected(With({"queue", "create", "p", "--parts", "4", "--session-ttl", "5x"}), 2,
                 "--session-ttl: \"5x\" is not a duration");
  ExpectRejected(With({"queue", "create", "p", "--parts", "4", "--session-ttl", "10ms"}), 2,
                 "--session-ttl must be between");
  ExpectRejected(With({"queue", "create", "p", "--parts", "4", "--session-ttl", "inf"}), 2,
                 "is not a duration");
  ExpectRejected(With({"queue", "create", "p", "--parts", "4", "--max-attempts", "0"}), 2,
                 "--max-attempts must be between 1 and 1000");
  ExpectRejected(With({"queue", "create", "p", "--parts", "4", "--assignment", "random"}), 2,
                 "--assignment must be lexical or sticky");
  ExpectRejected(With({"enqueue", "q", "--delay", "-1s", "x"}), 2, "--delay must be between");
  ExpectRejected(With({"enqueue", "q", "--delay", "soon", "x"}), 2,
                 "--delay: \"soon\" is not a duration");
  ExpectRejected(With({"enqueue", "q", "--priority", "99999", "x"}), 2,
                 "--priority must be between -32768 and 32767");
  ExpectRejected(With({"enqueue", "q", "--priority", "high", "x"}), 2, "is not a whole number");
  ExpectRejected(With({"enqueue", "q", "--stdin", "--chunk", "0"}), 2,
                 "--chunk must be between 1 and 1000000", "a\n");
  ExpectRejected(With({"worker", "q", "--retry-base", "10s", "--retry-max", "1s"}), 2,
                 "--retry-base (10s) must not exceed --retry-max (1s)");
  ExpectRejected(With({"worker", "q", "--vacuum-interval", "10ms"}), 2,
                 "--vacuum-interval must be 0 (off) or at least 1s, not 10ms");
  ExpectRejected(With({"worker", "q", "--vacuum-interval", "25h"}), 2,
                 "--vacuum-interval must be between 0 and 24h");
  ExpectRejected(With({"worker", "q", "--concurrency", "0"}), 2,
                 "--concurrency must be between 1 and 1024");
  ExpectRejected(With({"worker", "q", "--leave-on-stop"}), 2,
                 "--leave-on-stop is for static members (--instance-id)");
  ExpectRejected(With({"worker", "q", "--batch", "100000"}), 2, "--batch must be between");
  ExpectRejected(With({"worker", "q", "--claim-bytes", "10"}), 2,
                 "--claim-bytes must be 0 (no bound) or at least 1024, not 10");
  ExpectRejected(With({"worker", "q", "--claim-bytes", "2000000000"}), 2,
                 "--claim-bytes must be between 0 and 1073741824");
  ExpectRejected(With({"worker", "q", "--handler-timeout", "0"}), 2,
                 "--handler-timeout must be between");
  ExpectRejected(With({"worker", "q", "--handler", "sleep:-5"}), 2, "sleep:MS needs milliseconds");
  ExpectRejected(With({"worker", "q", "--handler", "fail:2"}), 2, "fail:RATE needs a fraction");
  ExpectRejected(With({"worker", "q", "--handler", "record:x;drop"}), 2,
                 "record:TABLE needs a table name");
  ExpectRejected(With({"worker", "q", "--handler", "nope"}), 2, "unknown handler \"nope\"");
  ExpectRejected(With({"worker", "q", "--bogus", "1"}), 2, "unknown option --bogus");
  for (const char* addr : {"127.0.0.1:99999", "127.0.0.1:0", "127.0.0.1:9x", "127.0.0.1:"}) {
    ExpectRejected(With({"worker", "q", "--metrics-addr", addr}), 2, "--metrics-addr");
  }
  for (const char* addr : {"example.invalid:9593", "[::1]:9591"}) {
    ExpectRejected(With({"worker", "q", "--metrics-addr", addr}), 2,
                   "the host must be an IPv4 address");
  }
  ExpectRejected(With({"wait", "q", "-3"}), 2, "unknown option \"-3\"");
  ExpectRejected(With({"wait", "q", "abc"}), 2, "item id must be a positive whole number");
}

TEST_F(BadInputTest, OversizePayload) {
  ExpectRejected(With({"enqueue", "q", "--max-payload", "10", "01234567890"}), 2,
                 "payload is 11 bytes; the limit is 10 (--max-payload)");
  ExpectRejected(With({"enqueue", "q", "--max-payload", "0", "x"}), 2,
                 "--max-payload must be between");
  // --stdin: the first line is already too long, so nothing is written.
  ExpectRejected(With({"enqueue", "q", "--stdin", "--max-payload", "10"}), 2,
                 "line 1 has more than 10 bytes; the limit is 10 (--max-payload). Nothing "
                 "enqueued",
                 "01234567890\nok\n");
}

// Without --max-payload, `partq enqueue` holds a payload to the queue's own
// limit (queue create|set --max-payload), as the SQL API does; before, the
// owner's enqueue wrote 16 bytes into a queue limited to 10.
TEST_F(BadInputTest, EnqueueHoldsPayloadsToTheQueuesLimitUnlessTheFlagIsGiven) {
  Result set = Partq(With({"queue", "set", "q", "--max-payload", "10"}));
  ASSERT_EQ(set.code, 0) << set.err;
  ExpectRejected(With({"enqueue", "q", "0123456789a"}), 2,
                 "payload is 11 bytes; the limit is 10 (queue \"q\"'s payload limit; "
                 "--max-payload overrides it)");
  ExpectRejected(With({"enqueue", "q", "--stdin"}), 2,
                 "line 1 has more than 10 bytes; the limit is 10 (queue \"q\"'s payload "
                 "limit; --max-payload overrides it). Nothing enqueued",
                 "0123456789a\n");
  EXPECT_EQ(Partq(With({"enqueue", "q", "0123456789"})).code, 0);
  EXPECT_EQ(Partq(With({"enqueue", "q", "--max-payload", "20", "0123456789a"})).code, 0);
  EXPECT_EQ(Items(), 2);
}

// The documented --stdin behaviour (cli/admin.cc): input is committed chunk
// by chunk; an oversize line stops the run after committing the lines before
// it, and says how many; it and every line after it are not written. Exit
// status 1, not 2: the run did part of its work, which a retry of the whole
// input would repeat.
TEST_F(BadInputTest, OversizeLineInStdinCommitsOnlyTheLinesBeforeIt) {
  Result r = Partq(With({"enqueue", "q", "--stdin", "--max-payload", "10", "--chunk", "2"}),
                   "l1\nl2\nl3\n0123456789ab\nl5\n");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(
      r.err,
      "line 4 has more than 10 bytes; the limit is 10 (--max-payload). The 3 lines before it were "
      "enqueued, line 4 and after were not: continue with `tail -n +4` once fixed"))
      << r.err;
  EXPECT_EQ(r.out, "");
  auto rows = schema_.Q("SELECT convert_from(payload, 'UTF8') FROM {schema}.items ORDER BY id");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(*rows[0][0], "l1");
  EXPECT_EQ(*rows[1][0], "l2");
  EXPECT_EQ(*rows[2][0], "l3");
}

// A 100 MB line is refused while it is read, past the limit: the run's
// memory stays bounded (it read the whole line before: 508 MB for 400 MB),
// the lines before it are enqueued and the message names it. The line comes
// from a pipeline, so that no process of the test holds it.
TEST_F(BadInputTest, AnOversizeLineIsRefusedInBoundedMemory) {
  const std::string script = absl::StrCat(
      "{ printf 'l1\\nl2\\n'; head -c ", 100 << 20,
      " /dev/zero | tr '\\0' x; printf '\\nl4\\n'; } | ",
      testing::PartqBinary(), " enqueue q --stdin --max-payload 1000 --dsn '", schema_.dsn(),
      "' --schema ", schema_.name(), " 2>&1");
  std::string out;
  const int code = testing::RunCommand({"/bin/sh", "-c", script}, &out);
  rusage children{};
  ASSERT_EQ(getrusage(RUSAGE_CHILDREN, &children), 0);
  EXPECT_EQ(code, 1) << out;
  EXPECT_TRUE(absl::StrContains(
      out,
      "line 3 has more than 1000 bytes; the limit is 1000 (--max-payload). The 2 lines before "
      "it were enqueued, line 3 and after were not: continue with `tail -n +3` once fixed"))
      << out;
  EXPECT_EQ(Items(), 2);
  // The largest process this test waited for, in KiB (each ctest runs one
  // test in a process of its own): partq's own size, not the line's.
  EXPECT_LT(children.ru_maxrss, 48 << 10);
}

// A chunk is sent once its payloads reach 16 MiB, however many lines --chunk
// allows: 18 lines of 1 MiB go in two COPY transactions, not one (memory is
// bounded by that, not by --chunk times the payload limit).
TEST_F(BadInputTest, StdinChunksAreBoundedInBytes) {
  const std::string script = absl::StrCat(
      "line=$(head -c 1048576 /dev/zero | tr '\\0' x); for i in $(seq 18); do echo \"$line\"; "
      "done | ",
      testing::PartqBinary(), " enqueue q --stdin --dsn '", schema_.dsn(), "' --schema ",
      schema_.name(), " 2>&1");
  std::string out;
  EXPECT_EQ(testing::RunCommand({"/bin/sh", "-c", script}, &out), 0) << out;
  EXPECT_EQ(Items(), 18);
  EXPECT_EQ(schema_.QInt("SELECT count(DISTINCT xmin::text) FROM {schema}.items"), 2);
}

// A server that accepts the connection and never answers (here: a socket
// that listens and never accepts; the kernel completes the handshake) must
// not hang a command: partq sets PGCONNECT_TIMEOUT to 10 s unless the user
// did, and says what timed out.
TEST(Connect, AServerThatNeverAnswersTimesOut) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 8), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string dsn =
      absl::StrCat("host=127.0.0.1 port=", ntohs(addr.sin_port), " user=x dbname=x");
  unsetenv("PGCONNECT_TIMEOUT");
  const absl::Time t0 = absl::Now();
  Result r = Partq({"status", "q", "--dsn", dsn});
  const absl::Duration took = absl::Now() - t0;
  close(fd);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "timeout expired")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "PGCONNECT_TIMEOUT")) << r.err;
  EXPECT_GE(took, absl::Seconds(9));
  EXPECT_LT(took, absl::Seconds(30));
}

// `--help` anywhere (or `partq help COMMAND`) prints that command's usage to
// stdout and exits 0, without connecting; after `--` it is a payload.
TEST(Help, EveryCommandAnswersHelpWithoutADatabase) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"migrate", "--help"},
                                             {"queue", "create", "q", "-h"},
                                             {"enqueue", "q", "--help"},
                                             {"wait", "--help"},
                                             {"worker", "q", "--concurrency", "4", "--help"},
                                             {"status", "--help"},
                                             {"bench", "--help"},
                                             {"demo", "--help"},
                                             {"bridge", "ingest", "--help"},
                                             {"bridge", "publish", "--help"},
                                             {"help", "worker"}}) {
    Result r = Partq(args);
    const std::string cmd = args[0] == "help" ? args[1] : args[0];
    EXPECT_EQ(r.code, 0) << cmd << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.out, absl::StrCat("partq ", cmd))) << r.out;
    EXPECT_EQ(r.err, "") << cmd;
  }
  Result worker = Partq({"worker", "--help"});
  EXPECT_TRUE(absl::StrContains(worker.out, "--handler-timeout")) << worker.out;
  // The defaults, as for every other flag that has one.
  EXPECT_TRUE(absl::StrContains(worker.out, "[--concurrency 4] [--batch 100]")) << worker.out;
  Result queue = Partq({"help", "queue"});
  EXPECT_TRUE(absl::StrContains(queue.out, "N alone is per second, N/m is")) << queue.out;
  EXPECT_TRUE(absl::StrContains(worker.out, "record:TABLE")) << worker.out;
  Result bridge = Partq({"bridge", "--help"});
  EXPECT_TRUE(absl::StrContains(bridge.out, "--drain-timeout")) << bridge.out;

  Result unknown = Partq({"help", "nope"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_TRUE(absl::StrContains(unknown.err, "unknown command \"nope\"")) << unknown.err;
  // After `--`, "--help" is a payload: the command runs (and here fails to
  // connect: no usage printed).
  Result payload = Partq({"enqueue", "q", "--dsn", "host=127.0.0.1 port=notaport", "--", "--help"});
  EXPECT_EQ(payload.code, 2);
  EXPECT_TRUE(absl::StrContains(payload.err, "malformed connection string")) << payload.err;
}

// `partq bench` checks what it will write, and what it is asked to run,
// before it connects (a run takes minutes): the database here does not
// exist, so a check made later would show as a connection error instead.
// `partq bench` runs the `partq-bench` binary beside `partq` (the demo's build
// leaves it out): a `partq` alone says what is missing and how to build it, and
// its help still answers.
TEST(BenchFlags, APartqWithoutItsBenchBinarySaysHowToBuildIt) {
  char tmpl[] = "/tmp/partq-alone-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string lone = dir + "/partq";
  std::filesystem::copy_file(testing::PartqBinary(), lone);
  std::filesystem::permissions(lone, std::filesystem::perms::owner_all);
  std::string out;
  // stderr with stdout, where RunCommand reads
  auto run = [&](std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"/bin/sh", "-c", "exec \"$@\" 2>&1", "sh"});
    return testing::RunCommand(argv, &out);
  };
  for (const char* command : {"bench", "bench-peer"}) {
    const int code = run({lone, command, "--only", "enqueue"});
    EXPECT_EQ(code, 2) << out;
    EXPECT_TRUE(absl::StrContains(out, dir + "/partq-bench is not there")) << out;
    EXPECT_TRUE(absl::StrContains(out, "--target partq-bench")) << out;
  }
  EXPECT_EQ(run({lone, "bench", "--help"}), 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "usage: partq bench")) << out;
  // Built, it is there and answers for the command.
  EXPECT_EQ(run({testing::PartqBinary(), "bench-peer", "nope"}), 2) << out;
  EXPECT_TRUE(absl::StrContains(out, "usage: partq bench-peer exec|http")) << out;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(BenchFlags, RefusedBeforeTheRun) {
  const std::string dsn =
      absl::StrCat("host=127.0.0.1 port=", testing::FreePort(), " user=postgres");
  char tmpl[] = "/tmp/partq-bench-flags-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string kept = dir + "/earlier.json";
  std::ofstream(kept) << "{\"earlier\": true}\n";
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {{"--plot", dir + "/drain.txt"}, "must end in .svg or .png"},
           {{"--plot", dir + "/drain.svg", "--only", "enqueue"}, "--only leaves the drain out"},
           {{"--plot", dir + "/no/such/dir/drain.svg"}, "--plot: cannot write"},
           {{"--out", dir + "/no/such/dir/r.json"}, "--out: cannot write"},
           {{"--out", dir}, "is a directory"},
           {{"--only", "drain,nope"}, "unknown workload \"nope\" (one of drain, "},
           {{"--systems", "partq,pgmq"}, "unknown system \"pgmq\" (one of floor, "},
           {{"--sessions", "4,0"}, "--sessions: \"0\" is not a number from 1 to 64"},
           {{"--only", "soak"}, "--only soak needs --soak-out FILE"},
           {{"--only", "soak", "--soak-out", dir + "/no/such/dir/s.tsv"},
            "--soak-out: cannot write"},
           {{"--soak-hold", "300"}, "--soak-hold: \"300\" is not START:SECONDS"},
           {{"--soak-hold", "300:0"}, "--soak-hold: \"300:0\" is not START:SECONDS"},
           {{"--soak-restart-at", "900"}, "--soak-restart-at needs --soak-restart COMMAND"},
           {{"--soak-rate", "0"}, "--soak-rate"},
       }) {
    std::vector<std::string> args = {"bench", "--dsn", dsn};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Result r = Partq(args);
    EXPECT_EQ(r.code, 2) << c.args[0] << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, c.says)) << c.args[0] << ": " << r.err;
    EXPECT_FALSE(absl::StrContains(r.err, "connect")) << r.err;
  }
  // A writable --out that the run then cannot fill (no database): the file
  // written by an earlier run is left as it was.
  Result r = Partq({"bench", "--dsn", dsn, "--out", kept, "--only", "enqueue"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "connect")) << r.err;
  EXPECT_EQ(ReadFile(kept), "{\"earlier\": true}\n");
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(BadConnection, UnreachableDatabase) {
  const std::string dsn = absl::StrCat("host=127.0.0.1 port=", testing::FreePort(),
                                       " user=postgres dbname=postgres connect_timeout=5");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"migrate", "--dsn", dsn},
           {"enqueue", "q", "x", "--dsn", dsn},
           {"worker", "q", "--dsn", dsn},
           {"queue", "create", "q", "--parts", "4", "--dsn", dsn}}) {
    Result r = Partq(args);
    EXPECT_EQ(r.code, 1) << args[0];
    EXPECT_TRUE(absl::StrContains(r.err, "partq: error: cannot connect to PostgreSQL")) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "--dsn or $PARTQ_DSN")) << "what to do: " << r.err;
  }
  Result r = Partq({"migrate", "--dsn", "host=127.0.0.1 port=notaport"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "malformed connection string")) << r.err;
}

TEST(BadConnection, WrongPassword) {
  // A server of its own: the shared one trusts every connection.
  auto server = EmbeddedPostgres::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  EmbeddedPostgres& pg = **server;
  // Over the Unix socket (still trusted) for the set-up and the checks.
  const std::string admin =
      absl::StrCat("host=", pg.dir(), " port=", pg.port(), " user=postgres dbname=postgres");
  testing::Query(admin, "CREATE ROLE alice LOGIN PASSWORD 'right'");
  testing::Query(admin, "GRANT CREATE ON DATABASE postgres TO alice");
  const std::string hba = pg.dir() + "/data/pg_hba.conf";
  const std::string old = ReadFile(hba);
  {
    // Rewritten in place, so the file keeps its owner (postgres when root).
    std::ofstream out(hba, std::ios::trunc);
    out << "host all all 127.0.0.1/32 scram-sha-256\n" << old;
  }
  testing::Query(admin, "SELECT pg_reload_conf()");
  const std::string tcp = absl::StrCat("host=127.0.0.1 port=", pg.port(), " dbname=postgres");

  for (const auto& args : std::vector<std::vector<std::string>>{
           {"migrate", "--dsn", tcp + " user=alice password=wrong"},
           {"enqueue", "q", "x", "--dsn", tcp + " user=alice password=wrong"},
           {"migrate", "--dsn", tcp + " user=nobody password=x"}}) {
    Result r = Partq(args);
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(absl::StrContains(r.err, "PostgreSQL rejected the login")) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "password authentication failed")) << r.err;
    EXPECT_FALSE(absl::StrContains(r.err, "password=")) << r.err;  // the DSN is not echoed
  }
  EXPECT_EQ(testing::QueryInt(admin, "SELECT count(*) FROM pg_namespace WHERE nspname = 'partq'"),
            0);
  // The right password works, so the failures above were the password's.
  Result ok = Partq({"migrate", "--dsn", tcp + " user=alice password=right"});
  EXPECT_EQ(ok.code, 0) << ok.err;
}

TEST(BadSchema, MissingSchemaSaysToRunMigrate) {
  const std::string dsn = testing::TestDsn();
  const std::string schema = "partq_never_migrated";
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"enqueue", "q", "x"},
                                             {"enqueue", "q", "--stdin"},
                                             {"worker", "q"},
                                             {"queue", "create", "q", "--parts", "4"},
                                             {"queue", "list"},
                                             {"status", "q"}}) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--dsn", dsn, "--schema", schema});
    Result r = Partq(a, "x\n");
    EXPECT_EQ(r.code, 1) << args[0];
    EXPECT_TRUE(absl::StrContains(r.err, "run `partq migrate --schema partq_never_migrated`"))
        << args[0] << ": " << r.err;
  }
  EXPECT_EQ(testing::QueryInt(
                dsn, "SELECT count(*) FROM pg_namespace WHERE nspname = 'partq_never_migrated'"),
            0);
}

TEST_F(BadInputTest, SchemaNewerThanTheBinary) {
  schema_.Q(
      "INSERT INTO {schema}.schema_migrations (version, description) "
      "VALUES (999, 'from the future')");
  const std::string msg = "is at version 999, newer than this partq";
  ExpectRejected(With({"migrate"}), 1, msg);
  ExpectRejected(With({"worker", "q"}), 1, msg);
  ExpectRejected(With({"enqueue", "q", "x"}), 1, msg);
  ExpectRejected(With({"enqueue", "q", "--stdin"}), 1, msg, "a\nb\n");
  ExpectRejected(With({"queue", "create", "p", "--parts", "4"}), 1, msg);
  EXPECT_EQ(schema_.QInt("SELECT max(version) FROM {schema}.schema_migrations"), 999);
}

}  // namespace
}  // namespace partq
