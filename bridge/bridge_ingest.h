// Kafka -> queue: every message of a topic becomes exactly one item.
//
// BridgeIngest consumes `topic` in the Kafka consumer group `group`
// (cooperative-sticky assignment, optional static group.instance.id; see
// producer/README.md for why) and writes batches of messages as items, with
// each partition's next offset, in one PostgreSQL transaction
// (BridgeStore::IngestKafka). The offsets in PostgreSQL are the truth: on
// assignment the bridge seeks to them, and the offset row moves only by
// compare-and-set, so a bridge that lost a partition cannot write it again.
// After each transaction the offsets are also committed to Kafka
// (asynchronously) so ordinary lag tools see them.
//
// Backpressure: while the queue holds `high_water` items or more, every held
// partition is paused; they resume once it holds fewer than `low_water`. The
// consumer keeps polling meanwhile, so it stays in its group.
//
// Lifecycle (base/service.h): Start() once; Stop() is safe before Start and
// twice. One background thread owns the Kafka consumer and a Store.
#ifndef PARTQ_BRIDGE_BRIDGE_INGEST_H_
#define PARTQ_BRIDGE_BRIDGE_INGEST_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/service.h"
#include "bridge/bridge_metrics.h"
#include "store/bridge_store.h"

namespace partq {

struct BridgeIngestOptions {
  std::string brokers;  // bootstrap.servers
  std::string topic;
  std::string queue;
  std::string group;        // empty: "partq-bridge." + queue
  std::string instance_id;  // non-empty: static member (group.instance.id)
  int batch_max = 1000;     // messages per transaction
  absl::Duration batch_wait = absl::Milliseconds(50);  // max wait to fill one
  int64_t high_water = 100000;                         // pause at this backlog (items in the queue)
  int64_t low_water = 50000;                           // resume below this
  absl::Duration check_interval = absl::Milliseconds(200);  // backlog/lag/resync
  // Extra librdkafka properties (e.g. session.timeout.ms), applied last.
  std::map<std::string, std::string> kafka_config;
};

struct BridgeIngestStats {
  int64_t messages = 0;  // ingested (committed)
  int64_t batches = 0;
  int64_t conflicts = 0;  // batches refused by the offset compare-and-set
  int64_t errors = 0;     // other failed batches
  int64_t pauses = 0;     // backpressure pauses
  int64_t resumes = 0;
  bool paused = false;  // under backpressure now
  int assigned = 0;     // partitions held
};

class BridgeIngest {
 public:
  // `metrics` may be null; it must outlive this.
  BridgeIngest(BridgeStoreFactory stores, BridgeIngestOptions options, BridgeMetrics* metrics);
  ~BridgeIngest();  // Stop()s
  BridgeIngest(const BridgeIngest&) = delete;
  BridgeIngest& operator=(const BridgeIngest&) = delete;

  // Validates the options, connects to PostgreSQL (checks the queue) and
  // creates the Kafka consumer; then consumes on a background thread.
  absl::Status Start();
  // Writes the batch in hand, leaves the group and joins the thread.
  void Stop();
  // Not OK once the thread gave up on a permanent error (e.g. a message
  // larger than the payload limit); the thread has then stopped.
  absl::Status status() const;
  BridgeIngestStats stats() const;
  // /readyz: true while the consumer reaches a Kafka broker; otherwise false
  // with `*reason` naming the brokers (bridge/broker_health.h). Any thread.
  bool Ready(std::string* reason) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  StartStop lifecycle_;
};

}  // namespace partq

#endif  // PARTQ_BRIDGE_BRIDGE_INGEST_H_
