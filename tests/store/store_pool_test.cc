// store/store_pool.h on MemStores: what is given back is taken again, newest
// first; what nobody took for idle_close is closed, down to `keep`.
#include "store/store_pool.h"

#include <atomic>
#include <memory>

#include "gtest/gtest.h"
#include "store/mem_store.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

TEST(StorePool, GivesBackTheNewestAndClosesWhatStayedIdleDownToKeep) {
  MemDatabase db;
  std::atomic<int> made{0};
  StoreFactory counting = [&]() -> absl::StatusOr<std::unique_ptr<Store>> {
    ++made;
    return db.Factory()();
  };
  StorePool pool(counting, absl::Milliseconds(200), /*keep=*/1);
  auto a = pool.Take();
  auto b = pool.Take();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(made, 2) << "two calls at once: two connections";
  Store* b_raw = b->get();
  pool.Give(*std::move(a));
  pool.Give(*std::move(b));
  EXPECT_EQ(pool.idle(), 2);
  auto again = pool.Take();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), b_raw) << "the one given back last";
  EXPECT_EQ(made, 2);
  pool.Give(*std::move(again));
  pool.Give(nullptr);  // a broken one the caller dropped: nothing kept
  EXPECT_EQ(pool.idle(), 2);
  ASSERT_TRUE(testing::WaitUntil([&] { return pool.idle() == 1; }, absl::Seconds(10)));
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(pool.idle(), 1) << "keep: the last one stays however long it idles";
}

}  // namespace
}  // namespace partq
