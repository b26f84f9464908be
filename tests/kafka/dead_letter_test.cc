// The dead-letter topic end to end, on the mock cluster and a real
// PostgreSQL: messages with headers produced to a topic -> bridge ingest ->
// a consumer whose handler refuses some of them -> dead-lettered into the
// outbox -> bridge publish -> read back from the dead-letter topic by an
// rdkafka++ consumer, key, payload and headers byte for byte.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "consumer/consumer.h"
#include "consumer/handler.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "bridge/bridge_ingest.h"
#include "bridge/bridge_publish.h"
#include "tests/kafka/kafka_env.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using testing::Header;
using testing::KafkaRecord;

constexpr int kMessages = 30;

// Message i: mostly keys k0..k4, with a binary key, a plain key that looks
// like the item key's hex form, and no key at all among the ones that die;
// headers with text, binary and null values.
std::vector<KafkaRecord> Messages() {
  std::vector<KafkaRecord> out;
  for (int i = 0; i < kMessages; ++i) {
    KafkaRecord r;
    r.payload = absl::StrCat("m", i);
    if (i == 3) {
      r.key = std::string("\xff\x00\x01", 3);
    } else if (i == 6) {
      r.key = "\\x41";
    } else if (i != 9) {
      r.key = absl::StrCat("k", i % 5);
    }
    r.headers = {{"seq", absl::StrCat(i)}, {"trace", absl::StrCat("t-", i)}};
    if (i % 2 == 0) r.headers.emplace_back("bin", std::string("\xfe\x00\xff", 3));
    if (i % 4 == 0) r.headers.emplace_back("nil", std::nullopt);
    out.push_back(std::move(r));
  }
  return out;
}

bool Dies(const std::string& payload) {
  int i = 0;
  return absl::SimpleAtoi(payload.substr(1), &i) && i % 3 == 0;
}

class KafkaDeadLetterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.CreateTopic("events", 4);
    cluster_.CreateTopic("events.dlq", 2);
  }
  // `partq ARGS --dsn ... --schema ...`; returns stdout, fails the test on a
  // non-zero exit.
  std::string Cli(std::vector<std::string> args) {
    args.insert(args.begin(), testing::PartqBinary());
    args.insert(args.end(), {"--dsn", schema_.dsn(), "--schema", schema_.name()});
    std::string out;
    EXPECT_EQ(testing::RunCommand(args, &out), 0) << args[1] << " " << args[2] << ": " << out;
    return out;
  }
  int64_t Count(const std::string& table) {
    return schema_.QInt(absl::StrCat("SELECT count(*) FROM {schema}.", table));
  }

  testing::TestSchema schema_;
  testing::MockCluster cluster_{3};
};

TEST_F(KafkaDeadLetterTest, DeadItemsReachTheTopicAsTheyCameWithConnectStyleContextHeaders) {
  // The queue exists first; its dead-letter topic is set later, as an
  // operator would on a running system.
  Cli({"queue", "create", "jobs", "--parts", "4", "--max-attempts", "2"});
  EXPECT_NE(Cli({"queue", "set", "jobs", "--dlq-topic", "events.dlq"}).find("events.dlq"),
            std::string::npos);
  auto listed = nlohmann::json::parse(Cli({"queue", "list", "--json"}));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0]["dlq_topic"], "events.dlq");
  auto status = nlohmann::json::parse(Cli({"status", "jobs", "--json"}));
  EXPECT_EQ(status["queue"]["dlq_topic"], "events.dlq");

  const std::vector<KafkaRecord> produced =
      testing::Produce(cluster_.bootstraps(), "events", Messages());
  ASSERT_EQ(produced.size(), static_cast<size_t>(kMessages));

  BridgeIngestOptions in;
  in.brokers = cluster_.bootstraps();
  in.topic = "events";
  in.queue = "jobs";
  in.kafka_config = {{"session.timeout.ms", "6000"}, {"heartbeat.interval.ms", "500"}};
  BridgeIngest ingest(schema_.BridgeFactory(), in, nullptr);
  ASSERT_TRUE(ingest.Start().ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return Count("items") == kMessages; })) << Count("items");
  ingest.Stop();

  // Refuses every third message; the rest are acked. Two attempts each.
  auto handler = MakeHandler([](HandlerCall& call) -> absl::Status {
    if (Dies(call.item->payload)) return absl::InternalError("refused: " + call.item->payload);
    return absl::OkStatus();
  });
  ConsumerOptions co;
  co.queue = "jobs";
  co.concurrency = 2;
  co.batch = 8;
  co.poll_interval = absl::Milliseconds(20);
  co.backoff.base = absl::Milliseconds(5);
  co.backoff.max = absl::Milliseconds(20);
  Consumer consumer(schema_.Factory(), co, handler.get());
  ASSERT_TRUE(consumer.Start().ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return Count("items") == 0; })) << Count("items");
  consumer.Stop();
  const int64_t dead = Count("dead_items");
  EXPECT_EQ(dead, kMessages / 3);
  EXPECT_EQ(Count("outbox"), dead);

  BridgePublishOptions out;
  out.brokers = cluster_.bootstraps();
  BridgePublish publish(schema_.BridgeFactory(), out, nullptr);
  ASSERT_TRUE(publish.Start().ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return Count("outbox") == 0; }));
  publish.Stop();

  // The item id of each dead message, by its origin.
  std::map<std::pair<int32_t, int64_t>, std::string> item_id;
  for (const auto& row : schema_.Q("SELECT origin_partition, origin_offset, id "
                                   "FROM {schema}.dead_items")) {
    item_id[{std::stoi(*row[0]), std::stoll(*row[1])}] = *row[2];
  }
  std::map<std::string, KafkaRecord> letters;  // by payload
  for (KafkaRecord& r : testing::ConsumeAll(cluster_.bootstraps(), "events.dlq")) {
    EXPECT_TRUE(letters.emplace(r.payload, r).second) << "two dead letters for " << r.payload;
  }
  EXPECT_EQ(static_cast<int64_t>(letters.size()), dead);
  for (const KafkaRecord& m : produced) {
    SCOPED_TRACE(m.payload);
    auto it = letters.find(m.payload);
    if (!Dies(m.payload)) {
      EXPECT_EQ(it, letters.end()) << "an acked message reached the dead-letter topic";
      continue;
    }
    ASSERT_NE(it, letters.end()) << "no dead letter";
    const KafkaRecord& d = it->second;
    EXPECT_EQ(d.key, m.key);
    std::vector<Header> want = m.headers;
    for (Header h : std::vector<Header>{
             {"__connect.errors.topic", "events"},
             {"__connect.errors.partition", absl::StrCat(m.partition)},
             {"__connect.errors.offset", absl::StrCat(m.offset)},
             {"__connect.errors.exception.message", "refused: " + m.payload},
             {"partq.errors.attempts", "2"},
             {"partq.errors.queue", "jobs"},
             {"partq.errors.item.id", item_id[{m.partition, m.offset}]}}) {
      want.push_back(std::move(h));
    }
    EXPECT_EQ(d.headers, want);
  }
}

}  // namespace
}  // namespace partq
