// What tests of a Store share: status assertions (abseil 20220623 has no
// matchers), items to enqueue, and the steps of a session — join and
// acquire, claim everything, finish what was claimed.
#ifndef PARTQ_TESTS_STORE_STORE_TEST_UTIL_H_
#define PARTQ_TESTS_STORE_STORE_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "store/store.h"

namespace partq::store_testing {

inline absl::Status ToStatus(const absl::Status& s) { return s; }
template <typename T>
absl::Status ToStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

}  // namespace partq::store_testing

#define ASSERT_OK(expr)                                                     \
  do {                                                                      \
    const absl::Status assert_ok_ = ::partq::store_testing::ToStatus(expr); \
    ASSERT_TRUE(assert_ok_.ok()) << assert_ok_;                             \
  } while (0)
#define EXPECT_OK(expr)                                                     \
  do {                                                                      \
    const absl::Status expect_ok_ = ::partq::store_testing::ToStatus(expr); \
    EXPECT_TRUE(expect_ok_.ok()) << expect_ok_;                             \
  } while (0)
#define PARTQ_CONCAT_INNER_(a, b) a##b
#define PARTQ_CONCAT_(a, b) PARTQ_CONCAT_INNER_(a, b)
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL_(PARTQ_CONCAT_(status_or_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  ASSERT_TRUE(tmp.ok()) << tmp.status();           \
  lhs = std::move(*tmp)

namespace partq::store_testing {

NewItem Payload(std::string payload);
NewItem Keyed(std::string key, std::string payload = "x");
// The `nth` of the keys "k0", "k1", ... whose items go to `part` of `parts`
// (keyless items of a small test share one part: ids go in runs of
// kKeylessRun).
std::string KeyInPart(int part, int parts, int nth = 0);
std::vector<int64_t> Ids(const std::vector<Item>& items);
// Acks every item it is given.
FinishBody AckAll();
// Acks every item it is given, each with result_of(item) as its result.
FinishBody AckWithResults(std::function<std::optional<std::string>(const Item&)> result_of);
// Gives each item it is given the outcome kind_of(item) (a retry an hour
// later, a dead letter, with the error "failed").
FinishBody OutcomesOf(std::function<Outcome::Kind(const Item&)> kind_of);

// Creates a queue (failing the test if it cannot).
void MakeQueue(Store& store, const std::string& name, int parts,
               absl::Duration ttl = absl::Seconds(60), bool ordered = false, int max_attempts = 25);

// A session of a queue and the parts it acquired.
struct Member {
  JoinResult join;
  std::vector<OwnedPart> parts;
};
// JoinWith's `parts` for every part of the queue.
inline const std::vector<int> kAllParts = {-1};
// Joins `queue` (as static member `instance` when not empty) and acquires
// `parts`; failures fail the test and leave the result short.
Member JoinWith(Store& store, const std::string& queue, std::vector<int> parts,
                const std::string& instance = "");
// Claims from the head of every part of `m` (the first `limit` parts if
// there are more), `limit` items shared equally as the consumer shares them,
// skipping `in_flight`.
ClaimRequest ClaimAll(const std::string& queue, const Member& m, int limit = 100,
                      const std::vector<Item>& in_flight = {});
FinishRequest FinishOf(const std::string& queue, const Member& m, const std::vector<Item>& items);

// A queue holding work of every kind, for the tests of DeleteQueue: six items
// enqueued into a one-part queue, of which one is acked with the result
// "done", one dead-lettered with the error "boom", one in flight (claimed by
// `member`), two ready and one delayed by an hour.
struct WorkOfEveryKind {
  Member member;
  int64_t acked = 0;
  int64_t dead = 0;
  Item flying;
};
WorkOfEveryKind MakeWorkOfEveryKind(Store& store, const std::string& queue);

}  // namespace partq::store_testing

#endif  // PARTQ_TESTS_STORE_STORE_TEST_UTIL_H_
