// Queue -> Kafka: sends outbox rows (written by handlers inside their ack
// transactions, WriteOutbox in coordinator/pg_store.h) to Kafka.
//
// The idempotent producer (enable.idempotence=true, acks=all, at most 5
// requests in flight) keeps per-partition order and drops the duplicates its
// own retries would make. Rows are read in id order and deleted only after
// their delivery report says the brokers have them; message.timeout.ms
// defaults to 0 (retry forever), so a broker outage delays rows but loses
// none. A failed report keeps the row (counted in
// partq_bridge_delivery_failures_total) and the batch is retried after a
// pause. A crash between delivery and the delete re-sends those rows once
// more when restarted (at-least-once across bridge crashes; see README).
//
// Run one publisher per schema: rows are read from the head of the outbox.
// Lifecycle (STYLE.md 10): Start() once; Stop() safe before Start and twice.
#ifndef PARTQ_PRODUCER_BRIDGE_PUBLISH_H_
#define PARTQ_PRODUCER_BRIDGE_PUBLISH_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "coordinator/store.h"
#include "producer/bridge_metrics.h"

namespace partq {

struct BridgePublishOptions {
  std::string brokers;
  int batch = 500;                                     // rows per round
  absl::Duration poll_interval = absl::Milliseconds(100);  // when the outbox is empty
  absl::Duration retry_pause = absl::Milliseconds(500);    // after a failed round
  std::map<std::string, std::string> kafka_config;     // applied last
};

struct BridgePublishStats {
  int64_t delivered = 0;  // rows delivered and deleted
  int64_t failures = 0;   // failed delivery reports
  int64_t rounds = 0;
};

class BridgePublish {
 public:
  BridgePublish(StoreFactory stores, BridgePublishOptions options, BridgeMetrics* metrics);
  ~BridgePublish();
  BridgePublish(const BridgePublish&) = delete;
  BridgePublish& operator=(const BridgePublish&) = delete;

  absl::Status Start();
  // Finishes the round in hand (waits for its delivery reports) and stops.
  void Stop();
  BridgePublishStats stats() const;
  // /readyz: true while the producer reaches a Kafka broker; otherwise false
  // with `*reason` naming the brokers (producer/broker_health.h). Any thread.
  bool Ready(std::string* reason) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  bool started_ = false;
};

}  // namespace partq

#endif  // PARTQ_PRODUCER_BRIDGE_PUBLISH_H_
