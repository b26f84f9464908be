// The Store contract on MemStore, its database clock a ManualClock.
#include <memory>
#include <vector>

#include "base/clock.h"
#include "gtest/gtest.h"
#include "store/mem_store.h"
#include "tests/store/store_conformance.h"

namespace partq::conformance {
namespace {

class MemHarness : public StoreHarness {
 public:
  std::unique_ptr<Store> Connect(int64_t max_payload_bytes) override {
    return db_.Connect(max_payload_bytes);
  }
  absl::Time Now() override { return clock_.Now(); }
  void Advance(absl::Duration d) override { clock_.Advance(d); }
  std::vector<OutboxEvent> Outbox() override { return db_.Outbox(); }

 private:
  ManualClock clock_;
  MemDatabase db_{&clock_};
};

PARTQ_INSTANTIATE_STORE_CONFORMANCE(Mem, (StoreKind{"MemStore", [] {
                                                      return std::make_unique<MemHarness>();
                                                    }}));

// Queue groups are PostgreSQL's (store.h, "Queue groups"): MemStore refuses
// an item of a group in every enqueue rather than keeping it without one.
TEST(MemStoreGroups, AnItemOfAGroupIsRefusedNotEnqueuedWithoutIt) {
  ManualClock clock;
  MemDatabase db(&clock);
  std::unique_ptr<Store> store = db.Connect();
  QueueConfig q;
  q.name = "q";
  q.parts = 2;
  ASSERT_TRUE(store->CreateQueue(q).ok());
  NewItem item;
  item.group = "g";
  EXPECT_TRUE(absl::IsUnimplemented(store->Enqueue("q", item).status()));
  EXPECT_TRUE(absl::IsUnimplemented(store->EnqueueBatch("q", {NewItem{}, item}).status()));
  EXPECT_TRUE(absl::IsUnimplemented(store->StartGroup("q", "g").status()));
  absl::StatusOr<QueueStatus> st = store->Status("q");
  ASSERT_TRUE(st.ok());
  for (const PartStatus& p : st->parts) EXPECT_EQ(p.ready, 0);
}

}  // namespace
}  // namespace partq::conformance
