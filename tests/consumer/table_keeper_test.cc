// The table keeper on MemStore and a ManualClock: it asks the store once per
// interval while this worker owns part 0 and never otherwise, counts and
// retries a failed round, and ends its rounds quietly on a store that keeps
// no tables. What the store's answer does to the tables is PostgreSQL's:
// PgStoreTest.VacuumQueueTables... and ConsumerTest.TheOwnerOfPartZero...
#include "consumer/table_keeper.h"

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "consumer/metrics.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "store/fault_store.h"
#include "store/mem_store.h"

namespace partq {
namespace {

std::optional<double> ErrorCount(const prometheus::Registry& r) {
  for (const auto& family : r.Collect()) {
    if (family.name == "partq_table_vacuum_errors_total") return family.metric[0].counter.value;
  }
  return std::nullopt;
}

class TableKeeperTest : public ::testing::Test {
 protected:
  std::unique_ptr<TableKeeper> NewKeeper() {
    TableKeeperOptions o;
    o.queue = "q";
    o.interval = absl::Seconds(10);
    o.clock = &clock_;
    return std::make_unique<TableKeeper>(
        std::make_shared<SharedStore>(faults_.Wrap(db_.Factory())), o,
        [this] { return is_keeper_.load(); }, &metrics_);
  }

  ManualClock clock_{absl::FromUnixSeconds(1'700'000'000)};
  MemDatabase db_{&clock_};
  FaultInjector faults_{&clock_};
  std::atomic<bool> is_keeper_{true};
  prometheus::Registry registry_;
  ConsumerMetrics metrics_{registry_, "q"};
};

TEST_F(TableKeeperTest, ANonKeeperAsksNothingAndTheKeeperAsksOncePerInterval) {
  is_keeper_ = false;
  auto keeper = NewKeeper();
  EXPECT_EQ(keeper->RunOnce(), clock_.Now() + absl::Seconds(10));
  EXPECT_EQ(faults_.Calls("VacuumQueueTables"), 0);
  is_keeper_ = true;
  // MemStore keeps no tables: Unimplemented, which ends the rounds.
  EXPECT_EQ(keeper->RunOnce(), absl::InfiniteFuture());
  EXPECT_EQ(faults_.Calls("VacuumQueueTables"), 1);
  EXPECT_EQ(keeper->vacuums(), 0);
  EXPECT_EQ(ErrorCount(registry_), 0);
}

TEST_F(TableKeeperTest, AFailedRoundIsCountedAndTriedAgainAfterTheInterval) {
  auto keeper = NewKeeper();
  faults_.FailNext(1);
  EXPECT_EQ(keeper->RunOnce(), clock_.Now() + absl::Seconds(10));
  EXPECT_EQ(ErrorCount(registry_), 1);
  EXPECT_EQ(keeper->RunOnce(), absl::InfiniteFuture());
  EXPECT_EQ(faults_.Calls("VacuumQueueTables"), 2);
}

TEST_F(TableKeeperTest, AZeroIntervalStartsNoRounds) {
  TableKeeperOptions o;
  o.queue = "q";
  o.interval = absl::ZeroDuration();
  o.clock = &clock_;
  TableKeeper keeper(std::make_shared<SharedStore>(faults_.Wrap(db_.Factory())), o,
                     [] { return true; });
  keeper.Start();
  keeper.Stop();
  EXPECT_EQ(faults_.Calls("VacuumQueueTables"), 0);
}

}  // namespace
}  // namespace partq
