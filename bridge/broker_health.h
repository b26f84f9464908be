// Whether a Kafka client of the bridge can reach any broker, for /readyz and
// for a warning that repeats while it cannot.
//
// librdkafka reports an outage once (RdKafka::ERR__ALL_BROKERS_DOWN through
// the event callback) and then retries quietly; a wrong --brokers looked
// healthy. The bridges forward their client's events here (OnEvent: errors
// and statistics on the thread that polls the client, log lines on
// librdkafka's own threads, which is why the class is thread-safe and its
// log branch touches no state); statistics events (statistics.interval.ms,
// which the bridges set) carry each broker's connection state, so a broker
// coming up, or none having come up yet, shows within an interval.
//
// Not ready until a statistics event shows a broker UP (or, before the first
// statistics, a broker answered the client: OnBrokerAnswered); not ready
// again from ERR__ALL_BROKERS_DOWN (or statistics with none UP) until
// statistics show one UP. While
// down, a warning naming the brokers is logged at once and then every
// `warn_every`, when an event arrives. Thread-safe.
#ifndef PARTQ_BRIDGE_BROKER_HEALTH_H_
#define PARTQ_BRIDGE_BROKER_HEALTH_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace RdKafka {
class Event;
}

namespace partq {

class BrokerHealth {
 public:
  // `who` names the client in log lines ("bridge publish"); `clock` must
  // outlive this.
  BrokerHealth(std::string who, std::string brokers, Clock* clock = Clock::Real(),
               absl::Duration warn_every = absl::Seconds(30));

  // Any librdkafka event: statistics and all-brokers-down count here; other
  // errors and librdkafka's log lines go to the partq log (PARTQ_LOG).
  void OnEvent(RdKafka::Event& event);
  // What OnEvent calls: all brokers down; a statistics JSON document.
  void OnAllBrokersDown();
  void OnStats(absl::string_view json);
  // A broker answered (a delivery confirmed, a message fetched): up, if no
  // statistics or all-brokers-down event came yet (a fast first batch comes
  // before the first statistics). After one, the events rule alone: a
  // consumer keeps handing out messages it fetched before every broker went
  // away, and those must not make it ready again.
  void OnBrokerAnswered();

  // True once a broker is UP and while one stays up; otherwise false with
  // `*reason` naming the brokers (for /readyz).
  bool Ready(std::string* reason) const;
  // Warnings logged so far (tests).
  int64_t warnings() const;

 private:
  void SetUp(bool up) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeWarn() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string who_;
  const std::string brokers_;
  Clock* const clock_;
  const absl::Duration warn_every_;
  mutable absl::Mutex mu_;
  bool seen_up_ ABSL_GUARDED_BY(mu_) = false;   // a broker was UP at some point
  bool informed_ ABSL_GUARDED_BY(mu_) = false;  // statistics or all-down came
  bool up_ ABSL_GUARDED_BY(mu_) = false;
  bool down_reported_ ABSL_GUARDED_BY(mu_) = false;  // all-down seen (or none UP yet)
  absl::Time down_since_ ABSL_GUARDED_BY(mu_);
  absl::Time last_warning_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t warnings_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace partq

#endif  // PARTQ_BRIDGE_BROKER_HEALTH_H_
