#include "partitioner/part.h"

#include <librdkafka/rdkafka.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace partq {
namespace {

// Kafka's own vectors (clients' UtilsTest.testMurmur2), as Java's signed int.
TEST(Murmur2, MatchesKafkaUtilsTestVectors) {
  EXPECT_EQ(static_cast<int32_t>(Murmur2("21")), -973932308);
  EXPECT_EQ(static_cast<int32_t>(Murmur2("foobar")), -790332482);
  EXPECT_EQ(static_cast<int32_t>(Murmur2("a-little-bit-long-string")), -985981536);
  EXPECT_EQ(static_cast<int32_t>(Murmur2("a-little-bit-longer-string")), -1486304829);
  EXPECT_EQ(static_cast<int32_t>(Murmur2("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8")),
            -58897971);
  EXPECT_EQ(static_cast<int32_t>(Murmur2("abc")), 479470107);
}

// Every tail length (0..3 bytes after the blocks) and negative Java bytes.
TEST(Murmur2, CoversEveryTailLengthAndHighBytes) {
  EXPECT_EQ(static_cast<int32_t>(Murmur2("1")), -1993445489);
  EXPECT_EQ(static_cast<int32_t>(Murmur2("12")), 126087238);
  EXPECT_EQ(static_cast<int32_t>(Murmur2("123")), -267702483);
  EXPECT_EQ(static_cast<int32_t>(Murmur2("1234")), -1614185708);
  EXPECT_EQ(static_cast<int32_t>(Murmur2("12345")), -1188365604);
  // Bytes >= 0x80 are negative in Java; `& 0xff` must make them unsigned.
  const std::string high("\xff\x80\xfe\x00\x81\xc3", 6);
  const std::string flipped("\x7f\x00\x7e\x00\x01\x43", 6);
  EXPECT_NE(Murmur2(high), Murmur2(flipped));
}

TEST(Murmur2, HashesEmbeddedNulBytes) {
  EXPECT_NE(Murmur2(absl::string_view("a\0b", 3)), Murmur2(absl::string_view("a\0c", 3)));
  EXPECT_NE(Murmur2(absl::string_view("\0", 1)), Murmur2(absl::string_view("", 0)));
}

// librdkafka's murmur2 partitioner is the Java client's partitioner in C:
// (murmur2(key) & 0x7fffffff) % partitions. A producer with no brokers and a
// topic handle are enough to call it; nothing touches the network.
class LibrdkafkaPartitioner : public ::testing::Test {
 protected:
  void SetUp() override {
    char errstr[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    ASSERT_NE(rk_, nullptr) << errstr;
    rkt_ = rd_kafka_topic_new(rk_, "partq-murmur2", nullptr);
    ASSERT_NE(rkt_, nullptr);
  }

  void TearDown() override {
    if (rkt_ != nullptr) rd_kafka_topic_destroy(rkt_);
    if (rk_ != nullptr) rd_kafka_destroy(rk_);
  }

  int32_t KafkaPart(const std::string& key, int32_t parts) const {
    return rd_kafka_msg_partitioner_murmur2(rkt_, key.data(), key.size(), parts, nullptr, nullptr);
  }

  rd_kafka_t* rk_ = nullptr;
  rd_kafka_topic_t* rkt_ = nullptr;
};

TEST_F(LibrdkafkaPartitioner, PartForKeyMatchesOnRandomKeys) {
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int> length(0, 80);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> parts(1, 4096);
  for (int i = 0; i < 50000; ++i) {
    std::string key(length(rng), '\0');
    for (char& c : key) c = static_cast<char>(byte(rng));
    const int p = i % 5 == 0 ? 1 + i % 16 : parts(rng);
    ASSERT_EQ(PartForKey(key, p), KafkaPart(key, p)) << "key #" << i << " parts " << p;
  }
}

TEST_F(LibrdkafkaPartitioner, PartForKeyMatchesOnTextKeys) {
  for (int parts : {1, 2, 3, 7, 12, 64, 100, 1024, 4096}) {
    for (int i = 0; i < 2000; ++i) {
      const std::string key = "user-" + std::to_string(i);
      ASSERT_EQ(PartForKey(key, parts), KafkaPart(key, parts)) << key << " parts " << parts;
    }
  }
}

// With INT32_MAX partitions the partitioner returns all 31 low bits of the
// hash (except the one value 0x7fffffff), which checks Murmur2 itself far
// beyond the few published vectors; the vectors above check the sign bit.
TEST_F(LibrdkafkaPartitioner, Murmur2LowBitsMatchOnRandomKeys) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> length(0, 300);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int i = 0; i < 20000; ++i) {
    std::string key(length(rng), '\0');
    for (char& c : key) c = static_cast<char>(byte(rng));
    const uint32_t expected = (Murmur2(key) & 0x7fffffffu) % static_cast<uint32_t>(kMax);
    ASSERT_EQ(expected, static_cast<uint32_t>(KafkaPart(key, kMax))) << "key #" << i;
  }
}

TEST(PartForKey, UsesToPositiveOfMurmur2) {
  // -973932308 & 0x7fffffff = 1173551340.
  EXPECT_EQ(PartForKey("21", 1000), 1173551340 % 1000);
  EXPECT_EQ(PartForKey("21", 1), 0);
}

TEST(PartForKey, SameKeySamePart) {
  for (int parts : {1, 7, 64, 4096}) {
    EXPECT_EQ(PartForKey("order-42", parts), PartForKey(std::string("order-") + "42", parts));
  }
}

TEST(PartForId, IsInRangeForExtremeAndNegativeIds) {
  const std::vector<int64_t> ids = {0,
                                    1,
                                    -1,
                                    42,
                                    -42,
                                    std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min(),
                                    std::numeric_limits<int64_t>::min() + 1};
  for (int parts : {1, 2, 7, 64, 1024, 4096}) {
    for (int64_t id : ids) {
      const int part = PartForId(id, parts);
      EXPECT_GE(part, 0) << id;
      EXPECT_LT(part, parts) << id;
    }
  }
}

TEST(PartForId, SingleItemPartIsZero) {
  for (int64_t id : {int64_t{0}, int64_t{-5}, int64_t{123456789}}) EXPECT_EQ(PartForId(id, 1), 0);
}

// Pins the mapping (values computed independently from the splitmix64
// finalizer of id >> 5, a logical shift): a change would silently re-route
// keyless items.
TEST(PartForId, IsStable) {
  std::vector<int> got;
  for (int64_t id : {int64_t{0}, int64_t{1}, int64_t{31}, int64_t{32}, int64_t{64}, int64_t{-1},
                     int64_t{1000000}}) {
    got.push_back(PartForId(id, 4096));
  }
  EXPECT_EQ(got, (std::vector<int>{0, 0, 0, 1509, 1162, 3075, 2703}));
  EXPECT_EQ(PartForId(32, 7), 6);
  EXPECT_EQ(PartForId(1000000, 7), 3);
}

// The ids of one aligned run share a part; the next run is spread anew.
TEST(PartForId, ConsecutiveIdsShareAPartInRuns) {
  for (int parts : {7, 16, 4096}) {
    for (int64_t run : {int64_t{0}, int64_t{1}, int64_t{12345}, int64_t{-3}}) {
      const int64_t first = run * kKeylessRun;
      for (int64_t id = first; id < first + kKeylessRun; ++id) {
        EXPECT_EQ(PartForId(id, parts), PartForId(first, parts))
            << "parts " << parts << " id " << id;
      }
    }
  }
  int moved = 0;
  for (int64_t run = 0; run < 1000; ++run) {
    moved += PartForId(run * kKeylessRun, 16) != PartForId((run + 1) * kKeylessRun, 16);
  }
  EXPECT_GT(moved, 900);  // about 15/16 of neighbouring runs land on another part
}

// Sequential runs of ids, and ids with a stride of P * kKeylessRun (which a
// bare `run % P` would put all on one part), fill every part within a few
// percent of the mean.
TEST(PartForId, SpreadsSequentialAndStridedRunsEvenly) {
  constexpr int kPerPart = 1000;
  for (int parts : {7, 64, 1024, 4096}) {
    for (int64_t stride : {int64_t{1}, static_cast<int64_t>(parts)}) {
      std::vector<int> counts(parts, 0);
      for (int64_t i = 0; i < int64_t{kPerPart} * parts; ++i) {
        ++counts[PartForId((-5000 + i * stride) * kKeylessRun, parts)];
      }
      for (int p = 0; p < parts; ++p) {
        // ~6 standard deviations of a binomial with mean 1000.
        EXPECT_NEAR(counts[p], kPerPart, 200) << "parts " << parts << " stride " << stride;
      }
    }
  }
}

}  // namespace
}  // namespace partq
