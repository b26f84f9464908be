// A real `partq worker --metrics-addr` scraped over HTTP, on a real
// PostgreSQL: the page passes `promtool check metrics`, counters move as items
// flow through every outcome, histograms fill, the queue-depth gauges match
// `partq status --json`, and /healthz and /readyz answer.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "producer/metrics.h"
#include "producer/producer.h"
#include "tests/observability/scrape.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using testing::ChildProcess;
using testing::FindInPath;
using testing::HttpGet;
using testing::ParseSamples;
using testing::RunCommand;
using testing::TestSchema;

using testing::WaitUntil;

class WorkerScrapeTest : public ::testing::Test {
 protected:
  std::map<std::string, double> Scrape(std::string* page = nullptr) {
    std::string body;
    if (HttpGet(port_, "/metrics", &body) != 200) return {};
    if (page != nullptr) *page = body;
    return ParseSamples(body);
  }
  std::vector<std::string> Cli(std::vector<std::string> args) {
    args.insert(args.begin(), testing::PartqBinary());
    args.insert(args.end(), {"--dsn", schema_.dsn(), "--schema", schema_.name()});
    return args;
  }

  TestSchema schema_;
  int port_ = testing::FreePort();
};

TEST_F(WorkerScrapeTest, PagePassesPromtoolAndFollowsTheItems) {
  constexpr int kItems = 400;
  QueueConfig q;
  q.name = "jobs";
  q.parts = 4;
  q.max_attempts = 2;  // with fail:0.3, about 9% of the items die
  ASSERT_TRUE(schema_.NewStore()->CreateQueue(q).ok());

  const std::string log = ::testing::TempDir() + "worker_scrape.log";
  ChildProcess worker(Cli({"worker", "jobs", "--handler", "fail:0.3,record:effects",
                           "--concurrency", "2", "--batch", "20", "--poll-interval", "100ms",
                           "--retry-base", "10ms", "--retry-max", "50ms", "--metrics-addr",
                           absl::StrCat("127.0.0.1:", port_), "--quiet"}),
                      {}, log);
  std::string body;
  ASSERT_TRUE(WaitUntil([&] { return HttpGet(port_, "/healthz", &body) == 200; }))
      << "no /healthz on port " << port_ << " (see " << log << ")";
  ASSERT_TRUE(WaitUntil([&] { return HttpGet(port_, "/readyz", &body) == 200; })) << body;

  // Enqueue through a Producer that exports partq_items_enqueued_total.
  prometheus::Registry producer_registry;
  ProducerMetrics producer_metrics(producer_registry);
  Producer producer(schema_.NewStore(), &producer_metrics);
  std::vector<NewItem> items(kItems);
  for (int i = 0; i < kItems; ++i) items[i].payload = absl::StrCat("item-", i);
  ASSERT_TRUE(producer.EnqueueBatch("jobs", items).ok());
  EXPECT_EQ(testing::MetricValue(producer_registry, "partq_items_enqueued_total"), kItems);

  std::map<std::string, double> m;
  ASSERT_TRUE(WaitUntil([&] {
    m = Scrape();
    return m["partq_items_acked_total"] + m["partq_items_dead_lettered_total"] == kItems;
  })) << "acked " << m["partq_items_acked_total"] << ", dead "
      << m["partq_items_dead_lettered_total"];
  const std::string jobs = "{queue=\"jobs\"}";
  EXPECT_GE(m["partq_items_claimed_total" + jobs], kItems);
  EXPECT_GT(m["partq_items_acked_total" + jobs], 0);
  EXPECT_GT(m["partq_items_nacked_total" + jobs], 0);
  EXPECT_GT(m["partq_items_dead_lettered_total" + jobs], 0);
  EXPECT_EQ(m["partq_items_acked_total" + jobs],
            schema_.QInt("SELECT count(*) FROM {schema}.effects"));
  EXPECT_EQ(m["partq_items_dead_lettered_total" + jobs],
            schema_.QInt("SELECT count(*) FROM {schema}.dead_items"));
  // Every failed attempt, by reason: fail:RATE's are the handler's errors.
  EXPECT_EQ(m["partq_item_failures_total{queue=\"jobs\",reason=\"handler_error\"}"],
            m["partq_items_nacked_total" + jobs] + m["partq_items_dead_lettered_total" + jobs]);
  EXPECT_EQ(m["partq_item_failures_total{queue=\"jobs\",reason=\"timeout\"}"], 0);
  for (const char* h : {"partq_item_latency_seconds", "partq_item_wait_seconds",
                        "partq_handler_duration_seconds", "partq_ack_duration_seconds",
                        "partq_claim_duration_seconds", "partq_handoff_duration_seconds"}) {
    EXPECT_GT(m[absl::StrCat(h, "_count", jobs)], 0) << h;
    EXPECT_GT(m[absl::StrCat(h, "_bucket{queue=\"jobs\",le=\"+Inf\"}")], 0) << h;
  }
  EXPECT_EQ(m["partq_parts_owned" + jobs], 4);
  EXPECT_GE(m["partq_rebalances_total" + jobs], 1);
  EXPECT_EQ(m["partq_worker_concurrency" + jobs], 2);
  EXPECT_EQ(m["partq_heartbeat_failures_total" + jobs], 0);

  // Items that wait: delayed ones (as `partq enqueue` would make them).
  for (int i = 0; i < 3; ++i) {
    std::string out;
    ASSERT_EQ(RunCommand(Cli({"enqueue", "jobs", "later", "--delay", "1h"}), &out), 0) << out;
  }
  // At a quiet moment the depth gauges equal what `partq status` reports.
  nlohmann::json totals;
  std::string page;
  ASSERT_TRUE(WaitUntil([&] {
    std::string json;
    if (RunCommand(Cli({"status", "jobs", "--json"}), &json) != 0) return false;
    auto status = nlohmann::json::parse(json);
    totals = status["totals"];
    m = Scrape(&page);
    return m["partq_queue_ready_items" + jobs] == totals["ready"].get<double>() &&
           m["partq_queue_delayed_items" + jobs] == totals["delayed"].get<double>() &&
           m["partq_queue_in_flight_items" + jobs] == totals["in_flight"].get<double>() &&
           m["partq_queue_dead_items" + jobs] == totals["dead"].get<double>() &&
           m["partq_queue_cancelled_items" + jobs] == totals["cancelled"].get<double>() &&
           m["partq_queue_unowned_parts" + jobs] == totals["unowned_parts"].get<double>() &&
           m["partq_sessions" + jobs] == static_cast<double>(status["sessions"].size()) &&
           m["partq_queue_collector" + jobs] == 1;  // the only worker owns part 0
  }, absl::Seconds(30)))
      << "status totals " << totals.dump() << "\n" << page;
  EXPECT_EQ(totals["delayed"].get<int>(), 3);
  EXPECT_EQ(m["partq_sessions" + jobs], 1);
  EXPECT_EQ(m["partq_queue_oldest_ready_age_seconds" + jobs], 0);
  // The process_* metrics every client library exports, read from /proc.
  EXPECT_GT(m["process_resident_memory_bytes"], 1 << 20);
  EXPECT_GE(m["process_virtual_memory_bytes"], m["process_resident_memory_bytes"]);
  EXPECT_GT(m["process_cpu_seconds_total"], 0);
  EXPECT_GE(m["process_open_fds"], 3);
  EXPECT_GE(m["process_max_fds"], m["process_open_fds"]);
  const double now = absl::ToUnixSeconds(absl::Now());
  EXPECT_GT(m["process_start_time_seconds"], now - 600);
  EXPECT_LE(m["process_start_time_seconds"], now + 1);

  // promtool, on the page as Prometheus would scrape it.
  ASSERT_FALSE(page.empty());
  std::ofstream(::testing::TempDir() + "worker_scrape_metrics.txt") << page;
  const std::string promtool = FindInPath("promtool");
  ASSERT_FALSE(promtool.empty())
      << "promtool is not installed: it comes with Debian's prometheus package "
         "(scripts/lib.sh installs it)";
  std::string lint;
  const int rc = RunCommand({promtool, "check", "metrics"}, &lint, {}, page);
  EXPECT_EQ(rc, 0) << "promtool check metrics:\n" << lint << "\n" << page;
  // Labels carry the queue, and beside it only a histogram's bucket, a
  // group's state (three values) or a failure's reason (seven): no session
  // or item ids.
  EXPECT_EQ(page.find("session="), std::string::npos);
  for (const auto& [series, value] : m) {
    const auto brace = series.find('{');
    if (brace == std::string::npos) continue;
    const std::string labels = series.substr(brace);
    EXPECT_TRUE(labels.rfind("{queue=\"jobs\"", 0) == 0) << series;
    const auto comma = labels.find(',');
    EXPECT_TRUE(comma == std::string::npos || labels.find(",le=") == comma ||
                labels.find(",state=") == comma ||
                std::regex_match(labels.substr(comma),
                                 std::regex(",reason=\"(handler_error|effect|timeout|crash|"
                                            "protocol|connection|throttled)\"\\}")))
        << "unexpected label in " << series;
  }

  worker.Signal(SIGTERM);
  auto status = worker.Wait(absl::Seconds(30));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
}

}  // namespace
}  // namespace partq
