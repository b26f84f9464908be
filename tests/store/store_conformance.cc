// The Store contract, one case per rule (store_conformance.h says how it
// runs). Sections follow store.h: queues, sessions and parts, items, claims,
// finishing, the transaction's effects, item state and status, dead items.
#include "tests/store/store_conformance.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "partitioner/part.h"
#include "store/throughput.h"
#include "store/validate.h"

namespace partq::conformance {

using store_testing::AckAll;
using store_testing::ClaimAll;
using store_testing::FinishOf;
using store_testing::Ids;
using store_testing::JoinWith;
using store_testing::kAllParts;
using store_testing::Keyed;
using store_testing::KeyInPart;
using store_testing::MakeQueue;
using store_testing::Member;
using store_testing::OutcomesOf;
using store_testing::Payload;
using store_testing::WorkOfEveryKind;

void StoreConformance::SetUp() {
  harness_ = GetParam().make();
  ASSERT_NE(harness_, nullptr);
  store_ = harness_->Connect();
  ASSERT_NE(store_, nullptr);
}

StoreConformance::Counts StoreConformance::CountsOf(const std::string& queue) {
  Counts c;
  absl::StatusOr<QueueStatus> s = store_->Status(queue);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return c;
  for (const PartStatus& p : s->parts) {
    c.ready += p.ready;
    c.delayed += p.delayed;
    c.in_flight += p.in_flight;
    c.dead += p.dead;
  }
  return c;
}

std::vector<std::string> StoreConformance::Published(const std::string& topic) {
  std::vector<std::string> out;
  for (const OutboxEvent& e : harness_->Outbox()) {
    if (e.topic == topic) out.push_back(e.payload);
  }
  return out;
}

void StoreFinishConformance::SetUp() {
  StoreConformance::SetUp();
  MakeQueue(*store_, "q", 2, absl::Seconds(60), false, /*max_attempts=*/3);
  for (int i = 0; i < 6; ++i) {  // three items in each part, each of a key of its own
    ASSERT_OK_AND_ASSIGN(EnqueueResult r,
                         store_->Enqueue("q", Keyed(KeyInPart(i % 2, 2, i / 2), absl::StrCat(i))));
    ids_.push_back(r.id);
  }
  member_ = JoinWith(*store_, "q", {0, 1});
  ASSERT_EQ(member_.parts.size(), 2u);
}

FinishBody StoreFinishConformance::Record(Outcome::Kind kind, std::vector<int64_t>* seen) {
  return
      [kind, seen](Tx& tx, absl::Span<const Item> items) -> absl::StatusOr<std::vector<Outcome>> {
        if (seen != nullptr) seen->clear();
        std::vector<Outcome> out;
        for (const Item& i : items) {
          OutboxEvent e;
          e.topic = "effects";
          e.payload = absl::StrCat(i.id);
          if (absl::Status st = tx.Publish(e); !st.ok()) return st;
          if (seen != nullptr) seen->push_back(i.id);
          Outcome o{i.id, i.part, kind};
          o.retry_delay = absl::Minutes(5);
          o.error = "boom";
          out.push_back(o);
        }
        return out;
      };
}

std::vector<int64_t> StoreFinishConformance::Effects() {
  std::vector<int64_t> ids;
  for (const std::string& p : Published("effects")) {
    int64_t id = 0;
    EXPECT_TRUE(absl::SimpleAtoi(p, &id)) << p;
    ids.push_back(id);
  }
  return ids;
}

std::string StoreKindName(const ::testing::TestParamInfo<StoreKind>& info) {
  return info.param.name;
}

namespace {

std::vector<int64_t> Sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// Enqueues items "0".."n-1" one by one; their ids, in order (fewer on error).
std::vector<int64_t> EnqueueNumbered(Store& store, const std::string& queue, int n) {
  std::vector<int64_t> ids;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<EnqueueResult> r = store.Enqueue(queue, Payload(absl::StrCat(i)));
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) break;
    ids.push_back(r->id);
  }
  return ids;
}

// A key for each of the `parts` parts.
std::map<int, std::string> KeyPerPart(int parts) {
  std::map<int, std::string> key_of;
  for (int i = 0; static_cast<int>(key_of.size()) < parts; ++i) {
    const std::string k = absl::StrCat("k", i);
    key_of.emplace(PartForKey(k, parts), k);
  }
  return key_of;
}

// Canonical UUID text: 8-4-4-4-12 lowercase hex digits.
bool IsUuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    const char c = s[i];
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

// --- queues ---------------------------------------------------------------------------

TEST_P(StoreConformance, QueueCreateGetListDelete) {
  QueueConfig c;
  c.name = "emails.v2";
  c.parts = 12;
  c.assignment = AssignmentKind::kSticky;
  c.session_ttl = absl::Milliseconds(2500);
  c.max_attempts = 7;
  c.ordered = true;
  ASSERT_OK(store_->CreateQueue(c));
  EXPECT_EQ(store_->CreateQueue(c).code(), absl::StatusCode::kAlreadyExists);
  MakeQueue(*store_, "a-first", 1);

  ASSERT_OK_AND_ASSIGN(QueueConfig got, store_->GetQueue("emails.v2"));
  EXPECT_EQ(got.name, "emails.v2");
  EXPECT_EQ(got.parts, 12);
  EXPECT_EQ(got.assignment, AssignmentKind::kSticky);
  EXPECT_EQ(got.session_ttl, absl::Milliseconds(2500));
  EXPECT_EQ(got.max_attempts, 7);
  EXPECT_TRUE(got.ordered);

  ASSERT_OK_AND_ASSIGN(std::vector<QueueConfig> all, store_->ListQueues());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "a-first");
  EXPECT_EQ(all[1].name, "emails.v2");

  // Deleting takes the queue's sessions, parts and items; not another queue's.
  Member m = JoinWith(*store_, "emails.v2", {0, 1});
  ASSERT_EQ(m.parts.size(), 2u);
  ASSERT_OK(store_->Enqueue("emails.v2", Payload("one")));
  ASSERT_OK(store_->Enqueue("a-first", Payload("other queue")));
  ASSERT_OK_AND_ASSIGN(DeletedQueue gone, store_->DeleteQueue("emails.v2", QueueContents::kDelete));
  EXPECT_EQ(gone.items, 1);
  EXPECT_EQ(gone.dead_items, 0);
  EXPECT_EQ(CountsOf("a-first").ready, 1);

  absl::Status st = store_->GetQueue("emails.v2").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StartsWith(st.message(), "unknown queue \"emails.v2\"")) << st;
  EXPECT_EQ(store_->DeleteQueue("emails.v2", QueueContents::kDelete).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Enqueue("emails.v2", Payload("x")).status().code(),
            absl::StatusCode::kNotFound);

  // Created again, the queue starts empty: no session, owner or item is left.
  ASSERT_OK(store_->CreateQueue(c));
  ASSERT_OK_AND_ASSIGN(QueueStatus fresh, store_->Status("emails.v2"));
  EXPECT_TRUE(fresh.sessions.empty());
  for (const PartStatus& p : fresh.parts) {
    EXPECT_FALSE(p.owner.has_value()) << p.part;
    EXPECT_EQ(p.ready + p.delayed + p.in_flight + p.dead, 0) << p.part;
  }
  ASSERT_OK_AND_ASSIGN(GroupView old, store_->Heartbeat("emails.v2", m.join.id, 1));
  EXPECT_FALSE(old.alive) << "the session went with the queue";
}

// A queue that holds work is kept unless the caller says to delete the work
// with it; a delete says what went.
TEST_P(StoreConformance, DeleteQueueRefusesAQueueThatHoldsWorkUnlessToldToDeleteIt) {
  MakeQueue(*store_, "other", 1);
  ASSERT_OK(store_->Enqueue("other", Payload("stays")));
  WorkOfEveryKind work = store_testing::MakeWorkOfEveryKind(*store_, "orders");
  ASSERT_OK_AND_ASSIGN(QueueStatus status, store_->Status("orders"));
  ASSERT_EQ(status.parts.size(), 1u);
  EXPECT_EQ(status.parts[0].ready, 2);
  EXPECT_EQ(status.parts[0].delayed, 1);
  EXPECT_EQ(status.parts[0].in_flight, 1);
  EXPECT_EQ(status.parts[0].dead, 1);

  absl::Status refused = store_->DeleteQueue("orders", QueueContents::kRefuse).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(refused.message(), "queue \"orders\" still holds")) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "nothing was deleted")) << refused;
  // Nothing changed: items, dead items, results, claim records, sessions.
  EXPECT_OK(store_->GetQueue("orders"));
  ASSERT_OK_AND_ASSIGN(status, store_->Status("orders"));
  EXPECT_EQ(status.parts[0].ready, 2);
  EXPECT_EQ(status.parts[0].delayed, 1);
  EXPECT_EQ(status.parts[0].in_flight, 1);
  EXPECT_EQ(status.parts[0].dead, 1);
  ASSERT_OK_AND_ASSIGN(ItemState acked, store_->GetItemState("orders", work.acked));
  EXPECT_EQ(acked.kind, ItemState::Kind::kDone);
  EXPECT_EQ(acked.result, std::optional<std::string>("done"));
  ASSERT_OK_AND_ASSIGN(GroupView group, store_->ReadGroup("orders"));
  EXPECT_EQ(group.members.size(), 1u);
  EXPECT_EQ(group.owners.size(), 1u);

  ASSERT_OK_AND_ASSIGN(DeletedQueue gone, store_->DeleteQueue("orders", QueueContents::kDelete));
  EXPECT_EQ(gone.items, 4);
  EXPECT_EQ(gone.dead_items, 1);
  EXPECT_EQ(store_->GetQueue("orders").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(CountsOf("other").ready, 1);
  // Created again: no item, dead item, result or session of the old one.
  MakeQueue(*store_, "orders", 1);
  Counts counts = CountsOf("orders");
  EXPECT_EQ(counts.items() + counts.dead, 0);
  ASSERT_OK_AND_ASSIGN(std::vector<DeadItem> dead, store_->ListDead("orders", 10));
  EXPECT_TRUE(dead.empty());
  ASSERT_OK_AND_ASSIGN(acked, store_->GetItemState("orders", work.acked));
  EXPECT_FALSE(acked.result.has_value()) << "the result went with the queue";
  ASSERT_OK_AND_ASSIGN(group, store_->ReadGroup("orders"));
  EXPECT_TRUE(group.members.empty());
  EXPECT_TRUE(group.owners.empty());
}

// Dead items alone are work to keep; results alone (items finished) are not.
TEST_P(StoreConformance, DeleteQueueRefusesDeadItemsAloneAndDeletesAQueueWithOnlyResults) {
  MakeQueue(*store_, "dead", 1);
  MakeQueue(*store_, "done", 1);
  std::map<std::string, int64_t> id_in;
  for (const char* queue : {"dead", "done"}) {
    ASSERT_OK(store_->Enqueue(queue, Payload("x")));
    Member m = JoinWith(*store_, queue, kAllParts);
    ASSERT_OK_AND_ASSIGN(std::vector<Item> claimed, store_->Claim(ClaimAll(queue, m)));
    ASSERT_EQ(claimed.size(), 1u);
    id_in[queue] = claimed[0].id;
    const bool kill = queue == std::string("dead");
    ASSERT_OK(store_->Finish(
        FinishOf(queue, m, claimed),
        [kill](Tx&, absl::Span<const Item> items) -> absl::StatusOr<std::vector<Outcome>> {
          Outcome o{items[0].id, items[0].part, kill ? Outcome::Kind::kDead : Outcome::Kind::kAck};
          if (kill) o.error = "boom";
          o.result = kill ? std::nullopt : std::optional<std::string>("ok");
          return std::vector<Outcome>{o};
        }));
  }
  absl::Status st = store_->DeleteQueue("dead", QueueContents::kRefuse).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(st.message(), "queue \"dead\" still holds")) << st;
  ASSERT_OK_AND_ASSIGN(std::vector<DeadItem> dead, store_->ListDead("dead", 10));
  EXPECT_EQ(dead.size(), 1u);

  ASSERT_OK_AND_ASSIGN(ItemState done, store_->GetItemState("done", id_in["done"]));
  ASSERT_EQ(done.result, std::optional<std::string>("ok"));
  ASSERT_OK_AND_ASSIGN(DeletedQueue gone, store_->DeleteQueue("done", QueueContents::kRefuse));
  EXPECT_EQ(gone.items, 0);
  EXPECT_EQ(gone.dead_items, 0);
  ASSERT_OK_AND_ASSIGN(std::vector<QueueConfig> queues, store_->ListQueues());
  EXPECT_EQ(queues.size(), 1u);
  MakeQueue(*store_, "done", 1);
  ASSERT_OK_AND_ASSIGN(done, store_->GetItemState("done", id_in["done"]));
  EXPECT_FALSE(done.result.has_value()) << "the result went with the queue";
}

TEST_P(StoreConformance, QueueValidationRejectsBadInput) {
  for (const std::string& name :
       {std::string("a'; drop table x;--"), std::string("\"quoted\""), std::string("it's"),
        std::string(""), std::string(64, 'a'), std::string("-leading"), std::string("sp ace"),
        std::string("semi;colon"), std::string("new\nline")}) {
    QueueConfig c;
    c.name = name;
    absl::Status st = store_->CreateQueue(c);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_TRUE(absl::StrContains(st.message(), "invalid queue name")) << st;
    EXPECT_EQ(store_->Enqueue(name, Payload("x")).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(store_->GetQueue(name).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(store_->Status(name).status().code(), absl::StatusCode::kInvalidArgument);
    JoinRequest join;
    join.queue = name;
    EXPECT_EQ(store_->Join(join).status().code(), absl::StatusCode::kInvalidArgument);
  }
  QueueConfig c;
  c.name = std::string(63, 'q');
  EXPECT_OK(store_->CreateQueue(c));
  for (int parts : {0, 4097, -1}) {
    c.name = "p";
    c.parts = parts;
    absl::Status st = store_->CreateQueue(c);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(st.message(), "1..4096")) << st;
  }
  c.parts = 4096;
  c.max_attempts = 0;
  EXPECT_EQ(store_->CreateQueue(c).code(), absl::StatusCode::kInvalidArgument);
  c.max_attempts = 1001;
  EXPECT_EQ(store_->CreateQueue(c).code(), absl::StatusCode::kInvalidArgument);
  c.max_attempts = 1;
  c.session_ttl = absl::Milliseconds(99);
  EXPECT_EQ(store_->CreateQueue(c).code(), absl::StatusCode::kInvalidArgument);
  c.session_ttl = absl::Hours(25);
  EXPECT_EQ(store_->CreateQueue(c).code(), absl::StatusCode::kInvalidArgument);
  c.session_ttl = absl::Milliseconds(100);
  EXPECT_OK(store_->CreateQueue(c));
  ASSERT_OK_AND_ASSIGN(std::vector<QueueConfig> all, store_->ListQueues());
  EXPECT_EQ(all.size(), 2u);
}

// The queue's throughput (migration 17): what live sessions' heartbeats
// carry is summed per minute in Status; a heartbeat of a session that is
// gone adds nothing; the queue's delete takes its counts with it.
TEST_P(StoreConformance, HeartbeatsCarryFinishedCountsIntoTheQueuesThroughput) {
  const FinishCounts kFirst{30, 2, 1}, kSecond{5, 0, 0}, kOther{7, 1, 0}, kLate{100, 100, 100};
  MakeQueue(*store_, "q", 2);
  Member a = JoinWith(*store_, "q", {0});
  Member b = JoinWith(*store_, "q", {1});
  ASSERT_OK_AND_ASSIGN(QueueStatus st, store_->Status("q"));
  EXPECT_TRUE(st.throughput.empty());
  ASSERT_OK_AND_ASSIGN(GroupView v, store_->Heartbeat("q", a.join.id, a.join.incarnation, kFirst));
  EXPECT_TRUE(v.alive);
  ASSERT_OK(store_->Heartbeat("q", a.join.id, a.join.incarnation, kSecond));
  ASSERT_OK(store_->Heartbeat("q", b.join.id, b.join.incarnation, kOther));
  ASSERT_OK(store_->Heartbeat("q", b.join.id, b.join.incarnation));  // nothing new
  ASSERT_OK(store_->Leave("q", b.join.id, b.join.incarnation));
  ASSERT_OK_AND_ASSIGN(v, store_->Heartbeat("q", b.join.id, b.join.incarnation, kLate));
  EXPECT_FALSE(v.alive);
  ASSERT_OK_AND_ASSIGN(st, store_->Status("q"));
  for (const ThroughputMinute& m : st.throughput) {
    EXPECT_LE(m.minute, st.db_now);
    EXPECT_GT(m.minute, st.db_now - absl::Hours(1) - absl::Minutes(1));
  }
  const FinishCounts expected{42, 3, 1};
  EXPECT_EQ(Total(st.throughput), expected) << "a left session's counts stay, its late ones do not";
  // Each session's own rows come with it, for the rates (store/throughput.h),
  // with how long ago it started and last heartbeated.
  ASSERT_EQ(st.sessions.size(), 1u);
  EXPECT_EQ(st.sessions[0].id, a.join.id);
  EXPECT_EQ(Total(st.sessions[0].throughput), kFirst + kSecond);
  EXPECT_GE(st.sessions[0].since_start, st.sessions[0].since_heartbeat);
  EXPECT_GE(st.sessions[0].since_heartbeat, absl::ZeroDuration());
  ASSERT_OK(store_->Leave("q", a.join.id, a.join.incarnation));
  ASSERT_OK(store_->DeleteQueue("q", QueueContents::kDelete).status());
  MakeQueue(*store_, "q", 2);
  ASSERT_OK_AND_ASSIGN(st, store_->Status("q"));
  EXPECT_TRUE(st.throughput.empty()) << "a queue made again under the name starts from zero";
}

TEST_P(StoreConformance, APausedQueueSaysSoInItsConfigAndEveryGroupView) {
  MakeQueue(*store_, "q", 2);
  Member a = JoinWith(*store_, "q", {0});
  ASSERT_OK_AND_ASSIGN(QueueConfig c, store_->GetQueue("q"));
  EXPECT_FALSE(c.paused);
  ASSERT_OK(store_->SetPaused("q", true));
  ASSERT_OK(store_->SetPaused("q", true));  // idempotent
  ASSERT_OK_AND_ASSIGN(c, store_->GetQueue("q"));
  EXPECT_TRUE(c.paused);
  ASSERT_OK_AND_ASSIGN(GroupView g, store_->ReadGroup("q"));
  EXPECT_TRUE(g.paused);
  EXPECT_EQ(g.owners.size(), 1u) << "pausing moves no part";
  ASSERT_OK_AND_ASSIGN(g, store_->Heartbeat("q", a.join.id, a.join.incarnation));
  EXPECT_TRUE(g.paused);
  ASSERT_OK_AND_ASSIGN(std::vector<QueueConfig> all, store_->ListQueues());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_TRUE(all[0].paused);
  ASSERT_OK_AND_ASSIGN(QueueStatus st, store_->Status("q"));
  EXPECT_TRUE(st.config.paused);
  ASSERT_OK(store_->SetPaused("q", false));
  ASSERT_OK_AND_ASSIGN(g, store_->Heartbeat("q", a.join.id, a.join.incarnation));
  EXPECT_FALSE(g.paused);
  EXPECT_EQ(store_->SetPaused("nosuch", true).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->SetPaused("bad name", true).code(), absl::StatusCode::kInvalidArgument);
  // A queue made with paused set starts running: pausing is not a creation setting.
  QueueConfig q2;
  q2.name = "q2";
  q2.parts = 1;
  q2.paused = true;
  ASSERT_OK(store_->CreateQueue(q2));
  ASSERT_OK_AND_ASSIGN(c, store_->GetQueue("q2"));
  EXPECT_FALSE(c.paused);
}

TEST_P(StoreConformance, DeadLetterTopicIsSetClearedAndValidated) {
  QueueConfig c;
  c.name = "orders";
  c.dlq_topic = "orders.dlq";
  ASSERT_OK(store_->CreateQueue(c));
  MakeQueue(*store_, "plain", 1);
  ASSERT_OK_AND_ASSIGN(QueueConfig got, store_->GetQueue("orders"));
  EXPECT_EQ(got.dlq_topic, std::optional<std::string>("orders.dlq"));
  ASSERT_OK_AND_ASSIGN(std::vector<QueueConfig> all, store_->ListQueues());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].dlq_topic, std::optional<std::string>("orders.dlq"));
  EXPECT_FALSE(all[1].dlq_topic.has_value());

  ASSERT_OK(store_->SetDeadLetterTopic("plain", std::string("Plain_dead-1")));
  ASSERT_OK(store_->SetDeadLetterTopic("orders", std::nullopt));
  ASSERT_OK_AND_ASSIGN(got, store_->GetQueue("plain"));
  EXPECT_EQ(got.dlq_topic, std::optional<std::string>("Plain_dead-1"));
  ASSERT_OK_AND_ASSIGN(got, store_->GetQueue("orders"));
  EXPECT_FALSE(got.dlq_topic.has_value());
  EXPECT_EQ(store_->SetDeadLetterTopic("nope", std::string("t")).code(),
            absl::StatusCode::kNotFound);

  for (const std::string& topic :
       {std::string(""), std::string("."), std::string(".."), std::string(250, 't'),
        std::string("with space"), std::string("quote'd"), std::string("slash/ed"),
        std::string("ümlaut")}) {
    absl::Status st = store_->SetDeadLetterTopic("plain", topic);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << topic;
    EXPECT_TRUE(absl::StrContains(st.message(), "invalid Kafka topic name")) << st;
    c.name = "other";
    c.dlq_topic = topic;
    st = store_->CreateQueue(c);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << topic;
    EXPECT_TRUE(absl::StrContains(st.message(), "dead-letter topic")) << st;
  }
  EXPECT_OK(ValidateTopicName(std::string(249, 't')));
  ASSERT_OK_AND_ASSIGN(got, store_->GetQueue("plain"));
  EXPECT_EQ(got.dlq_topic, std::optional<std::string>("Plain_dead-1"));
}

// --- sessions -------------------------------------------------------------------------

TEST_P(StoreConformance, JoinDynamicAndStaticMembers) {
  MakeQueue(*store_, "q", 4);
  JoinRequest req;
  req.queue = "q";
  req.host = "h";
  req.pid = 7;
  ASSERT_OK_AND_ASSIGN(JoinResult a, store_->Join(req));
  ASSERT_OK_AND_ASSIGN(JoinResult b, store_->Join(req));
  EXPECT_NE(a.id, b.id);
  EXPECT_EQ(a.incarnation, 1);
  req.instance_id = "worker-0";
  ASSERT_OK_AND_ASSIGN(JoinResult s, store_->Join(req));
  EXPECT_EQ(s.incarnation, 1);
  EXPECT_TRUE(s.kept.empty());
  // Dynamic members get uuids. (MemStore names static ones "static-q/worker-0",
  // so they sort by instance for the session tests: store/mem_store.cc.)
  for (const JoinResult* j : {&a, &b}) EXPECT_TRUE(IsUuid(j->id.value)) << j->id;

  ASSERT_OK_AND_ASSIGN(GroupView g, store_->ReadGroup("q"));
  ASSERT_EQ(g.members.size(), 3u);
  EXPECT_TRUE(std::is_sorted(g.members.begin(), g.members.end()));
  ASSERT_OK_AND_ASSIGN(QueueStatus status, store_->Status("q"));
  ASSERT_EQ(status.sessions.size(), 3u);
  for (const SessionInfo& info : status.sessions) {
    EXPECT_EQ(info.host, "h");
    EXPECT_EQ(info.pid, 7);
    EXPECT_EQ(info.instance_id, info.id == s.id ? "worker-0" : "");
  }

  req.queue = "nope";
  EXPECT_EQ(store_->Join(req).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ReadGroup("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_P(StoreConformance, StaticRejoinKeepsPartsAtNewEpochsAndFencesTheOldIncarnation) {
  MakeQueue(*store_, "q", 4);
  Member first = JoinWith(*store_, "q", {0, 1, 2}, "worker-0");
  ASSERT_EQ(first.parts.size(), 3u);
  auto other = harness_->Connect();
  Member second = JoinWith(*other, "q", {}, "worker-0");  // same instance: a restart
  EXPECT_EQ(second.join.id, first.join.id);
  EXPECT_EQ(second.join.incarnation, 2);
  ASSERT_EQ(second.join.kept.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(second.join.kept[i].part, first.parts[i].part);
    EXPECT_GT(second.join.kept[i].epoch.value, first.parts[i].epoch.value);
  }
  ASSERT_OK_AND_ASSIGN(GroupView old_view,
                       store_->Heartbeat("q", first.join.id, first.join.incarnation));
  EXPECT_FALSE(old_view.alive);
  ASSERT_OK_AND_ASSIGN(GroupView new_view,
                       other->Heartbeat("q", second.join.id, second.join.incarnation));
  EXPECT_TRUE(new_view.alive);
  ASSERT_EQ(new_view.owners.size(), 3u);
  EXPECT_EQ(new_view.owners[0].epoch, second.join.kept[0].epoch);
  // The old incarnation's Leave does nothing; the new one's Leave frees all.
  ASSERT_OK(store_->Leave("q", first.join.id, first.join.incarnation));
  ASSERT_OK_AND_ASSIGN(GroupView g, store_->ReadGroup("q"));
  EXPECT_EQ(g.owners.size(), 3u);
  ASSERT_OK(other->Leave("q", second.join.id, second.join.incarnation));
  ASSERT_OK_AND_ASSIGN(g, store_->ReadGroup("q"));
  EXPECT_TRUE(g.owners.empty());
  ASSERT_OK_AND_ASSIGN(QueueStatus status, store_->Status("q"));
  EXPECT_TRUE(status.sessions.empty());
}

// A static member stopping for a restart (KIP-345): what it claimed and did
// not finish goes back with no attempt counted, its session and parts stay
// (nobody else can take them before its TTL), and its next incarnation gets
// them back at once with nothing abandoned.
TEST_P(StoreConformance, ReleaseClaimsKeepsAStaticMembersPartsForItsRestart) {
  MakeQueue(*store_, "q", 2);
  Member a = JoinWith(*store_, "q", {0, 1}, "worker-0");
  ASSERT_EQ(a.parts.size(), 2u);
  for (int i = 0; i < 6; ++i) ASSERT_OK(store_->Enqueue("q", Payload("x")));
  ASSERT_OK_AND_ASSIGN(std::vector<Item> claimed, store_->Claim(ClaimAll("q", a)));
  ASSERT_EQ(claimed.size(), 6u);
  // Another incarnation's call changes nothing.
  ASSERT_OK(store_->ReleaseClaims("q", a.join.id, a.join.incarnation + 1));
  ASSERT_OK_AND_ASSIGN(QueueStatus status, store_->Status("q"));
  EXPECT_EQ(status.parts[0].in_flight + status.parts[1].in_flight, 6);

  ASSERT_OK(store_->ReleaseClaims("q", a.join.id, a.join.incarnation));
  ASSERT_OK_AND_ASSIGN(status, store_->Status("q"));
  EXPECT_EQ(status.parts[0].in_flight + status.parts[1].in_flight, 0);
  ASSERT_EQ(status.sessions.size(), 1u) << "the session stays";
  ASSERT_OK_AND_ASSIGN(GroupView g, store_->ReadGroup("q"));
  ASSERT_EQ(g.owners.size(), 2u) << "and so do its parts";
  // Someone else finds them taken.
  auto other = harness_->Connect();
  Member b = JoinWith(*other, "q", {0, 1});
  EXPECT_TRUE(b.parts.empty());

  // The restart: the same instance gets both parts at once, abandons nothing.
  auto restarted = harness_->Connect();
  Member a2 = JoinWith(*restarted, "q", {}, "worker-0");
  EXPECT_EQ(a2.join.id, a.join.id);
  ASSERT_EQ(a2.join.kept.size(), 2u);
  a2.parts = a2.join.kept;
  ClaimRequest plain = ClaimAll("q", a2);
  plain.include_suspect = false;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> again, restarted->Claim(plain));
  EXPECT_EQ(Sorted(Ids(again)), Sorted(Ids(claimed)));
  for (const Item& i : again) {
    EXPECT_EQ(i.attempts, 1) << "no attempt counted for the stop";
    EXPECT_FALSE(i.suspect);
  }
  // The stopped incarnation's late acks are fenced.
  ASSERT_OK_AND_ASSIGN(FinishResult late, store_->Finish(FinishOf("q", a, claimed), AckAll()));
  EXPECT_TRUE(late.acked.empty());
}

// Expiry is by the database clock: a session that stops heartbeating is
// still a member until its TTL has passed, then the next heartbeat of
// another member deletes it and its parts.
TEST_P(StoreConformance, HeartbeatExpiresSilentSessionsByDatabaseTime) {
  MakeQueue(*store_, "q", 4, absl::Seconds(60));
  Member a = JoinWith(*store_, "q", {0, 1});
  auto other = harness_->Connect();
  Member b = JoinWith(*other, "q", {2, 3});  // b never heartbeats again
  harness_->Advance(absl::Seconds(30));
  ASSERT_OK_AND_ASSIGN(GroupView v, store_->Heartbeat("q", a.join.id, a.join.incarnation));
  EXPECT_TRUE(v.alive);
  EXPECT_EQ(v.expired, 0);
  EXPECT_EQ(v.members, (std::vector<SessionId>{std::min(a.join.id, b.join.id),
                                               std::max(a.join.id, b.join.id)}));
  EXPECT_EQ(v.owners.size(), 4u);

  harness_->Advance(absl::Seconds(31));  // past b's TTL, not a's (renewed 31 s ago)
  // ReadGroup no longer counts b as a member, but deletes nothing.
  ASSERT_OK_AND_ASSIGN(GroupView read, store_->ReadGroup("q"));
  EXPECT_EQ(read.members, std::vector<SessionId>{a.join.id});
  EXPECT_EQ(read.owners.size(), 4u);
  ASSERT_OK_AND_ASSIGN(v, store_->Heartbeat("q", a.join.id, a.join.incarnation));
  EXPECT_TRUE(v.alive);
  EXPECT_EQ(v.expired, 1);
  EXPECT_EQ(v.members, std::vector<SessionId>{a.join.id});
  ASSERT_EQ(v.owners.size(), 2u);  // b's parts went with it
  for (const PartOwner& o : v.owners) EXPECT_EQ(o.session, a.join.id);
  ASSERT_OK_AND_ASSIGN(read, store_->ReadGroup("q"));
  EXPECT_EQ(read.owners.size(), 2u);
  ASSERT_OK_AND_ASSIGN(GroupView dead_b, other->Heartbeat("q", b.join.id, b.join.incarnation));
  EXPECT_FALSE(dead_b.alive);
}

TEST_P(StoreConformance, HeartbeatMovesTheExpiry) {
  MakeQueue(*store_, "q", 2, absl::Seconds(60));
  Member a = JoinWith(*store_, "q", {0});
  Member b = JoinWith(*store_, "q", {1});
  harness_->Advance(absl::Seconds(40));
  ASSERT_OK_AND_ASSIGN(GroupView v, store_->Heartbeat("q", b.join.id, b.join.incarnation));
  EXPECT_TRUE(v.alive);
  EXPECT_EQ(v.expired, 0);
  ASSERT_OK_AND_ASSIGN(QueueStatus status, store_->Status("q"));
  ASSERT_EQ(status.sessions.size(), 2u);
  for (const SessionInfo& s : status.sessions) {
    if (s.id == b.join.id) {
      EXPECT_LT(s.since_heartbeat, absl::Seconds(30));
      EXPECT_GT(s.expires_in, absl::Seconds(30));
    } else {
      EXPECT_GE(s.since_heartbeat, absl::Seconds(40));
      EXPECT_LE(s.expires_in, absl::Seconds(20));
    }
    EXPECT_LE(s.expires_in, absl::Seconds(60));
    EXPECT_EQ(s.parts_owned, 1);
  }
  harness_->Advance(absl::Seconds(40));  // a: 80 s silent; b: 40 s
  ASSERT_OK_AND_ASSIGN(v, store_->Heartbeat("q", b.join.id, b.join.incarnation));
  EXPECT_TRUE(v.alive);
  EXPECT_EQ(v.expired, 1);
  EXPECT_EQ(v.members, std::vector<SessionId>{b.join.id});
  ASSERT_EQ(v.owners.size(), 1u);
  EXPECT_EQ(v.owners[0].part, 1);
  ASSERT_OK_AND_ASSIGN(v, store_->Heartbeat("q", a.join.id, a.join.incarnation));
  EXPECT_FALSE(v.alive);
}

// The group generation (Store::HeartbeatSince): a caller that passes the
// generation of its last whole view gets no members or owners until the group
// changes, and every kind of change moves it.
TEST_P(StoreConformance, AGroupReadAtTheKnownGenerationReturnsNoMembersOrOwners) {
  MakeQueue(*store_, "q", 4, absl::Seconds(60));
  Member a = JoinWith(*store_, "q", {0, 1});
  ASSERT_OK_AND_ASSIGN(GroupView whole, store_->ReadGroup("q"));
  EXPECT_FALSE(whole.unchanged) << "kNoGeneration always reads the whole group";
  EXPECT_EQ(whole.owners.size(), 2u);
  const int64_t g = whole.generation;
  ASSERT_OK_AND_ASSIGN(GroupView v,
                       store_->HeartbeatSince("q", a.join.id, a.join.incarnation, g, {}));
  EXPECT_TRUE(v.alive);
  EXPECT_TRUE(v.unchanged);
  EXPECT_EQ(v.generation, g);
  EXPECT_TRUE(v.members.empty());
  EXPECT_TRUE(v.owners.empty());
  ASSERT_OK_AND_ASSIGN(v, store_->ReadGroupSince("q", g));
  EXPECT_TRUE(v.unchanged);
  EXPECT_TRUE(v.owners.empty());
  // The queue's flags are read every time: they do not move the generation.
  ASSERT_OK(store_->SetPaused("q", true));
  ASSERT_OK_AND_ASSIGN(v, store_->HeartbeatSince("q", a.join.id, a.join.incarnation, g, {}));
  EXPECT_TRUE(v.unchanged);
  EXPECT_TRUE(v.paused);
  // An acquisition that got nothing changed nothing.
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedPart> none, store_->AcquireParts("q", a.join.id, {0}));
  EXPECT_TRUE(none.empty());
  ASSERT_OK_AND_ASSIGN(v, store_->ReadGroupSince("q", g));
  EXPECT_TRUE(v.unchanged);
  ASSERT_OK_AND_ASSIGN(v, store_->ReadGroupSince("q", kNoGeneration));
  EXPECT_FALSE(v.unchanged);
  EXPECT_EQ(v.owners.size(), 2u);
}

// A heartbeat at the known generation (the idle fleet's; PgStore answers it
// with a statement of its own when nothing changed) still does all a
// heartbeat does: it renews the session, carries finished counts, reads the
// queue row's paused flag, rate and part count fresh, sees a change of the
// group, and says when the session is gone.
TEST_P(StoreConformance, AHeartbeatAtTheKnownGenerationRenewsCountsAndSaysGone) {
  MakeQueue(*store_, "q", 4, absl::Seconds(60));
  Member a = JoinWith(*store_, "q", {0, 1});
  auto other = harness_->Connect();
  Member b = JoinWith(*other, "q", {2, 3});
  // Renews: 40 s on, a's heartbeat at g moves its expiry 60 s on.
  harness_->Advance(absl::Seconds(40));
  ASSERT_OK_AND_ASSIGN(GroupView whole, store_->ReadGroup("q"));
  const int64_t g = whole.generation;
  ASSERT_OK_AND_ASSIGN(GroupView v, store_->HeartbeatSince("q", a.join.id, a.join.incarnation, g, {}));
  EXPECT_TRUE(v.alive);
  EXPECT_TRUE(v.unchanged);
  EXPECT_EQ(v.parts, 4);
  EXPECT_FALSE(v.paused);
  ASSERT_OK_AND_ASSIGN(QueueStatus st, store_->Status("q"));
  for (const SessionInfo& s : st.sessions) {
    if (s.id == a.join.id) EXPECT_GT(s.expires_in, absl::Seconds(50));
  }
  ASSERT_OK(other->Heartbeat("q", b.join.id, b.join.incarnation));  // b too: nobody expires yet
  // Counts at the known generation are carried.
  ASSERT_OK_AND_ASSIGN(v, store_->HeartbeatSince("q", a.join.id, a.join.incarnation, g,
                                                 FinishCounts{5, 1, 0}));
  EXPECT_TRUE(v.alive);
  EXPECT_TRUE(v.unchanged);
  ASSERT_OK_AND_ASSIGN(st, store_->Status("q"));
  EXPECT_EQ(Total(st.throughput), (FinishCounts{5, 1, 0}));
  // The queue row is read fresh at the known generation.
  ASSERT_OK(store_->SetPaused("q", true));
  ASSERT_OK_AND_ASSIGN(v, store_->HeartbeatSince("q", a.join.id, a.join.incarnation, g, {}));
  EXPECT_TRUE(v.unchanged);
  EXPECT_TRUE(v.paused);
  // A change of the group is seen.
  ASSERT_OK(other->Leave("q", b.join.id, b.join.incarnation));
  ASSERT_OK_AND_ASSIGN(v, store_->HeartbeatSince("q", a.join.id, a.join.incarnation, g, {}));
  EXPECT_TRUE(v.alive);
  EXPECT_FALSE(v.unchanged);
  EXPECT_GT(v.generation, g);
  EXPECT_EQ(v.members, std::vector<SessionId>{a.join.id});
  // A session that is gone hears it at the generation it knew.
  ASSERT_OK_AND_ASSIGN(GroupView now, store_->ReadGroup("q"));
  ASSERT_OK(store_->Leave("q", a.join.id, a.join.incarnation));
  ASSERT_OK_AND_ASSIGN(
      v, store_->HeartbeatSince("q", a.join.id, a.join.incarnation, now.generation, {}));
  EXPECT_FALSE(v.alive);
}

// Heartbeats at the known generation that found nobody past their TTL do not
// hide one who is past it later: a member that went silent is seen by the
// first such heartbeat after its expiry, though earlier ones (PgStore's read
// the members only when its expiry sweep is due: migration 24) learned the
// members' expiries before; so is a member that joined after such a
// heartbeat.
TEST_P(StoreConformance, AnIdleHeartbeatSeesAMemberExpireThoughEarlierOnesFoundNobody) {
  MakeQueue(*store_, "q", 4, absl::Seconds(60));
  Member a = JoinWith(*store_, "q", {0, 1});
  auto idle = [&](int64_t g) {
    return store_->HeartbeatSince("q", a.join.id, a.join.incarnation, g, {});
  };
  ASSERT_OK_AND_ASSIGN(GroupView whole, store_->ReadGroup("q"));
  for (int i = 0; i < 2; ++i) {  // alone: nobody else can expire at this generation
    ASSERT_OK_AND_ASSIGN(GroupView v, idle(whole.generation));
    EXPECT_TRUE(v.unchanged);
  }
  auto other = harness_->Connect();
  Member b = JoinWith(*other, "q", {2, 3});  // at 0 s: b expires at 60 s
  ASSERT_OK_AND_ASSIGN(whole, store_->ReadGroup("q"));
  const int64_t g = whole.generation;
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(GroupView v, idle(g));
    EXPECT_TRUE(v.unchanged);
  }
  harness_->Advance(absl::Seconds(40));
  ASSERT_OK(other->Heartbeat("q", b.join.id, b.join.incarnation));  // b now expires at 100 s
  ASSERT_OK_AND_ASSIGN(GroupView v, idle(g));
  EXPECT_TRUE(v.unchanged);
  harness_->Advance(absl::Seconds(21));  // 61 s: past b's first expiry, not its renewed one
  ASSERT_OK_AND_ASSIGN(v, idle(g));
  EXPECT_TRUE(v.unchanged) << "b renewed at 40 s";
  EXPECT_EQ(v.expired, 0);
  harness_->Advance(absl::Seconds(38));  // 99 s
  ASSERT_OK_AND_ASSIGN(v, idle(g));
  EXPECT_TRUE(v.unchanged);
  harness_->Advance(absl::Seconds(2));  // 101 s: b is past its TTL
  ASSERT_OK_AND_ASSIGN(v, idle(g));
  EXPECT_TRUE(v.alive);
  EXPECT_FALSE(v.unchanged);
  EXPECT_EQ(v.expired, 1);
  EXPECT_EQ(v.members, std::vector<SessionId>{a.join.id});
}

// A static member's old process heartbeats after a re-join took its row:
// that row is the new process's, and goes on counting for the others' idle
// heartbeats, whoever asked first after it went silent.
TEST_P(StoreConformance, AnOldProcessesHeartbeatDoesNotHideItsSuccessorsExpiry) {
  MakeQueue(*store_, "q", 4, absl::Seconds(60));
  Member old = JoinWith(*store_, "q", {0, 1}, "static");
  auto other = harness_->Connect();
  Member b = JoinWith(*other, "q", {2, 3});
  auto successor = harness_->Connect();
  Member next = JoinWith(*successor, "q", {}, "static");  // at 0 s: expires at 60 s
  ASSERT_EQ(next.join.id, old.join.id);
  ASSERT_GT(next.join.incarnation, old.join.incarnation);
  ASSERT_OK_AND_ASSIGN(GroupView whole, other->ReadGroup("q"));
  const int64_t g = whole.generation;
  harness_->Advance(absl::Seconds(40));
  ASSERT_OK(other->Heartbeat("q", b.join.id, b.join.incarnation));  // b expires at 100 s
  harness_->Advance(absl::Seconds(21));  // 61 s: the successor is past its TTL
  ASSERT_OK_AND_ASSIGN(GroupView v,
                       store_->HeartbeatSince("q", old.join.id, old.join.incarnation, g, {}));
  EXPECT_FALSE(v.alive);
  ASSERT_OK_AND_ASSIGN(v, other->HeartbeatSince("q", b.join.id, b.join.incarnation, g, {}));
  EXPECT_TRUE(v.alive);
  EXPECT_FALSE(v.unchanged);
  EXPECT_EQ(v.expired, 1);
  EXPECT_EQ(v.members, std::vector<SessionId>{b.join.id});
}

// The owners of `last` with the changes of `delta` (GroupView::delta)
// applied, as part:session:epoch.
std::vector<std::string> Applied(const GroupView& last, const GroupView& delta) {
  std::map<int, std::string> owners;
  auto row = [](const PartOwner& o) {
    return absl::StrCat(o.part, ":", o.session.value, ":", o.epoch.value);
  };
  for (const PartOwner& o : last.owners) owners[o.part] = row(o);
  for (int part : delta.unowned) owners.erase(part);
  for (const PartOwner& o : delta.owners) owners[o.part] = row(o);
  std::vector<std::string> out;
  for (const auto& [part, o] : owners) out.push_back(o);
  return out;
}

std::vector<std::string> Rows(const GroupView& whole) { return Applied(whole, GroupView{}); }

TEST_P(StoreConformance, EveryChangeOfMembersOrOwnersMovesTheGeneration) {
  MakeQueue(*store_, "q", 4, absl::Seconds(60));
  Member a = JoinWith(*store_, "q", {0, 1}, "static-a");
  ASSERT_OK_AND_ASSIGN(GroupView last, store_->ReadGroup("q"));
  // Reads the group at the generation last seen: it must have moved, and
  // the view (whole members, owners changed since, applied to the last
  // view) must be the group as it is now.
  auto expect_moved = [&](const char* change) {
    ASSERT_OK_AND_ASSIGN(GroupView v, store_->ReadGroupSince("q", last.generation));
    EXPECT_FALSE(v.unchanged) << change;
    EXPECT_TRUE(v.delta) << change;
    EXPECT_GT(v.generation, last.generation) << change;
    ASSERT_OK_AND_ASSIGN(GroupView whole, store_->ReadGroup("q"));
    EXPECT_FALSE(whole.delta);
    EXPECT_EQ(v.members, whole.members) << change;
    EXPECT_EQ(Applied(last, v), Rows(whole)) << change;
    last = whole;
  };
  auto other = harness_->Connect();
  Member b = JoinWith(*other, "q", {});
  expect_moved("a join");
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedPart> got, other->AcquireParts("q", b.join.id, {2, 3}));
  ASSERT_EQ(got.size(), 2u);
  expect_moved("an acquisition");
  ASSERT_OK(other->ReleaseParts("q", b.join.id, {got[1]}));
  expect_moved("a release");
  Member a2 = JoinWith(*store_, "q", {}, "static-a");  // a static re-join: its parts at new epochs
  ASSERT_EQ(a2.join.kept.size(), 2u);
  expect_moved("a static re-join that kept parts");
  ASSERT_OK(other->Leave("q", b.join.id, b.join.incarnation));
  expect_moved("a leave");
  ASSERT_OK_AND_ASSIGN(GroupView v, store_->ReadGroupSince("q", last.generation));
  EXPECT_TRUE(v.unchanged) << "nothing changed since";
}

// After a change, a read at the generation last seen returns only the owner
// rows written or deleted since (GroupView::delta), each part's latest; a
// caller further behind than kGroupChangesKept, or one that passes
// kNoGeneration, reads the whole group, and so does a heartbeat that expired
// a session.
TEST_P(StoreConformance, AGroupReadAfterAChangeReturnsOnlyTheOwnersThatChanged) {
  MakeQueue(*store_, "q", 8, absl::Seconds(60));
  Member a = JoinWith(*store_, "q", {0, 1, 2, 3});
  auto other = harness_->Connect();
  Member b = JoinWith(*other, "q", {4, 5});
  ASSERT_OK_AND_ASSIGN(GroupView seen, store_->ReadGroup("q"));
  ASSERT_EQ(seen.owners.size(), 6u);
  // b releases 5, takes 6 and 7, releases 7 again; a releases 3 and takes it
  // back (a new epoch).
  ASSERT_OK(other->ReleaseParts("q", b.join.id, {b.parts[1]}));
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedPart> b67, other->AcquireParts("q", b.join.id, {6, 7}));
  ASSERT_EQ(b67.size(), 2u);
  ASSERT_OK(other->ReleaseParts("q", b.join.id, {b67[1]}));
  ASSERT_OK(store_->ReleaseParts("q", a.join.id, {a.parts[3]}));
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedPart> a3, store_->AcquireParts("q", a.join.id, {3}));
  ASSERT_EQ(a3.size(), 1u);

  ASSERT_OK_AND_ASSIGN(
      GroupView v, store_->HeartbeatSince("q", a.join.id, a.join.incarnation, seen.generation, {}));
  EXPECT_TRUE(v.alive);
  EXPECT_FALSE(v.unchanged);
  EXPECT_TRUE(v.delta);
  EXPECT_EQ(v.members.size(), 2u);
  ASSERT_EQ(v.owners.size(), 2u);  // 3 at its new epoch, 6
  EXPECT_EQ(v.owners[0].part, 3);
  EXPECT_EQ(v.owners[0].epoch, a3[0].epoch);
  EXPECT_EQ(v.owners[0].session, a.join.id);
  EXPECT_EQ(v.owners[1].part, 6);
  EXPECT_EQ(v.owners[1].session, b.join.id);
  EXPECT_EQ(v.unowned, (std::vector<int>{5, 7}));
  ASSERT_OK_AND_ASSIGN(GroupView whole, store_->ReadGroup("q"));
  EXPECT_FALSE(whole.delta);
  EXPECT_TRUE(whole.unowned.empty());
  EXPECT_EQ(Applied(seen, v), Rows(whole));
  ASSERT_OK_AND_ASSIGN(GroupView r, store_->ReadGroupSince("q", seen.generation));
  EXPECT_TRUE(r.delta);
  EXPECT_EQ(Applied(seen, r), Rows(whole));

  // More than kGroupChangesKept generations behind: the whole group.
  for (int64_t i = 0; i < kGroupChangesKept / 2 + 1; ++i) {
    ASSERT_OK_AND_ASSIGN(std::vector<OwnedPart> got, other->AcquireParts("q", b.join.id, {7}));
    ASSERT_EQ(got.size(), 1u);
    ASSERT_OK(other->ReleaseParts("q", b.join.id, got));
  }
  ASSERT_OK_AND_ASSIGN(r, store_->ReadGroupSince("q", whole.generation));
  EXPECT_GT(r.generation, whole.generation + kGroupChangesKept);
  EXPECT_FALSE(r.delta);
  EXPECT_FALSE(r.unchanged);
  EXPECT_EQ(Rows(r), Rows(whole));
  // Just within it: the changes since (7 went, again).
  ASSERT_OK_AND_ASSIGN(GroupView near,
                       store_->ReadGroupSince("q", r.generation - kGroupChangesKept));
  EXPECT_TRUE(near.delta);
  EXPECT_EQ(near.unowned, std::vector<int>{7});

  // A heartbeat that expires b: whole, without b's parts.
  harness_->Advance(absl::Seconds(40));
  ASSERT_OK(store_->Heartbeat("q", a.join.id, a.join.incarnation).status());
  harness_->Advance(absl::Seconds(30));  // b: 70 s silent; a: 30 s
  ASSERT_OK_AND_ASSIGN(
      v, store_->HeartbeatSince("q", a.join.id, a.join.incarnation, r.generation, {}));
  EXPECT_EQ(v.expired, 1);
  EXPECT_FALSE(v.delta);
  EXPECT_EQ(v.members, std::vector<SessionId>{a.join.id});
  EXPECT_EQ(v.owners.size(), 4u);
  // And the next read at that view's generation sees b's parts go as changes.
  ASSERT_OK_AND_ASSIGN(GroupView after, store_->ReadGroupSince("q", v.generation));
  ASSERT_OK_AND_ASSIGN(whole, store_->ReadGroup("q"));
  EXPECT_EQ(Applied(v, after), Rows(whole));
}

// Membership also changes with time alone: a session past its TTL is no
// member any more, though no row changed yet; one that heartbeats again
// before anyone deleted it is a member again.
TEST_P(StoreConformance, AGroupReadSeesASessionPastItsTtlWithoutAChange) {
  MakeQueue(*store_, "q", 4, absl::Seconds(60));
  Member a = JoinWith(*store_, "q", {0, 1});
  auto other = harness_->Connect();
  Member b = JoinWith(*other, "q", {2, 3});
  harness_->Advance(absl::Seconds(30));
  ASSERT_OK_AND_ASSIGN(GroupView seen, store_->Heartbeat("q", a.join.id, a.join.incarnation));
  ASSERT_EQ(seen.members.size(), 2u);
  harness_->Advance(absl::Seconds(31));  // past b's TTL, not a's
  ASSERT_OK_AND_ASSIGN(GroupView read, store_->ReadGroupSince("q", seen.generation));
  EXPECT_FALSE(read.unchanged) << "b is past its TTL";
  EXPECT_EQ(read.members, std::vector<SessionId>{a.join.id});
  // b comes back before anyone deleted it: a member again.
  ASSERT_OK_AND_ASSIGN(GroupView back, other->Heartbeat("q", b.join.id, b.join.incarnation));
  EXPECT_TRUE(back.alive);
  ASSERT_OK_AND_ASSIGN(GroupView v, store_->ReadGroupSince("q", read.generation));
  EXPECT_FALSE(v.unchanged) << "b is a member again";
  EXPECT_EQ(v.members.size(), 2u);
  // b goes silent past its TTL again: a's heartbeat deletes it, and its
  // view is whole although it passed the generation it last read.
  harness_->Advance(absl::Seconds(61));
  ASSERT_OK_AND_ASSIGN(
      seen, store_->HeartbeatSince("q", a.join.id, a.join.incarnation, v.generation, {}));
  EXPECT_TRUE(seen.alive);
  EXPECT_EQ(seen.expired, 1);
  EXPECT_FALSE(seen.unchanged);
  EXPECT_EQ(seen.members, std::vector<SessionId>{a.join.id});
  EXPECT_EQ(seen.owners.size(), 2u);
}

// --- parts ----------------------------------------------------------------------------

TEST_P(StoreConformance, AcquireTakesOnlyFreePartsAtFreshEpochs) {
  MakeQueue(*store_, "q", 4);
  Member a = JoinWith(*store_, "q", {0, 1});
  ASSERT_EQ(a.parts.size(), 2u);
  Member b = JoinWith(*store_, "q", {});
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedPart> got,
                       store_->AcquireParts("q", b.join.id, {3, 1, 2, 4, 7}));
  ASSERT_EQ(got.size(), 2u);  // 1 is a's; 4 and 7 are not parts of the queue
  EXPECT_EQ(got[0].part, 2);
  EXPECT_EQ(got[1].part, 3);
  std::set<int64_t> epochs;
  for (const OwnedPart& p : a.parts) epochs.insert(p.epoch.value);
  const int64_t a_newest = *epochs.rbegin();
  for (const OwnedPart& p : got) {
    EXPECT_GT(p.epoch.value, a_newest) << p.part;
    epochs.insert(p.epoch.value);
  }
  EXPECT_EQ(epochs.size(), 4u);
  // Owned parts stay as they are, even when their owner asks again.
  ASSERT_OK_AND_ASSIGN(got, store_->AcquireParts("q", a.join.id, {0, 1, 2}));
  EXPECT_TRUE(got.empty());
  ASSERT_OK_AND_ASSIGN(GroupView g, store_->ReadGroup("q"));
  ASSERT_EQ(g.owners.size(), 4u);
  for (const PartOwner& o : g.owners) {
    EXPECT_EQ(o.session, o.part < 2 ? a.join.id : b.join.id) << o.part;
    EXPECT_TRUE(epochs.count(o.epoch.value)) << o.part;
  }
  // A part released and taken again gets a fresh epoch.
  ASSERT_OK(store_->ReleaseParts("q", a.join.id, {a.parts[1]}));
  ASSERT_OK_AND_ASSIGN(got, store_->AcquireParts("q", b.join.id, {1}));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_GT(got[0].epoch.value, *epochs.rbegin());
  EXPECT_EQ(store_->AcquireParts("q", b.join.id, {-1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(StoreConformance, AcquireNeverGivesAPartTwoOwners) {
  MakeQueue(*store_, "q", 16);
  auto other = harness_->Connect();
  Member a = JoinWith(*store_, "q", {});
  Member b = JoinWith(*other, "q", {});
  ASSERT_TRUE(a.parts.empty() && b.parts.empty());
  for (int round = 0; round < 40; ++round) {
    std::vector<int> all(16);
    for (int p = 0; p < 16; ++p) all[p] = p;
    std::vector<int> reversed(all.rbegin(), all.rend());
    absl::StatusOr<std::vector<OwnedPart>> got_a, got_b;
    std::thread ta([&] { got_a = store_->AcquireParts("q", a.join.id, all); });
    std::thread tb([&] { got_b = other->AcquireParts("q", b.join.id, reversed); });
    ta.join();
    tb.join();
    ASSERT_OK(got_a);
    ASSERT_OK(got_b);
    std::set<int> seen;
    for (const auto& p : *got_a) EXPECT_TRUE(seen.insert(p.part).second) << p.part;
    for (const auto& p : *got_b)
      EXPECT_TRUE(seen.insert(p.part).second) << "two owners: " << p.part;
    EXPECT_EQ(seen.size(), 16u);
    ASSERT_OK_AND_ASSIGN(GroupView g, store_->ReadGroup("q"));
    EXPECT_EQ(g.owners.size(), 16u);
    ASSERT_OK(store_->ReleaseParts("q", a.join.id, *got_a));
    ASSERT_OK(other->ReleaseParts("q", b.join.id, *got_b));
    ASSERT_OK_AND_ASSIGN(g, store_->ReadGroup("q"));
    ASSERT_TRUE(g.owners.empty());
  }
}

// A graceful release or leave drops the part's claim record: what was in
// flight there is simply ready for the next owner, no attempt counted.
TEST_P(StoreConformance, ReleaseAndLeaveFreePartsAndDropTheirClaimRecords) {
  MakeQueue(*store_, "q", 2);
  Member a = JoinWith(*store_, "q", {0, 1, 5, -0});
  ASSERT_EQ(a.parts.size(), 2u);  // part 5 does not exist
  // Three items in each part.
  for (int i = 0; i < 6; ++i) ASSERT_OK(store_->Enqueue("q", Keyed(KeyInPart(i % 2, 2, i / 2))));
  ASSERT_OK_AND_ASSIGN(std::vector<Item> claimed, store_->Claim(ClaimAll("q", a)));
  ASSERT_EQ(claimed.size(), 6u);
  ASSERT_OK_AND_ASSIGN(QueueStatus status, store_->Status("q"));
  const int64_t in_part1 = status.parts[1].in_flight;
  EXPECT_GT(status.parts[0].in_flight, 0);  // both records list their claims
  EXPECT_GT(in_part1, 0);
  EXPECT_EQ(status.parts[0].in_flight + in_part1, 6);
  const OwnedPart p0 = a.parts[0];
  ASSERT_OK(store_->ReleaseParts("q", a.join.id, {p0}));
  ASSERT_OK_AND_ASSIGN(status, store_->Status("q"));
  EXPECT_EQ(status.parts[0].in_flight, 0);
  EXPECT_EQ(status.parts[1].in_flight, in_part1);
  ASSERT_OK_AND_ASSIGN(GroupView g, store_->ReadGroup("q"));
  EXPECT_EQ(g.owners.size(), 1u);
  Member b = JoinWith(*store_, "q", {0});
  ASSERT_EQ(b.parts.size(), 1u);
  ClaimRequest plain = ClaimAll("q", b);
  plain.include_suspect = false;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> handed, store_->Claim(plain));
  EXPECT_EQ(static_cast<int64_t>(handed.size()), 6 - in_part1);
  for (const Item& i : handed) {
    EXPECT_EQ(i.attempts, 1) << "no attempt counted for a hand-off";
    EXPECT_FALSE(i.suspect);
  }
  // A release at a stale epoch does nothing.
  OwnedPart stale = a.parts[1];
  stale.epoch.value -= 1;
  ASSERT_OK(store_->ReleaseParts("q", a.join.id, {stale}));
  ASSERT_OK_AND_ASSIGN(g, store_->ReadGroup("q"));
  EXPECT_EQ(g.owners.size(), 2u);
  // Leave deletes the session, its parts and their records.
  ASSERT_OK(store_->Leave("q", a.join.id, a.join.incarnation));
  ASSERT_OK_AND_ASSIGN(status, store_->Status("q"));
  ASSERT_EQ(status.sessions.size(), 1u);  // b's
  EXPECT_EQ(status.sessions[0].id, b.join.id);
  EXPECT_EQ(status.parts[1].in_flight, 0);
  EXPECT_FALSE(status.parts[1].owner.has_value());
  Member c = JoinWith(*store_, "q", {1});
  ASSERT_EQ(c.parts.size(), 1u);
  for (const Item& i : claimed) {
    ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("q", i.id));
    EXPECT_EQ(st.kind, ItemState::Kind::kPending);
    EXPECT_EQ(st.attempts, 0) << i.id;
  }
  // The session is gone: acquiring fails cleanly.
  absl::StatusOr<std::vector<OwnedPart>> r = store_->AcquireParts("q", a.join.id, {0});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "gone")) << r.status();
}

// --- enqueue --------------------------------------------------------------------------

TEST_P(StoreConformance, EnqueuePlacesItemsByKeyOrId) {
  MakeQueue(*store_, "q", 16);
  std::map<int64_t, int> part_of;
  for (const std::string key : {"user-42", "", "ключ", "a\tb"}) {
    ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Keyed(key)));
    EXPECT_EQ(r.part, PartForKey(key, 16)) << key;
    EXPECT_FALSE(r.duplicate);
    part_of[r.id] = r.part;
  }
  for (int i = 0; i < 20; ++i) {
    ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Payload("p")));
    EXPECT_EQ(r.part, PartForId(r.id, 16)) << r.id;
    part_of[r.id] = r.part;
  }
  // Binary payloads round-trip.
  const std::string binary("\0\x01\xff\\x\"'", 7);
  ASSERT_OK_AND_ASSIGN(EnqueueResult bin, store_->Enqueue("q", Payload(binary)));
  part_of[bin.id] = bin.part;
  // Priority and delay.
  NewItem later = Payload("later");
  later.priority = -5;
  later.delay = absl::Seconds(30);
  ASSERT_OK_AND_ASSIGN(EnqueueResult l, store_->Enqueue("q", later));
  NewItem bad = Payload("x");
  bad.priority = 40000;
  EXPECT_EQ(store_->Enqueue("q", bad).status().code(), absl::StatusCode::kInvalidArgument);

  // Each item is stored in the part Enqueue said.
  Member m = JoinWith(*store_, "q", kAllParts);
  ClaimRequest req = ClaimAll("q", m, 16 * 100);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store_->Claim(req));
  ASSERT_EQ(got.size(), part_of.size()) << "the delayed one waits";
  for (const Item& i : got) {
    EXPECT_EQ(i.part, part_of[i.id]) << i.id;
    if (i.id == bin.id) EXPECT_EQ(i.payload, binary);
  }
  EXPECT_EQ(CountsOf("q").delayed, 1);
  harness_->Advance(absl::Seconds(30));
  ClaimRequest head = ClaimAll("q", m, 16, got);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> due, store_->Claim(head));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].id, l.id);
  EXPECT_EQ(due[0].priority, -5);
  EXPECT_EQ(due[0].payload, "later");
}

TEST_P(StoreConformance, EnqueueRefusesWhatNoStoreCanKeep) {
  MakeQueue(*store_, "q", 4);
  auto refused = [&](const NewItem& item, const std::string& words) {
    absl::Status st = store_->Enqueue("q", item).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << words << ": " << st;
    EXPECT_TRUE(absl::StrContains(st.message(), words)) << st;
  };
  NewItem item = Payload("x");
  item.priority = -32769;
  refused(item, "priority -32769 is out of range");
  item = Keyed(std::string(kMaxKeyBytes + 1, 'k'));
  refused(item, "key is 1025 bytes");
  item = Payload("x");
  item.dedup_key = std::string(kMaxKeyBytes + 1, 'd');
  refused(item, "dedup key is 1025 bytes");
  item = Keyed(std::string("nul\0inside", 10));
  refused(item, "NUL");
  item = Payload("x");
  item.dedup_key = std::string("\0", 1);
  refused(item, "NUL");
  item = Payload("x");
  item.delay = absl::Hours(24 * 3651);
  refused(item, "longer than 10 years");
  item = Payload("x");
  item.dedup_key = "partq.group:q:g";  // a group's end item's
  refused(item, "dedup keys that start with \"partq.\" are partq's own");
  // Keys are text: bytes that are not UTF-8 are refused (PostgreSQL's text
  // columns refuse them; the words are the server's).
  item = Keyed(std::string("\xff\xfe not utf-8"));
  EXPECT_EQ(store_->Enqueue("q", item).status().code(), absl::StatusCode::kInvalidArgument);
  // At the edges: accepted.
  item = Keyed(std::string(kMaxKeyBytes, 'k'));
  item.priority = 32767;
  item.delay = -absl::Seconds(5);  // as now
  ASSERT_OK_AND_ASSIGN(EnqueueResult ok, store_->Enqueue("q", item));
  Counts counts = CountsOf("q");
  EXPECT_EQ(counts.ready, 1);
  EXPECT_EQ(counts.items(), 1);
}

TEST_P(StoreConformance, DedupReturnsTheLiveItemAndFreesTheKeyAfterAck) {
  MakeQueue(*store_, "q", 4);
  NewItem item = Payload("once");
  item.dedup_key = "order-17";
  ASSERT_OK_AND_ASSIGN(EnqueueResult first, store_->Enqueue("q", item));
  EXPECT_FALSE(first.duplicate);
  ASSERT_OK_AND_ASSIGN(EnqueueResult again, store_->Enqueue("q", item));
  EXPECT_TRUE(again.duplicate);
  EXPECT_EQ(again.id, first.id);
  EXPECT_EQ(again.part, first.part);
  EXPECT_EQ(CountsOf("q").items(), 1);

  Member m = JoinWith(*store_, "q", kAllParts);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> claimed, store_->Claim(ClaimAll("q", m)));
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].dedup_key, "order-17");
  ASSERT_OK_AND_ASSIGN(FinishResult done, store_->Finish(FinishOf("q", m, claimed), AckAll()));
  EXPECT_EQ(done.acked, std::vector<int64_t>{first.id});
  ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemStateByDedupKey("q", "order-17"));
  EXPECT_EQ(st.kind, ItemState::Kind::kDone);
  EXPECT_EQ(st.id, first.id);

  ASSERT_OK_AND_ASSIGN(EnqueueResult fresh, store_->Enqueue("q", item));
  EXPECT_FALSE(fresh.duplicate);
  EXPECT_GT(fresh.id, first.id);
  ASSERT_OK_AND_ASSIGN(st, store_->GetItemStateByDedupKey("q", "order-17"));
  EXPECT_EQ(st.kind, ItemState::Kind::kPending);
  EXPECT_EQ(st.id, fresh.id);

  // The batch path skips duplicates (of live items and within the batch).
  std::vector<NewItem> batch;
  for (int i = 0; i < 10; ++i) {
    NewItem b = Payload("b");
    b.dedup_key = absl::StrCat("k", i % 5);
    batch.push_back(b);
  }
  batch.push_back(item);  // live
  ASSERT_OK_AND_ASSIGN(int64_t written, store_->EnqueueBatch("q", batch));
  EXPECT_EQ(written, 5);
  EXPECT_EQ(CountsOf("q").items(), 6);
  // Another queue's key is another key.
  MakeQueue(*store_, "other", 1);
  ASSERT_OK_AND_ASSIGN(EnqueueResult elsewhere, store_->Enqueue("other", item));
  EXPECT_FALSE(elsewhere.duplicate);
}

TEST_P(StoreConformance, OversizePayloadIsRejectedAndNothingIsWritten) {
  std::unique_ptr<Store> small = harness_->Connect(/*max_payload_bytes=*/100);
  MakeQueue(*store_, "q", 2);
  ASSERT_OK(small->Enqueue("q", Payload(std::string(100, 'a'))));
  absl::Status st = small->Enqueue("q", Payload(std::string(101, 'a'))).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "payload is 101 bytes; the limit is 100 (--max-payload)");
  std::vector<NewItem> batch(10, Payload("ok"));
  batch.push_back(Payload(std::string(500, 'b')));
  st = small->EnqueueBatch("q", batch).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_EQ(st.message(),
            "item 10 of the batch: payload is 500 bytes; the limit is 100 "
            "(--max-payload)");
  EXPECT_EQ(CountsOf("q").items(), 1);
  // The limit is the handle's: another takes the big one.
  ASSERT_OK(store_->Enqueue("q", Payload(std::string(500, 'b'))));
}

TEST_P(StoreConformance, EnqueueBatchIsAllOrNothing) {
  MakeQueue(*store_, "q", 4);
  std::vector<NewItem> batch(1000, Payload("fine"));
  batch[700].key = std::string("\xff\xfe not utf-8");  // PostgreSQL rejects it mid-COPY
  absl::Status st = store_->EnqueueBatch("q", batch).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_EQ(CountsOf("q").items(), 0);
  batch[700].key = std::string("nul\0inside", 10);
  st = store_->EnqueueBatch("q", batch).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_EQ(store_->Enqueue("q", batch[700]).status().code(), absl::StatusCode::kInvalidArgument);
  // The store is still good.
  batch[700].key = "ok";
  ASSERT_OK_AND_ASSIGN(int64_t n, store_->EnqueueBatch("q", batch));
  EXPECT_EQ(n, 1000);
  EXPECT_EQ(CountsOf("q").items(), 1000);
}

TEST_P(StoreConformance, EnqueueBatchPlacesAndDelaysItemsAsEnqueueDoes) {
  MakeQueue(*store_, "q", 8);
  std::vector<NewItem> batch;
  for (int i = 0; i < 40; ++i) {
    NewItem item =
        i % 2 ? Keyed(absl::StrCat("key-", i % 7), absl::StrCat(i)) : Payload(absl::StrCat(i));
    if (i % 10 == 3) item.delay = absl::Hours(1);
    batch.push_back(item);
  }
  ASSERT_OK_AND_ASSIGN(int64_t n, store_->EnqueueBatch("q", batch));
  EXPECT_EQ(n, 40);
  Counts counts = CountsOf("q");
  EXPECT_EQ(counts.delayed, 4);
  EXPECT_EQ(counts.ready, 36);
  Member m = JoinWith(*store_, "q", kAllParts);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store_->Claim(ClaimAll("q", m, 800)));
  ASSERT_EQ(got.size(), 36u);
  for (const Item& i : got) {
    EXPECT_EQ(i.part, i.key ? PartForKey(*i.key, 8) : PartForId(i.id, 8)) << i.id;
  }
  EXPECT_EQ(store_->EnqueueBatch("nope", batch).status().code(), absl::StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(n, store_->EnqueueBatch("q", {}));
  EXPECT_EQ(n, 0);
}

// --- claim ----------------------------------------------------------------------------

TEST_P(StoreConformance, ClaimTakesOwnedPartsInPriorityThenIdOrder) {
  MakeQueue(*store_, "q", 4);
  std::map<int, std::string> key_of = KeyPerPart(4);
  std::vector<int64_t> expected;
  for (int round = 0; round < 3; ++round) {
    for (int part = 0; part < 4; ++part) {
      NewItem item = Keyed(key_of[part], absl::StrCat(part, "/", round));
      item.priority = round == 1 ? -1 : 0;
      ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", item));
      if (part < 2) expected.push_back(r.id);
    }
  }
  NewItem delayed = Keyed(key_of[0]);
  delayed.delay = absl::Hours(1);
  ASSERT_OK(store_->Enqueue("q", delayed));
  Member m = JoinWith(*store_, "q", {0, 1});
  ASSERT_EQ(m.parts.size(), 2u);

  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store_->Claim(ClaimAll("q", m, 4)));
  ASSERT_EQ(got.size(), 4u);
  // Priority -1 (round 1) first, then round 0, by id.
  EXPECT_EQ(got[0].id, expected[2]);
  EXPECT_EQ(got[1].id, expected[3]);
  EXPECT_EQ(got[2].id, expected[0]);
  EXPECT_EQ(got[3].id, expected[1]);
  ASSERT_OK_AND_ASSIGN(QueueStatus status, store_->Status("q"));
  for (const Item& i : got) {
    EXPECT_LT(i.part, 2);
    EXPECT_EQ(i.attempts, 1);
    EXPECT_FALSE(i.suspect);
    EXPECT_EQ(i.key, key_of[i.part]);
    EXPECT_EQ(i.claim_epoch, m.parts[i.part].epoch);
    EXPECT_LE(i.enqueued_at, status.db_now);
    EXPECT_LE(i.run_at, status.db_now);
  }
  // A claim writes nothing on the items: what is in flight is skipped
  // because the caller says so.
  ASSERT_OK_AND_ASSIGN(std::vector<Item> rest, store_->Claim(ClaimAll("q", m, 100, got)));
  ASSERT_EQ(rest.size(), 2u);  // the delayed one and parts 2, 3 stay
  EXPECT_EQ(rest[0].payload, "0/2");
  std::vector<Item> all = got;
  all.insert(all.end(), rest.begin(), rest.end());
  ASSERT_OK_AND_ASSIGN(std::vector<Item> none, store_->Claim(ClaimAll("q", m, 100, all)));
  EXPECT_TRUE(none.empty());
  // A part we do not hold at that epoch yields nothing.
  ClaimRequest stale = ClaimAll("q", m);
  stale.parts = {ClaimPart{2, Epoch{m.parts[0].epoch}, std::nullopt, 100}};
  ASSERT_OK_AND_ASSIGN(none, store_->Claim(stale));
  EXPECT_TRUE(none.empty());
  for (const Item& i : all) {
    ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("q", i.id));
    EXPECT_EQ(st.attempts, 0) << "a claim counts no attempt";
  }
}

// Parts are read in the order given, up to each one's limit, until the
// total is reached; the parts after that are not read.
TEST_P(StoreConformance, ClaimReadsPartsInTheGivenOrderUpToEachLimitAndTheTotal) {
  MakeQueue(*store_, "q", 4);
  std::map<int, std::string> key_of = KeyPerPart(4);
  std::map<int, std::vector<int64_t>> ids_in;
  for (int i = 0; i < 5; ++i) {
    for (int part = 0; part < 4; ++part) {
      ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Keyed(key_of[part])));
      ids_in[part].push_back(r.id);
    }
  }
  Member m = JoinWith(*store_, "q", kAllParts);
  ASSERT_EQ(m.parts.size(), 4u);
  ClaimRequest req;
  req.queue = "q";
  req.session = m.join.id;
  req.limit = 7;
  for (int part : {2, 0, 3, 1}) req.parts.push_back({part, m.parts[part].epoch, std::nullopt, 3});
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store_->Claim(req));
  std::map<int, std::vector<int64_t>> took;
  for (const Item& i : got) took[i.part].push_back(i.id);
  EXPECT_EQ(got.size(), 7u);
  EXPECT_EQ(Sorted(took[2]), std::vector<int64_t>(ids_in[2].begin(), ids_in[2].begin() + 3));
  EXPECT_EQ(Sorted(took[0]), std::vector<int64_t>(ids_in[0].begin(), ids_in[0].begin() + 3));
  EXPECT_EQ(took[3], std::vector<int64_t>{ids_in[3][0]});
  EXPECT_EQ(took.count(1), 0u) << "read after the total was reached";
  // Only the parts it took items from record them.
  ASSERT_OK_AND_ASSIGN(QueueStatus status, store_->Status("q"));
  EXPECT_EQ(status.parts[1].in_flight, 0);
  EXPECT_EQ(status.parts[3].in_flight, 1);
}

// Issue 48: a claim is bounded by its payloads' bytes as well as by count (a worker's memory):
// it takes items in its order until their payloads reach max_bytes, the one that reaches it
// last; the first always, however large. The claim an ack makes ahead is bounded the same.
TEST_P(StoreConformance, AClaimStopsOnceItsPayloadsReachItsByteBound) {
  MakeQueue(*store_, "q", 1);
  std::vector<int64_t> ids;
  for (int i = 0; i < 8; ++i) {
    ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Payload(std::string(1000, 'a'))));
    ids.push_back(r.id);
  }
  Member m = JoinWith(*store_, "q", kAllParts);
  ASSERT_EQ(m.parts.size(), 1u);
  ClaimRequest req = ClaimAll("q", m, 100);
  req.include_suspect = false;
  req.max_bytes = 2500;  // 0, 1000 and 2000 bytes before: three items
  ASSERT_OK_AND_ASSIGN(std::vector<Item> first, store_->Claim(req));
  EXPECT_EQ(Ids(first), std::vector<int64_t>(ids.begin(), ids.begin() + 3));
  // The ack's claim ahead: from after the three, 1500 bytes: two more.
  FinishRequest fin = FinishOf("q", m, first);
  fin.next = [&]() -> std::optional<ClaimRequest> {
    ClaimRequest next = ClaimAll("q", m, 100);
    next.include_suspect = false;
    next.parts[0].after = ItemKey{0, ids[2]};
    next.parts[0].cursor = ItemKey{0, ids[2]};
    next.max_bytes = 1500;
    return next;
  };
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(fin, AckAll()));
  EXPECT_EQ(r.acked.size(), 3u);
  EXPECT_EQ(Sorted(Ids(r.next)), std::vector<int64_t>(ids.begin() + 3, ids.begin() + 5));
  // A bound below the first item's size still takes it, and only it.
  ClaimRequest one = ClaimAll("q", m, 100, r.next);
  one.include_suspect = false;
  one.max_bytes = 10;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> alone, store_->Claim(one));
  EXPECT_EQ(Ids(alone), std::vector<int64_t>{ids[5]});
}

TEST_P(StoreConformance, ClaimResumesAfterTheCursorWithoutRereadingTheHead) {
  MakeQueue(*store_, "q", 1);
  std::vector<int64_t> ids = EnqueueNumbered(*store_, "q", 6);
  ASSERT_EQ(ids.size(), 6u);
  Member m = JoinWith(*store_, "q", {0});
  ClaimRequest req = ClaimAll("q", m, 2);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> first, store_->Claim(req));
  ASSERT_EQ(Ids(first), (std::vector<int64_t>{ids[0], ids[1]}));
  // After the cursor: no in-flight list needed, the head is not read.
  req.parts[0].after = ItemKey{first[1].priority, first[1].id};
  ASSERT_OK_AND_ASSIGN(std::vector<Item> second, store_->Claim(req));
  ASSERT_EQ(Ids(second), (std::vector<int64_t>{ids[2], ids[3]}));
  // A higher priority enqueued now sorts before the cursor: only a read from
  // the head (which skips what is in flight) finds it.
  NewItem urgent = Payload("urgent");
  urgent.priority = -5;
  ASSERT_OK_AND_ASSIGN(EnqueueResult u, store_->Enqueue("q", urgent));
  req.parts[0].after = ItemKey{second[1].priority, second[1].id};
  ASSERT_OK_AND_ASSIGN(std::vector<Item> past, store_->Claim(req));
  EXPECT_EQ(Ids(past), (std::vector<int64_t>{ids[4], ids[5]}));
  std::vector<Item> flying = first;
  flying.insert(flying.end(), second.begin(), second.end());
  flying.insert(flying.end(), past.begin(), past.end());
  ASSERT_OK_AND_ASSIGN(std::vector<Item> head, store_->Claim(ClaimAll("q", m, 2, flying)));
  EXPECT_EQ(Ids(head), (std::vector<int64_t>{u.id}));
  // Each claim rewrote the part's record: the in-flight list plus the new ids.
  ASSERT_OK(store_->Claim(ClaimAll("q", m, 2, flying)));
  ASSERT_OK_AND_ASSIGN(QueueStatus status, store_->Status("q"));
  EXPECT_EQ(status.parts[0].in_flight, 7);
}

// A claim that reads on from a cursor still finds what came due behind it:
// an item retried there and one requeued from the dead items (both sort
// behind the cursor). Up to `cursor`, what is in flight is skipped; a claim
// that starts further back (a notice named an item there) reads everything
// between that is not in flight.
TEST_P(StoreConformance, AClaimFromTheCursorFindsWhatCameDueBehindIt) {
  MakeQueue(*store_, "q", 1);
  std::vector<int64_t> ids = EnqueueNumbered(*store_, "q", 6);
  ASSERT_EQ(ids.size(), 6u);
  Member m = JoinWith(*store_, "q", {0});
  ASSERT_OK_AND_ASSIGN(std::vector<Item> first, store_->Claim(ClaimAll("q", m, 4)));
  ASSERT_EQ(Ids(first), (std::vector<int64_t>{ids[0], ids[1], ids[2], ids[3]}));
  // ids[0] retried, due at once; ids[1] dead, then requeued; ids[2] acked;
  // ids[3] still in flight.
  FinishBody body = [&](Tx&, absl::Span<const Item> items) -> absl::StatusOr<std::vector<Outcome>> {
    std::vector<Outcome> out;
    for (const Item& i : items) {
      Outcome o{i.id, i.part, Outcome::Kind::kLeave};
      if (i.id == ids[0]) o.kind = Outcome::Kind::kRetry;
      if (i.id == ids[1]) o.kind = Outcome::Kind::kDead;
      if (i.id == ids[2]) o.kind = Outcome::Kind::kAck;
      o.error = "again";
      out.push_back(o);
    }
    return out;
  };
  ASSERT_OK(store_->Finish(FinishOf("q", m, first), body));
  ASSERT_OK_AND_ASSIGN(Requeued rq, store_->RequeueDead("q", {ids[1]}));
  ASSERT_EQ(rq.requeued, 1);
  const ItemKey cursor{first[3].priority, first[3].id};
  ClaimRequest req = ClaimAll("q", m, 10, {first[3]});
  req.parts[0].after = cursor;
  req.parts[0].cursor = cursor;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> next, store_->Claim(req));
  EXPECT_EQ(Ids(next), (std::vector<int64_t>{ids[0], ids[1], ids[4], ids[5]}))
      << "what came due behind the cursor, then what follows it; not ids[3], in flight";
  // Everything is in flight now: a read from before ids[0] finds nothing...
  std::vector<Item> flying = next;
  flying.push_back(first[3]);
  const ItemKey last{next.back().priority, next.back().id};
  req = ClaimAll("q", m, 10, flying);
  req.parts[0].after = ItemKey{first[0].priority, first[0].id - 1};
  req.parts[0].cursor = last;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> none, store_->Claim(req));
  EXPECT_TRUE(none.empty()) << Ids(none).size() << " items claimed twice";
  // ...and what it is not told is in flight, up to the cursor, it reads again.
  flying.erase(
      std::find_if(flying.begin(), flying.end(), [&](const Item& i) { return i.id == ids[4]; }));
  req = ClaimAll("q", m, 10, flying);
  req.parts[0].after = ItemKey{first[0].priority, first[0].id - 1};
  req.parts[0].cursor = last;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> again, store_->Claim(req));
  EXPECT_EQ(Ids(again), (std::vector<int64_t>{ids[4]}));
}

// A read from a floor at priority 0 (a poll-only consumer's poll floor,
// ClaimPart::above) also reads the part's items of a priority below 0 from
// the head, as a read from the head would, skipping what is in flight; one
// of them that came due behind the floor (retried) comes once, though the
// look behind reads there too.
TEST_P(StoreConformance, AReadFromAFloorAlsoReadsTheItemsThatRunFirstFromTheHead) {
  MakeQueue(*store_, "q", 1);
  std::vector<int64_t> ids = EnqueueNumbered(*store_, "q", 4);
  ASSERT_EQ(ids.size(), 4u);
  std::vector<int64_t> urgent;
  for (int prio : {-5, -1}) {
    NewItem n = Payload(absl::StrCat("urgent", prio));
    n.priority = prio;
    ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", n));
    urgent.push_back(r.id);
  }
  Member m = JoinWith(*store_, "q", {0});
  const ItemKey floor{0, ids[1]};
  ClaimRequest req = ClaimAll("q", m, 10);
  req.parts[0].after = floor;
  req.parts[0].cursor = floor;
  req.parts[0].behind = false;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> onward, store_->Claim(req));
  ASSERT_EQ(Ids(onward), (std::vector<int64_t>{ids[2], ids[3]})) << "without `above`";
  req = ClaimAll("q", m, 10, onward);
  req.parts[0].after = floor;
  req.parts[0].cursor = ItemKey{0, ids[3]};
  req.parts[0].above = true;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> first, store_->Claim(req));
  ASSERT_EQ(Ids(first), urgent) << "from the head, in priority order; not what is in flight";
  // urgent[0] retried (due at once), urgent[1] still in flight.
  FinishBody body = [&](Tx&, absl::Span<const Item> items) -> absl::StatusOr<std::vector<Outcome>> {
    std::vector<Outcome> out;
    for (const Item& i : items) {
      out.push_back(
          Outcome{i.id, i.part, i.id == urgent[0] ? Outcome::Kind::kRetry : Outcome::Kind::kLeave});
      out.back().error = "again";
    }
    return out;
  };
  ASSERT_OK(store_->Finish(FinishOf("q", m, first), body));
  NewItem later = Payload("urgent-3");  // runs after the retried one, before the rest
  later.priority = -3;
  ASSERT_OK_AND_ASSIGN(EnqueueResult l, store_->Enqueue("q", later));
  std::vector<Item> flying = onward;
  flying.push_back(first[1]);
  for (int limit : {1, 10}) {
    req = ClaimAll("q", m, limit, flying);
    req.parts[0].after = floor;
    req.parts[0].cursor = ItemKey{0, ids[3]};
    req.parts[0].above = true;
    req.parts[0].behind = true;
    ASSERT_OK_AND_ASSIGN(std::vector<Item> again, store_->Claim(req));
    const std::vector<int64_t> want =
        limit == 1 ? std::vector<int64_t>{urgent[0]} : std::vector<int64_t>{urgent[0], l.id};
    EXPECT_EQ(Ids(again), want) << "in priority order, each once (limit " << limit << ")";
  }
}

// An owner that dies (its session expires) leaves its claim record behind;
// the next owner of the part counts one attempt for each item listed there
// and gets them back as suspects, one at a time.
TEST_P(StoreConformance, ClaimReturnsAbandonedItemsAsSuspectsOneAtATime) {
  MakeQueue(*store_, "q", 1, absl::Seconds(60));
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Payload(absl::StrCat(i))));
    ids.push_back(r.id);
  }
  Member a = JoinWith(*store_, "q", {0});
  ASSERT_OK_AND_ASSIGN(std::vector<Item> a_items, store_->Claim(ClaimAll("q", a, 2)));
  ASSERT_EQ(Ids(a_items), (std::vector<int64_t>{ids[0], ids[1]}));
  // a dies mid-item: it goes silent, expires, and b's heartbeat deletes it.
  auto other = harness_->Connect();
  Member b = JoinWith(*other, "q", {});
  harness_->Advance(absl::Seconds(61));
  ASSERT_OK_AND_ASSIGN(GroupView v, other->Heartbeat("q", b.join.id, b.join.incarnation));
  ASSERT_EQ(v.expired, 1);
  ASSERT_OK_AND_ASSIGN(b.parts, other->AcquireParts("q", b.join.id, {0}));
  ASSERT_EQ(b.parts.size(), 1u);

  // b's acquisition found a's claim record: those two are abandoned, one
  // attempt counted each, and only the suspect probe returns them.
  for (int k = 0; k < 2; ++k) {
    ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("q", ids[k]));
    EXPECT_EQ(st.attempts, 1) << k;
  }
  ClaimRequest no_suspects = ClaimAll("q", b, 10);
  no_suspects.include_suspect = false;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> plain, other->Claim(no_suspects));
  ASSERT_EQ(Ids(plain), (std::vector<int64_t>{ids[2], ids[3], ids[4]}));
  // The suspect does not count against the limit.
  ASSERT_OK_AND_ASSIGN(std::vector<Item> first, other->Claim(ClaimAll("q", b, 10, plain)));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].id, ids[0]);
  EXPECT_TRUE(first[0].suspect);
  EXPECT_EQ(first[0].attempts, 2);
  EXPECT_EQ(first[0].claim_epoch, b.parts[0].epoch);
  std::vector<Item> flying = plain;
  flying.push_back(first[0]);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> second, other->Claim(ClaimAll("q", b, 10, flying)));
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].id, ids[1]);
  EXPECT_TRUE(second[0].suspect);
  flying.push_back(second[0]);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> none, other->Claim(ClaimAll("q", b, 10, flying)));
  EXPECT_TRUE(none.empty());
  // A retry clears the mark (it failed in the open); an ack deletes it.
  FinishBody retry_first = [&](Tx&, absl::Span<const Item> owned) {
    std::vector<Outcome> out;
    for (const Item& i : owned) {
      out.push_back(
          Outcome{i.id, i.part, i.id == ids[0] ? Outcome::Kind::kRetry : Outcome::Kind::kAck});
    }
    return absl::StatusOr<std::vector<Outcome>>(out);
  };
  ASSERT_OK(other->Finish(FinishOf("q", b, {first[0], second[0]}), retry_first));
  ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("q", ids[0]));
  EXPECT_EQ(st.kind, ItemState::Kind::kPending);
  EXPECT_EQ(st.attempts, 2);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> retried, other->Claim(ClaimAll("q", b, 10, plain)));
  ASSERT_EQ(Ids(retried), std::vector<int64_t>{ids[0]});
  EXPECT_FALSE(retried[0].suspect) << "the retry cleared the mark";
  EXPECT_EQ(retried[0].attempts, 3);
  // a's late ack is fenced: nothing of it commits.
  ASSERT_OK_AND_ASSIGN(FinishResult late, store_->Finish(FinishOf("q", a, a_items), AckAll()));
  EXPECT_TRUE(late.acked.empty());
  EXPECT_EQ(late.fenced.size(), 2u);
  EXPECT_EQ(CountsOf("q").items(), 4);
}

TEST_P(StoreConformance, OrderedClaimTakesOnlyTheHeadOfEachKey) {
  MakeQueue(*store_, "q", 1, absl::Seconds(60), /*ordered=*/true);
  ASSERT_OK_AND_ASSIGN(EnqueueResult a1, store_->Enqueue("q", Keyed("a", "a1")));
  ASSERT_OK_AND_ASSIGN(EnqueueResult a2, store_->Enqueue("q", Keyed("a", "a2")));
  ASSERT_OK_AND_ASSIGN(EnqueueResult b1, store_->Enqueue("q", Keyed("b", "b1")));
  ASSERT_OK_AND_ASSIGN(EnqueueResult c1, store_->Enqueue("q", Payload("c1")));
  ASSERT_OK_AND_ASSIGN(EnqueueResult c2, store_->Enqueue("q", Payload("c2")));
  Member m = JoinWith(*store_, "q", {0});
  ClaimRequest req = ClaimAll("q", m, 10);
  req.ordered = true;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store_->Claim(req));
  EXPECT_EQ(Ids(got), (std::vector<int64_t>{a1.id, b1.id, c1.id, c2.id}));
  for (const Item& i : got) req.in_flight.emplace_back(i.part, i.id);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> none, store_->Claim(req));
  EXPECT_TRUE(none.empty());  // a2 waits for a1
  ASSERT_OK(store_->Finish(FinishOf("q", m, {got[0]}), AckAll()));
  req.in_flight.erase(req.in_flight.begin());
  ASSERT_OK_AND_ASSIGN(std::vector<Item> next, store_->Claim(req));
  EXPECT_EQ(Ids(next), (std::vector<int64_t>{a2.id}));
}

// An ordered claim reads on from its cursor: a key's next item, held back
// behind the cursor while the key was busy, is read when the claim names the
// key as released (ClaimPart::key_cursors), and only then; a key whose item
// is still in flight yields nothing.
// An ordered queue "q" of one part holding a1, b1, a2, b2 (keys a and b)
// and the keyless c1, of which a1, b1 and c1 were claimed and a1 acked;
// `req` reads on from the cursor at c1, b1 and c1 in flight. It checks that
// such a read finds nothing: a2 is behind the cursor.
struct HeldBehindTheCursor {
  EnqueueResult a1, b1, a2, b2, c1;
  ClaimRequest req;
};
void HoldBehindTheCursor(Store& store, HeldBehindTheCursor* h) {
  MakeQueue(store, "q", 1, absl::Seconds(60), /*ordered=*/true);
  ASSERT_OK_AND_ASSIGN(h->a1, store.Enqueue("q", Keyed("a", "a1")));
  ASSERT_OK_AND_ASSIGN(h->b1, store.Enqueue("q", Keyed("b", "b1")));
  ASSERT_OK_AND_ASSIGN(h->a2, store.Enqueue("q", Keyed("a", "a2")));
  ASSERT_OK_AND_ASSIGN(h->b2, store.Enqueue("q", Keyed("b", "b2")));
  ASSERT_OK_AND_ASSIGN(h->c1, store.Enqueue("q", Payload("c1")));
  Member m = JoinWith(store, "q", {0});
  h->req = ClaimAll("q", m, 10);
  h->req.ordered = true;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store.Claim(h->req));
  ASSERT_EQ(Ids(got), (std::vector<int64_t>{h->a1.id, h->b1.id, h->c1.id}));
  ASSERT_OK(store.Finish(FinishOf("q", m, {got[0]}), AckAll()));
  h->req.in_flight = {{0, h->b1.id}, {0, h->c1.id}};
  h->req.parts[0].after = h->req.parts[0].cursor = ItemKey{0, h->c1.id};
  h->req.parts[0].behind = false;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> none, store.Claim(h->req));
  EXPECT_TRUE(none.empty()) << "a2 is behind the cursor, and no key was released";
  EXPECT_LT(h->b2.id, h->c1.id);
}

TEST_P(StoreConformance, AnOrderedClaimReadsAReleasedKeysNextItemBehindItsCursor) {
  HeldBehindTheCursor h;
  ASSERT_NO_FATAL_FAILURE(HoldBehindTheCursor(*store_, &h));
  ClaimRequest& req = h.req;
  const EnqueueResult &a1 = h.a1, &b1 = h.b1, &a2 = h.a2;
  req.parts[0].key_cursors = {{"a", a1.id}, {"b", b1.id - 1}};
  ASSERT_OK_AND_ASSIGN(std::vector<Item> next, store_->Claim(req));
  EXPECT_EQ(Ids(next), (std::vector<int64_t>{a2.id})) << "b's next is b1, in flight: not b2";
}

// An ordered claim of the keys' heads (ClaimPart::key_heads) reads on from
// the cursor and also each key's first item, wherever it sorts: an item
// held back behind the cursor whose key no release names (its key's
// earlier item finished unseen: cancelled, or in an earlier part of a grown
// queue) is found without a read of the part from its head. The read with
// a key floor (ClaimPart::key_floors) at the finished item finds the same,
// and a live item at a floor holds its key's next back.
TEST_P(StoreConformance, AnOrderedClaimOfTheKeysHeadsFindsWhatNoReleaseNamesBehindItsCursor) {
  HeldBehindTheCursor h;
  ASSERT_NO_FATAL_FAILURE(HoldBehindTheCursor(*store_, &h));
  ClaimRequest& req = h.req;
  const EnqueueResult &a1 = h.a1, &b1 = h.b1, &a2 = h.a2;
  req.parts[0].key_heads = true;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> heads, store_->Claim(req));
  EXPECT_EQ(Ids(heads), (std::vector<int64_t>{a2.id})) << "b's first is b1, in flight: not b2";
  req.parts[0].key_floors = {{"a", a1.id}, {"b", b1.id}};
  ASSERT_OK_AND_ASSIGN(std::vector<Item> from_floors, store_->Claim(req));
  EXPECT_EQ(Ids(from_floors), (std::vector<int64_t>{a2.id}));
}

// The claim an ack makes ahead may read the keys' heads (ClaimPart::key_heads)
// from the cursor: a key's floor there is an item in flight or one this very
// ack finishes, which it must not hand out again (PgStore's pipelined ack
// skipped them only when its read looked behind the cursor, and handed a1
// out twice).
TEST_P(StoreConformance, AClaimAheadOfTheKeysHeadsSkipsWhatIsInFlightAndWhatTheAckFinishes) {
  MakeQueue(*store_, "q", 1, absl::Seconds(60), /*ordered=*/true);
  ASSERT_OK_AND_ASSIGN(EnqueueResult a1, store_->Enqueue("q", Keyed("a", "a1")));
  ASSERT_OK_AND_ASSIGN(EnqueueResult a2, store_->Enqueue("q", Keyed("a", "a2")));
  ASSERT_OK_AND_ASSIGN(EnqueueResult c1, store_->Enqueue("q", Payload("c1")));
  Member m = JoinWith(*store_, "q", {0});
  ClaimRequest req = ClaimAll("q", m, 10);
  req.ordered = true;
  req.include_suspect = false;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store_->Claim(req));
  ASSERT_EQ(Ids(got), (std::vector<int64_t>{a1.id, c1.id}));
  // The claim ahead of an ack: on from the cursor at c1, the keys' heads, a's
  // floor at a1.
  auto ahead = [&](std::vector<std::pair<int, int64_t>> in_flight) {
    return [&m, in_flight, a1, c1]() -> std::optional<ClaimRequest> {
      ClaimRequest next = ClaimAll("q", m, 10);
      next.ordered = true;
      next.include_suspect = false;
      next.in_flight = in_flight;
      next.parts[0].after = next.parts[0].cursor = ItemKey{0, c1.id};
      next.parts[0].behind = false;
      next.parts[0].key_heads = true;
      next.parts[0].key_floors = {{"a", a1.id}};
      return next;
    };
  };
  FinishRequest c1_done = FinishOf("q", m, {got[1]});
  c1_done.next = ahead({{0, a1.id}});
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(c1_done, AckAll()));
  EXPECT_TRUE(r.next.empty()) << "a1 is in flight, and holds a2 back";
  FinishRequest a1_done = FinishOf("q", m, {got[0]});
  a1_done.next = ahead({});
  ASSERT_OK_AND_ASSIGN(r, store_->Finish(a1_done, AckAll()));
  // (Whether a2 comes with it is the store's: PgStore's read still sees a1,
  // which the same statement deletes, and leaves a2 for the next claim.)
  for (const Item& item : r.next) {
    EXPECT_NE(item.id, a1.id) << "a1 is acked by this very Finish";
    EXPECT_EQ(item.id, a2.id);
  }
}

// --- key concurrency ---------------------------------------------------------------------

TEST_P(StoreConformance, KeyConcurrencyIsSetAtCreationAndChangedBySetKeyConcurrency) {
  QueueConfig c;
  c.name = "q";
  c.parts = 2;
  c.key_concurrency = 3;
  ASSERT_OK(store_->CreateQueue(c));
  MakeQueue(*store_, "plain", 1);
  ASSERT_OK_AND_ASSIGN(QueueConfig got, store_->GetQueue("q"));
  EXPECT_EQ(got.key_concurrency, 3);
  ASSERT_OK_AND_ASSIGN(got, store_->GetQueue("plain"));
  EXPECT_EQ(got.key_concurrency, 0);
  ASSERT_OK(store_->SetKeyConcurrency("q", 0));
  ASSERT_OK(store_->SetKeyConcurrency("plain", 2));
  ASSERT_OK_AND_ASSIGN(std::vector<QueueConfig> all, store_->ListQueues());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "plain");
  EXPECT_EQ(all[0].key_concurrency, 2);
  EXPECT_EQ(all[1].key_concurrency, 0);
  ASSERT_OK_AND_ASSIGN(QueueStatus st, store_->Status("plain"));
  EXPECT_EQ(st.config.key_concurrency, 2);
  EXPECT_EQ(store_->SetKeyConcurrency("nosuch", 2).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->SetKeyConcurrency("bad name", 2).code(), absl::StatusCode::kInvalidArgument);
  // An ordered queue runs one item of a key at a time already: a bound is
  // refused (it would not apply), at creation and later; none is fine.
  QueueConfig ordered;
  ordered.name = "ord";
  ordered.parts = 1;
  ordered.ordered = true;
  ordered.key_concurrency = 2;
  absl::Status refused = store_->CreateQueue(ordered);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.message(), "is ordered")) << refused;
  ordered.key_concurrency = 0;
  ASSERT_OK(store_->CreateQueue(ordered));
  refused = store_->SetKeyConcurrency("ord", 2);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "is ordered")) << refused;
  ASSERT_OK_AND_ASSIGN(got, store_->GetQueue("ord"));
  EXPECT_EQ(got.key_concurrency, 0) << "left as it was";
  ASSERT_OK(store_->SetKeyConcurrency("ord", 0));
  EXPECT_EQ(store_->SetKeyConcurrency("plain", -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->SetKeyConcurrency("plain", kMaxKeyConcurrency + 1).code(),
            absl::StatusCode::kInvalidArgument);
  c.name = "bad";
  c.key_concurrency = -2;
  EXPECT_EQ(store_->CreateQueue(c).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(got, store_->GetQueue("plain"));
  EXPECT_EQ(got.key_concurrency, 2) << "a refused change changes nothing";
}

// Invariant I18 (store level): with key concurrency N an item is claimed only
// while fewer than N older items of its key are live (ready, delayed or in
// flight), so at most N of a key are in flight; other keys and keyless items
// are not held back, and a finish lets the key's next item through.
TEST_P(StoreConformance, AKeyConcurrencyClaimTakesAtMostNItemsOfAKey) {
  MakeQueue(*store_, "q", 1);
  std::vector<int64_t> a, b, free;
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Keyed("a")));
    a.push_back(r.id);
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Keyed("b")));
    b.push_back(r.id);
    ASSERT_OK_AND_ASSIGN(EnqueueResult f, store_->Enqueue("q", Payload("free")));
    free.push_back(f.id);
  }
  Member m = JoinWith(*store_, "q", {0});
  ClaimRequest req = ClaimAll("q", m, 100);
  req.key_concurrency = 2;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store_->Claim(req));
  EXPECT_EQ(Ids(got), (std::vector<int64_t>{a[0], a[1], b[0], free[0], b[1], free[1], free[2]}));
  for (const Item& i : got) req.in_flight.emplace_back(i.part, i.id);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> none, store_->Claim(req));
  EXPECT_TRUE(none.empty()) << "a[2] and b[2] wait: two of each key are in flight";
  // Finishing one of a's lets exactly one more of a through.
  ASSERT_OK(store_->Finish(FinishOf("q", m, {got[0]}), AckAll()));
  req.in_flight.erase(req.in_flight.begin());
  ASSERT_OK_AND_ASSIGN(std::vector<Item> next, store_->Claim(req));
  EXPECT_EQ(Ids(next), (std::vector<int64_t>{a[2]}));
  req.in_flight.emplace_back(next[0].part, next[0].id);
  // A fair claim reads through the same condition.
  ClaimRequest fair = req;
  fair.fair = true;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> fair_none, store_->Claim(fair));
  EXPECT_TRUE(fair_none.empty());
  // Without the bound the rest of both keys would run at once.
  req.key_concurrency = 0;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> rest, store_->Claim(req));
  EXPECT_EQ(Ids(rest), (std::vector<int64_t>{a[3], a[4], b[2]}));
}

// --- growing a queue's parts -------------------------------------------------------------

TEST_P(StoreConformance, GrowPartsSplitsEachPartAndMovesNoItem) {
  MakeQueue(*store_, "q", 4);
  Member m = JoinWith(*store_, "q", kAllParts);
  ASSERT_EQ(m.parts.size(), 4u);
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedPart> none, store_->AcquireParts("q", m.join.id, {4, 5}));
  EXPECT_TRUE(none.empty()) << "not parts of the queue yet";
  std::map<int64_t, int> old_parts;  // id -> part
  for (int k = 0; k < 20; ++k) {
    ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Keyed(absl::StrCat("k", k))));
    EXPECT_EQ(r.part, PartForKey(absl::StrCat("k", k), 4));
    old_parts[r.id] = r.part;
  }
  ASSERT_OK_AND_ASSIGN(int before, store_->GrowParts("q", 16));
  EXPECT_EQ(before, 4);
  ASSERT_OK_AND_ASSIGN(QueueConfig c, store_->GetQueue("q"));
  EXPECT_EQ(c.parts, 16);
  EXPECT_EQ(c.grown_from, std::vector<int>{4});
  ASSERT_OK_AND_ASSIGN(GroupView g, store_->ReadGroup("q"));
  EXPECT_EQ(g.parts, 16);
  EXPECT_EQ(g.owners.size(), 4u) << "a grow moves no part";
  ASSERT_OK_AND_ASSIGN(g, store_->Heartbeat("q", m.join.id, m.join.incarnation));
  EXPECT_EQ(g.parts, 16);
  // Every item stays where it was enqueued, and is claimed there.
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store_->Claim(ClaimAll("q", m, 100)));
  ASSERT_EQ(got.size(), old_parts.size());
  for (const Item& i : got) EXPECT_EQ(i.part, old_parts[i.id]) << i.id;
  // New items use the new count: old part p splits into p, p + 4, p + 8, p + 12.
  for (int k = 0; k < 20; ++k) {
    const std::string key = absl::StrCat("k", k);
    ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Keyed(key)));
    EXPECT_EQ(r.part, PartForKey(key, 16));
    EXPECT_EQ(r.part % 4, PartForKey(key, 4));
  }
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedPart> more,
                       store_->AcquireParts("q", m.join.id, {4, 5, 15, 16}));
  ASSERT_EQ(more.size(), 3u);
  EXPECT_EQ(more[2].part, 15);
  // The same count again changes nothing.
  ASSERT_OK_AND_ASSIGN(before, store_->GrowParts("q", 16));
  EXPECT_EQ(before, 16);
  ASSERT_OK_AND_ASSIGN(c, store_->GetQueue("q"));
  EXPECT_EQ(c.grown_from, std::vector<int>{4});
  // Refused, with the reason, and nothing changes.
  absl::Status st = store_->GrowParts("q", 8).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(st.message(), "cannot shrink")) << st;
  st = store_->GrowParts("q", 24).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(st.message(), "24 is not a multiple of 16")) << st;
  EXPECT_EQ(store_->GrowParts("q", 8192).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->GrowParts("q", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->GrowParts("nosuch", 32).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GrowParts("bad name", 32).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(c, store_->GetQueue("q"));
  EXPECT_EQ(c.parts, 16);
  // And it grows again, keeping the history.
  ASSERT_OK_AND_ASSIGN(before, store_->GrowParts("q", 64));
  EXPECT_EQ(before, 16);
  ASSERT_OK_AND_ASSIGN(std::vector<QueueConfig> all, store_->ListQueues());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].parts, 64);
  EXPECT_EQ(all[0].grown_from, (std::vector<int>{4, 16}));
}

// A claim of `part` alone, at the epoch `m` holds it, of at most 10 items,
// per key bounded as `bound` says (ClaimRequest::ordered, key_concurrency),
// skipping `in_flight`; no suspect probe.
std::vector<Item> ClaimInPart(Store& store, const Member& m, int part, const ClaimRequest& bound,
                              const std::vector<Item>& in_flight) {
  ClaimRequest req;
  req.queue = "q";
  req.session = m.join.id;
  for (const OwnedPart& p : m.parts) {
    if (p.part == part) req.parts.push_back({part, p.epoch, std::nullopt, 10});
  }
  req.limit = 10;
  req.ordered = bound.ordered;
  req.key_concurrency = bound.key_concurrency;
  req.fair = bound.fair;
  req.include_suspect = false;
  for (const Item& i : in_flight) req.in_flight.emplace_back(i.part, i.id);
  absl::StatusOr<std::vector<Item>> got = store.Claim(req);
  EXPECT_OK(got.status());
  return got.ok() ? *got : std::vector<Item>{};
}

// A key in part a of 2 parts and in part a + 2 of 4: a grow from two parts
// to four puts its new items in a part of their own.
std::string KeyMovedByAGrowFromTwoPartsToFour() {
  for (int k = 0;; ++k) {
    std::string key = absl::StrCat("key", k);
    if (PartForKey(key, 4) == PartForKey(key, 2) + 2) return key;
  }
}

// Invariant I16: after a grow, an ordered queue's key keeps its order. Its
// item in a new part waits while a part the key had before a grow still
// holds an older item of it, ready or in flight; over two grows (2 -> 4 ->
// 8) a key can have items in three parts, taken oldest first.
TEST_P(StoreConformance, AfterAGrowAnOrderedKeyFinishesItsOldPartsItemsFirst) {
  MakeQueue(*store_, "q", 2, absl::Seconds(60), /*ordered=*/true);
  // A key that moves at each grow: part a of 2, a + 2 of 4, a + 6 of 8.
  std::string key;
  for (int k = 0; key.empty(); ++k) {
    const std::string kk = absl::StrCat("key", k);
    const int a = PartForKey(kk, 2);
    if (PartForKey(kk, 4) == a + 2 && PartForKey(kk, 8) == a + 6) key = kk;
  }
  const int a = PartForKey(key, 2), b = a + 2, c = a + 6;
  Member m = JoinWith(*store_, "q", kAllParts);
  ASSERT_OK_AND_ASSIGN(EnqueueResult k1, store_->Enqueue("q", Keyed(key, "1")));
  ASSERT_OK(store_->GrowParts("q", 4).status());
  ASSERT_OK_AND_ASSIGN(EnqueueResult k2, store_->Enqueue("q", Keyed(key, "2")));
  ASSERT_OK(store_->GrowParts("q", 8).status());
  ASSERT_OK_AND_ASSIGN(EnqueueResult k3, store_->Enqueue("q", Keyed(key, "3")));
  // Another key's item in the new part is not held back.
  std::string other;
  for (int k = 0; other.empty(); ++k) {
    const std::string kk = absl::StrCat("other", k);
    if (PartForKey(kk, 8) == c) other = kk;
  }
  ASSERT_OK_AND_ASSIGN(EnqueueResult o1, store_->Enqueue("q", Keyed(other, "o")));
  ASSERT_EQ(k1.part, a);
  ASSERT_EQ(k2.part, b);
  ASSERT_EQ(k3.part, c);
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedPart> got_parts,
                       store_->AcquireParts("q", m.join.id, {2, 3, 4, 5, 6, 7}));
  ASSERT_EQ(got_parts.size(), 6u);
  for (const OwnedPart& p : got_parts) m.parts.push_back(p);
  std::vector<Item> in_flight;
  ClaimRequest ordered;
  ordered.ordered = true;
  auto claim_in = [&](int part) { return Ids(ClaimInPart(*store_, m, part, ordered, in_flight)); };
  EXPECT_EQ(claim_in(c), std::vector<int64_t>{o1.id}) << "key's item 3 waits for 1 and 2";
  EXPECT_TRUE(claim_in(b).empty()) << "item 2 waits for 1";
  ClaimRequest all = ClaimAll("q", m, 100);
  all.ordered = true;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> first, store_->Claim(all));
  // Over all parts: item 1 and the other key's item, nothing else.
  EXPECT_EQ(Ids(first), (std::vector<int64_t>{k1.id, o1.id}));
  in_flight = first;
  EXPECT_TRUE(claim_in(b).empty()) << "item 1 is in flight: item 2 still waits";
  ASSERT_OK(store_->Finish(FinishOf("q", m, first), AckAll()));
  in_flight.clear();
  EXPECT_TRUE(claim_in(c).empty()) << "item 3 waits for 2";
  ASSERT_OK_AND_ASSIGN(std::vector<Item> second, store_->Claim(all));
  EXPECT_EQ(Ids(second), std::vector<int64_t>{k2.id});
  ASSERT_OK(store_->Finish(FinishOf("q", m, second), AckAll()));
  EXPECT_EQ(claim_in(c), std::vector<int64_t>{k3.id});
}

// `partq item`: a pending item's place and due time, and whether its part's
// owner runs it; a finished one as GetItemState tells it.
TEST_P(StoreConformance, DescribeItemSaysWhereAPendingItemIsAndWhenItRuns) {
  MakeQueue(*store_, "q", 1);
  Member m = JoinWith(*store_, "q", kAllParts);
  NewItem later = Keyed("k1", "later");
  later.delay = absl::Hours(1);
  later.priority = 3;
  ASSERT_OK_AND_ASSIGN(EnqueueResult l, store_->Enqueue("q", later));
  ASSERT_OK_AND_ASSIGN(EnqueueResult a, store_->Enqueue("q", Payload("a")));
  ASSERT_OK_AND_ASSIGN(EnqueueResult b, store_->Enqueue("q", Payload("b")));
  ASSERT_OK_AND_ASSIGN(ItemDetail d, store_->DescribeItem("q", l.id));
  EXPECT_EQ(d.state.kind, ItemState::Kind::kPending);
  EXPECT_EQ(d.key, std::optional<std::string>("k1"));
  EXPECT_EQ(d.priority, 3);
  ASSERT_TRUE(d.run_at.has_value());
  EXPECT_GT(*d.run_at, d.enqueued_at + absl::Minutes(59));
  EXPECT_FALSE(d.in_flight);
  // Its due time is told by the database's clock (ManualClock for MemStore:
  // nowhere near this machine's), which moves with it.
  EXPECT_LT(absl::AbsDuration(d.db_now - harness_->Now()), absl::Seconds(30));
  EXPECT_GT(*d.run_at - d.db_now, absl::Minutes(59));
  harness_->Advance(absl::Minutes(40));
  ASSERT_OK_AND_ASSIGN(d, store_->DescribeItem("q", l.id));
  EXPECT_GT(*d.run_at - d.db_now, absl::Minutes(19));
  EXPECT_LT(*d.run_at - d.db_now, absl::Minutes(21));
  EXPECT_EQ(d.payload_head, "later");
  EXPECT_EQ(d.payload_bytes, 5);
  ClaimRequest one = ClaimAll("q", m, 1);
  one.include_suspect = false;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store_->Claim(one));
  ASSERT_EQ(Ids(got), std::vector<int64_t>{a.id});
  ASSERT_OK_AND_ASSIGN(d, store_->DescribeItem("q", a.id));
  EXPECT_TRUE(d.in_flight) << "its part's owner claimed it";
  EXPECT_EQ(d.part, got[0].part);
  ASSERT_OK_AND_ASSIGN(d, store_->DescribeItem("q", b.id));
  EXPECT_FALSE(d.in_flight);
  EXPECT_FALSE(d.key.has_value());
  ASSERT_OK(store_
                ->Finish(FinishOf("q", m, got),
                         OutcomesOf([](const Item&) { return Outcome::Kind::kRetry; }))
                .status());
  ASSERT_OK_AND_ASSIGN(d, store_->DescribeItem("q", a.id));
  EXPECT_FALSE(d.in_flight);
  EXPECT_EQ(d.state.attempts, 1);
  EXPECT_EQ(d.state.error, "failed");
  ASSERT_TRUE(d.run_at.has_value());
  EXPECT_GT(*d.run_at, d.enqueued_at + absl::Minutes(59)) << "its retry an hour later";
  ASSERT_OK(store_->CancelItems("q", {b.id}).status());
  ASSERT_OK_AND_ASSIGN(d, store_->DescribeItem("q", b.id));
  EXPECT_EQ(d.state.kind, ItemState::Kind::kCancelled);
  EXPECT_EQ(store_->DescribeItem("nope", 1).status().code(), absl::StatusCode::kNotFound);
}

// A key's items reach the handler in enqueue (id) order, within a batch
// too: in a fair queue the batches claimed ahead came in reverse, one part's
// claimed rows out of a hash join that hashed them (a walkthrough of
// 2026-12-07: ids 376, 375, 374, 373, 372 in one batch).
TEST_P(StoreConformance, EveryClaimHandsAKeysItemsInIdOrder) {
  MakeQueue(*store_, "q", 1);
  Member m = JoinWith(*store_, "q", kAllParts);
  std::vector<NewItem> items;
  for (int i = 0; i < 20; ++i) items.push_back(Keyed("k1", absl::StrCat(i)));
  ASSERT_OK(store_->EnqueueBatch("q", items).status());
  for (const bool fair : {true, false}) {
    SCOPED_TRACE(fair ? "fair" : "plain");
    ClaimRequest first = ClaimAll("q", m, 5);
    first.fair = fair;
    first.include_suspect = false;
    ASSERT_OK_AND_ASSIGN(std::vector<Item> batch, store_->Claim(first));
    ASSERT_EQ(batch.size(), 5u);
    EXPECT_EQ(Ids(batch), Sorted(Ids(batch)));
    FinishRequest fin = FinishOf("q", m, batch);
    fin.next = [&]() -> std::optional<ClaimRequest> {
      ClaimRequest next = ClaimAll("q", m, 5, batch);
      next.fair = fair;
      next.include_suspect = false;
      return next;
    };
    ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(fin, AckAll()));
    ASSERT_EQ(r.next.size(), 5u);
    EXPECT_EQ(Ids(r.next), Sorted(Ids(r.next))) << "the batch claimed ahead";
    EXPECT_GT(r.next.front().id, batch.back().id);
    ASSERT_OK(store_->Finish(FinishOf("q", m, r.next), AckAll()).status());
  }
}

// The same in a fair claim: the key's item in its new part waits for the
// one in its old part.
TEST_P(StoreConformance, AfterAGrowAFairOrderedKeyFinishesItsOldPartsItemsFirst) {
  MakeQueue(*store_, "q", 2, absl::Seconds(60), /*ordered=*/true);
  const std::string key = KeyMovedByAGrowFromTwoPartsToFour();
  Member m = JoinWith(*store_, "q", kAllParts);
  ASSERT_OK_AND_ASSIGN(EnqueueResult k1, store_->Enqueue("q", Keyed(key, "1")));
  ASSERT_OK(store_->GrowParts("q", 4).status());
  ASSERT_OK_AND_ASSIGN(EnqueueResult k2, store_->Enqueue("q", Keyed(key, "2")));
  ASSERT_EQ(k2.part, k1.part + 2);
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedPart> more, store_->AcquireParts("q", m.join.id, {2, 3}));
  for (const OwnedPart& p : more) m.parts.push_back(p);
  ClaimRequest fair;
  fair.ordered = true;
  fair.fair = true;
  auto claim_in = [&](int part) { return ClaimInPart(*store_, m, part, fair, {}); };
  EXPECT_TRUE(claim_in(k2.part).empty()) << "item 2 waits for 1, in the key's old part";
  std::vector<Item> first = claim_in(k1.part);
  EXPECT_EQ(Ids(first), std::vector<int64_t>{k1.id});
  ASSERT_OK(store_->Finish(FinishOf("q", m, first), AckAll()));
  EXPECT_EQ(Ids(claim_in(k2.part)), std::vector<int64_t>{k2.id}) << "1 finished: 2 may run";
}

// After a grow, key concurrency counts the key's live items in its earlier
// parts too (the probe ordered queues use): N = 2, one item of the key left
// in its old part, two in its new one.
TEST_P(StoreConformance, AfterAGrowKeyConcurrencyCountsTheOldPartsItems) {
  MakeQueue(*store_, "q", 2);
  const std::string key = KeyMovedByAGrowFromTwoPartsToFour();
  Member m = JoinWith(*store_, "q", kAllParts);
  ASSERT_OK_AND_ASSIGN(EnqueueResult k1, store_->Enqueue("q", Keyed(key, "1")));
  ASSERT_OK(store_->GrowParts("q", 4).status());
  ASSERT_OK_AND_ASSIGN(EnqueueResult k2, store_->Enqueue("q", Keyed(key, "2")));
  ASSERT_OK_AND_ASSIGN(EnqueueResult k3, store_->Enqueue("q", Keyed(key, "3")));
  ASSERT_EQ(k2.part, k1.part + 2);
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedPart> more, store_->AcquireParts("q", m.join.id, {2, 3}));
  for (const OwnedPart& p : more) m.parts.push_back(p);
  std::vector<Item> in_flight;
  ClaimRequest two;
  two.key_concurrency = 2;
  auto claim_in = [&](int part) { return ClaimInPart(*store_, m, part, two, in_flight); };
  std::vector<Item> second = claim_in(k2.part);
  EXPECT_EQ(Ids(second), std::vector<int64_t>{k2.id}) << "item 3 has two older: 1 (old part), 2";
  in_flight = second;
  std::vector<Item> first = claim_in(k1.part);
  EXPECT_EQ(Ids(first), std::vector<int64_t>{k1.id});
  in_flight.insert(in_flight.end(), first.begin(), first.end());
  EXPECT_TRUE(claim_in(k2.part).empty());
  ASSERT_OK(store_->Finish(FinishOf("q", m, first), AckAll()));
  in_flight = second;
  EXPECT_EQ(Ids(claim_in(k2.part)), std::vector<int64_t>{k3.id}) << "1 finished: 3 may run";
}

TEST_P(StoreConformance, AfterAGrowAnUnorderedQueuesNewPartsRunAtOnce) {
  MakeQueue(*store_, "q", 2);
  const std::string key = KeyMovedByAGrowFromTwoPartsToFour();
  Member m = JoinWith(*store_, "q", kAllParts);
  ASSERT_OK_AND_ASSIGN(EnqueueResult k1, store_->Enqueue("q", Keyed(key, "1")));
  ASSERT_OK(store_->GrowParts("q", 4).status());
  ASSERT_OK_AND_ASSIGN(EnqueueResult k2, store_->Enqueue("q", Keyed(key, "2")));
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedPart> more, store_->AcquireParts("q", m.join.id, {2, 3}));
  for (const OwnedPart& p : more) m.parts.push_back(p);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store_->Claim(ClaimAll("q", m, 100)));
  std::vector<int64_t> ids = Ids(got);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<int64_t>{k1.id, k2.id})) << "no order to keep: both at once";
}

// --- fair share ----------------------------------------------------------------------------

TEST_P(StoreConformance, FairByIsSetAtCreationAndChangedBySetFairBy) {
  QueueConfig c;
  c.name = "q";
  c.parts = 2;
  c.fair_by = FairBy::kKey;
  ASSERT_OK(store_->CreateQueue(c));
  MakeQueue(*store_, "plain", 1);
  ASSERT_OK_AND_ASSIGN(QueueConfig got, store_->GetQueue("q"));
  EXPECT_EQ(got.fair_by, FairBy::kKey);
  ASSERT_OK_AND_ASSIGN(got, store_->GetQueue("plain"));
  EXPECT_EQ(got.fair_by, FairBy::kNone);
  ASSERT_OK(store_->SetFairBy("q", FairBy::kNone));
  ASSERT_OK(store_->SetFairBy("plain", FairBy::kKey));
  ASSERT_OK_AND_ASSIGN(std::vector<QueueConfig> all, store_->ListQueues());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "plain");
  EXPECT_EQ(all[0].fair_by, FairBy::kKey);
  EXPECT_EQ(all[1].fair_by, FairBy::kNone);
  ASSERT_OK_AND_ASSIGN(QueueStatus st, store_->Status("plain"));
  EXPECT_EQ(st.config.fair_by, FairBy::kKey);
  EXPECT_EQ(store_->SetFairBy("nosuch", FairBy::kKey).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->SetFairBy("bad name", FairBy::kKey).code(), absl::StatusCode::kInvalidArgument);
}

// One part: ten items of "big" enqueued first, then two each of "a" and "b",
// then a keyless one. An ordinary claim of four takes big's oldest four; a
// fair one gives each key a turn (keys in byte order from after key_after,
// then around), the keyless item only when the keys leave room.
TEST_P(StoreConformance, AFairClaimServesTheKeysInTurnsFromAfterTheLastOne) {
  MakeQueue(*store_, "q", 1);
  std::vector<int64_t> big, a, b;
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Keyed("big")));
    big.push_back(r.id);
  }
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(EnqueueResult ra, store_->Enqueue("q", Keyed("a")));
    a.push_back(ra.id);
    ASSERT_OK_AND_ASSIGN(EnqueueResult rb, store_->Enqueue("q", Keyed("b")));
    b.push_back(rb.id);
  }
  ASSERT_OK_AND_ASSIGN(EnqueueResult keyless, store_->Enqueue("q", Payload("none")));
  Member m = JoinWith(*store_, "q", {0});
  ClaimRequest req = ClaimAll("q", m, 4);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> plain, store_->Claim(req));
  EXPECT_EQ(Ids(plain), (std::vector<int64_t>{big[0], big[1], big[2], big[3]}));

  req = ClaimAll("q", m, 4);
  req.fair = true;
  // Turn 1: a, b, big; turn 2: a (the limit cuts b and big).
  ASSERT_OK_AND_ASSIGN(std::vector<Item> first, store_->Claim(req));
  EXPECT_EQ(Sorted(Ids(first)), Sorted({a[0], a[1], b[0], big[0]}));
  // On after "a" with those in flight: b, big, big, big (a has none ready).
  for (const Item& i : first) req.in_flight.emplace_back(i.part, i.id);
  req.parts[0].key_after = "a";
  ASSERT_OK_AND_ASSIGN(std::vector<Item> second, store_->Claim(req));
  EXPECT_EQ(Sorted(Ids(second)), Sorted({b[1], big[1], big[2], big[3]}));
  // After "big", around to a and b (none ready): big's share (3 of 2 * 4
  // over three keys) leaves room for the keyless item.
  for (const Item& i : second) req.in_flight.emplace_back(i.part, i.id);
  req.parts[0].key_after = "big";
  ASSERT_OK_AND_ASSIGN(std::vector<Item> third, store_->Claim(req));
  EXPECT_EQ(Sorted(Ids(third)), Sorted({big[4], big[5], big[6], keyless.id}));
}

// One part, twelve items of "big". A fair claim reads a key on from its
// cursor (ClaimPart::key_cursors): its items up to there are not returned,
// in flight or not (the caller vouches for them). A key with a cursor takes
// its turns with no items left: beside "x" and "y" (none), big's share is 3
// of 2 * 4 over three keys. Looking behind, what came due behind a cursor
// comes first.
TEST_P(StoreConformance, AFairClaimReadsAKeyOnFromItsCursor) {
  MakeQueue(*store_, "q", 1);
  std::vector<int64_t> big;
  for (int i = 0; i < 12; ++i) {
    ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Keyed("big")));
    big.push_back(r.id);
  }
  Member m = JoinWith(*store_, "q", {0});
  ClaimRequest req = ClaimAll("q", m, 4);
  req.fair = true;
  req.parts[0].key_cursors = {{"big", big[2]}};
  ASSERT_OK_AND_ASSIGN(std::vector<Item> first, store_->Claim(req));
  EXPECT_EQ(Sorted(Ids(first)), Sorted({big[3], big[4], big[5], big[6]}));
  for (const Item& i : first) req.in_flight.emplace_back(i.part, i.id);
  req.parts[0].key_cursors = {{"big", big[6]}, {"x", 0}, {"y", 0}};
  ASSERT_OK_AND_ASSIGN(std::vector<Item> second, store_->Claim(req));
  EXPECT_EQ(Sorted(Ids(second)), Sorted({big[7], big[8], big[9]}));
  // From the heads: what the cursors passed over is there.
  req.parts[0].key_cursors.clear();
  for (const Item& i : second) req.in_flight.emplace_back(i.part, i.id);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> third, store_->Claim(req));
  EXPECT_EQ(Sorted(Ids(third)), Sorted({big[0], big[1], big[2], big[10]}));
  // big[1] retried, due at once, behind big's cursor: only a read that
  // looks behind returns it.
  FinishBody retry = [&](Tx&, absl::Span<const Item> items) {
    std::vector<Outcome> out;
    for (const Item& i : items) {
      out.push_back(
          Outcome{i.id, i.part, i.id == big[1] ? Outcome::Kind::kRetry : Outcome::Kind::kLeave});
    }
    return absl::StatusOr<std::vector<Outcome>>(out);
  };
  ASSERT_OK(store_->Finish(FinishOf("q", m, third), retry));
  for (const Item& i : third) {
    if (i.id != big[1]) req.in_flight.emplace_back(i.part, i.id);
  }
  req.parts[0].key_cursors = {{"big", big[10]}};
  req.parts[0].behind = false;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> onward, store_->Claim(req));
  EXPECT_EQ(Ids(onward), (std::vector<int64_t>{big[11]})) << "big[1] is behind the cursor";
  req.parts[0].behind = true;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> fourth, store_->Claim(req));
  EXPECT_EQ(Sorted(Ids(fourth)), Sorted({big[1], big[11]}));
}

// A fair claim of an ordered queue still takes only each key's oldest live
// item.
TEST_P(StoreConformance, AFairOrderedClaimTakesOnlyTheHeadOfEachKey) {
  MakeQueue(*store_, "q", 1, absl::Seconds(60), /*ordered=*/true);
  std::vector<int64_t> ids;
  for (const char* key : {"x", "x", "y", "y"}) {
    ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Keyed(key)));
    ids.push_back(r.id);
  }
  Member m = JoinWith(*store_, "q", {0});
  ClaimRequest req = ClaimAll("q", m, 10);
  req.ordered = true;
  req.fair = true;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store_->Claim(req));
  EXPECT_EQ(Sorted(Ids(got)), Sorted({ids[0], ids[2]}));
  // With those in flight and x read on from its cursor there, nothing of x
  // or y is ready: each key's next item waits for the one before it.
  req.in_flight = {{0, ids[0]}, {0, ids[2]}};
  req.parts[0].key_cursors = {{"x", ids[0]}};
  ASSERT_OK_AND_ASSIGN(std::vector<Item> held, store_->Claim(req));
  EXPECT_TRUE(held.empty()) << Ids(held).size() << " items of busy keys claimed";
  // Two of a key at once (key concurrency 2): x's and y's second items too.
  req.ordered = false;
  req.key_concurrency = 2;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> second, store_->Claim(req));
  EXPECT_EQ(Sorted(Ids(second)), Sorted({ids[1], ids[3]}));
}

// A fair claim looks for keyless items among the part's first 2 x limit
// items due (not in flight), keyed ones counted whether their keys hold them
// back or not: a keyless item waits behind the keyed items due before it.
TEST_P(StoreConformance, AFairClaimLooksForKeylessItemsAmongThePartsFirstItemsDue) {
  MakeQueue(*store_, "q", 1, absl::Seconds(60), /*ordered=*/true);
  std::vector<int64_t> x;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Keyed("x")));
    x.push_back(r.id);
  }
  ASSERT_OK_AND_ASSIGN(EnqueueResult z, store_->Enqueue("q", Payload("z")));
  Member m = JoinWith(*store_, "q", {0});
  ClaimRequest req = ClaimAll("q", m, 1);
  req.ordered = true;
  req.fair = true;
  req.in_flight = {{0, x[0]}};  // x's later items are held back by it
  ASSERT_OK_AND_ASSIGN(std::vector<Item> none, store_->Claim(req));
  EXPECT_TRUE(none.empty()) << "z is third among the items due, past 2 x 1";
  req.parts[0].limit = 2;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store_->Claim(req));
  EXPECT_EQ(Ids(got), (std::vector<int64_t>{z.id}));
}

// --- finish ---------------------------------------------------------------------------

TEST_P(StoreFinishConformance, AckDeletesItemsAndCommitsTheHandlersWrites) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_)));
  ASSERT_EQ(items.size(), 6u);
  ASSERT_OK_AND_ASSIGN(FinishResult r,
                       store_->Finish(FinishOf("q", member_, items), Record(Outcome::Kind::kAck)));
  EXPECT_EQ(Sorted(r.acked), ids_);
  EXPECT_TRUE(r.fenced.empty() && r.retried.empty() && r.dead.empty());
  EXPECT_EQ(CountsOf("q").items(), 0);
  EXPECT_EQ(Sorted(Effects()), ids_);
  // Finishing the same claim again writes nothing: every item is fenced.
  ASSERT_OK_AND_ASSIGN(FinishResult again,
                       store_->Finish(FinishOf("q", member_, items), Record(Outcome::Kind::kAck)));
  EXPECT_TRUE(again.acked.empty());
  EXPECT_EQ(again.fenced.size(), 6u);
  EXPECT_EQ(Effects().size(), 6u);
}

TEST_P(StoreFinishConformance, ItemsOfAReleasedPartAreFencedAndTheirWritesNeverCommit) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_)));
  ASSERT_EQ(items.size(), 6u);
  // Part 0 changes hands between claim and finish.
  ASSERT_OK(store_->ReleaseParts("q", member_.join.id, {member_.parts[0]}));
  auto other = harness_->Connect();
  Member b = JoinWith(*other, "q", {0});
  ASSERT_EQ(b.parts.size(), 1u);
  std::vector<int64_t> handled;
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(FinishOf("q", member_, items),
                                                      Record(Outcome::Kind::kAck, &handled)));
  std::vector<int64_t> in_part0, in_part1;
  for (const Item& i : items) (i.part == 0 ? in_part0 : in_part1).push_back(i.id);
  ASSERT_FALSE(in_part0.empty());
  EXPECT_EQ(Sorted(r.fenced), Sorted(in_part0));
  EXPECT_EQ(Sorted(r.acked), Sorted(in_part1));
  // The run that committed saw only what is still ours.
  EXPECT_EQ(Sorted(handled), Sorted(in_part1));
  EXPECT_EQ(Sorted(Effects()), Sorted(in_part1));
  EXPECT_EQ(CountsOf("q").items(), static_cast<int64_t>(in_part0.size()));

  // Everything fenced: the body sees no items and nothing of theirs is written.
  ASSERT_OK(other->ReleaseParts("q", b.join.id, b.parts));
  handled.clear();
  ASSERT_OK_AND_ASSIGN(FinishResult none, store_->Finish(FinishOf("q", member_, items),
                                                         Record(Outcome::Kind::kAck, &handled)));
  EXPECT_TRUE(none.acked.empty());
  EXPECT_TRUE(handled.empty());
  EXPECT_EQ(none.fenced.size(), items.size());
  EXPECT_EQ(Effects().size(), in_part1.size());
}

// The fence is the request's parts at the items' claim epochs: an item whose
// part the request does not list is fenced like one whose part was lost.
TEST_P(StoreFinishConformance, ItemsOutsideTheRequestsPartsAreFenced) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_)));
  FinishRequest req = FinishOf("q", member_, items);
  req.parts = {member_.parts[1]};
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(req, Record(Outcome::Kind::kAck)));
  std::vector<int64_t> in_part0, in_part1;
  for (const Item& i : items) (i.part == 0 ? in_part0 : in_part1).push_back(i.id);
  EXPECT_EQ(Sorted(r.fenced), Sorted(in_part0));
  EXPECT_EQ(Sorted(r.acked), Sorted(in_part1));
  EXPECT_EQ(CountsOf("q").items(), static_cast<int64_t>(in_part0.size()));
}

TEST_P(StoreFinishConformance, AStaticRejoinFencesTheOldIncarnationsAcks) {
  MakeQueue(*store_, "s", 1);
  ASSERT_OK_AND_ASSIGN(EnqueueResult e, store_->Enqueue("s", Payload("x")));
  Member old = JoinWith(*store_, "s", {0}, "w1");
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("s", old)));
  ASSERT_EQ(items.size(), 1u);
  auto other = harness_->Connect();
  Member fresh = JoinWith(*other, "s", {}, "w1");
  ASSERT_EQ(fresh.join.kept.size(), 1u);
  ASSERT_OK_AND_ASSIGN(FinishResult r,
                       store_->Finish(FinishOf("s", old, items), Record(Outcome::Kind::kAck)));
  EXPECT_TRUE(r.acked.empty());
  EXPECT_EQ(r.fenced, Ids(items));
  EXPECT_TRUE(Effects().empty());
  EXPECT_EQ(CountsOf("s").items(), 1);
  // The old incarnation died with the item in flight: it is abandoned, one
  // attempt counted, and comes back to the new incarnation as a suspect.
  ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("s", e.id));
  EXPECT_EQ(st.attempts, 1);
  fresh.parts = fresh.join.kept;
  ClaimRequest plain = ClaimAll("s", fresh);
  plain.include_suspect = false;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> none, other->Claim(plain));
  EXPECT_TRUE(none.empty());
  ASSERT_OK_AND_ASSIGN(std::vector<Item> suspect, other->Claim(ClaimAll("s", fresh)));
  ASSERT_EQ(suspect.size(), 1u);
  EXPECT_TRUE(suspect[0].suspect);
  EXPECT_EQ(suspect[0].attempts, 2);
}

TEST_P(StoreFinishConformance, BodyErrorRollsBackEverything) {
  MakeQueue(*store_, "follow-ups", 1);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_)));
  FinishBody failing = [](Tx& tx,
                          absl::Span<const Item> owned) -> absl::StatusOr<std::vector<Outcome>> {
    if (absl::Status st = tx.Publish(OutboxEvent{"effects", std::nullopt, "1", std::nullopt});
        !st.ok()) {
      return st;
    }
    if (auto r = tx.Enqueue("follow-ups", Payload("x")); !r.ok()) return r.status();
    return absl::DataLossError("handler failed");
  };
  absl::StatusOr<FinishResult> r = store_->Finish(FinishOf("q", member_, items), failing);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(Effects().empty());
  EXPECT_EQ(CountsOf("follow-ups").items(), 0);
  EXPECT_EQ(CountsOf("q").items(), 6);
  // Outcomes that do not match the items are a bug in the caller.
  FinishBody short_body = [](Tx&, absl::Span<const Item>) -> absl::StatusOr<std::vector<Outcome>> {
    return std::vector<Outcome>{};
  };
  r = store_->Finish(FinishOf("q", member_, items), short_body);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  FinishBody twice = [](Tx&, absl::Span<const Item> owned) -> absl::StatusOr<std::vector<Outcome>> {
    std::vector<Outcome> out(owned.size(), Outcome{owned[0].id, owned[0].part});
    return out;
  };
  r = store_->Finish(FinishOf("q", member_, items), twice);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(CountsOf("q").items(), 6);
  // And the store works on.
  ASSERT_OK_AND_ASSIGN(FinishResult ok, store_->Finish(FinishOf("q", member_, items), AckAll()));
  EXPECT_EQ(ok.acked.size(), 6u);
}

TEST_P(StoreFinishConformance, WithoutItemsTheBodyStillRunsAndCommits) {
  FinishRequest setup;
  setup.queue = "q";
  bool ran = false;
  ASSERT_OK_AND_ASSIGN(
      FinishResult r,
      store_->Finish(
          setup, [&](Tx& tx, absl::Span<const Item> owned) -> absl::StatusOr<std::vector<Outcome>> {
            ran = true;
            EXPECT_TRUE(owned.empty());
            if (absl::Status st =
                    tx.Publish(OutboxEvent{"setup", std::nullopt, "done", std::nullopt});
                !st.ok()) {
              return st;
            }
            return std::vector<Outcome>{};
          }));
  EXPECT_TRUE(ran);
  EXPECT_TRUE(r.acked.empty() && r.fenced.empty());
  EXPECT_EQ(Published("setup"), std::vector<std::string>{"done"});
}

// Items a Finish leaves (kLeave) stay as they were: not acked, retried or
// counted, still in the claim record, and the caller finishes them in a
// later Finish.
TEST_P(StoreFinishConformance, LeftItemsStayInFlightForALaterFinish) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_)));
  ASSERT_EQ(items.size(), 6u);
  FinishBody half = [](Tx&, absl::Span<const Item> owned) -> absl::StatusOr<std::vector<Outcome>> {
    std::vector<Outcome> out;
    for (size_t k = 0; k < owned.size(); ++k) {
      out.push_back(
          Outcome{owned[k].id, owned[k].part, k < 3 ? Outcome::Kind::kAck : Outcome::Kind::kLeave});
    }
    return out;
  };
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(FinishOf("q", member_, items), half));
  EXPECT_EQ(r.acked.size(), 3u);
  EXPECT_TRUE(r.retried.empty() && r.dead.empty() && r.fenced.empty());
  const std::vector<Item> rest(items.begin() + 3, items.end());
  for (const Item& i : rest) {
    ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("q", i.id));
    EXPECT_EQ(st.kind, ItemState::Kind::kPending);
    EXPECT_EQ(st.attempts, 0);
    EXPECT_EQ(st.error, "");
  }
  // Still in the claim records (what a new owner would count as abandoned).
  Counts counts = CountsOf("q");
  EXPECT_EQ(counts.in_flight, 3);
  EXPECT_EQ(counts.items(), 3);
  ASSERT_OK_AND_ASSIGN(r, store_->Finish(FinishOf("q", member_, rest), AckAll()));
  EXPECT_EQ(r.acked.size(), 3u);
  EXPECT_EQ(CountsOf("q").items(), 0);
}

TEST_P(StoreFinishConformance, RetryReschedulesAndFreesTheClaim) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_)));
  ASSERT_OK_AND_ASSIGN(
      FinishResult r, store_->Finish(FinishOf("q", member_, items), Record(Outcome::Kind::kRetry)));
  EXPECT_EQ(r.retried.size(), 6u);
  EXPECT_EQ(Effects().size(), 6u);  // the handler's writes commit with the retry
  Counts counts = CountsOf("q");
  EXPECT_EQ(counts.delayed, 6);
  EXPECT_EQ(counts.in_flight, 0);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> none, store_->Claim(ClaimAll("q", member_)));
  EXPECT_TRUE(none.empty());
  ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("q", ids_[0]));
  EXPECT_EQ(st.kind, ItemState::Kind::kPending);
  EXPECT_EQ(st.attempts, 1);
  EXPECT_EQ(st.error, "boom");
  harness_->Advance(absl::Minutes(4));
  ASSERT_OK_AND_ASSIGN(none, store_->Claim(ClaimAll("q", member_)));
  EXPECT_TRUE(none.empty()) << "due five minutes after the retry";
  harness_->Advance(absl::Minutes(1));
  ASSERT_OK_AND_ASSIGN(std::vector<Item> again, store_->Claim(ClaimAll("q", member_)));
  ASSERT_EQ(again.size(), 6u);
  for (const Item& i : again) {
    EXPECT_EQ(i.attempts, 2);
    EXPECT_FALSE(i.suspect);
  }
}

TEST_P(StoreFinishConformance, RefundedRetryGivesTheAttemptBack) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_, 1)));
  ASSERT_EQ(items.size(), 1u);
  FinishBody refund = [](Tx&, absl::Span<const Item> owned) {
    std::vector<Outcome> out;
    for (const Item& i : owned) {
      Outcome o{i.id, i.part, Outcome::Kind::kRetry};
      o.refund_attempt = true;
      out.push_back(o);
    }
    return absl::StatusOr<std::vector<Outcome>>(out);
  };
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(FinishOf("q", member_, items), refund));
  EXPECT_EQ(r.retried, Ids(items));
  ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("q", items[0].id));
  EXPECT_EQ(st.attempts, 0);
  // Ready now, not abandoned: all six come back as first attempts.
  ClaimRequest all = ClaimAll("q", member_);
  all.include_suspect = false;
  ASSERT_OK_AND_ASSIGN(std::vector<Item> again, store_->Claim(all));
  ASSERT_EQ(again.size(), 6u);
  for (const Item& i : again) EXPECT_EQ(i.attempts, 1) << i.id;
}

// When a COMMIT's answer is lost, the consumer cannot know whether its
// Finish committed, and sends the same one again. Its first had written a
// retry: the item is back, its attempt counted. The second must call it not
// ours: not count a second attempt, nor dead-letter it with one attempt too
// many (which dead-lettered items before their max_attempts).
TEST_P(StoreFinishConformance, AFinishSentAgainAfterItsRetryCommittedCountsTheAttemptOnce) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_, 2)));
  ASSERT_EQ(items.size(), 2u);
  const int64_t retried = items[0].id;
  FinishBody retry_first = OutcomesOf(
      [&](const Item& i) { return i.id == retried ? Outcome::Kind::kRetry : Outcome::Kind::kAck; });
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(FinishOf("q", member_, items), retry_first));
  EXPECT_EQ(r.retried, std::vector<int64_t>{retried});
  EXPECT_EQ(r.acked, std::vector<int64_t>{items[1].id});
  // Sent again, as after a lost answer: a retry, then a dead letter.
  for (Outcome::Kind kind : {Outcome::Kind::kRetry, Outcome::Kind::kDead}) {
    ASSERT_OK_AND_ASSIGN(FinishResult again,
                         store_->Finish(FinishOf("q", member_, items),
                                        OutcomesOf([kind](const Item&) { return kind; })));
    EXPECT_TRUE(again.retried.empty() && again.dead.empty() && again.acked.empty());
    std::vector<int64_t> fenced = again.fenced, ids = Ids(items);
    std::sort(fenced.begin(), fenced.end());
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(fenced, ids);
    ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("q", retried));
    EXPECT_EQ(st.kind, ItemState::Kind::kPending);
    EXPECT_EQ(st.attempts, 1) << "the retry's attempt counted once";
  }
}

// A dead outcome with its attempt given back (an item dead-lettered without
// running: a crash loop) keeps the attempts the item had; its dead row says
// no more than its error does.
TEST_P(StoreFinishConformance, RefundedDeadKeepsTheAttemptsItHad) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_, 2)));
  ASSERT_EQ(items.size(), 2u);
  FinishBody dead = [](Tx&, absl::Span<const Item> owned) {
    std::vector<Outcome> out;
    for (const Item& i : owned) {
      Outcome o{i.id, i.part, Outcome::Kind::kDead};
      o.error = "gave up";
      o.refund_attempt = i.id == owned[0].id;
      out.push_back(o);
    }
    return absl::StatusOr<std::vector<Outcome>>(out);
  };
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(FinishOf("q", member_, items), dead));
  ASSERT_EQ(r.dead.size(), 2u);
  ASSERT_OK_AND_ASSIGN(ItemState refunded, store_->GetItemState("q", items[0].id));
  EXPECT_EQ(refunded.kind, ItemState::Kind::kDead);
  EXPECT_EQ(refunded.attempts, 0);
  ASSERT_OK_AND_ASSIGN(ItemState counted, store_->GetItemState("q", items[1].id));
  EXPECT_EQ(counted.attempts, 1);
  ASSERT_OK_AND_ASSIGN(std::vector<DeadItem> rows, store_->ListDead("q", 10));
  ASSERT_EQ(rows.size(), 2u);
  for (const DeadItem& d : rows) EXPECT_EQ(d.attempts, d.id == items[0].id ? 0 : 1) << d.id;
}

TEST_P(StoreFinishConformance, DeadMovesToDeadItemsAndMaxAttemptsIsEnforced) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_, 1)));
  ASSERT_OK_AND_ASSIGN(FinishResult r,
                       store_->Finish(FinishOf("q", member_, items), Record(Outcome::Kind::kDead)));
  EXPECT_EQ(r.dead, Ids(items));
  Counts counts = CountsOf("q");
  EXPECT_EQ(counts.items(), 5);
  EXPECT_EQ(counts.dead, 1);
  ASSERT_OK_AND_ASSIGN(std::vector<DeadItem> dead, store_->ListDead("q", 10));
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].id, items[0].id);
  EXPECT_EQ(dead[0].last_error, "boom");
  EXPECT_EQ(dead[0].attempts, 1);
  ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("q", items[0].id));
  EXPECT_EQ(st.kind, ItemState::Kind::kDead);
  EXPECT_EQ(st.error, "boom");

  // max_attempts = 3: the third failed attempt dead-letters even as a retry.
  const int64_t id = ids_[0] == items[0].id ? ids_[1] : ids_[0];
  FinishBody retry_now = [](Tx&, absl::Span<const Item> owned) {
    std::vector<Outcome> out;
    for (const Item& i : owned) {
      Outcome o{i.id, i.part, Outcome::Kind::kRetry};
      o.error = absl::StrCat("attempt ", i.attempts);
      out.push_back(o);
    }
    return absl::StatusOr<std::vector<Outcome>>(out);
  };
  for (int attempt = 1; attempt <= 3; ++attempt) {
    // Claims are reads: take everything, keep the one under test.
    ASSERT_OK_AND_ASSIGN(std::vector<Item> all, store_->Claim(ClaimAll("q", member_, 100)));
    std::vector<Item> got;
    for (const Item& i : all) {
      if (i.id == id) got.push_back(i);
    }
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].attempts, attempt);
    FinishRequest req = FinishOf("q", member_, got);
    req.max_attempts = 3;
    ASSERT_OK_AND_ASSIGN(FinishResult fr, store_->Finish(req, retry_now));
    if (attempt < 3) {
      EXPECT_EQ(fr.retried, std::vector<int64_t>{id});
    } else {
      EXPECT_EQ(fr.dead, std::vector<int64_t>{id});
    }
  }
  ASSERT_OK_AND_ASSIGN(st, store_->GetItemState("q", id));
  EXPECT_EQ(st.kind, ItemState::Kind::kDead);
  EXPECT_EQ(st.attempts, 3);
  EXPECT_EQ(st.error, "attempt 3");
}

// Claim ahead: the finish also claims the next items, skipping the ones it
// finishes, and records them.
TEST_P(StoreFinishConformance, AnAckClaimsTheNextItemsInTheSameTransaction) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> first, store_->Claim(ClaimAll("q", member_, 2)));
  ASSERT_EQ(first.size(), 2u);
  FinishRequest req = FinishOf("q", member_, first);
  int asked = 0;
  req.next = [&]() -> std::optional<ClaimRequest> {
    ++asked;
    return ClaimAll("q", member_, 100);
  };
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(req, Record(Outcome::Kind::kAck)));
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(r.acked.size(), 2u);
  EXPECT_FALSE(r.next_begun);  // not asked for
  std::vector<int64_t> rest;
  for (int64_t id : ids_) {
    if (std::find(r.acked.begin(), r.acked.end(), id) == r.acked.end()) rest.push_back(id);
  }
  EXPECT_EQ(Sorted(Ids(r.next)), rest) << "the four left, not the two just acked";
  for (const Item& i : r.next) EXPECT_EQ(i.attempts, 1);
  // The records list the four in flight.
  EXPECT_EQ(CountsOf("q").in_flight, 4);
  // A Finish that rolls back claims nothing.
  FinishRequest failing = FinishOf("q", member_, r.next);
  failing.next = [&]() -> std::optional<ClaimRequest> { return ClaimAll("q", member_, 100); };
  absl::StatusOr<FinishResult> rolled = store_->Finish(
      failing, [](Tx&, absl::Span<const Item>) -> absl::StatusOr<std::vector<Outcome>> {
        return absl::UnknownError("handler failed");
      });
  EXPECT_EQ(rolled.status().code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(CountsOf("q").items(), 4);
}

// The ack records the result of an item with a dedup key even when the
// caller's copy of the item does not say it has one (the stored item is what
// counts), so `partq wait` by key can answer.
TEST_P(StoreFinishConformance, AnAckOfADedupKeyTheCallerDidNotKnowStillRecordsIt) {
  NewItem keyed = Payload("keyed");
  keyed.dedup_key = "k-1";
  ASSERT_OK_AND_ASSIGN(EnqueueResult e, store_->Enqueue("q", keyed));
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_, 100)));
  ASSERT_EQ(items.size(), 7u);
  for (Item& i : items) {
    if (i.id == e.id) {
      EXPECT_EQ(i.dedup_key, std::optional<std::string>("k-1")) << "the claim says";
    }
    i.dedup_key.reset();
  }
  ASSERT_OK_AND_ASSIGN(FinishResult r,
                       store_->Finish(FinishOf("q", member_, items), Record(Outcome::Kind::kAck)));
  EXPECT_EQ(r.acked.size(), 7u);
  EXPECT_EQ(CountsOf("q").items(), 0);
  ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemStateByDedupKey("q", "k-1"));
  EXPECT_EQ(st.kind, ItemState::Kind::kDone);
  EXPECT_EQ(st.id, e.id);
  EXPECT_EQ(Effects().size(), 7u) << "the handler's writes committed once";
}

// --- the transaction's effects ------------------------------------------------------------

// Enqueue and Publish through the Tx commit exactly with the Finish: a run
// rolled back for a lost part leaves none of them, the run that commits
// leaves each once.
TEST_P(StoreFinishConformance, TxEnqueueAndPublishCommitExactlyWithTheFinish) {
  MakeQueue(*store_, "follow-ups", 4);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_)));
  ASSERT_OK(store_->ReleaseParts("q", member_.join.id, {member_.parts[0]}));
  FinishBody follow_up = [](Tx& tx,
                            absl::Span<const Item> owned) -> absl::StatusOr<std::vector<Outcome>> {
    std::vector<Outcome> out;
    for (const Item& i : owned) {
      NewItem next = Keyed(absl::StrCat("after-", i.id), absl::StrCat(i.id));
      absl::StatusOr<EnqueueResult> e = tx.Enqueue("follow-ups", next);
      if (!e.ok()) return e.status();
      EXPECT_EQ(e->part, PartForKey(*next.key, 4));
      if (absl::Status st = tx.Publish(
              OutboxEvent{"effects", std::string("k"), absl::StrCat(i.id), std::nullopt});
          !st.ok()) {
        return st;
      }
      out.push_back(Outcome{i.id, i.part});
    }
    return out;
  };
  ASSERT_OK_AND_ASSIGN(FinishResult r, store_->Finish(FinishOf("q", member_, items), follow_up));
  ASSERT_FALSE(r.fenced.empty());
  EXPECT_EQ(Sorted(Effects()), Sorted(r.acked));
  EXPECT_EQ(CountsOf("follow-ups").ready, static_cast<int64_t>(r.acked.size()));
  for (const OutboxEvent& e : harness_->Outbox()) {
    EXPECT_EQ(e.key, std::optional<std::string>("k"));
    EXPECT_FALSE(e.headers_json.has_value());
  }
  // A Tx::Enqueue deduplicates against live items as Store::Enqueue does.
  NewItem once = Payload("once");
  once.dedup_key = "d";
  ASSERT_OK_AND_ASSIGN(EnqueueResult live, store_->Enqueue("follow-ups", once));
  ASSERT_OK(
      store_->Finish(FinishOf("q", member_, {}),
                     [&](Tx& tx, absl::Span<const Item>) -> absl::StatusOr<std::vector<Outcome>> {
                       absl::StatusOr<EnqueueResult> e = tx.Enqueue("follow-ups", once);
                       if (!e.ok()) return e.status();
                       EXPECT_TRUE(e->duplicate);
                       EXPECT_EQ(e->id, live.id);
                       return std::vector<Outcome>{};
                     }));
  EXPECT_EQ(CountsOf("follow-ups").ready, static_cast<int64_t>(r.acked.size()) + 1);
}

// Rolling back to a savepoint undoes the enqueues and publishes made since,
// and keeps the savepoint; releasing keeps them.
TEST_P(StoreFinishConformance, RollbackToSavepointUndoesEnqueuesAndPublishes) {
  MakeQueue(*store_, "follow-ups", 1);
  FinishBody body = [](Tx& tx, absl::Span<const Item>) -> absl::StatusOr<std::vector<Outcome>> {
    auto step = [&](const std::string& what) -> absl::Status {
      if (auto e = tx.Enqueue("follow-ups", Payload(what)); !e.ok()) return e.status();
      return tx.Publish(OutboxEvent{"effects", std::nullopt, what, std::nullopt});
    };
    std::vector<absl::Status> st;
    st.push_back(step("kept 1"));
    st.push_back(tx.Savepoint("a"));
    st.push_back(step("undone 1"));
    st.push_back(tx.RollbackToSavepoint("a"));
    st.push_back(step("undone 2"));
    st.push_back(tx.RollbackToSavepoint("a"));  // the savepoint is still there
    st.push_back(step("kept 2"));
    st.push_back(tx.RenewSavepoint("a"));  // release (keeps "kept 2"), take again
    st.push_back(step("undone 3"));
    st.push_back(tx.Savepoint("b"));
    st.push_back(step("undone 4"));
    st.push_back(tx.RollbackToSavepoint("a"));  // undoes b's work too
    st.push_back(tx.ReleaseSavepoint("a"));
    for (const absl::Status& s : st) {
      if (!s.ok()) return s;
    }
    return std::vector<Outcome>{};
  };
  ASSERT_OK(store_->Finish(FinishOf("q", member_, {}), body));
  EXPECT_EQ(Published("effects"), (std::vector<std::string>{"kept 1", "kept 2"}));
  Member m = JoinWith(*store_, "follow-ups", kAllParts);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store_->Claim(ClaimAll("follow-ups", m)));
  std::vector<std::string> payloads;
  for (const Item& i : got) payloads.push_back(i.payload);
  EXPECT_EQ(payloads, (std::vector<std::string>{"kept 1", "kept 2"}));
}

// A statement that fails leaves the transaction unusable until a rollback to
// a savepoint taken before it: the Finish cannot commit otherwise. Refused
// input (a malformed topic, an unknown queue) is not a failed statement.
TEST_P(StoreFinishConformance, AFailedStatementAbortsTheTransactionUntilARollbackToASavepoint) {
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store_->Claim(ClaimAll("q", member_)));
  const OutboxEvent bad_headers{"effects", std::nullopt, "bad", std::string("{not json")};
  // Uncaught: nothing commits.
  absl::StatusOr<FinishResult> r = store_->Finish(
      FinishOf("q", member_, items),
      [&](Tx& tx, absl::Span<const Item> owned) -> absl::StatusOr<std::vector<Outcome>> {
        EXPECT_OK(tx.Publish(OutboxEvent{"effects", std::nullopt, "before", std::nullopt}));
        absl::Status st = tx.Publish(bad_headers);
        EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
        EXPECT_FALSE(tx.Publish(OutboxEvent{"effects", std::nullopt, "after", std::nullopt}).ok())
            << "the transaction is aborted";
        std::vector<Outcome> out;
        for (const Item& i : owned) out.push_back(Outcome{i.id, i.part});
        return out;
      });
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(Effects().empty());
  EXPECT_EQ(CountsOf("q").items(), 6);
  // Rolled back to a savepoint: the rest commits.
  r = store_->Finish(
      FinishOf("q", member_, items),
      [&](Tx& tx, absl::Span<const Item> owned) -> absl::StatusOr<std::vector<Outcome>> {
        EXPECT_OK(tx.Publish(OutboxEvent{"effects", std::nullopt, "1", std::nullopt}));
        EXPECT_OK(tx.Savepoint("item"));
        EXPECT_FALSE(tx.Publish(bad_headers).ok());
        EXPECT_FALSE(tx.RollbackToSavepoint("no_such_savepoint").ok());
        EXPECT_OK(tx.RollbackToSavepoint("item"));
        // Refused before any statement: the transaction goes on.
        EXPECT_EQ(tx.Publish(OutboxEvent{"bad topic", std::nullopt, "x", std::nullopt}).code(),
                  absl::StatusCode::kInvalidArgument);
        EXPECT_EQ(tx.Enqueue("nope", Payload("x")).status().code(), absl::StatusCode::kNotFound);
        EXPECT_OK(tx.Publish(OutboxEvent{"effects", std::nullopt, "2", std::nullopt}));
        std::vector<Outcome> out;
        for (const Item& i : owned) out.push_back(Outcome{i.id, i.part});
        return out;
      });
  ASSERT_OK(r);
  EXPECT_EQ(r->acked.size(), 6u);
  EXPECT_EQ(Effects(), (std::vector<int64_t>{1, 2}));
  // A savepoint that does not exist fails like any statement.
  r = store_->Finish(FinishOf("q", member_, {}),
                     [&](Tx& tx, absl::Span<const Item>) -> absl::StatusOr<std::vector<Outcome>> {
                       EXPECT_FALSE(tx.ReleaseSavepoint("never_taken").ok());
                       return std::vector<Outcome>{};
                     });
  EXPECT_FALSE(r.ok());
}

// --- item state, status, owners ----------------------------------------------------------

TEST_P(StoreConformance, ItemStateFollowsAnItemToItsEnd) {
  MakeQueue(*store_, "q", 1);
  MakeQueue(*store_, "other", 1);
  NewItem with_key = Payload("x");
  with_key.dedup_key = "d1";
  ASSERT_OK_AND_ASSIGN(EnqueueResult a, store_->Enqueue("q", with_key));
  ASSERT_OK_AND_ASSIGN(EnqueueResult b, store_->Enqueue("q", Payload("y")));
  ASSERT_OK_AND_ASSIGN(EnqueueResult o, store_->Enqueue("other", Payload("z")));
  ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("q", a.id));
  EXPECT_EQ(st.kind, ItemState::Kind::kPending);
  EXPECT_EQ(st.attempts, 0);
  ASSERT_OK_AND_ASSIGN(st, store_->GetItemState("q", o.id));
  EXPECT_EQ(st.kind, ItemState::Kind::kUnknown);  // it is another queue's
  ASSERT_OK_AND_ASSIGN(st, store_->GetItemState("q", o.id + 1000));
  EXPECT_EQ(st.kind, ItemState::Kind::kUnknown);  // never allocated
  EXPECT_EQ(store_->GetItemState("nope", a.id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetItemStateByDedupKey("nope", "d1").status().code(),
            absl::StatusCode::kNotFound);

  Member m = JoinWith(*store_, "q", {0});
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store_->Claim(ClaimAll("q", m)));
  ASSERT_EQ(got.size(), 2u);
  FinishBody with_result = [](Tx&, absl::Span<const Item> owned) {
    std::vector<Outcome> out;
    for (const Item& i : owned) {
      Outcome oc{i.id, i.part};
      if (i.dedup_key) oc.result = std::string("r\0sult", 6);
      out.push_back(oc);
    }
    return absl::StatusOr<std::vector<Outcome>>(out);
  };
  ASSERT_OK(store_->Finish(FinishOf("q", m, got), with_result));
  ASSERT_OK_AND_ASSIGN(st, store_->GetItemState("q", a.id));
  EXPECT_EQ(st.kind, ItemState::Kind::kDone);
  EXPECT_EQ(st.result, std::string("r\0sult", 6));
  ASSERT_OK_AND_ASSIGN(st, store_->GetItemStateByDedupKey("q", "d1"));
  EXPECT_EQ(st.kind, ItemState::Kind::kDone);
  EXPECT_EQ(st.id, a.id);
  EXPECT_EQ(st.result, std::string("r\0sult", 6));
  ASSERT_OK_AND_ASSIGN(st, store_->GetItemState("q", b.id));
  EXPECT_EQ(st.kind, ItemState::Kind::kDone);  // acked without a result
  EXPECT_FALSE(st.result.has_value());
  ASSERT_OK_AND_ASSIGN(st, store_->GetItemStateByDedupKey("q", "never"));
  EXPECT_EQ(st.kind, ItemState::Kind::kUnknown);
  ASSERT_OK_AND_ASSIGN(st, store_->GetItemStateByDedupKey("other", "d1"));
  EXPECT_EQ(st.kind, ItemState::Kind::kUnknown) << "another queue's key";

  // By key: the live item first, else the newest finished one.
  ASSERT_OK_AND_ASSIGN(EnqueueResult a2, store_->Enqueue("q", with_key));
  ASSERT_OK_AND_ASSIGN(got, store_->Claim(ClaimAll("q", m)));
  ASSERT_EQ(got.size(), 1u);
  ASSERT_OK_AND_ASSIGN(st, store_->GetItemStateByDedupKey("q", "d1"));
  EXPECT_EQ(st.kind, ItemState::Kind::kPending);
  EXPECT_EQ(st.id, a2.id);
  FinishBody kill = [](Tx&, absl::Span<const Item> owned) {
    Outcome oc{owned[0].id, owned[0].part, Outcome::Kind::kDead};
    oc.error = "gave up";
    return absl::StatusOr<std::vector<Outcome>>(std::vector<Outcome>{oc});
  };
  ASSERT_OK(store_->Finish(FinishOf("q", m, got), kill));
  ASSERT_OK_AND_ASSIGN(st, store_->GetItemStateByDedupKey("q", "d1"));
  EXPECT_EQ(st.kind, ItemState::Kind::kDead);
  EXPECT_EQ(st.id, a2.id);
  EXPECT_EQ(st.error, "gave up");
  EXPECT_EQ(st.attempts, 1);
}

// Owners says what Status says of the group (a free part included), and
// whether items are left, without counting them.
TEST_P(StoreConformance, OwnersSaysWhatStatusSaysOfTheGroup) {
  MakeQueue(*store_, "q", 4);
  auto other = harness_->Connect();
  Member a = JoinWith(*store_, "q", {0, 1});
  Member b = JoinWith(*other, "q", {2});
  auto agree = [&](bool items) {
    ASSERT_OK_AND_ASSIGN(QueueOwners o, store_->Owners("q"));
    ASSERT_OK_AND_ASSIGN(QueueStatus s, store_->Status("q"));
    ASSERT_EQ(o.sessions.size(), s.sessions.size());
    for (size_t i = 0; i < o.sessions.size(); ++i) {
      EXPECT_EQ(o.sessions[i].id, s.sessions[i].id);
      EXPECT_EQ(o.sessions[i].host, s.sessions[i].host);
      EXPECT_EQ(o.sessions[i].pid, s.sessions[i].pid);
      // Two reads, so up to the time between them apart.
      EXPECT_NEAR(absl::ToDoubleSeconds(o.sessions[i].expires_in),
                  absl::ToDoubleSeconds(s.sessions[i].expires_in), 5);
      EXPECT_TRUE(SessionLive(o.sessions[i].expires_in));
    }
    ASSERT_EQ(o.owners.size(), s.parts.size());
    for (size_t p = 0; p < o.owners.size(); ++p) EXPECT_EQ(o.owners[p], s.parts[p].owner) << p;
    EXPECT_EQ(o.has_items, items);
  };
  agree(false);
  NewItem later = Payload("x");
  later.delay = absl::Hours(1);  // not ready: still an item
  ASSERT_OK(store_->Enqueue("q", later));
  agree(true);
  ASSERT_OK_AND_ASSIGN(QueueOwners o, store_->Owners("q"));
  EXPECT_EQ(o.owners[0], a.join.id);
  EXPECT_EQ(o.owners[2], b.join.id);
  EXPECT_FALSE(o.owners[3].has_value());
  EXPECT_EQ(store_->Owners("nope").status().code(), absl::StatusCode::kNotFound);
  // Owners reads only: a session past its TTL is still listed, and no one is
  // expired by it.
  harness_->Advance(absl::Seconds(61));
  ASSERT_OK_AND_ASSIGN(o, store_->Owners("q"));
  EXPECT_EQ(o.sessions.size(), 2u);
  for (const auto& ses : o.sessions) EXPECT_FALSE(SessionLive(ses.expires_in)) << "past its TTL";
  ASSERT_OK_AND_ASSIGN(GroupView v, store_->Heartbeat("q", a.join.id, a.join.incarnation));
  EXPECT_EQ(v.expired, 1) << "b was still there to expire";
}

// A worker of several queues (`partq worker A B`, issue 52) has a session in
// each: a queue's status names the other queues of each session's process
// (same host and pid), live ones only, so an operator sees which process
// serves what.
TEST_P(StoreConformance, StatusNamesTheOtherQueuesOfASessionsProcess) {
  for (const char* q : {"a", "b", "c"}) MakeQueue(*store_, q, 2);
  auto join = [&](const std::string& queue, const std::string& host, int pid) {
    JoinRequest req;
    req.queue = queue;
    req.host = host;
    req.pid = pid;
    absl::StatusOr<JoinResult> j = store_->Join(req);
    EXPECT_TRUE(j.ok()) << j.status();
    return j.ok() ? j->id : SessionId{};
  };
  const SessionId a1 = join("a", "pod-1", 7);
  join("c", "pod-1", 7);
  join("b", "pod-1", 7);
  const SessionId a2 = join("a", "pod-2", 7);  // another host, the same pid
  join("b", "pod-1", 8);                       // the same host, another process
  ASSERT_OK_AND_ASSIGN(QueueStatus s, store_->Status("a"));
  ASSERT_EQ(s.sessions.size(), 2u);
  for (const SessionInfo& info : s.sessions) {
    if (info.id == a1) {
      EXPECT_EQ(info.also_serves, (std::vector<std::string>{"b", "c"}));
    } else {
      EXPECT_EQ(info.id, a2);
      EXPECT_TRUE(info.also_serves.empty());
    }
  }
  ASSERT_OK_AND_ASSIGN(QueueStatus b, store_->Status("b"));
  for (const SessionInfo& info : b.sessions) {
    const std::vector<std::string> want =
        info.pid == 7 ? std::vector<std::string>{"a", "c"} : std::vector<std::string>{};
    EXPECT_EQ(info.also_serves, want) << info.pid;
  }
}

TEST_P(StoreConformance, StatusZeroFillsPartsAndCounts) {
  MakeQueue(*store_, "q", 8);
  std::map<int, std::string> key_of = KeyPerPart(8);
  for (int i = 0; i < 3; ++i) ASSERT_OK(store_->Enqueue("q", Keyed(key_of[2])));
  NewItem later = Keyed(key_of[2]);
  later.delay = absl::Hours(1);
  ASSERT_OK(store_->Enqueue("q", later));
  for (int i = 0; i < 2; ++i) ASSERT_OK(store_->Enqueue("q", Keyed(key_of[5])));
  Member m = JoinWith(*store_, "q", {5, 6});
  ClaimRequest one = ClaimAll("q", m, 1);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store_->Claim(one));
  ASSERT_EQ(got.size(), 1u);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got2, store_->Claim(ClaimAll("q", m, 1, got)));
  ASSERT_EQ(got2.size(), 1u);
  FinishBody dead = [](Tx&, absl::Span<const Item> owned) {
    std::vector<Outcome> out;
    for (const Item& i : owned) out.push_back(Outcome{i.id, i.part, Outcome::Kind::kDead});
    return absl::StatusOr<std::vector<Outcome>>(out);
  };
  ASSERT_OK(store_->Finish(FinishOf("q", m, got2), dead));
  harness_->Advance(absl::Seconds(10));

  ASSERT_OK_AND_ASSIGN(QueueStatus s, store_->Status("q"));
  EXPECT_EQ(s.config.parts, 8);
  EXPECT_LT(absl::AbsDuration(s.db_now - harness_->Now()), absl::Seconds(60));
  ASSERT_EQ(s.sessions.size(), 1u);
  EXPECT_EQ(s.sessions[0].id, m.join.id);
  EXPECT_EQ(s.sessions[0].parts_owned, 2);
  EXPECT_EQ(s.sessions[0].host, "test");
  EXPECT_EQ(s.sessions[0].pid, 1);
  EXPECT_GT(s.sessions[0].expires_in, absl::ZeroDuration());
  EXPECT_LE(s.sessions[0].expires_in, absl::Seconds(50));
  EXPECT_GE(s.sessions[0].since_heartbeat, absl::Seconds(10));
  ASSERT_EQ(s.parts.size(), 8u);
  for (int p = 0; p < 8; ++p) {
    const PartStatus& ps = s.parts[p];
    EXPECT_EQ(ps.part, p);
    EXPECT_EQ(ps.owner.has_value(), p == 5 || p == 6) << p;
    if (p == 2) {
      EXPECT_EQ(ps.ready, 3);
      EXPECT_EQ(ps.delayed, 1);
      EXPECT_EQ(ps.in_flight + ps.dead, 0);
      EXPECT_GE(ps.oldest_ready_age, absl::Seconds(10));
    } else if (p == 5) {
      EXPECT_EQ(ps.owner, m.join.id);
      EXPECT_EQ(ps.epoch, m.parts[0].epoch);
      EXPECT_EQ(ps.ready, 0);
      EXPECT_EQ(ps.in_flight, 1);
      EXPECT_EQ(ps.dead, 1);
      EXPECT_EQ(ps.dead_last_minute, 1) << "dead-lettered 10 s ago";
      EXPECT_EQ(ps.oldest_ready_age, absl::ZeroDuration()) << "none is ready";
    } else {
      EXPECT_EQ(ps.ready + ps.delayed + ps.in_flight + ps.dead + ps.dead_last_minute, 0) << p;
      EXPECT_EQ(ps.oldest_ready_age, absl::ZeroDuration());
    }
  }
  EXPECT_EQ(store_->Status("nope").status().code(), absl::StatusCode::kNotFound);
  // A minute on, the dead item is still dead but no longer recent.
  harness_->Advance(absl::Seconds(61));
  ASSERT_OK_AND_ASSIGN(s, store_->Status("q"));
  EXPECT_EQ(s.parts[5].dead, 1);
  EXPECT_EQ(s.parts[5].dead_last_minute, 0);
}

// --- dead items -------------------------------------------------------------------------

// Dead items are listed newest first with their errors, and requeued as new
// items (attempts 0, same id, part, key, priority and payload) that a claim
// takes again; one whose dedup key a live item holds stays dead, and ids
// that are not dead items of the queue are ignored.
TEST_P(StoreConformance, DeadItemsAreListedNewestFirstAndRequeued) {
  MakeQueue(*store_, "plain", 2, absl::Seconds(60), false, /*max_attempts=*/1);
  MakeQueue(*store_, "other", 1);
  NewItem keyed = Keyed("k", "keyed");
  keyed.dedup_key = "d1";
  keyed.priority = 3;
  ASSERT_OK(store_->Enqueue("plain", keyed));
  ASSERT_OK(store_->Enqueue("plain", Keyed("k", "m0")));
  ASSERT_OK(store_->Enqueue("plain", Payload("plain")));
  ASSERT_OK_AND_ASSIGN(EnqueueResult elsewhere, store_->Enqueue("other", Payload("x")));
  Member m = JoinWith(*store_, "plain", kAllParts);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> claimed, store_->Claim(ClaimAll("plain", m)));
  ASSERT_EQ(claimed.size(), 3u);
  std::map<std::string, int64_t> ids;
  for (const Item& i : claimed) ids[i.payload] = i.id;
  // They die in two transactions: "plain" last.
  for (bool last : {false, true}) {
    std::vector<Item> batch;
    for (const Item& i : claimed) {
      if ((i.payload == "plain") == last) batch.push_back(i);
    }
    FinishRequest req = FinishOf("plain", m, batch);
    req.max_attempts = 1;
    ASSERT_OK(store_->Finish(req, [](Tx&, absl::Span<const Item> owned) {
      std::vector<Outcome> out;
      for (const Item& i : owned) {
        Outcome o{i.id, i.part, Outcome::Kind::kRetry};  // the last attempt: dead
        o.error = absl::StrCat("boom ", i.payload);
        out.push_back(o);
      }
      return absl::StatusOr<std::vector<Outcome>>(out);
    }));
    harness_->Advance(absl::Seconds(1));
  }
  EXPECT_EQ(CountsOf("plain").dead, 3);

  ASSERT_OK_AND_ASSIGN(std::vector<DeadItem> dead, store_->ListDead("plain", 2));
  ASSERT_EQ(dead.size(), 2u);  // the limit
  EXPECT_EQ(dead[0].id, ids["plain"]) << "newest first";
  ASSERT_OK_AND_ASSIGN(dead, store_->ListDead("plain", 10));
  ASSERT_EQ(dead.size(), 3u);
  EXPECT_GE(dead[0].failed_at, dead[2].failed_at);
  EXPECT_GT(dead[0].failed_at, dead[1].failed_at);
  std::map<int64_t, DeadItem> by_id;
  for (const DeadItem& d : dead) by_id[d.id] = d;
  EXPECT_EQ(by_id[ids["keyed"]].last_error, "boom keyed");
  EXPECT_EQ(by_id[ids["keyed"]].dedup_key, std::optional<std::string>("d1"));
  EXPECT_EQ(by_id[ids["keyed"]].attempts, 1);
  EXPECT_EQ(by_id[ids["keyed"]].part, PartForKey("k", 2));
  EXPECT_EQ(by_id[ids["m0"]].key, std::optional<std::string>("k"));
  EXPECT_EQ(by_id[ids["plain"]].payload_bytes, 5);  // "plain"
  EXPECT_EQ(by_id[ids["m0"]].payload_bytes, 2);     // "m0"
  EXPECT_EQ(by_id[ids["plain"]].payload_head, "plain") << "a short payload whole";
  EXPECT_LE(by_id[ids["m0"]].enqueued_at, by_id[ids["m0"]].failed_at);

  // A live item takes the dedup key: that dead item must stay dead.
  NewItem again = Payload("keyed again");
  again.dedup_key = "d1";
  ASSERT_OK(store_->Enqueue("plain", again));
  ASSERT_OK_AND_ASSIGN(
      Requeued r, store_->RequeueDead("plain", {ids["keyed"], ids["plain"], elsewhere.id, 999999}));
  EXPECT_EQ(r.requeued, 1);
  EXPECT_EQ(r.kept, 1);
  // By id, so that a caller can name the ids that were neither (elsewhere.id
  // and 999999: not dead items of this queue).
  EXPECT_EQ(r.requeued_ids, std::vector<int64_t>{ids["plain"]});
  EXPECT_EQ(r.kept_ids, std::vector<int64_t>{ids["keyed"]});
  ASSERT_OK_AND_ASSIGN(r, store_->RequeueDead("plain", {}));  // all that are left
  EXPECT_EQ(r.requeued, 1);                                   // m0
  EXPECT_EQ(r.kept, 1);                                       // keyed, still
  EXPECT_EQ(r.requeued_ids, std::vector<int64_t>{ids["m0"]});
  EXPECT_EQ(r.kept_ids, std::vector<int64_t>{ids["keyed"]});
  EXPECT_EQ(CountsOf("plain").dead, 1);
  for (const char* p : {"plain", "m0"}) {
    ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("plain", ids[p]));
    EXPECT_EQ(st.kind, ItemState::Kind::kPending) << p;
    EXPECT_EQ(st.attempts, 0) << p;
  }
  EXPECT_EQ(CountsOf("other").ready, 1) << "another queue's item is not a dead item here";
  // A claim takes them again, as new items, from the head.
  ClaimRequest req = ClaimAll("plain", m);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> back, store_->Claim(req));
  std::map<std::string, Item> back_by;
  for (const Item& i : back) back_by[i.payload] = i;
  ASSERT_EQ(back_by.count("plain"), 1u);
  ASSERT_EQ(back_by.count("m0"), 1u);
  EXPECT_EQ(back_by["plain"].id, ids["plain"]);
  EXPECT_EQ(back_by["m0"].key, std::optional<std::string>("k"));
  EXPECT_EQ(back_by["m0"].attempts, 1);
  EXPECT_FALSE(back_by["m0"].suspect);
  EXPECT_EQ(store_->ListDead("nope", 5).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->RequeueDead("nope", {}).status().code(), absl::StatusCode::kNotFound);
}

// --- cancel ---------------------------------------------------------------------------

TEST_P(StoreConformance, CancelRemovesReadyAndDelayedItemsAndReportsTheRest) {
  MakeQueue(*store_, "q", 1);
  MakeQueue(*store_, "other", 1);
  auto enqueue = [&](const char* payload, const char* dedup, absl::Duration delay) {
    NewItem item = Payload(payload);
    if (dedup != nullptr) item.dedup_key = dedup;
    item.delay = delay;
    absl::StatusOr<EnqueueResult> r = store_->Enqueue("q", item);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->id : 0;
  };
  const int64_t acked = enqueue("acked", "da", absl::ZeroDuration());
  const int64_t dies = enqueue("dies", nullptr, absl::ZeroDuration());
  const int64_t flies = enqueue("flies", nullptr, absl::ZeroDuration());
  const int64_t ready = enqueue("ready", nullptr, absl::ZeroDuration());
  const int64_t later = enqueue("later", "de", absl::Hours(1));
  ASSERT_OK_AND_ASSIGN(EnqueueResult elsewhere, store_->Enqueue("other", Payload("o")));
  Member m = JoinWith(*store_, "q", kAllParts);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> claimed, store_->Claim(ClaimAll("q", m, 3)));
  ASSERT_EQ(Ids(claimed), (std::vector<int64_t>{acked, dies, flies}));
  FinishBody ack_and_kill = [&](Tx&, absl::Span<const Item> items) {
    std::vector<Outcome> out;
    for (const Item& i : items) {
      Outcome o;
      o.id = i.id;
      o.part = i.part;
      o.kind = i.id == dies ? Outcome::Kind::kDead : Outcome::Kind::kAck;
      out.push_back(o);
    }
    return absl::StatusOr<std::vector<Outcome>>(out);
  };
  ASSERT_OK(store_->Finish(FinishOf("q", m, {claimed[0], claimed[1]}), ack_and_kill));

  const int64_t never = elsewhere.id + 1000;
  ASSERT_OK_AND_ASSIGN(
      std::vector<CancelOutcome> got,
      store_->CancelItems("q", {ready, later, flies, acked, dies, elsewhere.id, never, ready}));
  using K = CancelOutcome::Kind;
  std::vector<std::pair<int64_t, K>> outcomes;
  for (const CancelOutcome& o : got) outcomes.emplace_back(o.id, o.kind);
  EXPECT_EQ(outcomes, (std::vector<std::pair<int64_t, K>>{{ready, K::kCancelled},
                                                          {later, K::kCancelled},
                                                          {flies, K::kInFlight},
                                                          {acked, K::kDone},
                                                          {dies, K::kDead},
                                                          {elsewhere.id, K::kUnknown},
                                                          {never, K::kUnknown}}));
  // Gone from the queue, recorded for good; the in-flight one is untouched.
  Counts c = CountsOf("q");
  EXPECT_EQ(c.ready + c.delayed, 0);
  EXPECT_EQ(c.in_flight, 1);
  EXPECT_EQ(c.dead, 1);
  EXPECT_EQ(CountsOf("other").ready, 1);
  for (int64_t id : {ready, later}) {
    ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("q", id));
    EXPECT_EQ(st.kind, ItemState::Kind::kCancelled) << id;
  }
  ASSERT_OK_AND_ASSIGN(ItemState by_key, store_->GetItemStateByDedupKey("q", "de"));
  EXPECT_EQ(by_key.kind, ItemState::Kind::kCancelled);
  EXPECT_EQ(by_key.id, later);
  ASSERT_OK_AND_ASSIGN(ItemState from_other, store_->GetItemState("other", ready));
  EXPECT_EQ(from_other.kind, ItemState::Kind::kUnknown);
  ASSERT_OK_AND_ASSIGN(got, store_->CancelItems("q", {ready}));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].kind, K::kAlreadyCancelled);

  // No claim returns a cancelled item, and the in-flight one's ack wins.
  ASSERT_OK_AND_ASSIGN(std::vector<Item> more, store_->Claim(ClaimAll("q", m, 10, {claimed[2]})));
  EXPECT_TRUE(more.empty());
  ASSERT_OK_AND_ASSIGN(FinishResult fin, store_->Finish(FinishOf("q", m, {claimed[2]}), AckAll()));
  EXPECT_EQ(fin.acked, std::vector<int64_t>{flies});
  EXPECT_TRUE(fin.fenced.empty());
  ASSERT_OK_AND_ASSIGN(got, store_->CancelItems("q", {flies}));
  EXPECT_EQ(got[0].kind, K::kDone);

  // By dedup key: the live item, else what became of the key's last one.
  ASSERT_OK_AND_ASSIGN(CancelOutcome k, store_->CancelByDedupKey("q", "de"));
  EXPECT_EQ(k.id, later);
  EXPECT_EQ(k.kind, K::kAlreadyCancelled);
  ASSERT_OK_AND_ASSIGN(k, store_->CancelByDedupKey("q", "da"));
  EXPECT_EQ(k.id, acked);
  EXPECT_EQ(k.kind, K::kDone);
  ASSERT_OK_AND_ASSIGN(k, store_->CancelByDedupKey("q", "nobody"));
  EXPECT_EQ(k.id, 0);
  EXPECT_EQ(k.kind, K::kUnknown);
  // The key is free again: a new item takes it, and is cancelled by it.
  NewItem again = Payload("again");
  again.dedup_key = "de";
  ASSERT_OK_AND_ASSIGN(EnqueueResult fresh, store_->Enqueue("q", again));
  EXPECT_FALSE(fresh.duplicate);
  ASSERT_OK_AND_ASSIGN(k, store_->CancelByDedupKey("q", "de"));
  EXPECT_EQ(k.id, fresh.id);
  EXPECT_EQ(k.kind, K::kCancelled);
  EXPECT_EQ(CountsOf("q").items(), 0);
}

TEST_P(StoreConformance, CancelRefusesBadInputAndChangesNothing) {
  MakeQueue(*store_, "q", 2);
  ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Payload("x")));
  EXPECT_EQ(store_->CancelItems("nope", {r.id}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->CancelItems("bad name", {r.id}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->CancelItems("q", {r.id, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->CancelItems("q", {-5}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->CancelByDedupKey("nope", "k").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->CancelByDedupKey("q", "\xff").status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(std::vector<CancelOutcome> none, store_->CancelItems("q", {}));
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(CountsOf("q").ready, 1);
}

TEST_P(StoreConformance, ADeadOwnersClaimCanBeCancelledAndTheNextOwnerTakesOverTheRest) {
  MakeQueue(*store_, "q", 1, absl::Seconds(60));
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Payload(absl::StrCat(i))));
    ids.push_back(r.id);
  }
  Member a = JoinWith(*store_, "q", {0});
  ASSERT_OK_AND_ASSIGN(std::vector<Item> a_items, store_->Claim(ClaimAll("q", a, 2)));
  ASSERT_EQ(Ids(a_items), (std::vector<int64_t>{ids[0], ids[1]}));
  // While a owns the part, what it claimed is in flight.
  ASSERT_OK_AND_ASSIGN(std::vector<CancelOutcome> got, store_->CancelItems("q", {ids[0]}));
  EXPECT_EQ(got[0].kind, CancelOutcome::Kind::kInFlight);
  // a dies: b's heartbeat deletes it, and the part has no owner; a's claim
  // record names items nobody runs, which may be cancelled.
  auto other = harness_->Connect();
  Member b = JoinWith(*other, "q", {});
  harness_->Advance(absl::Seconds(61));
  ASSERT_OK_AND_ASSIGN(GroupView v, other->Heartbeat("q", b.join.id, b.join.incarnation));
  ASSERT_EQ(v.expired, 1);
  ASSERT_OK_AND_ASSIGN(got, store_->CancelItems("q", {ids[0]}));
  EXPECT_EQ(got[0].kind, CancelOutcome::Kind::kCancelled);
  // b takes over a record naming an item that is gone: the other one is
  // abandoned (one attempt counted) and comes back as a suspect.
  ASSERT_OK_AND_ASSIGN(b.parts, other->AcquireParts("q", b.join.id, {0}));
  ASSERT_EQ(b.parts.size(), 1u);
  ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("q", ids[1]));
  EXPECT_EQ(st.attempts, 1);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> plain, other->Claim(ClaimAll("q", b, 10)));
  ASSERT_EQ(plain.size(), 2u);
  std::set<int64_t> got_ids;
  for (const Item& i : plain) got_ids.insert(i.id);
  EXPECT_EQ(got_ids, (std::set<int64_t>{ids[1], ids[2]}));
  ASSERT_OK_AND_ASSIGN(FinishResult fin, other->Finish(FinishOf("q", b, plain), AckAll()));
  EXPECT_EQ(fin.acked.size(), 2u);
  EXPECT_TRUE(fin.fenced.empty());
  // a's late ack is fenced.
  ASSERT_OK_AND_ASSIGN(FinishResult late, store_->Finish(FinishOf("q", a, a_items), AckAll()));
  EXPECT_TRUE(late.acked.empty());
  ASSERT_OK_AND_ASSIGN(st, store_->GetItemState("q", ids[0]));
  EXPECT_EQ(st.kind, ItemState::Kind::kCancelled);
  EXPECT_EQ(CountsOf("q").items(), 0);
}

TEST_P(StoreConformance, DeleteQueueDeletesItsCancelRecords) {
  MakeQueue(*store_, "q", 1);
  ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue("q", Payload("x")));
  ASSERT_OK(store_->CancelItems("q", {r.id}));
  // A cancelled item is no work: the queue is empty.
  ASSERT_OK(store_->DeleteQueue("q", QueueContents::kRefuse));
  MakeQueue(*store_, "q", 1);
  ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("q", r.id));
  EXPECT_NE(st.kind, ItemState::Kind::kCancelled);
}

// Retention: what finished work leaves behind (results, cancel records,
// dead items when asked) goes once it is older than the age, in its own queue
// only; live items stay whatever their age.
TEST_P(StoreConformance, PruneDeletesOnlyFinishedRecordsOlderThanTheAge) {
  MakeQueue(*store_, "q", 1, absl::Seconds(60), false, /*max_attempts=*/1);
  MakeQueue(*store_, "other", 1, absl::Seconds(60), false, /*max_attempts=*/1);
  std::map<std::string, int64_t> ids;
  for (const char* queue : {"q", "other"}) {
    for (const char* d : {"acked", "dies", "cancelled", "waits"}) {
      NewItem item = Payload(d);
      item.dedup_key = d;
      if (std::string(d) == "cancelled" || std::string(d) == "waits") {
        item.delay = absl::Hours(1);
      }
      ASSERT_OK_AND_ASSIGN(EnqueueResult r, store_->Enqueue(queue, item));
      ids[absl::StrCat(queue, ".", d)] = r.id;
    }
    ASSERT_OK(store_->CancelItems(queue, {ids[absl::StrCat(queue, ".cancelled")]}));
    Member m = JoinWith(*store_, queue, kAllParts);
    ASSERT_OK_AND_ASSIGN(std::vector<Item> claimed, store_->Claim(ClaimAll(queue, m)));
    ASSERT_EQ(claimed.size(), 2u);
    FinishRequest req = FinishOf(queue, m, claimed);
    req.max_attempts = 1;
    ASSERT_OK(store_->Finish(req, [](Tx&, absl::Span<const Item> owned) {
      std::vector<Outcome> out;
      for (const Item& i : owned) {
        const bool dies = i.payload == "dies";
        Outcome o{i.id, i.part, dies ? Outcome::Kind::kDead : Outcome::Kind::kAck};
        if (dies) o.error = "boom";
        out.push_back(o);
      }
      return absl::StatusOr<std::vector<Outcome>>(out);
    }));
  }
  auto kind_by_key = [&](const char* queue, const char* key) {
    absl::StatusOr<ItemState> st = store_->GetItemStateByDedupKey(queue, key);
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? st->kind : ItemState::Kind::kUnknown;
  };

  // Nothing is an hour old yet.
  ASSERT_OK_AND_ASSIGN(Pruned p, store_->Prune("q", absl::Hours(1), /*dead=*/true));
  EXPECT_EQ(p.results + p.cancelled + p.groups + p.dead, 0);
  EXPECT_EQ(kind_by_key("q", "acked"), ItemState::Kind::kDone);

  // Age 0: everything finished by now, but dead items only when asked.
  ASSERT_OK_AND_ASSIGN(p, store_->Prune("q", absl::ZeroDuration(), /*dead=*/false));
  EXPECT_EQ(p.results, 1);
  EXPECT_EQ(p.cancelled, 1);
  EXPECT_EQ(p.dead, 0);
  EXPECT_EQ(kind_by_key("q", "acked"), ItemState::Kind::kUnknown) << "its record is gone";
  EXPECT_EQ(kind_by_key("q", "cancelled"), ItemState::Kind::kUnknown);
  EXPECT_EQ(kind_by_key("q", "dies"), ItemState::Kind::kDead);
  EXPECT_EQ(kind_by_key("q", "waits"), ItemState::Kind::kPending) << "live items stay";
  ASSERT_OK_AND_ASSIGN(ItemState by_id, store_->GetItemState("q", ids["q.acked"]));
  EXPECT_EQ(by_id.kind, ItemState::Kind::kDone) << "an id with no row left is done";
  ASSERT_OK_AND_ASSIGN(p, store_->Prune("q", absl::ZeroDuration(), /*dead=*/true));
  EXPECT_EQ(p.results + p.cancelled, 0);
  EXPECT_EQ(p.dead, 1);
  EXPECT_EQ(CountsOf("q").dead, 0);
  EXPECT_EQ(CountsOf("q").items(), 1);

  // The other queue kept all of its records.
  EXPECT_EQ(kind_by_key("other", "acked"), ItemState::Kind::kDone);
  EXPECT_EQ(kind_by_key("other", "cancelled"), ItemState::Kind::kCancelled);
  EXPECT_EQ(CountsOf("other").dead, 1);

  EXPECT_EQ(store_->Prune("nope", absl::ZeroDuration(), false).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Prune("bad name", absl::ZeroDuration(), false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Prune("q", absl::Seconds(-1), false).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace partq::conformance

namespace partq::conformance {
namespace {

ScheduleSpec Hourly(const std::string& name, const std::string& queue) {
  ScheduleSpec s;
  s.name = name;
  s.queue = queue;
  s.every = absl::Hours(1);
  s.payload = "tick";
  s.key = "k";
  s.priority = 3;
  return s;
}

}  // namespace

TEST_P(StoreConformance, SchedulesAreAddedListedAndDeletedAndBadOnesWriteNothing) {
  MakeQueue(*store_, "q", 2);
  MakeQueue(*store_, "r", 1);
  const absl::Time before = harness_->Now();
  ASSERT_OK(store_->AddSchedule(Hourly("hourly", "q")));
  ScheduleSpec cron = Hourly("berlin", "r");
  cron.every = absl::ZeroDuration();
  cron.cron = "30 2 * * *";
  cron.time_zone = "Europe/Berlin";
  ASSERT_OK(store_->AddSchedule(cron));

  ASSERT_OK_AND_ASSIGN(std::vector<Schedule> all, store_->ListSchedules(""));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].spec.name, "berlin");  // by name
  EXPECT_EQ(all[0].spec.cron, "30 2 * * *");
  EXPECT_EQ(all[0].spec.time_zone, "Europe/Berlin");
  const Schedule& h = all[1];
  EXPECT_EQ(h.spec.name, "hourly");
  EXPECT_EQ(h.spec.queue, "q");
  EXPECT_EQ(h.spec.every, absl::Hours(1));
  EXPECT_EQ(h.spec.payload, "tick");
  EXPECT_EQ(h.spec.key, "k");
  EXPECT_EQ(h.spec.priority, 3);
  EXPECT_EQ(h.fired, 0);
  EXPECT_EQ(h.missed, 0);
  EXPECT_FALSE(h.last_tick.has_value());
  ASSERT_TRUE(h.next_tick.has_value());
  // The first tick: the next whole hour after the add.
  EXPECT_GT(*h.next_tick, before);
  EXPECT_LE(*h.next_tick, harness_->Now() + absl::Hours(1));
  EXPECT_EQ(absl::ToUnixSeconds(*h.next_tick) % 3600, 0);
  ASSERT_OK_AND_ASSIGN(std::vector<Schedule> of_r, store_->ListSchedules("r"));
  ASSERT_EQ(of_r.size(), 1u);
  EXPECT_EQ(of_r[0].spec.name, "berlin");
  EXPECT_EQ(store_->ListSchedules("nosuch").status().code(), absl::StatusCode::kNotFound);

  // Bad input: a clear error, and nothing written.
  auto refused = [&](ScheduleSpec s, absl::StatusCode code, absl::string_view says) {
    absl::Status st = store_->AddSchedule(s);
    EXPECT_EQ(st.code(), code) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), says)) << st;
  };
  refused(Hourly("hourly", "r"), absl::StatusCode::kAlreadyExists,
          "schedule \"hourly\" already exists (on queue \"q\")");
  refused(Hourly("x", "nosuch"), absl::StatusCode::kNotFound, "unknown queue \"nosuch\"");
  refused(Hourly("bad name", "q"), absl::StatusCode::kInvalidArgument, "invalid schedule name");
  ScheduleSpec s = Hourly("x", "q");
  s.every = absl::ZeroDuration();
  refused(s, absl::StatusCode::kInvalidArgument, "needs --every DURATION or --cron");
  s.every = absl::Hours(1);
  s.cron = "* * * * *";
  refused(s, absl::StatusCode::kInvalidArgument, "either --every or --cron, not both");
  s.every = absl::ZeroDuration();
  s.cron = "0 */5 * * * *";
  refused(s, absl::StatusCode::kInvalidArgument, "has 6 fields");
  s.cron = "0 0 30 2 *";
  refused(s, absl::StatusCode::kInvalidArgument, "never fires");
  s.cron = "* * * * *";
  s.time_zone = "Europe/Atlantis";
  refused(s, absl::StatusCode::kInvalidArgument, "unknown time zone \"Europe/Atlantis\"");
  s = Hourly("x", "q");
  s.time_zone = "UTC";
  refused(s, absl::StatusCode::kInvalidArgument, "--tz applies to --cron only");
  s = Hourly("x", "q");
  s.priority = 40000;
  refused(s, absl::StatusCode::kInvalidArgument, "priority 40000 is out of range");
  ASSERT_OK_AND_ASSIGN(all, store_->ListSchedules(""));
  EXPECT_EQ(all.size(), 2u);

  ASSERT_OK(store_->DeleteSchedule("berlin"));
  EXPECT_EQ(store_->DeleteSchedule("berlin").code(), absl::StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(all, store_->ListSchedules(""));
  ASSERT_EQ(all.size(), 1u);
  // A queue's delete takes its schedules with it, and counts them.
  ASSERT_OK_AND_ASSIGN(DeletedQueue gone, store_->DeleteQueue("q", QueueContents::kRefuse));
  EXPECT_EQ(gone.schedules, 1);
  ASSERT_OK_AND_ASSIGN(all, store_->ListSchedules(""));
  EXPECT_TRUE(all.empty());
}

TEST_P(StoreConformance, AScheduleFiresOncePerTickAndOnlyTheLatestAfterMissedOnes) {
  MakeQueue(*store_, "q", 2);
  ScheduleSpec hourly = Hourly("hourly", "q");
  hourly.catch_up = absl::ZeroDuration();  // no tick fires late: only the latest
  ASSERT_OK(store_->AddSchedule(hourly));
  ASSERT_OK_AND_ASSIGN(FiredSchedules f, store_->FireSchedules("q"));
  EXPECT_TRUE(f.fired.empty()) << "not due yet";
  ASSERT_TRUE(f.next_due.has_value());
  EXPECT_GT(*f.next_due, f.db_now);

  // Due: one item, its dedup key naming the tick; a second call fires nothing.
  harness_->Advance(*f.next_due - f.db_now + absl::Seconds(1));
  ASSERT_OK_AND_ASSIGN(f, store_->FireSchedules("q"));
  ASSERT_EQ(f.fired.size(), 1u);
  const ScheduleFiring first = f.fired[0];
  EXPECT_EQ(first.name, "hourly");
  EXPECT_EQ(first.missed, 0);
  EXPECT_FALSE(first.item.duplicate);
  ASSERT_TRUE(f.next_due.has_value());
  // (PgStore's harness moves stored times by fractions of a second; ticks
  // are whole seconds.)
  EXPECT_LT(absl::AbsDuration(*f.next_due - (first.tick + absl::Hours(1))), absl::Seconds(1));
  ASSERT_OK_AND_ASSIGN(ItemState st,
                       store_->GetItemStateByDedupKey("q", ScheduleDedupKey("hourly", first.tick)));
  EXPECT_EQ(st.kind, ItemState::Kind::kPending);
  EXPECT_EQ(st.id, first.item.id);
  ASSERT_OK_AND_ASSIGN(f, store_->FireSchedules("q"));
  EXPECT_TRUE(f.fired.empty());
  EXPECT_EQ(CountsOf("q").items(), 1);

  // Three more ticks pass with no worker: one firing, two counted missed.
  // (Not counted as items: PgStore's harness moves the stored ticks back
  // rather than the clock on, so this tick's time, and dedup key, is the
  // first one's again, and the dedup key holds it to that item.)
  harness_->Advance(absl::Hours(3));
  ASSERT_OK_AND_ASSIGN(f, store_->FireSchedules("q"));
  ASSERT_EQ(f.fired.size(), 1u);
  EXPECT_EQ(f.fired[0].missed, 2);
  EXPECT_LE(CountsOf("q").items(), 2);
  ASSERT_OK_AND_ASSIGN(f, store_->FireSchedules("q"));
  EXPECT_TRUE(f.fired.empty()) << "no burst: the missed ticks do not fire later";
  ASSERT_OK_AND_ASSIGN(std::vector<Schedule> all, store_->ListSchedules("q"));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].fired, 2);
  EXPECT_EQ(all[0].missed, 2);
  EXPECT_EQ(all[0].next_tick, f.next_due);
  EXPECT_GT(*all[0].next_tick, f.db_now);

  EXPECT_EQ(store_->FireSchedules("nosuch").status().code(), absl::StatusCode::kNotFound);
}

// Ticks that came due while nobody fired them (a firer that died) fire late,
// each once, oldest first, as far back as the schedule's catch-up window;
// older ones are missed.
TEST_P(StoreConformance, AScheduleCatchesUpTheTicksInsideItsWindowOnce) {
  MakeQueue(*store_, "q", 2);
  ScheduleSpec hourly = Hourly("hourly", "q");
  hourly.catch_up = absl::Hours(2);
  ASSERT_OK(store_->AddSchedule(hourly));
  ASSERT_OK_AND_ASSIGN(FiredSchedules f, store_->FireSchedules("q"));
  harness_->Advance(*f.next_due - f.db_now + absl::Seconds(1));
  ASSERT_OK_AND_ASSIGN(f, store_->FireSchedules("q"));
  ASSERT_EQ(f.fired.size(), 1u);
  // Three more ticks (+1 h, +2 h, +3 h) pass: +1 h is a second older than the
  // window, the other two fire now, late, oldest first.
  harness_->Advance(absl::Hours(3));
  ASSERT_OK_AND_ASSIGN(f, store_->FireSchedules("q"));
  ASSERT_EQ(f.fired.size(), 2u);
  EXPECT_EQ(f.fired[0].missed, 1);
  EXPECT_EQ(f.fired[1].missed, 0);
  // (PgStore's harness moves stored times back, not the clock on: ticks are
  // compared with the clock of this firing.)
  EXPECT_EQ(f.fired[1].tick - f.fired[0].tick, absl::Hours(1));
  // (Real time passes between the advance and this firing on PgStore: under
  // a loaded suite more than a second of it, once 1.06 s.)
  EXPECT_LT(absl::AbsDuration(f.fired[1].tick - (f.db_now - absl::Seconds(1))), absl::Seconds(10));
  EXPECT_GE(f.fired[0].late, absl::Hours(1));
  ASSERT_OK_AND_ASSIGN(f, store_->FireSchedules("q"));
  EXPECT_TRUE(f.fired.empty()) << "each once";
  ASSERT_OK_AND_ASSIGN(std::vector<Schedule> all, store_->ListSchedules("q"));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].fired, 3);
  EXPECT_EQ(all[0].missed, 1);
  EXPECT_EQ(all[0].spec.catch_up, absl::Hours(2));
  EXPECT_GT(*all[0].next_tick, f.db_now);
}

// Dead items are deleted for good, some by id or all of them, in their own
// queue only; a list shows the head of a long payload, bytes as they are.
TEST_P(StoreConformance, DeadItemsAreDeletedOneOrAll) {
  MakeQueue(*store_, "q", 1, absl::Seconds(60), false, /*max_attempts=*/1);
  MakeQueue(*store_, "other", 1, absl::Seconds(60), false, /*max_attempts=*/1);
  const std::string big = std::string("\x00\xff<script>", 10) + std::string(1000, 'x');
  for (const std::string& p : {std::string("a"), std::string("b"), big}) {
    ASSERT_OK(store_->Enqueue("q", Payload(p)));
  }
  ASSERT_OK(store_->Enqueue("other", Payload("o")));
  for (const char* queue : {"q", "other"}) {
    Member m = JoinWith(*store_, queue, kAllParts);
    ASSERT_OK_AND_ASSIGN(std::vector<Item> claimed, store_->Claim(ClaimAll(queue, m)));
    FinishRequest req = FinishOf(queue, m, claimed);
    req.max_attempts = 1;
    ASSERT_OK(store_->Finish(req, [](Tx&, absl::Span<const Item> owned) {
      std::vector<Outcome> out;
      for (const Item& i : owned) {
        Outcome o{i.id, i.part, Outcome::Kind::kDead};
        o.error = "boom";
        out.push_back(o);
      }
      return absl::StatusOr<std::vector<Outcome>>(out);
    }));
  }
  ASSERT_OK_AND_ASSIGN(std::vector<DeadItem> dead, store_->ListDead("q", 10));
  ASSERT_EQ(dead.size(), 3u);
  std::map<std::string, int64_t> ids;
  for (const DeadItem& d : dead) {
    if (d.payload_bytes == static_cast<int64_t>(big.size())) {
      EXPECT_EQ(d.payload_head, big.substr(0, kDeadPayloadHead));
      ids["big"] = d.id;
    } else {
      ids[d.payload_head] = d.id;
    }
  }
  ASSERT_EQ(ids.size(), 3u);
  ASSERT_OK_AND_ASSIGN(std::vector<DeadItem> other, store_->ListDead("other", 10));
  ASSERT_EQ(other.size(), 1u);

  ASSERT_OK_AND_ASSIGN(DeadDeleted n, store_->DeleteDead("q", {ids["a"], other[0].id, 999999}));
  EXPECT_EQ(n.deleted, 1) << "another queue's dead item and an unknown id are ignored";
  EXPECT_EQ(n.missing_ids, (std::vector<int64_t>{std::min(other[0].id, int64_t{999999}),
                                                 std::max(other[0].id, int64_t{999999})}))
      << "and named";
  ASSERT_OK_AND_ASSIGN(dead, store_->ListDead("q", 10));
  EXPECT_EQ(dead.size(), 2u);
  ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("q", ids["a"]));
  EXPECT_NE(st.kind, ItemState::Kind::kDead);
  ASSERT_OK_AND_ASSIGN(n, store_->DeleteDead("q", {}));  // all that are left
  EXPECT_EQ(n.deleted, 2);
  EXPECT_TRUE(n.missing_ids.empty());
  EXPECT_EQ(CountsOf("q").dead, 0);
  EXPECT_EQ(CountsOf("other").dead, 1) << "another queue keeps its dead items";
  ASSERT_OK_AND_ASSIGN(n, store_->DeleteDead("q", {}));
  EXPECT_EQ(n.deleted, 0);
  EXPECT_EQ(store_->DeleteDead("nope", {}).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace partq::conformance
