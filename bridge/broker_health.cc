#include "bridge/broker_health.h"

#include <librdkafka/rdkafkacpp.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "nlohmann/json.hpp"

namespace partq {

BrokerHealth::BrokerHealth(std::string who, std::string brokers, Clock* clock,
                           absl::Duration warn_every)
    : who_(std::move(who)),
      brokers_(std::move(brokers)),
      clock_(clock),
      warn_every_(warn_every),
      down_since_(clock->Now()) {}

namespace {

// "12s": whole seconds (FormatDuration writes a zero as "0").
std::string Seconds(absl::Duration d) { return absl::StrCat(absl::ToInt64Seconds(d), "s"); }

}  // namespace

void BrokerHealth::OnEvent(RdKafka::Event& event) {
  switch (event.type()) {
    case RdKafka::Event::EVENT_STATS:
      OnStats(event.str());
      break;
    case RdKafka::Event::EVENT_ERROR:
      if (event.err() == RdKafka::ERR__ALL_BROKERS_DOWN) {
        OnAllBrokersDown();
      } else {
        PARTQ_LOG(Warning) << who_ << ": kafka: " << RdKafka::err2str(event.err()) << ": "
                           << event.str();
      }
      break;
    case RdKafka::Event::EVENT_LOG:
      // With an event callback set, librdkafka's own log lines come here
      // instead of stderr: keep them, at the matching level (syslog scale).
      if (event.severity() <= RdKafka::Event::EVENT_SEVERITY_WARNING) {
        PARTQ_LOG(Warning) << who_ << ": kafka: " << event.fac() << ": " << event.str();
      } else if (event.severity() <= RdKafka::Event::EVENT_SEVERITY_INFO) {
        PARTQ_LOG(Info) << who_ << ": kafka: " << event.fac() << ": " << event.str();
      } else {
        PARTQ_LOG(Debug) << who_ << ": kafka: " << event.fac() << ": " << event.str();
      }
      break;
    default:
      break;
  }
}

void BrokerHealth::OnAllBrokersDown() {
  absl::MutexLock l(&mu_);
  informed_ = true;
  down_reported_ = true;
  SetUp(false);
  MaybeWarn();
}

void BrokerHealth::OnStats(absl::string_view json) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.contains("brokers") || !j["brokers"].is_object()) return;
  bool any_up = false;
  for (const auto& [name, b] : j["brokers"].items()) {
    any_up = any_up || (b.is_object() && b.value("state", "") == "UP");
  }
  absl::MutexLock l(&mu_);
  informed_ = true;
  SetUp(any_up);
  if (!any_up) {
    // Statistics come every interval whatever happens, so they pace the
    // repeated warning. Before a first connection librdkafka may still be
    // trying its first address: warn once the all-down event said so, or
    // after one warning interval without any broker.
    if (down_reported_ || clock_->Now() - down_since_ >= warn_every_) {
      down_reported_ = true;
      MaybeWarn();
    }
  }
}

void BrokerHealth::OnBrokerAnswered() {
  absl::MutexLock l(&mu_);
  if (!informed_) SetUp(true);
}

void BrokerHealth::SetUp(bool up) {
  if (up && !up_) {
    if (last_warning_ != absl::InfinitePast()) {  // this outage was warned of
      PARTQ_LOG(Warning) << who_ << ": Kafka broker reachable again at " << brokers_ << " after "
                         << Seconds(clock_->Now() - down_since_);
    }
    seen_up_ = true;
    down_reported_ = false;
    last_warning_ = absl::InfinitePast();
  } else if (!up && up_) {
    down_since_ = clock_->Now();
  }
  up_ = up;
}

void BrokerHealth::MaybeWarn() {
  const absl::Time now = clock_->Now();
  if (now - last_warning_ < warn_every_) return;
  last_warning_ = now;
  ++warnings_;
  PARTQ_LOG(Warning) << who_ << ": no Kafka broker reachable at " << brokers_ << " ("
                     << (seen_up_ ? "all brokers down" : "none connected yet") << " for "
                     << Seconds(now - down_since_) << "); still trying";
}

bool BrokerHealth::Ready(std::string* reason) const {
  absl::MutexLock l(&mu_);
  if (up_) return true;
  if (reason != nullptr) {
    *reason = absl::StrCat(down_reported_ ? "no Kafka broker reachable at "
                                          : "not connected yet to a Kafka broker at ",
                           brokers_, " (for ", Seconds(clock_->Now() - down_since_), ")");
  }
  return false;
}

int64_t BrokerHealth::warnings() const {
  absl::MutexLock l(&mu_);
  return warnings_;
}

}  // namespace partq
