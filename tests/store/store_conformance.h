// The Store contract (store/store.h), stated once and run against every
// store, as River's riverdrivertest runs one suite against every driver:
// store_conformance_mem.cc (MemStore, label unit) and
// store_conformance_pg.cc (PgStore on a fresh schema, label pg) instantiate
// it. A case passes on every store or it is a bug of the store that fails it;
// what only PostgreSQL does (plans, locks, SQL, LISTEN, Kafka) is tested in
// tests/pg/pg_store_test.cc.
//
// The database clock. Expiry, delays and ages are tested by moving the
// database clock with StoreHarness::Advance, never by sleeping: a ManualClock
// for MemStore; for PgStore, every timestamp stored in the schema is moved
// back by the same amount in one transaction, which to every comparison the
// SQL makes (a stored time against now()) is the server's clock moving ahead.
// Real time passes as well on PostgreSQL, so the cases keep margins no slow
// machine eats: a session's TTL is a minute, "not yet" is checked half a TTL
// or an hour of delay before "now it is".
#ifndef PARTQ_TESTS_STORE_STORE_CONFORMANCE_H_
#define PARTQ_TESTS_STORE_STORE_CONFORMANCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "store/store.h"
#include "store/validate.h"
#include "tests/store/store_test_util.h"

namespace partq::conformance {

// One store implementation under test, with a database of its own.
class StoreHarness {
 public:
  virtual ~StoreHarness() = default;
  // A new handle (a connection) on the harness's database, which has no
  // queues when the harness is made. It refuses payloads larger than
  // `max_payload_bytes`.
  virtual std::unique_ptr<Store> Connect(int64_t max_payload_bytes = kDefaultMaxPayloadBytes) = 0;
  // The database clock, now.
  virtual absl::Time Now() = 0;
  // Moves the database clock `d` ahead for everything stored so far.
  virtual void Advance(absl::Duration d) = 0;
  // What committed transactions published (Tx::Publish), oldest first.
  virtual std::vector<OutboxEvent> Outbox() = 0;
};

struct StoreKind {
  std::string name;  // names the instantiation: "Mem", "Pg"
  std::function<std::unique_ptr<StoreHarness>()> make;
};

class StoreConformance : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override;

  // Item counts of `queue` summed over its parts (Store::Status).
  struct Counts {
    int64_t ready = 0;
    int64_t delayed = 0;
    int64_t in_flight = 0;
    int64_t dead = 0;
    int64_t items() const { return ready + delayed + in_flight; }
  };
  Counts CountsOf(const std::string& queue);
  // The payloads published to `topic`, oldest first.
  std::vector<std::string> Published(const std::string& topic);

  std::unique_ptr<StoreHarness> harness_;
  std::unique_ptr<Store> store_;
};

// Finishing: a queue "q" of two parts and three attempts, six items, and a
// member that owns both parts.
class StoreFinishConformance : public StoreConformance {
 protected:
  void SetUp() override;
  // Publishes each item's id to the topic "effects" through the handler's
  // transaction, then returns `kind` for all of them (retries after five
  // minutes, with the error "boom"). `seen`: the items of the last run.
  FinishBody Record(Outcome::Kind kind, std::vector<int64_t>* seen = nullptr);
  // The item ids published to "effects" by committed transactions.
  std::vector<int64_t> Effects();

  std::vector<int64_t> ids_;
  store_testing::Member member_;
};

std::string StoreKindName(const ::testing::TestParamInfo<StoreKind>& info);

}  // namespace partq::conformance

// Runs every suite of the contract against the stores `kind` makes.
#define PARTQ_INSTANTIATE_STORE_CONFORMANCE(prefix, kind)                           \
  INSTANTIATE_TEST_SUITE_P(prefix, StoreConformance, ::testing::Values(kind),       \
                           ::partq::conformance::StoreKindName);                    \
  INSTANTIATE_TEST_SUITE_P(prefix, StoreFinishConformance, ::testing::Values(kind), \
                           ::partq::conformance::StoreKindName)

#endif  // PARTQ_TESTS_STORE_STORE_CONFORMANCE_H_
