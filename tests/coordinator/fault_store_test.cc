// store/fault_store.h around a MemStore. (It sits here, not in tests/store/,
// while that folder is being written; it needs only the store library.)
#include "store/fault_store.h"

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "base/clock.h"
#include "gtest/gtest.h"
#include "store/mem_store.h"

namespace partq {
namespace {

QueueConfig Queue(const std::string& name) {
  QueueConfig q;
  q.name = name;
  q.parts = 2;
  return q;
}

TEST(FaultInjector, PassesCallsThroughAndCountsThem) {
  MemDatabase db;
  FaultInjector faults;
  auto store = faults.Wrap(db.Connect());
  ASSERT_TRUE(store->CreateQueue(Queue("q")).ok());
  auto got = store->GetQueue("q");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->parts, 2);
  EXPECT_EQ(store->GetQueue("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(faults.Calls("CreateQueue"), 1);
  EXPECT_EQ(faults.Calls("GetQueue"), 2);  // failed calls count too
  EXPECT_EQ(faults.Calls("Heartbeat"), 0);
}

// The injected failures are shared by every store the injector wrapped, and a
// failed call never reaches the store.
TEST(FaultInjector, FailNextFailsTheNextCallsOfAnyStore) {
  MemDatabase db;
  FaultInjector faults;
  StoreFactory factory = faults.Wrap(db.Factory());
  auto one = factory();
  auto two = factory();
  ASSERT_TRUE(one.ok() && two.ok());
  faults.FailNext(2, absl::AbortedError("boom"));
  EXPECT_EQ((*one)->CreateQueue(Queue("a")).code(), absl::StatusCode::kAborted);
  EXPECT_EQ((*two)->CreateQueue(Queue("b")).code(), absl::StatusCode::kAborted);
  EXPECT_TRUE((*one)->CreateQueue(Queue("c")).ok());
  auto queues = db.Connect()->ListQueues();
  ASSERT_TRUE(queues.ok());
  ASSERT_EQ(queues->size(), 1u);
  EXPECT_EQ((*queues)[0].name, "c");
}

TEST(FaultInjector, FailCallsOfFailsOneMethodUntilCleared) {
  MemDatabase db;
  FaultInjector faults;
  auto store = faults.Wrap(db.Connect());
  ASSERT_TRUE(store->CreateQueue(Queue("q")).ok());
  faults.FailCallsOf("GetQueue");
  EXPECT_EQ(store->GetQueue("q").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store->GetQueue("q").status().message(), "injected failure of GetQueue");
  EXPECT_TRUE(store->ListQueues().ok());
  faults.FailCallsOf("GetQueue", false);
  EXPECT_TRUE(store->GetQueue("q").ok());
}

// A store on a manual clock, and a call that the injector holds for 2 s of
// that clock on a thread of its own.
class FaultInjectorClockTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(fast_->CreateQueue(Queue("q")).ok()); }

  // Runs `call` on its own store and thread; runs `meanwhile` once it waits
  // on the clock, then checks it is still held 1 s on and done 2 s on.
  void HeldFor2s(const std::function<void(Store&)>& call, const std::function<void()>& meanwhile) {
    std::atomic<bool> done{false};
    std::thread slow([&] {
      auto store = faults_.Wrap(db_.Connect());
      call(*store);
      done = true;
    });
    ASSERT_TRUE(clock_.AwaitWaiters(1));
    meanwhile();
    clock_.Advance(absl::Seconds(1));
    ASSERT_TRUE(clock_.AwaitWaiters(1));
    EXPECT_FALSE(done);
    clock_.Advance(absl::Seconds(1));
    slow.join();
    EXPECT_TRUE(done);
  }

  ManualClock clock_;
  MemDatabase db_{&clock_};
  FaultInjector faults_{&clock_};
  std::unique_ptr<Store> fast_ = faults_.Wrap(db_.Connect());
};

// A slow call waits on the injector's clock: it returns once the clock moved
// on by the delay, and other calls are not held up meanwhile.
TEST_F(FaultInjectorClockTest, SlowCallsTakeLongerOnTheClock) {
  faults_.SlowCallsOf("Status", absl::Seconds(2));
  HeldFor2s([](Store& store) { EXPECT_TRUE(store.Status("q").ok()); },
            [&] { EXPECT_TRUE(fast_->GetQueue("q").ok()); });
  faults_.SlowCallsOf("Status", absl::ZeroDuration());
  EXPECT_TRUE(fast_->Status("q").ok());  // no longer slow: returns without the clock
}

// A slow answer: the store has done the work at once (another connection
// sees it), the caller gets the answer once the clock moved on by the delay.
// The delay is the one set when the call started.
TEST_F(FaultInjectorClockTest, SlowAnswersComeLaterForWorkTheStoreHasDone) {
  faults_.SlowAnswersOf("CreateQueue", absl::Seconds(2));
  HeldFor2s([](Store& store) { EXPECT_TRUE(store.CreateQueue(Queue("r")).ok()); },
            [&] {
              faults_.SlowAnswersOf("CreateQueue", absl::ZeroDuration());  // not the one under way
              EXPECT_TRUE(fast_->GetQueue("r").ok()) << "created before the answer";
            });
  EXPECT_TRUE(fast_->CreateQueue(Queue("s")).ok());  // no longer slow
}

TEST(FaultInjector, AWrappedFactorysOwnErrorsPassThrough) {
  FaultInjector faults;
  StoreFactory broken = []() -> absl::StatusOr<std::unique_ptr<Store>> {
    return absl::UnavailableError("no server");
  };
  auto store = faults.Wrap(broken)();
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace partq
