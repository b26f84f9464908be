// Growing a queue's parts while workers drain it and a producer keeps
// enqueueing (Store::GrowParts, `partq queue set --parts`), on a real
// PostgreSQL: every item exactly once, an ordered queue's keys in enqueue
// order across the grow (I16), every new part owned afterwards.
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "consumer/consumer.h"
#include "gtest/gtest.h"
#include "pg/pg_store.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using testing::ChildProcess;
using testing::TestSchema;
using testing::WaitUntil;

class GrowTest : public ::testing::Test {
 protected:
  static constexpr int kKeys = 300;
  static constexpr int kBacklog = 3000;  // enqueued before the workers start
  static constexpr int kBatch = 20;      // the producer's enqueues
  static constexpr int kLiveBatches = 150;

  // A queue of counts[0] parts, drained by three consumers while one
  // producer enqueues kLiveBatches batches of kBatch keyed items; the queue
  // grows to counts[1], counts[2], ... one after another as the drain goes
  // on, the producer enqueueing before, during and after each grow.
  void GrowWhileDraining(bool ordered, AssignmentKind assignment, const std::vector<int>& counts) {
    QueueConfig q;
    q.name = "q";
    q.parts = counts[0];
    q.ordered = ordered;
    q.assignment = assignment;
    ASSERT_TRUE(schema_.NewStore()->CreateQueue(q).ok());
    // The handler's record: which part ran each item, and in what order
    // (seq: an ordered key's next item runs only after the previous one's
    // ack committed, so its seq is higher).
    CreateDone();
    ASSERT_TRUE(schema_.NewStore()->EnqueueBatch("q", Items(0, kBacklog)).ok());

    auto handler = MakeHandler([](HandlerCall& call) -> absl::Status {
      const std::string s = call.tx->schema();
      return call.tx
          ->Exec(absl::StrCat("INSERT INTO \"", s,
                              "\".done (item_id, key, part, seq) VALUES ($1, "
                              "$2, $3, nextval('\"",
                              s, "\".done_seq'))"),
                 {absl::StrCat(call.item->id), *call.item->key, absl::StrCat(call.item->part)})
          .status();
    });
    std::vector<std::unique_ptr<Consumer>> consumers;
    for (int i = 0; i < 3; ++i) {
      ConsumerOptions o;
      o.queue = "q";
      o.concurrency = 2;
      o.batch = 50;
      o.poll_interval = absl::Milliseconds(100);
      consumers.push_back(std::make_unique<Consumer>(schema_.Factory(), o, handler.get()));
      ASSERT_TRUE(consumers.back()->Start().ok());
    }

    const int grows = static_cast<int>(counts.size()) - 1;
    std::atomic<int> grown{0};
    std::atomic<bool> produced{false};
    absl::Status producer_status;
    std::thread producer([&] {
      std::unique_ptr<Store> store = schema_.NewStore();
      for (int b = 0; b < kLiveBatches; ++b) {
        // The batches are split evenly around the grows: the producer waits
        // for grow i before its share after it.
        const int due = b * (grows + 1) / kLiveBatches;
        if (!WaitUntil([&] { return grown.load() >= due; }, absl::Minutes(3))) {
          producer_status = absl::DeadlineExceededError("no grow");
          break;
        }
        absl::StatusOr<int64_t> n =
            store->EnqueueBatch("q", Items(kBacklog + b * kBatch, kBacklog + (b + 1) * kBatch));
        if (!n.ok()) {
          producer_status = n.status();
          break;
        }
      }
      produced = true;
    });
    std::unique_ptr<Store> store = schema_.NewStore();
    for (int i = 1; i <= grows; ++i) {
      // Each grow while items are being acked.
      ASSERT_TRUE(WaitUntil([&] { return Done() >= i * 1000; }, absl::Minutes(3)));
      absl::StatusOr<int> before = store->GrowParts("q", counts[i]);
      ASSERT_TRUE(before.ok()) << before.status();
      EXPECT_EQ(*before, counts[i - 1]);
      grown = i;
    }
    const int total = kBacklog + kLiveBatches * kBatch;
    const int last = counts.back();
    auto all_owned = [&] {
      absl::StatusOr<QueueOwners> o = store->Owners("q");
      if (!o.ok() || static_cast<int>(o->owners.size()) != last) return false;
      for (const auto& owner : o->owners) {
        if (!owner) return false;
      }
      return true;
    };
    EXPECT_TRUE(WaitUntil([&] { return produced.load() && Done() >= total && all_owned(); },
                          absl::Minutes(3)))
        << "done " << Done() << " of " << total;
    producer.join();
    for (auto& c : consumers) c->Stop();
    ASSERT_TRUE(producer_status.ok()) << producer_status;

    // Every item exactly once, and none left.
    EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.done"), total);
    EXPECT_EQ(schema_.QInt("SELECT count(DISTINCT item_id) FROM {schema}.done"), total);
    EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items"), 0);
    // Items ran in the new parts, and keys had items in more than one part
    // (an old one and a new one): the grow mattered.
    EXPECT_GT(
        schema_.QInt(absl::StrCat("SELECT count(*) FROM {schema}.done WHERE part >= ", counts[0])),
        0);
    EXPECT_GT(schema_.QInt("SELECT count(*) FROM (SELECT key FROM {schema}.done GROUP BY key "
                           "HAVING count(DISTINCT part) > 1) k"),
              0);
    if (ordered) {
      EXPECT_EQ(OutOfOrder(), 0);
    }
  }

  // The table and sequence the handlers record into (see GrowWhileDraining).
  void CreateDone() {
    schema_.Q(
        "CREATE SEQUENCE {schema}.done_seq; CREATE TABLE {schema}.done (item_id bigint NOT NULL, "
        "key text NOT NULL, part int NOT NULL, seq bigint NOT NULL)");
  }

  // Each key's items ran in enqueue (id) order: none after a later one.
  int64_t OutOfOrder() const {
    return schema_.QInt(R"(
        SELECT count(*) FROM (
          SELECT item_id, lag(item_id) OVER (PARTITION BY key ORDER BY seq) AS prev
          FROM {schema}.done) x
        WHERE prev > item_id)");
  }

  // Items `from`..`to`-1, keyed round robin over kKeys keys.
  static std::vector<NewItem> Items(int from, int to) {
    std::vector<NewItem> items;
    for (int i = from; i < to; ++i) {
      NewItem it;
      it.key = absl::StrCat("key-", i % kKeys);
      it.payload = absl::StrCat(i);
      items.push_back(std::move(it));
    }
    return items;
  }

  int64_t Done() const { return schema_.QInt("SELECT count(*) FROM {schema}.done"); }

  TestSchema schema_;
};

TEST_F(GrowTest, AnOrderedQueueGrows16To64WhileDrainingAndKeepsEachKeysOrder) {
  GrowWhileDraining(/*ordered=*/true, AssignmentKind::kLexical, {16, 64});
}

TEST_F(GrowTest, AnUnorderedQueueGrows16To64WhileDrainingAndRunsEachItemOnce) {
  GrowWhileDraining(/*ordered=*/false, AssignmentKind::kSticky, {16, 64});
}

TEST_F(GrowTest, AnOrderedQueueGrowsTwice4To8To32) {
  GrowWhileDraining(/*ordered=*/true, AssignmentKind::kSticky, {4, 8, 32});
}

// Whole processes: three `partq worker`s drain an ordered queue; it grows
// 8 -> 32 and one worker is SIGKILLed right after, with items in flight in
// old parts; a producer enqueues on. The survivors take its parts after its
// TTL: every item once (the killed worker's open transactions never
// committed), each key in order, all 32 parts owned.
TEST_F(GrowTest, WorkerProcessesKeepOrderWhenOneIsKilledDuringTheGrow) {
  QueueConfig q;
  q.name = "q";
  q.parts = 8;
  q.ordered = true;
  q.session_ttl = absl::Seconds(2);
  ASSERT_TRUE(schema_.NewStore()->CreateQueue(q).ok());
  CreateDone();
  ASSERT_TRUE(schema_.NewStore()->EnqueueBatch("q", Items(0, 2 * kBacklog)).ok());
  const std::string handler =
      absl::StrCat("sql:INSERT INTO \"", schema_.name(),
                   "\".done (item_id, key, part, seq) VALUES ($1, $3, $7, nextval('\"",
                   schema_.name(), "\".done_seq'))");
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{
        testing::PartqBinary(), "worker", "q", "--dsn", schema_.dsn(), "--schema", schema_.name(),
        "--handler", handler, "--quiet", "--concurrency", "2", "--poll-interval", "100ms"}));
  }
  ASSERT_TRUE(WaitUntil([&] { return Done() >= 1000; }, absl::Minutes(3)));
  std::unique_ptr<Store> store = schema_.NewStore();
  absl::StatusOr<int> before = store->GrowParts("q", 32);
  ASSERT_TRUE(before.ok()) << before.status();
  workers[0]->Signal(SIGKILL);
  ASSERT_TRUE(workers[0]->Wait(absl::Seconds(30)).has_value());
  constexpr int kAfter = 2000;
  for (int b = 0; b < kAfter / kBatch; ++b) {
    const int from = 2 * kBacklog + b * kBatch;
    ASSERT_TRUE(store->EnqueueBatch("q", Items(from, from + kBatch)).ok());
  }
  const int total = 2 * kBacklog + kAfter;
  auto all_owned = [&] {
    absl::StatusOr<QueueOwners> o = store->Owners("q");
    if (!o.ok() || o->owners.size() != 32u) return false;
    for (const auto& owner : o->owners) {
      if (!owner) return false;
    }
    return true;
  };
  EXPECT_TRUE(WaitUntil([&] { return Done() >= total && all_owned(); }, absl::Minutes(3)))
      << "done " << Done() << " of " << total;
  for (size_t i = 1; i < workers.size(); ++i) workers[i]->Signal(SIGTERM);
  for (size_t i = 1; i < workers.size(); ++i) {
    std::optional<int> st = workers[i]->Wait(absl::Seconds(60));
    ASSERT_TRUE(st.has_value());
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
  }
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.done"), total);
  EXPECT_EQ(schema_.QInt("SELECT count(DISTINCT item_id) FROM {schema}.done"), total);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items"), 0);
  EXPECT_GT(schema_.QInt("SELECT count(*) FROM {schema}.done WHERE part >= 8"), 0);
  EXPECT_EQ(OutOfOrder(), 0);
}

}  // namespace
}  // namespace partq
