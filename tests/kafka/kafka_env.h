// Kafka for the bridge tests: librdkafka's mock cluster (the real protocol on
// loopback, living in the test process, usable by `partq bridge` processes
// and kcat too), and plain rdkafka++ clients that produce into it and read
// everything back, headers included.
#ifndef PARTQ_TESTS_KAFKA_KAFKA_ENV_H_
#define PARTQ_TESTS_KAFKA_KAFKA_ENV_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

struct rd_kafka_s;
struct rd_kafka_mock_cluster_s;

namespace partq::testing {

// A mock cluster of `brokers` brokers; destroyed with this object.
class MockCluster {
 public:
  explicit MockCluster(int brokers);
  ~MockCluster();
  MockCluster(const MockCluster&) = delete;
  MockCluster& operator=(const MockCluster&) = delete;

  std::string bootstraps() const;
  rd_kafka_mock_cluster_s* get() { return mc_; }
  // Creates `topic` with `partitions` partitions (replication 3); fails the
  // test if it cannot.
  void CreateTopic(const std::string& topic, int partitions);

 private:
  rd_kafka_s* rk_ = nullptr;
  rd_kafka_mock_cluster_s* mc_ = nullptr;
};

// A Kafka header; a nullopt value is a null value (not an empty one).
using Header = std::pair<std::string, std::optional<std::string>>;

// A message as produced or consumed.
struct KafkaRecord {
  std::optional<std::string> key;  // raw bytes; nullopt: no key
  std::string payload;
  std::vector<Header> headers;
  int32_t partition = -1;  // where it landed / was read
  int64_t offset = -1;
};

// Produces `records` in order with an idempotent producer and Kafka's murmur2
// partitioner (the Java client's default, partq's PartForKey); returns them
// with the partition and offset of each delivery report. Fails the test on any
// delivery error.
std::vector<KafkaRecord> Produce(const std::string& brokers, const std::string& topic,
                                 const std::vector<KafkaRecord>& records);

// Produces `n` messages with keys k0..k{keys-1}, payloads "m<i>" and a header
// seq=<i>, for i = start..start+n-1.
std::vector<KafkaRecord> ProduceKeyed(const std::string& brokers, const std::string& topic, int n,
                                      int keys, int start = 0);

// Every message of `topic`, read by an rdkafka++ consumer from the beginning
// to the high watermark of each partition (as it was when called), in
// (partition, offset) order.
std::vector<KafkaRecord> ConsumeAll(const std::string& brokers, const std::string& topic);

// Every message of `topic` as (key, payload) from "%k %s" lines of kcat (a
// real client on the wire), from the beginning to the end of each partition.
std::vector<std::pair<std::string, std::string>> KcatConsume(const std::string& brokers,
                                                             const std::string& topic);

}  // namespace partq::testing

#endif  // PARTQ_TESTS_KAFKA_KAFKA_ENV_H_
