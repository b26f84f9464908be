// The Store contract on MemStore, its database clock a ManualClock.
#include <memory>
#include <vector>

#include "base/clock.h"
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

}  // namespace
}  // namespace partq::conformance
