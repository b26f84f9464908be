// Queue groups (store.h, "Queue groups"; migration 12) against a real
// PostgreSQL: held until started, the end item enqueued exactly once in the
// transaction that finishes the last item (whichever session that is), the
// counts, the SQL API, and workers draining many groups at once.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/barrier.h"
#include "absl/time/time.h"
#include "consumer/consumer.h"
#include "consumer/handler.h"
#include "coordinator/queue_collector.h"
#include "gtest/gtest.h"
#include "partitioner/part.h"
#include "pg/migrations.h"
#include "pg/pg_store.h"
#include "producer/producer.h"
#include "prometheus/registry.h"
#include "store/store.h"
#include "tests/observability/scrape.h"
#include "tests/store/store_test_util.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using ::partq::testing::TestSchema;
using ::partq::testing::WaitUntil;
using store_testing::ClaimAll;
using store_testing::FinishOf;
using store_testing::Ids;
using store_testing::JoinWith;
using store_testing::kAllParts;
using store_testing::Member;

NewItem InGroup(const std::string& group, std::string payload = "x") {
  NewItem item;
  item.payload = std::move(payload);
  item.group = group;
  return item;
}

Outcome Acked(const Item& item) {
  Outcome o;
  o.id = item.id;
  o.part = item.part;
  return o;
}

// A body that acks every item, but dead-letters those whose payload is "die".
FinishBody AckOrKill() {
  return [](Tx&, absl::Span<const Item> items) -> absl::StatusOr<std::vector<Outcome>> {
    std::vector<Outcome> out;
    for (const Item& item : items) {
      Outcome o;
      o.id = item.id;
      o.part = item.part;
      if (item.payload == "die") {
        o.kind = Outcome::Kind::kDead;
        o.error = "told to";
      }
      out.push_back(o);
    }
    return out;
  };
}

class GroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = schema_.NewStore();
    ASSERT_NE(store_, nullptr);
    store_testing::MakeQueue(*store_, "jobs", 4);
    store_testing::MakeQueue(*store_, "ends", 1);
  }

  // The payloads of the end queue's items, parsed.
  std::vector<nlohmann::json> EndItems() {
    std::vector<nlohmann::json> out;
    for (const auto& row :
         schema_.Q("SELECT convert_from(payload, 'UTF8') FROM {schema}.items WHERE queue = 'ends' "
                   "ORDER BY id")) {
      out.push_back(nlohmann::json::parse(*row[0]));
    }
    return out;
  }

  GroupStatus Group(const std::string& id) {
    absl::StatusOr<GroupStatus> g = store_->GetGroup("jobs", id);
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? *g : GroupStatus{};
  }

  TestSchema schema_;
  std::unique_ptr<Store> store_;
};

TEST_F(GroupTest, ItemsWaitForTheStartAndTheLastAckEnqueuesTheEndItemOnce) {
  ASSERT_TRUE(store_->CreateGroup("jobs", {"g", "ends", R"({"report": 7})"}).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store_->Enqueue("jobs", InGroup("g")).ok());
  ASSERT_TRUE(store_->EnqueueBatch("jobs", {InGroup("g"), InGroup("g")}).ok());
  // Not in the group: runs at once.
  ASSERT_TRUE(store_->Enqueue("jobs", store_testing::Payload("free")).ok());

  Member m = JoinWith(*store_, "jobs", kAllParts);
  absl::StatusOr<std::vector<Item>> claimed = store_->Claim(ClaimAll("jobs", m));
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  ASSERT_EQ(claimed->size(), 1u);
  EXPECT_EQ((*claimed)[0].payload, "free");
  EXPECT_FALSE((*claimed)[0].group.has_value());
  GroupStatus g = Group("g");
  EXPECT_EQ(g.pending, 5);
  EXPECT_EQ(g.held, 5);
  EXPECT_FALSE(g.started_at.has_value());
  absl::StatusOr<QueueStatus> status = store_->Status("jobs");
  ASSERT_TRUE(status.ok());
  int64_t held = 0, delayed = 0;
  for (const PartStatus& p : status->parts) {
    held += p.held;
    delayed += p.delayed;
  }
  EXPECT_EQ(held, 5);
  EXPECT_EQ(delayed, 0);

  absl::StatusOr<GroupStatus> started = store_->StartGroup("jobs", "g");
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_TRUE(started->started_at.has_value());
  EXPECT_EQ(started->held, 0);
  // The held items sort before the cursor of the claim that took "free":
  // they come due behind it, and the read from the head finds them.
  absl::StatusOr<std::vector<Item>> group_items = store_->Claim(ClaimAll("jobs", m, 100, *claimed));
  ASSERT_TRUE(group_items.ok()) << group_items.status();
  ASSERT_EQ(group_items->size(), 5u);
  for (const Item& item : *group_items) EXPECT_EQ(item.group, std::optional<std::string>("g"));
  EXPECT_EQ(Group("g").in_flight, 5);

  std::vector<Item> first(group_items->begin(), group_items->begin() + 4);
  ASSERT_TRUE(store_->Finish(FinishOf("jobs", m, first), store_testing::AckAll()).ok());
  EXPECT_EQ(Group("g").pending, 1);
  EXPECT_TRUE(EndItems().empty());

  std::vector<Item> last = {group_items->back()};
  ASSERT_TRUE(store_->Finish(FinishOf("jobs", m, last), store_testing::AckAll()).ok());
  g = Group("g");
  EXPECT_TRUE(g.ended_at.has_value());
  EXPECT_EQ(g.pending, 0);
  EXPECT_EQ(g.done, 5);
  ASSERT_TRUE(g.end_item.has_value());
  std::vector<nlohmann::json> ends = EndItems();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0], nlohmann::json::parse(R"({"queue": "jobs", "group": "g", "done": 5,
                                              "dead": 0, "cancelled": 0,
                                              "payload": {"report": 7}})"));
  EXPECT_EQ(schema_.QInt(absl::StrCat("SELECT count(*) FROM {schema}.items WHERE id = ",
                                      *g.end_item, " AND dedup_key = 'partq.group:jobs:g'")),
            1);

  // An ended group takes nothing more.
  absl::StatusOr<EnqueueResult> late = store_->Enqueue("jobs", InGroup("g"));
  EXPECT_TRUE(absl::IsFailedPrecondition(late.status())) << late.status();
  EXPECT_NE(late.status().message().find("has ended"), std::string::npos) << late.status();
  EXPECT_EQ(late.status().message().find("CONTEXT"), std::string::npos) << late.status();
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->StartGroup("jobs", "g").status()));
}

// Issue 49: groups whose items ran for seconds ended, by their rows, 6-8 ms
// after the start: a worker's next batch is claimed ahead, in the
// transaction COMMIT AND CHAIN begins, and now() was that transaction's
// start. The group ends, and its end item is enqueued, when the ack of its
// last item ran.
TEST_F(GroupTest, AGroupEndsWhenItsLastItemFinishedNotWhenItWasClaimed) {
  store_testing::MakeQueue(*store_, "one", 1);
  ASSERT_OK(store_->CreateGroup("one", {"g", "ends", std::nullopt}));
  ASSERT_OK(store_->EnqueueBatch("one", {InGroup("g", "a"), InGroup("g", "b")}));
  ASSERT_OK(store_->StartGroup("one", "g").status());
  Member m = JoinWith(*store_, "one", {0});
  ASSERT_OK_AND_ASSIGN(std::vector<Item> first, store_->Claim(ClaimAll("one", m, 1)));
  ASSERT_EQ(first.size(), 1u);
  // Its ack begins the next transaction and claims the last item in it.
  FinishRequest ahead = FinishOf("one", m, first);
  ahead.begin_next = true;
  const ItemKey after{first[0].priority, first[0].id};
  ahead.next = [&m, after]() -> std::optional<ClaimRequest> {
    ClaimRequest c = ClaimAll("one", m, 1);
    c.parts[0].after = after;
    c.include_suspect = false;
    return c;
  };
  ASSERT_OK_AND_ASSIGN(FinishResult r1, store_->Finish(ahead, store_testing::AckAll()));
  ASSERT_TRUE(r1.next_begun);
  ASSERT_EQ(r1.next.size(), 1u);
  absl::SleepFor(absl::Milliseconds(500));  // the handler runs
  const int64_t handled =
      schema_.QInt("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint");
  ASSERT_OK(store_->Finish(FinishOf("one", m, r1.next), store_testing::AckAll()).status());
  ASSERT_OK_AND_ASSIGN(GroupStatus g, store_->GetGroup("one", "g"));
  ASSERT_TRUE(g.ended_at.has_value());
  EXPECT_GE(absl::ToUnixMicros(*g.ended_at), handled) << "ended when its last item was acked";
  ASSERT_TRUE(g.end_item.has_value());
  EXPECT_GE(schema_.QInt(absl::StrCat("SELECT (extract(epoch FROM enqueued_at) * 1000000)::bigint "
                                      "FROM {schema}.items WHERE id = ",
                                      *g.end_item)),
            handled)
      << "the end item enqueued then too";
  EXPECT_EQ(schema_.QInt(absl::StrCat("SELECT count(*) FROM {schema}.items WHERE id = ",
                                      *g.end_item, " AND run_at = enqueued_at")),
            1)
      << "due at once";
  // It is claimed as any new item is.
  Member e = JoinWith(*store_, "ends", {0});
  ASSERT_OK_AND_ASSIGN(std::vector<Item> end, store_->Claim(ClaimAll("ends", e)));
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(end[0].id, *g.end_item);
}

TEST_F(GroupTest, DeadLetteredItemsCountAndCanBeTheLast) {
  ASSERT_TRUE(store_->CreateGroup("jobs", {"g", "ends", std::nullopt}).ok());
  ASSERT_TRUE(store_->EnqueueBatch("jobs", {InGroup("g", "ok"), InGroup("g", "die")}).ok());
  ASSERT_TRUE(store_->StartGroup("jobs", "g").ok());
  Member m = JoinWith(*store_, "jobs", kAllParts);
  absl::StatusOr<std::vector<Item>> items = store_->Claim(ClaimAll("jobs", m));
  ASSERT_TRUE(items.ok());
  ASSERT_EQ(items->size(), 2u);
  std::sort(items->begin(), items->end(),
            [](const Item& a, const Item& b) { return a.payload > b.payload; });  // "ok" first
  ASSERT_TRUE(store_->Finish(FinishOf("jobs", m, {(*items)[0]}), AckOrKill()).ok());
  absl::StatusOr<FinishResult> r = store_->Finish(FinishOf("jobs", m, {(*items)[1]}), AckOrKill());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->dead.size(), 1u);
  GroupStatus g = Group("g");
  EXPECT_TRUE(g.ended_at.has_value());
  EXPECT_EQ(g.done, 1);
  EXPECT_EQ(g.dead, 1);
  std::vector<nlohmann::json> ends = EndItems();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0]["dead"], 1);
  EXPECT_EQ(ends[0]["payload"], nullptr);
  // The dead item remembers its group; requeued, it leaves it (the group
  // counted it dead and is over).
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.dead_items WHERE group_id = 'g'"), 1);
  ASSERT_TRUE(store_->RequeueDead("jobs", {}).ok());
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE queue = 'jobs' "
                         "AND group_id IS NULL"),
            1);
}

TEST_F(GroupTest, ARetryKeepsTheItemPendingAndExhaustedAttemptsEndTheGroup) {
  schema_.Q("UPDATE {schema}.queues SET max_attempts = 2 WHERE name = 'jobs'");
  ASSERT_TRUE(store_->CreateGroup("jobs", {"g", "ends", std::nullopt}).ok());
  ASSERT_TRUE(store_->Enqueue("jobs", InGroup("g")).ok());
  ASSERT_TRUE(store_->StartGroup("jobs", "g").ok());
  Member m = JoinWith(*store_, "jobs", kAllParts);
  FinishBody retry = [](Tx&, absl::Span<const Item> items) -> absl::StatusOr<std::vector<Outcome>> {
    std::vector<Outcome> out;
    for (const Item& item : items) {
      Outcome o;
      o.id = item.id;
      o.part = item.part;
      o.kind = Outcome::Kind::kRetry;
      o.error = "again";
      out.push_back(o);
    }
    return out;
  };
  for (int attempt = 1; attempt <= 2; ++attempt) {
    std::vector<Item> items;
    ASSERT_TRUE(WaitUntil([&] {
      absl::StatusOr<std::vector<Item>> c = store_->Claim(ClaimAll("jobs", m));
      if (c.ok()) items = *c;
      return !items.empty();
    }));
    FinishRequest req = FinishOf("jobs", m, items);
    req.max_attempts = 2;
    ASSERT_TRUE(store_->Finish(req, retry).ok());
    GroupStatus g = Group("g");
    if (attempt == 1) {
      EXPECT_EQ(g.pending, 1);
      EXPECT_FALSE(g.ended_at.has_value());
    } else {
      EXPECT_EQ(g.dead, 1);
      EXPECT_TRUE(g.ended_at.has_value());
    }
  }
  EXPECT_EQ(EndItems().size(), 1u);
}

// The race that matters: the last two items of a group, in two parts owned
// by two sessions, acked at the same moment. Exactly one of the two
// transactions ends the group, every time.
TEST_F(GroupTest, TheLastTwoItemsAckedAtOnceByTwoSessionsEndTheGroupOnce) {
  store_testing::MakeQueue(*store_, "pair", 2);
  auto other = schema_.NewStore();
  Member a = JoinWith(*store_, "pair", {0});
  Member b = JoinWith(*other, "pair", {1});
  ASSERT_EQ(a.parts.size(), 1u);
  ASSERT_EQ(b.parts.size(), 1u);
  // Keys that land in part 0 and part 1.
  std::string key0, key1;
  for (int i = 0; key0.empty() || key1.empty(); ++i) {
    std::string k = absl::StrCat("k", i);
    (PartForKey(k, 2) == 0 ? key0 : key1) = k;
  }
  constexpr int kRounds = 150;
  std::vector<Item> in_flight_a, in_flight_b;
  for (int round = 0; round < kRounds; ++round) {
    const std::string g = absl::StrCat("g", round);
    ASSERT_TRUE(store_->CreateGroup("pair", {g, "ends", std::nullopt}).ok());
    NewItem x = InGroup(g), y = InGroup(g);
    x.key = key0;
    y.key = key1;
    ASSERT_TRUE(store_->EnqueueBatch("pair", {x, y}).ok());
    ASSERT_TRUE(store_->StartGroup("pair", g).ok());
    absl::StatusOr<std::vector<Item>> ia = store_->Claim(ClaimAll("pair", a));
    absl::StatusOr<std::vector<Item>> ib = other->Claim(ClaimAll("pair", b));
    ASSERT_TRUE(ia.ok() && ib.ok());
    ASSERT_EQ(ia->size(), 1u);
    ASSERT_EQ(ib->size(), 1u);
    absl::Barrier* both = new absl::Barrier(2);
    // Each body waits for the other before its ack statement runs, so both
    // transactions reach the group's row together.
    auto body = [both](Tx&, absl::Span<const Item> items) -> absl::StatusOr<std::vector<Outcome>> {
      if (both->Block()) delete both;
      std::vector<Outcome> out;
      for (const Item& item : items) out.push_back(Acked(item));
      return out;
    };
    absl::StatusOr<FinishResult> ra, rb;
    std::thread t([&] { rb = other->Finish(FinishOf("pair", b, *ib), body); });
    ra = store_->Finish(FinishOf("pair", a, *ia), body);
    t.join();
    ASSERT_TRUE(ra.ok()) << ra.status();
    ASSERT_TRUE(rb.ok()) << rb.status();
    ASSERT_EQ(ra->acked.size(), 1u);
    ASSERT_EQ(rb->acked.size(), 1u);
  }
  // One end item per group, each counting both items.
  std::map<std::string, int> ends;
  for (const nlohmann::json& e : EndItems()) {
    ++ends[e["group"].get<std::string>()];
    EXPECT_EQ(e["done"], 2) << e.dump();
  }
  EXPECT_EQ(ends.size(), static_cast<size_t>(kRounds));
  for (const auto& [g, n] : ends) EXPECT_EQ(n, 1) << g;
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.groups WHERE queue = 'pair' "
                         "AND ended_at IS NOT NULL AND done = 2 AND pending = 0"),
            kRounds);
}

TEST_F(GroupTest, StartingAnEmptyGroupEndsItAtOnce) {
  ASSERT_TRUE(store_->CreateGroup("jobs", {"empty", "ends", R"("nothing")"}).ok());
  absl::StatusOr<GroupStatus> g = store_->StartGroup("jobs", "empty");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->ended_at.has_value());
  std::vector<nlohmann::json> ends = EndItems();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0]["done"], 0);
  EXPECT_EQ(ends[0]["payload"], "nothing");
}

TEST_F(GroupTest, ItemsAddedAfterTheStartRunAsTheyCome) {
  ASSERT_TRUE(store_->CreateGroup("jobs", {"g", "ends", std::nullopt}).ok());
  ASSERT_TRUE(store_->Enqueue("jobs", InGroup("g", "first")).ok());
  ASSERT_TRUE(store_->StartGroup("jobs", "g").ok());
  ASSERT_TRUE(store_->Enqueue("jobs", InGroup("g", "second")).ok());
  Member m = JoinWith(*store_, "jobs", kAllParts);
  absl::StatusOr<std::vector<Item>> items = store_->Claim(ClaimAll("jobs", m));
  ASSERT_TRUE(items.ok());
  EXPECT_EQ(items->size(), 2u);
  ASSERT_TRUE(store_->Finish(FinishOf("jobs", m, *items), store_testing::AckAll()).ok());
  EXPECT_EQ(Group("g").done, 2);
  EXPECT_EQ(EndItems().size(), 1u);
}

TEST_F(GroupTest, BadInputIsRefusedClearlyAndChangesNothing) {
  NewItem delayed = InGroup("g");
  delayed.delay = absl::Seconds(5);
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Enqueue("jobs", delayed).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Enqueue("jobs", InGroup("")).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(store_->Enqueue("jobs", InGroup(std::string(201, 'g'))).status()));
  EXPECT_TRUE(absl::IsNotFound(store_->Enqueue("nope", InGroup("g")).status()));
  EXPECT_TRUE(absl::IsNotFound(store_->EnqueueBatch("nope", {InGroup("g")}).status()));
  EXPECT_TRUE(absl::IsNotFound(store_->CreateGroup("nope", {"g", std::nullopt, std::nullopt})));
  EXPECT_TRUE(absl::IsNotFound(store_->CreateGroup("jobs", {"g", "nope", std::nullopt})));
  absl::Status not_json = store_->CreateGroup("jobs", {"g", "ends", "{oops"});
  EXPECT_TRUE(absl::IsInvalidArgument(not_json)) << not_json;
  EXPECT_TRUE(absl::IsInvalidArgument(store_->CreateGroup("jobs", {"g", std::nullopt, "1"})));
  absl::Status unknown = store_->GetGroup("jobs", "never").status();
  EXPECT_TRUE(absl::IsNotFound(unknown)) << unknown;
  EXPECT_NE(unknown.message().find("unknown group \"never\""), std::string::npos) << unknown;
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.groups"), 0);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items"), 0);

  // The same end work again is fine; other end work is refused.
  ASSERT_TRUE(store_->CreateGroup("jobs", {"g", "ends", "1"}).ok());
  EXPECT_TRUE(store_->CreateGroup("jobs", {"g", "ends", "1"}).ok());
  absl::Status other = store_->CreateGroup("jobs", {"g", "ends", "2"});
  EXPECT_TRUE(absl::IsAlreadyExists(other)) << other;
  // Only the payload differs: the message says both.
  EXPECT_TRUE(absl::StrContains(other.message(),
                                "it has end queue \"ends\" with end payload 1, "
                                "this asked for end queue \"ends\" with end "
                                "payload 2"))
      << other;
  // End work for a group its items made.
  ASSERT_TRUE(store_->Enqueue("jobs", InGroup("made")).ok());
  EXPECT_TRUE(store_->CreateGroup("jobs", {"made", "ends", std::nullopt}).ok());
  EXPECT_EQ(Group("made").end_queue, std::optional<std::string>("ends"));
}

TEST_F(GroupTest, AnEndQueueDeletedMeanwhileLeavesTheGroupEndedWithTheReason) {
  store_testing::MakeQueue(*store_, "gone", 1);
  ASSERT_TRUE(store_->CreateGroup("jobs", {"g", "gone", std::nullopt}).ok());
  ASSERT_TRUE(store_->DeleteQueue("gone", QueueContents::kRefuse).ok());
  absl::StatusOr<GroupStatus> g = store_->StartGroup("jobs", "g");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->ended_at.has_value());
  EXPECT_FALSE(g->end_item.has_value());
  ASSERT_TRUE(g->end_error.has_value());
  EXPECT_NE(g->end_error->find("unknown queue \"gone\""), std::string::npos) << *g->end_error;
}

TEST_F(GroupTest, AHandlersEnqueueIntoAGroupCommitsWithItsAck) {
  store_testing::MakeQueue(*store_, "src", 1);
  ASSERT_TRUE(store_->Enqueue("src", store_testing::Payload("a")).ok());
  ASSERT_TRUE(store_->Enqueue("src", store_testing::Payload("b")).ok());
  Member m = JoinWith(*store_, "src", kAllParts);
  absl::StatusOr<std::vector<Item>> items = store_->Claim(ClaimAll("src", m));
  ASSERT_TRUE(items.ok());
  ASSERT_EQ(items->size(), 2u);
  // A body that enqueues, then fails: nothing of it stays, the group
  // included.
  FinishBody failing = [](Tx& tx, absl::Span<const Item>) -> absl::StatusOr<std::vector<Outcome>> {
    if (absl::StatusOr<EnqueueResult> r = tx.Enqueue("jobs", InGroup("fan")); !r.ok()) {
      return r.status();
    }
    return absl::InternalError("handler broke");
  };
  EXPECT_FALSE(store_->Finish(FinishOf("src", m, *items), failing).ok());
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.groups"), 0);
  FinishBody fan_out = [](Tx& tx,
                          absl::Span<const Item> given) -> absl::StatusOr<std::vector<Outcome>> {
    std::vector<Outcome> out;
    for (const Item& item : given) {
      absl::StatusOr<EnqueueResult> r = tx.Enqueue("jobs", InGroup("fan", item.payload));
      if (!r.ok()) return r.status();
      out.push_back(Acked(item));
    }
    return out;
  };
  ASSERT_TRUE(store_->Finish(FinishOf("src", m, *items), fan_out).ok());
  GroupStatus g = Group("fan");
  EXPECT_EQ(g.pending, 2);
  EXPECT_EQ(g.held, 2);
}

TEST_F(GroupTest, TheSqlApiEnqueuesStartsAndReadsGroups) {
  pqxx::connection c(schema_.dsn());
  auto run = [&](const std::string& sql) {
    pqxx::work w(c);
    pqxx::result r = w.exec(WithSchema(sql, schema_.name()));
    w.commit();
    return r;
  };
  run("SELECT {schema}.group_create('jobs', 'sql', end_queue => 'ends', "
      "end_payload => '{\"n\": 1}')");
  run("SELECT {schema}.enqueue('jobs', 'p' || g, group_id => 'sql') "
      "FROM generate_series(1, 3) g");
  EXPECT_EQ(run("SELECT held FROM {schema}.group_status('jobs', 'sql')")[0][0].as<int64_t>(), 3);
  EXPECT_EQ(run("SELECT {schema}.group_start('jobs', 'sql')")[0][0].as<int64_t>(), 3);
  EXPECT_EQ(Group("sql").pending, 3);
  // It counts items, not the parts they are in (schema version 26): five
  // items of one key are in one part.
  run("SELECT {schema}.enqueue('jobs', 'k' || g, key => 'one', group_id => 'keyed') "
      "FROM generate_series(1, 5) g");
  EXPECT_EQ(run("SELECT {schema}.group_start('jobs', 'keyed')")[0][0].as<int64_t>(), 5);
  EXPECT_EQ(run("SELECT {schema}.group_start('jobs', 'keyed')")[0][0].as<int64_t>(), 0)
      << "started already: nothing held";
  // The older calls still mean what they meant.
  run("SELECT {schema}.enqueue('jobs', 'plain')");
  run("SELECT * FROM {schema}.enqueue_item('jobs', 'plain', key => 'k', dedup_key => 'd')");
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE group_id IS NULL"), 2);
}

// Retention (Store::Prune, prune()): an ended group goes once it ended more
// than the age ago, by the database's clock; an open group stays whatever its
// age, and the id of a pruned group can be used again.
TEST_F(GroupTest, PruneDeletesGroupsThatEndedLongerAgoThanTheAgeAndFreesTheirIds) {
  for (const char* id : {"old", "recent"}) {
    ASSERT_TRUE(store_->CreateGroup("jobs", {id, "ends", R"("x")"}).ok());
    ASSERT_TRUE(store_->StartGroup("jobs", id).ok());  // empty: it ends at once
  }
  ASSERT_TRUE(store_->Enqueue("jobs", InGroup("open")).ok());
  schema_.Q(
      "UPDATE {schema}.groups SET created_at = now() - interval '3 days', "
      "ended_at = now() - interval '2 days' WHERE id = 'old'");
  schema_.Q("UPDATE {schema}.groups SET created_at = now() - interval '3 days' WHERE id = 'open'");

  absl::StatusOr<Pruned> p = store_->Prune("jobs", absl::Hours(24), /*dead=*/false);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->groups, 1);
  EXPECT_EQ(store_->GetGroup("jobs", "old").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Group("recent").ended_at.has_value());
  EXPECT_EQ(Group("open").held, 1) << "an open group is not pruned, however old";

  // "old" is free again: enqueueing into it makes a new group, held as any.
  ASSERT_TRUE(store_->Enqueue("jobs", InGroup("old")).ok());
  EXPECT_FALSE(Group("old").ended_at.has_value());
  EXPECT_EQ(Group("old").held, 1);

  // The SQL API prunes the same way: "recent" now, at age 0.
  EXPECT_EQ(schema_.QInt("SELECT groups FROM {schema}.prune('jobs', interval '0')"), 1);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.groups WHERE queue = 'jobs'"), 2);
}

TEST_F(GroupTest, CancellingAHeldGroupCancelsItsItemsAndEndsItWithTheCount) {
  ASSERT_TRUE(store_->CreateGroup("jobs", {"g", "ends", std::nullopt}).ok());
  ASSERT_TRUE(store_->EnqueueBatch("jobs", {InGroup("g"), InGroup("g"), InGroup("g")}).ok());
  absl::StatusOr<GroupStatus> g = store_->CancelGroup("jobs", "g", /*run_end=*/true);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->cancelled_at.has_value());
  EXPECT_TRUE(g->ended_at.has_value());
  EXPECT_EQ(g->cancelled, 3);
  EXPECT_EQ(g->pending, 0);
  std::vector<nlohmann::json> ends = EndItems();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0]["cancelled"], 3);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE queue = 'jobs'"), 0);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.cancelled_items WHERE group_id = 'g'"), 3);
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->Enqueue("jobs", InGroup("g")).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->CancelGroup("jobs", "g", true).status()));
  EXPECT_TRUE(absl::IsNotFound(store_->CancelGroup("jobs", "never", true).status()));
}

TEST_F(GroupTest, ACancelledGroupsItemsInFlightFinishAndTheLastEndsItWithoutItsEndWork) {
  ASSERT_TRUE(store_->CreateGroup("jobs", {"g", "ends", std::nullopt}).ok());
  store_testing::MakeQueue(*store_, "one", 1);
  ASSERT_TRUE(store_->CreateGroup("one", {"g", "ends", std::nullopt}).ok());
  ASSERT_TRUE(store_->EnqueueBatch("one", {InGroup("g"), InGroup("g"), InGroup("g")}).ok());
  ASSERT_TRUE(store_->StartGroup("one", "g").ok());
  Member m = JoinWith(*store_, "one", kAllParts);
  ClaimRequest two = ClaimAll("one", m);
  two.limit = 2;
  two.parts[0].limit = 2;
  absl::StatusOr<std::vector<Item>> flying = store_->Claim(two);
  ASSERT_TRUE(flying.ok());
  ASSERT_EQ(flying->size(), 2u);
  absl::StatusOr<GroupStatus> g = store_->CancelGroup("one", "g", /*run_end=*/false);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->cancelled, 1);
  EXPECT_EQ(g->pending, 2);
  EXPECT_EQ(g->in_flight, 2);
  EXPECT_FALSE(g->ended_at.has_value());
  ASSERT_TRUE(store_->Finish(FinishOf("one", m, *flying), store_testing::AckAll()).ok());
  absl::StatusOr<GroupStatus> after = store_->GetGroup("one", "g");
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->ended_at.has_value());
  EXPECT_EQ(after->done, 2);
  EXPECT_FALSE(after->end_item.has_value());
  EXPECT_TRUE(after->end_error.has_value());
  EXPECT_TRUE(EndItems().empty()) << "--no-end";
}

TEST_F(GroupTest, CancellingTheLastPendingItemOfAStartedGroupEndsIt) {
  ASSERT_TRUE(store_->CreateGroup("jobs", {"g", "ends", std::nullopt}).ok());
  absl::StatusOr<EnqueueResult> only = store_->Enqueue("jobs", InGroup("g"));
  ASSERT_TRUE(only.ok());
  ASSERT_TRUE(store_->StartGroup("jobs", "g").ok());
  absl::StatusOr<std::vector<CancelOutcome>> c = store_->CancelItems("jobs", {only->id});
  ASSERT_TRUE(c.ok()) << c.status();
  GroupStatus g = Group("g");
  EXPECT_TRUE(g.ended_at.has_value());
  EXPECT_EQ(g.cancelled, 1);
  ASSERT_EQ(EndItems().size(), 1u);
  EXPECT_EQ(EndItems()[0]["cancelled"], 1);
}

TEST_F(GroupTest, TheCollectorCountsGroupsByStateAndTheirItems) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store_->Enqueue("jobs", InGroup("held")).ok());
  ASSERT_TRUE(store_->EnqueueBatch("jobs", {InGroup("running"), InGroup("running")}).ok());
  ASSERT_TRUE(store_->StartGroup("jobs", "running").ok());
  ASSERT_TRUE(store_->StartGroup("jobs", "empty").ok());  // ends at once
  prometheus::Registry r;
  QueueCollector c(schema_.Factory(), "jobs", [] { return true; }, r);
  ASSERT_TRUE(c.CollectOnce().ok());
  auto v = [&](const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    return testing::MetricValue(r, name, labels).value_or(-1);
  };
  EXPECT_EQ(v("partq_queue_held_items"), 3);
  EXPECT_EQ(v("partq_queue_delayed_items"), 0);
  EXPECT_EQ(v("partq_queue_ready_items"), 2);
  EXPECT_EQ(v("partq_queue_groups", {{"state", "held"}}), 1);
  EXPECT_EQ(v("partq_queue_groups", {{"state", "started"}}), 1);
  EXPECT_EQ(v("partq_queue_groups", {{"state", "ended"}}), 1);
  EXPECT_EQ(v("partq_queue_group_pending_items"), 5);
}

// Workers drain many groups at once, started at different moments and
// interleaved in every part: each group ends once, with every item counted.
TEST_F(GroupTest, WorkersDrainManyGroupsAndEachEndsExactlyOnce) {
  constexpr int kGroups = 12, kPerGroup = 150;
  std::atomic<int> handled{0};
  auto handler = MakeHandler([&](HandlerCall& call) {
    ++handled;
    return call.item->payload == "die" ? absl::InternalError("told to") : absl::OkStatus();
  });
  schema_.Q("UPDATE {schema}.queues SET max_attempts = 1 WHERE name = 'jobs'");
  std::vector<std::unique_ptr<Consumer>> consumers;
  for (int i = 0; i < 3; ++i) {
    ConsumerOptions o;
    o.queue = "jobs";
    o.concurrency = 2;
    o.batch = 20;
    o.poll_interval = absl::Milliseconds(100);
    o.backoff.base = absl::Milliseconds(10);
    o.backoff.max = absl::Milliseconds(50);
    consumers.push_back(std::make_unique<Consumer>(schema_.Factory(), o, handler.get()));
    ASSERT_TRUE(consumers.back()->Start().ok());
  }
  Producer producer(schema_.NewStore());
  for (int g = 0; g < kGroups; ++g) {
    const std::string id = absl::StrCat("batch", g);
    ASSERT_TRUE(store_->CreateGroup("jobs", {id, "ends", std::to_string(g)}).ok());
    std::vector<NewItem> items;
    for (int i = 0; i < kPerGroup; ++i) {
      NewItem item = InGroup(id, i == 7 ? "die" : absl::StrCat(id, "/", i));
      if (i % 3 == 0) item.key = absl::StrCat("k", i % 11);
      items.push_back(std::move(item));
    }
    // Half in one batch, half one by one; the previous group starts while
    // this one fills, so workers finish one group as items of the next come.
    const size_t half = items.size() / 2;
    ASSERT_TRUE(producer.EnqueueBatch("jobs", {items.begin(), items.begin() + half}).ok());
    if (g > 0) {
      ASSERT_TRUE(store_->StartGroup("jobs", absl::StrCat("batch", g - 1)).ok());
    }
    for (size_t i = half; i < items.size(); ++i) {
      absl::StatusOr<EnqueueResult> r = producer.Enqueue("jobs", items[i]);
      ASSERT_TRUE(r.ok()) << r.status();
    }
  }
  ASSERT_TRUE(store_->StartGroup("jobs", absl::StrCat("batch", kGroups - 1)).ok());
  EXPECT_TRUE(WaitUntil(
      [&] {
        return schema_.QInt("SELECT count(*) FROM {schema}.groups WHERE ended_at IS NOT NULL") ==
               kGroups;
      },
      absl::Seconds(120)));
  for (auto& c : consumers) c->Stop();
  std::map<std::string, int> ends;
  for (const nlohmann::json& e : EndItems()) {
    ++ends[e["group"].get<std::string>()];
    EXPECT_EQ(e["done"], kPerGroup - 1) << e.dump();
    EXPECT_EQ(e["dead"], 1) << e.dump();
  }
  EXPECT_EQ(ends.size(), static_cast<size_t>(kGroups));
  for (const auto& [g, n] : ends) EXPECT_EQ(n, 1) << g;
  // A failing item makes its batch run again (consumer/handler.h), so
  // some items were handled more than once; each was acked or died once.
  EXPECT_GE(handled.load(), kGroups * kPerGroup);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE queue = 'jobs'"), 0);
}

}  // namespace
}  // namespace partq
