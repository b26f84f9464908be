// bridge/broker_health.h on a ManualClock: readiness from the all-brokers-
// down event and from statistics, and a warning that repeats every interval
// while no broker is reachable instead of once (or on every event).
#include "bridge/broker_health.h"

#include <string>

#include "absl/strings/match.h"
#include "base/clock.h"
#include "gtest/gtest.h"

namespace partq {
namespace {

constexpr char kUp[] = R"({"brokers": {"b:9092/1": {"nodeid": 1, "state": "UP"}}})";
constexpr char kDown[] =
    R"({"brokers": {"b:9092/1": {"nodeid": 1, "state": "CONNECT"},
                    "b:9092/bootstrap": {"nodeid": -1, "state": "DOWN"}}})";

TEST(KafkaBrokerHealth, NotReadyUntilABrokerIsUpThenFollowsIt) {
  ManualClock clock;
  BrokerHealth h("bridge publish", "b:9092", &clock, absl::Seconds(30));
  std::string why;
  EXPECT_FALSE(h.Ready(&why));
  EXPECT_TRUE(absl::StrContains(why, "not connected yet to a Kafka broker at b:9092")) << why;
  h.OnStats(kUp);
  EXPECT_TRUE(h.Ready(&why));
  clock.Advance(absl::Seconds(5));
  h.OnAllBrokersDown();
  EXPECT_FALSE(h.Ready(&why));
  clock.Advance(absl::Seconds(7));
  h.Ready(&why);
  EXPECT_EQ(why, "no Kafka broker reachable at b:9092 (for 7s)");
  h.OnStats(kUp);
  EXPECT_TRUE(h.Ready(&why));
  h.OnStats("not json");  // ignored
  EXPECT_TRUE(h.Ready(&why));
}

// A broker that answered (a delivery confirmed, a message fetched) makes the
// client ready before the first statistics: a publisher that delivered its
// first rows within the statistics interval said "not connected yet".
TEST(KafkaBrokerHealth, ABrokerThatAnsweredIsUpBeforeTheFirstStatistics) {
  ManualClock clock;
  BrokerHealth h("bridge publish", "b:9092", &clock, absl::Seconds(30));
  std::string why;
  EXPECT_FALSE(h.Ready(&why));
  h.OnBrokerAnswered();
  EXPECT_TRUE(h.Ready(&why));
  h.OnStats(kDown);  // the statistics rule from the first on
  EXPECT_FALSE(h.Ready(&why));
  EXPECT_TRUE(absl::StrContains(why, "Kafka broker")) << why;
  h.OnBrokerAnswered();
  EXPECT_FALSE(h.Ready(&why));
  h.OnStats(kUp);
  EXPECT_TRUE(h.Ready(&why));
}

// A consumer hands out messages it fetched before every broker went away:
// those rounds neither make it ready again nor hold back the warning.
TEST(KafkaBrokerHealth, AnswersAfterAllBrokersDownChangeNothing) {
  ManualClock clock;
  BrokerHealth h("bridge ingest", "b:9092", &clock, absl::Seconds(30));
  std::string why;
  h.OnStats(kUp);
  h.OnAllBrokersDown();
  EXPECT_EQ(h.warnings(), 1);
  for (int i = 0; i < 31; ++i) {
    clock.Advance(absl::Seconds(1));
    h.OnBrokerAnswered();
    EXPECT_FALSE(h.Ready(&why));
    h.OnStats(kDown);
  }
  EXPECT_EQ(h.warnings(), 2);
}

TEST(KafkaBrokerHealth, WarnsAtOnceThenEveryIntervalWhileDown) {
  ManualClock clock;
  BrokerHealth h("bridge ingest", "b:9092", &clock, absl::Seconds(30));
  h.OnAllBrokersDown();
  EXPECT_EQ(h.warnings(), 1);
  // Statistics every second for a minute: one more warning each 30 s.
  for (int i = 0; i < 60; ++i) {
    clock.Advance(absl::Seconds(1));
    h.OnStats(kDown);
  }
  EXPECT_EQ(h.warnings(), 3);
  h.OnStats(kUp);
  h.OnAllBrokersDown();  // a new outage warns at once
  EXPECT_EQ(h.warnings(), 4);
}

TEST(KafkaBrokerHealth, NoBrokerEverUpWarnsAfterOneIntervalWithoutTheEvent) {
  ManualClock clock;
  BrokerHealth h("bridge ingest", "b:9092", &clock, absl::Seconds(30));
  for (int i = 0; i < 29; ++i) {
    clock.Advance(absl::Seconds(1));
    h.OnStats(kDown);
  }
  EXPECT_EQ(h.warnings(), 0);
  clock.Advance(absl::Seconds(1));
  h.OnStats(kDown);
  EXPECT_EQ(h.warnings(), 1);
}

}  // namespace
}  // namespace partq
