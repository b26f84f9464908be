// What only PgStore does, against a real PostgreSQL: migrations, plans, ctid
// locators, the pipelined ack, lock waits, the SQL a handler runs, LISTEN,
// the dead-letter topic's outbox rows, the Kafka bridge's operations, the
// error mapping, and what the Store contract leaves to the tables (which rows
// a delete or an ack leaves). The Store contract itself, which MemStore keeps
// too, is tests/store/store_conformance.cc. Each test gets a fresh schema
// (TestSchema). Timings printed here are informational; no test fails because
// the machine is slow.
#include "pg/pg_store.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "partitioner/part.h"
#include "pg/embedded_sql.h"
#include "pg/migrations.h"
#include "pg/pg_connection.h"
#include "pg/pg_store_internal.h"
#include "store/store.h"
#include "tests/store/store_test_util.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using ::partq::testing::TestSchema;
using store_testing::AckAll;
using store_testing::AckWithResults;
using store_testing::ClaimAll;
using store_testing::FinishOf;
using store_testing::Ids;
using store_testing::JoinWith;
using store_testing::kAllParts;
using store_testing::Keyed;
using store_testing::KeyInPart;
using store_testing::Member;
using store_testing::Payload;
using store_testing::ToStatus;

using ::partq::testing::WaitUntil;

// A Finish of `first` (one item of a one-part member) that begins the next
// transaction and claims up to `limit` items after it in the same flight,
// without a suspect probe: the pipelined form, ending in COMMIT AND CHAIN.
FinishRequest FinishClaimingAhead(const std::string& queue, const Member& m,
                                  const std::vector<Item>& first, int limit) {
  FinishRequest req = FinishOf(queue, m, first);
  req.begin_next = true;
  const ItemKey after{first[0].priority, first[0].id};
  req.next = [queue, m, after, limit]() -> std::optional<ClaimRequest> {
    ClaimRequest c = ClaimAll(queue, m, limit);
    c.parts[0].after = after;
    c.include_suspect = false;
    return c;
  };
  return req;
}

class PgStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = schema_.NewStore();
    ASSERT_NE(store_, nullptr);
    bridge_ = schema_.NewBridgeStore();
    ASSERT_NE(bridge_, nullptr);
  }

  void MakeQueue(const std::string& name, int parts, absl::Duration ttl = absl::Seconds(10),
                 bool ordered = false, int max_attempts = 25) {
    store_testing::MakeQueue(*store_, name, parts, ttl, ordered, max_attempts);
  }

  // Transactions waiting for a lock on the items table (a DeleteQueue or a
  // writer behind one).
  int64_t ItemsLockWaiters() const {
    return schema_.QInt(
        absl::StrCat("SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = '\"",
                     schema_.name(), "\".items'::regclass"));
  }
  int64_t Count(const std::string& table, const std::string& where = "true") {
    return schema_.QInt(absl::StrCat("SELECT count(*) FROM {schema}.", table, " WHERE ", where));
  }

  // The server's counts of sequential scans of `items` and rows deleted from
  // it, once it counts at least `deleted` deletions (a backend reports its
  // counters when it exits, so the caller closes its store first).
  std::pair<int64_t, int64_t> ItemsScansOnceDeleted(int64_t deleted) {
    const std::string stats =
        absl::StrCat("SELECT seq_scan, n_tup_del FROM pg_stat_user_tables WHERE schemaname = '",
                     schema_.name(), "' AND relname = 'items'");
    std::pair<int64_t, int64_t> got{-1, 0};
    EXPECT_TRUE(WaitUntil([&] {
      auto rows = testing::Query(schema_.dsn(), stats);
      if (rows.empty()) return false;
      got = {std::stoll(*rows[0][0]), std::stoll(*rows[0][1])};
      return got.second >= deleted;
    }));
    return got;
  }

  // What a claim read of items_key: the entries the index returned, and its
  // pages. A scan also passes entries that fail its bounds inside the index
  // (a row comparison decided by a column after its first does not end a
  // scan): those are in the pages alone.
  struct KeyReads {
    int64_t entries = 0;
    int64_t pages = 0;
  };

  // A claim by a member of its own (ClaimAll of part 0, limit 10, shaped by
  // `shape`) on a store closed after it, and what it read of items_key: a
  // backend reports its counts when it exits, all at once, so they are read
  // until they are there and stay so.
  std::pair<std::vector<int64_t>, KeyReads> ClaimCountingKeyEntries(
      const std::function<void(ClaimRequest&)>& shape) {
    auto key_reads = [&] {
      auto rows = schema_.Q(
          "SELECT s.idx_tup_read, io.idx_blks_hit + io.idx_blks_read "
          "FROM pg_stat_user_indexes s JOIN pg_statio_user_indexes io USING (indexrelid) "
          "WHERE s.indexrelid = '{schema}.items_key'::regclass");
      return KeyReads{std::stoll(*rows.at(0)[0]), std::stoll(*rows.at(0)[1])};
    };
    // What was read since `since` once the counts stay put (read has some
    // entries if `some`): a backend reports them as it exits, or up to 10 s
    // after it went idle.
    auto settled = [&](const KeyReads& since, bool some) {
      KeyReads read, last{-1, -1};
      EXPECT_TRUE(WaitUntil(
          [&] {
            const KeyReads now = key_reads();
            read = {now.entries - since.entries, now.pages - since.pages};
            const bool same = (!some || read.entries > 0) && read.entries == last.entries &&
                              read.pages == last.pages;
            last = read;
            return same;
          },
          absl::Seconds(60), absl::Milliseconds(300)));
      return read;
    };
    // The test's own store wrote the items (index pages too): closed first.
    store_ = schema_.NewStore();
    const KeyReads before = settled(KeyReads{}, /*some=*/false);
    std::unique_ptr<Store> own = schema_.NewStore();
    Member m = JoinWith(*own, "q", {0});
    ClaimRequest req = ClaimAll("q", m, 10);
    shape(req);
    absl::StatusOr<std::vector<Item>> got = own->Claim(req);
    EXPECT_OK(got.status());
    EXPECT_OK(own->Leave("q", m.join.id, m.join.incarnation));
    own.reset();
    const KeyReads read = settled(before, /*some=*/true);
    return {got.ok() ? Ids(*got) : std::vector<int64_t>{}, read};
  }

  TestSchema schema_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<BridgeStore> bridge_;  // the same database, for the Kafka bridge's operations
};

// --- schema -------------------------------------------------------------------------

TEST_F(PgStoreTest, MigrateIsIdempotent) {
  ASSERT_OK(store_->Migrate());
  ASSERT_OK(store_->Migrate());
  EXPECT_OK(store_->CheckSchema());
  // One row per migration (their numbers may leave gaps: a branch's
  // migration keeps its number while another's is merged).
  EXPECT_EQ(Count("schema_migrations"), static_cast<int64_t>(Migrations().size()));
  EXPECT_EQ(schema_.QInt("SELECT max(version) FROM {schema}.schema_migrations"), kSchemaVersion);
}

// The review of 2026-12-06: a snapshot's xmax is the last xid to end plus
// one, so an older transaction still open, with nothing ending after it,
// was at or above it, and a poll floor passed that transaction's items
// before they committed. next_xid is above every xid handed out before the
// call, open or not. (On a shared server other tests end xids all the
// time, so the xmax here would often have passed it too; the bound is what
// is checked.)
TEST_F(PgStoreTest, CurrentSnapshotsNextXidIsAboveAnOpenTransactionsXid) {
  pqxx::connection c(schema_.dsn());
  pqxx::work open(c);
  const int64_t xid = open.exec1("SELECT pg_current_xact_id()::text::bigint")[0].as<int64_t>();
  absl::StatusOr<SnapshotBounds> s = store_->CurrentSnapshot();
  ASSERT_OK(s.status());
  EXPECT_GT(s->next_xid, xid);
  EXPECT_LE(s->xmin, xid) << "the open transaction is still running";
  open.commit();
  absl::StatusOr<SnapshotBounds> later = store_->CurrentSnapshot();
  ASSERT_OK(later.status());
  EXPECT_GT(later->next_xid, s->next_xid);
}

// A snapshot's bounds, and whether poll floors may use them: not once the
// items' id sequence has a CACHE (its ids are then out of time order).
TEST_F(PgStoreTest, CurrentSnapshotSaysWhenTheIdSequenceHasACache) {
  absl::StatusOr<SnapshotBounds> s = store_->CurrentSnapshot();
  ASSERT_OK(s.status());
  EXPECT_GT(s->xmin, 0);
  EXPECT_LE(s->xmin, s->next_xid);
  EXPECT_EQ(s->id_cache, 1);
  schema_.Q("ALTER SEQUENCE {schema}.items_id_seq CACHE 20");
  s = store_->CurrentSnapshot();
  schema_.Q("ALTER SEQUENCE {schema}.items_id_seq CACHE 1");
  ASSERT_OK(s.status());
  EXPECT_EQ(s->id_cache, 20);
  s = store_->CurrentSnapshot();
  ASSERT_OK(s.status());
  EXPECT_EQ(s->id_cache, 1);
}

// An ordered read on from a cursor looks at a window of rows
// (pg/sql/fragments/ready_window.sql): 8x its limit up to 256 rows, its limit
// past that (from the head, 8x its limit). A key's item past a window that
// is all held back is not read there, and a read from the head finds it
// (among the keys' first items: the scheduler reads an ordered part's keys'
// heads every kOrderedRescans rescan_intervals). b is the 300th row past
// the cursor: past the 256 rows a limit of 100 looks at (800 before), and c
// is the 20th: within the 80 a limit of 10 still looks at.
TEST_F(PgStoreTest, AnOrderedReadFromItsCursorLooksAtAWindowAndAReadFromTheHeadFindsWhatItMissed) {
  MakeQueue("q", 1, absl::Seconds(60), /*ordered=*/true);
  ASSERT_OK(store_->EnqueueBatch("q", std::vector<NewItem>(300, Keyed("a", "a"))));
  ASSERT_OK_AND_ASSIGN(EnqueueResult b, store_->Enqueue("q", Keyed("b", "b")));
  ASSERT_OK(store_->EnqueueBatch("q", std::vector<NewItem>(19, Keyed("x", "x"))));
  ASSERT_OK_AND_ASSIGN(EnqueueResult c, store_->Enqueue("q", Keyed("c", "c")));
  const int64_t a0 = schema_.QInt("SELECT min(id) FROM {schema}.items WHERE key = 'a'");
  const int64_t x0 = schema_.QInt("SELECT min(id) FROM {schema}.items WHERE key = 'x'");
  Member m = JoinWith(*store_, "q", {0});
  // a's and x's first in flight (the rest of each held back), then c too.
  std::vector<std::pair<int, int64_t>> in_flight = {{0, a0}, {0, x0}};
  auto claim = [&](int limit, std::optional<ItemKey> after) {
    ClaimRequest req = ClaimAll("q", m, limit);
    req.ordered = true;
    req.in_flight = in_flight;
    req.parts[0].after = after;
    req.parts[0].cursor = ItemKey{0, c.id};
    req.parts[0].behind = false;
    return store_->Claim(req);
  };
  ASSERT_OK_AND_ASSIGN(std::vector<Item> none, claim(100, ItemKey{0, a0}));
  EXPECT_TRUE(none.empty()) << "b is past the 256 rows the read on from the cursor looks at";
  ASSERT_OK_AND_ASSIGN(std::vector<Item> small, claim(10, ItemKey{0, x0}));
  EXPECT_EQ(Ids(small), (std::vector<int64_t>{c.id})) << "a limit of 10 looks at 80 rows";
  in_flight.emplace_back(0, c.id);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, claim(100, std::nullopt));
  EXPECT_EQ(Ids(got), (std::vector<int64_t>{b.id}));
}

// A released key's next item (pg/sql/fragments/ready_released.sql) is
// probed for an older live item of its key only down to the item the key
// finished: behind a held snapshot every acked item of the key keeps its
// entry in items_key, and the probe from the item down visited each of them
// (a heap visit apiece) on every claim of the key, which stopped an ordered
// queue beside a held snapshot (bench/held_snapshot_ordered.sh). The
// entries read are the server's count for the index (a backend reports it
// when it exits, so each claim runs on a store of its own, closed after); a
// released key whose cursor lies below the acked items walks them, which
// shows that the count sees such a walk.
TEST_F(PgStoreTest, AReleasedKeysNextItemIsProbedOnlyDownToTheItemItsKeyFinished) {
  MakeQueue("q", 1, absl::Seconds(60), /*ordered=*/true);
  constexpr int kAcked = 20000;  // about 100 pages of items_key
  ASSERT_OK(store_->EnqueueBatch("q", std::vector<NewItem>(kAcked + 2, Keyed("a"))));
  ASSERT_OK_AND_ASSIGN(EnqueueResult c, store_->Enqueue("q", Payload("c")));
  const int64_t first = schema_.QInt("SELECT min(id) FROM {schema}.items WHERE key = 'a'");
  const int64_t finished = first + kAcked, next = finished + 1;
  ASSERT_EQ(schema_.QInt("SELECT max(id) FROM {schema}.items WHERE key = 'a'"), next);
  pqxx::connection holder_conn(schema_.dsn());
  pqxx::transaction<pqxx::repeatable_read> holder(holder_conn);
  holder.exec("SELECT 1");
  // The key's items up to `finished` acked (a finish deletes them so), their
  // entries kept by the snapshot.
  schema_.Q(absl::StrCat("DELETE FROM {schema}.items WHERE key = 'a' AND id <= ", finished));
  // On from the cursor past c (in flight), with key a released at `from`.
  auto claim = [&](int64_t from) {
    return ClaimCountingKeyEntries([&](ClaimRequest& req) {
      req.ordered = true;
      req.in_flight = {{0, c.id}};
      req.parts[0].after = req.parts[0].cursor = ItemKey{0, c.id};
      req.parts[0].behind = false;
      req.parts[0].key_cursors = {{"a", from}};
    });
  };
  const auto [got, read] = claim(finished);
  EXPECT_EQ(got, (std::vector<int64_t>{next}));
  EXPECT_LT(read.entries, 20) << "the probe walked the key's acked entries";
  EXPECT_LT(read.pages, kAcked / 400) << "the probe passed the key's acked entries in the index";
  const auto [walked, read_from_below] = claim(first - 1);
  EXPECT_EQ(walked, (std::vector<int64_t>{next}));
  EXPECT_GE(read_from_below.entries, kAcked) << "the count did not see a walk of the acked entries";
  EXPECT_GE(read_from_below.pages, kAcked / 400) << "nor the pages of one";
  holder.abort();
}

// The same bound for an item the read on from the cursor finds: its key's
// floor (ClaimPart::key_floors), the id of the key's item the session
// claimed in the part, is as far down as its probe reads the key's
// entries. Without a floor it walks them all.
TEST_F(PgStoreTest, AnOrderedItemReadOnFromTheCursorIsProbedOnlyDownToItsKeysFloor) {
  MakeQueue("q", 1, absl::Seconds(60), /*ordered=*/true);
  constexpr int kAcked = 20000;  // about 100 pages of items_key
  ASSERT_OK(store_->EnqueueBatch("q", std::vector<NewItem>(kAcked + 2, Keyed("a"))));
  const int64_t first = schema_.QInt("SELECT min(id) FROM {schema}.items WHERE key = 'a'");
  const int64_t claimed = first + kAcked, next = claimed + 1;
  pqxx::connection holder_conn(schema_.dsn());
  pqxx::transaction<pqxx::repeatable_read> holder(holder_conn);
  holder.exec("SELECT 1");
  schema_.Q(absl::StrCat("DELETE FROM {schema}.items WHERE key = 'a' AND id < ", claimed));
  auto claim = [&](std::vector<std::pair<std::string, int64_t>> floors) {
    return ClaimCountingKeyEntries([&](ClaimRequest& req) {
      req.ordered = true;
      req.parts[0].after = req.parts[0].cursor = ItemKey{0, claimed};
      req.parts[0].behind = false;
      req.parts[0].key_floors = floors;
    });
  };
  // The item at the floor is probed too: live (in flight, or retried), it
  // holds the next one back.
  const auto [held, read_held] = claim({{"a", claimed}});
  EXPECT_TRUE(held.empty()) << "the key's item at its floor is live";
  EXPECT_LT(read_held.entries, 20);
  EXPECT_LT(read_held.pages, kAcked / 400);
  schema_.Q(absl::StrCat("DELETE FROM {schema}.items WHERE id = ", claimed));
  const auto [got, read] = claim({{"b", next}, {"a", claimed}});
  EXPECT_EQ(got, (std::vector<int64_t>{next}));
  EXPECT_LT(read.entries, 20) << "the probe walked the key's acked entries";
  EXPECT_LT(read.pages, kAcked / 400) << "the probe passed the key's acked entries in the index";
  const auto [walked, read_without] = claim({});
  EXPECT_EQ(walked, (std::vector<int64_t>{next}));
  EXPECT_GE(read_without.entries, kAcked) << "the count did not see a walk of the acked entries";
  EXPECT_GE(read_without.pages, kAcked / 400) << "nor the pages of one";
  holder.abort();
}

// A key without a floor, in a claim that sends floors for others
// (key_floor.sql gives it the least bigint), is probed down from the item
// (pg/sql/fragments/ordered_probe_up.sql): a held-back item meets the live
// one before it at once, where a read up from the key's first entry would
// pass every acked entry of the key a held snapshot keeps.
TEST_F(PgStoreTest, AnOrderedItemOfAKeyWithoutAFloorIsProbedDownFromItself) {
  MakeQueue("q", 1, absl::Seconds(60), /*ordered=*/true);
  constexpr int kAcked = 20000;  // about 100 pages of items_key
  ASSERT_OK(store_->EnqueueBatch("q", std::vector<NewItem>(kAcked + 2, Keyed("a"))));
  const int64_t first = schema_.QInt("SELECT min(id) FROM {schema}.items WHERE key = 'a'");
  const int64_t live = first + kAcked;
  pqxx::connection holder_conn(schema_.dsn());
  pqxx::transaction<pqxx::repeatable_read> holder(holder_conn);
  holder.exec("SELECT 1");
  schema_.Q(absl::StrCat("DELETE FROM {schema}.items WHERE key = 'a' AND id < ", live));
  const auto [got, read] = ClaimCountingKeyEntries([&](ClaimRequest& req) {
    req.ordered = true;
    req.parts[0].after = req.parts[0].cursor = ItemKey{0, live};
    req.parts[0].behind = false;
    req.parts[0].key_floors = {{"b", 1}};
  });
  EXPECT_TRUE(got.empty()) << "the key's item before the one read on from the cursor is live";
  EXPECT_LT(read.entries, 20) << "the probe walked the key's acked entries";
  EXPECT_LT(read.pages, kAcked / 400) << "the probe passed the key's acked entries in the index";
  holder.abort();
}

// An item whose key's floor is in flight is held back without the probe
// (pg/sql/fragments/ordered_probe_up.sql: the floor's item is then the key's
// first live one, or finishing, its release on the way); the same item is
// held back by the probe when the floor's item is live but not in flight (a
// retried one), and read once the floor's item is done and not in flight.
TEST_F(PgStoreTest, AnOrderedItemIsHeldBackByItsKeysFloorInFlightOrLiveAndReadOnceItIsDone) {
  MakeQueue("q", 1, absl::Seconds(60), /*ordered=*/true);
  ASSERT_OK(store_->EnqueueBatch("q", std::vector<NewItem>(2, Keyed("a"))));
  const int64_t first = schema_.QInt("SELECT min(id) FROM {schema}.items WHERE key = 'a'");
  const int64_t next = first + 1;
  ASSERT_EQ(schema_.QInt("SELECT max(id) FROM {schema}.items WHERE key = 'a'"), next);
  Member m = JoinWith(*store_, "q", {0});
  auto claim = [&](bool floor_in_flight) {
    ClaimRequest req = ClaimAll("q", m, 10);
    req.ordered = true;
    req.parts[0].after = req.parts[0].cursor = ItemKey{0, first};
    req.parts[0].behind = false;
    req.parts[0].key_floors = {{"a", first}};
    if (floor_in_flight) req.in_flight = {{0, first}};
    return store_->Claim(req);
  };
  ASSERT_OK_AND_ASSIGN(std::vector<Item> in_flight, claim(true));
  EXPECT_TRUE(in_flight.empty()) << "the key's item at its floor is in flight";
  ASSERT_OK_AND_ASSIGN(std::vector<Item> live, claim(false));
  EXPECT_TRUE(live.empty()) << "the key's item at its floor is live";
  schema_.Q(absl::StrCat("DELETE FROM {schema}.items WHERE id = ", first));
  ASSERT_OK_AND_ASSIGN(std::vector<Item> finishing, claim(true));
  EXPECT_TRUE(finishing.empty()) << "an item whose floor is in flight is held back unprobed";
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, claim(false));
  EXPECT_EQ(Ids(got), (std::vector<int64_t>{next}));
}

// An ordered claim of the keys' heads from the cursor (ClaimPart::key_heads)
// visits a key with a floor without a descent to its head and reads it from
// the floor: behind a held snapshot the head is every acked entry of the key.
// Without the floor the read of the key walks them.
TEST_F(PgStoreTest, AnOrderedReadOfTheKeysHeadsReadsAKeyWithAFloorFromThere) {
  MakeQueue("q", 1, absl::Seconds(60), /*ordered=*/true);
  constexpr int kAcked = 20000;  // about 100 pages of items_key
  ASSERT_OK(store_->EnqueueBatch("q", std::vector<NewItem>(kAcked + 2, Keyed("a"))));
  ASSERT_OK_AND_ASSIGN(EnqueueResult c, store_->Enqueue("q", Keyed("c")));
  const int64_t first = schema_.QInt("SELECT min(id) FROM {schema}.items WHERE key = 'a'");
  const int64_t claimed = first + kAcked, next = claimed + 1;
  pqxx::connection holder_conn(schema_.dsn());
  pqxx::transaction<pqxx::repeatable_read> holder(holder_conn);
  holder.exec("SELECT 1");
  schema_.Q(absl::StrCat("DELETE FROM {schema}.items WHERE key = 'a' AND id <= ", claimed));
  // On from the cursor at c (in flight), the keys' heads.
  auto claim = [&](std::vector<std::pair<std::string, int64_t>> floors) {
    return ClaimCountingKeyEntries([&](ClaimRequest& req) {
      req.ordered = true;
      req.in_flight = {{0, c.id}};
      req.parts[0].after = req.parts[0].cursor = ItemKey{0, c.id};
      req.parts[0].behind = false;
      req.parts[0].key_heads = true;
      req.parts[0].key_floors = floors;
    });
  };
  const auto [got, read] = claim({{"a", claimed}, {"b", 1}});
  EXPECT_EQ(got, (std::vector<int64_t>{next}));
  EXPECT_LT(read.entries, 20) << "the read of the keys' heads walked a key's acked entries";
  EXPECT_LT(read.pages, kAcked / 400) << "the read of the keys' heads passed them in the index";
  const auto [walked, read_without] = claim({});
  EXPECT_EQ(walked, (std::vector<int64_t>{next}));
  EXPECT_GE(read_without.entries, kAcked) << "the count did not see a walk of the acked entries";
  EXPECT_GE(read_without.pages, kAcked / 400) << "nor the pages of one";
  holder.abort();
}

// The same bound in a fair claim of an ordered queue: a key read on from its
// cursor (fair_items.sql) is probed only down to that cursor, the last item
// of the key the session served, so the probe does not walk the acked
// entries a held snapshot keeps below it. The control is a cursor below
// them: the key's read itself then walks them.
TEST_F(PgStoreTest, AFairOrderedKeyReadOnFromItsCursorIsProbedOnlyDownToIt) {
  MakeQueue("q", 1, absl::Seconds(60), /*ordered=*/true);
  constexpr int kAcked = 20000;  // about 100 pages of items_key
  ASSERT_OK(store_->EnqueueBatch("q", std::vector<NewItem>(kAcked + 2, Keyed("a"))));
  const int64_t first = schema_.QInt("SELECT min(id) FROM {schema}.items WHERE key = 'a'");
  const int64_t served = first + kAcked, next = served + 1;
  pqxx::connection holder_conn(schema_.dsn());
  pqxx::transaction<pqxx::repeatable_read> holder(holder_conn);
  holder.exec("SELECT 1");
  schema_.Q(absl::StrCat("DELETE FROM {schema}.items WHERE key = 'a' AND id <= ", served));
  // A fair claim with key a's cursor at `from`.
  auto claim = [&](int64_t from) {
    return ClaimCountingKeyEntries([&](ClaimRequest& req) {
      req.ordered = true;
      req.fair = true;
      req.parts[0].behind = false;
      req.parts[0].key_cursors = {{"a", from}};
    });
  };
  const auto [got, read] = claim(served);
  EXPECT_EQ(got, (std::vector<int64_t>{next}));
  EXPECT_LT(read.entries, 20) << "the probe walked the key's acked entries";
  EXPECT_LT(read.pages, kAcked / 400) << "the probe passed the key's acked entries in the index";
  const auto [walked, read_from_below] = claim(first - 1);
  EXPECT_EQ(walked, (std::vector<int64_t>{next}));
  EXPECT_GE(read_from_below.entries, kAcked) << "the count did not see a walk of the acked entries";
  EXPECT_GE(read_from_below.pages, kAcked / 400) << "nor the pages of one";
  holder.abort();
}

// A vacuum of items or part_claims never truncates them (migration 23): it
// would wait up to 5 s for an exclusive lock some statement nearly always
// holds, and hold it, when it got it, in front of every claim, ack and COPY.
// The emptied pages stay for the next rows.
TEST_F(PgStoreTest, VacuumLeavesTheQueueTablesEmptiedPagesInPlace) {
  MakeQueue("q", 4);
  ASSERT_OK(store_->EnqueueBatch("q", std::vector<NewItem>(5000, Payload("x"))));
  for (const char* table : {"items", "part_claims"}) {
    SCOPED_TRACE(table);
    EXPECT_EQ(schema_.QInt(absl::StrCat("SELECT count(*) FROM pg_class WHERE oid = '{schema}.",
                                        table,
                                        "'::regclass AND 'vacuum_truncate=false' = "
                                        "ANY(reloptions)")),
              1);
  }
  auto pages = [&] {
    return schema_.QInt(
        "SELECT pg_relation_size('{schema}.items') / current_setting('block_size')::int");
  };
  const int64_t before = pages();
  ASSERT_GT(before, 10);
  schema_.Q("DELETE FROM {schema}.items");
  // Vacuum removes the deleted rows only once no transaction in the database
  // can still see them (on a shared test server, other tests' may), so it
  // runs until it reports no dead row left: every page is empty then.
  EXPECT_TRUE(WaitUntil([&] {
    schema_.Q("VACUUM {schema}.items");
    return schema_.QInt("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = "
                        "'{schema}.items'::regclass") == 0;
  })) << "vacuum never removed the deleted rows";
  EXPECT_EQ(pages(), before) << "vacuum truncated items";
  // Without the setting a vacuum hands the empty pages back: the check above
  // sees what migration 23 changed, not a vacuum that had nothing to do.
  schema_.Q("ALTER TABLE {schema}.items RESET (vacuum_truncate)");
  EXPECT_TRUE(WaitUntil([&] {
    schema_.Q("VACUUM {schema}.items");
    return pages() == 0;
  })) << "items kept " << pages() << " pages without the setting";
}

// What a VacuumQueueTables call did to items (nullopt: items was not due).
std::optional<TableVacuum::Outcome> ItemsOutcome(const std::vector<TableVacuum>& round) {
  for (const TableVacuum& v : round) {
    if (v.table == "items") return v.outcome;
  }
  return std::nullopt;
}

// Issue 27: the table keeper's store half. Items past the table's own
// threshold (migration 10: 10,000 dead rows) are vacuumed at once, not at
// autovacuum's next visit; below it nothing runs; while one snapshot holds
// the horizon the table is vacuumed once and then left alone; a role that
// may not vacuum the table is told so.
TEST_F(PgStoreTest, VacuumQueueTablesVacuumsItemsPastTheirThresholdAndNotWhileASnapshotHoldsIt) {
  MakeQueue("q", 4);
  // Autovacuum stays away, so every vacuum counted is this test's.
  schema_.Q("ALTER TABLE {schema}.items SET (autovacuum_enabled = false)");
  auto stat = [&](const char* column) {
    return schema_.QInt(absl::StrCat("SELECT ", column,
                                     " FROM pg_stat_user_tables WHERE relid = "
                                     "'{schema}.items'::regclass"));
  };
  auto dead = [&] { return stat("n_dead_tup"); };
  auto vacuums = [&] { return stat("vacuum_count"); };
  auto kill = [&](int n) {
    ASSERT_OK(store_->EnqueueBatch("q", std::vector<NewItem>(n, Payload("x"))));
    schema_.Q("DELETE FROM {schema}.items");
  };

  // Under the threshold: nothing to do.
  kill(500);
  ASSERT_TRUE(WaitUntil([&] { return dead() >= 500; }));
  ASSERT_OK_AND_ASSIGN(std::vector<TableVacuum> round, store_->VacuumQueueTables());
  EXPECT_EQ(ItemsOutcome(round), std::nullopt);
  EXPECT_EQ(vacuums(), 0);

  // Past it: vacuumed now, and the dead rows are gone.
  kill(12000);
  ASSERT_TRUE(WaitUntil([&] { return dead() >= 10000; }));
  ASSERT_OK_AND_ASSIGN(round, store_->VacuumQueueTables());
  ASSERT_EQ(ItemsOutcome(round), TableVacuum::Outcome::kVacuumed);
  EXPECT_EQ(vacuums(), 1);
  for (const TableVacuum& v : round) {
    if (v.table == "items") EXPECT_GE(v.dead_rows, 10000);
  }
  // Other tests' snapshots on a shared server may keep some rows a while.
  EXPECT_TRUE(WaitUntil([&] {
    auto r = store_->VacuumQueueTables();
    return r.ok() && dead() < 10000;
  }));

  // A snapshot held open: the rows that die now cannot be removed. One
  // vacuum may still run (the horizon moved since the last), then the table
  // is skipped for as long as the same snapshot is the oldest.
  pqxx::connection holder_conn(schema_.dsn());
  auto holder = std::make_unique<pqxx::transaction<pqxx::repeatable_read>>(holder_conn);
  holder->exec("SELECT 1");
  kill(12000);
  ASSERT_TRUE(WaitUntil([&] { return dead() >= 10000; }));
  std::optional<TableVacuum::Outcome> outcome;
  int64_t before = 0;
  EXPECT_TRUE(WaitUntil([&] {
    before = vacuums();
    auto r = store_->VacuumQueueTables();
    if (!r.ok()) return false;
    outcome = ItemsOutcome(*r);
    return outcome == TableVacuum::Outcome::kHorizonHeld;
  })) << "the table was never left alone while the snapshot was held";
  EXPECT_EQ(vacuums(), before) << "a vacuum ran for a table it reported as held";
  EXPECT_GE(dead(), 10000) << "the held snapshot let vacuum remove the rows";

  // The snapshot ends: the next call vacuums, and the rows go.
  holder->abort();
  holder.reset();
  EXPECT_TRUE(WaitUntil([&] {
    auto r = store_->VacuumQueueTables();
    return r.ok() && dead() < 10000;
  })) << "the dead rows stayed after the snapshot ended";

  // A role that owns neither the table nor the database may not vacuum it.
  const std::string role = absl::StrCat("partq_nonowner_", absl::Uniform<uint32_t>(absl::BitGen()));
  schema_.Q(absl::StrCat("CREATE ROLE ", role, " LOGIN"));
  auto drop_role = absl::MakeCleanup([&] {
    schema_.Q(absl::StrCat("DROP OWNED BY ", role));
    schema_.Q(absl::StrCat("DROP ROLE ", role));
  });
  schema_.Q(absl::StrCat("GRANT USAGE ON SCHEMA {schema} TO ", role));
  kill(12000);
  ASSERT_TRUE(WaitUntil([&] { return dead() >= 10000; }));
  PgOptions other = schema_.options();
  other.dsn = absl::StrCat(other.dsn, " user=", role);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> stranger, ConnectPg(other));
  const int64_t vacuums_before = vacuums();
  ASSERT_OK_AND_ASSIGN(round, stranger->VacuumQueueTables());
  EXPECT_EQ(ItemsOutcome(round), TableVacuum::Outcome::kDenied);
  EXPECT_EQ(vacuums(), vacuums_before);
}

// Issue 47: vacuum does not truncate a queue's table as it goes (migration
// 23), so a table that a held snapshot or a backlog grew kept its peak size.
// After a vacuum, VacuumQueueTables vacuums again with TRUNCATE a table many
// times the size its live rows and its churn need (the churn: the more dead
// rows of its last two vacuums; a row's size: its live rows'); a table whose
// dead rows filled it, as a queue's fill it between vacuums, is left alone,
// and so is every table at a store's first vacuum of it.
TEST_F(PgStoreTest, AVacuumHandsBackTheEmptyPagesOfATableABacklogGrew) {
  MakeQueue("q", 4);
  schema_.Q("ALTER TABLE {schema}.items SET (autovacuum_enabled = false)");
  auto bytes = [&] { return schema_.QInt("SELECT pg_relation_size('{schema}.items')"); };
  auto dead = [&] {
    return schema_.QInt(
        "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = '{schema}.items'::regclass");
  };
  // `n` items of 100 bytes come and go; `live` of them stay.
  auto come_and_go = [&](int n, int live = 0) {
    schema_.Q(absl::StrCat(
        "INSERT INTO {schema}.items (id, queue, part, payload) "
        "SELECT nextval('{schema}.items_id_seq'), 'q', g % 4, "
        "repeat(CASE WHEN g <= ",
        live, " THEN 'y' ELSE 'x' END, 100)::bytea FROM generate_series(1, ", n, ") g"));
    schema_.Q("DELETE FROM {schema}.items WHERE payload = repeat('x', 100)::bytea");
    ASSERT_TRUE(WaitUntil([&] { return dead() >= n - live; }));
  };
  // Rounds until the dead rows are gone (another test's snapshot on a
  // shared server may keep them a while); the vacuums of items in them. Their
  // index rebuilds also go to `rebuilt`.
  std::set<std::string> rebuilt;
  auto vacuum = [&] {
    std::vector<TableVacuum> vacuums;
    EXPECT_TRUE(WaitUntil([&] {
      auto r = store_->VacuumQueueTables();
      if (!r.ok()) return false;
      for (const TableVacuum& v : *r) {
        EXPECT_OK(v.shrink_error);
        EXPECT_OK(v.rebuild_error);
        if (v.table == "items" && v.outcome == TableVacuum::Outcome::kVacuumed) {
          vacuums.push_back(v);
          for (const TableVacuum::Rebuild& b : v.rebuilt) rebuilt.insert(b.index);
        }
      }
      return !vacuums.empty() && dead() < 10000;
    }));
    return vacuums;
  };

  // A backlog of 400,000 drained, 100 items left at the table's start. The
  // store's first vacuum of the table judges nothing (one count of dead rows).
  come_and_go(400000, 100);
  const int64_t peak = bytes();
  ASSERT_GE(peak, 16 << 20);
  for (const TableVacuum& v : vacuum()) {
    EXPECT_FALSE(v.shrunk.has_value()) << "shrunk to " << v.shrunk->bytes_after;
  }
  EXPECT_EQ(bytes(), peak);
  EXPECT_TRUE(rebuilt.empty()) << "rebuilt " << *rebuilt.begin() << " at the first vacuum";

  // Then 20,000 come and go, twice: a twentieth of the churn before, so the
  // table is many times what it needs, and once the backlog's vacuum is the
  // older of the last two, the keeper hands its empty pages back. It rebuilds
  // the grown indexes too, though the table has no statistics (never
  // analyzed, as a queue's table so often has none): their entries' widths
  // come from its live rows.
  // (Another test's snapshot on a shared server can hold a vacuum back,
  // and each vacuum counts; a rebuild can give up on one: a few rounds.)
  // The first vacuum after the backlog's still counts its churn (the more of
  // the last two): the table's size is what that needs, and it is left alone.
  std::optional<TableVacuum::Shrink> shrunk;
  int64_t bytes_after_shrink = 0;
  for (int round = 0; round < 5 && !(shrunk.has_value() && rebuilt.count("items_ready"));
       ++round) {
    come_and_go(20000);
    const std::vector<TableVacuum> vacuums = vacuum();
    if (round == 0 && !vacuums.empty()) {
      EXPECT_FALSE(vacuums[0].shrunk.has_value()) << "shrunk at the backlog's churn";
      EXPECT_TRUE(vacuums[0].rebuilt.empty()) << "rebuilt at the backlog's churn";
    }
    for (const TableVacuum& v : vacuums) {
      if (v.shrunk.has_value() && !shrunk.has_value()) {
        shrunk = v.shrunk;
        bytes_after_shrink = bytes();
      }
    }
  }
  ASSERT_TRUE(shrunk.has_value()) << "items was not shrunk from " << bytes() << " bytes";
  EXPECT_EQ(shrunk->bytes_before, peak);
  EXPECT_LT(shrunk->bytes_after, peak / 4);
  EXPECT_EQ(bytes_after_shrink, shrunk->bytes_after);
  EXPECT_LT(bytes(), peak / 4);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM pg_stats WHERE schemaname = '" + schema_.name() +
                         "' AND tablename = 'items'"),
            0);
  EXPECT_TRUE(rebuilt.count("items_ready")) << "items_ready was not rebuilt";
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE queue = 'q' AND part >= 0"),
            100);
  ASSERT_OK(store_->Enqueue("q", Payload("after")).status());
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE queue = 'q' AND part >= 0"),
            101);
}

// Issue 47: a btree never gives pages back, so an index that grew to hold
// a held snapshot's dead entries stayed that size after the vacuum emptied
// it. After a vacuum, VacuumQueueTables rebuilds (REINDEX CONCURRENTLY) the
// indexes of the table that are many times the size their entries need.
// A snapshot older than the rebuild makes it give up within its lock
// timeout, not wait on it, and drop the index it had begun; what a rebuild
// that died left is dropped by the next vacuum's.
TEST_F(PgStoreTest, AVacuumRebuildsAnIndexABacklogOrAHeldSnapshotLeftBloated) {
  MakeQueue("q", 4);
  schema_.Q("ALTER TABLE {schema}.items SET (autovacuum_enabled = false)");
  auto size = [&] { return schema_.QInt("SELECT pg_relation_size('{schema}.items_ready')"); };
  auto invalid = [&] {
    return schema_.QInt(
        "SELECT count(*) FROM pg_index WHERE indrelid = '{schema}.items'::regclass "
        "AND NOT indisvalid");
  };
  auto dead = [&] {
    return schema_.QInt(
        "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = '{schema}.items'::regclass");
  };
  // `n` items come and go (400,000: items_ready grows past 16 MB and
  // stays), with statistics taken while they were there.
  auto come_and_go = [&](int n) {
    schema_.Q(absl::StrCat(
        "INSERT INTO {schema}.items (id, queue, part, payload) "
        "SELECT nextval('{schema}.items_id_seq'), 'q', g % 4, '' FROM generate_series(1, ",
        n, ") g"));
    schema_.Q("ANALYZE {schema}.items");
    schema_.Q("DELETE FROM {schema}.items WHERE payload = ''");
  };
  // Rounds until one vacuums items; that round's rebuilds.
  auto vacuum = [&]() -> std::optional<std::vector<TableVacuum::Rebuild>> {
    std::optional<std::vector<TableVacuum::Rebuild>> out;
    EXPECT_TRUE(WaitUntil([&] {
      if (dead() < 10000) return false;
      auto r = store_->VacuumQueueTables();
      if (!r.ok()) return false;
      for (const TableVacuum& v : *r) {
        EXPECT_OK(v.rebuild_error);
        if (v.table == "items" && v.outcome == TableVacuum::Outcome::kVacuumed) out = v.rebuilt;
      }
      return out.has_value();
    }));
    return out;
  };
  // A backlog drained: 400,000 items come and go, and the index it grew is
  // what the churn the vacuum counted needs, so it stays.
  auto backlog = [&] {
    come_and_go(400000);
    auto rebuilt = vacuum();
    ASSERT_TRUE(rebuilt.has_value());
    EXPECT_TRUE(rebuilt->empty()) << "rebuilt " << (*rebuilt)[0].index << " for the backlog's churn";
  };
  // Then 12,000 come and go a round until items_ready is rebuilt (none is
  // while the backlog's vacuum is one of the table's last two; another test's
  // snapshot on a shared server can make a rebuild give up, and then each try
  // needs a vacuum again).
  auto rebuild = [&]() -> std::optional<TableVacuum::Rebuild> {
    for (int i = 0; i < 6; ++i) {
      come_and_go(12000);
      auto rebuilt = vacuum();
      if (!rebuilt.has_value()) return std::nullopt;
      for (const TableVacuum::Rebuild& b : *rebuilt) {
        if (b.index == "items_ready") return b;
      }
    }
    return std::nullopt;
  };

  backlog();
  std::optional<TableVacuum::Rebuild> ready = rebuild();
  ASSERT_TRUE(ready.has_value()) << "items_ready was never rebuilt";
  EXPECT_GE(ready->bytes_before, 16 << 20);
  EXPECT_LT(ready->bytes_after, 1 << 20);
  EXPECT_EQ(size(), ready->bytes_after);
  EXPECT_EQ(invalid(), 0);
  ASSERT_OK(store_->Enqueue("q", Payload("after")).status());
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE queue = 'q' AND part >= 0"), 1);

  // A snapshot taken after the rows died, before the rebuild: the vacuum
  // removes them, the rebuild gives up on the snapshot and drops the index
  // it began (every insert would write it meanwhile).
  backlog();
  come_and_go(12000);
  ASSERT_TRUE(vacuum().has_value());  // the backlog's vacuum is still one of the last two
  come_and_go(12000);
  pqxx::connection holder_conn(schema_.dsn());
  auto holder = std::make_unique<pqxx::transaction<pqxx::repeatable_read>>(holder_conn);
  holder->exec("SELECT 1");
  const int64_t bloated = size();
  ASSERT_GE(bloated, 16 << 20);
  const absl::Time start = absl::Now();
  auto gave_up = vacuum();
  ASSERT_TRUE(gave_up.has_value());
  EXPECT_TRUE(gave_up->empty());
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_EQ(size(), bloated);
  EXPECT_EQ(invalid(), 0) << "the rebuild that gave up left its index";
  holder->abort();
  holder.reset();
  ready = rebuild();
  ASSERT_TRUE(ready.has_value()) << "items_ready was not rebuilt after the snapshot ended";
  EXPECT_LT(size(), 1 << 20);

  // What a rebuild that died leaves (an invalid NAME_ccnew) goes with the
  // next vacuum, though no index is bloated.
  pqxx::connection ddl(schema_.dsn());
  pqxx::nontransaction n(ddl);
  n.exec(
      WithSchema("INSERT INTO {schema}.items (id, queue, part, payload) SELECT "
                 "nextval('{schema}.items_id_seq'), 'q', 0, 'twice' FROM generate_series(1, 2)",
                 schema_.name()));
  EXPECT_THROW(n.exec(WithSchema("CREATE UNIQUE INDEX CONCURRENTLY items_ready_ccnew "
                                 "ON {schema}.items (payload)",
                                 schema_.name())),
               pqxx::sql_error);
  ASSERT_EQ(invalid(), 1);
  come_and_go(12000);
  auto after = vacuum();
  ASSERT_TRUE(after.has_value());
  EXPECT_TRUE(after->empty());
  EXPECT_EQ(invalid(), 0) << "a dead rebuild's index stayed";
}

// A VACUUM of another table (an autovacuum of a handler's big table, 20 s and
// more) shows its xmin in pg_stat_activity, but PostgreSQL leaves it out of
// every other vacuum's horizon: the keeper must not take it for a held
// snapshot and leave items alone while it runs (issue 27's soak: items' dead
// rows rose to 766k during one such vacuum before this).
TEST_F(PgStoreTest, VacuumQueueTablesIsNotHeldBackByAVacuumOfAnotherTable) {
  MakeQueue("q", 4);
  schema_.Q("ALTER TABLE {schema}.items SET (autovacuum_enabled = false)");
  schema_.Q("CREATE TABLE {schema}.big WITH (autovacuum_enabled = false) AS "
            "SELECT g FROM generate_series(1, 40000) g");
  schema_.Q("DELETE FROM {schema}.big");
  auto dead = [&] {
    return schema_.QInt(
        "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = '{schema}.items'::regclass");
  };
  auto kill = [&] {
    ASSERT_OK(store_->EnqueueBatch("q", std::vector<NewItem>(12000, Payload("x"))));
    schema_.Q("DELETE FROM {schema}.items");
    ASSERT_TRUE(WaitUntil([&] { return dead() >= 10000; }));
  };
  // A vacuum slowed to a crawl (a 100 ms sleep per page), cancelled at the end.
  pqxx::connection slow_conn(schema_.dsn());
  const int slow_pid = slow_conn.backendpid();
  std::thread slow([&] {
    try {
      pqxx::nontransaction tx(slow_conn);
      tx.exec("SET vacuum_cost_delay = 100");
      tx.exec("SET vacuum_cost_limit = 1");
      tx.exec(absl::StrCat("VACUUM \"", schema_.name(), "\".big"));
    } catch (const std::exception&) {
      // cancelled
    }
  });
  auto cancel = absl::MakeCleanup([&] {
    schema_.Q(absl::StrCat("SELECT pg_cancel_backend(", slow_pid, ")"));
    slow.join();
  });
  const std::string running = absl::StrCat(
      "SELECT count(*) FROM pg_stat_progress_vacuum p JOIN pg_stat_activity a USING (pid) "
      "WHERE pid = ",
      slow_pid, " AND a.backend_xmin IS NOT NULL");
  ASSERT_TRUE(WaitUntil([&] { return schema_.QInt(running) == 1; }))
      << "the slow vacuum never showed with an xmin";

  kill();
  ASSERT_OK_AND_ASSIGN(std::vector<TableVacuum> round, store_->VacuumQueueTables());
  ASSERT_EQ(ItemsOutcome(round), TableVacuum::Outcome::kVacuumed);
  // Rows that died after that vacuum, while the slow one still runs: the
  // keeper vacuums again and they go.
  kill();
  EXPECT_TRUE(WaitUntil([&] {
    auto r = store_->VacuumQueueTables();
    return r.ok() && dead() < 10000;
  })) << "items was left alone while another table's vacuum ran";
  // Nor does `partq status` name it as what holds the horizon.
  ASSERT_OK_AND_ASSIGN(QueueStatus st, store_->Status("q"));
  const std::string slow_who = absl::StrCat("pid ", slow_pid, " ");
  EXPECT_TRUE(!st.horizon || !absl::StrContains(st.horizon->who, slow_who)) << st.horizon->who;
  EXPECT_EQ(schema_.QInt(running), 1) << "the slow vacuum ended first: the test proved nothing";
}

// pg/sql/NAME.sql is a statement PgStore runs, or a fragment of statements
// (pg/sql/fragments, filled into their {holes}); each begins with the
// comment that says why it looks as it does. A file no statement reads
// would be a reader's trap: SQL that looks live and is not. A hole left
// unfilled, or a header that reached the server, would be a statement that
// is not what its file says.
TEST(PgStoreStatements, EveryStatementFileIsReadAndEveryHoleFilled) {
  std::vector<std::pair<std::string, std::string>> statements;  // name, text
  // Both forms: for a role that deletes itself, and for a confined worker.
  for (bool confined : {false, true}) {
    for (const pg_internal::Statement& st : pg_internal::PreparedStatements("s", confined)) {
      statements.emplace_back(st.name, st.sql);
    }
    for (const auto& [name, sql] : pg_internal::PipelinedStatements("s", confined)) {
      statements.emplace_back(name, sql);
    }
  }
  statements.emplace_back("enqueue_grouped", pg_internal::EnqueueGroupedSql("s"));
  const std::vector<std::string> read_list = pg_internal::SqlFilesRead();
  std::set<std::string> read(read_list.begin(), read_list.end());
  int files = 0;
  for (const EmbeddedSqlFile& f : EmbeddedSqlFiles()) {
    absl::string_view path = f.path;
    if (!absl::ConsumePrefix(&path, "sql/")) continue;
    ++files;
    SCOPED_TRACE(f.path);
    ASSERT_TRUE(absl::ConsumeSuffix(&path, ".sql"));
    EXPECT_EQ(read.count(std::string(path)), 1u) << "no statement reads it";
    EXPECT_TRUE(absl::StartsWith(f.text, "-- "));
  }
  EXPECT_GE(files, 85);
  for (const auto& [name, text] : statements) {
    SCOPED_TRACE(name);
    for (size_t open = text.find('{'); open != std::string::npos; open = text.find('{', open + 1)) {
      const size_t close = text.find('}', open);
      const std::string inside = text.substr(open + 1, close - open - 1);
      EXPECT_TRUE(inside.empty() || !absl::ascii_isalpha(inside[0])) << "{" << inside << "}";
    }
    EXPECT_FALSE(absl::StartsWith(text, "--")) << text;
    EXPECT_FALSE(absl::StrContains(text, "\n-- ")) << "a fragment's header reached the server";
  }
}

TEST(PgStoreMigrate, ConcurrentMigrationsFromEightConnectionsApplyOnce) {
  PgOptions options;
  options.dsn = testing::TestDsn();
  options.schema = absl::StrCat("m_", absl::Uniform<uint64_t>(absl::BitGen()));
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(8);
  std::atomic<int> ready{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<std::unique_ptr<Store>> store = ConnectPg(options);
      if (!store.ok()) {
        results[i] = store.status();
        return;
      }
      ++ready;
      while (ready.load() < 8) std::this_thread::yield();
      results[i] = (*store)->Migrate();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(results[i].ok()) << i << ": " << results[i];
  EXPECT_EQ(testing::QueryInt(options.dsn, absl::StrCat("SELECT count(*) FROM ", options.schema,
                                                        ".schema_migrations")),
            static_cast<int64_t>(Migrations().size()));
  testing::Query(options.dsn, absl::StrCat("DROP SCHEMA ", options.schema, " CASCADE"));
}

TEST(PgStoreMigrate, MissingSchemaTellsTheUserToMigrate) {
  PgOptions options;
  options.dsn = testing::TestDsn();
  options.schema = "never_migrated_here";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, ConnectPg(options));
  absl::Status st = store->CheckSchema();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "partq migrate")) << st;
  absl::StatusOr<QueueConfig> q = store->GetQueue("jobs");
  EXPECT_EQ(q.status().code(), absl::StatusCode::kFailedPrecondition) << q.status();
  // The command as the user must type it for this schema.
  EXPECT_TRUE(
      absl::StrContains(q.status().message(), "run `partq migrate --schema never_migrated_here`"))
      << q.status();
  absl::StatusOr<EnqueueResult> e = store->Enqueue("jobs", Payload("x"));
  EXPECT_EQ(e.status().code(), absl::StatusCode::kFailedPrecondition) << e.status();
}

TEST_F(PgStoreTest, NewerSchemaIsRefused) {
  schema_.Q(absl::StrCat("INSERT INTO {schema}.schema_migrations (version, description) VALUES (",
                         kSchemaVersion + 1, ", 'future')"));
  absl::Status st = store_->CheckSchema();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "upgrade partq")) << st;
  st = store_->Migrate();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "newer than this partq")) << st;
}

TEST(PgStoreMigrate, UpgradesAVersion2SchemaInPlace) {
  PgOptions options;
  options.dsn = testing::TestDsn();
  options.schema = absl::StrCat("m_", absl::Uniform<uint64_t>(absl::BitGen()));
  const std::string dsn = options.dsn;
  auto q = [&](const std::string& sql) {
    return testing::Query(dsn, WithSchema(sql, options.schema));
  };
  // Version 2 as a binary of that version left it, with a queue and a dead item.
  q("CREATE SCHEMA {schema}");
  q("CREATE TABLE {schema}.schema_migrations (version int PRIMARY KEY, description text NOT "
    "NULL, applied_at timestamptz NOT NULL DEFAULT now())");
  for (const Migration& m : Migrations()) {
    if (m.version > 2) continue;
    q(m.sql);
    q(absl::StrCat("INSERT INTO {schema}.schema_migrations (version, description) VALUES (",
                   m.version, ", 'v", m.version, "')"));
  }
  q("INSERT INTO {schema}.queues (name, parts) VALUES ('old', 2)");
  q("INSERT INTO {schema}.dead_items (id, queue, part, priority, attempts, enqueued_at, "
    "last_error, payload) VALUES (7, 'old', 1, 0, 3, now(), 'gone', 'x')");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, ConnectPg(options));
  EXPECT_EQ(store->CheckSchema().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_OK(store->Migrate());
  ASSERT_OK(store->CheckSchema());
  EXPECT_EQ(testing::QueryInt(dsn, WithSchema("SELECT max(version) FROM {schema}.schema_migrations",
                                              options.schema)),
            kSchemaVersion);
  // The old rows are still there, with the new columns empty.
  ASSERT_OK_AND_ASSIGN(QueueConfig old, store->GetQueue("old"));
  EXPECT_EQ(old.parts, 2);
  EXPECT_FALSE(old.dlq_topic.has_value());
  EXPECT_EQ(testing::QueryInt(dsn, WithSchema("SELECT count(*) FROM {schema}.dead_items WHERE "
                                              "id = 7 AND origin_topic IS NULL AND headers IS "
                                              "NULL AND last_error = 'gone'",
                                              options.schema)),
            1);
  ASSERT_OK(store->SetDeadLetterTopic("old", std::string("old.dlq")));
  ASSERT_OK_AND_ASSIGN(old, store->GetQueue("old"));
  EXPECT_EQ(old.dlq_topic, std::optional<std::string>("old.dlq"));
  q("DROP SCHEMA {schema} CASCADE");
}

TEST_F(PgStoreTest, PartForIdInSqlMatchesPartitioner) {
  auto rows = schema_.Q(
      "SELECT i, {schema}.part_for_id(i, 4096), {schema}.part_for_id(i, 7) FROM "
      "(SELECT generate_series(1, 2000)::bigint AS i UNION ALL VALUES (0), (-1), (-12345), "
      "(9223372036854775807), (-9223372036854775808)) s");
  ASSERT_EQ(rows.size(), 2005u);
  for (const auto& r : rows) {
    const int64_t id = std::stoll(*r[0]);
    EXPECT_EQ(std::stoi(*r[1]), PartForId(id, 4096)) << id;
    EXPECT_EQ(std::stoi(*r[2]), PartForId(id, 7)) << id;
  }
}

// --- queues -------------------------------------------------------------------------

// What DeleteQueue leaves in the tables (a refusal: everything; a delete: no
// row of the queue), and what its errors say, with the command that fixes
// them.
TEST_F(PgStoreTest, DeleteQueueRemovesEveryRowOfTheQueueAndItsErrorsNameTheFix) {
  MakeQueue("other", 1);
  ASSERT_OK(store_->Enqueue("other", Payload("stays")));
  store_testing::MakeWorkOfEveryKind(*store_, "orders");
  absl::StatusOr<DeletedQueue> refused = store_->DeleteQueue("orders", QueueContents::kRefuse);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            absl::StrCat("queue \"orders\" still holds 4 items (2 ready, 1 delayed, 1 in flight) "
                         "and 1 dead item; nothing was deleted. To delete them with the queue: "
                         "partq queue delete orders --force --schema ",
                         schema_.name()));
  EXPECT_EQ(Count("items", "queue = 'orders'"), 4);
  EXPECT_EQ(Count("dead_items", "queue = 'orders'"), 1);
  EXPECT_EQ(Count("results", "queue = 'orders'"), 1);
  EXPECT_EQ(Count("part_claims", "queue = 'orders'"), 1);
  EXPECT_EQ(Count("sessions"), 1);
  EXPECT_EQ(Count("session_parts"), 1);
  EXPECT_GT(Count("group_changes", "queue = 'orders'"), 0);

  ASSERT_OK(store_->DeleteQueue("orders", QueueContents::kDelete));
  // group_changes too: the cascade to session_parts logs its deletions
  // there, and nothing else would remove them.
  for (const char* table : {"items", "dead_items", "results", "part_claims", "group_changes"}) {
    EXPECT_EQ(Count(table, "queue = 'orders'"), 0) << table;
  }
  EXPECT_EQ(Count("sessions"), 0);
  EXPECT_EQ(Count("session_parts"), 0);
  EXPECT_EQ(Count("items", "queue = 'other'"), 1);
  // Test schemas are not the default one, so the hint names it.
  absl::Status st = store_->GetQueue("orders").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(st.message(), absl::StrCat("unknown queue \"orders\" in schema \"", schema_.name(),
                                       "\" (create it with: partq queue create orders --parts N "
                                       "--schema ",
                                       schema_.name(), ")"));

  // Dead items alone are named as such.
  MakeQueue("dead", 1);
  ASSERT_OK(store_->Enqueue("dead", Payload("x")));
  Member m = JoinWith(*store_, "dead", kAllParts);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> claimed, store_->Claim(ClaimAll("dead", m)));
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_OK(store_->Finish(FinishOf("dead", m, claimed), [](Tx&, absl::Span<const Item> items) {
    return absl::StatusOr<std::vector<Outcome>>(
        std::vector<Outcome>{{items[0].id, items[0].part, Outcome::Kind::kDead}});
  }));
  st = store_->DeleteQueue("dead", QueueContents::kRefuse).status();
  EXPECT_TRUE(absl::StrContains(st.message(), "queue \"dead\" still holds 1 dead item; nothing"))
      << st;
  EXPECT_EQ(Count("dead_items", "queue = 'dead'"), 1);
}

// A batch claimed ahead runs in a transaction that began when it was claimed
// (COMMIT AND CHAIN), before its handler ran: its dead items and results
// carry when the handler had finished (`partq dead list`'s FAILED_AT, what
// `partq prune` ages), not when the batch was claimed.
TEST_F(PgStoreTest, ABatchClaimedAheadIsRecordedWhenItFinishedNotWhenItWasClaimed) {
  MakeQueue("q", 1);
  NewItem done = Payload("done");
  done.dedup_key = "d-1";
  ASSERT_OK(store_->EnqueueBatch("q", {Payload("first"), Payload("dead"), done}));
  Member m = JoinWith(*store_, "q", {0});
  ASSERT_OK_AND_ASSIGN(std::vector<Item> first, store_->Claim(ClaimAll("q", m, 1)));
  ASSERT_EQ(first.size(), 1u);
  ASSERT_OK_AND_ASSIGN(FinishResult r1,
                       store_->Finish(FinishClaimingAhead("q", m, first, 2), AckAll()));
  ASSERT_TRUE(r1.next_begun);
  ASSERT_EQ(r1.next.size(), 2u);
  absl::SleepFor(absl::Milliseconds(500));  // the handler runs
  const int64_t handled =
      schema_.QInt("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint");
  FinishBody body = [](Tx&, absl::Span<const Item> items) -> absl::StatusOr<std::vector<Outcome>> {
    std::vector<Outcome> out;
    for (const Item& i : items) {
      Outcome o{i.id, i.part};
      if (i.payload == "dead") {
        o.kind = Outcome::Kind::kDead;
        o.error = "boom";
      }
      out.push_back(o);
    }
    return out;
  };
  ASSERT_OK_AND_ASSIGN(FinishResult r2, store_->Finish(FinishOf("q", m, r1.next), body));
  ASSERT_EQ(r2.acked.size(), 1u);
  ASSERT_OK_AND_ASSIGN(std::vector<DeadItem> dead, store_->ListDead("q", 10));
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_GE(absl::ToUnixMicros(dead[0].failed_at), handled);
  EXPECT_GE(schema_.QInt("SELECT (extract(epoch FROM finished_at) * 1000000)::bigint "
                         "FROM {schema}.results WHERE dedup_key = 'd-1'"),
            handled);

  // The common ack (every item acked, no result: the pipelined statement)
  // records the same way.
  NewItem later = Payload("later");
  later.dedup_key = "d-2";
  ASSERT_OK(store_->EnqueueBatch("q", {Payload("again"), later}));
  ASSERT_OK_AND_ASSIGN(std::vector<Item> again, store_->Claim(ClaimAll("q", m, 1)));
  ASSERT_EQ(again.size(), 1u);
  ASSERT_OK_AND_ASSIGN(FinishResult r3,
                       store_->Finish(FinishClaimingAhead("q", m, again, 1), AckAll()));
  ASSERT_TRUE(r3.next_begun);
  ASSERT_EQ(r3.next.size(), 1u);
  absl::SleepFor(absl::Milliseconds(500));
  const int64_t handled_again =
      schema_.QInt("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint");
  ASSERT_OK_AND_ASSIGN(FinishResult r4, store_->Finish(FinishOf("q", m, r3.next), AckAll()));
  ASSERT_EQ(r4.acked.size(), 1u);
  EXPECT_GE(schema_.QInt("SELECT (extract(epoch FROM finished_at) * 1000000)::bigint "
                         "FROM {schema}.results WHERE dedup_key = 'd-2'"),
            handled_again);
}

// ClaimRequest::begin_after: the claim commits in its own transaction (a
// worker that dies in the handler still had its items claimed, and their
// attempt counts), and the next transaction is left begun for the Finish
// that acks them: one BEGIN less between an idle worker's claim and its
// handler. A claim that found nothing leaves no transaction open.
TEST_F(PgStoreTest, AClaimThatBeginsTheNextTransactionCommitsItselfFirst) {
  MakeQueue("q", 1);
  ASSERT_OK(store_->EnqueueBatch("q", {Payload("a"), Payload("b")}));
  Member m = JoinWith(*store_, "q", {0});
  ClaimRequest claim = ClaimAll("q", m, 10);
  claim.include_suspect = false;
  claim.begin_after = true;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(claim));
  ASSERT_EQ(items.size(), 2u);
  EXPECT_TRUE(store_->Begun());
  // Committed: another connection sees the claim's record of both.
  EXPECT_EQ(schema_.QInt("SELECT coalesce(sum(cardinality(ids)), 0) FROM {schema}.part_claims "
                         "WHERE queue = 'q'"),
            2);
  // The Finish runs in the transaction begun with the claim: it started
  // before the handler's time passed.
  absl::SleepFor(absl::Milliseconds(300));
  std::optional<std::string> began_ms_before;
  FinishBody body = [&](Tx& tx,
                        absl::Span<const Item> owned) -> absl::StatusOr<std::vector<Outcome>> {
    auto rows = tx.Exec("SELECT (extract(epoch FROM statement_timestamp() - now()) * 1000)::int");
    if (!rows.ok()) return rows.status();
    began_ms_before = (*rows)[0][0];
    std::vector<Outcome> out;
    for (const Item& i : owned) out.push_back({i.id, i.part});
    return out;
  };
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(FinishOf("q", m, items), body));
  EXPECT_EQ(r.acked.size(), 2u);
  ASSERT_TRUE(began_ms_before.has_value());
  EXPECT_GE(std::stoi(*began_ms_before), 300) << "the Finish began its own transaction";
  EXPECT_FALSE(store_->Begun());
  EXPECT_EQ(Count("items", "queue = 'q'"), 0);

  // Nothing to claim: no transaction left open.
  ASSERT_OK_AND_ASSIGN(std::vector<Item> none, store_->Claim(claim));
  EXPECT_TRUE(none.empty());
  EXPECT_FALSE(store_->Begun());

  // A begun transaction nobody finished is rolled back by the store's next
  // other call, which works as ever.
  ASSERT_OK(store_->EnqueueBatch("q", {Payload("c")}));
  ASSERT_OK_AND_ASSIGN(items, store_->Claim(claim));
  ASSERT_EQ(items.size(), 1u);
  ASSERT_TRUE(store_->Begun());
  ASSERT_OK(store_->Enqueue("q", Payload("d")).status());
  EXPECT_FALSE(store_->Begun());
  EXPECT_EQ(Count("items", "queue = 'q'"), 2);
}

// A deleted queue takes the bridge's stored offsets with it: the same name
// created again must not resume a topic where the old queue stopped (its
// items are gone). Another queue's offsets for the same topic stay.
TEST_F(PgStoreTest, DeleteQueueForgetsTheBridgesOffsetsIntoIt) {
  MakeQueue("q", 2);
  MakeQueue("other", 1);
  for (const char* queue : {"q", "other"}) {
    KafkaIngestRequest r;
    r.queue = queue;
    r.messages = {{"events", 0, 41, std::string("k"), "m41", std::nullopt}};
    r.offsets = {{"events", 0, std::nullopt, 42}};
    ASSERT_OK(bridge_->IngestKafka(r));
  }
  ASSERT_OK(store_->DeleteQueue("q", QueueContents::kDelete));
  MakeQueue("q", 2);
  auto offsets = bridge_->ReadKafkaOffsets("q", "events");
  ASSERT_OK(offsets);
  EXPECT_TRUE(offsets->empty());
  auto kept = bridge_->ReadKafkaOffsets("other", "events");
  ASSERT_OK(kept);
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_EQ((*kept)[0].next_offset, 42);
}

// The check and the delete are one transaction that keeps enqueues out: an
// enqueue still in progress when the delete starts is waited for and
// counted, so the queue is kept with its item.
TEST_F(PgStoreTest, DeleteQueueWaitsForAnEnqueueInProgressAndKeepsItsItem) {
  MakeQueue("q", 2);
  pqxx::connection conn(schema_.dsn());
  pqxx::work enqueue(conn);
  enqueue.exec(absl::StrCat("INSERT INTO \"", schema_.name(),
                            "\".items (queue, part, payload) VALUES ('q', 1, 'late')"));

  std::unique_ptr<Store> deleter = schema_.NewStore();
  absl::Status deleted;
  std::thread del([&] { deleted = deleter->DeleteQueue("q", QueueContents::kRefuse).status(); });
  const bool waits = WaitUntil([&] { return ItemsLockWaiters() == 1; });
  enqueue.commit();
  del.join();
  ASSERT_TRUE(waits) << "the delete waits for the enqueue";

  EXPECT_EQ(deleted.code(), absl::StatusCode::kFailedPrecondition) << deleted;
  EXPECT_TRUE(absl::StrContains(deleted.message(),
                                "still holds 1 item (1 ready, 0 delayed, 0 in "
                                "flight); nothing was deleted"))
      << deleted;
  EXPECT_OK(store_->GetQueue("q"));
  EXPECT_EQ(Count("items", "queue = 'q'"), 1);
}

// Regression: EnqueueBatch and IngestKafka read the queue row in their first
// statement and wrote items in a later one, so a DeleteQueue that committed
// in between left their items behind, in no queue (and a queue created later
// under that name would have found them). Here each writer starts while a
// delete waits for an earlier writer of items; they must end NotFound with
// nothing written.
TEST_F(PgStoreTest, BatchWritersRacingQueueDeleteLeaveNoItemsBehind) {
  MakeQueue("q", 4);
  MakeQueue("other", 1);
  auto waiters = [&] { return ItemsLockWaiters(); };

  // An enqueue into another queue, in progress: it holds items' ROW EXCLUSIVE lock.
  pqxx::connection conn(schema_.dsn());
  pqxx::work earlier(conn);
  earlier.exec(absl::StrCat("INSERT INTO \"", schema_.name(),
                            "\".items (queue, part, payload) VALUES ('other', 0, 'x')"));

  std::unique_ptr<Store> deleter = schema_.NewStore();
  absl::Status deleted;
  std::thread del([&] { deleted = deleter->DeleteQueue("q", QueueContents::kRefuse).status(); });
  ASSERT_TRUE(WaitUntil([&] { return waiters() == 1; })) << "the delete waits for the enqueue";

  std::unique_ptr<Store> copier = schema_.NewStore(), inserter = schema_.NewStore();
  std::unique_ptr<BridgeStore> ingester = schema_.NewBridgeStore();
  absl::Status copied, inserted, ingested;
  std::thread copy([&] {
    copied = copier->EnqueueBatch("q", {Payload("a"), Payload("b")}).status();
  });
  std::thread insert([&] {
    NewItem dedup = Payload("c");
    dedup.dedup_key = "c";
    inserted = inserter->EnqueueBatch("q", {dedup, Payload("d")}).status();
  });
  std::thread ingest([&] {
    KafkaIngestRequest r;
    r.queue = "q";
    r.messages = {{"events", 0, 0, std::string("k"), "e", std::nullopt}};
    r.offsets = {{"events", 0, std::nullopt, 1}};
    ingested = ingester->IngestKafka(r).status();
  });
  const bool all_wait = WaitUntil([&] { return waiters() == 4; });
  earlier.commit();
  del.join();
  copy.join();
  insert.join();
  ingest.join();
  ASSERT_TRUE(all_wait) << "each writer waits behind the delete";

  EXPECT_OK(deleted);
  EXPECT_EQ(copied.code(), absl::StatusCode::kNotFound) << copied;
  EXPECT_EQ(inserted.code(), absl::StatusCode::kNotFound) << inserted;
  EXPECT_EQ(ingested.code(), absl::StatusCode::kNotFound) << ingested;
  EXPECT_EQ(Count("items", "queue = 'q'"), 0);
  EXPECT_EQ(Count("items", "queue = 'other'"), 1);
  EXPECT_EQ(Count("kafka_offsets"), 0) << "the ingest's offsets rolled back with it";
}

TEST_F(PgStoreTest, SchemaNamesAreValidated) {
  for (const char* schema : {"Partq", "1abc", "a-b", "x\"; drop schema public;--", "pg_mine"}) {
    PgOptions o = schema_.options();
    o.schema = schema;
    EXPECT_EQ(ConnectPg(o).status().code(), absl::StatusCode::kInvalidArgument) << schema;
  }
  EXPECT_OK(ValidateSchemaName("_partq_2"));
}

// The table refuses what the producer would refuse, even from plain SQL.
TEST_F(PgStoreTest, TheQueuesTableRefusesAMalformedDeadLetterTopic) {
  MakeQueue("plain", 1);
  pqxx::connection conn(schema_.dsn());
  pqxx::nontransaction tx(conn);
  EXPECT_THROW(
      tx.exec(absl::StrCat("UPDATE \"", schema_.name(), "\".queues SET dlq_topic = 'a b'")),
      pqxx::check_violation);
}

// --- sessions -------------------------------------------------------------------------

// The static id is md5(queue/instance) as a uuid: stable across processes.
TEST_F(PgStoreTest, AStaticMembersIdIsTheMd5OfQueueAndInstance) {
  MakeQueue("q", 4);
  JoinRequest req;
  req.queue = "q";
  req.instance_id = "worker-0";
  ASSERT_OK_AND_ASSIGN(JoinResult s, store_->Join(req));
  EXPECT_EQ(s.id.value, schema_.Q("SELECT md5('q/worker-0')::uuid::text")[0][0].value());
}

// A heartbeat never moves an expiry back: one that started earlier can commit
// later (a heartbeat the client gave up on, retried on a new connection), and
// the idle heartbeats' expiry sweep (migration 24) counts on expiries only
// moving on while a session lives. Both heartbeat statements renew.
TEST_F(PgStoreTest, AHeartbeatNeverMovesAnExpiryBack) {
  MakeQueue("q", 4);
  Member m = JoinWith(*store_, "q", {0});
  ASSERT_OK_AND_ASSIGN(GroupView whole, store_->ReadGroup("q"));
  auto expires_in_s = [&] {
    return schema_.QInt(absl::StrCat(
        "SELECT extract(epoch FROM expires_at - now())::bigint FROM {schema}.sessions WHERE id = '",
        m.join.id.value, "'"));
  };
  schema_.Q(absl::StrCat("UPDATE {schema}.sessions SET expires_at = now() + interval '1 hour' ",
                         "WHERE id = '", m.join.id.value, "'"));
  ASSERT_OK_AND_ASSIGN(GroupView v,
                       store_->HeartbeatSince("q", m.join.id, m.join.incarnation, whole.generation,
                                              {}));  // the idle statement
  EXPECT_TRUE(v.unchanged);
  EXPECT_GT(expires_in_s(), 3500);
  ASSERT_OK(store_->Heartbeat("q", m.join.id, m.join.incarnation));  // the full one
  EXPECT_GT(expires_in_s(), 3500);
  // And one behind by less than the TTL is renewed as before.
  schema_.Q(absl::StrCat("UPDATE {schema}.sessions SET expires_at = now() + interval '1 second' ",
                         "WHERE id = '", m.join.id.value, "'"));
  ASSERT_OK(store_->Heartbeat("q", m.join.id, m.join.incarnation));
  EXPECT_GE(expires_in_s(), 9);
}

// Finish runs the handler before it locks anything, so a session paused in
// its handler (SIGSTOP, a long GC) past its TTL loses its parts like any
// silent session, and its late ack is fenced.
TEST_F(PgStoreTest, ASessionPausedInItsHandlerExpiresAndItsAckIsFenced) {
  MakeQueue("q", 2, absl::Milliseconds(200));
  ASSERT_OK(store_->Enqueue("q", Payload("x")));
  auto zombie_store = schema_.NewStore();
  Member zombie = JoinWith(*zombie_store, "q", {0, 1});
  Member live = JoinWith(*store_, "q", {});
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, zombie_store->Claim(ClaimAll("q", zombie)));
  ASSERT_EQ(items.size(), 1u);
  std::atomic<bool> in_body{false}, release{false};
  std::atomic<int> runs{0};
  absl::StatusOr<FinishResult> zombie_result;
  std::thread finisher([&] {
    zombie_result = zombie_store->Finish(
        FinishOf("q", zombie, items),
        [&](Tx&, absl::Span<const Item> owned) -> absl::StatusOr<std::vector<Outcome>> {
          ++runs;
          in_body = true;
          const absl::Time until = absl::Now() + absl::Seconds(5);
          while (!release && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
          std::vector<Outcome> out;
          for (const Item& i : owned) out.push_back(Outcome{i.id, i.part});
          return out;
        });
  });
  ASSERT_TRUE(WaitUntil([&] { return in_body.load(); }));
  int64_t expired = 0;
  ASSERT_TRUE(WaitUntil([&] {
    const absl::Time t0 = absl::Now();
    auto v = store_->Heartbeat("q", live.join.id, live.join.incarnation);
    EXPECT_LT(absl::Now() - t0, absl::Milliseconds(500));
    if (v.ok()) expired += v->expired;
    return v.ok() && v->owners.empty();
  }));
  EXPECT_EQ(expired, 1);
  Member next = JoinWith(*store_, "q", {0, 1});
  ASSERT_EQ(next.parts.size(), 2u);
  release = true;
  finisher.join();
  ASSERT_OK(zombie_result);
  EXPECT_TRUE(zombie_result->acked.empty());
  EXPECT_EQ(zombie_result->fenced, Ids(items));
  EXPECT_EQ(runs, 2) << "the run that found its parts gone rolled back";
  EXPECT_EQ(Count("items"), 1);
}

// While Finish holds its fence (here: its second attempt, which locks before
// the handler runs, because an item was already gone), expiry waits for it
// without blocking anyone's heartbeat.
TEST_F(PgStoreTest, HeartbeatNeverWaitsForAnExpiredSessionThatIsStillFinishing) {
  MakeQueue("q", 2, absl::Milliseconds(200));
  ASSERT_OK(store_->Enqueue("q", Payload("x")));
  ASSERT_OK(store_->Enqueue("q", Payload("y")));
  auto zombie_store = schema_.NewStore();
  Member zombie = JoinWith(*zombie_store, "q", {0, 1});
  Member live = JoinWith(*store_, "q", {});
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, zombie_store->Claim(ClaimAll("q", zombie)));
  ASSERT_EQ(items.size(), 2u);
  schema_.Q(absl::StrCat("DELETE FROM {schema}.items WHERE id = ", items[1].id));
  std::atomic<bool> locked{false}, release{false};
  absl::StatusOr<FinishResult> zombie_result;
  std::thread finisher([&] {
    zombie_result = zombie_store->Finish(
        FinishOf("q", zombie, items),
        [&](Tx&, absl::Span<const Item> owned) -> absl::StatusOr<std::vector<Outcome>> {
          if (owned.size() == 1) {  // the locked attempt
            locked = true;
            const absl::Time until = absl::Now() + absl::Seconds(5);
            while (!release && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
          }
          std::vector<Outcome> out;
          for (const Item& i : owned) out.push_back(Outcome{i.id, i.part});
          return out;
        });
  });
  ASSERT_TRUE(WaitUntil([&] { return locked.load(); }));
  // Past the zombie's expiry (and our own: keep heartbeating).
  ASSERT_TRUE(WaitUntil([&] {
    auto v = store_->Heartbeat("q", live.join.id, live.join.incarnation);
    return v.ok() &&
           std::find(v->members.begin(), v->members.end(), zombie.join.id) == v->members.end();
  }));
  for (int i = 0; i < 5; ++i) {
    const absl::Time t0 = absl::Now();
    ASSERT_OK_AND_ASSIGN(GroupView v, store_->Heartbeat("q", live.join.id, live.join.incarnation));
    EXPECT_LT(absl::Now() - t0, absl::Milliseconds(500));
    EXPECT_TRUE(v.alive);
    EXPECT_EQ(v.expired, 0);         // not deleted while its Finish holds the fence
    EXPECT_EQ(v.owners.size(), 2u);  // and its parts are not free
  }
  release = true;
  finisher.join();
  ASSERT_OK(zombie_result);
  EXPECT_EQ(zombie_result->acked, std::vector<int64_t>{items[0].id});   // it still held its parts
  EXPECT_EQ(zombie_result->fenced, std::vector<int64_t>{items[1].id});  // gone already
  ASSERT_OK_AND_ASSIGN(GroupView v, store_->Heartbeat("q", live.join.id, live.join.incarnation));
  EXPECT_EQ(v.expired, 1);
  EXPECT_TRUE(v.owners.empty());
}

TEST_F(PgStoreTest, HeartbeatIsAHotUpdate) {
  MakeQueue("q", 1);
  auto store = schema_.NewStore();
  Member a = JoinWith(*store, "q", {0});
  const std::string stats =
      absl::StrCat("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE schemaname = '",
                   schema_.name(), "' AND relname = 'sessions'");
  constexpr int kBeats = 200;
  const absl::Time start = absl::Now();
  for (int i = 0; i < kBeats; ++i) {
    ASSERT_OK_AND_ASSIGN(GroupView v, store->Heartbeat("q", a.join.id, a.join.incarnation));
    ASSERT_TRUE(v.alive);
  }
  std::printf("[ perf ] heartbeat round trip: %.3f ms\n",
              absl::ToDoubleMilliseconds(absl::Now() - start) / kBeats);
  // A backend flushes its table statistics when idle (after a delay) or when
  // it exits; closing the store makes it exit.
  store.reset();
  int64_t upd = 0, hot = 0;
  EXPECT_TRUE(WaitUntil([&] {
    auto rows = testing::Query(schema_.dsn(), stats);
    if (rows.empty()) return false;
    upd = std::stoll(*rows[0][0]);
    hot = std::stoll(*rows[0][1]);
    return upd >= kBeats;
  }));
  EXPECT_GE(upd, kBeats);
  EXPECT_GE(hot, upd - 2) << "heartbeats should be HOT updates";
}

// --- enqueue --------------------------------------------------------------------------

TEST_F(PgStoreTest, EnqueueBatchCopiesAHundredThousandItems) {
  MakeQueue("q", 16);
  constexpr int kItems = 100000;
  std::vector<NewItem> items;
  items.reserve(kItems);
  absl::BitGen gen;
  for (int i = 0; i < kItems; ++i) {
    std::string payload(100, '\0');
    for (char& c : payload) c = static_cast<char>(absl::Uniform<int>(gen, 0, 256));
    NewItem item;
    item.payload = std::move(payload);
    if (i % 10 == 0) item.key = absl::StrCat("key-", i % 97);
    items.push_back(std::move(item));
  }
  const absl::Time start = absl::Now();
  ASSERT_OK_AND_ASSIGN(int64_t written, store_->EnqueueBatch("q", items));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(written, kItems);
  std::printf("[ perf ] EnqueueBatch (COPY): %d items of 100 bytes in %.0f ms = %.0f items/s\n",
              kItems, absl::ToDoubleMilliseconds(took), kItems / absl::ToDoubleSeconds(took));
  EXPECT_EQ(Count("items"), kItems);
  // Every item is in the part its key or id says.
  auto rows = schema_.Q("SELECT id, part, key FROM {schema}.items ORDER BY id LIMIT 2000");
  for (const auto& r : rows) {
    const int64_t id = std::stoll(*r[0]);
    const int part = std::stoi(*r[1]);
    EXPECT_EQ(part, r[2] ? PartForKey(*r[2], 16) : PartForId(id, 16)) << id;
  }
  EXPECT_EQ(schema_.QInt("SELECT count(DISTINCT part) FROM {schema}.items"), 16);

  // Single enqueues, for comparison.
  constexpr int kSingles = 2000;
  const absl::Time s2 = absl::Now();
  for (int i = 0; i < kSingles; ++i) ASSERT_OK(store_->Enqueue("q", items[i]));
  const absl::Duration t2 = absl::Now() - s2;
  std::printf("[ perf ] Enqueue (single, autocommit): %.0f items/s (%.3f ms each)\n",
              kSingles / absl::ToDoubleSeconds(t2), absl::ToDoubleMilliseconds(t2) / kSingles);

  // Delayed items in a batch get run_at from the database clock.
  std::vector<NewItem> delayed(3, Payload("d"));
  delayed[1].delay = absl::Hours(1);
  ASSERT_OK(store_->EnqueueBatch("q", delayed));
  EXPECT_EQ(Count("items", "run_at > now() + interval '59 minutes'"), 1);
  EXPECT_EQ(store_->EnqueueBatch("nope", delayed).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(PgStoreTest, EnqueueInTxCommitsWithTheCallersTransaction) {
  MakeQueue("q", 4);
  pqxx::connection conn(schema_.dsn());
  {
    pqxx::work tx(conn);
    ASSERT_OK_AND_ASSIGN(EnqueueResult r, EnqueueInTx(tx, schema_.options(), "q", Keyed("k")));
    EXPECT_EQ(r.part, PartForKey("k", 4));
    EXPECT_EQ(Count("items"), 0);  // not committed yet
    tx.commit();
  }
  EXPECT_EQ(Count("items"), 1);
  {
    pqxx::work tx(conn);
    ASSERT_OK(EnqueueInTx(tx, schema_.options(), "q", Payload("rolled back")));
    tx.abort();
  }
  EXPECT_EQ(Count("items"), 1);
  pqxx::work tx(conn);
  EXPECT_EQ(EnqueueInTx(tx, schema_.options(), "nope", Payload("x")).status().code(),
            absl::StatusCode::kNotFound);
}

// --- finish ---------------------------------------------------------------------------

class FinishTest : public PgStoreTest {
 protected:
  void SetUp() override {
    PgStoreTest::SetUp();
    MakeQueue("q", 2, absl::Seconds(10), false, /*max_attempts=*/3);
    schema_.Q("CREATE TABLE {schema}.effects (item_id bigint, note text)");
    for (int i = 0; i < 6; ++i) {  // three items in each part, each of a key of its own
      ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Keyed(KeyInPart(i % 2, 2, i / 2),
                                                                       absl::StrCat(i))));
      ids_.push_back(r.id);
    }
    member_ = JoinWith(*store_, "q", {0, 1});
    ASSERT_EQ(member_.parts.size(), 2u);
  }

  // Records each item in `effects` through the handler's transaction, then
  // returns `kind` for all of them.
  FinishBody Record(Outcome::Kind kind, std::vector<int64_t>* seen = nullptr) {
    return [this, kind, seen](
               Tx& tx, absl::Span<const Item> items) -> absl::StatusOr<std::vector<Outcome>> {
      if (seen != nullptr) seen->clear();  // the items of the last run
      EXPECT_NE(tx.pqxx(), nullptr);
      EXPECT_EQ(tx.schema(), schema_.name());
      std::vector<Outcome> out;
      for (const Item& i : items) {
        auto r = tx.Exec(absl::StrCat("INSERT INTO \"", tx.schema(),
                                      "\".effects VALUES ($1, $2) RETURNING item_id"),
                         {std::to_string(i.id), std::nullopt});
        if (!r.ok()) return r.status();
        EXPECT_EQ(r->size(), 1u);
        if (seen != nullptr) seen->push_back(i.id);
        Outcome o{i.id, i.part, kind};
        o.retry_delay = absl::Minutes(5);
        o.error = "boom";
        out.push_back(o);
      }
      return out;
    };
  }

  std::vector<int64_t> ids_;
  Member member_;
};

// partq's connections run without JIT: with a backlog in the statistics,
// PostgreSQL's default thresholds made every ack compile its plan (131
// functions, inlined and optimized: seconds each), and the queue stopped
// (issue 27's soak). The handler's transaction is on such a connection.
TEST_F(FinishTest, ConnectionsRunWithoutJit) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_)));
  std::string jit;
  FinishBody body = [&](Tx& tx,
                        absl::Span<const Item> owned) -> absl::StatusOr<std::vector<Outcome>> {
    auto r = tx.Exec("SELECT current_setting('jit')");
    if (!r.ok()) return r.status();
    jit = r->at(0).at(0).value_or("");
    std::vector<Outcome> out;
    for (const Item& i : owned) out.push_back(Outcome{i.id, i.part});
    return out;
  };
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(FinishOf("q", member_, items), body));
  EXPECT_EQ(r.acked.size(), items.size());
  EXPECT_EQ(jit, "off");
}

// Through a transaction pooler (PgBouncer's pool_mode = transaction) nothing
// may outlive a transaction on its server connection: JIT is off in each
// transaction instead of the session (the Finish's BEGIN, the transaction a
// claim ahead begins, pipelined or not), no statement is prepared under a
// name, and application_name comes with the connection's startup packet.
// tests/pg/pgbouncer_test.cc runs partq through a real PgBouncer.
TEST_F(FinishTest, ThroughATransactionPoolerEachTransactionTurnsJitOffAndPreparesNothing) {
  PgOptions o = schema_.options();
  o.transaction_pooler = true;
  o.application_name = absl::StrCat("pgtest_", schema_.name());
  ASSERT_OK_AND_ASSIGN(store_, ConnectPg(o));
  MakeQueue("one", 1);
  for (int i = 0; i < 6; ++i) ASSERT_OK(store_->Enqueue("one", Payload(absl::StrCat(i))));
  Member m = JoinWith(*store_, "one", {0});
  std::vector<std::string> seen;  // per Finish: jit, prepared statements, application_name
  FinishBody body = [&](Tx& tx,
                        absl::Span<const Item> items) -> absl::StatusOr<std::vector<Outcome>> {
    auto r = tx.Exec(
        "SELECT current_setting('jit'), (SELECT count(*) FROM pg_prepared_statements), "
        "current_setting('application_name')");
    if (!r.ok()) return r.status();
    seen.push_back(absl::StrCat(*r->at(0).at(0), " ", *r->at(0).at(1), " ", *r->at(0).at(2)));
    std::vector<Outcome> out;
    for (const Item& i : items) out.push_back(Outcome{i.id, i.part});
    return out;
  };
  ASSERT_OK_AND_ASSIGN(std::vector<Item> first, store_->Claim(ClaimAll("one", m, 1)));
  ASSERT_EQ(first.size(), 1u);
  // A one-part claim ahead without a suspect probe: the pipelined flight,
  // ending in COMMIT AND CHAIN.
  FinishRequest req = FinishClaimingAhead("one", m, first, 2);
  ASSERT_OK_AND_ASSIGN(FinishResult r1, store_->Finish(req, body));
  ASSERT_TRUE(r1.next_begun);
  ASSERT_EQ(r1.next.size(), 2u);
  // In that transaction; its claim ahead probes for suspects, so the general
  // statement and `COMMIT; BEGIN ...` begin the next.
  FinishRequest second = FinishOf("one", m, r1.next);
  second.begin_next = true;
  second.next = [&]() -> std::optional<ClaimRequest> { return ClaimAll("one", m, 100); };
  ASSERT_OK_AND_ASSIGN(FinishResult r2, store_->Finish(second, body));
  ASSERT_TRUE(r2.next_begun);
  ASSERT_EQ(r2.next.size(), 3u);
  ASSERT_OK_AND_ASSIGN(FinishResult r3, store_->Finish(FinishOf("one", m, r2.next), body));
  EXPECT_EQ(r3.acked.size(), 3u);
  EXPECT_EQ(Count("items", "queue = 'one'"), 0);
  const std::string expected = absl::StrCat("off 0 ", o.application_name);
  EXPECT_EQ(seen, std::vector<std::string>(3, expected));
}

// The handler's SQL rolls back with a body that fails, and with a failed
// statement the body carried on after: the server aborted the transaction.
TEST_F(FinishTest, AHandlersSqlRollsBackWithAFailedBodyOrStatement) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_)));
  FinishBody failing = [](Tx& tx,
                          absl::Span<const Item> owned) -> absl::StatusOr<std::vector<Outcome>> {
    auto r = tx.Exec(absl::StrCat("INSERT INTO \"", tx.schema(), "\".effects VALUES (1, 'x')"));
    if (!r.ok()) return r.status();
    return absl::DataLossError("handler failed");
  };
  absl::StatusOr<FinishResult> r = store_->Finish(FinishOf("q", member_, items), failing);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Count("effects"), 0);
  EXPECT_EQ(Count("items"), 6);
  FinishBody sloppy = [](Tx& tx,
                         absl::Span<const Item> owned) -> absl::StatusOr<std::vector<Outcome>> {
    EXPECT_FALSE(tx.Exec("SELECT * FROM no_such_table").ok());
    std::vector<Outcome> out;
    for (const Item& i : owned) out.push_back(Outcome{i.id, i.part});
    return out;
  };
  r = store_->Finish(FinishOf("q", member_, items), sloppy);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(Count("items"), 6);
  ASSERT_OK_AND_ASSIGN(FinishResult ok, store_->Finish(FinishOf("q", member_, items), AckAll()));
  EXPECT_EQ(ok.acked.size(), 6u);
}

// Results rows are kept only where `partq wait` needs them: for an item with
// a result or a dedup key (one the caller's copy of the item does not show
// included).
TEST_F(FinishTest, AnAckKeepsAResultsRowOnlyForAResultOrADedupKey) {
  NewItem keyed = Payload("keyed");
  keyed.dedup_key = "k-1";
  ASSERT_OK_AND_ASSIGN(EnqueueResult e, store_->Enqueue("q", keyed));
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_, 100)));
  ASSERT_EQ(items.size(), 7u);
  for (Item& i : items) i.dedup_key.reset();
  ASSERT_OK_AND_ASSIGN(FinishResult r,
                       store_->Finish(FinishOf("q", member_, items), Record(Outcome::Kind::kAck)));
  EXPECT_EQ(r.acked.size(), 7u);
  EXPECT_EQ(Count("results", absl::StrCat("id = ", e.id, " AND dedup_key = 'k-1'")), 1);
  EXPECT_EQ(Count("results"), 1) << "items without key or result leave no results row";
  EXPECT_EQ(Count("effects"), 7) << "the handler's writes committed once";
}

TEST_F(FinishTest, ASavepointRecoversFromAFailedHandlerStatement) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_)));
  // Item by item under a savepoint: a failing statement is rolled back to
  // the savepoint and only that item is retried.
  FinishBody isolated = [&](Tx& tx,
                            absl::Span<const Item> owned) -> absl::StatusOr<std::vector<Outcome>> {
    std::vector<Outcome> out;
    for (const Item& i : owned) {
      if (auto r = tx.Exec("SAVEPOINT item"); !r.ok()) return r.status();
      const std::string table = i.id == ids_[0] ? "no_such_table" : "effects";
      auto w = tx.Exec(absl::StrCat("INSERT INTO \"", tx.schema(), "\".", table, " VALUES ($1)"),
                       {std::to_string(i.id)});
      if (w.ok()) {
        if (auto r = tx.Exec("RELEASE SAVEPOINT item"); !r.ok()) return r.status();
        out.push_back(Outcome{i.id, i.part});
      } else {
        if (auto r = tx.Exec("ROLLBACK TO SAVEPOINT item"); !r.ok()) return r.status();
        Outcome o{i.id, i.part, Outcome::Kind::kRetry};
        o.error = std::string(w.status().message());
        out.push_back(o);
      }
    }
    return out;
  };
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(FinishOf("q", member_, items), isolated));
  EXPECT_EQ(r.acked.size(), 5u);
  EXPECT_EQ(r.retried, std::vector<int64_t>{ids_[0]});
  EXPECT_EQ(Count("effects"), 5);
  EXPECT_EQ(Count("items", "last_error LIKE '%no_such_table%'"), 1);
}

// ExecScript runs several statements in one call; a script that fails
// leaves the transaction aborted, as a failed Exec does, until a ROLLBACK TO
// SAVEPOINT; the writes made before the savepoint commit.
TEST_F(FinishTest, AScriptRunsSeveralStatementsAndItsFailureIsRolledBackToASavepoint) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_)));
  FinishBody scripted = [&](Tx& tx,
                            absl::Span<const Item> owned) -> absl::StatusOr<std::vector<Outcome>> {
    const std::string effects = absl::StrCat("\"", tx.schema(), "\".effects");
    EXPECT_TRUE(tx.ExecScript(absl::StrCat("SAVEPOINT a; INSERT INTO ", effects, " VALUES (",
                                           ids_[0], "); RELEASE SAVEPOINT a; SAVEPOINT a"))
                    .ok());
    absl::Status bad =
        tx.ExecScript(absl::StrCat("INSERT INTO ", effects, " VALUES (", ids_[1], "); SELECT 1/0"));
    EXPECT_FALSE(bad.ok());
    EXPECT_TRUE(absl::StrContains(bad.message(), "division by zero")) << bad;
    EXPECT_FALSE(tx.Exec("SELECT 1").ok()) << "the transaction is aborted";
    if (auto r = tx.Exec("ROLLBACK TO SAVEPOINT a"); !r.ok()) return r.status();
    std::vector<Outcome> out;
    for (const Item& i : owned) out.push_back(Outcome{i.id, i.part});
    return out;
  };
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(FinishOf("q", member_, items), scripted));
  EXPECT_EQ(r.acked.size(), 6u);
  EXPECT_EQ(Count("effects"), 1);
  EXPECT_EQ(Count("effects", absl::StrCat("item_id = ", ids_[0])), 1);
}

// A retry's delay counts from its ack, not from when the transaction began:
// the handler ran in between (and a chained transaction began even earlier,
// at the previous batch's COMMIT).
TEST_F(FinishTest, ARetrysDelayCountsFromTheAckNotTheTransactionStart) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_, 1)));
  ASSERT_EQ(items.size(), 1u);
  FinishBody slow = [](Tx&, absl::Span<const Item> owned) -> absl::StatusOr<std::vector<Outcome>> {
    absl::SleepFor(absl::Seconds(1));
    std::vector<Outcome> out;
    for (const Item& i : owned) {
      Outcome o{i.id, i.part, Outcome::Kind::kRetry};
      o.retry_delay = absl::Seconds(2);
      out.push_back(o);
    }
    return out;
  };
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(FinishOf("q", member_, items), slow));
  ASSERT_EQ(r.retried.size(), 1u);
  // From the transaction's start it would be due in 1 s; from the ack, in 2.
  EXPECT_EQ(Count("items", absl::StrCat("id = ", items[0].id,
                                        " AND run_at > clock_timestamp() + interval '1.5 s'")),
            1);
}

TEST_F(FinishTest, AnAckThatClaimedAheadBeginsTheNextTransaction) {
  // Its own connection, named, so tests running beside it on the same server
  // (ctest -j) cannot add idle transactions to the count.
  PgOptions o = schema_.options();
  o.application_name = absl::StrCat("pgtest_", schema_.name());
  ASSERT_OK_AND_ASSIGN(store_, ConnectPg(o));
  ASSERT_OK_AND_ASSIGN(std::vector<Item> first, store_->Claim(ClaimAll("q", member_, 2)));
  auto idle_in_tx = [&] {
    return schema_.QInt(absl::StrCat(
        "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' "
        "AND application_name = '",
        o.application_name, "'"));
  };
  FinishRequest req = FinishOf("q", member_, first);
  req.begin_next = true;
  req.next = [&]() -> std::optional<ClaimRequest> { return ClaimAll("q", member_, 2); };
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(req, Record(Outcome::Kind::kAck)));
  ASSERT_TRUE(r.next_begun);
  ASSERT_FALSE(r.next.empty());
  EXPECT_EQ(idle_in_tx(), 1) << "the begun transaction waits for the next Finish";
  // The next Finish runs in it and commits; asked for nothing more, it ends.
  FinishRequest second = FinishOf("q", member_, r.next);
  second.begin_next = true;
  ASSERT_OK_AND_ASSIGN(FinishResult r2, store_->Finish(second, Record(Outcome::Kind::kAck)));
  EXPECT_FALSE(r2.next_begun);
  EXPECT_EQ(r2.acked.size(), r.next.size());
  EXPECT_EQ(Count("effects"), static_cast<int64_t>(2 + r.next.size()));
  EXPECT_EQ(idle_in_tx(), 0);
  // Any other call rolls a begun transaction back first.
  FinishRequest third = FinishOf("q", member_, {});
  third.begin_next = true;
  third.next = [&]() -> std::optional<ClaimRequest> { return ClaimAll("q", member_, 100); };
  ASSERT_OK_AND_ASSIGN(FinishResult r3, store_->Finish(third, Record(Outcome::Kind::kAck)));
  ASSERT_TRUE(r3.next_begun);
  ASSERT_OK(store_->GetQueue("q"));
  EXPECT_EQ(idle_in_tx(), 0);
  ASSERT_OK_AND_ASSIGN(FinishResult r4, store_->Finish(FinishOf("q", member_, r3.next),
                                                       Record(Outcome::Kind::kAck)));
  EXPECT_EQ(r4.acked.size(), r3.next.size());
  EXPECT_EQ(Count("items"), 0) << "the rest, claimed by the third Finish";
}

// --- the pipelined ack (pg/sql/pipelined_ack_claim.sql) -------------------------------------

// The pipelined ack sends its arrays in binary; the server must read back
// exactly the values encoded, at the edges of each type and empty.
TEST_F(PgStoreTest, BinaryArrayParametersReachTheServerAsTheirValues) {
  pg_internal::PgConnection conn(schema_.dsn());
  pg_internal::Pipeline pipeline;
  pipeline.Define("partq_test_echo", "SELECT $1::int[]::text, $2::bigint[]::text, $3::tid[]::text");
  auto echo = [&](const std::vector<int>& i4, const std::vector<int64_t>& i8,
                  const std::vector<uint64_t>& tids) {
    std::vector<pg_internal::PipelineResult> r =
        pipeline.Run(conn, {{"partq_test_echo",
                             {pg_internal::BinaryInt4Array(i4), pg_internal::BinaryInt8Array(i8),
                              pg_internal::BinaryTidArray(tids)},
                             /*binary=*/false,
                             {true, true, true}}});
    EXPECT_EQ(r[0].kind, pg_internal::PipelineResult::Kind::kOk) << r[0].message;
    if (r[0].kind != pg_internal::PipelineResult::Kind::kOk) return std::string();
    return absl::StrCat(r[0].get(0, 0), " ", r[0].get(0, 1), " ", r[0].get(0, 2));
  };
  EXPECT_EQ(echo({0, -1, 2147483647, -2147483647 - 1}, {1, -1, INT64_MAX, INT64_MIN},
                 {uint64_t{1}, uint64_t{7} << 16 | 3, uint64_t{0xffffffff} << 16 | 0xffff}),
            "{0,-1,2147483647,-2147483648} {1,-1,9223372036854775807,-9223372036854775808} "
            "{\"(0,1)\",\"(7,3)\",\"(4294967295,65535)\"}");
  EXPECT_EQ(echo({}, {}, {}), "{} {} {}");
}

// The handler's results go as a binary bytea[]: any byte, an empty result,
// a large one, and no results at all reach the server as sent.
TEST_F(PgStoreTest, BinaryByteaArraysReachTheServerAsTheirBytes) {
  pg_internal::PgConnection conn(schema_.dsn());
  pg_internal::Pipeline pipeline;
  pipeline.Define("partq_test_bytea",
                  "SELECT cardinality($1::bytea[]), "
                  "(SELECT string_agg(encode(b, 'hex'), ',') FROM unnest($1::bytea[]) b)");
  auto echo = [&](const std::vector<std::string>& values) {
    const std::vector<absl::string_view> views(values.begin(), values.end());
    std::vector<pg_internal::PipelineResult> r = pipeline.Run(
        conn, {{"partq_test_bytea", {pg_internal::BinaryByteaArray(views)}, false, {true}}});
    EXPECT_EQ(r[0].kind, pg_internal::PipelineResult::Kind::kOk) << r[0].message;
    if (r[0].kind != pg_internal::PipelineResult::Kind::kOk) return std::string();
    return absl::StrCat(r[0].get(0, 0), " ", r[0].is_null(0, 1) ? "-" : r[0].get(0, 1));
  };
  EXPECT_EQ(echo({std::string("\x00\xff", 2), "", "ok"}), "3 00ff,,6f6b");
  EXPECT_EQ(echo({}), "0 -");
  const std::string big(100000, '\x7f');
  EXPECT_EQ(echo({big}), absl::StrCat("1 ", absl::BytesToHexString(big)));
}

// Whether `store`'s own connection prepared the pipelined statement `name`:
// asked from inside a Finish, the only way onto that connection.
bool Prepared(Store& store, const std::string& queue, const std::string& name) {
  bool found = false;
  FinishRequest req;
  req.queue = queue;
  absl::StatusOr<FinishResult> r = store.Finish(
      req, [&](Tx& tx, absl::Span<const Item>) -> absl::StatusOr<std::vector<Outcome>> {
        auto rows = tx.Exec("SELECT count(*) FROM pg_prepared_statements WHERE name = $1", {name});
        if (!rows.ok()) return rows.status();
        found = (*rows)[0][0] == std::optional<std::string>("1");
        return std::vector<Outcome>{};
      });
  EXPECT_TRUE(r.ok()) << r.status();
  return found;
}

// Whether any form of the pipelined claim ahead (with or without the read
// behind the cursor, ClaimPart::behind; with or without a key bound) ran on
// `store`'s connection; its form with the handler's results if `results`.
bool PipelinedClaimRan(Store& store, const std::string& queue, bool results = false) {
  for (const char* name :
       {pg_internal::kPipelinedAckClaim, pg_internal::kPipelinedAckClaimBehind,
        pg_internal::kPipelinedAckClaimKeyed, pg_internal::kPipelinedAckClaimBehindKeyed}) {
    if (Prepared(store, queue, results ? pg_internal::ResultsName(name) : name)) return true;
  }
  return false;
}

// Creates a one-part queue and enqueues a0..a3 (key a), b1 (key b) and c1
// (no key) into it, in that order.
void CreateWithKeyedItems(Store& store, const std::string& name, bool ordered,
                          int key_concurrency) {
  QueueConfig q;
  q.name = name;
  q.parts = 1;
  q.ordered = ordered;
  q.key_concurrency = key_concurrency;
  ASSERT_OK(store.CreateQueue(q));
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK(store.Enqueue(q.name, Keyed("a", absl::StrCat("a", i))));
  }
  ASSERT_OK(store.Enqueue(q.name, Keyed("b", "b1")));
  ASSERT_OK(store.Enqueue(q.name, Payload("c1")));
}

// The claim ahead in the ack's flight has forms without the key probes for
// queues without a key bound: an ordered queue's (KeyBound 1) and a key
// concurrency queue's still take only what their bound allows, through the
// keyed forms; an ordinary queue's takes every item of a key at once, through
// the others. (The claim reads beside the ack's delete, in its snapshot: a0
// still counts as live there.)
TEST_F(FinishTest, AnAckClaimingAheadKeepsEachQueuesKeyBoundInItsOwnForm) {
  struct Case {
    std::string queue;
    bool ordered;
    int key_concurrency;
    std::vector<std::string> claimed;  // of a1, a2, a3, b1 and c1
    bool keyed;
  };
  for (const Case& c :
       {Case{"ord", true, 0, {"b1", "c1"}, true}, Case{"kc", false, 2, {"a1", "b1", "c1"}, true},
        Case{"plain", false, 0, {"a1", "a2", "a3", "b1", "c1"}, false}}) {
    SCOPED_TRACE(c.queue);
    ASSERT_NO_FATAL_FAILURE(
        CreateWithKeyedItems(*store_, c.queue, c.ordered, c.key_concurrency));
    auto store = schema_.NewStore();
    Member m = JoinWith(*store, c.queue, {0});
    auto bounded = [&](int limit) {
      ClaimRequest r = ClaimAll(c.queue, m, limit);
      r.ordered = c.ordered;
      r.key_concurrency = c.key_concurrency;
      return r;
    };
    ASSERT_OK_AND_ASSIGN(std::vector<Item> first, store->Claim(bounded(1)));
    ASSERT_EQ(first.size(), 1u);
    ASSERT_EQ(first[0].payload, "a0");
    FinishRequest req = FinishClaimingAhead(c.queue, m, first, 100);
    req.next = [&, after = ItemKey{first[0].priority, first[0].id}]() {
      ClaimRequest next = bounded(100);
      next.parts[0].after = after;
      next.include_suspect = false;
      return std::optional<ClaimRequest>(next);
    };
    ASSERT_OK_AND_ASSIGN(FinishResult r, store->Finish(req, AckAll()));
    EXPECT_EQ(r.acked, std::vector<int64_t>{first[0].id});
    std::vector<std::string> got;
    for (const Item& i : r.next) got.push_back(i.payload);
    EXPECT_EQ(got, c.claimed);
    EXPECT_EQ(Prepared(*store, c.queue, pg_internal::kPipelinedAckClaimKeyed) ||
                  Prepared(*store, c.queue, pg_internal::kPipelinedAckClaimBehindKeyed),
              c.keyed);
    EXPECT_EQ(Prepared(*store, c.queue, pg_internal::kPipelinedAckClaim) ||
                  Prepared(*store, c.queue, pg_internal::kPipelinedAckClaimBehind),
              !c.keyed);
  }
}

// How often the statement prepared as `name` on `store`'s connection ran a
// generic and a custom plan (pg_prepared_statements), asked from
// inside a Finish; nullopt when it is not prepared there.
std::optional<std::pair<int64_t, int64_t>> PlanCounts(Store& store, const std::string& queue,
                                                      const std::string& name) {
  std::optional<std::pair<int64_t, int64_t>> out;
  FinishRequest req;
  req.queue = queue;
  absl::StatusOr<FinishResult> r = store.Finish(
      req, [&](Tx& tx, absl::Span<const Item>) -> absl::StatusOr<std::vector<Outcome>> {
        auto rows = tx.Exec(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1",
            {name});
        if (!rows.ok()) return rows.status();
        if (!rows->empty()) {
          out.emplace(std::stoll(*(*rows)[0][0]), std::stoll(*(*rows)[0][1]));
        }
        return std::vector<Outcome>{};
      });
  EXPECT_TRUE(r.ok()) << r.status();
  return out;
}

// A claim of a queue without a key bound, and a fair one, runs in one flight
// after the plan guard: a generic plan from the first call on, never planned
// again for its arguments (planning took longer than running). An ordered or
// key-concurrency claim keeps the prepared statement and the plan the planner
// picks (its key probes), and still takes only what its bound allows.
TEST_F(FinishTest, ClaimsRunAGenericPlanAfterThePlanGuardUnlessTheyHaveAKeyBound) {
  struct Case {
    std::string queue;
    bool ordered;
    int key_concurrency;
    bool fair;
    std::vector<std::string> claimed;  // of a0..a3, b1 and c1, sorted
    const char* generic;               // the statement that runs generic, or null
  };
  for (const Case& c :
       {Case{"plain", false, 0, false, {"a0", "a1", "a2", "a3", "b1", "c1"},
             pg_internal::kPipelinedClaim},
        Case{"fair", false, 0, true, {"a0", "a1", "a2", "a3", "b1", "c1"},
             pg_internal::kPipelinedClaimFair},
        Case{"ord", true, 0, false, {"a0", "b1", "c1"}, nullptr},
        Case{"kc", false, 2, false, {"a0", "a1", "b1", "c1"}, nullptr}}) {
    SCOPED_TRACE(c.queue);
    ASSERT_NO_FATAL_FAILURE(
        CreateWithKeyedItems(*store_, c.queue, c.ordered, c.key_concurrency));
    auto store = schema_.NewStore();
    Member m = JoinWith(*store, c.queue, {0});
    // More calls than the five custom plans PostgreSQL tries before it
    // weighs a generic one.
    constexpr int kCalls = 7;
    for (int call = 0; call < kCalls; ++call) {
      ClaimRequest r = ClaimAll(c.queue, m, 100);
      r.ordered = c.ordered;
      r.key_concurrency = c.key_concurrency;
      r.fair = c.fair;
      ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store->Claim(r));
      std::vector<std::string> payloads;
      for (const Item& i : got) payloads.push_back(i.payload);
      std::sort(payloads.begin(), payloads.end());
      EXPECT_EQ(payloads, c.claimed) << "call " << call;
    }
    for (const char* name : {pg_internal::kPipelinedClaim, pg_internal::kPipelinedClaimFair}) {
      const auto counts = PlanCounts(*store, c.queue, name);
      if (c.generic != nullptr && std::string(name) == c.generic) {
        ASSERT_TRUE(counts.has_value()) << name;
        EXPECT_EQ(counts->first, kCalls) << name << ": generic plans";
        EXPECT_EQ(counts->second, 0) << name << ": custom plans";
      } else {
        EXPECT_FALSE(counts.has_value()) << name << " ran";
      }
    }
  }
}

// A claim with a key bound (ordered: 1, key concurrency: 2) probes a key's
// older items through items_key with the part bound: in the item's own part
// and in each part the key had before a grow. Written as `j.part =
// ANY(earlier parts)`, the second probe was planned, over statistics taken
// while `items` was empty, as a scan of the key's entries in every part of
// the queue: a 16-part ordered queue drained 4-14x slower (BENCHMARKS.md,
// "Ordered queues over empty statistics"). Checked in the plan of the read,
// for a queue that never grew and one that grew 4 -> 16, after an ANALYZE of
// the empty table; the read still yields each key's oldest item only.
TEST_F(PgStoreTest, KeyProbesBindThePartOverStatisticsOfAnEmptyItemsTable) {
  schema_.Q("ANALYZE {schema}.items");
  MakeQueue("never", 16, absl::Seconds(10), /*ordered=*/true);
  MakeQueue("grew", 4, absl::Seconds(10), /*ordered=*/true);
  auto enqueue = [&](const std::string& queue, int from, int to) {
    for (int i = from; i < to; ++i) {
      ASSERT_OK(store_->Enqueue(queue, Keyed(absl::StrCat("k", i % 40), absl::StrCat(i))));
    }
  };
  ASSERT_NO_FATAL_FAILURE(enqueue("never", 0, 400));
  ASSERT_NO_FATAL_FAILURE(enqueue("grew", 0, 200));
  ASSERT_OK_AND_ASSIGN(int before, store_->GrowParts("grew", 16));
  EXPECT_EQ(before, 4);
  ASSERT_NO_FATAL_FAILURE(enqueue("grew", 200, 400));
  for (const std::string queue : {"never", "grew"}) {
    for (const char* bound : {"1", "2"}) {
      SCOPED_TRACE(absl::StrCat(queue, ", key bound ", bound));
      // Part 5 had part 1 before the grow (5 % 4).
      const std::string read = WithSchema(
          pg_internal::ReadyItems(absl::StrCat("'", queue, "'"), "5", "(-32768)",
                                  "'-9223372036854775808'::bigint", "(-32768)",
                                  "'-9223372036854775808'::bigint", "'{}'::bigint[]", bound,
                                  "100", ""),
          schema_.name());
      int probes = 0;
      std::string plan;
      const auto lines = schema_.Q(absl::StrCat("EXPLAIN (ANALYZE, COSTS OFF) SELECT id FROM (",
                                                read, ") r"));
      for (size_t l = 0; l < lines.size(); ++l) {
        const std::string line = lines[l][0].value_or("");
        absl::StrAppend(&plan, line, "\n");
        if (!absl::StrContains(line, "using items_key on items")) continue;
        ++probes;
        ASSERT_LT(l + 1, lines.size());
        const std::string cond = lines[l + 1][0].value_or("");
        EXPECT_TRUE(absl::StrContains(cond, "Index Cond:") && absl::StrContains(cond, "(part = "))
            << cond;
      }
      // The probe in the part itself and the one in the earlier parts, of
      // the window and of the walk on (fragments/ready_keyed.sql), and the
      // read of the keys' first items (fragments/ready_heads.sql: a skip
      // scan's first step and its next ones, each two reads of the index
      // (before the next key with a floor, or on when none is left:
      // fragments/fair_next_key.sql), each key's items from there, and
      // their earlier parts' probe).
      EXPECT_EQ(probes, 14) << plan;
      // What the read yields: in a queue that never grew, each key of part 5
      // its oldest item (bound 1) or two oldest (bound 2); in the grown one,
      // only keys without items left in part 1 (a key with any there has
      // five, enough to hold back bound 2 too). Every key has 10 items.
      const int64_t keys = schema_.QInt(absl::StrCat(
          "SELECT count(DISTINCT key) FROM {schema}.items WHERE queue = '", queue,
          "' AND part = 5"));
      const int64_t blocked = schema_.QInt(absl::StrCat(
          "SELECT count(DISTINCT i.key) FROM {schema}.items i JOIN {schema}.items j"
          " ON j.queue = i.queue AND j.key = i.key AND j.part = 1 AND j.id < i.id"
          " WHERE i.queue = '", queue, "' AND i.part = 5"));
      EXPECT_EQ(schema_.QInt(absl::StrCat("SELECT count(*) FROM (", read, ") r")),
                (keys - blocked) * std::stoi(bound));
    }
  }
}

// A read from a part's head with a key bound looks at a window of rows and
// the keys' first items (fragments/ready_keyed.sql). A ready item past both
// is still found when they hold nothing ready: a keyless item behind a key
// whose first items are delayed, and an item of a key past the keys the
// skip scan visits (8 times the limit), behind 17 keys whose first items
// are delayed. Limit 2: a window of 16 rows.
TEST_F(PgStoreTest, AReadFromTheHeadFindsAReadyItemPastItsWindowAndItsKeys) {
  for (const char* bound : {"1", "2"}) {
    SCOPED_TRACE(absl::StrCat("key bound ", bound));
    const std::string q1 = absl::StrCat("keyless", bound), q2 = absl::StrCat("farkey", bound);
    MakeQueue(q1, 1, absl::Seconds(10), /*ordered=*/true);
    MakeQueue(q2, 1, absl::Seconds(10), /*ordered=*/true);
    for (int i = 0; i < 22; ++i) ASSERT_OK(store_->Enqueue(q1, Keyed("a", absl::StrCat(i))));
    NewItem keyless;
    keyless.payload = "keyless";
    ASSERT_OK(store_->Enqueue(q1, keyless));
    for (int k = 0; k < 17; ++k) {
      for (int i = 0; i < 3; ++i) {
        ASSERT_OK(
            store_->Enqueue(q2, Keyed(absl::StrCat(k < 10 ? "k0" : "k", k), absl::StrCat(i))));
      }
    }
    ASSERT_OK(store_->Enqueue(q2, Keyed("z", "z")));
    // Each key's first `bound` items come due in an hour.
    for (const std::string& q : {q1, q2}) {
      schema_.Q(absl::StrCat(
          "UPDATE {schema}.items SET run_at = now() + interval '1 hour' WHERE id IN (SELECT id "
          "FROM "
          "(SELECT id, row_number() OVER (PARTITION BY key ORDER BY id) AS n FROM {schema}.items "
          "WHERE queue = '",
          q, "' AND key IS NOT NULL AND key <> 'z') f WHERE n <= ", bound, ")"));
    }
    auto read = [&](const std::string& q) {
      return schema_.Q(absl::StrCat(
          "SELECT convert_from(payload, 'UTF8') FROM (",
          WithSchema(pg_internal::ReadyItems(absl::StrCat("'", q, "'"), "0", "(-32768)",
                                             "'-9223372036854775808'::bigint", "(-32768)",
                                             "'-9223372036854775808'::bigint", "'{}'::bigint[]",
                                             bound, "2", ""),
                     schema_.name()),
          ") r"));
    };
    const auto got1 = read(q1);
    ASSERT_EQ(got1.size(), 1u);
    EXPECT_EQ(got1[0][0].value_or(""), "keyless");
    const auto got2 = read(q2);
    ASSERT_EQ(got2.size(), 1u);
    EXPECT_EQ(got2[0][0].value_or(""), "z");
  }
}

// The general path's ack with a claim ahead (here of two parts, which the
// pipelined ack does not take) also runs after the plan guard, generic.
TEST_F(FinishTest, AnAckClaimingTwoPartsAheadRunsAGenericPlan) {
  MakeQueue("two", 2);
  for (int i = 0; i < 6; ++i) {
    ASSERT_OK(store_->Enqueue("two", Keyed(absl::StrCat("k", i), absl::StrCat("p", i))));
  }
  auto store = schema_.NewStore();
  Member m = JoinWith(*store, "two", {0, 1});
  ASSERT_OK_AND_ASSIGN(std::vector<Item> first, store->Claim(ClaimAll("two", m, 1)));
  ASSERT_EQ(first.size(), 1u);
  FinishRequest req = FinishOf("two", m, first);
  req.next = [&]() -> std::optional<ClaimRequest> {
    ClaimRequest c = ClaimAll("two", m, 100, first);
    c.include_suspect = false;
    return c;
  };
  ASSERT_OK_AND_ASSIGN(FinishResult r, store->Finish(req, AckAll()));
  EXPECT_EQ(r.acked, Ids(first));
  EXPECT_EQ(r.next.size(), 5u);
  for (const Item& i : r.next) EXPECT_NE(i.id, first[0].id);
  const auto counts = PlanCounts(*store, "two", pg_internal::kPipelinedLeanAckClaim);
  ASSERT_TRUE(counts.has_value());
  EXPECT_EQ(counts->first, 1);
  EXPECT_EQ(counts->second, 0);
}

// A one-part claim ahead goes with the ack in one pipelined flight and comes
// back in PostgreSQL's binary format; its items are the ones a claim through
// the text protocol returns, field by field, and its claim record lists them.
TEST_F(FinishTest, AnAckClaimingOnePartAheadReturnsItemsAsAClaimDoes) {
  MakeQueue("one", 1);
  for (int i = 0; i < 5; ++i) {
    NewItem it = Keyed(absl::StrCat("k\xc3\xa9y-", i),
                       std::string("\x00\xff\\x", 4) + "p" + std::to_string(i));
    it.dedup_key = absl::StrCat("d-", i);
    it.priority = i % 2 ? -3 : 7;
    ASSERT_OK(store_->Enqueue("one", it));
  }
  Member m = JoinWith(*store_, "one", {0});
  ASSERT_OK_AND_ASSIGN(std::vector<Item> first, store_->Claim(ClaimAll("one", m, 1)));
  ASSERT_EQ(first.size(), 1u);
  FinishRequest req = FinishClaimingAhead("one", m, first, 100);
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(req, AckAll()));
  ASSERT_EQ(r.acked, std::vector<int64_t>{first[0].id});
  ASSERT_EQ(r.next.size(), 4u);
  EXPECT_TRUE(r.next_begun);
  EXPECT_EQ(Count("results", "dedup_key = 'd-0' OR dedup_key = 'd-1'"), 1) << "the acked one";
  EXPECT_EQ(schema_.QInt("SELECT cardinality(ids) FROM {schema}.part_claims WHERE queue = 'one'"),
            4);
  // A claim is a read: the same four again, through the text protocol.
  auto other = schema_.NewStore();
  ASSERT_OK_AND_ASSIGN(std::vector<Item> text, other->Claim(ClaimAll("one", m, 100)));
  ASSERT_EQ(text.size(), 4u);
  auto by_id = [](std::vector<Item> v) {
    std::sort(v.begin(), v.end(), [](const Item& a, const Item& b) { return a.id < b.id; });
    return v;
  };
  const std::vector<Item> bin = by_id(r.next), txt = by_id(text);
  for (size_t i = 0; i < bin.size(); ++i) {
    SCOPED_TRACE(bin[i].id);
    EXPECT_EQ(bin[i].id, txt[i].id);
    EXPECT_EQ(bin[i].part, txt[i].part);
    EXPECT_EQ(bin[i].key, txt[i].key);
    EXPECT_EQ(bin[i].dedup_key, txt[i].dedup_key);
    EXPECT_EQ(bin[i].priority, txt[i].priority);
    EXPECT_EQ(bin[i].attempts, txt[i].attempts);
    EXPECT_EQ(bin[i].payload, txt[i].payload);
    EXPECT_EQ(bin[i].claim_epoch, txt[i].claim_epoch);
    EXPECT_EQ(bin[i].locator, txt[i].locator);
    EXPECT_FALSE(bin[i].suspect);
    // The text form goes through a float8 of seconds, which may round the
    // last microsecond.
    EXPECT_LE(absl::AbsDuration(bin[i].enqueued_at - txt[i].enqueued_at), absl::Microseconds(1));
    EXPECT_LE(absl::AbsDuration(bin[i].run_at - txt[i].run_at), absl::Microseconds(1));
  }
  EXPECT_EQ(bin[0].payload.size(), 6u);
  EXPECT_TRUE(PipelinedClaimRan(*store_, "one"))
      << "the pipelined form ran";
}

// A handler that returns results (exec, HTTP and SQL handlers do) is acked
// by the pipelined ack too, in its form that writes them: with and without
// a claim ahead, each result exactly as given, a results row for an item
// with a dedup key and none for an item with neither. Before, any result
// sent the batch down the general path (partq_result drained at 0.31x of
// the floor against partq's 0.50x, docs/benchmarks-history.md).
TEST_F(FinishTest, AnAckWithResultsRunsPipelinedAndKeepsEachResult) {
  MakeQueue("one", 1);
  std::vector<int64_t> ids;
  for (int i = 0; i < 8; ++i) {
    NewItem it = Payload(absl::StrCat(i));
    if (i % 4 == 3) it.dedup_key = absl::StrCat("d-", i);
    ASSERT_OK_AND_ASSIGN(EnqueueResult e, store_->Enqueue("one", it));
    ids.push_back(e.id);
  }
  Member m = JoinWith(*store_, "one", {0});
  // Items 1, 5 and 7 (which has a dedup key) get no result; every other one
  // gets its payload, after a NUL and a high byte; item 2 an empty one.
  auto result_of = [](const Item& i) -> std::optional<std::string> {
    const std::string payload = i.payload;
    if (payload == "1" || payload == "5" || payload == "7") return std::nullopt;
    if (payload == "2") return std::string();
    return absl::StrCat(std::string("\x00\xfe", 2), payload);
  };
  const FinishBody body = AckWithResults(result_of);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> first, store_->Claim(ClaimAll("one", m, 1)));
  ASSERT_EQ(first.size(), 1u);
  ASSERT_OK_AND_ASSIGN(FinishResult r,
                       store_->Finish(FinishClaimingAhead("one", m, first, 7), body));
  EXPECT_EQ(r.acked.size(), 1u);
  ASSERT_EQ(r.next.size(), 7u);
  EXPECT_TRUE(PipelinedClaimRan(*store_, "one", /*results=*/true))
      << "the claim ahead's pipelined form with results ran";
  ASSERT_OK_AND_ASSIGN(FinishResult r2, store_->Finish(FinishOf("one", m, r.next), body));
  EXPECT_EQ(r2.acked.size(), 7u);
  EXPECT_TRUE(Prepared(*store_, "one", pg_internal::ResultsName(pg_internal::kPipelinedAck)))
      << "the pipelined ack's form with results ran";
  std::vector<Item> all = first;
  all.insert(all.end(), r.next.begin(), r.next.end());
  for (const Item& i : all) {
    SCOPED_TRACE(i.payload);
    ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("one", i.id));
    EXPECT_EQ(st.kind, ItemState::Kind::kDone);
    EXPECT_EQ(st.result, result_of(i));
  }
  // Items 1 and 5 have neither a result nor a dedup key: no row; 3 has
  // both, 7 a dedup key alone.
  EXPECT_EQ(Count("results", "queue = 'one'"), 6);
  EXPECT_EQ(Count("results", "queue = 'one' AND dedup_key IS NOT NULL AND result IS NOT NULL"), 1);
  EXPECT_EQ(Count("results", "queue = 'one' AND dedup_key = 'd-7' AND result IS NULL"), 1);
  EXPECT_EQ(Count("items", "queue = 'one'"), 0);
  // Each ack committed through its pipelined form: no general statement
  // (which would have written the same rows after a refused flight) ran.
  for (const char* general : {"ack", pg_internal::kPipelinedLeanAckClaim,
                              pg_internal::kPipelinedFinish, pg_internal::kPipelinedFinishClaim}) {
    EXPECT_FALSE(Prepared(*store_, "one", general)) << general;
  }
}

// A batch with results whose claim ahead reads two parts takes the general
// path's lean statement, which sends the results as hex text: they are
// stored as given there too.
TEST_F(FinishTest, AnAckWithResultsOnTheGeneralPathKeepsEachResult) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_)));
  ASSERT_EQ(items.size(), 6u);
  const FinishBody body = AckWithResults(
      [](const Item& i) { return absl::StrCat(std::string("\x00\xff", 2), i.payload); });
  FinishRequest req = FinishOf("q", member_, items);
  req.next = [&]() -> std::optional<ClaimRequest> { return ClaimAll("q", member_); };
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(req, body));
  EXPECT_EQ(r.acked.size(), 6u);
  EXPECT_TRUE(Prepared(*store_, "q", pg_internal::kPipelinedLeanAckClaim))
      << "the claim of two parts took the lean general statement";
  for (const Item& i : items) {
    ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("q", i.id));
    EXPECT_EQ(st.result, absl::StrCat(std::string("\x00\xff", 2), i.payload));
  }
}

// A claim ahead runs in the ack's transaction, which began before the
// handler ran. It must see an item enqueued meanwhile (an urgent one, whose
// notice sends this very claim to the head): ready means ready when the claim
// reads, not when the transaction began. Regression: it compared run_at with
// now(), the transaction's start, missed the item and used up its notice; the
// consumer then took it only after the rest of the backlog.
TEST_F(FinishTest, AClaimAheadSeesAnItemEnqueuedWhileTheHandlerRan) {
  MakeQueue("one", 1);
  for (int i = 0; i < 3; ++i) ASSERT_OK(store_->Enqueue("one", Payload(absl::StrCat(i))));
  Member m = JoinWith(*store_, "one", {0});
  auto other = schema_.NewStore();
  // Pipelined (no suspect probe), then the general statement (with one).
  for (bool probe : {false, true}) {
    SCOPED_TRACE(probe ? "general" : "pipelined");
    ASSERT_OK_AND_ASSIGN(std::vector<Item> batch, store_->Claim(ClaimAll("one", m, 1)));
    ASSERT_EQ(batch.size(), 1u);
    std::optional<int64_t> urgent;
    FinishBody body = [&](Tx&,
                          absl::Span<const Item> given) -> absl::StatusOr<std::vector<Outcome>> {
      absl::SleepFor(absl::Milliseconds(20));  // the transaction began before this
      NewItem u = Payload("urgent");
      u.priority = -1;
      absl::StatusOr<EnqueueResult> r = other->Enqueue("one", u);
      if (!r.ok()) return r.status();
      urgent = r->id;
      std::vector<Outcome> out;
      for (const Item& i : given) out.push_back(Outcome{i.id, i.part});
      return out;
    };
    FinishRequest req = FinishOf("one", m, batch);
    req.next = [&]() -> std::optional<ClaimRequest> {
      ClaimRequest c = ClaimAll("one", m, 1);  // from the head, as after a notice
      c.include_suspect = probe;
      return c;
    };
    ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(req, body));
    ASSERT_EQ(r.acked.size(), 1u);
    ASSERT_TRUE(urgent.has_value());
    ASSERT_EQ(r.next.size(), 1u);
    EXPECT_EQ(r.next[0].id, *urgent) << "the urgent item was not ready for the claim ahead";
    ASSERT_OK(store_->Finish(FinishOf("one", m, r.next), AckAll()));
  }
  EXPECT_TRUE(PipelinedClaimRan(*store_, "one"));
}

// The pipelined ack is refused when a part was lost: nothing of that attempt
// commits, not the handler's writes, not the claim record it wrote; the second
// attempt, locking first, reports the items fenced.
TEST_F(FinishTest, AnAckClaimingAheadThatLostItsPartCommitsNothingOfThatAttempt) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_)));
  ASSERT_EQ(items.size(), 6u);
  std::vector<Item> part0, part1;
  for (const Item& i : items) (i.part == 0 ? part0 : part1).push_back(i);
  ASSERT_FALSE(part0.empty());
  ASSERT_OK(store_->ReleaseParts("q", member_.join.id, {member_.parts[0]}));
  auto other = schema_.NewStore();
  Member b = JoinWith(*other, "q", {0});
  ASSERT_EQ(b.parts.size(), 1u);
  FinishRequest req = FinishOf("q", member_, part0);
  req.next = [&]() -> std::optional<ClaimRequest> {
    ClaimRequest c = ClaimAll("q", member_, 100, part1);
    c.parts.erase(c.parts.begin());  // part 1 only
    c.include_suspect = false;
    return c;
  };
  std::vector<int64_t> handled;
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(req, Record(Outcome::Kind::kAck, &handled)));
  std::sort(r.fenced.begin(), r.fenced.end());
  EXPECT_EQ(r.fenced, Ids(part0));
  EXPECT_TRUE(r.acked.empty());
  EXPECT_TRUE(handled.empty()) << "the run that committed was given nothing";
  EXPECT_TRUE(r.next.empty()) << "part 1's items are all in flight";
  EXPECT_EQ(Count("effects"), 0);
  EXPECT_EQ(Count("items"), 6);
  EXPECT_EQ(Count("part_claims",
                  absl::StrCat("part = 0 AND epoch = ", b.parts[0].epoch.value, " AND ids = '{}'")),
            1)
      << "the new owner's record is its own";
  EXPECT_TRUE(PipelinedClaimRan(*store_, "q"))
      << "the pipelined form was tried";
}

// A COMMIT can fail after the ack statement succeeded (a deferred constraint
// of the handler's writes): then nothing commits and the error is returned.
TEST_F(FinishTest, AnAckWhoseCommitFailsLeavesEverythingAsItWas) {
  schema_.Q("CREATE TABLE {schema}.parents (id int PRIMARY KEY)");
  schema_.Q(
      "CREATE TABLE {schema}.children (parent int REFERENCES {schema}.parents "
      "DEFERRABLE INITIALLY DEFERRED)");
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_, 2)));
  ASSERT_FALSE(items.empty());
  FinishRequest req = FinishOf("q", member_, items);
  req.begin_next = true;
  req.next = [&]() -> std::optional<ClaimRequest> {
    ClaimRequest c = ClaimAll("q", member_, 100, items);
    c.parts.resize(1);
    c.include_suspect = false;
    return c;
  };
  absl::StatusOr<FinishResult> r = store_->Finish(
      req, [&](Tx& tx, absl::Span<const Item> given) -> absl::StatusOr<std::vector<Outcome>> {
        auto w = tx.Exec(absl::StrCat("INSERT INTO \"", tx.schema(), "\".children VALUES (42)"));
        if (!w.ok()) return w.status();
        std::vector<Outcome> out;
        for (const Item& i : given) out.push_back(Outcome{i.id, i.part});
        return out;
      });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "children")) << r.status();
  EXPECT_EQ(Count("items"), 6);
  EXPECT_EQ(Count("children"), 0);
  // The connection is usable and the items are still ours to finish.
  ASSERT_OK_AND_ASSIGN(FinishResult ok, store_->Finish(FinishOf("q", member_, items), AckAll()));
  EXPECT_EQ(ok.acked.size(), items.size());
  EXPECT_EQ(Count("items"), static_cast<int64_t>(6 - items.size()));
}

// The connection breaks after the handler ran, so the pipelined ack and its
// COMMIT may or may not have reached the server: Finish says so, and
// finishing the items again acks each exactly once.
TEST_F(PgStoreTest, AConnectionLostAroundThePipelinedCommitIsInDoubt) {
  MakeQueue("q", 1);
  for (int i = 0; i < 3; ++i) ASSERT_OK(store_->Enqueue("q", Payload("x")));
  schema_.Q("CREATE TABLE {schema}.effects (item_id bigint)");
  PgOptions o = schema_.options();
  o.application_name = absl::StrCat("pgtest_", schema_.name());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, ConnectPg(o));
  Member m = JoinWith(*store, "q", {0});
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store->Claim(ClaimAll("q", m)));
  ASSERT_EQ(items.size(), 3u);
  const std::string pid_sql = absl::StrCat(
      "SELECT pid FROM pg_stat_activity WHERE application_name = '", o.application_name, "'");
  auto record_and_cut = [&](Tx& tx,
                            absl::Span<const Item> given) -> absl::StatusOr<std::vector<Outcome>> {
    std::vector<Outcome> out;
    for (const Item& i : given) {
      auto w = tx.Exec(absl::StrCat("INSERT INTO \"", tx.schema(), "\".effects VALUES ($1)"),
                       {std::to_string(i.id)});
      if (!w.ok()) return w.status();
      out.push_back(Outcome{i.id, i.part});
    }
    auto pids = testing::Query(schema_.dsn(), pid_sql);
    EXPECT_EQ(pids.size(), 1u);
    if (!pids.empty()) {
      testing::Query(schema_.dsn(), absl::StrCat("SELECT pg_terminate_backend(", *pids[0][0], ")"));
    }
    EXPECT_TRUE(WaitUntil([&] { return testing::Query(schema_.dsn(), pid_sql).empty(); }));
    return out;
  };
  absl::StatusOr<FinishResult> cut = store->Finish(FinishOf("q", m, items), record_and_cut);
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kUnavailable) << cut.status();
  EXPECT_TRUE(absl::StrContains(cut.status().message(), "may or may not have committed"))
      << cut.status();
  // The next call reconnects; finishing the same claim acks what is left.
  ASSERT_OK_AND_ASSIGN(FinishResult again, store->Finish(FinishOf("q", m, items), AckAll()));
  EXPECT_EQ(again.acked.size() + again.fenced.size(), 3u);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items"), 0);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.effects"),
            3 - static_cast<int64_t>(again.acked.size()))
      << "the handler's writes committed exactly when its ack did";
}

// The pipelined ack deletes by ctid alone and then compares the ids it
// deleted. An item finished elsewhere whose slot vacuum freed and a new item
// took: the ack's ctid now names the new item. The flight is refused, the
// new item survives, and the second attempt acks the others and reports the
// finished one as not ours.
TEST_F(PgStoreTest, AnAckWhoseCtidNowHoldsAnotherItemLeavesThatItemAlone) {
  MakeQueue("q", 1);
  for (int i = 0; i < 3; ++i) ASSERT_OK(store_->Enqueue("q", Payload(absl::StrCat("old-", i))));
  Member m = JoinWith(*store_, "q", {0});
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", m)));
  ASSERT_EQ(items.size(), 3u);
  const Item& gone = items[1];
  const std::string ctid =
      schema_.Q(absl::StrCat("SELECT ctid::text FROM {schema}.items WHERE id = ", gone.id))[0][0]
          .value();
  schema_.Q(absl::StrCat("DELETE FROM {schema}.items WHERE id = ", gone.id));
  // Once vacuum has freed the line pointer, the next insert on that page
  // takes it. Vacuum frees it only when no transaction in the database can
  // still see the deleted row (on a shared test server, other tests' may),
  // so it runs again before every try.
  std::optional<int64_t> squatter;
  EXPECT_TRUE(WaitUntil([&] {
    schema_.Q("VACUUM {schema}.items");
    absl::StatusOr<EnqueueResult> r = store_->Enqueue("q", Payload("new"));
    if (!r.ok()) return false;
    auto at = schema_.Q(absl::StrCat("SELECT ctid::text FROM {schema}.items WHERE id = ", r->id));
    if (at[0][0] == ctid) squatter = r->id;
    return squatter.has_value();
  }));
  ASSERT_TRUE(squatter.has_value()) << "no new item took " << ctid;
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(FinishOf("q", m, items), AckAll()));
  EXPECT_EQ(r.fenced, std::vector<int64_t>{gone.id});
  std::vector<int64_t> acked = r.acked;
  std::sort(acked.begin(), acked.end());
  EXPECT_EQ(acked, (std::vector<int64_t>{items[0].id, items[2].id}));
  EXPECT_EQ(Count("items", absl::StrCat("id = ", *squatter)), 1) << "the new item was deleted";
  EXPECT_EQ(Count("items", absl::StrCat("id IN (", items[0].id, ",", items[2].id, ")")), 0);
  EXPECT_TRUE(Prepared(*store_, "q", pg_internal::kPipelinedAck)) << "the pipelined form was tried";
}

// --- dead-letter topic ------------------------------------------------------------------

class DeadLetterTopicTest : public PgStoreTest {
 protected:
  // Ingests `messages` (partition 0 of "events", offsets from 0) into `queue`
  // as the bridge does.
  void Ingest(const std::string& queue, const std::vector<KafkaMessage>& messages) {
    KafkaIngestRequest r;
    r.queue = queue;
    r.messages = messages;
    r.offsets = {{"events", 0, std::nullopt, messages.back().offset + 1}};
    ASSERT_OK(bridge_->IngestKafka(r));
  }
  static KafkaMessage Message(int64_t offset, std::optional<std::string> key,
                              std::optional<std::string> headers = std::nullopt) {
    return {"events", 0, offset, std::move(key), absl::StrCat("m", offset), std::move(headers)};
  }
  // Claims everything in `queue` and finishes it: payload "ok" is acked,
  // "again" retried (a last attempt with max_attempts 1), the rest dead with
  // the error "boom <payload>". Returns item ids by payload.
  std::map<std::string, int64_t> FinishAll(const std::string& queue) {
    std::map<std::string, int64_t> ids;
    if (!members_.count(queue)) members_[queue] = JoinWith(*store_, queue, kAllParts);
    const Member& m = members_[queue];
    absl::StatusOr<std::vector<Item>> items = store_->Claim(ClaimAll(queue, m));
    EXPECT_TRUE(items.ok()) << items.status();
    if (!items.ok()) return ids;
    for (const Item& i : *items) ids[i.payload] = i.id;
    FinishBody body = [](Tx&, absl::Span<const Item> owned) {
      std::vector<Outcome> out;
      for (const Item& i : owned) {
        Outcome o{i.id, i.part, Outcome::Kind::kDead};
        if (i.payload == "ok") o.kind = Outcome::Kind::kAck;
        if (i.payload == "again") o.kind = Outcome::Kind::kRetry;
        o.error = absl::StrCat("boom ", i.payload);
        out.push_back(o);
      }
      return absl::StatusOr<std::vector<Outcome>>(out);
    };
    FinishRequest req = FinishOf(queue, m, *items);
    req.max_attempts = 1;
    absl::StatusOr<FinishResult> r = store_->Finish(req, body);
    EXPECT_TRUE(r.ok()) << r.status();
    return ids;
  }
  // The outbox, one row per message: topic, hex key (nullopt: none), payload,
  // and the headers as "key=value|..." in order (binary values as hex:...).
  std::vector<std::vector<std::optional<std::string>>> Outbox() {
    return schema_.Q(R"(
        SELECT topic, encode(key, 'hex'), convert_from(payload, 'UTF8'),
               (SELECT string_agg((h->>'key') || '=' ||
                                  coalesce(h->>'value', 'hex:' || (h->>'value_hex'), 'null'),
                                  '|' ORDER BY n)
                FROM jsonb_array_elements(headers) WITH ORDINALITY AS x(h, n))
        FROM {schema}.outbox ORDER BY id)");
  }
  static std::string Context(const std::string& origin, const std::string& error,
                             const std::string& queue, int64_t id) {
    return absl::StrCat(origin, "__connect.errors.exception.message=", error,
                        "|partq.errors.attempts=1|partq.errors.queue=", queue,
                        "|partq.errors.item.id=", id);
  }
  static std::string Origin(int64_t offset) {
    return absl::StrCat(
        "__connect.errors.topic=events|__connect.errors.partition=0|"
        "__connect.errors.offset=",
        offset, "|");
  }

  std::map<std::string, Member> members_;  // by queue: one session owns every part
};

TEST_F(DeadLetterTopicTest, FinishWritesOneOutboxRowPerDeadItemWithContextHeaders) {
  QueueConfig c;
  c.name = "orders";
  c.parts = 2;
  c.max_attempts = 1;
  c.dlq_topic = "orders.dlq";
  ASSERT_OK(store_->CreateQueue(c));
  Ingest("orders",
         {Message(0, std::string("k1"),
                  R"([{"key":"seq","value":"0"},{"key":"bin","value_hex":"ff00"},)"
                  R"({"key":"nil","value":null}])"),
          Message(1, std::string("\xff\x00z", 3)),
          // A plain key that looks like the hex form, and a header that a
          // replayed dead letter would carry: both come back as they were.
          Message(2, std::string("\\x41"), R"([{"key":"__connect.errors.topic","value":"older"}])"),
          Message(3, std::nullopt)});
  // Items that never came from Kafka: no origin headers; a key is its text.
  ASSERT_OK(store_->Enqueue("orders", Keyed("\\x41", "local")));
  ASSERT_OK(store_->Enqueue("orders", Payload("ok")));
  ASSERT_OK(store_->Enqueue("orders", Payload("again")));
  std::map<std::string, int64_t> id = FinishAll("orders");
  ASSERT_EQ(id.size(), 7u);
  EXPECT_EQ(Count("items"), 0);
  EXPECT_EQ(Count("dead_items"), 6);

  auto rows = Outbox();
  ASSERT_EQ(rows.size(), 6u);  // every dead item once; the acked one not
  using Row = std::vector<std::optional<std::string>>;
  const std::optional<std::string> kNone;
  EXPECT_EQ(rows[0], (Row{"orders.dlq", "6b31", "m0",
                          "seq=0|bin=hex:ff00|nil=null|" +
                              Context(Origin(0), "boom m0", "orders", id["m0"])}));
  EXPECT_EQ(rows[1],
            (Row{"orders.dlq", "ff007a", "m1", Context(Origin(1), "boom m1", "orders", id["m1"])}));
  EXPECT_EQ(rows[2], (Row{"orders.dlq", "5c783431", "m2",
                          "__connect.errors.topic=older|" +
                              Context(Origin(2), "boom m2", "orders", id["m2"])}));
  EXPECT_EQ(rows[3],
            (Row{"orders.dlq", kNone, "m3", Context(Origin(3), "boom m3", "orders", id["m3"])}));
  EXPECT_EQ(rows[4], (Row{"orders.dlq", "5c783431", "local",
                          Context("", "boom local", "orders", id["local"])}));
  // A retry that used up max_attempts dies the same way.
  EXPECT_EQ(rows[5],
            (Row{"orders.dlq", kNone, "again", Context("", "boom again", "orders", id["again"])}));
  // The dead items keep their origin and headers.
  EXPECT_EQ(Count("dead_items",
                  "origin_topic = 'events' AND origin_partition = 0 AND "
                  "origin_offset BETWEEN 0 AND 3"),
            4);
  EXPECT_EQ(Count("dead_items", "headers @> '[{\"key\":\"seq\",\"value\":\"0\"}]'"), 1);
  EXPECT_EQ(Count("dead_items", "payload = 'local' AND origin_topic IS NULL"), 1);
  // What the publisher reads back: the key's raw bytes.
  ASSERT_OK_AND_ASSIGN(std::vector<OutboxRow> out, bridge_->ReadOutbox(10));
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[1].key, std::optional<std::string>(std::string("\xff\x00z", 3)));
  EXPECT_EQ(out[2].key, std::optional<std::string>("\\x41"));
}

TEST_F(DeadLetterTopicTest, AQueueWithoutATopicWritesNoOutboxRow) {
  MakeQueue("plain", 2, absl::Seconds(10), false, /*max_attempts=*/1);
  Ingest("plain", {Message(0, std::string("k")), Message(1, std::nullopt)});
  ASSERT_OK(store_->Enqueue("plain", Payload("local")));
  EXPECT_EQ(FinishAll("plain").size(), 3u);
  EXPECT_EQ(Count("dead_items"), 3);
  EXPECT_EQ(Count("outbox"), 0);
  // Set later, it applies to items that die from then on.
  ASSERT_OK(store_->SetDeadLetterTopic("plain", std::string("plain.dlq")));
  ASSERT_OK(store_->Enqueue("plain", Payload("later")));
  EXPECT_EQ(FinishAll("plain").size(), 1u);
  auto rows = Outbox();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][0], std::optional<std::string>("plain.dlq"));
  EXPECT_EQ(rows[0][2], std::optional<std::string>("later"));
}

// A requeued dead item keeps its Kafka origin, and the owner of its part
// hears of it as of an enqueue.
TEST_F(DeadLetterTopicTest, RequeuedDeadItemsKeepTheirKafkaOriginAndWakeTheOwner) {
  MakeQueue("plain", 2, absl::Seconds(10), false, /*max_attempts=*/1);
  Ingest("plain", {Message(0, std::string("k"))});
  std::map<std::string, int64_t> ids = FinishAll("plain");
  ASSERT_EQ(Count("dead_items"), 1);
  ASSERT_OK_AND_ASSIGN(std::vector<DeadItem> dead, store_->ListDead("plain", 10));
  ASSERT_EQ(dead.size(), 1u);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Listener> listener, store_->Listen("plain"));
  ASSERT_OK_AND_ASSIGN(Requeued r, store_->RequeueDead("plain", {ids["m0"]}));
  EXPECT_EQ(r.requeued, 1);
  ASSERT_OK_AND_ASSIGN(std::vector<Notice> heard, listener->Wait(absl::Seconds(5)));
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0].kind, Notice::Kind::kItems);
  EXPECT_EQ(heard[0].part, dead[0].part);
  EXPECT_EQ(Count("items", absl::StrCat("id = ", ids["m0"],
                                        " AND origin_topic = 'events' AND attempts = 0 AND "
                                        "run_at <= now()")),
            1);
  EXPECT_EQ(Count("dead_items"), 0);
}

// --- claim and finish at volume --------------------------------------------------------

TEST_F(PgStoreTest, ClaimAndFinishBatchesOfAHundred) {
  MakeQueue("q", 8);
  std::vector<NewItem> items(10000, Payload(std::string(100, 'p')));
  ASSERT_OK(store_->EnqueueBatch("q", items));
  Member m = JoinWith(*store_, "q", kAllParts);
  absl::Duration claim_time, finish_time;
  int batches = 0;
  int64_t acked = 0;
  ClaimRequest req = ClaimAll("q", m, 100);
  for (; batches < 50; ++batches) {
    const absl::Time t0 = absl::Now();
    ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store_->Claim(req));
    const absl::Time t1 = absl::Now();
    ASSERT_GE(got.size(), 96u);       // 8 parts x 12
    for (ClaimPart& p : req.parts) {  // on from each part's cursor, as the consumer goes
      for (const Item& i : got) {
        if (i.part == p.part) p.after = ItemKey{i.priority, i.id};
      }
    }
    ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(FinishOf("q", m, got), AckAll()));
    finish_time += absl::Now() - t1;
    claim_time += t1 - t0;
    ASSERT_EQ(r.acked.size(), got.size());
    acked += static_cast<int64_t>(got.size());
  }
  std::printf("[ perf ] batch of 100: claim %.2f ms, finish (ack) %.2f ms, %.0f items/s\n",
              absl::ToDoubleMilliseconds(claim_time) / batches,
              absl::ToDoubleMilliseconds(finish_time) / batches,
              acked / absl::ToDoubleSeconds(claim_time + finish_time));
  EXPECT_EQ(Count("items"), 10000 - acked);
}

// Joining and taking parts over read a dead owner's claimed items by id,
// whatever the statistics say: taken while the queue was empty (as they
// mostly are for a queue that keeps up), they made the planner read the
// whole queue through items_ready in every join and acquisition, seconds
// each under a backlog of millions (issue 27's soak).
TEST_F(PgStoreTest, JoinAndTakeOverReadItemsByIdWhateverTheStatistics) {
  MakeQueue("q", 4);
  // Statistics of an empty table, then a backlog they do not know of.
  testing::Query(schema_.dsn(), absl::StrCat("ALTER TABLE ", schema_.name(),
                                             ".items SET (autovacuum_enabled = false); ANALYZE ",
                                             schema_.name(), ".items"));
  std::vector<NewItem> items(20000, Payload("x"));
  ASSERT_OK(store_->EnqueueBatch("q", items));
  std::map<std::string, std::string> args = {{"acquire", "'q', gen_random_uuid(), '{0,1}'::int[]"},
                                             {"join", "'q', 'worker-1', 'host', 1, 'chan'"}};
  for (const pg_internal::Statement& st : pg_internal::PreparedStatements(schema_.name())) {
    auto it = args.find(st.name);
    if (it == args.end()) continue;
    SCOPED_TRACE(st.name);
    // One connection: the plan of the statement's first runs, made for
    // these arguments.
    const std::string explain =
        absl::StrCat("PREPARE s AS ", st.sql, "; EXPLAIN EXECUTE s(", it->second, ")");
    std::string plan;
    for (const auto& row : testing::Query(schema_.dsn(), explain)) plan += *row[0] + "\n";
    EXPECT_FALSE(absl::StrContains(plan, "items_ready")) << plan;
    EXPECT_FALSE(absl::StrContains(plan, "Seq Scan on items")) << plan;
    EXPECT_TRUE(absl::StrContains(plan, "items_pkey")) << plan;
    // And no other way in: without items_pkey, and with table scans priced
    // out, no index of items may be entered by part. The items' part was a
    // join condition once (`i.part = l.part`), and through it the planner
    // walked items_ready whenever a busy part's claim records (thousands of
    // dead index entries in part_claims) looked dearer than that walk, which
    // reads the whole index (the part is its second column): 0.4-1.1 s per
    // acquisition of one part in issue 27's soak, more under a backlog.
    const auto lines =
        schema_.Q(absl::StrCat("BEGIN; ALTER TABLE {schema}.items DROP CONSTRAINT items_pkey; "
                               "SET LOCAL enable_seqscan = off; ",
                               explain));
    std::string without;
    for (const auto& row : lines) without += *row[0] + "\n";
    bool items_index = false;  // within a scan of an index of items
    for (const auto& row : lines) {
      const std::string& line = *row[0];
      if (absl::StrContains(line, "->")) {
        items_index =
            absl::StrContains(line, " on items_") || absl::StrContains(line, " using items_");
      } else if (items_index && absl::StrContains(line, "Index Cond:")) {
        EXPECT_FALSE(absl::StrContains(line, "part")) << line << " in\n" << without;
      }
    }
    args.erase(it);
  }
  EXPECT_TRUE(args.empty()) << "statements not found: " << args.begin()->first;
}

// A claim replaces its parts' records (part_claims) and finds each old one by
// its key, an index probe; it deletes that row by its ctid
// (drop_claim_records(), a TID scan). The delete was a join once, and its
// generic plan, with statistics that say a queue has a record or two, read
// every entry of the queue in part_claims_pkey: the dead records of every
// claim since the last vacuum, up to 4-5 ms of an ack with its claim at 5,000
// items/s (issue 51). Every statement that writes or changes a claim record, planned as
// the store plans it (generic, after the plan guard, and also with sequential
// scans allowed), enters part_claims only by queue and part.
TEST_F(PgStoreTest, AClaimDropsItsOldRecordByItsAddressNotByReadingTheQueuesRecords) {
  MakeQueue("q", 4);
  // Statistics of a queue's live records (one a part) as a vacuum leaves
  // them, then the dead records of the claims since.
  schema_.Q(
      "ALTER TABLE {schema}.part_claims SET (autovacuum_enabled = false); "
      "INSERT INTO {schema}.part_claims (queue, part, epoch, ids) "
      "SELECT 'q', g, 2, '{}' FROM generate_series(0, 3) g");
  schema_.Q("VACUUM ANALYZE {schema}.part_claims");
  schema_.Q(
      "INSERT INTO {schema}.part_claims (queue, part, epoch, ids) "
      "SELECT 'q', g % 4, 1, '{}' FROM generate_series(1, 20000) g; "
      "DELETE FROM {schema}.part_claims WHERE epoch = 1");
  std::vector<std::pair<std::string, std::string>> claiming;
  for (const pg_internal::Statement& st : pg_internal::PreparedStatements(schema_.name())) {
    if (absl::StrContains(st.sql, "recorded AS")) claiming.emplace_back(st.name, st.sql);
  }
  for (const auto& [name, sql] : pg_internal::PipelinedStatements(schema_.name())) {
    if (absl::StrContains(sql, "recorded AS")) claiming.emplace_back(name, sql);
  }
  // Every form of claim, ack with claim and general Finish: plain, fair and
  // keyed, byte-bounded or not, all pipelined since d53c386 (the prepared
  // "finish", a copy of the pipelined one nothing ran, is gone too).
  ASSERT_GE(claiming.size(), 27u);
  for (const auto& [name, sql] : claiming) {
    // Every argument NULL: a generic plan does not look at them.
    int params = 0;
    for (size_t i = sql.find('$'); i != std::string::npos; i = sql.find('$', i + 1)) {
      params = std::max(params, std::atoi(sql.c_str() + i + 1));
    }
    std::vector<std::string> nulls(params, "NULL");
    for (const char* guard : {"SET LOCAL enable_seqscan = off; ", ""}) {
      SCOPED_TRACE(absl::StrCat(name, guard[0] ? " after the plan guard" : ""));
      const auto lines = schema_.Q(absl::StrCat(
          "BEGIN; ", guard, "SET LOCAL plan_cache_mode = force_generic_plan; PREPARE s AS ", sql,
          "; EXPLAIN EXECUTE s(", absl::StrJoin(nulls, ", "), ")"));
      std::string plan;
      for (const auto& row : lines) plan += *row[0] + "\n";
      EXPECT_FALSE(absl::StrContains(plan, "Seq Scan on part_claims")) << plan;
      bool records_index = false;  // within a scan of part_claims' index
      for (const auto& row : lines) {
        const std::string& line = *row[0];
        if (absl::StrContains(line, "->")) {
          records_index = absl::StrContains(line, "part_claims_pkey");
        } else if (records_index && absl::StrContains(line, "Index Cond:")) {
          EXPECT_TRUE(absl::StrContains(line, "part =")) << line << " in\n" << plan;
        }
      }
    }
  }
}

// A claim replaces the record its session wrote last (ClaimPart::record, one
// primary-key lookup) with a new row and tells the items which row lists
// them; with none given, or one no longer there, it replaces the part's
// latest. Either way the part has one record.
TEST_F(PgStoreTest, AClaimReplacesTheRecordItIsGivenOrElseThePartsLatest) {
  MakeQueue("q", 1);
  std::vector<NewItem> items(10, Payload("x"));
  ASSERT_OK(store_->EnqueueBatch("q", items));
  Member m = JoinWith(*store_, "q", {0});
  auto records = [&] {
    return testing::Query(schema_.dsn(),
                          absl::StrCat("SELECT seq FROM ", schema_.name(),
                                       ".part_claims WHERE queue = 'q' AND part = 0"));
  };
  ClaimRequest req = ClaimAll("q", m, 2);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> first, store_->Claim(req));
  ASSERT_EQ(first.size(), 2u);
  const int64_t r1 = first[0].claim_record;
  EXPECT_GT(r1, 0);
  EXPECT_EQ(first[1].claim_record, r1);
  ASSERT_EQ(records().size(), 1u);
  EXPECT_EQ(*records()[0][0], absl::StrCat(r1));
  // Given: replaced by a new row.
  req = ClaimAll("q", m, 2, first);
  req.parts[0].after = req.parts[0].cursor = ItemKey{0, first[1].id};
  req.parts[0].record = r1;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> second, store_->Claim(req));
  ASSERT_EQ(second.size(), 2u);
  const int64_t r2 = second[0].claim_record;
  EXPECT_GT(r2, r1);
  ASSERT_EQ(records().size(), 1u);
  EXPECT_EQ(*records()[0][0], absl::StrCat(r2));
  // Not there any more (r1): the latest is replaced.
  std::vector<Item> flying = first;
  flying.insert(flying.end(), second.begin(), second.end());
  req = ClaimAll("q", m, 2, flying);
  req.parts[0].after = req.parts[0].cursor = ItemKey{0, second[1].id};
  req.parts[0].record = r1;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> third, store_->Claim(req));
  ASSERT_EQ(third.size(), 2u);
  ASSERT_EQ(records().size(), 1u);
  EXPECT_EQ(*records()[0][0], absl::StrCat(third[0].claim_record));
  EXPECT_EQ(schema_.QInt("SELECT cardinality(ids) FROM {schema}.part_claims"), 6);
  // The pipelined ack's claim ahead, given the record: the same.
  FinishRequest fin = FinishOf("q", m, third);
  flying.insert(flying.end(), third.begin(), third.end());
  fin.next = [&]() -> std::optional<ClaimRequest> {
    std::vector<Item> others(flying.begin(), flying.end() - 2);
    ClaimRequest c = ClaimAll("q", m, 2, others);
    c.parts[0].after = c.parts[0].cursor = ItemKey{0, third[1].id};
    c.parts[0].record = third[0].claim_record;
    c.include_suspect = false;  // the pipelined form has no suspect probe
    return c;
  };
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(fin, AckAll()));
  ASSERT_EQ(r.next.size(), 2u);
  EXPECT_GT(r.next[0].claim_record, third[0].claim_record);
  ASSERT_EQ(records().size(), 1u);
  EXPECT_EQ(*records()[0][0], absl::StrCat(r.next[0].claim_record));
  EXPECT_TRUE(Prepared(*store_, "q", pg_internal::kPipelinedAckClaimBehind));
}

TEST_F(PgStoreTest, ClaimsWriteNoItemRowsOnlyOneRecordPerPart) {
  MakeQueue("q", 16);
  std::vector<NewItem> items(4000, Payload(std::string(100, 'p')));
  ASSERT_OK(store_->EnqueueBatch("q", items));
  auto store = schema_.NewStore();
  Member m = JoinWith(*store, "q", {0, 1});
  ClaimRequest req = ClaimAll("q", m, 100);
  int64_t claimed = 0, claims = 0;
  for (;; ++claims) {
    ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store->Claim(req));
    if (got.empty()) break;
    claimed += static_cast<int64_t>(got.size());
    for (ClaimPart& p : req.parts) {
      for (const Item& i : got) {
        if (i.part == p.part) p.after = ItemKey{i.priority, i.id};
      }
    }
  }
  ASSERT_GT(claimed, 300);
  EXPECT_EQ(Count("part_claims"), 2);
  store.reset();  // flushes the backend's statistics
  const std::string stats = absl::StrCat(
      "SELECT relname, CASE relname WHEN 'items' THEN n_tup_upd + n_tup_del "
      "ELSE n_tup_upd + n_tup_ins END FROM pg_stat_user_tables WHERE schemaname = '",
      schema_.name(), "' AND relname IN ('items', 'part_claims') ORDER BY relname");
  int64_t item_writes = -1, record_writes = 0;
  EXPECT_TRUE(WaitUntil([&] {
    auto rows = testing::Query(schema_.dsn(), stats);
    if (rows.size() != 2) return false;
    item_writes = std::stoll(*rows[0][1]);
    record_writes = std::stoll(*rows[1][1]);
    return record_writes > 0;
  }));
  EXPECT_EQ(item_writes, 0) << "claims update or delete no item row";
  EXPECT_LE(record_writes, 2 * claims + 2)
      << "one record made per part when it was acquired, then at most one write per part and claim";
  // Records are replaced (a new row, the old one deleted), never updated: a
  // chain of versions of one row is what a held snapshot makes every read
  // walk (migration 9).
  EXPECT_EQ(schema_.QInt(absl::StrCat("SELECT n_tup_upd FROM pg_stat_user_tables WHERE schemaname = '",
                                      schema_.name(), "' AND relname = 'part_claims'")),
            0);
}

// A worker that starts on an idle queue runs its ack statement on a nearly
// empty table first; the generic plan PostgreSQL fixes on the sixth run must
// not scan the whole table once a backlog has come (regression: the ack's
// DELETE was planned as a sequential scan there, 9 ms a batch at 20000 items).
TEST_F(PgStoreTest, AnAckPlannedOnAnEmptyQueueNeverScansTheTable) {
  MakeQueue("q", 1);
  auto store = schema_.NewStore();
  Member m = JoinWith(*store, "q", {0});
  auto drain = [&](int batches, int per_batch) {
    ClaimRequest req = ClaimAll("q", m, per_batch);
    for (int b = 0; b < batches; ++b) {
      absl::StatusOr<std::vector<Item>> got = store->Claim(req);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_FALSE(got->empty());
      req.parts[0].after = ItemKey{got->back().priority, got->back().id};
      absl::StatusOr<FinishResult> r = store->Finish(FinishOf("q", m, *got), AckAll());
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->acked.size(), got->size());
    }
  };
  for (int i = 0; i < 40; ++i) ASSERT_OK(store_->Enqueue("q", Payload("small")));
  drain(8, 5);  // more than the five custom plans: the generic one is fixed now
  std::vector<NewItem> big(20000, Payload("big"));
  ASSERT_OK(store_->EnqueueBatch("q", big));
  drain(40, 100);
  store.reset();  // its backend exits and flushes its statistics
  const auto [seq_scans, deleted] = ItemsScansOnceDeleted(4040);
  EXPECT_EQ(deleted, 4040);
  // The first runs of each statement are custom plans, made for the small
  // table, where a sequential scan is right; after that, none.
  EXPECT_LE(seq_scans, 8) << "acks of the backlog read the whole items table";
}

// The same for the pipelined ack that claims ahead (its plans are generic from
// the first run): a worker whose first batches came from a nearly empty
// queue must not scan the whole table for a backlog.
TEST_F(PgStoreTest, AClaimAheadPlannedOnAnEmptyQueueNeverScansTheTable) {
  MakeQueue("q", 1);
  auto store = schema_.NewStore();
  Member m = JoinWith(*store, "q", {0});
  std::vector<Item> batch;
  auto drain = [&](int batches, int per_batch) {
    for (int b = 0; b < batches; ++b) {
      ClaimRequest next = ClaimAll("q", m, per_batch);
      next.include_suspect = false;
      if (batch.empty()) {
        absl::StatusOr<std::vector<Item>> got = store->Claim(next);
        ASSERT_TRUE(got.ok()) << got.status();
        batch = *got;
      }
      ASSERT_FALSE(batch.empty());
      next.parts[0].after = ItemKey{batch.back().priority, batch.back().id};
      next.parts[0].behind = b % 2 == 0;  // both forms of the claim ahead
      FinishRequest req = FinishOf("q", m, batch);
      req.begin_next = true;
      req.next = [&]() -> std::optional<ClaimRequest> { return next; };
      absl::StatusOr<FinishResult> r = store->Finish(req, AckAll());
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->acked.size(), batch.size());
      batch = r->next;
    }
  };
  for (int i = 0; i < 40; ++i) ASSERT_OK(store_->Enqueue("q", Payload("small")));
  drain(8, 5);  // the generic plans are made on the small table
  ASSERT_TRUE(batch.empty());
  std::vector<NewItem> big(20000, Payload("big"));
  ASSERT_OK(store_->EnqueueBatch("q", big));
  drain(40, 100);
  EXPECT_TRUE(Prepared(*store, "q", pg_internal::kPipelinedAckClaim));
  EXPECT_TRUE(Prepared(*store, "q", pg_internal::kPipelinedAckClaimBehind));
  store.reset();  // its backend exits and flushes its statistics
  const auto [seq_scans, deleted] = ItemsScansOnceDeleted(4040);
  EXPECT_EQ(deleted, 4040);
  // Reads of the small table may scan it (the join, the first claim, custom
  // plans of other statements); one per batch of the backlog would be 40.
  EXPECT_LE(seq_scans, 8) << "acks or claims of the backlog read the whole items table";
}

// The general Finish (a batch with a retry or a dead item, which a queue
// whose exec or http handler fails 1 % of its items sends it most batches)
// runs a generic plan after the plan guard too, from the first run, and
// scans no table for it however small the queue was when it was planned.
TEST_F(PgStoreTest, AFinishWithFailuresRunsAGenericPlanThatNeverScansTheTable) {
  MakeQueue("q", 1);
  auto store = schema_.NewStore();
  Member m = JoinWith(*store, "q", {0});
  // The first item of each batch is retried an hour later, the second dead.
  FinishBody body = [](Tx&, absl::Span<const Item> items) -> absl::StatusOr<std::vector<Outcome>> {
    std::vector<Outcome> out;
    for (size_t k = 0; k < items.size(); ++k) {
      Outcome o{items[k].id, items[k].part};
      if (k < 2) {
        o.kind = k == 0 ? Outcome::Kind::kRetry : Outcome::Kind::kDead;
        o.retry_delay = absl::Hours(1);
        o.error = "failed";
      }
      out.push_back(o);
    }
    return out;
  };
  std::vector<Item> batch;
  int64_t gone = 0;  // acked and dead: deleted from items
  auto drain = [&](int batches, int per_batch) {
    for (int b = 0; b < batches; ++b) {
      ClaimRequest next = ClaimAll("q", m, per_batch);
      next.include_suspect = false;
      if (batch.empty()) {
        absl::StatusOr<std::vector<Item>> got = store->Claim(next);
        ASSERT_TRUE(got.ok()) << got.status();
        batch = *got;
      }
      ASSERT_GE(batch.size(), 2u);
      next.parts[0].after = ItemKey{batch.back().priority, batch.back().id};
      FinishRequest req = FinishOf("q", m, batch);
      req.begin_next = true;
      req.next = [&]() -> std::optional<ClaimRequest> { return next; };
      absl::StatusOr<FinishResult> r = store->Finish(req, body);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->retried.size(), 1u);
      ASSERT_EQ(r->dead.size(), 1u);
      gone += static_cast<int64_t>(r->acked.size() + r->dead.size());
      batch = r->next;
    }
    // Without a claim ahead: the other form.
    ASSERT_OK_AND_ASSIGN(FinishResult last, store->Finish(FinishOf("q", m, batch), body));
    ASSERT_EQ(last.dead.size(), 1u);
    gone += static_cast<int64_t>(last.acked.size() + last.dead.size());
    batch.clear();
  };
  for (int i = 0; i < 40; ++i) ASSERT_OK(store_->Enqueue("q", Payload("small")));
  drain(6, 5);  // the generic plans are made on the small table
  std::vector<NewItem> big(20000, Payload("big"));
  ASSERT_OK(store_->EnqueueBatch("q", big));
  drain(40, 100);
  for (const char* name : {pg_internal::kPipelinedFinishClaim, pg_internal::kPipelinedFinish}) {
    const auto counts = PlanCounts(*store, "q", name);
    ASSERT_TRUE(counts.has_value()) << name << " did not run";
    EXPECT_GT(counts->first, 0) << name << ": generic plans";
    EXPECT_EQ(counts->second, 0) << name << ": custom plans";
  }
  store.reset();  // its backend exits and flushes its statistics
  const auto [seq_scans, deleted] = ItemsScansOnceDeleted(gone);
  EXPECT_EQ(deleted, gone);
  EXPECT_LE(seq_scans, 8) << "finishes of the backlog read the whole items table";
}

// --- the vacuum horizon ------------------------------------------------------------------

// A snapshot held open (an idle REPEATABLE READ transaction) is what Status
// names as holding the vacuum horizon, with the transactions begun since,
// and it is gone from Status once it ends. Other tests' transactions may be
// older for a moment, so the checks wait for ours to be the oldest.
TEST_F(PgStoreTest, StatusNamesWhatHoldsTheVacuumHorizon) {
  MakeQueue("q", 2);
  const std::string name = absl::StrCat("horizon_holder_", getpid());
  pqxx::connection conn(schema_.dsn());
  conn.set_variable("application_name", conn.quote(name));
  auto held = std::make_unique<pqxx::transaction<pqxx::repeatable_read>>(conn);
  held->exec("SELECT 1");  // takes the snapshot
  for (int i = 0; i < 5; ++i) ASSERT_OK(store_->Enqueue("q", Payload("x")).status());

  std::optional<VacuumHorizon> seen;
  ASSERT_TRUE(WaitUntil([&] {
    absl::StatusOr<QueueStatus> st = store_->Status("q");
    seen = st.ok() ? st->horizon : std::nullopt;
    return seen && absl::StrContains(seen->who, name) && seen->age >= absl::Seconds(1);
  })) << (seen ? seen->who : "no horizon");
  EXPECT_EQ(seen->holder, "transaction");
  EXPECT_TRUE(absl::StrContains(seen->who, "idle in transaction")) << seen->who;
  EXPECT_GE(seen->xid_age, 5) << "the five enqueues began after it";

  held->commit();
  held.reset();
  ASSERT_TRUE(WaitUntil([&] {
    absl::StatusOr<QueueStatus> st = store_->Status("q");
    return st.ok() && (!st->horizon || !absl::StrContains(st->horizon->who, name));
  }));
}

// --- listen ---------------------------------------------------------------------------

TEST_F(PgStoreTest, ListenerHearsEnqueuesAndGroupChanges) {
  MakeQueue("q", 64);
  MakeQueue("other", 16);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Listener> listener, store_->Listen("q"));
  ASSERT_OK_AND_ASSIGN(std::vector<Notice> none, listener->Wait(absl::Milliseconds(20)));
  EXPECT_TRUE(none.empty());

  ASSERT_OK(store_->Enqueue("other", Keyed("k")));  // another queue: not heard
  ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Keyed("k")));
  const absl::Time sent = absl::Now();
  ASSERT_OK_AND_ASSIGN(std::vector<Notice> got, listener->Wait(absl::Milliseconds(100)));
  const absl::Duration latency = absl::Now() - sent;
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].kind, Notice::Kind::kItems);
  EXPECT_EQ(got[0].part, r.part);
  // The item's key, so an owner whose cursor is past it reads from there,
  // not from the part's head (Notice::from).
  ASSERT_TRUE(got[0].from.has_value());
  EXPECT_EQ(*got[0].from, (ItemKey{0, r.id}));
  EXPECT_LT(latency, absl::Milliseconds(100));
  std::printf("[ perf ] enqueue -> listener wake-up: %.2f ms\n",
              absl::ToDoubleMilliseconds(latency));

  ASSERT_OK(store_->NotifyGroup("q"));
  ASSERT_OK_AND_ASSIGN(got, listener->Wait(absl::Milliseconds(100)));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].kind, Notice::Kind::kGroup);

  // Waits for at least `n` notices.
  auto hear = [&](size_t n) {
    std::vector<Notice> heard;
    EXPECT_TRUE(WaitUntil(
        [&] {
          auto more = listener->Wait(absl::Milliseconds(50));
          if (more.ok()) heard.insert(heard.end(), more->begin(), more->end());
          return heard.size() >= n;
        },
        absl::Seconds(5)));
    return heard;
  };
  // A join is a group change too; a big batch says "some part" (-1). Its
  // keyless items go to parts in runs of 32 ids (kKeylessRun): 200 runs
  // reach far more than 32 of the 64 parts.
  Member m = JoinWith(*store_, "q", {});
  std::vector<NewItem> batch(6400, Payload("b"));
  batch[150].priority = -2;
  ASSERT_OK(store_->EnqueueBatch("q", batch));
  std::vector<Notice> all = hear(2);
  ASSERT_GE(all.size(), 2u);
  EXPECT_EQ(all[0].kind, Notice::Kind::kGroup);
  EXPECT_EQ(all[1].kind, Notice::Kind::kItems);
  EXPECT_EQ(all[1].part, -1);
  ASSERT_TRUE(all[1].from.has_value()) << "the lowest key of the batch, for every part";
  EXPECT_EQ(all[1].from->priority, -2);
  EXPECT_GT(all[1].from->id, r.id);

  // An acquisition says nothing (nobody waits for it); a release says
  // kReleased, which only members waiting for parts read the group for.
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedPart> got_parts,
                       store_->AcquireParts("q", m.join.id, {7, 9}));
  ASSERT_EQ(got_parts.size(), 2u);
  ASSERT_OK_AND_ASSIGN(none, listener->Wait(absl::Milliseconds(50)));
  EXPECT_TRUE(none.empty());
  ASSERT_OK(store_->ReleaseParts("q", m.join.id, {got_parts[0]}));
  std::vector<Notice> released = hear(1);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].kind, Notice::Kind::kReleased);

  // A batch over few parts: one notice per part, with the lowest key there.
  std::vector<NewItem> two;
  for (int prio : {3, -1, 3}) {
    NewItem i = Keyed("same-key", "x");
    i.priority = prio;
    two.push_back(i);
  }
  ASSERT_OK(store_->EnqueueBatch("q", two));
  std::vector<Notice> one = hear(1);
  ASSERT_EQ(one.size(), 1u);
  ASSERT_TRUE(one[0].from.has_value());
  EXPECT_EQ(one[0].from->priority, -1);
  // Payloads from an older producer ("i:PART") still parse, without a key.
  testing::Query(schema_.dsn(), absl::StrCat("SELECT pg_notify('", ChannelFor(schema_.name(), "q"),
                                             "', 'i:5')"));
  std::vector<Notice> old = hear(1);
  ASSERT_FALSE(old.empty());
  EXPECT_EQ(old[0].part, 5);
  EXPECT_FALSE(old[0].from.has_value());

  // Deleting the queue is a group change its sessions hear at once: they
  // re-read the group, find no queue and stop.
  ASSERT_OK(store_->DeleteQueue("q", QueueContents::kDelete));
  std::vector<Notice> deleted = hear(1);
  ASSERT_FALSE(deleted.empty());
  EXPECT_EQ(deleted.back().kind, Notice::Kind::kGroup);
}

// ListenHere: a session's calls and its wake-ups on one connection.
TEST_F(PgStoreTest, AListenerOnTheStoresOwnConnectionGivesWayToItsCallsAndSurvivesAReconnect) {
  MakeQueue("q", 8);
  PgOptions o = schema_.options();
  o.application_name = absl::StrCat("pgtest_", schema_.name());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, ConnectPg(o));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Listener> listener, store->ListenHere("q"));
  EXPECT_EQ(store->ListenHere("q").status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string pid_sql =
      absl::StrCat("SELECT pid FROM pg_stat_activity WHERE starts_with(application_name, '",
                   o.application_name, "')");
  EXPECT_EQ(testing::Query(schema_.dsn(), pid_sql).size(), 1u) << "calls and LISTEN: one";

  absl::Mutex mu;
  std::vector<Notice> heard;
  absl::Status ended;
  std::thread waiter([&] {
    for (;;) {
      // A minute: only the store's calls (and its end) cut a wait short.
      absl::StatusOr<std::vector<Notice>> got = listener->Wait(absl::Minutes(1));
      absl::MutexLock lock(&mu);
      if (!got.ok()) {
        ended = got.status();
        return;
      }
      heard.insert(heard.end(), got->begin(), got->end());
    }
  });
  absl::Cleanup end = [&] {
    store.reset();  // ends the waiter's Wait
    waiter.join();
  };
  // Group notices name no part (-1); item notices say "any part" with -1.
  auto count = [&](Notice::Kind kind, bool any_part) {
    absl::MutexLock lock(&mu);
    return std::count_if(heard.begin(), heard.end(), [&](const Notice& n) {
      return n.kind == kind && (n.part == -1) == any_part;
    });
  };

  const absl::Time start = absl::Now();
  for (int i = 0; i < 20; ++i) {
    ASSERT_OK(store_->Enqueue("q", Keyed(absl::StrCat("k", i))));  // from another connection
    ASSERT_OK(store->GetQueue("q").status());  // on this one, while the listener waits on it
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << "a call waited out the listener's minute";
  EXPECT_TRUE(WaitUntil([&] { return count(Notice::Kind::kItems, false) == 20; }));

  // The connection breaks: a call finds out and the next reconnects and
  // listens again; the listener hears that notices may have been missed.
  auto pids = testing::Query(schema_.dsn(), pid_sql);
  ASSERT_EQ(pids.size(), 1u);
  testing::Query(schema_.dsn(), absl::StrCat("SELECT pg_terminate_backend(", *pids[0][0], ")"));
  ASSERT_TRUE(WaitUntil([&] { return testing::Query(schema_.dsn(), pid_sql).empty(); }));
  ASSERT_TRUE(WaitUntil([&] { return store->GetQueue("q").ok(); }));
  EXPECT_TRUE(WaitUntil([&] {
    return count(Notice::Kind::kGroup, true) >= 1 && count(Notice::Kind::kItems, true) >= 1;
  }));
  ASSERT_OK(store_->Enqueue("q", Keyed("after")));
  EXPECT_TRUE(WaitUntil([&] { return count(Notice::Kind::kItems, false) == 21; }));
  EXPECT_EQ(testing::Query(schema_.dsn(), pid_sql).size(), 1u);

  std::move(end).Invoke();
  EXPECT_EQ(ended.code(), absl::StatusCode::kUnavailable) << ended;
}

// --- connection -------------------------------------------------------------------------

TEST_F(PgStoreTest, ABrokenConnectionFailsOneCallThenReconnects) {
  MakeQueue("q", 4);
  PgOptions o = schema_.options();
  o.application_name = absl::StrCat("pgtest_", schema_.name());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, ConnectPg(o));
  ASSERT_OK(store->Enqueue("q", Payload("before")));
  Member m = JoinWith(*store, "q", {0, 1, 2, 3});
  const std::string pid_sql = absl::StrCat(
      "SELECT pid FROM pg_stat_activity WHERE application_name = '", o.application_name, "'");
  auto pids = testing::Query(schema_.dsn(), pid_sql);
  ASSERT_EQ(pids.size(), 1u);
  testing::Query(schema_.dsn(), absl::StrCat("SELECT pg_terminate_backend(", *pids[0][0], ")"));
  ASSERT_TRUE(WaitUntil([&] { return testing::Query(schema_.dsn(), pid_sql).empty(); }));

  absl::StatusOr<std::vector<Item>> failed = store->Claim(ClaimAll("q", m));
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable) << failed.status();
  // The next call reconnects (and re-prepares its statements).
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store->Claim(ClaimAll("q", m)));
  EXPECT_EQ(got.size(), 1u);
  ASSERT_OK(store->Finish(FinishOf("q", m, got), AckAll()));
  ASSERT_OK(store->Enqueue("q", Payload("after")));
  EXPECT_EQ(testing::Query(schema_.dsn(), pid_sql).size(), 1u);

  // A listener whose connection breaks reports Unavailable.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Listener> listener, store->Listen("q"));
  const std::string listen_pid =
      absl::StrCat("SELECT pid FROM pg_stat_activity WHERE application_name = '",
                   o.application_name, "/listen'");
  pids = testing::Query(schema_.dsn(), listen_pid);
  ASSERT_EQ(pids.size(), 1u);
  testing::Query(schema_.dsn(), absl::StrCat("SELECT pg_terminate_backend(", *pids[0][0], ")"));
  absl::Status st;
  ASSERT_TRUE(WaitUntil([&] {
    st = ToStatus(listener->Wait(absl::Milliseconds(50)));
    return !st.ok();
  }));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
}

TEST(PgStoreConnect, ErrorsSayWhatWentWrong) {
  PgOptions o;
  o.dsn = "host=127.0.0.1 port=1 connect_timeout=2";
  EXPECT_EQ(ConnectPg(o).status().code(), absl::StatusCode::kUnavailable);
  o.dsn = "this is not a dsn";
  absl::Status st = ConnectPg(o).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  o.dsn = "postgresql://[::1";
  st = ConnectPg(o).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  o.dsn = "host=127.0.0.1 bogus_option=1";
  st = ConnectPg(o).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  o.dsn = absl::StrCat(testing::TestDsn(), " dbname=no_such_db");
  st = ConnectPg(o).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;

  // What libpq says for rejected credentials (the test server trusts everyone).
  using pg_internal::ClassifyConnectError;
  EXPECT_EQ(ClassifyConnectError("connection to server at \"db\" (10.0.0.1), port 5432 failed: "
                                 "FATAL:  password authentication failed for user \"app\"")
                .code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(ClassifyConnectError("connection to server on socket \"/tmp/.s.PGSQL.5432\" failed: "
                                 "fe_sendauth: no password supplied")
                .code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(ClassifyConnectError("connection to server at \"db\", port 5432 failed: FATAL:  no "
                                 "pg_hba.conf entry for host \"10.0.0.2\"")
                .code(),
            absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace partq
