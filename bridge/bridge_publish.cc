#include "bridge/bridge_publish.h"

#include <librdkafka/rdkafkacpp.h>

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "base/utf8.h"
#include "bridge/broker_health.h"
#include "bridge/kafka_config.h"
#include "nlohmann/json.hpp"

namespace partq {
namespace {

// Outbox headers ([{"key": K, "value": V}] or "value_hex") as Kafka headers.
RdKafka::Headers* ToHeaders(const std::optional<std::string>& json) {
  if (!json) return nullptr;
  nlohmann::json j = nlohmann::json::parse(*json, nullptr, false);
  if (!j.is_array()) return nullptr;
  RdKafka::Headers* h = RdKafka::Headers::create();
  for (const auto& one : j) {
    if (!one.is_object() || !one.contains("key") || !one["key"].is_string()) continue;
    const std::string key = one["key"].get<std::string>();
    if (one.contains("value") && one["value"].is_string()) {
      const std::string v = one["value"].get<std::string>();
      h->add(key, v.data(), v.size());
    } else if (one.contains("value_hex") && one["value_hex"].is_string()) {
      // Any role that may write outbox rows writes this text: a value that
      // is not hex is left out, with a warning, rather than stop the bridge
      // for every queue (std::stoi threw, and the bridge aborted on every
      // restart: issue 48's second review).
      const std::string hex = one["value_hex"].get<std::string>();
      if (hex.size() % 2 != 0 || !std::all_of(hex.begin(), hex.end(), absl::ascii_isxdigit)) {
        PARTQ_LOG(Warning) << "bridge publish: header " << Quoted(key, 64)
                           << " has a value_hex that is not hex: sent without it";
        continue;
      }
      const std::string v = absl::HexStringToBytes(hex);
      h->add(key, v.data(), v.size());
    } else {
      h->add(key, nullptr, 0);
    }
  }
  return h;
}

}  // namespace

class BridgePublish::Impl : public RdKafka::DeliveryReportCb, public RdKafka::EventCb {
 public:
  Impl(BridgeStoreFactory stores, BridgePublishOptions options, BridgeMetrics* metrics)
      : stores_(std::move(stores)),
        o_(std::move(options)),
        metrics_(metrics),
        health_("bridge publish", o_.brokers) {}

  absl::Status Init() {
    if (o_.brokers.empty()) return absl::InvalidArgumentError("bridge publish needs brokers");
    if (o_.batch < 1) return absl::InvalidArgumentError("bridge publish: batch >= 1");
    static constexpr GuardedProperty kGuarded[] = {
        {"bootstrap.servers", "give the brokers with --brokers"},
        {"enable.idempotence", "it keeps retries from writing a row twice"},
        {"acks", "the idempotent producer needs acks=all"},
        {"statistics.interval.ms", "the bridge's readiness reads the statistics"},
    };
    if (absl::Status st = CheckExtraKafkaConfig(o_.kafka_config, kGuarded); !st.ok()) return st;
    auto store = stores_();
    if (!store.ok()) return store.status();
    store_ = std::move(*store);
    if (absl::Status st = store_->CheckSchema(); !st.ok()) return st;
    return MakeProducer();
  }

  absl::Status MakeProducer() {
    std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
    std::string err;
    std::map<std::string, std::string> props = {
        {"bootstrap.servers", o_.brokers},
        {"client.id", "partq-bridge-publish"},
        {"enable.idempotence", "true"},
        {"acks", "all"},
        {"max.in.flight.requests.per.connection", "5"},
        // Retry until delivered: an outage delays rows, never drops them.
        {"message.timeout.ms", "0"},
        {"linger.ms", "5"},
        // Broker connection states for /readyz (BrokerHealth).
        {"statistics.interval.ms", "1000"},
    };
    for (const auto& [k, v] : o_.kafka_config) props[k] = v;
    for (const auto& [k, v] : props) {
      if (conf->set(k, v, err) != RdKafka::Conf::CONF_OK) {
        return absl::InvalidArgumentError(KafkaPropertyError(k, v, err));
      }
    }
    if (conf->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(this), err) !=
        RdKafka::Conf::CONF_OK) {
      return absl::InternalError(err);
    }
    if (conf->set("event_cb", static_cast<RdKafka::EventCb*>(this), err) !=
        RdKafka::Conf::CONF_OK) {
      return absl::InternalError(err);
    }
    producer_.reset(RdKafka::Producer::create(conf.get(), err));
    if (!producer_) return absl::InvalidArgumentError(absl::StrCat("kafka producer: ", err));
    return absl::OkStatus();
  }

  void event_cb(RdKafka::Event& e) override { health_.OnEvent(e); }

  void dr_cb(RdKafka::Message& m) override {
    const size_t i = reinterpret_cast<size_t>(m.msg_opaque());
    if (i >= pending_.size()) return;
    --outstanding_;
    if (m.err() == RdKafka::ERR__PURGE_QUEUE || m.err() == RdKafka::ERR__PURGE_INFLIGHT) {
      return;  // purged by a stop past the drain timeout: the row stays, not a failure
    }
    pending_[i].done = true;
    pending_[i].ok = m.err() == RdKafka::ERR_NO_ERROR;
    if (!pending_[i].ok) {
      PARTQ_LOG(Warning) << "bridge publish: outbox row " << pending_[i].id << " to "
                         << m.topic_name() << ": " << m.errstr();
    }
  }

  void Run() {
    while (!stop_.load()) {
      auto rows = store_->ReadOutbox(o_.batch);
      if (!rows.ok()) {
        PARTQ_LOG(Warning) << "bridge publish: reading the outbox: " << rows.status();
        absl::SleepFor(o_.retry_pause);
        continue;
      }
      if (rows->empty()) {
        producer_->poll(0);
        absl::SleepFor(o_.poll_interval);
        continue;
      }
      if (!Round(*rows)) absl::SleepFor(o_.retry_pause);
    }
  }

  void RequestStop() { stop_.store(true); }
  bool Ready(std::string* reason) const { return health_.Ready(reason); }
  BridgePublishStats stats() const {
    absl::MutexLock l(&mu_);
    return stats_;
  }

 private:
  struct Pending {
    int64_t id = 0;
    std::string topic;
    bool done = false;
    bool ok = false;
  };

  // Sends `rows`, waits for every report, deletes the delivered ones. A row
  // whose report failed stays, and so do the rows after it in the batch,
  // unless they were delivered anyway (then they go, and the failed one is
  // re-sent: a key's order holds unless delivery failed for good, which the
  // retry-forever default rules out). A row the producer refuses to queue
  // (a message over its size limit) stays with every later row of its
  // topic, so that topic's order holds; other topics' rows go on (before,
  // one such row, which any role that may publish to its topic can write,
  // stopped every queue's publishing: issue 48's second review). Returns
  // false if anything failed and nothing was delivered. Once stopping,
  // waits at most the drain timeout (PastDrain).
  bool Round(const std::vector<OutboxRow>& rows) {
    pending_.assign(rows.size(), Pending{});
    outstanding_ = 0;
    bool all_queued = true;
    std::set<std::string> held_topics;  // a row of theirs was refused
    for (size_t i = 0; i < rows.size(); ++i) {
      const OutboxRow& r = rows[i];
      pending_[i].id = r.id;
      pending_[i].topic = r.topic;
      if (held_topics.count(r.topic) > 0) continue;
      RdKafka::Headers* headers = ToHeaders(r.headers_json);
      RdKafka::ErrorCode e;
      for (;;) {
        e = producer_->produce(r.topic, RdKafka::Topic::PARTITION_UA,
                               RdKafka::Producer::RK_MSG_COPY, const_cast<char*>(r.payload.data()),
                               r.payload.size(), r.key ? r.key->data() : nullptr,
                               r.key ? r.key->size() : 0, 0, headers, reinterpret_cast<void*>(i));
        if (e != RdKafka::ERR__QUEUE_FULL || PastDrain()) break;
        producer_->poll(50);
      }
      if (e != RdKafka::ERR_NO_ERROR) {
        delete headers;  // produce() owns them only on success
        PARTQ_LOG(Warning) << "bridge publish: produce row " << r.id << ": " << RdKafka::err2str(e);
        all_queued = false;
        held_topics.insert(r.topic);               // its later rows wait: a key's order must hold
        if (e == RdKafka::ERR__QUEUE_FULL) break;  // stopping: nothing more goes
        continue;
      }
      ++outstanding_;
    }
    while (outstanding_ > 0 && !PastDrain()) producer_->poll(100);
    if (outstanding_ > 0) {
      // Stopping, and the brokers did not answer in time: drop what the
      // producer holds (its reports come back as purged, the rows stay).
      producer_->purge(RdKafka::Producer::PURGE_QUEUE | RdKafka::Producer::PURGE_INFLIGHT |
                       RdKafka::Producer::PURGE_NON_BLOCKING);
      producer_->poll(0);
      outstanding_ = 0;
    }
    std::vector<int64_t> delivered;
    int64_t failed = 0;
    std::map<std::string, int64_t> per_topic_ok, per_topic_failed;
    for (const Pending& p : pending_) {
      if (p.done && p.ok) {
        delivered.push_back(p.id);
        ++per_topic_ok[p.topic];
      } else if (p.done) {
        ++failed;
        ++per_topic_failed[p.topic];
      }
    }
    if (!delivered.empty()) health_.OnBrokerAnswered();  // once a round, not per report
    // Until deleted, a delivered row would be sent again: retry the delete.
    // Stopping past the drain timeout, they stay and go again next time.
    // The first delete is tried even past the deadline: rows the brokers
    // confirmed must not go again.
    bool deleted = delivered.empty();
    for (bool first = true; !deleted && (first || !PastDrain()); first = false) {
      absl::Status st = store_->DeleteOutbox(delivered);
      deleted = st.ok();
      if (deleted) break;
      PARTQ_LOG(Warning) << "bridge publish: deleting delivered rows: " << st;
      absl::SleepFor(o_.retry_pause);
    }
    const int64_t deleted_rows = deleted ? static_cast<int64_t>(delivered.size()) : 0;
    if (metrics_) {
      for (const auto& [t, n] : per_topic_ok) metrics_->Delivered(t, n);
      for (const auto& [t, n] : per_topic_failed) metrics_->DeliveryFailed(t, n);
    }
    if (producer_->fatal_error(errstr_) != RdKafka::ERR_NO_ERROR) {
      // The idempotent producer cannot go on (e.g. sequence gap): a new one.
      PARTQ_LOG(Warning) << "bridge publish: fatal producer error: " << errstr_
                         << "; starting a new producer";
      producer_.reset();
      if (absl::Status st = MakeProducer(); !st.ok()) {
        PARTQ_LOG(Error) << "bridge publish: " << st;
      }
    }
    absl::MutexLock l(&mu_);
    stats_.delivered += deleted_rows;
    stats_.failures += failed;
    stats_.rounds += 1;
    // What the drain timeout cut short (a failed delivery is logged above).
    if (PastDrain()) stats_.left_in_outbox = static_cast<int64_t>(rows.size()) - deleted_rows;
    return deleted && ((all_queued && failed == 0) || !delivered.empty());
  }

  // Stopping, and the drain timeout (from the first call that saw the stop)
  // has run out. Bridge thread only.
  bool PastDrain() {
    if (!stop_.load()) return false;
    const absl::Time now = absl::Now();
    if (drain_deadline_ == absl::InfiniteFuture()) drain_deadline_ = now + o_.drain_timeout;
    return now >= drain_deadline_;
  }

  BridgeStoreFactory stores_;
  BridgePublishOptions o_;
  BridgeMetrics* metrics_;
  std::unique_ptr<BridgeStore> store_;
  std::atomic<bool> stop_{false};
  absl::Time drain_deadline_ = absl::InfiniteFuture();
  BrokerHealth health_;
  std::vector<Pending> pending_;
  int64_t outstanding_ = 0;
  std::string errstr_;

  mutable absl::Mutex mu_;
  BridgePublishStats stats_ ABSL_GUARDED_BY(mu_);
  // Last, so it goes first: reports purged at a stop may still come while it
  // is destroyed, and its callbacks use pending_ and health_.
  std::unique_ptr<RdKafka::Producer> producer_;
};

BridgePublish::BridgePublish(BridgeStoreFactory stores, BridgePublishOptions options,
                             BridgeMetrics* metrics)
    : impl_(std::make_unique<Impl>(std::move(stores), std::move(options), metrics)) {}

BridgePublish::~BridgePublish() { Stop(); }

absl::Status BridgePublish::Start() {
  if (absl::Status st = lifecycle_.BeginStart("bridge publish"); !st.ok()) return st;
  absl::Status st = impl_->Init();
  if (st.ok()) thread_ = std::thread([this] { impl_->Run(); });
  lifecycle_.EndStart(st.ok());
  return st;
}

void BridgePublish::Stop() {
  if (!lifecycle_.BeginStop()) return;
  impl_->RequestStop();
  thread_.join();
  lifecycle_.EndStop();
}

BridgePublishStats BridgePublish::stats() const { return impl_->stats(); }
bool BridgePublish::Ready(std::string* reason) const { return impl_->Ready(reason); }

}  // namespace partq
