// Real `partq bridge ingest` and `partq bridge publish` processes with
// --metrics-addr, on the mock cluster and a real PostgreSQL, scraped over
// HTTP: their /metrics pages pass `promtool check metrics`, carry only topic
// and queue labels, and count what went through (messages in and out, batch
// sizes, lag back to zero, a failed delivery). Their /readyz follows the
// brokers: 503 naming them while none is reachable, 200 once one is.
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <signal.h>
#include <sys/wait.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/kafka/kafka_env.h"
#include "tests/observability/scrape.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using testing::ChildProcess;

constexpr int16_t kApiProduce = 0;

class BridgeScrapeTest : public ::testing::Test {
 protected:
  std::vector<std::string> Bridge(std::vector<std::string> args, int port,
                                  const std::string& brokers = "") {
    args.insert(args.begin(), {testing::PartqBinary(), "bridge"});
    args.insert(args.end(), {"--brokers", brokers.empty() ? cluster_.bootstraps() : brokers,
                             "--dsn", schema_.dsn(), "--schema", schema_.name(), "--metrics-addr",
                             absl::StrCat("127.0.0.1:", port), "--quiet"});
    return args;
  }
  // The page and its samples; empty when the server does not answer.
  std::map<std::string, double> Scrape(int port, std::string* page) {
    if (testing::HttpGet(port, "/metrics", page) != 200) return {};
    return testing::ParseSamples(*page);
  }
  // promtool's verdict on `page`, and only topic/queue (and le) labels.
  void ExpectWellFormed(const std::string& page) {
    const std::string promtool = testing::FindInPath("promtool");
    ASSERT_FALSE(promtool.empty())
        << "promtool is not installed: it comes with Debian's prometheus package "
           "(scripts/lib.sh installs it)";
    std::string lint;
    EXPECT_EQ(testing::RunCommand({promtool, "check", "metrics"}, &lint, {}, page), 0)
        << "promtool check metrics:\n" << lint << "\n" << page;
    for (const auto& [series, value] : testing::ParseSamples(page)) {
      const auto brace = series.find('{');
      if (brace == std::string::npos || series.rfind("partq_", 0) != 0) continue;
      const std::string labels = series.substr(brace + 1, series.size() - brace - 2);
      for (absl::string_view label : absl::StrSplit(labels, ',')) {
        const absl::string_view name = label.substr(0, label.find('='));
        EXPECT_TRUE(name == "queue" || name == "topic" || name == "le") << series;
      }
    }
  }

  testing::TestSchema schema_;
  testing::MockCluster cluster_{3};
};

TEST_F(BridgeScrapeTest, IngestAndPublishPagesPassPromtoolAndCount) {
  cluster_.CreateTopic("events", 4);
  cluster_.CreateTopic("results", 2);
  QueueConfig q;
  q.name = "jobs";
  q.parts = 4;
  ASSERT_TRUE(schema_.NewStore()->CreateQueue(q).ok());
  ASSERT_EQ(testing::ProduceKeyed(cluster_.bootstraps(), "events", 300, 7).size(), 300u);

  const int in_port = testing::FreePort();
  ChildProcess ingest(Bridge({"ingest", "--topic", "events", "--queue", "jobs", "--batch", "40",
                              "--kafka-config",
                              "session.timeout.ms=6000,heartbeat.interval.ms=500"},
                             in_port),
                      {}, ::testing::TempDir() + "bridge_scrape_ingest.log");
  const std::string in_series = "{queue=\"jobs\",topic=\"events\"}";
  std::string page;
  std::map<std::string, double> m;
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        m = Scrape(in_port, &page);
        return m["partq_bridge_messages_in_total" + in_series] == 300 &&
               m.count("partq_bridge_lag_messages" + in_series) &&
               m["partq_bridge_lag_messages" + in_series] == 0;
      },
      absl::Seconds(60)))
      << page;
  EXPECT_EQ(m["partq_bridge_ingest_batch_messages_sum{queue=\"jobs\"}"], 300);
  EXPECT_GE(m["partq_bridge_ingest_batch_messages_count{queue=\"jobs\"}"], 300 / 40);
  EXPECT_EQ(m["partq_bridge_paused_partitions" + in_series], 0);
  EXPECT_EQ(m.at("partq_bridge_ingest_conflicts_total{queue=\"jobs\"}"), 0);
  EXPECT_EQ(m.at("partq_bridge_ingest_errors_total{queue=\"jobs\"}"), 0);
  ExpectWellFormed(page);
  std::string ready;
  EXPECT_EQ(testing::HttpGet(in_port, "/readyz", &ready), 200) << ready;
  ingest.Signal(SIGTERM);
  auto st = ingest.Wait(absl::Seconds(30));
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);

  // The publisher: one delivery fails for good (the brokers refuse the
  // batch), is counted, and the row is sent again.
  schema_.Q("INSERT INTO {schema}.outbox (topic, key, payload) "
            "SELECT 'results', convert_to('k' || (i % 5), 'UTF8'), convert_to('r' || i, 'UTF8') "
            "FROM generate_series(1, 120) i");
  rd_kafka_mock_push_request_errors(cluster_.get(), kApiProduce, 1,
                                    RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
  const int out_port = testing::FreePort();
  ChildProcess publish(Bridge({"publish", "--batch", "50"}, out_port), {},
                       ::testing::TempDir() + "bridge_scrape_publish.log");
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        m = Scrape(out_port, &page);
        return m["partq_bridge_messages_out_total{topic=\"results\"}"] == 120;
      },
      absl::Seconds(60)))
      << page;
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.outbox"), 0);
  EXPECT_GE(m["partq_bridge_delivery_failures_total{topic=\"results\"}"], 1);
  ExpectWellFormed(page);
  EXPECT_EQ(testing::HttpGet(out_port, "/readyz", &ready), 200) << ready;
  publish.Signal(SIGTERM);
  st = publish.Wait(absl::Seconds(30));
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
}

// A wrong --brokers used to look healthy (/readyz 200, silence after the
// first second). The counters of an ingesting bridge used to appear only at
// their first increment, so rate() had no data: they are there at 0 from the
// start, here before any message could arrive.
TEST_F(BridgeScrapeTest, UnreachableBrokersMakeIngestNotReadyWithItsCountersAtZero) {
  QueueConfig q;
  q.name = "jobs";
  q.parts = 4;
  ASSERT_TRUE(schema_.NewStore()->CreateQueue(q).ok());
  const int port = testing::FreePort();
  ChildProcess ingest(
      Bridge({"ingest", "--topic", "events", "--queue", "jobs"}, port, "127.0.0.1:1"), {},
      ::testing::TempDir() + "bridge_unreachable_ingest.log");
  std::string body;
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        return testing::HttpGet(port, "/readyz", &body) == 503 &&
               absl::StrContains(body, "no Kafka broker reachable at 127.0.0.1:1");
      },
      absl::Seconds(30)))
      << body;
  std::string page;
  std::map<std::string, double> m = Scrape(port, &page);
  EXPECT_EQ(m.at("partq_bridge_ingest_conflicts_total{queue=\"jobs\"}"), 0) << page;
  EXPECT_EQ(m.at("partq_bridge_ingest_errors_total{queue=\"jobs\"}"), 0) << page;
  EXPECT_EQ(m.at("partq_bridge_messages_in_total{queue=\"jobs\",topic=\"events\"}"), 0) << page;
  ExpectWellFormed(page);
  ingest.Signal(SIGTERM);
  auto st = ingest.Wait(absl::Seconds(30));
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
}

// The publisher is ready once connected, not ready while every broker of the
// cluster is down, and ready again when one comes back.
TEST_F(BridgeScrapeTest, PublishReadinessFollowsTheBrokers) {
  const int port = testing::FreePort();
  ChildProcess publish(Bridge({"publish"}, port), {},
                       ::testing::TempDir() + "bridge_readiness_publish.log");
  std::string body;
  auto ready_is = [&](int code) {
    return testing::WaitUntil([&] { return testing::HttpGet(port, "/readyz", &body) == code; },
                              absl::Seconds(60));
  };
  ASSERT_TRUE(ready_is(200)) << body;
  for (int b = 1; b <= 3; ++b) rd_kafka_mock_broker_set_down(cluster_.get(), b);
  ASSERT_TRUE(ready_is(503)) << body;
  EXPECT_TRUE(absl::StrContains(body, cluster_.bootstraps())) << body;
  for (int b = 1; b <= 3; ++b) rd_kafka_mock_broker_set_up(cluster_.get(), b);
  ASSERT_TRUE(ready_is(200)) << body;
  publish.Signal(SIGTERM);
  auto st = publish.Wait(absl::Seconds(30));
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
}

}  // namespace
}  // namespace partq
