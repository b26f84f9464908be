#include "bridge/bridge_ingest.h"

#include <librdkafka/rdkafkacpp.h>

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "bridge/broker_health.h"
#include "bridge/kafka_config.h"
#include "nlohmann/json.hpp"
#include "store/headers_json.h"

namespace partq {
namespace {

// The longest one consume() call waits: how late a stop can be seen.
constexpr int64_t kConsumeSliceMs = 100;

// The message's headers as items.headers stores them (store/headers_json.h).
std::optional<std::string> HeadersJson(RdKafka::Message& m) {
  RdKafka::Headers* headers = m.headers();
  if (headers == nullptr || headers->size() == 0) return std::nullopt;
  std::vector<Header> out;
  for (const RdKafka::Headers::Header& h : headers->get_all()) {
    std::optional<std::string> value;
    if (h.value() != nullptr) value.emplace(static_cast<const char*>(h.value()), h.value_size());
    out.emplace_back(h.key(), std::move(value));
  }
  return partq::HeadersJson(out);
}

// Owns a vector of TopicPartition* for the C++ API's calls.
struct Tps {
  std::vector<RdKafka::TopicPartition*> v;
  ~Tps() { RdKafka::TopicPartition::destroy(v); }
  void Add(const std::string& topic, int32_t p, int64_t offset = RdKafka::Topic::OFFSET_INVALID) {
    v.push_back(RdKafka::TopicPartition::create(topic, p, offset));
  }
};

}  // namespace

class BridgeIngest::Impl : public RdKafka::RebalanceCb, public RdKafka::EventCb {
 public:
  Impl(BridgeStoreFactory stores, BridgeIngestOptions options, BridgeMetrics* metrics)
      : stores_(std::move(stores)),
        o_(std::move(options)),
        metrics_(metrics),
        health_("bridge ingest", o_.brokers) {}

  absl::Status Init() {
    if (o_.brokers.empty() || o_.topic.empty() || o_.queue.empty()) {
      return absl::InvalidArgumentError("bridge ingest needs brokers, a topic and a queue");
    }
    if (o_.batch_max < 1 || o_.low_water < 0 || o_.high_water < 1 || o_.low_water > o_.high_water) {
      return absl::InvalidArgumentError(
          "bridge ingest: batch >= 1 and 0 <= low water <= high water >= 1");
    }
    static constexpr GuardedProperty kGuarded[] = {
        {"bootstrap.servers", "give the brokers with --brokers"},
        {"group.id", "give the consumer group with --group"},
        {"group.instance.id", "give a static member id with --instance-id"},
        {"enable.auto.commit", "offsets commit with the items, in PostgreSQL (exactly once)"},
        {"enable.auto.offset.store", "offsets commit with the items, in PostgreSQL (exactly once)"},
        {"isolation.level", "read_committed keeps aborted transactional messages out"},
        {"statistics.interval.ms", "the bridge's readiness reads the statistics"},
    };
    // Before any connection: a refused property costs no round trip.
    if (absl::Status st = CheckExtraKafkaConfig(o_.kafka_config, kGuarded); !st.ok()) return st;
    if (o_.group.empty()) o_.group = "partq-bridge." + o_.queue;
    if (metrics_) metrics_->IngestStarted(o_.topic, o_.queue);
    auto store = stores_();
    if (!store.ok()) return store.status();
    store_ = std::move(*store);
    if (absl::Status st = store_->GetQueue(o_.queue).status(); !st.ok()) return st;

    std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
    std::string err;
    std::map<std::string, std::string> props = {
        {"bootstrap.servers", o_.brokers},
        {"group.id", o_.group},
        {"client.id", "partq-bridge-ingest"},
        // PostgreSQL holds the offsets; Kafka gets a copy after each commit.
        {"enable.auto.commit", "false"},
        {"enable.auto.offset.store", "false"},
        {"auto.offset.reset", "earliest"},
        {"partition.assignment.strategy", "cooperative-sticky"},
        // Skip aborted transactions of transactional producers.
        {"isolation.level", "read_committed"},
        // Broker connection states for /readyz (BrokerHealth).
        {"statistics.interval.ms", "1000"},
    };
    if (!o_.instance_id.empty()) props["group.instance.id"] = o_.instance_id;
    for (const auto& [k, v] : o_.kafka_config) props[k] = v;
    for (const auto& [k, v] : props) {
      if (conf->set(k, v, err) != RdKafka::Conf::CONF_OK) {
        return absl::InvalidArgumentError(KafkaPropertyError(k, v, err));
      }
    }
    if (conf->set("rebalance_cb", static_cast<RdKafka::RebalanceCb*>(this), err) !=
        RdKafka::Conf::CONF_OK) {
      return absl::InternalError(err);
    }
    if (conf->set("event_cb", static_cast<RdKafka::EventCb*>(this), err) !=
        RdKafka::Conf::CONF_OK) {
      return absl::InternalError(err);
    }
    consumer_.reset(RdKafka::KafkaConsumer::create(conf.get(), err));
    if (!consumer_) return absl::InvalidArgumentError(absl::StrCat("kafka consumer: ", err));
    if (RdKafka::ErrorCode e = consumer_->subscribe({o_.topic}); e != RdKafka::ERR_NO_ERROR) {
      return absl::InvalidArgumentError(
          absl::StrCat("subscribe to ", o_.topic, ": ", RdKafka::err2str(e)));
    }
    return absl::OkStatus();
  }

  void Run() {
    absl::Time next_check = absl::InfinitePast();
    while (!stop_.load()) {
      const absl::Time deadline = absl::Now() + o_.batch_wait;
      while (static_cast<int>(batch_.size()) < o_.batch_max && !stop_.load()) {
        const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
        if (left <= 0) break;
        // In slices, so a stop is seen within one whatever --batch-wait is
        // (up to a minute; `partq bridge ingest` gives a stop 10 s in all).
        std::unique_ptr<RdKafka::Message> m(
            consumer_->consume(static_cast<int>(std::min<int64_t>(left, kConsumeSliceMs))));
        if (m->err() == RdKafka::ERR__TIMED_OUT) continue;
        if (m->err() == RdKafka::ERR__PARTITION_EOF) continue;
        if (m->err() != RdKafka::ERR_NO_ERROR) {
          PARTQ_LOG(Warning) << "bridge ingest: kafka: " << m->errstr();
          continue;
        }
        Take(*m);
      }
      if (!batch_.empty()) {
        health_.OnBrokerAnswered();  // once a round, not per message
        Write();
      }
      if (fatal_) break;
      // Check on time, and at once when what we wrote since the last count
      // may have pushed the backlog past the high-water mark (a fast topic
      // could otherwise overshoot it by many batches between checks).
      if (absl::Now() >= next_check ||
          (!paused_ && last_backlog_ + written_since_check_ >= o_.high_water)) {
        Check();
        next_check = absl::Now() + o_.check_interval;
      }
    }
    if (!batch_.empty() && !fatal_) Write();
    consumer_->close();  // leaves the group (revokes)
    consumer_.reset();
  }

  void RequestStop() { stop_.store(true); }
  bool Ready(std::string* reason) const { return health_.Ready(reason); }
  // Errors and statistics come from consume() on the bridge thread, log
  // lines from librdkafka's threads (BrokerHealth is thread-safe).
  void event_cb(RdKafka::Event& e) override { health_.OnEvent(e); }

  absl::Status status() const {
    absl::MutexLock l(&mu_);
    return fatal_status_;
  }
  BridgeIngestStats stats() const {
    absl::MutexLock l(&mu_);
    return stats_;
  }

  // Runs inside consume() on the bridge thread.
  void rebalance_cb(RdKafka::KafkaConsumer* consumer, RdKafka::ErrorCode err,
                    std::vector<RdKafka::TopicPartition*>& partitions) override {
    const bool cooperative = consumer->rebalance_protocol() == "COOPERATIVE";
    if (err == RdKafka::ERR__ASSIGN_PARTITIONS) {
      // Seek to the offsets PostgreSQL holds; without a row (never ingested
      // into this queue), from Kafka's committed offset or the beginning.
      auto stored = store_->ReadKafkaOffsets(o_.queue, o_.topic);
      std::map<int32_t, int64_t> offsets;
      if (stored.ok()) {
        for (const KafkaOffset& k : *stored) offsets[k.partition] = k.next_offset;
      } else {
        PARTQ_LOG(Warning) << "bridge ingest: reading offsets: " << stored.status()
                           << "; partitions stay paused until they can be read";
      }
      for (RdKafka::TopicPartition* tp : partitions) {
        Part& part = parts_[tp->partition()];
        part = Part{};
        if (!stored.ok()) {
          part.synced = false;
          continue;
        }
        auto it = offsets.find(tp->partition());
        if (it != offsets.end()) {
          part.expected = it->second;
          tp->set_offset(it->second);
        } else {
          tp->set_offset(RdKafka::Topic::OFFSET_INVALID);  // committed, else reset
        }
      }
      if (cooperative) {
        std::unique_ptr<RdKafka::Error> e(consumer->incremental_assign(partitions));
        if (e) PARTQ_LOG(Warning) << "bridge ingest: incremental_assign: " << e->str();
      } else {
        consumer->assign(partitions);
      }
      std::vector<RdKafka::TopicPartition*> hold;
      for (RdKafka::TopicPartition* tp : partitions) {
        if (!parts_[tp->partition()].synced || paused_) hold.push_back(tp);
      }
      if (!hold.empty()) consumer->pause(hold);
      for (RdKafka::TopicPartition* tp : hold) {
        Part& part = parts_[tp->partition()];
        part.paused = true;
      }
      PARTQ_LOG(Info) << "bridge ingest: assigned " << partitions.size() << " partition(s) of "
                      << o_.topic;
    } else {
      // Revoked or lost: messages in hand for those partitions are dropped
      // (whoever owns them next re-reads from the stored offset).
      std::set<int32_t> gone;
      for (RdKafka::TopicPartition* tp : partitions) {
        gone.insert(tp->partition());
        parts_.erase(tp->partition());
      }
      batch_.erase(std::remove_if(batch_.begin(), batch_.end(),
                                  [&](const KafkaMessage& m) { return gone.count(m.partition); }),
                   batch_.end());
      if (cooperative) {
        std::unique_ptr<RdKafka::Error> e(consumer->incremental_unassign(partitions));
        if (e) PARTQ_LOG(Warning) << "bridge ingest: incremental_unassign: " << e->str();
      } else {
        consumer->unassign();
      }
      PARTQ_LOG(Info) << "bridge ingest: revoked " << partitions.size() << " partition(s)";
    }
    absl::MutexLock l(&mu_);
    stats_.assigned = static_cast<int>(parts_.size());
  }

 private:
  struct Part {
    bool synced = true;               // expected is what PostgreSQL holds
    std::optional<int64_t> expected;  // stored next offset; nullopt: no row
    bool paused = false;
  };

  void Take(RdKafka::Message& m) {
    auto it = parts_.find(m.partition());
    if (it == parts_.end() || !it->second.synced) return;  // not ours / resyncing
    // Before the stored offset: fetched before a seek; already an item.
    if (it->second.expected && m.offset() < *it->second.expected) return;
    KafkaMessage k;
    k.topic = m.topic_name();
    k.partition = m.partition();
    k.offset = m.offset();
    if (m.key_pointer() != nullptr) {
      k.key = std::string(static_cast<const char*>(m.key_pointer()), m.key_len());
    }
    if (m.payload() != nullptr) k.payload.assign(static_cast<const char*>(m.payload()), m.len());
    k.headers_json = HeadersJson(m);
    batch_.push_back(std::move(k));
  }

  void Write() {
    KafkaIngestRequest req;
    req.queue = o_.queue;
    std::map<int32_t, int64_t> next;
    for (const KafkaMessage& m : batch_)
      next[m.partition] = std::max(next[m.partition], m.offset + 1);
    for (const auto& [p, n] : next) req.offsets.push_back({o_.topic, p, parts_[p].expected, n});
    const int64_t n = static_cast<int64_t>(batch_.size());
    req.messages = std::move(batch_);
    batch_.clear();
    absl::StatusOr<int64_t> r = store_->IngestKafka(req);
    if (r.ok()) {
      Tps commit;
      for (const auto& [p, off] : next) {
        parts_[p].expected = off;
        commit.Add(o_.topic, p, off);
      }
      // A copy for lag tools; PostgreSQL stays the truth, so a lost commit
      // costs nothing but a stale number.
      consumer_->commitAsync(commit.v);
      if (metrics_) {
        metrics_->Ingested(o_.topic, o_.queue, n);
        metrics_->IngestBatch(o_.queue, n);
      }
      written_since_check_ += n;
      absl::MutexLock l(&mu_);
      stats_.messages += n;
      stats_.batches += 1;
      return;
    }
    PARTQ_LOG(Warning) << "bridge ingest: batch of " << n << " not written: " << r.status();
    if (absl::IsInvalidArgument(r.status()) || absl::IsNotFound(r.status()) ||
        absl::IsFailedPrecondition(r.status())) {
      // A message we can never write (too large) or no queue/schema: stop
      // rather than skip it; nothing was written, so a restart resumes here.
      fatal_ = true;
      absl::MutexLock l(&mu_);
      fatal_status_ = r.status();
      return;
    }
    // Nothing was written. Those partitions re-read their offsets and seek.
    Tps hold;
    for (const auto& [p, unused] : next) {
      Part& part = parts_[p];
      part.synced = false;
      if (!part.paused) {
        hold.Add(o_.topic, p);
        part.paused = true;
      }
    }
    if (!hold.v.empty()) consumer_->pause(hold.v);
    if (metrics_) {
      absl::IsAborted(r.status()) ? metrics_->IngestConflict(o_.queue)
                                  : metrics_->IngestError(o_.queue);
    }
    absl::MutexLock l(&mu_);
    (absl::IsAborted(r.status()) ? stats_.conflicts : stats_.errors) += 1;
  }

  // Backpressure, resync of partitions whose batch failed, lag.
  void Check() {
    bool want_pause = paused_;
    absl::StatusOr<int64_t> backlog = store_->CountItems(o_.queue, o_.high_water);
    if (backlog.ok()) {
      last_backlog_ = *backlog;
      written_since_check_ = 0;
      if (!paused_ && *backlog >= o_.high_water) want_pause = true;
      if (paused_ && *backlog < o_.low_water) want_pause = false;
    }
    if (want_pause != paused_) {
      paused_ = want_pause;
      PARTQ_LOG(Info) << "bridge ingest: " << (paused_ ? "pausing" : "resuming") << " " << o_.topic
                      << " (queue backlog " << *backlog << ")";
      absl::MutexLock l(&mu_);
      (paused_ ? stats_.pauses : stats_.resumes) += 1;
      stats_.paused = paused_;
    }
    // Resync: read stored offsets, seek, then run again.
    bool need_resync = false;
    for (const auto& [p, part] : parts_) need_resync = need_resync || !part.synced;
    if (need_resync) {
      auto stored = store_->ReadKafkaOffsets(o_.queue, o_.topic);
      if (stored.ok()) {
        std::map<int32_t, int64_t> offsets;
        for (const KafkaOffset& k : *stored) offsets[k.partition] = k.next_offset;
        for (auto& [p, part] : parts_) {
          if (part.synced) continue;
          auto it = offsets.find(p);
          int64_t target;
          if (it != offsets.end()) {
            target = it->second;
            part.expected = it->second;
          } else {
            part.expected.reset();
            Tps c;
            c.Add(o_.topic, p);
            if (consumer_->committed(c.v, 5000) != RdKafka::ERR_NO_ERROR) continue;
            target = c.v[0]->offset() >= 0 ? c.v[0]->offset() : RdKafka::Topic::OFFSET_BEGINNING;
          }
          std::unique_ptr<RdKafka::TopicPartition> tp(
              RdKafka::TopicPartition::create(o_.topic, p, target));
          if (RdKafka::ErrorCode e = consumer_->seek(*tp, 5000); e != RdKafka::ERR_NO_ERROR) {
            PARTQ_LOG(Warning) << "bridge ingest: seek " << o_.topic << "/" << p << ": "
                               << RdKafka::err2str(e);
            continue;
          }
          part.synced = true;
        }
      }
    }
    // Pause or resume each partition to match.
    Tps pause, resume;
    for (auto& [p, part] : parts_) {
      const bool want = paused_ || !part.synced;
      if (want && !part.paused) pause.Add(o_.topic, p);
      if (!want && part.paused) resume.Add(o_.topic, p);
      part.paused = want;
    }
    if (!pause.v.empty()) consumer_->pause(pause.v);
    if (!resume.v.empty()) consumer_->resume(resume.v);
    int64_t lag = 0, npaused = 0;
    for (const auto& [p, part] : parts_) {
      int64_t low = 0, high = 0;
      npaused += part.paused ? 1 : 0;
      if (consumer_->get_watermark_offsets(o_.topic, p, &low, &high) != RdKafka::ERR_NO_ERROR ||
          high < 0) {
        continue;
      }
      lag += std::max<int64_t>(0, high - part.expected.value_or(low));
    }
    if (metrics_) {
      metrics_->SetLag(o_.topic, o_.queue, lag);
      metrics_->SetPaused(o_.topic, o_.queue, npaused);
    }
  }

  BridgeStoreFactory stores_;
  BridgeIngestOptions o_;
  BridgeMetrics* metrics_;
  std::unique_ptr<BridgeStore> store_;
  std::atomic<bool> stop_{false};
  BrokerHealth health_;
  // Bridge-thread state.
  std::map<int32_t, Part> parts_;
  std::vector<KafkaMessage> batch_;
  bool paused_ = false;              // backpressure
  int64_t last_backlog_ = 0;         // the queue's item count at the last check
  int64_t written_since_check_ = 0;  // items this bridge wrote since then
  bool fatal_ = false;

  mutable absl::Mutex mu_;
  BridgeIngestStats stats_ ABSL_GUARDED_BY(mu_);
  absl::Status fatal_status_ ABSL_GUARDED_BY(mu_);
  // Last, so it goes first: its callbacks (events, rebalances) use the
  // members above until it is destroyed.
  std::unique_ptr<RdKafka::KafkaConsumer> consumer_;
};

BridgeIngest::BridgeIngest(BridgeStoreFactory stores, BridgeIngestOptions options,
                           BridgeMetrics* metrics)
    : impl_(std::make_unique<Impl>(std::move(stores), std::move(options), metrics)) {}

BridgeIngest::~BridgeIngest() { Stop(); }

absl::Status BridgeIngest::Start() {
  if (absl::Status st = lifecycle_.BeginStart("bridge ingest"); !st.ok()) return st;
  absl::Status st = impl_->Init();
  if (st.ok()) thread_ = std::thread([this] { impl_->Run(); });
  lifecycle_.EndStart(st.ok());
  return st;
}

void BridgeIngest::Stop() {
  if (!lifecycle_.BeginStop()) return;
  impl_->RequestStop();
  thread_.join();
  lifecycle_.EndStop();
}

absl::Status BridgeIngest::status() const { return impl_->status(); }
BridgeIngestStats BridgeIngest::stats() const { return impl_->stats(); }
bool BridgeIngest::Ready(std::string* reason) const { return impl_->Ready(reason); }

}  // namespace partq
