// `partq worker --handler exec:... | http:...` on a real PostgreSQL, with a
// handler that breaks the protocol for one item: what an operator sees. The
// failure is counted on the worker's /metrics page by reason, said in its
// log and in `partq dead list`; the item is dead-lettered by the retry
// policy, the others are acked, and the worker stays up and healthy. The
// faults one by one are in consumer_handlers_test.cc; this is the wiring.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/observability/scrape.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using testing::ChildProcess;
using testing::HttpGet;
using testing::ParseSamples;
using testing::WaitUntil;

struct WorkerCase {
  std::string name;
  std::string transport;  // "exec" or "http"
  std::string poison;     // the payload the handler misbehaves on
  std::string reason;     // partq_handler_request_failures_total{reason}
  std::string error;      // in the log and `partq dead list`
};

void PrintTo(const WorkerCase& c, std::ostream* os) { *os << c.name; }

class WorkerHandlersTest : public ::testing::TestWithParam<WorkerCase> {
 protected:
  std::vector<std::string> Cli(std::vector<std::string> args) {
    args.insert(args.begin(), testing::PartqBinary());
    args.insert(args.end(), {"--dsn", schema_.dsn(), "--schema", schema_.name()});
    return args;
  }

  // The handler spec: test_child.py serving, or http_test_server.py's /500.
  std::string Spec() {
    if (GetParam().transport == "exec") {
      return absl::StrCat("exec:exec ", PYTHON3, " ", TEST_CHILD, " serve");
    }
    server_ = std::make_unique<testing::PortFileServer>(
        std::vector<std::string>{PYTHON3, HTTP_TEST_SERVER}, ::testing::TempDir());
    EXPECT_GT(server_->port(), 0) << "see " << server_->log();
    // With credentials in the URL: they must show nowhere (issue 48).
    return absl::StrCat("http:http://svc:pa55@127.0.0.1:", server_->port(), "/500?token=s3cret");
  }

  std::map<std::string, double> Scrape() {
    std::string body;
    if (HttpGet(port_, "/metrics", &body) != 200) return {};
    return ParseSamples(body);
  }

  testing::TestSchema schema_;
  int port_ = testing::FreePort();
  std::unique_ptr<testing::PortFileServer> server_;
};

TEST_P(WorkerHandlersTest, FailuresReachMetricsLogAndDeadListAndTheWorkerStaysUp) {
  const WorkerCase& c = GetParam();
  QueueConfig q;
  q.name = "q";
  q.parts = 1;
  q.max_attempts = 2;
  auto store = schema_.NewStore();
  ASSERT_TRUE(store->CreateQueue(q).ok());
  for (const std::string& payload :
       {std::string("a"), std::string("b"), c.poison, std::string("c")}) {
    NewItem item;
    item.payload = payload;
    ASSERT_TRUE(store->Enqueue("q", item).ok());
  }
  const std::string spec = Spec();
  const std::string log = absl::StrCat(::testing::TempDir(), "/worker_handlers_", c.name, ".log");
  std::remove(log.c_str());
  ChildProcess worker(Cli({"worker", "q", "--handler", spec, "--concurrency", "1", "--batch", "10",
                           "--poll-interval", "100ms", "--retry-base", "10ms", "--retry-max",
                           "20ms", "--metrics-addr", absl::StrCat("127.0.0.1:", port_)}),
                      {}, log);
  std::map<std::string, double> m;
  ASSERT_TRUE(WaitUntil([&] {
    m = Scrape();
    return m["partq_items_acked_total"] + m["partq_items_dead_lettered_total"] == 4;
  })) << "acked "
      << m["partq_items_acked_total"] << ", dead " << m["partq_items_dead_lettered_total"]
      << "; see " << log;
  EXPECT_EQ(m["partq_items_acked_total"], 3);
  EXPECT_EQ(m["partq_items_dead_lettered_total"], 1);
  const std::string failures =
      absl::StrCat("partq_handler_request_failures_total{queue=\"q\",reason=\"", c.reason,
                   "\",transport=\"", c.transport, "\"}");
  EXPECT_GE(m[failures], q.max_attempts) << failures;
  EXPECT_GE(
      m[absl::StrCat("partq_handler_requests_total{queue=\"q\",transport=\"", c.transport, "\"}")],
      m[failures] + 1);

  std::string body;
  EXPECT_EQ(HttpGet(port_, "/healthz", &body), 200);
  EXPECT_TRUE(worker.Running());
  std::string out;
  EXPECT_EQ(testing::RunCommand(Cli({"dead", "list", "q"}), &out), 0);
  EXPECT_TRUE(absl::StrContains(out, c.error)) << out;
  EXPECT_FALSE(absl::StrContains(out, "pa55")) << out;
  EXPECT_FALSE(absl::StrContains(out, "s3cret")) << out;

  worker.Signal(SIGTERM);
  const std::optional<int> status = worker.Wait(absl::Seconds(30));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status;
  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  EXPECT_TRUE(absl::StrContains(text.str(), c.error)) << text.str();
  EXPECT_FALSE(absl::StrContains(text.str(), "pa55")) << text.str();
  EXPECT_FALSE(absl::StrContains(text.str(), "s3cret")) << text.str();
  if (!HasFailure()) std::remove(log.c_str());
}

// The http handler's credentials without argv: the first line of
// --handler-auth-file, else $PARTQ_HANDLER_AUTH, is sent as the
// Authorization header; a URL that cannot be used is refused at start
// without showing its password.
TEST(WorkerCredentialsTest, TheAuthorizationValueComesFromAFileOrTheEnvironment) {
  testing::TestSchema schema;
  QueueConfig q;
  q.name = "q";
  q.parts = 1;
  ASSERT_TRUE(schema.NewStore()->CreateQueue(q).ok());
  testing::PortFileServer server({PYTHON3, HTTP_TEST_SERVER}, ::testing::TempDir());
  ASSERT_GT(server.port(), 0) << "see " << server.log();
  const std::string auth_file = absl::StrCat(::testing::TempDir(), "/handler_auth");
  std::ofstream(auth_file) << "Bearer from-the-file\n";
  // A file other users can read is refused, as a console token's is.
  ASSERT_EQ(chmod(auth_file.c_str(), 0644), 0);
  const testing::PartqResult readable =
      testing::Partq({"worker", "q", "--handler", "http:http://127.0.0.1:1/", "--handler-auth-file",
                      auth_file, "--dsn", schema.dsn(), "--schema", schema.name()});
  EXPECT_NE(readable.code, 0);
  EXPECT_TRUE(absl::StrContains(readable.err, "--handler-auth-file: ")) << readable.err;
  EXPECT_TRUE(absl::StrContains(readable.err, "can be read or written by other users"))
      << readable.err;
  ASSERT_EQ(chmod(auth_file.c_str(), 0600), 0);
  const std::string url = absl::StrCat("http:http://127.0.0.1:", server.port(), "/ok");
  int items = 0;
  for (const auto& [flags, env, expected] : std::vector<
           std::tuple<std::vector<std::string>, std::map<std::string, std::string>, std::string>>{
           {{"--handler-auth-file", auth_file}, {}, "Bearer from-the-file"},
           {{}, {{"PARTQ_HANDLER_AUTH", "Bearer from-the-env"}}, "Bearer from-the-env"}}) {
    NewItem item;
    item.payload = "x";
    ASSERT_TRUE(schema.NewStore()->Enqueue("q", item).ok());
    ++items;
    const int port = testing::FreePort();
    std::vector<std::string> argv = {testing::PartqBinary(),
                                     "worker",
                                     "q",
                                     "--handler",
                                     url,
                                     "--poll-interval",
                                     "100ms",
                                     "--metrics-addr",
                                     absl::StrCat("127.0.0.1:", port),
                                     "--dsn",
                                     schema.dsn(),
                                     "--schema",
                                     schema.name(),
                                     "--quiet"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    ChildProcess worker(argv, env);
    std::string body;
    ASSERT_TRUE(WaitUntil([&] {
      return HttpGet(port, "/metrics", &body) == 200 &&
             ParseSamples(body)["partq_items_acked_total{queue=\"q\"}"] == 1;
    }));
    worker.Signal(SIGTERM);
    ASSERT_TRUE(worker.Wait(absl::Seconds(30)).has_value());
    ASSERT_EQ(HttpGet(server.port(), "/log", &body), 200);
    const std::string log = body;
    EXPECT_TRUE(absl::StrContains(log, absl::StrCat("\"authorization\": \"", expected, "\"")))
        << log;
  }
  const testing::PartqResult bad =
      testing::Partq({"worker", "q", "--handler", "http:ftp://svc:pa55@host/x", "--dsn",
                      schema.dsn(), "--schema", schema.name()});
  EXPECT_NE(bad.code, 0);
  EXPECT_TRUE(absl::StrContains(bad.err, "http:ftp://host/x")) << bad.err;
  EXPECT_FALSE(absl::StrContains(bad.err + bad.out, "pa55")) << bad.err;
  std::remove(auth_file.c_str());
}

// An exec child of `partq worker` gets no PG* or PARTQ_* variable (the
// worker's own PGPASSWORD here) unless --handler-env names it.
TEST(WorkerEnvironmentTest, ExecChildrenGetNoDatabaseCredentialsUnlessNamed) {
  testing::TestSchema schema;
  QueueConfig q;
  q.name = "q";
  q.parts = 1;
  ASSERT_TRUE(schema.NewStore()->CreateQueue(q).ok());
  const std::string file = absl::StrCat(::testing::TempDir(), "/worker_child_env");
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{}, std::vector<std::string>{"--handler-env", "PGPASSWORD"}}) {
    std::remove(file.c_str());
    NewItem item;
    item.payload = "x";
    ASSERT_TRUE(schema.NewStore()->Enqueue("q", item).ok());
    const int port = testing::FreePort();
    std::vector<std::string> argv = {
        testing::PartqBinary(),
        "worker",
        "q",
        "--handler",
        absl::StrCat("exec:env > ", file, "; exec ", PYTHON3, " ", TEST_CHILD, " serve"),
        "--poll-interval",
        "100ms",
        "--metrics-addr",
        absl::StrCat("127.0.0.1:", port),
        "--dsn",
        schema.dsn(),
        "--schema",
        schema.name(),
        "--quiet"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    ChildProcess worker(argv, {{"PGPASSWORD", "s3cret"}, {"HANDLER_SETTING", "kept"}});
    std::string body;
    ASSERT_TRUE(WaitUntil([&] {
      return HttpGet(port, "/metrics", &body) == 200 &&
             ParseSamples(body)["partq_items_acked_total{queue=\"q\"}"] == 1;
    }));
    worker.Signal(SIGTERM);
    ASSERT_TRUE(worker.Wait(absl::Seconds(30)).has_value());
    const std::string env = "\n" + testing::ReadFile(file);
    EXPECT_TRUE(absl::StrContains(env, "\nHANDLER_SETTING=kept\n")) << env;
    EXPECT_EQ(absl::StrContains(env, "\nPGPASSWORD=s3cret\n"), !flags.empty()) << env;
  }
  std::remove(file.c_str());
  const testing::PartqResult misplaced =
      testing::Partq({"worker", "q", "--handler", "noop", "--handler-env", "PGHOST", "--dsn",
                      schema.dsn(), "--schema", schema.name()});
  EXPECT_NE(misplaced.code, 0);
  EXPECT_TRUE(absl::StrContains(misplaced.err, "go with an exec: handler")) << misplaced.err;
}

// A batch the server throttled (429) is not a failure of its items: the
// worker's exit summary counts it apart from the retried.
TEST(WorkerSummaryTest, ThrottledItemsAreCountedApartFromTheRetried) {
  testing::TestSchema schema;
  QueueConfig q;
  q.name = "q";
  q.parts = 1;
  auto store = schema.NewStore();
  ASSERT_TRUE(store->CreateQueue(q).ok());
  for (const char* payload : {"a", "b", "c"}) {
    NewItem item;
    item.payload = payload;
    ASSERT_TRUE(store->Enqueue("q", item).ok());
  }
  testing::PortFileServer server({PYTHON3, HTTP_TEST_SERVER}, ::testing::TempDir());
  ASSERT_GT(server.port(), 0) << "see " << server.log();
  const int port = testing::FreePort();
  const std::string log = absl::StrCat(::testing::TempDir(), "/worker_summary.log");
  std::remove(log.c_str());
  ChildProcess worker(
      {testing::PartqBinary(), "worker", "q", "--handler",
       absl::StrCat("http:http://127.0.0.1:", server.port(), "/throttle?first=1&retry_after=1"),
       "--concurrency", "1", "--poll-interval", "100ms", "--metrics-addr",
       absl::StrCat("127.0.0.1:", port), "--dsn", schema.dsn(), "--schema", schema.name()},
      {}, log);
  std::string body;
  ASSERT_TRUE(WaitUntil([&] {
    return HttpGet(port, "/metrics", &body) == 200 &&
           ParseSamples(body)["partq_items_acked_total{queue=\"q\"}"] == 3;
  })) << "see "
      << log;
  worker.Signal(SIGTERM);
  ASSERT_TRUE(worker.Wait(absl::Seconds(30)).has_value());
  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  EXPECT_TRUE(absl::StrContains(text.str(),
                                "partq: worker stopped: 3 acked, 0 retried, 3 throttled (back "
                                "without using an attempt), 0 dead-lettered, 0 fenced"))
      << text.str();
  if (!HasFailure()) std::remove(log.c_str());
}

// An exec handler's failures are written after their batch's ack (issue 49),
// and until then the items are in flight: no claim may take them again. An
// ordered queue polled every 20 ms reads its part from the head, where they
// still are. 200 keyed items, every 20th failing for good, two worker threads
// claiming ahead: each item is asked of the handler once, the failing ones
// dead, the rest acked, nothing left in flight.
TEST(WorkerDeferredFailuresTest, AClaimAheadDoesNotTakeAFailureNotWrittenYet) {
  testing::TestSchema schema;
  QueueConfig q;
  q.name = "q";
  q.parts = 1;
  q.ordered = true;
  auto store = schema.NewStore();
  ASSERT_TRUE(store->CreateQueue(q).ok());
  for (int i = 0; i < 200; ++i) {
    NewItem item;
    item.payload = i % 20 == 7 ? "dead" : absl::StrCat("p", i);
    item.key = absl::StrCat("k", i % 5);
    ASSERT_TRUE(store->Enqueue("q", item).ok());
  }
  const int port = testing::FreePort();
  const std::string log = absl::StrCat(::testing::TempDir(), "/worker_deferred.log");
  const std::string trace = absl::StrCat(::testing::TempDir(), "/worker_deferred.trace");
  std::remove(log.c_str());
  std::remove(trace.c_str());
  ChildProcess worker({testing::PartqBinary(), "worker", "q", "--handler",
                       absl::StrCat("exec:TEST_CHILD_TRACE_FILE=", trace, " exec ", PYTHON3, " ",
                                    TEST_CHILD, " serve"),
                       "--concurrency", "2", "--batch", "10", "--poll-only", "--poll-interval",
                       "20ms", "--metrics-addr", absl::StrCat("127.0.0.1:", port), "--dsn",
                       schema.dsn(), "--schema", schema.name()},
                      {}, log);
  std::string body;
  std::map<std::string, double> m;
  ASSERT_TRUE(WaitUntil([&] {
    if (HttpGet(port, "/metrics", &body) != 200) return false;
    m = ParseSamples(body);
    return m["partq_items_acked_total{queue=\"q\"}"] +
               m["partq_items_dead_lettered_total{queue=\"q\"}"] >=
           200;
  })) << "see "
      << log;
  worker.Signal(SIGTERM);
  ASSERT_TRUE(worker.Wait(absl::Seconds(30)).has_value());
  EXPECT_EQ(m["partq_items_acked_total{queue=\"q\"}"], 190);
  EXPECT_EQ(m["partq_items_dead_lettered_total{queue=\"q\"}"], 10);
  std::stringstream text, traced;
  text << std::ifstream(log).rdbuf();
  traced << std::ifstream(trace).rdbuf();
  int asked = 0, dead = 0;
  for (absl::string_view line : absl::StrSplit(traced.str(), '\n', absl::SkipEmpty())) {
    ASSERT_TRUE(absl::ConsumePrefix(&line, "request: ")) << line;
    for (absl::string_view p : absl::StrSplit(line, ',')) {
      ++asked;
      dead += p == "dead";
    }
  }
  EXPECT_EQ(asked, 200) << traced.str();
  EXPECT_EQ(dead, 10) << "a failure not written yet was claimed again: " << traced.str();
  EXPECT_FALSE(absl::StrContains(text.str(), "finishing")) << text.str();
  EXPECT_EQ(schema.QInt("SELECT count(*) FROM {schema}.dead_items"), 10);
  EXPECT_EQ(schema.QInt("SELECT count(*) FROM {schema}.items"), 0);
  if (!HasFailure()) {
    std::remove(log.c_str());
    std::remove(trace.c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, WorkerHandlersTest,
                         ::testing::Values(WorkerCase{"Exec", "exec", "misbehave:fewer",
                                                      "bad_reply", "no result for item"},
                                           WorkerCase{"Http", "http", "poison", "server_error",
                                                      "HTTP 500 Internal Server Error"}),
                         [](const auto& test) { return test.param.name; });

}  // namespace
}  // namespace partq
