// Per-key order from topic to ack (docs/architecture.md I7 through the bridge), on the
// mock cluster and a real PostgreSQL: keyed messages on a multi-partition
// topic, ingested while consumer sessions of an ordered queue process them,
// with a session joining and another leaving mid-way so parts change hands.
// The handler records (key, sequence) inside its ack transaction, numbered by
// a bigserial, so the table's order is the commit order of each key's acks.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "consumer/consumer.h"
#include "consumer/handler.h"
#include "gtest/gtest.h"
#include "bridge/bridge_ingest.h"
#include "tests/kafka/kafka_env.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

constexpr int kKeys = 16;
constexpr int kPerKey = 40;
constexpr int kMessages = kKeys * kPerKey;

TEST(KafkaKeyOrder, EachKeyIsAckedInTopicOrderWhileSessionsJoinAndLeave) {
  testing::TestSchema schema;
  testing::MockCluster cluster(3);
  cluster.CreateTopic("events", 4);
  QueueConfig q;
  q.name = "jobs";
  q.parts = 8;
  q.ordered = true;
  q.max_attempts = 1000;  // failures retry; none may die
  q.session_ttl = absl::Seconds(5);
  ASSERT_TRUE(schema.NewStore()->CreateQueue(q).ok());
  schema.Q(
      "CREATE TABLE {schema}.acks (n bigserial PRIMARY KEY, key text NOT NULL, "
      "seq int NOT NULL, session uuid NOT NULL)");

  // Payload "<key> <seq>": seq counts each key's messages in produce order.
  std::vector<testing::KafkaRecord> records;
  for (int i = 0; i < kMessages; ++i) {
    testing::KafkaRecord r;
    r.key = absl::StrCat("key-", i % kKeys);
    r.payload = absl::StrCat(*r.key, " ", i / kKeys);
    records.push_back(std::move(r));
  }
  // The messages go out in two halves. Sessions join and leave while items
  // are in flight, but the second half is produced only once the third
  // session owns parts, so it gets some: produced at once, the first two
  // sessions could ack everything before it owned a part (a run saw that,
  // 1 in ~45).
  auto produce_half = [&](int k) {
    std::vector<testing::KafkaRecord> half(records.begin() + k * kMessages / 2,
                                           records.begin() + (k + 1) * kMessages / 2);
    ASSERT_EQ(testing::Produce(cluster.bootstraps(), "events", half).size(), half.size());
  };
  // Whether `n` sessions share all parts, each owning at least one.
  auto settled = [&](size_t n) {
    auto group = schema.NewStore()->Owners("jobs");
    if (!group.ok() || group->sessions.size() != n) return false;
    std::map<std::string, int> owned;
    for (const auto& owner : group->owners) {
      if (!owner) return false;
      ++owned[owner->value];
    }
    return owned.size() == n;
  };

  // One failure in ten is retried (its write rolls back); the rest record.
  auto handler = MakeHandler([](HandlerCall& call) -> absl::Status {
    thread_local absl::BitGen gen;
    if (absl::Bernoulli(gen, 0.1)) return absl::UnavailableError("try again");
    std::pair<std::string, std::string> kv = absl::StrSplit(call.item->payload, ' ');
    auto r = call.tx->Exec(absl::StrCat("INSERT INTO \"", call.tx->schema(),
                                        "\".acks (key, seq, session) VALUES ($1, $2, $3)"),
                           {kv.first, kv.second, call.session->value});
    return r.status();
  });
  auto start = [&] {
    ConsumerOptions o;
    o.queue = "jobs";
    o.concurrency = 3;
    o.batch = 10;
    o.poll_interval = absl::Milliseconds(20);
    o.backoff.base = absl::Milliseconds(1);
    o.backoff.max = absl::Milliseconds(5);
    auto c = std::make_unique<Consumer>(schema.Factory(), o, handler.get());
    EXPECT_TRUE(c->Start().ok());
    return c;
  };
  auto acks = [&] { return schema.QInt("SELECT count(*) FROM {schema}.acks"); };

  auto a = start();
  auto b = start();
  BridgeIngestOptions in;
  in.brokers = cluster.bootstraps();
  in.topic = "events";
  in.queue = "jobs";
  in.batch_max = 20;  // items keep arriving while the sessions work
  in.kafka_config = {{"session.timeout.ms", "6000"}, {"heartbeat.interval.ms", "500"}};
  BridgeIngest ingest(schema.BridgeFactory(), in, nullptr);
  ASSERT_TRUE(ingest.Start().ok());

  produce_half(0);
  ASSERT_TRUE(testing::WaitUntil([&] { return acks() >= kMessages / 4; })) << acks();
  auto c = start();  // joins: parts move to it
  ASSERT_TRUE(testing::WaitUntil([&] { return settled(3); }));
  produce_half(1);
  ASSERT_TRUE(testing::WaitUntil([&] { return acks() >= 2 * kMessages / 3; })) << acks();
  a->Stop();  // leaves: its parts move to b and c
  ASSERT_TRUE(testing::WaitUntil([&] {
    return acks() == kMessages && schema.QInt("SELECT count(*) FROM {schema}.items") == 0;
  })) << acks();
  ingest.Stop();
  b->Stop();
  c->Stop();

  EXPECT_EQ(schema.QInt("SELECT count(*) FROM {schema}.dead_items"), 0);
  EXPECT_EQ(acks(), kMessages);
  EXPECT_EQ(schema.QInt("SELECT count(DISTINCT (key, seq)) FROM {schema}.acks"), kMessages);
  // Per key, in commit order, the sequence is 0, 1, 2, ... with no gap,
  // repeat or swap.
  EXPECT_EQ(schema.QInt("SELECT count(*) FROM (SELECT seq, row_number() OVER "
                        "(PARTITION BY key ORDER BY n) - 1 AS pos FROM {schema}.acks) x "
                        "WHERE seq <> pos"),
            0);
  EXPECT_EQ(schema.QInt("SELECT count(DISTINCT key) FROM {schema}.acks"), kKeys);
  // Parts really changed hands: all three sessions acked, and some key was
  // acked by more than one of them.
  EXPECT_EQ(schema.QInt("SELECT count(DISTINCT session) FROM {schema}.acks"), 3);
  EXPECT_GT(schema.QInt("SELECT count(*) FROM (SELECT key FROM {schema}.acks GROUP BY key "
                        "HAVING count(DISTINCT session) > 1) x"),
            0);
  EXPECT_GT(c->stats().acked, 0);
}

}  // namespace
}  // namespace partq
