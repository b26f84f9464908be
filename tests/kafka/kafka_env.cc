#include "tests/kafka/kafka_env.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <librdkafka/rdkafkacpp.h>

#include <algorithm>
#include <map>
#include <memory>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"

namespace partq::testing {

MockCluster::MockCluster(int brokers) {
  char err[256];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
  EXPECT_NE(rk_, nullptr) << err;
  mc_ = rd_kafka_mock_cluster_new(rk_, brokers);
  EXPECT_NE(mc_, nullptr);
}

MockCluster::~MockCluster() {
  rd_kafka_mock_cluster_destroy(mc_);
  rd_kafka_destroy(rk_);
}

std::string MockCluster::bootstraps() const { return rd_kafka_mock_cluster_bootstraps(mc_); }

void MockCluster::CreateTopic(const std::string& topic, int partitions) {
  ASSERT_EQ(rd_kafka_mock_topic_create(mc_, topic.c_str(), partitions, 3),
            RD_KAFKA_RESP_ERR_NO_ERROR);
}

std::vector<KafkaRecord> Produce(const std::string& brokers, const std::string& topic,
                                 const std::vector<KafkaRecord>& records) {
  std::string err;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  conf->set("bootstrap.servers", brokers, err);
  conf->set("partitioner", "murmur2_random", err);
  conf->set("enable.idempotence", "true", err);
  struct Dr : RdKafka::DeliveryReportCb {
    std::vector<KafkaRecord> out;
    void dr_cb(RdKafka::Message& m) override {
      EXPECT_EQ(m.err(), RdKafka::ERR_NO_ERROR) << m.errstr();
      KafkaRecord& r = out[reinterpret_cast<size_t>(m.msg_opaque())];
      r.partition = m.partition();
      r.offset = m.offset();
    }
  } dr;
  dr.out = records;
  conf->set("dr_cb", &dr, err);
  std::unique_ptr<RdKafka::Producer> p(RdKafka::Producer::create(conf.get(), err));
  EXPECT_NE(p, nullptr) << err;
  if (p == nullptr) return {};
  for (size_t i = 0; i < records.size(); ++i) {
    const KafkaRecord& r = records[i];
    RdKafka::Headers* h = RdKafka::Headers::create();
    for (const auto& [k, v] : r.headers) {
      h->add(k, v ? v->data() : nullptr, v ? v->size() : 0);
    }
    EXPECT_EQ(p->produce(topic, RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY,
                         const_cast<char*>(r.payload.data()), r.payload.size(),
                         r.key ? r.key->data() : nullptr, r.key ? r.key->size() : 0, 0, h,
                         reinterpret_cast<void*>(i)),
              RdKafka::ERR_NO_ERROR);
  }
  EXPECT_EQ(p->flush(60000), RdKafka::ERR_NO_ERROR);
  return dr.out;
}

std::vector<KafkaRecord> ProduceKeyed(const std::string& brokers, const std::string& topic, int n,
                                      int keys, int start) {
  std::vector<KafkaRecord> records;
  for (int i = start; i < start + n; ++i) {
    KafkaRecord r;
    r.key = absl::StrCat("k", i % keys);
    r.payload = absl::StrCat("m", i);
    r.headers = {{"seq", absl::StrCat(i)}};
    records.push_back(std::move(r));
  }
  return Produce(brokers, topic, records);
}

std::vector<KafkaRecord> ConsumeAll(const std::string& brokers, const std::string& topic) {
  std::string err;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  conf->set("bootstrap.servers", brokers, err);
  conf->set("group.id", absl::StrCat("reader-", absl::Uniform<uint32_t>(absl::BitGen())), err);
  conf->set("enable.auto.commit", "false", err);
  std::unique_ptr<RdKafka::KafkaConsumer> c(RdKafka::KafkaConsumer::create(conf.get(), err));
  EXPECT_NE(c, nullptr) << err;
  if (c == nullptr) return {};
  // Partitions and where each ends now.
  std::unique_ptr<RdKafka::Topic> t(RdKafka::Topic::create(c.get(), topic, nullptr, err));
  RdKafka::Metadata* raw = nullptr;
  EXPECT_EQ(c->metadata(false, t.get(), &raw, 10000), RdKafka::ERR_NO_ERROR);
  std::unique_ptr<RdKafka::Metadata> md(raw);
  std::map<int32_t, int64_t> next, high;
  std::vector<RdKafka::TopicPartition*> assign;
  for (const RdKafka::TopicMetadata* tm : *md->topics()) {
    for (const RdKafka::PartitionMetadata* pm : *tm->partitions()) {
      int64_t lo = 0, hi = 0;
      EXPECT_EQ(c->query_watermark_offsets(topic, pm->id(), &lo, &hi, 10000),
                RdKafka::ERR_NO_ERROR);
      next[pm->id()] = lo;
      high[pm->id()] = hi;
      assign.push_back(
          RdKafka::TopicPartition::create(topic, pm->id(), RdKafka::Topic::OFFSET_BEGINNING));
    }
  }
  EXPECT_FALSE(assign.empty()) << "no partitions in " << topic;
  c->assign(assign);
  RdKafka::TopicPartition::destroy(assign);
  auto done = [&] {
    for (const auto& [p, n] : next) {
      if (n < high[p]) return false;
    }
    return true;
  };
  std::vector<KafkaRecord> out;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!done() && absl::Now() < deadline) {
    std::unique_ptr<RdKafka::Message> m(c->consume(200));
    if (m->err() != RdKafka::ERR_NO_ERROR) continue;
    KafkaRecord r;
    if (m->key_pointer() != nullptr) {
      r.key = std::string(static_cast<const char*>(m->key_pointer()), m->key_len());
    }
    if (m->payload() != nullptr) r.payload.assign(static_cast<const char*>(m->payload()), m->len());
    if (RdKafka::Headers* h = m->headers(); h != nullptr) {
      for (const RdKafka::Headers::Header& one : h->get_all()) {
        std::optional<std::string> v;
        if (one.value() != nullptr) {
          v = std::string(static_cast<const char*>(one.value()), one.value_size());
        }
        r.headers.emplace_back(one.key(), std::move(v));
      }
    }
    r.partition = m->partition();
    r.offset = m->offset();
    next[r.partition] = r.offset + 1;
    out.push_back(std::move(r));
  }
  EXPECT_TRUE(done()) << "did not reach the end of " << topic;
  c->close();
  std::sort(out.begin(), out.end(), [](const KafkaRecord& a, const KafkaRecord& b) {
    return std::make_pair(a.partition, a.offset) < std::make_pair(b.partition, b.offset);
  });
  return out;
}

std::vector<std::pair<std::string, std::string>> KcatConsume(const std::string& brokers,
                                                             const std::string& topic) {
  std::string out;
  EXPECT_EQ(RunCommand({"/usr/bin/kcat", "-C", "-b", brokers, "-t", topic, "-o", "beginning", "-e",
                        "-q", "-f", "%k %s\\n"},
                       &out),
            0);
  std::vector<std::pair<std::string, std::string>> msgs;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits(' ', 1));
    msgs.push_back(kv);
  }
  return msgs;
}

}  // namespace partq::testing
