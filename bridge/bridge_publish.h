// Queue -> Kafka: sends outbox rows (written by handlers inside their ack
// transactions, Tx::Publish in store/store.h) to Kafka.
//
// The idempotent producer (enable.idempotence=true, acks=all, at most 5
// requests in flight) keeps per-partition order and drops the duplicates its
// own retries would make. Rows are read in id order and deleted only after
// their delivery report says the brokers have them; message.timeout.ms
// defaults to 0 (retry forever), so a broker outage delays rows but loses
// none. A failed report keeps the row (counted in
// partq_bridge_delivery_failures_total) and the batch is retried after a
// pause. A row the producer refuses to queue (over its message size) stays,
// with its topic's later rows; the other topics' rows go on. A crash
// between delivery and the delete re-sends those rows once
// more when restarted (at-least-once across bridge crashes; see README).
//
// Stop is bounded: it waits for the reports of the round in hand at most
// `drain_timeout`, then purges what librdkafka still holds and leaves those
// rows in the outbox (stats().left_in_outbox). They are sent again by the
// next publisher, with a new producer session: the idempotent producer drops
// duplicates only within one session, so a row the brokers had already
// written before the purge reaches Kafka twice (at-least-once toward Kafka).
//
// Run one publisher per schema: rows are read from the head of the outbox.
// Lifecycle (base/service.h): Start() once; Stop() safe before Start and twice.
#ifndef PARTQ_BRIDGE_BRIDGE_PUBLISH_H_
#define PARTQ_BRIDGE_BRIDGE_PUBLISH_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/service.h"
#include "bridge/bridge_metrics.h"
#include "store/bridge_store.h"

namespace partq {

struct BridgePublishOptions {
  std::string brokers;
  int batch = 500;                                         // rows per round
  absl::Duration poll_interval = absl::Milliseconds(100);  // when the outbox is empty
  absl::Duration retry_pause = absl::Milliseconds(500);    // after a failed round
  // On Stop, how long to wait for delivery reports of the round in hand.
  absl::Duration drain_timeout = absl::Seconds(10);
  std::map<std::string, std::string> kafka_config;  // applied last
};

struct BridgePublishStats {
  int64_t delivered = 0;  // rows delivered and deleted
  int64_t failures = 0;   // failed delivery reports
  int64_t rounds = 0;
  // Rows of the round in hand that Stop left in the outbox undelivered (or
  // delivered but not deleted) once the drain timeout ran out.
  int64_t left_in_outbox = 0;
};

class BridgePublish {
 public:
  BridgePublish(BridgeStoreFactory stores, BridgePublishOptions options, BridgeMetrics* metrics);
  ~BridgePublish();
  BridgePublish(const BridgePublish&) = delete;
  BridgePublish& operator=(const BridgePublish&) = delete;

  absl::Status Start();
  // Finishes the round in hand (waits for its delivery reports, at most
  // options.drain_timeout) and stops.
  void Stop();
  BridgePublishStats stats() const;
  // /readyz: true while the producer reaches a Kafka broker; otherwise false
  // with `*reason` naming the brokers (bridge/broker_health.h). Any thread.
  bool Ready(std::string* reason) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  StartStop lifecycle_;
};

}  // namespace partq

#endif  // PARTQ_BRIDGE_BRIDGE_PUBLISH_H_
