// Roles per queue (migration 29; docs/guide/operations-and-roles.md, "Roles per queue"): real
// login roles, granted with the `partq grant` binary and nothing else, try
// what issue 48 found a producer could do through the SQL API's table
// grants, and each attempt is refused with 42501 and leaves nothing behind.
// The queue's payload limit binds every caller of the SQL API.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "partitioner/part.h"
#include "pg/migrations.h"
#include "pg/pg_store.h"
#include "store/store.h"
#include "tests/store/store_test_util.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using store_testing::AckWithResults;
using store_testing::ClaimAll;
using store_testing::FinishOf;
using store_testing::JoinWith;
using store_testing::kAllParts;
using store_testing::Member;
using store_testing::OutcomesOf;
using store_testing::Payload;
using testing::Partq;
using testing::PartqResult;
using testing::TestSchema;

class RolesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = schema_.NewStore();
    for (const char* q : {"a", "b"}) {
      QueueConfig c;
      c.name = q;
      c.parts = 2;
      ASSERT_TRUE(store_->CreateQueue(c).ok());
    }
  }
  void TearDown() override {
    for (const std::string& role : roles_) {
      schema_.Q(absl::StrCat("DROP OWNED BY ", role));
      schema_.Q(absl::StrCat("DROP ROLE ", role));
    }
  }

  // A store connected as `role`.
  absl::StatusOr<std::unique_ptr<Store>> ConnectAs(const std::string& role) {
    PgOptions options = schema_.options();
    options.dsn = absl::StrCat(options.dsn, " user=", role);
    return ConnectPg(options);
  }
  // A new login role with no privileges at all; dropped after the test.
  std::string NewRole(const std::string& what) {
    const std::string role = absl::StrCat("partq_", what, "_", absl::Uniform<uint32_t>(gen_));
    schema_.Q(absl::StrCat("CREATE ROLE ", role, " LOGIN"));
    roles_.push_back(role);
    return role;
  }
  // A role granted worker on queue a that may also create in the schema,
  // which no role but the owner should (partq grant refuses afterwards).
  std::string WorkerThatMayCreate() {
    const std::string w = NewRole("worker");
    PartqOk({"grant", "worker", w, "--queue", "a"});
    schema_.Q(absl::StrCat("GRANT CREATE ON SCHEMA {schema} TO ", w));
    return w;
  }
  // `partq ARGS` with this test's connection; expects exit 0.
  std::string PartqOk(std::vector<std::string> args) {
    args.insert(args.end(), {"--dsn", schema_.dsn(), "--schema", schema_.name()});
    PartqResult r = Partq(args);
    EXPECT_EQ(r.code, 0) << absl::StrJoin(args, " ") << ": " << r.err;
    return r.out;
  }
  // `partq ARGS` connected as `role`, whatever its exit status.
  PartqResult PartqAs(const std::string& role, std::vector<std::string> args) {
    args.insert(args.end(),
                {"--dsn", absl::StrCat(schema_.dsn(), " user=", role), "--schema", schema_.name()});
    return Partq(args);
  }
  // A connection as `role`.
  std::unique_ptr<pqxx::connection> As(const std::string& role) {
    return std::make_unique<pqxx::connection>(absl::StrCat(schema_.dsn(), " user=", role));
  }
  // `sql` ({schema} filled) run as `role` in a transaction of its own: ""
  // when it worked (the transaction committed), else the SQLSTATE.
  std::string Try(pqxx::connection& c, const std::string& sql) {
    try {
      pqxx::work w(c);
      w.exec(WithSchema(sql, schema_.name()));
      w.commit();
      return "";
    } catch (const pqxx::insufficient_privilege&) {
      return "42501";  // libpqxx 6.4 leaves sqlstate() empty in this subclass
    } catch (const pqxx::sql_error& e) {
      return e.sqlstate();
    }
  }
  // `partq migrate --schema schema EXTRA...` with this test's connection.
  void MigrateSchema(const std::string& schema, std::vector<std::string> extra) {
    std::vector<std::string> args = {"migrate", "--dsn", schema_.dsn(), "--schema", schema};
    args.insert(args.end(), extra.begin(), extra.end());
    PartqResult r = Partq(args);
    EXPECT_EQ(r.code, 0) << r.err;
  }
  int64_t Count(const std::string& table_and_where) {
    return schema_.QInt(absl::StrCat("SELECT count(*) FROM {schema}.", table_and_where));
  }

  TestSchema schema_;
  std::unique_ptr<Store> store_;
  std::vector<std::string> roles_;
  absl::BitGen gen_;
};

// Finding 2 of issue 48: a producer granted queue a enqueues there, and
// everything else it tried through the old grants is refused: other queues,
// the tables, the functions behind the API, a raised payload limit.
TEST_F(RolesTest, AProducerUsesItsQueueThroughTheApiAndNothingElse) {
  const std::string p = NewRole("producer");
  EXPECT_EQ(
      PartqOk({"grant", "producer", p, "--queue", "a"}),
      absl::StrCat("role \"", p, "\" is a producer of a in schema \"", schema_.name(), "\"\n"));
  NewItem other;
  other.payload = "b's";
  other.dedup_key = "secret";
  ASSERT_OK_AND_ASSIGN(EnqueueResult b_item, store_->Enqueue("b", other));
  schema_.Q("SELECT {schema}.group_create('b', 'gb')");
  auto c = As(p);

  // What it is for.
  for (const char* ok :
       {"SELECT {schema}.enqueue('a', 'x')", "SELECT {schema}.enqueue('a', '\\x00'::bytea)",
        "SELECT * FROM {schema}.enqueue_item('a', 'x', key => 'k', dedup_key => 'd')",
        "SELECT * FROM {schema}.enqueue_many('a', ARRAY['1', '2']::text[])",
        "SELECT * FROM {schema}.item_state('a', 1)",
        "SELECT * FROM {schema}.item_state_by_dedup_key('a', 'd')",
        "SELECT {schema}.group_create('a', 'g')",
        "SELECT {schema}.enqueue('a', 'g', group_id => 'g')",
        "SELECT * FROM {schema}.group_status('a', 'g')", "SELECT {schema}.group_start('a', 'g')",
        "SELECT * FROM {schema}.cancel_by_dedup_key('a', 'd')"}) {
    EXPECT_EQ(Try(*c, ok), "") << ok;
  }
  EXPECT_EQ(Count("items WHERE queue = 'a'"), 5);

  // What it is not for: 42501, insufficient_privilege, every time.
  const std::string b_id = absl::StrCat(b_item.id);
  for (const std::string& refused : std::vector<std::string>{
           // another queue, through the API
           "SELECT {schema}.enqueue('b', 'x')", "SELECT * FROM {schema}.enqueue_item('b', 'x')",
           "SELECT * FROM {schema}.enqueue_many('b', ARRAY['1']::text[])",
           "SELECT * FROM {schema}.item_state('b', " + b_id + ")",
           "SELECT * FROM {schema}.item_state_by_dedup_key('b', 'secret')",
           "SELECT {schema}.cancel('b', " + b_id + ")",
           "SELECT * FROM {schema}.cancel_items('b', ARRAY[" + b_id + "]::bigint[])",
           "SELECT {schema}.group_cancel('b', 'gb')", "SELECT {schema}.group_start('b', 'gb')",
           "SELECT * FROM {schema}.group_status('b', 'gb')",
           // its own queue's end item into another queue
           "SELECT {schema}.group_create('a', 'g2', end_queue => 'b')",
           // an operator's work
           "SELECT {schema}.add_schedule('s', 'a', 'x', every => '1 minute')",
           "SELECT * FROM {schema}.prune('a', '0 s', dead => true)",
           // the tables: payloads, an attempts count no claim survives, the
           // group rows, the queue's parts, another queue's parts
           "SELECT payload FROM {schema}.items", "SELECT last_error FROM {schema}.dead_items",
           "SELECT * FROM {schema}.results",
           "INSERT INTO {schema}.items (id, queue, part, payload, attempts) "
           "VALUES (999999, 'a', 0, 'x', 2147483647)",
           "UPDATE {schema}.groups SET pending = 0", "SELECT * FROM {schema}.groups FOR UPDATE",
           "UPDATE {schema}.queues SET parts = 1 WHERE name = 'b'",
           "UPDATE {schema}.session_parts SET epoch = epoch + 1",
           // the functions behind the API, which run as their owner
           "SELECT {schema}.enqueue_as_owner('b', 'x')",
           "SELECT * FROM {schema}.cancel_items_as_owner('b', ARRAY[" + b_id + "]::bigint[])",
           "SELECT {schema}.group_mark_cancelled('b', 'gb', false)",
           "SELECT * FROM {schema}.grants",
           "INSERT INTO {schema}.grants (queue, role, kind) VALUES ('b', current_user, "
           "'producer')"}) {
    EXPECT_EQ(Try(*c, refused), "42501") << refused;
  }
  EXPECT_EQ(Count("items WHERE queue = 'b'"), 1);
  EXPECT_EQ(Count("groups WHERE queue = 'b' AND cancelled_at IS NULL AND ended_at IS NULL"), 1);
  EXPECT_EQ(schema_.QInt("SELECT parts FROM {schema}.queues WHERE name = 'b'"), 2);

  // A cancel names its queue: b's item is not a's, so it is unknown there.
  pqxx::work w(*c);
  EXPECT_EQ(w.exec1(WithSchema(absl::StrCat("SELECT {schema}.cancel('a', ", b_id, ")"),
                               schema_.name()))[0]
                .as<std::string>(),
            "unknown");
  w.commit();
  EXPECT_EQ(Count("items WHERE queue = 'b'"), 1);

  // The payload limit is the queue's: the caller's setting does not raise it.
  EXPECT_EQ(Try(*c,
                "SET partq.max_payload_bytes = 1000000000; "
                "SELECT {schema}.enqueue('a', repeat('x', 1048577))"),
            "22023");
  // Revoked, it is refused at once.
  EXPECT_EQ(PartqOk({"revoke", "producer", p, "--queue", "a"}),
            absl::StrCat("role \"", p, "\" is no longer a producer of a (1 grant removed)\n"));
  EXPECT_EQ(Try(*c, "SELECT {schema}.enqueue('a', 'x')"), "42501");
  // Again, there is nothing to take back, and it says so; a name that is no
  // queue (a typo) is an error, as grant's, where it said "0 grants removed".
  EXPECT_EQ(PartqOk({"revoke", "producer", p, "--queue", "a"}),
            absl::StrCat("role \"", p, "\" was not a producer of a: nothing to revoke\n"));
  PartqResult typo = Partq({"revoke", "producer", p, "--queue", "nosuch", "--dsn", schema_.dsn(),
                            "--schema", schema_.name()});
  EXPECT_EQ(typo.code, 1) << typo.out;
  EXPECT_TRUE(absl::StrContains(typo.err, "unknown queue \"nosuch\"")) << typo.err;
}

// `partq wait` and `partq item` as a producer or a viewer, which may not read
// the item tables: they ask the SQL API's item_state() (and
// item_state_by_dedup_key()), which checks the grant, so a producer waits for
// what it enqueued. Before, the wait stopped at "permission denied for table
// queues", and item at "permission denied for sequence items_id_seq".
TEST_F(RolesTest, AProducerAndAViewerWaitForAndShowTheirQueuesItemsThroughTheSqlApi) {
  const std::string p = NewRole("producer");
  const std::string v = NewRole("viewer");
  PartqOk({"grant", "producer", p, "--queue", "a"});
  PartqOk({"grant", "viewer", v, "--queue", "a"});
  NewItem keyed = Payload("k");
  keyed.dedup_key = "order-7";
  ASSERT_OK_AND_ASSIGN(EnqueueResult done, store_->Enqueue("a", Payload("x")));
  ASSERT_OK_AND_ASSIGN(EnqueueResult by_key, store_->Enqueue("a", keyed));
  Member m = JoinWith(*store_, "a", kAllParts);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> got, store_->Claim(ClaimAll("a", m)));
  ASSERT_EQ(got.size(), 2u);
  ASSERT_OK(store_
                ->Finish(FinishOf("a", m, got), AckWithResults([](const Item& i) {
                           return std::optional<std::string>(absl::StrCat("r", i.payload));
                         }))
                .status());
  ASSERT_OK_AND_ASSIGN(EnqueueResult waiting, store_->Enqueue("a", Payload("later")));
  auto as = [&](const std::string& role, std::vector<std::string> args) {
    if (args[0] == "wait") args.insert(args.end(), {"--timeout", "1s"});
    return PartqAs(role, std::move(args));
  };
  ASSERT_OK_AND_ASSIGN(EnqueueResult cancelled, store_->Enqueue("a", Payload("c")));
  ASSERT_OK(store_->CancelItems("a", {cancelled.id}).status());
  ASSERT_OK_AND_ASSIGN(EnqueueResult dead, store_->Enqueue("b", Payload("d")));
  {
    Member mb = JoinWith(*store_, "b", kAllParts);
    ASSERT_OK_AND_ASSIGN(std::vector<Item> in_b, store_->Claim(ClaimAll("b", mb)));
    ASSERT_OK(store_
                  ->Finish(FinishOf("b", mb, in_b),
                           OutcomesOf([](const Item&) { return Outcome::Kind::kDead; }))
                  .status());
  }
  PartqOk({"grant", "producer", p, "--queue", "b"});
  {
    PartqResult r = as(p, {"wait", "a", absl::StrCat(cancelled.id)});
    EXPECT_EQ(r.code, 5) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "was cancelled")) << r.err;
    r = as(p, {"wait", "b", absl::StrCat(dead.id)});
    EXPECT_EQ(r.code, 4) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "was dead-lettered after 1 attempt")) << r.err;
    r = as(p, {"wait", "a", absl::StrCat(dead.id)});
    EXPECT_EQ(r.code, 1) << "an item of another queue: " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "no such item")) << r.err;
  }
  PartqOk({"revoke", "producer", p, "--queue", "b"});
  // A worker of a that produces into b (a group's end queue, say): its
  // row-level security hides b's rows, so it too asks the SQL API.
  const std::string w = NewRole("worker");
  PartqOk({"grant", "worker", w, "--queue", "a"});
  PartqOk({"grant", "producer", w, "--queue", "b"});
  {
    PartqResult r = as(w, {"wait", "b", absl::StrCat(dead.id)});
    EXPECT_EQ(r.code, 4) << "not an unknown queue, nor done: " << r.err;
    r = as(w, {"wait", "a", absl::StrCat(done.id)});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "rx");
  }
  for (const std::string& role : {p, v}) {
    PartqResult r = as(role, {"wait", "a", absl::StrCat(done.id)});
    EXPECT_EQ(r.code, 0) << role << ": " << r.err;
    EXPECT_EQ(r.out, "rx") << role;
    r = as(role, {"wait", "a", "--dedup-key", "order-7", "--json"});
    EXPECT_EQ(r.code, 0) << role << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.out, absl::StrCat("\"id\": ", by_key.id))) << r.out;
    r = as(role, {"wait", "a", absl::StrCat(waiting.id)});
    EXPECT_EQ(r.code, 3) << role << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "not finished within 1s")) << r.err;
    r = as(role, {"wait", "a", "999999999"});
    EXPECT_EQ(r.code, 1) << role << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "no such item")) << r.err;
    // `partq item` says what item_state() says, and not where the item is.
    r = as(role, {"item", "a", absl::StrCat(waiting.id)});
    EXPECT_EQ(r.code, 0) << role << ": " << r.err;
    EXPECT_TRUE(
        absl::StrContains(r.out, ": pending (no attempt used); where it is and its payload"))
        << r.out;
    r = as(role, {"item", "a", absl::StrCat(waiting.id), "--json"});
    EXPECT_EQ(r.code, 0) << role << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.out, "\"state\": \"pending\"")) << r.out;
    EXPECT_FALSE(absl::StrContains(r.out, "\"payload\"")) << r.out;
    r = as(role, {"item", "a", absl::StrCat(done.id)});
    EXPECT_EQ(r.code, 0) << role << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.out, "done; result: rx")) << r.out;
  }
  // A queue it has no grant on: refused, by name, with what to do: the
  // narrowest grant that reads states (migration 45).
  PartqResult r = as(p, {"wait", "b", absl::StrCat(done.id)});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "permission denied for queue \"b\"")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "partq grant viewer")) << r.err;
}

// `partq cancel` and `partq group start|status|cancel` as a producer: a role
// that does not own the tables goes through the SQL API. Before, each
// stopped at "permission denied for table items" (or "... queues").
TEST_F(RolesTest, AProducerCancelsAndRunsGroupsWithTheCli) {
  const std::string p = NewRole("producer");
  PartqOk({"grant", "producer", p, "--queue", "a"});
  auto as = [&](std::vector<std::string> args) { return PartqAs(p, std::move(args)); };
  NewItem keyed = Payload("k");
  keyed.dedup_key = "order-9";
  ASSERT_OK_AND_ASSIGN(EnqueueResult one, store_->Enqueue("a", Payload("x")));
  ASSERT_OK_AND_ASSIGN(EnqueueResult two, store_->Enqueue("a", Payload("y")));
  ASSERT_OK_AND_ASSIGN(EnqueueResult by_key, store_->Enqueue("a", keyed));
  ASSERT_OK_AND_ASSIGN(EnqueueResult other, store_->Enqueue("b", Payload("z")));
  // A worker is the one thing a producer may not run: it is told which
  // grant does, where it ended at "permission denied for table queues".
  PartqResult r = as({"worker", "a", "--handler", "noop"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, absl::StrCat("partq grant worker ROLE --queue a"))) << r.err;
  r = as({"cancel", "a", absl::StrCat(one.id), absl::StrCat(two.id)});
  EXPECT_EQ(r.code, 0) << r.err;
  r = as({"cancel", "a", "--dedup-key", "order-9"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE queue = 'a'"), 0);
  EXPECT_EQ(schema_.QInt(absl::StrCat("SELECT count(*) FROM {schema}.cancelled_items WHERE id IN (",
                                      one.id, ",", two.id, ",", by_key.id, ")")),
            3);
  r = as({"cancel", "b", absl::StrCat(other.id)});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "permission denied for queue \"b\"")) << r.err;
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE queue = 'b'"), 1);

  // Not its to run: the migration says whose it is.
  r = as({"migrate"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "partq migrate runs as the schema's owner")) << r.err;
  // Commands that read the tables say who may run them.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"status", "a"}, std::vector<std::string>{"queue", "list"},
        std::vector<std::string>{"dead", "list", "a"}}) {
    r = as(args);
    EXPECT_EQ(r.code, 1) << args[0];
    EXPECT_TRUE(absl::StrContains(r.err,
                                  "reads partq's tables: run it as the schema's owner, "
                                  "or as a role granted viewer"))
        << r.err;
  }

  r = as({"group", "create", "a", "g1"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = as({"enqueue", "a", "--group", "g1", "held"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = as({"group", "start", "a", "nosuch"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "has no group")) << "a typo starts nothing: " << r.err;
  r = as({"group", "start", "a", "g1"});
  EXPECT_EQ(r.code, 0) << r.err;
  r = as({"group", "status", "a", "g1"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "g1")) << r.out;
  // Its queue's groups listed through list_groups() (migration 46), with
  // the end payload it wrote; another queue's refused.
  schema_.Q("SELECT {schema}.group_create('a', 'g2', 'a', '{\"report\": 7}')");
  schema_.Q("SELECT {schema}.group_create('b', 'gb')");
  r = as({"group", "list", "a", "--json"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "\"g1\"")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"g2\"")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "report")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "gb")) << r.out;
  r = as({"group", "list", "b"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "permission denied for queue \"b\"")) << r.err;
  r = as({"group", "cancel", "a", "g1"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE queue = 'a'"), 0);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.groups WHERE id = 'g1' AND "
                         "cancelled_at IS NOT NULL"),
            1);
}

// `partq schedule add|list|delete` as an operator and `list` as a viewer:
// a role that does not own the tables goes through the SQL API. Before, an
// operator's `schedule add` committed the schedule, then failed to list it
// ("permission denied for table queues") and exited 1, so a second try met
// "already exists".
TEST_F(RolesTest, AnOperatorKeepsSchedulesAndAViewerListsThemWithTheCli) {
  const std::string op = NewRole("operator");
  const std::string v = NewRole("viewer");
  PartqOk({"grant", "operator", op, "--queue", "a"});
  PartqOk({"grant", "viewer", v, "--queue", "a"});
  schema_.Q("SELECT {schema}.add_schedule('sb', 'b', 'x', every => '1 hour')");
  PartqResult r = PartqAs(op, {"schedule", "add", "nightly", "a", "--every", "1h", "report"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "nightly")) << r.out;
  r = PartqAs(op, {"schedule", "list", "--json"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "nightly")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"payload\": \"report\"")) << "an operator's: " << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "sb")) << "another queue's schedule: " << r.out;
  r = PartqAs(op, {"schedule", "list", "b"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "permission denied for queue \"b\"")) << r.err;
  r = PartqAs(op, {"schedule", "add", "other", "b", "--every", "1h", "x"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "permission denied for queue \"b\"")) << r.err;
  r = PartqAs(v, {"schedule", "list", "a", "--json"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "nightly")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "report")) << "a viewer reads no payload: " << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"payload_bytes\": null")) << r.out;
  r = PartqAs(v, {"schedule", "delete", "nightly"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "permission denied")) << r.err;
  // A queue row-level security hides is not said to be missing.
  // Nor by `dead list` (which the console's dead page reads too), which
  // told a viewer to create the queue.
  for (const char* command : {"status", "dead"}) {
    r = command == std::string("dead") ? PartqAs(v, {"dead", "list", "b"})
                                       : PartqAs(v, {"status", "b"});
    EXPECT_EQ(r.code, 1) << command;
    EXPECT_TRUE(absl::StrContains(r.err, "queue \"b\" is unknown in schema")) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "or not one of this role's queues")) << r.err;
    EXPECT_FALSE(absl::StrContains(r.err, "create it with")) << r.err;
  }
  // A schedule of a queue the operator may not see is as unknown as one
  // that does not exist (migration 45): its queue is not named.
  r = PartqAs(op, {"schedule", "delete", "sb"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "unknown schedule \"sb\"")) << r.err;
  EXPECT_FALSE(absl::StrContains(r.err, "queue \"b\"")) << r.err;
  r = PartqAs(op, {"schedule", "delete", "never"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "unknown schedule \"never\"")) << r.err;
  r = PartqAs(op, {"schedule", "delete", "nightly"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.schedules WHERE name = 'nightly'"), 0);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.schedules WHERE name = 'sb'"), 1);
}

// An operator keeps its queues' schedules and prunes them; a viewer reads
// states, groups and schedules and changes nothing. list_schedules() with
// no queue shows only the queues the caller may see.
TEST_F(RolesTest, AnOperatorAndAViewerDoWhatTheirGrantSaysOnTheirQueuesOnly) {
  const std::string op = NewRole("operator");
  const std::string viewer = NewRole("viewer");
  PartqOk({"grant", "operator", op, "--queue", "a"});
  PartqOk({"grant", "viewer", viewer, "--queue", "a,b"});
  schema_.Q("SELECT {schema}.add_schedule('sb', 'b', 'x', every => '1 hour')");
  auto o = As(op);
  EXPECT_EQ(Try(*o, "SELECT {schema}.add_schedule('sa', 'a', 'x', every => '1 hour')"), "");
  EXPECT_EQ(Try(*o, "SELECT * FROM {schema}.prune('a', '1 day')"), "");
  EXPECT_EQ(Try(*o, "SELECT {schema}.enqueue('a', 'x')"), "");
  EXPECT_EQ(Try(*o, "SELECT {schema}.add_schedule('sb2', 'b', 'x', every => '1 hour')"), "42501");
  EXPECT_EQ(Try(*o, "SELECT {schema}.delete_schedule('sb')"), "42704");  // b is not its to see
  EXPECT_EQ(Try(*o, "SELECT * FROM {schema}.prune('b', '1 day')"), "42501");
  EXPECT_EQ(Try(*o, "SELECT * FROM {schema}.list_schedules('b')"), "42501");
  {
    pqxx::work w(*o);
    pqxx::result r =
        w.exec(WithSchema("SELECT name FROM {schema}.list_schedules()", schema_.name()));
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0][0].as<std::string>(), "sa");
  }
  auto v = As(viewer);
  EXPECT_EQ(Try(*v, "SELECT * FROM {schema}.item_state('b', 1)"), "");
  EXPECT_EQ(Try(*v, "SELECT * FROM {schema}.list_schedules('b')"), "");
  // No payload through the API either (migration 37): a schedule's, a
  // group's end payload; the operator, who writes them, reads them.
  schema_.Q("SELECT {schema}.group_create('a', 'g', 'b', '{\"end\": 1}')");
  auto first = [&](pqxx::connection& c, const std::string& sql) {
    pqxx::work w(c);
    pqxx::result r = w.exec(WithSchema(sql, schema_.name()));
    w.commit();
    return r.empty() || r[0][0].is_null() ? std::string("NULL") : r[0][0].as<std::string>();
  };
  EXPECT_EQ(first(*v, "SELECT payload FROM {schema}.list_schedules('b')"), "NULL");
  EXPECT_EQ(first(*v, "SELECT end_payload FROM {schema}.group_status('a', 'g')"), "NULL");
  EXPECT_EQ(first(*v, "SELECT end_payload FROM {schema}.list_groups('a', true)"), "NULL");
  EXPECT_EQ(first(*o, "SELECT end_payload FROM {schema}.list_groups('a', true)"), "{\"end\": 1}");
  EXPECT_EQ(first(*o, "SELECT convert_from(payload, 'UTF8') FROM {schema}.list_schedules('a')"),
            "x");
  EXPECT_EQ(first(*o, "SELECT end_payload FROM {schema}.group_status('a', 'g')"), "{\"end\": 1}");
  for (const char* refused :
       {"SELECT {schema}.enqueue('a', 'x')", "SELECT {schema}.cancel('a', 1)",
        "SELECT {schema}.delete_schedule('sa')", "SELECT {schema}.group_create('a', 'g')",
        "SELECT payload FROM {schema}.schedules"}) {
    EXPECT_EQ(Try(*v, refused), "42501") << refused;
  }
  schema_.Q(absl::StrCat("GRANT SELECT (payload) ON {schema}.schedules TO ", viewer));
  EXPECT_EQ(first(*v, "SELECT convert_from(payload, 'UTF8') FROM {schema}.list_schedules('b')"),
            "x");
  EXPECT_EQ(Try(*o, "SELECT {schema}.delete_schedule('sa')"), "");
  EXPECT_EQ(Count("schedules"), 1);
}

// `partq grant`, `revoke` and `grants` are the schema owner's: another
// role's try says so, where it ended at "permission denied for table
// topic_grants", and changes nothing.
TEST_F(RolesTest, GrantsAreTheOwnersToChangeAndAnotherRoleIsToldSo) {
  const std::string p = NewRole("producer");
  PartqOk({"grant", "producer", p, "--queue", "a"});
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"grant", "operator", p, "--queue", "a,b"},
        std::vector<std::string>{"revoke", "producer", p, "--queue", "a"},
        std::vector<std::string>{"grants"}}) {
    const PartqResult r = PartqAs(p, args);
    EXPECT_EQ(r.code, 1) << args[0];
    EXPECT_TRUE(
        absl::StrContains(r.err, absl::StrCat("(partq ", args[0], " runs as the schema's owner")))
        << r.err;
  }
  EXPECT_EQ(Count(absl::StrCat("grants WHERE role = '", p, "'")), 1);
}

// Migration 45: a refusal's hint names the narrowest grant that would do
// (a viewer's to read states and schedules, not a producer's), a schedule
// of a queue the caller may not see is unknown rather than refused by its
// queue's name, and cancel() of an id below 1 names the id.
TEST_F(RolesTest, RefusalsNameTheNarrowestGrantAndNoQueueTheCallerMayNotSee) {
  const std::string p = NewRole("producer");
  PartqOk({"grant", "producer", p, "--queue", "b"});
  schema_.Q("SELECT {schema}.add_schedule('sa', 'a', 'x', every => '1 hour')");
  auto c = As(p);
  // The message of `call`'s refusal, or of its error, as `p`.
  auto refusal = [&](const std::string& call) -> std::string {
    try {
      pqxx::work w(*c);
      w.exec(WithSchema(absl::StrCat("DO $$ DECLARE h text; BEGIN PERFORM ", call,
                                     "; EXCEPTION WHEN insufficient_privilege THEN "
                                     "GET STACKED DIAGNOSTICS h = PG_EXCEPTION_HINT; "
                                     "RAISE EXCEPTION 'refused; hint: %', h; END $$"),
                        schema_.name()));
      return "not refused";
    } catch (const pqxx::sql_error& e) {
      return e.what();
    }
  };
  const std::string grant = absl::StrCat("hint: the schema's owner grants it: partq grant ");
  for (const char* read : {"{schema}.item_state('a', 1)", "{schema}.list_schedules('a')",
                           "{schema}.group_status('a', 'g')"}) {
    EXPECT_TRUE(absl::StrContains(refusal(read), absl::StrCat(grant, "viewer ", p, " --queue a")))
        << read << ": " << refusal(read);
  }
  EXPECT_TRUE(absl::StrContains(refusal("{schema}.cancel('a', 1)"),
                                absl::StrCat(grant, "producer ", p, " --queue a")));
  EXPECT_TRUE(absl::StrContains(refusal("{schema}.add_schedule('s2', 'a', 'x', every => '1 h')"),
                                absl::StrCat(grant, "operator ", p, " --queue a")));

  std::string error = refusal("{schema}.delete_schedule('sa')");
  EXPECT_TRUE(absl::StrContains(error, "unknown schedule \"sa\"")) << error;
  EXPECT_FALSE(absl::StrContains(error, "queue \"a\"")) << error;
  EXPECT_EQ(Try(*c, "SELECT {schema}.delete_schedule('sa')"), "42704");
  EXPECT_EQ(Count("schedules WHERE name = 'sa'"), 1);

  EXPECT_EQ(Try(*c, "SELECT {schema}.cancel('b', 0)"), "22023");
  error = refusal("{schema}.cancel('b', 0)");
  EXPECT_TRUE(absl::StrContains(error, "item id must be 1 or more, not 0")) << error;

  // Migration 47: a name a hidden queue's schedule holds is taken, not
  // placed; a worker is hinted a grant a worker can hold (never viewer).
  const std::string op = NewRole("operator");
  PartqOk({"grant", "operator", op, "--queue", "b"});
  auto o = As(op);
  try {
    pqxx::work w(*o);
    w.exec(WithSchema("SELECT {schema}.add_schedule('sa', 'b', 'x', every => '1 hour')",
                      schema_.name()));
    ADD_FAILURE() << "a taken name was accepted";
  } catch (const pqxx::sql_error& e) {
    EXPECT_TRUE(absl::StrContains(e.what(), "already exists (on a queue this role may not see)"))
        << e.what();
    EXPECT_FALSE(absl::StrContains(e.what(), "queue \"a\"")) << e.what();
  }
  const std::string w = NewRole("worker");
  PartqOk({"grant", "worker", w, "--queue", "b"});
  c = As(w);
  EXPECT_EQ(Try(*c, "SELECT * FROM {schema}.list_groups('b')"), "");  // its own queue's
  EXPECT_TRUE(absl::StrContains(refusal("{schema}.list_groups('a')"),
                                absl::StrCat(grant, "worker ", w, " --queue a")))
      << refusal("{schema}.list_groups('a')");
  EXPECT_TRUE(absl::StrContains(refusal("{schema}.item_state('a', 1)"),
                                absl::StrCat(grant, "producer ", w, " --queue a")))
      << refusal("{schema}.item_state('a', 1)");
  // Migration 48: a viewer (confined too, as a worker) is hinted no worker's
  // grant, which partq grant refuses it: producer, to enqueue into its queue.
  const std::string v = NewRole("viewer");
  PartqOk({"grant", "viewer", v, "--queue", "b"});
  c = As(v);
  EXPECT_TRUE(absl::StrContains(refusal("{schema}.enqueue('b', 'x')"),
                                absl::StrCat(grant, "producer ", v, " --queue b")))
      << refusal("{schema}.enqueue('b', 'x')");
  EXPECT_TRUE(absl::StrContains(refusal("{schema}.item_state('a', 1)"),
                                absl::StrCat(grant, "viewer ", v, " --queue a")))
      << refusal("{schema}.item_state('a', 1)");
  PartqOk({"grant", "producer", v, "--queue", "b"});  // the hint's grant is one it can hold
  EXPECT_EQ(Try(*c, "SELECT {schema}.enqueue('b', 'x')"), "");
}

// A grant to a group role serves its members; a grant to a role dropped
// since counts for no one and `partq grants` says so; granting needs an
// existing role and queue and a known kind, and says which is wrong.
TEST_F(RolesTest, GrantsGoToGroupRolesAndNameWhatIsWrong) {
  const std::string group = NewRole("group");
  const std::string member = NewRole("member");
  schema_.Q(absl::StrCat("GRANT ", group, " TO ", member));
  PartqOk({"grant", "producer", group, "--queue", "a"});
  auto m = As(member);
  EXPECT_EQ(Try(*m, "SELECT {schema}.enqueue('a', 'x')"), "");
  EXPECT_EQ(Try(*m, "SELECT {schema}.enqueue('b', 'x')"), "42501");

  const std::string gone = NewRole("gone");
  PartqOk({"grant", "viewer", gone, "--queue", "b"});
  schema_.Q(absl::StrCat("DROP OWNED BY ", gone));
  schema_.Q(absl::StrCat("DROP ROLE ", gone));
  roles_.pop_back();
  const std::string listed = PartqOk({"grants", "--queue", "b"});
  EXPECT_TRUE(absl::StrContains(listed, "(the role no longer exists)")) << listed;
  EXPECT_TRUE(absl::StrContains(PartqOk({"grants", "--json"}), "\"role_exists\": false"));
  EXPECT_EQ(Try(*m, "SELECT * FROM {schema}.item_state('b', 1)"), "42501");

  auto refused = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--dsn", schema_.dsn(), "--schema", schema_.name()});
    PartqResult r = Partq(args);
    EXPECT_NE(r.code, 0) << absl::StrJoin(args, " ");
    return r.err;
  };
  EXPECT_TRUE(
      absl::StrContains(refused({"grant", "producer", "partq_no_such_role", "--queue", "a"}),
                        "role \"partq_no_such_role\" does not exist"));
  EXPECT_TRUE(absl::StrContains(refused({"grant", "producer", member, "--queue", "a,zz"}),
                                "unknown queue \"zz\""));
  EXPECT_TRUE(absl::StrContains(refused({"grant", "writer", member, "--queue", "a"}),
                                "producer, operator, viewer, worker or publish (got \"writer\")"));
  EXPECT_TRUE(absl::StrContains(refused({"grant", "producer", member}), "--queue is required"));
  // Nothing of the refused grants was written: a and zz in one transaction.
  EXPECT_EQ(Count(absl::StrCat("grants WHERE role = '", member, "'")), 0);
  // The queue's delete takes its grants with it.
  ASSERT_TRUE(store_->DeleteQueue("a", QueueContents::kDelete).ok());
  EXPECT_EQ(Count("grants WHERE queue = 'a'"), 0);
}

// The payload limit is the queue's (queue create/set --max-payload), for
// the owner as for a producer, whatever the session says; the caller's
// setting is back as it was after the call.
TEST_F(RolesTest, TheSqlApisPayloadLimitIsTheQueuesAndNoSettingRaisesIt) {
  PartqOk({"queue", "set", "a", "--max-payload", "10"});
  ASSERT_OK_AND_ASSIGN(QueueConfig a, store_->GetQueue("a"));
  EXPECT_EQ(a.max_payload_bytes, 10);
  pqxx::connection c(schema_.dsn());
  EXPECT_EQ(Try(c, "SELECT {schema}.enqueue('a', repeat('x', 10))"), "");
  for (const char* over :
       {"SELECT {schema}.enqueue('a', repeat('x', 11))",
        "SELECT * FROM {schema}.enqueue_many('a', ARRAY[repeat('x', 11)])",
        "SELECT {schema}.add_schedule('s', 'a', repeat('x', 11), every => '1 hour')",
        "SET partq.max_payload_bytes = 1000; SELECT {schema}.enqueue('a', repeat('x', 11))"}) {
    EXPECT_EQ(Try(c, over), "22023") << over;
  }
  // Nor does a smaller one lower it: b's limit is 1 MiB.
  EXPECT_EQ(Try(c,
                "SET partq.max_payload_bytes = 1000; "
                "SELECT {schema}.enqueue('b', repeat('x', 2000))"),
            "");
  EXPECT_TRUE(
      absl::StrContains(PartqOk({"queue", "create", "c", "--parts", "1", "--max-payload", "2048"}),
                        "payload limit 2048 bytes"));
}

// The schema's owner need not be a superuser: every migration, the
// wrappers' included, runs for an ordinary role that may create schemas.
TEST_F(RolesTest, AnOwnerThatIsNoSuperuserMigratesTheSchema) {
  const std::string owner = NewRole("owner");
  schema_.Q(absl::StrCat("GRANT CREATE ON DATABASE \"",
                         *schema_.Q("SELECT current_database()")[0][0], "\" TO ", owner));
  const std::string schema = absl::StrCat(schema_.name(), "_own");
  auto cleanup = absl::MakeCleanup(
      [&] { schema_.Q(absl::StrCat("DROP SCHEMA IF EXISTS ", schema, " CASCADE")); });
  testing::PartqResult r =
      Partq({"migrate", "--dsn", absl::StrCat(schema_.dsn(), " user=", owner), "--schema", schema});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, absl::StrCat("schema \"", schema, "\" is at version ", kSchemaVersion, "\n"));
}

// Issue 48 (migration 38): grants name their role by name and by oid. A
// role dropped and made again under its name gets none of the dropped
// one's grants (PostgreSQL drops a role's own privileges with it); `partq
// grants` shows those rows as no one's, and a new grant to the name starts
// from nothing.
TEST_F(RolesTest, ARoleMadeAgainUnderADroppedRolesNameGetsNoneOfItsGrants) {
  const std::string p = NewRole("again");
  PartqOk({"grant", "producer", p, "--queue", "a"});
  PartqOk({"grant", "worker", p, "--queue", "a"});
  PartqOk({"grant", "publish", p, "--topic", "t"});
  EXPECT_EQ(Try(*As(p), "SELECT {schema}.enqueue('a', 'x')"), "");
  schema_.Q(absl::StrCat("DROP OWNED BY ", p, "; DROP ROLE ", p, "; CREATE ROLE ", p, " LOGIN"));

  EXPECT_EQ(Try(*As(p), "SELECT {schema}.enqueue('a', 'x')"), "42501");
  EXPECT_EQ(Count("items WHERE queue = 'a'"), 1);
  // Nor through a worker role it is made a member of: the dropped role's
  // worker grant on a confines it to nothing (worker_scope).
  const std::string w = NewRole("workers");
  PartqOk({"grant", "worker", w, "--queue", "b"});
  schema_.Q(absl::StrCat("GRANT ", w, " TO ", p));
  EXPECT_EQ(Try(*As(p), "SELECT {schema}.enqueue('a', 'x')"), "42501");
  schema_.Q(absl::StrCat("REVOKE ", w, " FROM ", p));
  EXPECT_TRUE(absl::StrContains(PartqOk({"grants", "--queue", "a"}), "no longer exists"));

  PartqOk({"grant", "producer", p, "--queue", "b"});
  auto c = As(p);
  EXPECT_EQ(Try(*c, "SELECT {schema}.enqueue('b', 'x')"), "");
  EXPECT_EQ(Try(*c, "SELECT {schema}.enqueue('a', 'x')"), "42501");
  EXPECT_EQ(Count(absl::StrCat("grants WHERE role = '", p, "'")), 1);
  EXPECT_EQ(Count(absl::StrCat("topic_grants WHERE role = '", p, "'")), 0);
  const std::string listed = PartqOk({"grants"});
  EXPECT_FALSE(absl::StrContains(listed, "no longer exists")) << listed;
}

// Issue 48 (migration 38): a refused group id is echoed cut, not whole; an
// item's attempts stay in range, so no write (a worker may update its
// queue's items) can make every claim of a part fail on attempts + 1.
TEST_F(RolesTest, AHugeGroupIdMakesAShortMessageAndAttemptsStayInRange) {
  pqxx::connection c(schema_.dsn());
  try {
    pqxx::work w(c);
    w.exec(WithSchema("SELECT {schema}.group_create('a', repeat('g', 100000))", schema_.name()));
    ADD_FAILURE() << "a 100,000-byte group id was taken";
  } catch (const pqxx::sql_error& e) {
    const std::string what = e.what();
    EXPECT_LT(what.find('\n'), 200u) << what.substr(0, 400);  // the message, before CONTEXT
    EXPECT_TRUE(absl::StrContains(what, "... (100000 bytes)")) << what.substr(0, 400);
  }
  ASSERT_OK(store_->Enqueue("a", NewItem{}).status());
  EXPECT_EQ(Try(c, "UPDATE {schema}.items SET attempts = 2147483647"), "23514");
  EXPECT_EQ(Try(c, "UPDATE {schema}.items SET attempts = -1"), "23514");
  EXPECT_EQ(Try(c, "UPDATE {schema}.items SET attempts = 7"), "");
}

// Issue 48: any role that can connect may take the advisory lock that
// `partq migrate` takes (PostgreSQL has no privilege on advisory locks), so
// it cannot be kept from blocking a migrate; it must not do so without a
// word. A migrate that finds the lock taken says who holds it and how to
// end that, waits, and migrates once the lock is let go.
TEST_F(RolesTest, AMigrateThatFindsItsLockTakenSaysWhoHoldsItAndWaits) {
  const std::string squatter = NewRole("squatter");
  auto holder = As(squatter);
  pqxx::nontransaction n(*holder);
  const std::string pid = n.exec("SELECT pg_backend_pid()")[0][0].c_str();
  n.exec_params("SELECT pg_advisory_lock(hashtextextended('partq.migrate:' || $1, 0))",
                schema_.name());
  char log[] = "/tmp/partq-migrate-log-XXXXXX";
  const int fd = mkstemp(log);
  ASSERT_GE(fd, 0);
  close(fd);
  auto remove_log = absl::MakeCleanup([&] { unlink(log); });
  testing::ChildProcess migrate(
      {testing::PartqBinary(), "migrate", "--dsn", schema_.dsn(), "--schema", schema_.name()}, {},
      log);
  auto said = [&] {
    std::ifstream in(log);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  ASSERT_TRUE(
      testing::WaitUntil([&] { return absl::StrContains(said(), "waiting"); }, absl::Seconds(20)))
      << said();
  const std::string text = said();
  EXPECT_TRUE(
      absl::StrContains(text, absl::StrCat("held by backend ", pid, " (user \"", squatter, "\"")))
      << text;
  EXPECT_TRUE(absl::StrContains(text, absl::StrCat("pg_terminate_backend(", pid, ")"))) << text;
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_TRUE(migrate.Running()) << "a migrate went on past a held lock: " << text;
  n.exec_params("SELECT pg_advisory_unlock(hashtextextended('partq.migrate:' || $1, 0))",
                schema_.name());
  const std::optional<int> status = migrate.Wait(absl::Seconds(30));
  ASSERT_TRUE(status.has_value()) << said();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << said();
  EXPECT_TRUE(absl::StrContains(said(), absl::StrCat("is at version ", kSchemaVersion))) << said();
}

// Finding 3 of issue 48: a role granted `worker` on queue a (and nothing but
// `partq grant`) runs a real `partq worker a` that drains it, and row-level
// security keeps it to a's rows: b's items, parts, dead items and queue row
// are invisible to it, writes into b are refused, and the SQL API no longer
// takes its table privileges for a grant on b. Revoked, it keeps nothing.
TEST_F(RolesTest, AWorkerRoleDrainsItsQueueAndSeesNothingOfAnother) {
  const std::string w = NewRole("worker");
  EXPECT_EQ(PartqOk({"grant", "worker", w, "--queue", "a"}),
            absl::StrCat("role \"", w, "\" is a worker of a in schema \"", schema_.name(), "\"\n"));
  for (int i = 0; i < 300; ++i) {
    NewItem item;
    item.payload = absl::StrCat("a", i);
    ASSERT_TRUE(store_->Enqueue("a", item).ok());
  }
  for (int i = 0; i < 20; ++i) {
    NewItem item;
    item.payload = absl::StrCat("secret", i);
    ASSERT_TRUE(store_->Enqueue("b", item).ok());
  }
  schema_.Q(
      "INSERT INTO {schema}.dead_items (id, queue, part, priority, attempts, enqueued_at, "
      "last_error, payload) VALUES (1000000, 'b', 0, 0, 1, now(), 'b''s error', 'b''s payload')");
  // b's parts are owned (by the schema's owner, paused so it claims nothing).
  PartqOk({"queue", "pause", "b"});
  const std::string owner_dsn = schema_.dsn();
  const std::string role_dsn = absl::StrCat(schema_.dsn(), " user=", w);
  testing::ChildProcess b_worker({testing::PartqBinary(), "worker", "b", "--dsn", owner_dsn,
                                  "--schema", schema_.name(), "--handler", "noop", "--quiet"});
  testing::ChildProcess a_worker({testing::PartqBinary(), "worker", "a", "--dsn", role_dsn,
                                  "--schema", schema_.name(), "--handler", "noop", "--quiet"});
  ASSERT_TRUE(testing::WaitUntil([&] { return Count("items WHERE queue = 'a'") == 0; }))
      << "the worker role did not drain its queue";
  ASSERT_TRUE(testing::WaitUntil([&] { return Count("session_parts WHERE queue = 'b'") == 2; }));
  EXPECT_TRUE(a_worker.Running());

  auto c = As(w);
  auto rows = [&](const std::string& sql) -> int64_t {
    pqxx::work t(*c);
    pqxx::result r = t.exec(WithSchema(sql, schema_.name()));
    t.commit();
    return r.affected_rows();
  };
  // Reads and writes of b's rows find none.
  for (const char* none :
       {"SELECT payload FROM {schema}.items WHERE queue = 'b'",
        "SELECT payload FROM {schema}.dead_items", "SELECT * FROM {schema}.queues WHERE name = 'b'",
        "UPDATE {schema}.session_parts SET epoch = epoch WHERE queue = 'b'",
        // the functions it deletes through (migration 39) pass over b's rows,
        // whatever ids or row addresses it names
        "SELECT {schema}.delete_items(NULL, ARRAY(SELECT generate_series(1, 100000)::bigint))"}) {
    EXPECT_EQ(rows(none), 0) << none;
  }
  // It updates no item itself (migration 40: its retries go through a rule).
  EXPECT_EQ(Try(*c, "UPDATE {schema}.items SET attempts = 2147483647 WHERE queue = 'b'"), "42501");
  for (const char* t : {"sessions", "session_parts", "part_claims"}) {
    const std::string of_b = absl::StrCat(
        "SELECT {schema}.delete_rows('", t, "', '",
        *testing::Query(schema_.dsn(),
                        WithSchema(absl::StrCat("SELECT array_agg(ctid)::text FROM {schema}.", t,
                                                " WHERE queue = 'b'"),
                                   schema_.name()))[0][0],
        "')");
    EXPECT_EQ(rows(of_b), 0) << of_b;
  }
  // Nor do the rules its pipelined acks and claims delete through.
  auto of_b = [&](const std::string& sql) {
    return *testing::Query(schema_.dsn(), WithSchema(sql, schema_.name()))[0][0];
  };
  const std::string acks = absl::StrCat(
      "INSERT INTO {schema}.item_acks (tids) VALUES ('",
      of_b("SELECT array_agg(ctid)::text FROM {schema}.items WHERE queue = 'b'"), "')");
  EXPECT_EQ(rows(acks), 0) << acks;
  const std::string drops = absl::StrCat(
      "INSERT INTO {schema}.claim_record_drops (tids, epochs) VALUES ('",
      of_b("SELECT array_agg(ctid ORDER BY seq)::text FROM {schema}.part_claims WHERE queue = 'b'"),
      "', '",
      of_b(
          "SELECT array_agg(epoch ORDER BY seq)::text FROM {schema}.part_claims WHERE queue = 'b'"),
      "')");
  EXPECT_EQ(rows(drops), 0) << drops;
  // Rows of b cannot be written; the tables cannot be emptied; the queue's
  // settings and the API stay out of reach.
  for (const char* refused :
       {"INSERT INTO {schema}.results (id, queue, result) VALUES (1, 'b', 'forged')",
        "INSERT INTO {schema}.items (id, queue, part, payload) VALUES (999999, 'b', 0, 'x')",
        "INSERT INTO {schema}.session_parts (queue, part, session_id, epoch) "
        "SELECT 'b', 3, session_id, epoch FROM {schema}.session_parts LIMIT 1",
        "TRUNCATE {schema}.items", "DELETE FROM {schema}.items WHERE queue = 'b'",
        "DELETE FROM {schema}.sessions WHERE queue = 'b'",
        "UPDATE {schema}.queues SET parts = 1 WHERE name = 'a'",
        // its part acquisition's FOR SHARE needs UPDATE (paused); pausing is not its (v31)
        "UPDATE {schema}.queues SET paused = true WHERE name = 'a'",
        "SELECT {schema}.enqueue('b', 'x')", "SELECT * FROM {schema}.grants",
        "DELETE FROM {schema}.outbox",
        // a group of its own queue whose end item would go into b
        "INSERT INTO {schema}.groups (queue, id, end_queue, end_payload) "
        "VALUES ('a', 'evil', 'b', '{}')",
        // or one already there made to
        "UPDATE {schema}.groups SET end_queue = 'b' WHERE queue = 'a'"}) {
    EXPECT_EQ(Try(*c, refused), "42501") << refused;
  }
  EXPECT_EQ(Count("queues WHERE name = 'a' AND paused"), 0);
  EXPECT_EQ(Count("items WHERE queue = 'b'"), 20);
  EXPECT_EQ(Count("dead_items WHERE queue = 'b'"), 1);
  EXPECT_EQ(Count("session_parts WHERE queue = 'b'"), 2);
  EXPECT_EQ(Count("results WHERE queue = 'b'"), 0);
  // A worker of b under this role does not start: b does not exist for it,
  // and the message says it may only be hidden from it.
  testing::PartqResult other =
      Partq({"worker", "b", "--dsn", role_dsn, "--schema", schema_.name(), "--handler", "noop"});
  EXPECT_NE(other.code, 0);
  EXPECT_TRUE(absl::StrContains(other.err, "queue \"b\" is unknown in schema")) << other.err;
  EXPECT_TRUE(absl::StrContains(other.err, "or not one of this role's queues")) << other.err;

  a_worker.Signal(SIGTERM);
  EXPECT_TRUE(a_worker.Wait(absl::Seconds(30)).has_value());
  PartqOk({"revoke", "worker", w, "--queue", "a"});
  EXPECT_EQ(Try(*c, "SELECT count(*) FROM {schema}.items"), "42501");
  // Nothing the grant gave is left on any table or column, nor on a
  // sequence; USAGE on the schema stays, and the schema's version is
  // every role's to read (migration 41).
  EXPECT_EQ(schema_.QInt(absl::StrCat(
                "SELECT count(*) FROM pg_class c WHERE c.relnamespace = '{schema}'::regnamespace "
                "AND c.relname <> 'schema_migrations' "
                "AND c.relkind IN ('r', 'p', 'S') AND (has_any_column_privilege('",
                w,
                "', c.oid, 'SELECT, INSERT, UPDATE') OR (c.relkind <> 'S' AND "
                "has_table_privilege('",
                w,
                "', c.oid, 'DELETE')) OR (c.relkind = 'S' AND "
                "has_sequence_privilege('",
                w, "', c.oid, 'USAGE')))")),
            0);
  EXPECT_EQ(schema_.QInt(absl::StrCat("SELECT has_schema_privilege('", w,
                                      "', '{schema}'::regnamespace, 'USAGE')::int")),
            1);
}

// Issue 48, finding M3: a worker role held UPDATE and DELETE on the tables
// every queue shares, and either lets a role LOCK a table in any mode, so
// one worker could stop every queue of the schema. Since migration 39 it
// holds UPDATE on columns and no DELETE: every lock stronger than its
// INSERT's ROW EXCLUSIVE is refused on every table, and its deletes go
// through functions that touch only its queues' rows, which a role that is
// no worker may not call. Its workers still retry, dead-letter, hand parts
// over, take over a killed one's parts and leave, exactly once.
TEST_F(RolesTest, AWorkerRoleLocksNoTableYetItsWorkersRetryDeadLetterAndTakeOver) {
  QueueConfig f;
  f.name = "f";
  f.parts = 4;
  f.max_attempts = 2;
  f.session_ttl = absl::Seconds(2);
  ASSERT_TRUE(store_->CreateQueue(f).ok());
  const std::string w = NewRole("worker");
  const std::string p = NewRole("producer");
  PartqOk({"grant", "worker", w, "--queue", "f"});
  PartqOk({"grant", "producer", p, "--queue", "b"});
  NewItem of_b;
  of_b.payload = "b's";
  ASSERT_TRUE(store_->Enqueue("b", of_b).ok());

  auto c = As(w);
  const std::vector<std::string> tables = {"sessions",
                                           "session_parts",
                                           "items",
                                           "dead_items",
                                           "results",
                                           "part_claims",
                                           "groups",
                                           "cancelled_items",
                                           "kafka_offsets",
                                           "throughput",
                                           "schedules",
                                           "group_generations",
                                           "expiry_sweeps",
                                           "group_changes",
                                           "queues",
                                           "outbox",
                                           "schema_migrations",
                                           "item_acks",
                                           "claim_record_drops",
                                           "item_retries",
                                           "item_abandons"};
  for (const std::string& t : tables) {
    for (const char* mode : {"SHARE", "SHARE ROW EXCLUSIVE", "EXCLUSIVE", "ACCESS EXCLUSIVE"}) {
      const std::string lock = absl::StrCat("LOCK TABLE {schema}.", t, " IN ", mode, " MODE");
      EXPECT_EQ(Try(*c, lock), "42501") << lock;
    }
    // (The two views have no DELETE rule, which PostgreSQL says first.)
    const std::string del = absl::StrCat("DELETE FROM {schema}.", t);
    const std::string refused = Try(*c, del);
    EXPECT_TRUE(refused == "42501" ||
                (refused == "55000" && (t == "item_acks" || t == "claim_record_drops" ||
                                        t == "item_retries" || t == "item_abandons")))
        << del << ": " << refused;
  }
  // A role that is no worker may not delete through the functions at all.
  auto producer = As(p);
  for (const char* refused :
       {"SELECT {schema}.delete_items(NULL, ARRAY[1::bigint])",
        "INSERT INTO {schema}.item_acks (tids) VALUES ('{\"(0,1)\"}')",
        "SELECT {schema}.delete_rows('sessions', ARRAY['(0,1)'::tid])",
        "SELECT {schema}.drop_claim_records_of_mine(ARRAY['(0,1)'::tid], ARRAY[1::bigint])"}) {
    EXPECT_EQ(Try(*producer, refused), "42501") << refused;
  }
  EXPECT_EQ(Try(*c, "SELECT {schema}.delete_rows('queues', ARRAY['(0,1)'::tid])"), "22023");
  // Nor may it move a row's id (ahead, onto one another queue's enqueue or
  // ack will need), queue or part, nor write cancelled_items, which only a
  // cancel writes: the second review's findings.
  for (const char* refused :
       {"UPDATE {schema}.items SET id = id + 100", "UPDATE {schema}.results SET id = id + 100",
        "INSERT INTO {schema}.cancelled_items (id, queue) "
        "VALUES (nextval('{schema}.items_id_seq') + 5, 'f')",
        "UPDATE {schema}.dead_items SET id = id + 100", "UPDATE {schema}.items SET part = 0",
        "UPDATE {schema}.session_parts SET queue = 'f'"}) {
    EXPECT_EQ(Try(*c, refused), "42501") << refused;
  }
  EXPECT_EQ(Count("items WHERE queue = 'b'"), 1);

  // 200 items, every tenth failing: those are tried twice, then dead.
  for (int i = 0; i < 200; ++i) {
    NewItem item;
    item.payload = absl::StrCat(i % 10 == 0 ? "fail" : "ok", i);
    ASSERT_TRUE(store_->Enqueue("f", item).ok());
  }
  const std::string role_dsn = absl::StrCat(schema_.dsn(), " user=", w);
  auto worker = [&] {
    return std::make_unique<testing::ChildProcess>(std::vector<std::string>{
        testing::PartqBinary(), "worker", "f", "--dsn", role_dsn, "--schema", schema_.name(),
        "--handler", "sql:SELECT 1 / (CASE WHEN $2 LIKE 'fail%' THEN 0 ELSE 1 END)", "--quiet"});
  };
  auto first = worker();
  ASSERT_TRUE(testing::WaitUntil([&] { return Count("items WHERE queue = 'f'") == 0; }))
      << "the worker role did not drain its queue";
  EXPECT_EQ(Count("dead_items WHERE queue = 'f' AND attempts = 2"), 20);
  EXPECT_GE(Count("throughput WHERE queue = 'f'"), 1);
  // A second worker: the first hands it parts (release), the first is
  // killed, and the second takes its parts over (the expired session and
  // its claim records go) and drains what comes next.
  auto second = worker();
  ASSERT_TRUE(testing::WaitUntil([&] {
    return schema_.QInt(
               "SELECT count(DISTINCT session_id) FROM {schema}.session_parts "
               "WHERE queue = 'f'") == 2 &&
           Count("sessions WHERE queue = 'f'") == 2;
  })) << "the parts were not shared";
  first->Signal(SIGKILL);
  EXPECT_TRUE(first->Wait(absl::Seconds(10)).has_value());
  ASSERT_TRUE(testing::WaitUntil([&] {
    return Count("sessions WHERE queue = 'f'") == 1 &&
           Count("session_parts WHERE queue = 'f'") == 4;
  })) << "the killed worker's parts were not taken over";
  for (int i = 0; i < 50; ++i) {
    NewItem item;
    item.payload = absl::StrCat("ok", 1000 + i);
    ASSERT_TRUE(store_->Enqueue("f", item).ok());
  }
  ASSERT_TRUE(testing::WaitUntil([&] { return Count("items WHERE queue = 'f'") == 0; }));
  second->Signal(SIGTERM);
  EXPECT_TRUE(second->Wait(absl::Seconds(30)).has_value());
  EXPECT_EQ(Count("sessions WHERE queue = 'f'"), 0);
  EXPECT_EQ(Count("session_parts WHERE queue = 'f'"), 0);
  EXPECT_EQ(Count("part_claims WHERE queue = 'f'"), 0);
  EXPECT_EQ(Count("dead_items WHERE queue = 'f'"), 20);
  EXPECT_EQ(Count("items WHERE queue = 'b'"), 1);
}

// Issue 48, the third review: row-level security checks an ON CONFLICT DO
// UPDATE's existing row only after its WHERE, and a foreign key's check
// reads past it, so a worker of queue a could lock queue b's rows without
// seeing them and hold them for as long as its transaction lasted: b's
// item (its batch's ack waited), a static member's session (md5 of its
// queue and instance id: it could neither leave nor expire), a schedule
// by name. Migration 40 closes each, and the worker's own retries and
// takeover marks, which now go through rules, reach only its queue.
TEST_F(RolesTest, AWorkersUpsertsAndForeignKeysLockNoRowOfAnotherQueue) {
  const std::string w = NewRole("worker");
  PartqOk({"grant", "worker", w, "--queue", "a"});
  NewItem item;
  item.payload = "b's";
  ASSERT_TRUE(store_->Enqueue("b", item).ok());
  ASSERT_TRUE(store_->Enqueue("a", item).ok());
  const std::string of_b =
      std::to_string(schema_.QInt("SELECT id FROM {schema}.items WHERE queue = 'b'"));
  const std::string of_a =
      std::to_string(schema_.QInt("SELECT id FROM {schema}.items WHERE queue = 'a'"));
  schema_.Q("SELECT {schema}.add_schedule('b-hourly', 'b', 'x'::bytea, interval '1 hour')");
  schema_.Q(
      "INSERT INTO {schema}.sessions (id, queue, instance_id, host, pid, expires_at) "
      "VALUES (gen_random_uuid(), 'b', 'w1', 'h', 1, now() + interval '1 hour')");
  const std::string b_session = "md5('b/w1')::uuid";
  ASSERT_EQ(Count(absl::StrCat("sessions WHERE id = ", b_session)), 1)
      << "a static member's id is made from its queue and instance id";

  auto c = As(w);
  for (const std::string& refused :
       {absl::StrCat("INSERT INTO {schema}.items (id, queue, part, payload) VALUES (", of_b,
                     ", 'a', 0, '') ON CONFLICT (id) DO UPDATE SET attempts = 0 WHERE false"),
        absl::StrCat("INSERT INTO {schema}.results (id, queue) VALUES (", of_b,
                     ", 'a') ON CONFLICT (id) DO UPDATE SET result = NULL WHERE false"),
        absl::StrCat("INSERT INTO {schema}.dead_items (id, queue, part, attempts, payload) "
                     "VALUES (",
                     of_b,
                     ", 'a', 0, 1, '') "
                     "ON CONFLICT (id) DO UPDATE SET last_error = '' WHERE false"),
        std::string("INSERT INTO {schema}.schedules (name, queue, payload, every) "
                    "VALUES ('b-hourly', 'a', '', interval '1 hour') "
                    "ON CONFLICT (name) DO UPDATE SET error = NULL WHERE false"),
        absl::StrCat("INSERT INTO {schema}.session_parts (queue, part, session_id, epoch) "
                     "VALUES ('a', 1, ",
                     b_session, ", 1)"),
        std::string("UPDATE {schema}.session_parts SET session_id = gen_random_uuid()")}) {
    EXPECT_EQ(Try(*c, refused), "42501") << refused;
  }
  // An upsert by a session id of queue b's makes a session of a's with an
  // id of its own, static or dynamic, and locks nothing of b's.
  {
    pqxx::work held(*c);
    for (const char* instance : {"'w1'", "NULL"}) {
      held.exec(WithSchema(
          absl::StrCat("INSERT INTO {schema}.sessions (id, queue, instance_id, host, pid, "
                       "expires_at) VALUES (",
                       b_session, ", 'a', ", instance,
                       ", 'h', 1, now()) "
                       "ON CONFLICT (id) DO UPDATE SET host = 'taken' WHERE false"),
          schema_.name()));
    }
    pqxx::connection owner_conn(schema_.dsn());
    pqxx::work owner(owner_conn);
    EXPECT_EQ(owner
                  .exec(WithSchema(absl::StrCat("SELECT 1 FROM {schema}.sessions WHERE id = ",
                                                b_session, " FOR UPDATE NOWAIT"),
                                   schema_.name()))
                  .size(),
              1u);
    // The worker's own transaction sees its two new sessions under ids of
    // queue a's: the static one md5('a/w1'), the dynamic one another.
    EXPECT_EQ(held.exec(WithSchema("SELECT 1 FROM {schema}.sessions WHERE queue = 'a' "
                                   "AND id <> md5('b/w1')::uuid",
                                   schema_.name()))
                  .size(),
              2u);
    EXPECT_EQ(held.exec(WithSchema("SELECT 1 FROM {schema}.sessions WHERE id = md5('a/w1')::uuid",
                                   schema_.name()))
                  .size(),
              1u);
  }
  EXPECT_EQ(Count(absl::StrCat("sessions WHERE id = ", b_session, " AND host = 'h'")), 1);
  // Its retries and takeover marks go through rules, to its queue's items only.
  EXPECT_EQ(Try(*c, absl::StrCat("INSERT INTO {schema}.item_retries VALUES (", of_a,
                                 ", false, 0, 'once', 5), (", of_b, ", false, 0, 'once', 5)")),
            "");
  EXPECT_EQ(Try(*c, absl::StrCat("INSERT INTO {schema}.item_abandons VALUES (ARRAY[", of_a, ", ",
                                 of_b, "]::bigint[], 7)")),
            "");
  EXPECT_EQ(
      Count(absl::StrCat("items WHERE id = ", of_a,
                         " AND attempts = 2 AND abandoned_epoch = 7 AND last_error = 'once'")),
      1);
  EXPECT_EQ(
      Count(absl::StrCat("items WHERE id = ", of_b,
                         " AND attempts = 0 AND abandoned_epoch IS NULL AND last_error IS NULL")),
      1);
}

// Issue 48, the fourth review: a SECURITY DEFINER function runs as the
// owner for whoever may execute it, and PostgreSQL lets everyone execute a
// new function. move_group_generation() was open so: a producer attached
// it to a temporary table of its own and wrote group changes of another
// queue as the owner, and that queue's worker dropped its parts. Only the
// SQL API's functions (which check the caller's grant), the delete
// functions (which refuse a role that is no worker) and enqueue_group_end()
// (which finds only a group that is ending, a state only a role that may
// update the group's row can make) are open to everyone.
TEST_F(RolesTest, NoFunctionThatRunsAsTheOwnerIsOpenToEveryoneButTheApis) {
  const auto open = schema_.Q(
      "SELECT string_agg(DISTINCT p.proname, ',' ORDER BY p.proname) FROM pg_proc p "
      "JOIN pg_namespace n ON n.oid = p.pronamespace "
      "CROSS JOIN LATERAL aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a "
      "WHERE n.nspname = '{schema_name}' AND p.prosecdef AND a.grantee = 0 "
      "AND a.privilege_type = 'EXECUTE'");
  EXPECT_EQ(open[0][0].value_or(""),
            "add_schedule,cancel,cancel_by_dedup_key,cancel_items,delete_items,delete_rows,"
            "delete_schedule,drop_claim_records_of_mine,enqueue,enqueue_group_end,enqueue_item,"
            "enqueue_many,group_cancel,group_create,group_start,group_status,item_state,"
            "item_state_by_dedup_key,list_groups,list_schedules,prune,put_items");
  const std::string p = NewRole("producer");
  PartqOk({"grant", "producer", p, "--queue", "a"});
  auto c = As(p);
  EXPECT_EQ(Try(*c,
                "CREATE TEMP TABLE session_parts (queue text, part int, session_id uuid, epoch "
                "bigint); CREATE TRIGGER t AFTER INSERT ON pg_temp.session_parts REFERENCING NEW "
                "TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION "
                "{schema}.move_group_generation()"),
            "42501");
  EXPECT_EQ(Try(*c, "SELECT {schema}.item_of(1, 'b')"), "42501");
  EXPECT_EQ(Try(*c, "SELECT {schema}.item_fits(1, 'b', 0, 'x')"), "42501");
}

// Issue 48: a worker's new items went in under a policy, and each review
// found a row it let through that no enqueue makes (ids of another queue's
// finished items, times at +-infinity, a key in another part than its
// key's). Since migration 41 a worker writes no item row: put_items(), as
// the owner, makes each item's id, part and times as an enqueue does, and
// takes only what an enqueue takes.
TEST_F(RolesTest, AWorkerPutsItemsOnlyAsAnEnqueueMakesThem) {
  const std::string w = NewRole("worker");
  PartqOk({"grant", "worker", w, "--queue", "a"});
  NewItem item;
  item.payload = "b's";
  ASSERT_OK_AND_ASSIGN(EnqueueResult enqueued, store_->Enqueue("b", item));
  const int64_t done = enqueued.id;
  schema_.Q(absl::StrCat("DELETE FROM {schema}.items WHERE id = ", done));  // acked, no result

  auto c = As(w);
  for (const std::string& sql :
       {std::string("SELECT nextval('{schema}.items_id_seq'); "
                    "INSERT INTO {schema}.items (id, queue, part, payload) "
                    "VALUES (currval('{schema}.items_id_seq'), 'a', 0, 'own')"),
        absl::StrCat("INSERT INTO {schema}.items (id, queue, part, payload) VALUES (", done,
                     ", 'a', 0, '')"),
        std::string("INSERT INTO {schema}.items (queue, part, payload, run_at) "
                    "VALUES ('a', 0, 'x', 'infinity')")}) {
    EXPECT_EQ(Try(*c, sql), "42501") << sql;
  }
  ASSERT_OK_AND_ASSIGN(ItemState after, store_->GetItemState("b", done));
  EXPECT_EQ(after.kind, ItemState::Kind::kDone);

  // What it may: items of its queue as an enqueue makes them, the part its key's.
  const std::string put =
      "SELECT * FROM {schema}.put_items('a', ARRAY['k1', NULL], ARRAY['d1', NULL], "
      "ARRAY[0, 3]::smallint[], ARRAY[0, 1000000], ARRAY['x', 'y']::bytea[], "
      "ARRAY[NULL, NULL]::text[])";
  EXPECT_EQ(Try(*c, put), "");
  EXPECT_EQ(
      Count(absl::StrCat("items WHERE queue = 'a' AND key = 'k1' AND part = ", PartForKey("k1", 2),
                         " AND attempts = 0 AND run_at = enqueued_at AND dedup_key = 'd1'")),
      1);
  EXPECT_EQ(
      Count("items WHERE queue = 'a' AND key IS NULL AND priority = 3 AND "
            "run_at BETWEEN enqueued_at + interval '0.9 s' AND enqueued_at + interval '1.1 s'"),
      1);
  // The same dedup key again: the live item's id, as a duplicate.
  pqxx::work tx(*c);
  const pqxx::row dup = tx.exec1(
      WithSchema("SELECT id, duplicate FROM {schema}.put_items('a', ARRAY[NULL], ARRAY['d1'], "
                 "ARRAY[0]::smallint[], ARRAY[0], ARRAY['z']::bytea[], ARRAY[NULL]::text[])",
                 schema_.name()));
  tx.commit();
  EXPECT_TRUE(dup[1].as<bool>());
  EXPECT_EQ(dup[0].as<int64_t>(),
            schema_.QInt("SELECT id FROM {schema}.items WHERE dedup_key = 'd1'"));
  EXPECT_EQ(Count("items WHERE queue = 'a'"), 2);

  // Nor what an enqueue refuses: times a claim cannot turn into
  // microseconds (the fifth review), other queues, partq's own dedup keys.
  PartqOk({"queue", "set", "a", "--max-payload", "10"});
  for (const auto& [args, code] : std::vector<std::pair<std::string, std::string>>{
           {"'a', '{NULL}', '{NULL}', '{0}', '{-1}', '{x}', '{NULL}'", "22023"},
           {"'a', '{NULL}', '{NULL}', '{0}', '{9000000000000000}', '{x}', '{NULL}'", "22023"},
           {"'a', '{NULL}', '{NULL}', '{0}', '{0}', ARRAY['12345678901']::bytea[], '{NULL}'",
            "22023"},
           {"'a', '{NULL}', '{partq.group:a:g}', '{0}', '{0}', '{x}', '{NULL}'", "22023"},
           {"'a', '{NULL, NULL}', '{NULL}', '{0}', '{0}', '{x}', '{NULL}'", "22023"},
           {"'b', '{NULL}', '{NULL}', '{0}', '{0}', '{x}', '{NULL}'", "42501"},
           {"'nope', '{NULL}', '{NULL}', '{0}', '{0}', '{x}', '{NULL}'", "42501"}}) {
    const std::string sql = absl::StrCat("SELECT * FROM {schema}.put_items(", args, ")");
    EXPECT_EQ(Try(*c, sql), code) << sql;
  }
  EXPECT_EQ(Count("items WHERE queue = 'a'"), 2);
  // A queue it only produces to takes its items too (its policies hide that queue's row).
  PartqOk({"grant", "producer", w, "--queue", "b"});
  EXPECT_EQ(Try(*c,
                "SELECT * FROM {schema}.put_items('b', '{NULL}', '{NULL}', '{0}', '{0}', "
                "'{x}', '{NULL}')"),
            "");
  EXPECT_EQ(Count("items WHERE queue = 'b'"), 1);
  auto producer = As(NewRole("producer"));
  EXPECT_EQ(Try(*producer,
                "SELECT * FROM {schema}.put_items('b', '{NULL}', '{NULL}', '{0}', "
                "'{0}', '{x}', '{NULL}')"),
            "42501");
  // A snapshot older than its queue's delete writes nothing into the queue made again under
  // the name (the third review: the new queue got rows in parts it does not have).
  schema_.Q("DELETE FROM {schema}.items WHERE queue = 'b'");
  pqxx::work old(*c, "old");
  old.exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
  old.exec("SELECT 1");
  PartqOk({"queue", "delete", "b", "--force"});
  PartqOk({"queue", "create", "b", "--parts", "1"});
  PartqOk({"grant", "producer", w, "--queue", "b"});
  EXPECT_THROW(old.exec(WithSchema("SELECT * FROM {schema}.put_items('b', '{k}', '{NULL}', "
                                   "'{0}', '{0}', '{x}', '{NULL}')",
                                   schema_.name())),
               pqxx::serialization_failure);
  old.abort();
  EXPECT_EQ(Count("items WHERE queue = 'b'"), 0);
}

// The store of a worker role sends every new item through put_items()
// (migration 41): single and batch enqueues, grouped or not, a duplicate,
// an enqueue in the caller's transaction, a schedule's tick, into its own
// queue and one it only produces to (the first build sent put_item.sql a
// parameter too many, and no test ran the store as a worker role).
TEST_F(RolesTest, AWorkerRolesStorePutsItsItemsAndTicks) {
  const std::string w = NewRole("worker");
  PartqOk({"grant", "worker", w, "--queue", "a"});
  PartqOk({"grant", "producer", w, "--queue", "b"});
  PgOptions options = schema_.options();
  options.dsn = absl::StrCat(options.dsn, " user=", w);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, ConnectPg(options));

  NewItem keyed;
  keyed.payload = "keyed";
  keyed.key = "k1";
  keyed.dedup_key = "once";
  ASSERT_OK_AND_ASSIGN(EnqueueResult first, store->Enqueue("a", keyed));
  EXPECT_EQ(first.part, PartForKey("k1", 2));
  EXPECT_FALSE(first.duplicate);
  ASSERT_OK_AND_ASSIGN(EnqueueResult again, store->Enqueue("a", keyed));
  EXPECT_TRUE(again.duplicate);
  EXPECT_EQ(again.id, first.id);
  NewItem grouped;
  grouped.payload = "grouped";
  grouped.group = "g1";
  ASSERT_OK(store->Enqueue("a", grouped).status());
  NewItem plain;
  plain.payload = "into b";
  ASSERT_OK(store->Enqueue("b", plain).status());
  std::vector<NewItem> batch(3, plain);
  batch[1].group = "g1";
  batch[2].dedup_key = "once";
  ASSERT_OK_AND_ASSIGN(int64_t written, store->EnqueueBatch("a", batch));
  EXPECT_EQ(written, 2) << "the dedup key's live item stays";
  EXPECT_EQ(Count("items WHERE queue = 'a'"), 4);
  EXPECT_EQ(Count("items WHERE queue = 'a' AND group_id = 'g1' AND run_at = 'infinity'"), 2);
  EXPECT_EQ(schema_.QInt("SELECT pending FROM {schema}.groups WHERE id = 'g1'"), 2);
  EXPECT_EQ(Count("items WHERE queue = 'b'"), 1);
  {
    pqxx::connection c(options.dsn);
    pqxx::work tx(c);
    ASSERT_OK(EnqueueInTx(tx, options, "b", plain).status());
    tx.commit();
  }
  EXPECT_EQ(Count("items WHERE queue = 'b'"), 2);
  absl::StatusOr<EnqueueResult> refused = store->Enqueue("nope", plain);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
  EXPECT_TRUE(
      absl::StrContains(refused.status().message(), "is not its producer or operator or worker"))
      << refused.status();

  schema_.Q(
      "SELECT {schema}.add_schedule('tick', 'a', 'ticked', every => '1 hour', "
      "first_tick => now() - interval '1 second')");
  ASSERT_OK_AND_ASSIGN(FiredSchedules fired, store->FireSchedules("a"));
  EXPECT_EQ(fired.fired.size(), 1u);
  EXPECT_EQ(Count("items WHERE queue = 'a' AND payload = 'ticked'"), 1);
}

// A confined worker retries through item_retries' rule (migration 44) and
// dead-letters through delete_items(): the same Finish sent again after its
// retry committed (its COMMIT's answer lost), as a retry or as a dead
// letter, writes nothing and counts no second attempt.
TEST_F(RolesTest, AWorkerRolesRetrySentAgainCountsTheAttemptOnce) {
  const std::string w = NewRole("worker");
  PartqOk({"grant", "worker", w, "--queue", "a"});
  ASSERT_OK(store_->Enqueue("a", store_testing::Payload("x")).status());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, ConnectAs(w));
  store_testing::Member m = store_testing::JoinWith(*store, "a", store_testing::kAllParts);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store->Claim(store_testing::ClaimAll("a", m)));
  ASSERT_EQ(items.size(), 1u);
  const FinishBody retry =
      store_testing::OutcomesOf([](const Item&) { return Outcome::Kind::kRetry; });
  ASSERT_OK_AND_ASSIGN(FinishResult r,
                       store->Finish(store_testing::FinishOf("a", m, items), retry));
  EXPECT_EQ(r.retried, store_testing::Ids(items));
  const FinishBody dead =
      store_testing::OutcomesOf([](const Item&) { return Outcome::Kind::kDead; });
  for (const FinishBody* body : {&retry, &dead}) {
    ASSERT_OK_AND_ASSIGN(FinishResult again,
                         store->Finish(store_testing::FinishOf("a", m, items), *body));
    EXPECT_TRUE(again.retried.empty() && again.dead.empty());
    EXPECT_EQ(again.fenced, store_testing::Ids(items));
    EXPECT_EQ(Count("items WHERE queue = 'a' AND attempts = 1"), 1);
    EXPECT_EQ(Count("dead_items WHERE queue = 'a'"), 0);
  }
}

// A worker role's acks with the handler's results run pipelined (through
// item_acks' rule, as its acks without results do) and write its queue's
// results rows, each as the handler gave it.
TEST_F(RolesTest, AWorkerRolesAckWithResultsRunsPipelinedAndKeepsThem) {
  const std::string w = NewRole("worker");
  PartqOk({"grant", "worker", w, "--queue", "a"});
  for (int i = 0; i < 10; ++i) {
    NewItem item;
    item.payload = absl::StrCat("r", i);
    ASSERT_OK(store_->Enqueue("a", item).status());
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, ConnectAs(w));
  store_testing::Member m = store_testing::JoinWith(*store, "a", store_testing::kAllParts);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> items, store->Claim(store_testing::ClaimAll("a", m)));
  ASSERT_EQ(items.size(), 10u);
  const FinishBody body =
      store_testing::AckWithResults([](const Item& i) { return absl::StrCat("done ", i.payload); });
  std::vector<Item> first(items.begin(), items.begin() + 5), rest(items.begin() + 5, items.end());
  ASSERT_OK_AND_ASSIGN(FinishResult r1,
                       store->Finish(store_testing::FinishOf("a", m, first), body));
  EXPECT_EQ(r1.acked.size(), 5u);
  ASSERT_OK_AND_ASSIGN(FinishResult r2, store->Finish(store_testing::FinishOf("a", m, rest), body));
  EXPECT_EQ(r2.acked.size(), 5u);
  // What ran on the store's connection: the pipelined form with results,
  // and no general statement (which would have written the same rows after
  // a refused flight).
  std::optional<std::string> ran;
  FinishRequest look;
  look.queue = "a";
  FinishBody read_names = [&](Tx& tx,
                              absl::Span<const Item>) -> absl::StatusOr<std::vector<Outcome>> {
    auto rows = tx.Exec(
        "SELECT string_agg(name, ',' ORDER BY name) FROM pg_prepared_statements WHERE name IN "
        "('partq_pl_ack_results', 'ack', 'partq_pl_lean_ack_claim', 'partq_pl_finish')",
        {});
    if (!rows.ok()) return rows.status();
    ran = (*rows)[0][0];
    return std::vector<Outcome>{};
  };
  ASSERT_OK(store->Finish(look, read_names).status());
  EXPECT_EQ(ran, std::optional<std::string>("partq_pl_ack_results"));
  EXPECT_EQ(Count("items WHERE queue = 'a'"), 0);
  EXPECT_EQ(Count("results WHERE queue = 'a'"), 10);
  for (const Item& i : items) {
    ASSERT_OK_AND_ASSIGN(ItemState st, store->GetItemState("a", i.id));
    EXPECT_EQ(st.result, std::optional<std::string>(absl::StrCat("done ", i.payload)));
  }
}

// A producer role runs `partq enqueue` (migration 41: put_items() is open to
// every role and checks the grant, and the schema's version is readable):
// before, it stopped at "checking the schema". Only into its queues.
TEST_F(RolesTest, AProducerRoleEnqueuesWithTheCli) {
  const std::string p = NewRole("producer");
  PartqOk({"grant", "producer", p, "--queue", "a"});
  const std::string dsn = absl::StrCat(schema_.dsn(), " user=", p);
  PartqResult one =
      Partq({"enqueue", "a", "hello", "--key", "k1", "--dsn", dsn, "--schema", schema_.name()});
  EXPECT_EQ(one.code, 0) << one.err;
  PartqResult batch =
      Partq({"enqueue", "a", "--stdin", "--dsn", dsn, "--schema", schema_.name()}, "x\ny\n");
  EXPECT_EQ(batch.code, 0) << batch.err;
  EXPECT_EQ(Count(absl::StrCat("items WHERE queue = 'a' AND key = 'k1' AND part = ",
                               PartForKey("k1", 2))),
            1);
  EXPECT_EQ(Count("items WHERE queue = 'a'"), 3);
  PartqResult other = Partq({"enqueue", "b", "hello", "--dsn", dsn, "--schema", schema_.name()});
  EXPECT_NE(other.code, 0);
  EXPECT_TRUE(absl::StrContains(other.err, "is not its producer or operator or worker"))
      << other.err;
  EXPECT_EQ(Count("items WHERE queue = 'b'"), 0);
}

// Issue 48: `partq grant viewer` makes the console's read-only role
// (migration 35): it reads its queues' rows, no payload, result or header,
// no other queue's rows, and writes nothing. A role that is a worker of one
// queue and a viewer of another reads both and still writes only its own.
// A revoke leaves no column privilege behind.
TEST_F(RolesTest, AViewerReadsItsQueuesRowsButNoPayloadAndWritesNothing) {
  const std::string v = NewRole("viewer");
  const std::string wv = NewRole("worker_viewer");
  PartqOk({"grant", "viewer", v, "--queue", "a"});
  PartqOk({"grant", "worker", wv, "--queue", "a"});
  // A worker's table privileges would read a viewed queue's payloads: a
  // role is one or the other (migration 36).
  PartqResult mixed = Partq(
      {"grant", "viewer", wv, "--queue", "b", "--dsn", schema_.dsn(), "--schema", schema_.name()});
  EXPECT_NE(mixed.code, 0);
  EXPECT_TRUE(absl::StrContains(mixed.err,
                                "is a worker of queue \"a\": a role is a worker or a "
                                "viewer, not both"))
      << mixed.err;
  // A mix granted before version 36 (a grants row, as partq grant wrote it)
  // reads nothing of the viewed queue.
  schema_.Q(absl::StrCat("INSERT INTO {schema}.grants (queue, role, kind) VALUES ('b', '", wv,
                         "', 'viewer')"));
  for (const char* q : {"a", "b"}) {
    for (int i = 0; i < 5; ++i) {
      NewItem item;
      item.payload = absl::StrCat(q, "'s secret ", i);
      ASSERT_TRUE(store_->Enqueue(q, item).ok());
    }
  }
  auto rows = [&](pqxx::connection& c, const std::string& sql) -> int64_t {
    pqxx::work t(c);
    pqxx::result r = t.exec(WithSchema(sql, schema_.name()));
    t.commit();
    return r.affected_rows();
  };
  auto cv = As(v);
  EXPECT_EQ(rows(*cv, "SELECT id, key, attempts FROM {schema}.items"), 5) << "a's rows only";
  EXPECT_EQ(rows(*cv, "SELECT name FROM {schema}.queues"), 1);
  for (const char* refused :
       {"SELECT payload FROM {schema}.items", "SELECT headers FROM {schema}.dead_items",
        "SELECT result FROM {schema}.results", "SELECT end_payload FROM {schema}.groups",
        "SELECT * FROM {schema}.grants", "UPDATE {schema}.queues SET paused = true",
        "DELETE FROM {schema}.items", "INSERT INTO {schema}.results (id, queue) VALUES (1, 'a')",
        "SELECT {schema}.enqueue('a', 'x')", "SELECT {schema}.cancel('a', 1)"}) {
    EXPECT_EQ(Try(*cv, refused), "42501") << refused;
  }
  auto cwv = As(wv);
  EXPECT_EQ(rows(*cwv, "SELECT id, payload FROM {schema}.items WHERE queue = 'b'"), 0);
  EXPECT_EQ(rows(*cwv, "SELECT id FROM {schema}.items WHERE queue = 'a'"), 5);
  EXPECT_EQ(Try(*cwv, "DELETE FROM {schema}.items WHERE queue = 'b'"), "42501");
  EXPECT_EQ(Try(*cwv, "UPDATE {schema}.items SET attempts = 2147483647 WHERE queue = 'b'"),
            "42501");
  EXPECT_EQ(Try(*cwv, "DELETE FROM {schema}.sessions WHERE queue = 'b'"), "42501");
  EXPECT_EQ(Try(*cwv, "INSERT INTO {schema}.results (id, queue, result) VALUES (1, 'b', 'x')"),
            "42501");
  EXPECT_EQ(Try(*cwv, "SELECT {schema}.enqueue('b', 'x')"), "42501");
  EXPECT_EQ(Count("items WHERE queue = 'b' AND attempts = 0"), 5);

  PartqOk({"revoke", "viewer", v, "--queue", "a"});
  PartqOk({"revoke", "viewer", wv, "--queue", "b"});
  EXPECT_EQ(Try(*cv, "SELECT id FROM {schema}.items"), "42501");
  EXPECT_EQ(rows(*cwv, "SELECT id FROM {schema}.items WHERE queue = 'b'"), 0);
  EXPECT_EQ(rows(*cwv, "SELECT id FROM {schema}.items WHERE queue = 'a'"), 5) << "still a's worker";
  EXPECT_EQ(schema_.QInt(absl::StrCat(
                "SELECT count(*) FROM pg_class c WHERE c.relnamespace = '{schema}'::regnamespace "
                "AND c.relname <> 'schema_migrations' "  // every role's (migration 41)
                "AND c.relkind IN ('r', 'p') AND has_any_column_privilege('",
                v, "', c.oid, 'SELECT')")),
            0);
}

// A grant remakes the role's policies, which takes each table's exclusive
// lock; behind a transaction that has read a table (any role may), its
// wait queued every queue's enqueues and claims behind it (the second
// review). It now gives up after its lock timeout, says so, and works once
// that transaction ends.
TEST_F(RolesTest, AGrantBehindALongTransactionGivesUpRatherThanStallEveryQueue) {
  const std::string w = NewRole("worker");
  pqxx::connection reader(schema_.dsn());
  pqxx::work held(reader);
  held.exec(WithSchema("SELECT count(*) FROM {schema}.items", schema_.name()));
  const absl::Time start = absl::Now();
  PartqResult r = Partq(
      {"grant", "worker", w, "--queue", "a", "--dsn", schema_.dsn(), "--schema", schema_.name()});
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "lock timeout")) << r.err;
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  held.commit();
  PartqOk({"grant", "worker", w, "--queue", "a"});
}

// A viewer granted before schema version 35 (a grants row, as version 29's
// partq grant wrote it) reads its queue's rows once the schema is migrated.
TEST_F(RolesTest, AViewerGrantedBeforeVersion35ReadsItsQueueAfterTheUpgrade) {
  const std::string v = NewRole("old_viewer");
  const std::string old = absl::StrCat(schema_.name(), "_v34");
  absl::Cleanup drop = [&] { schema_.Q(absl::StrCat("DROP SCHEMA IF EXISTS ", old, " CASCADE")); };
  auto migrate = [&](std::vector<std::string> extra) { MigrateSchema(old, std::move(extra)); };
  migrate({"--to", "34"});
  schema_.Q(absl::StrCat("INSERT INTO ", old, ".queues (name, parts) VALUES ('a', 2), ('b', 2);",
                         "INSERT INTO ", old, ".grants (queue, role, kind) VALUES ('a', '", v,
                         "', 'viewer'); GRANT USAGE ON SCHEMA ", old, " TO ", v));
  auto c = As(v);
  EXPECT_EQ(Try(*c, absl::StrCat("SELECT name FROM ", old, ".queues")), "42501");
  migrate({});
  pqxx::work t(*c);
  pqxx::result r = t.exec(absl::StrCat("SELECT name FROM ", old, ".queues"));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0][0].as<std::string>(), "a");
}

// Migration 39 on a schema whose worker role was granted before it: the
// role's table UPDATE and DELETE go (it may LOCK nothing beyond ROW
// EXCLUSIVE any more), its column privileges come, and a worker under it
// drains its queue on the new statements.
TEST_F(RolesTest, AWorkerGrantedBeforeVersion39LocksNothingAfterTheUpgradeAndDrains) {
  const std::string w = NewRole("old_worker");
  const std::string old = absl::StrCat(schema_.name(), "_v38");
  absl::Cleanup drop = [&] { schema_.Q(absl::StrCat("DROP SCHEMA IF EXISTS ", old, " CASCADE")); };
  auto migrate = [&](std::vector<std::string> extra) { MigrateSchema(old, std::move(extra)); };
  migrate({"--to", "38"});
  // What `partq grant worker` gave before version 39.
  schema_.Q(absl::StrCat(
      "INSERT INTO ", old, ".queues (name, parts) VALUES ('a', 2);", "INSERT INTO ", old,
      ".grants (queue, role, kind, role_oid) VALUES ('a', '", w, "', 'worker', '", w,
      "'::regrole);", "GRANT USAGE ON SCHEMA ", old, " TO ", w, ";",
      "GRANT SELECT, INSERT, UPDATE, DELETE ON ", old, ".sessions, ", old, ".session_parts, ", old,
      ".items, ", old, ".dead_items, ", old, ".results, ", old, ".part_claims, ", old,
      ".cancelled_items, ", old, ".kafka_offsets, ", old, ".throughput, ", old, ".schedules, ", old,
      ".group_generations, ", old, ".expiry_sweeps, ", old, ".group_changes TO ", w, ";",
      "GRANT SELECT, INSERT, UPDATE (pending, done, dead, cancelled, ended_at, end_error, "
      "end_item) ON ",
      old, ".groups TO ", w, "; GRANT SELECT, UPDATE (paused) ON ", old, ".queues TO ", w,
      "; GRANT SELECT ON ", old, ".schema_migrations TO ", w, "; GRANT INSERT ON ", old,
      ".outbox TO ", w, "; GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA ", old, " TO ", w));
  auto c = As(w);
  const std::string lock = absl::StrCat("LOCK TABLE ", old, ".items IN ACCESS EXCLUSIVE MODE");
  EXPECT_EQ(Try(*c, lock), "") << "before the upgrade it could";
  migrate({});
  EXPECT_EQ(Try(*c, lock), "42501");
  EXPECT_EQ(Try(*c, absl::StrCat("DELETE FROM ", old, ".items")), "42501");
  schema_.Q(absl::StrCat("SELECT ", old, ".enqueue('a', 'p' || g) FROM generate_series(1, 100) g"));
  testing::ChildProcess worker({testing::PartqBinary(), "worker", "a", "--dsn",
                                absl::StrCat(schema_.dsn(), " user=", w), "--schema", old,
                                "--handler", "noop", "--quiet"});
  EXPECT_TRUE(testing::WaitUntil([&] {
    return schema_.QInt(absl::StrCat("SELECT count(*) FROM ", old, ".items")) == 0;
  })) << "the upgraded worker role did not drain its queue";
  worker.Signal(SIGTERM);
  EXPECT_TRUE(worker.Wait(absl::Seconds(30)).has_value());
  EXPECT_EQ(schema_.QInt(absl::StrCat("SELECT count(*) FROM ", old, ".sessions")), 0);
}

// Issue 48: a confined worker writes Kafka messages (outbox rows, which
// `partq bridge publish` sends) only for the topics granted to it with
// `partq grant publish` (migration 34); before, for any topic at all. The
// schema's owner, and roles without a worker grant, are as before.
TEST_F(RolesTest, AWorkerRolePublishesOnlyToTheTopicsGrantedToIt) {
  const std::string w = NewRole("worker");
  PartqOk({"grant", "worker", w, "--queue", "a"});
  auto c = As(w);
  const std::string to_events =
      "INSERT INTO {schema}.outbox (topic, payload) VALUES ('events', 'x')";
  const std::string to_payments =
      "INSERT INTO {schema}.outbox (topic, payload) VALUES ('payments', 'x')";
  EXPECT_EQ(Try(*c, to_events), "42501");
  try {
    pqxx::work t(*c);
    t.exec(WithSchema(to_payments, schema_.name()));
    ADD_FAILURE() << "a confined worker wrote a message for a topic not granted to it";
  } catch (const pqxx::sql_error& e) {
    EXPECT_TRUE(absl::StrContains(
        e.what(), absl::StrCat("permission denied for Kafka topic \"payments\": role \"", w,
                               "\" is a confined worker")))
        << e.what();
  }
  EXPECT_EQ(PartqOk({"grant", "publish", w, "--topic", "events,audit"}),
            absl::StrCat("role \"", w, "\" is a publisher to Kafka topics events, audit as a ",
                         "worker in schema \"", schema_.name(), "\"\n"));
  EXPECT_EQ(Try(*c, to_events), "");
  EXPECT_EQ(Try(*c, to_payments), "42501");
  // An id of its choosing, ahead of the sequence, would fail the ack that
  // later needs it (the second review): the row takes the next id instead.
  EXPECT_EQ(Try(*c,
                "INSERT INTO {schema}.outbox (id, topic, payload) OVERRIDING SYSTEM VALUE "
                "VALUES (1000000, 'events', 'x')"),
            "");
  EXPECT_EQ(Count("outbox WHERE id >= 1000000"), 0);
  schema_.Q(
      "DELETE FROM {schema}.outbox WHERE payload = 'x' AND id > (SELECT min(id) FROM "
      "{schema}.outbox)");
  const std::string listed = PartqOk({"grants"});
  EXPECT_TRUE(absl::StrContains(listed, "topic:events")) << listed;
  EXPECT_TRUE(absl::StrContains(PartqOk({"grants", "--json"}), "\"topic\": \"audit\""));

  // A worker of a under the role, whose handler publishes to events.
  for (int i = 0; i < 50; ++i) {
    NewItem item;
    item.payload = absl::StrCat("a", i);
    ASSERT_TRUE(store_->Enqueue("a", item).ok());
  }
  testing::ChildProcess worker({testing::PartqBinary(), "worker", "a", "--dsn",
                                absl::StrCat(schema_.dsn(), " user=", w), "--schema",
                                schema_.name(), "--handler", "publish:events", "--quiet"});
  ASSERT_TRUE(testing::WaitUntil([&] { return Count("items WHERE queue = 'a'") == 0; }))
      << "the worker role did not drain its queue";
  worker.Signal(SIGTERM);
  EXPECT_TRUE(worker.Wait(absl::Seconds(30)).has_value());
  EXPECT_EQ(Count("outbox WHERE topic = 'events'"), 51) << "50 messages and the test's own";
  EXPECT_EQ(Count("dead_items"), 0);

  EXPECT_EQ(PartqOk({"revoke", "publish", w, "--topic", "events"}),
            absl::StrCat("role \"", w, "\" is no longer a publisher to Kafka topic events as a ",
                         "worker (1 grant removed)\n"));
  EXPECT_EQ(Try(*c, to_events), "42501");
  // The owner publishes anywhere; so does a role that is no confined worker.
  schema_.Q(to_payments);
  PartqOk({"revoke", "worker", w, "--queue", "a"});
  schema_.Q(absl::StrCat("GRANT INSERT ON {schema}.outbox TO ", w));
  EXPECT_EQ(Try(*c, to_payments), "");
  // Bad input is named.
  PartqResult bad = Partq(
      {"grant", "publish", w, "--queue", "a", "--dsn", schema_.dsn(), "--schema", schema_.name()});
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(absl::StrContains(bad.err, "--queue does not go with publish")) << bad.err;
  bad = Partq({"grant", "publish", w, "--topic", "bad topic", "--dsn", schema_.dsn(), "--schema",
               schema_.name()});
  EXPECT_NE(bad.code, 0);
  EXPECT_EQ(Count("topic_grants"), 1) << "audit's grant is left, nothing else";
}

// A group whose end item cannot be enqueued, as the worker acks its last
// item, ends with the reason in end_error and its items' acks go through:
// an end payload over the end queue's limit (22023), an acking worker
// without the right to produce to the end queue (42501). Before, the ack
// of the last item failed again and again, its batch with it.
TEST_F(RolesTest, AGroupWhoseEndItemCannotBeEnqueuedEndsWithTheReasonAndTheAcksGoOn) {
  const std::string w = NewRole("worker");
  PartqOk({"grant", "worker", w, "--queue", "a"});
  PartqOk({"grant", "producer", w, "--queue", "b"});
  QueueConfig c;
  c.name = "c";
  c.parts = 1;
  ASSERT_TRUE(store_->CreateQueue(c).ok());
  PartqOk({"queue", "set", "b", "--max-payload", "50"});
  schema_.Q("SELECT {schema}.group_create('a', 'too-big', 'b', '{\"note\": \"x\"}')");
  schema_.Q("SELECT {schema}.group_create('a', 'no-right', 'c')");
  // And two that end as they should, into d (produced to) and into a (the
  // fourth review: migration 40 had taken the UPDATE that stamps the end
  // item from workers).
  c.name = "d";
  ASSERT_TRUE(store_->CreateQueue(c).ok());
  PartqOk({"grant", "producer", w, "--queue", "d"});
  schema_.Q("SELECT {schema}.group_create('a', 'into-d', 'd')");
  schema_.Q("SELECT {schema}.group_create('a', 'into-a', 'a')");
  for (const char* g : {"too-big", "no-right", "into-d", "into-a"}) {
    for (int i = 0; i < 3; ++i) {
      schema_.Q(absl::StrCat("SELECT {schema}.enqueue('a', 'x', group_id => '", g, "')"));
    }
    schema_.Q(absl::StrCat("SELECT {schema}.group_start('a', '", g, "')"));
  }
  testing::ChildProcess worker({testing::PartqBinary(), "worker", "a", "--dsn",
                                absl::StrCat(schema_.dsn(), " user=", w), "--schema",
                                schema_.name(), "--handler", "noop", "--quiet"});
  ASSERT_TRUE(testing::WaitUntil([&] {
    return Count("items WHERE queue = 'a'") == 0 && Count("groups WHERE ended_at IS NOT NULL") == 4;
  })) << "the group's items were not acked";
  for (const char* g : {"into-d", "into-a"}) {
    EXPECT_EQ(Count(absl::StrCat("groups WHERE id = '", g,
                                 "' AND done = 3 AND end_error IS NULL AND end_item IS NOT NULL")),
              1)
        << g << ": "
        << schema_
               .Q(absl::StrCat("SELECT end_error FROM {schema}.groups WHERE id = '", g, "'"))[0][0]
               .value_or("");
  }
  EXPECT_EQ(Count("items WHERE queue = 'd' AND dedup_key = 'partq.group:a:into-d'"), 1);
  EXPECT_EQ(Count("dead_items"), 0);
  EXPECT_EQ(Count("groups WHERE id = 'too-big' AND done = 3 AND end_item IS NULL AND "
                  "end_error LIKE 'payload is % bytes; the limit is 50 %'"),
            1)
      << schema_.Q("SELECT end_error FROM {schema}.groups WHERE id = 'too-big'")[0][0].value_or("");
  EXPECT_EQ(Count("groups WHERE id = 'no-right' AND done = 3 AND end_item IS NULL AND "
                  "end_error LIKE 'permission denied for queue \"c\"%'"),
            1)
      << schema_.Q("SELECT end_error FROM {schema}.groups WHERE id = 'no-right'")[0][0].value_or(
             "");
  EXPECT_EQ(Count("items WHERE queue IN ('b', 'c')"), 0);
}

// The fourth review: a producer of a group's end queue enqueued, under the
// dedup key of the group's end item, a look-alike first, and the group took
// it for its end item. 'partq.' dedup keys are partq's own now: the SQL API
// and a worker's own inserts refuse them, and only a group that is ending
// enqueues its end item.
TEST_F(RolesTest, OnlyAnEndingGroupEnqueuesItsEndItem) {
  const std::string p = NewRole("producer");
  const std::string w = NewRole("worker");
  PartqOk({"grant", "producer", p, "--queue", "b"});
  PartqOk({"grant", "worker", w, "--queue", "b"});
  auto cp = As(p);
  for (const char* forged :
       {"SELECT {schema}.enqueue_item('b', 'forged', dedup_key => 'partq.group:a:g')",
        "SELECT {schema}.enqueue('b', 'forged'::bytea, dedup_key => 'partq.group:a:g')",
        "SELECT {schema}.enqueue_many('b', ARRAY['x', 'forged'], "
        "dedup_keys => ARRAY['fine', 'partq.group:a:g'])"}) {
    EXPECT_EQ(Try(*cp, forged), "22023") << forged;
  }
  EXPECT_EQ(Try(*cp, "SELECT {schema}.enqueue('b', 'fine', dedup_key => 'partq-like')"), "");
  auto cw = As(w);
  EXPECT_EQ(Try(*cw,
                "SELECT nextval('{schema}.items_id_seq'); "
                "INSERT INTO {schema}.items (id, queue, part, payload, dedup_key) VALUES "
                "(currval('{schema}.items_id_seq'), 'b', 0, 'forged', 'partq.group:a:g')"),
            "42501");
  schema_.Q("SELECT {schema}.group_create('a', 'g', 'b', '{\"real\": true}')");
  schema_.Q("SELECT {schema}.enqueue('a', 'x', group_id => 'g')");
  EXPECT_EQ(Try(*cw, "SELECT {schema}.enqueue_group_end('a', 'g')"), "22023");
  schema_.Q("SELECT {schema}.group_start('a', 'g')");
  schema_.Q("DELETE FROM {schema}.items WHERE queue = 'a'");
  schema_.Q("SELECT {schema}.group_end('a', 'g')");
  EXPECT_EQ(Count("items WHERE queue = 'b' AND dedup_key = 'partq.group:a:g' AND "
                  "convert_from(payload, 'UTF8')::jsonb -> 'payload' = '{\"real\": true}'"),
            1);
  EXPECT_EQ(Count("groups WHERE id = 'g' AND end_item IS NOT NULL AND end_error IS NULL"), 1);
  // A role given the tables' privileges by hand (before migration 29's grants) ends a group
  // with its end item too (the third review: only worker roles could, for a moment).
  const std::string legacy = NewRole("legacy");
  schema_.Q(absl::StrCat("GRANT USAGE ON SCHEMA {schema} TO ", legacy,
                         "; GRANT ALL ON ALL TABLES IN SCHEMA {schema} TO ", legacy,
                         "; GRANT ALL ON ALL SEQUENCES IN SCHEMA {schema} TO ", legacy));
  schema_.Q("SELECT {schema}.group_create('a', 'h', 'a')");
  schema_.Q("SELECT {schema}.enqueue('a', 'x', group_id => 'h')");
  schema_.Q("SELECT {schema}.group_start('a', 'h')");
  schema_.Q("DELETE FROM {schema}.items WHERE queue = 'a'");
  auto cl = As(legacy);
  EXPECT_EQ(Try(*cl, "SELECT {schema}.group_end('a', 'h')"), "");
  EXPECT_EQ(Count("groups WHERE id = 'h' AND end_item IS NOT NULL AND end_error IS NULL"), 1);
}

// The third review: a confined worker inserted items of another queue's
// group itself, not counted in the group, which then ended early (its end
// item saying done of items that had not run) and ran them before its
// start. Its grouped items now go in only through put_items() (migration
// 41; insert_grouped_items() of migration 40 before), which holds the
// group, counts them and decides which wait for the start.
TEST_F(RolesTest, AWorkersItemsOfAGroupCountInTheGroup) {
  const std::string w = NewRole("worker");
  PartqOk({"grant", "worker", w, "--queue", "a"});
  PartqOk({"grant", "producer", w, "--queue", "b"});
  schema_.Q("SELECT {schema}.group_create('b', 'k', 'b')");
  schema_.Q("SELECT {schema}.enqueue('b', 'real', group_id => 'k')");
  auto c = As(w);
  EXPECT_EQ(Try(*c,
                "INSERT INTO {schema}.items (id, queue, part, payload, group_id) "
                "VALUES (nextval('{schema}.items_id_seq'), 'b', 0, 'junk', 'k')"),
            "42501");
  const std::string put_two =
      "SELECT * FROM {schema}.put_items('b', ARRAY[NULL, NULL], ARRAY[NULL, NULL], "
      "ARRAY[0, 0]::smallint[], ARRAY[0, 0], ARRAY['one', 'two']::bytea[], ARRAY['k', 'k'])";
  EXPECT_EQ(Try(*c, put_two), "");
  EXPECT_EQ(Count("groups WHERE id = 'k' AND pending = 3 AND started_at IS NULL"), 1);
  EXPECT_EQ(Count("items WHERE queue = 'b' AND group_id = 'k' AND run_at = 'infinity'"), 3)
      << "items of a group not started wait for its start";
  // A group it makes in the same call counts its items too (the fourth review).
  EXPECT_EQ(Try(*c,
                "SELECT * FROM {schema}.put_items('b', ARRAY[NULL, NULL, NULL], "
                "ARRAY[NULL, NULL, NULL], ARRAY[0, 0, 0]::smallint[], ARRAY[0, 0, 0], "
                "ARRAY['j', 'k', 'l']::bytea[], ARRAY['new', 'new', 'new'])"),
            "");
  EXPECT_EQ(Count("groups WHERE id = 'new' AND pending = 3"), 1);
  // No delay for an item of a group (it runs when its group starts), no queue not granted,
  // nor migration 40's function, which let the caller choose parts and times (gone since 41).
  EXPECT_EQ(Try(*c,
                "SELECT * FROM {schema}.put_items('b', '{NULL}', '{NULL}', '{0}', '{1}', "
                "'{x}', '{k}')"),
            "22023");
  EXPECT_EQ(Try(*c,
                "SELECT * FROM {schema}.put_items('c', '{NULL}', '{NULL}', '{0}', '{0}', "
                "'{x}', '{k}')"),
            "42501");
  EXPECT_EQ(Try(*c,
                "SELECT * FROM {schema}.insert_grouped_items('b', "
                "ARRAY[nextval('{schema}.items_id_seq')], ARRAY[1], ARRAY['k1'], ARRAY[NULL], "
                "ARRAY[0]::smallint[], ARRAY[-86400000000]::bigint[], ARRAY['78'], ARRAY[NULL], "
                "ARRAY[false])"),
            "42883");
  EXPECT_EQ(Try(*c, "SELECT {schema}.reserve_item_ids(1)"), "42501");
}

// The second review of issue 48 (migration 36): a worker role's bounds
// outlive its queue's delete and its name's change, follow every change of
// its grants, and its direct writes are what a worker's may be.
TEST_F(RolesTest, AConfinedRoleStaysConfinedWhenItsQueueGoesItsNameChangesOrItsGrantsChange) {
  auto rows = [&](pqxx::connection& c, const std::string& sql) -> int64_t {
    pqxx::work t(c);
    pqxx::result r = t.exec(WithSchema(sql, schema_.name()));
    t.commit();
    return r.affected_rows();
  };
  const std::vector<std::string> api = {
      "SELECT {schema}.enqueue('b', 'x')",
      "SELECT * FROM {schema}.item_state_by_dedup_key('b', 'd')",
      "SELECT * FROM {schema}.cancel_by_dedup_key('b', 'd')",
      "SELECT * FROM {schema}.prune('b', '0s', true)",
      "INSERT INTO {schema}.outbox (topic, payload) VALUES ('payments', 'x')"};
  // Its queue deleted: the role reaches nothing, and a queue made again
  // under the name is not its.
  const std::string w = NewRole("worker");
  PartqOk({"queue", "create", "c", "--parts", "2"});
  PartqOk({"grant", "worker", w, "--queue", "c"});
  PartqOk({"queue", "delete", "c", "--force"});
  auto cw = As(w);
  for (const std::string& sql : api) EXPECT_EQ(Try(*cw, sql), "42501") << sql;
  PartqOk({"queue", "create", "c", "--parts", "2"});
  PartqOk({"enqueue", "c", "the new tenant's secret"});
  EXPECT_EQ(rows(*cw, "SELECT payload FROM {schema}.items"), 0);
  EXPECT_EQ(rows(*cw, "UPDATE {schema}.queues SET paused = true"), 0);
  EXPECT_EQ(Count("queues WHERE paused"), 0);

  // Renamed: its grants name its old name, and it is confined still.
  const std::string r = NewRole("renamed");
  PartqOk({"grant", "worker", r, "--queue", "a"});
  schema_.Q(absl::StrCat("ALTER ROLE ", r, " RENAME TO ", r, "_x"));
  roles_.back() = r + "_x";
  auto cr = As(r + "_x");
  for (const std::string& sql : api) EXPECT_EQ(Try(*cr, sql), "42501") << sql;

  // A producer grant opens its items into b (through put_items(), migration
  // 41; never a row of its own), and its revoke closes them; no result or
  // dead item of another queue's item.
  const std::string p = NewRole("worker_producer");
  PartqOk({"grant", "worker", p, "--queue", "a"});
  PartqOk({"queue", "set", "b", "--max-payload", "100"});
  auto cp = As(p);
  const std::string into_b =
      "SELECT * FROM {schema}.put_items('b', '{NULL}', '{NULL}', '{0}', '{0}', '{x}', '{NULL}')";
  EXPECT_EQ(Try(*cp, into_b), "42501");
  PartqOk({"grant", "producer", p, "--queue", "b"});
  EXPECT_EQ(Try(*cp, into_b), "");
  EXPECT_EQ(Try(*cp,
                "SELECT * FROM {schema}.put_items('b', '{NULL}', '{NULL}', '{0}', '{0}', "
                "ARRAY[convert_to(repeat('B', 101), 'UTF8')], '{NULL}')"),
            "22023");
  for (const char* refused :
       {"INSERT INTO {schema}.items (queue, part, payload) VALUES ('b', 0, 'x')",
        "INSERT INTO {schema}.items (id, queue, part, payload) VALUES "
        "(9000000000000000000, 'a', 0, 'x')",
        "INSERT INTO {schema}.results (id, queue) "
        "SELECT id, 'a' FROM generate_series(1, 100) id",
        "INSERT INTO {schema}.dead_items (id, queue, part, priority, attempts, enqueued_at, "
        "last_error, payload) VALUES (1, 'a', 0, 0, 1, now(), 'e', 'x')"}) {
    EXPECT_EQ(Try(*cp, refused), "42501") << refused;
  }
  PartqOk({"revoke", "producer", p, "--queue", "b"});
  EXPECT_EQ(Try(*cp, into_b), "42501");
  EXPECT_EQ(Count("items WHERE queue = 'b'"), 1);

  // And the role's own acks record their results and dead items still.
  PartqOk({"queue", "create", "d", "--parts", "2", "--max-attempts", "1"});
  PartqOk({"grant", "worker", p, "--queue", "d"});
  for (int i = 0; i < 20; ++i) {
    NewItem item;
    item.payload = absl::StrCat("a", i);
    item.dedup_key = absl::StrCat("a-", i);
    ASSERT_TRUE(store_->Enqueue("a", item).ok());
    item.dedup_key = absl::StrCat("d-", i);
    ASSERT_TRUE(store_->Enqueue("d", item).ok());
  }
  const std::string dsn = absl::StrCat(schema_.dsn(), " user=", p);
  testing::ChildProcess acks({testing::PartqBinary(), "worker", "a", "--dsn", dsn, "--schema",
                              schema_.name(), "--handler", "noop", "--quiet"});
  testing::ChildProcess dies({testing::PartqBinary(), "worker", "d", "--dsn", dsn, "--schema",
                              schema_.name(), "--handler", "fail:1", "--quiet"});
  ASSERT_TRUE(testing::WaitUntil([&] { return Count("items WHERE queue IN ('a', 'd')") == 0; },
                                 absl::Seconds(30)))
      << "the worker role did not finish its queues";
  for (testing::ChildProcess* c : {&acks, &dies}) {
    c->Signal(SIGTERM);
    EXPECT_TRUE(c->Wait(absl::Seconds(30)).has_value());
  }
  EXPECT_EQ(Count("results WHERE queue = 'a' AND dedup_key LIKE 'a-%'"), 20);
  EXPECT_EQ(Count("dead_items WHERE queue = 'd'"), 20);
  // Its last worker grant revoked, the role is confined no longer, and no
  // policy of it is left.
  PartqOk({"revoke", "worker", p, "--queue", "a,d"});
  EXPECT_EQ(schema_.QInt(absl::StrCat("SELECT count(*) FROM pg_policy y JOIN pg_roles r ON "
                                      "y.polname LIKE 'worker\\_' || r.oid || '\\_%' "
                                      "WHERE r.rolname = '",
                                      p, "'")),
            0);
  EXPECT_EQ(Count(absl::StrCat("confined_roles c JOIN pg_roles r ON r.oid = c.role_oid WHERE "
                               "r.rolname = '",
                               p, "'")),
            0);
}

// A worker role granted CREATE for its own record table could make one
// under the name another worker's record:TABLE uses, with a trigger that
// ran as that worker's role (the schema's owner's, in the review). Such a
// table is refused; the role's own worker writes into its own.
TEST_F(RolesTest, ARecordTableAnotherRoleMadeIsNotWrittenIntoByThisOne) {
  const std::string w = WorkerThatMayCreate();
  auto cw = As(w);
  ASSERT_EQ(Try(*cw,
                "CREATE TABLE {schema}.effects (item_id bigint NOT NULL, session_id uuid "
                "NOT NULL, acked_at timestamptz NOT NULL DEFAULT now())"),
            "");
  PartqOk({"enqueue", "a", "one"});
  PartqOk({"enqueue", "b", "secret"});
  PartqResult owners = Partq({"worker", "b", "--dsn", schema_.dsn(), "--schema", schema_.name(),
                              "--handler", "record:effects"});
  EXPECT_NE(owners.code, 0);
  EXPECT_TRUE(absl::StrContains(
      owners.err, absl::StrCat("belongs to role \"", w, "\", neither this worker's role")))
      << owners.err;
  EXPECT_EQ(Count("items WHERE queue = 'b'"), 1) << "nothing of b was handled";
  testing::ChildProcess own({testing::PartqBinary(), "worker", "a", "--dsn",
                             absl::StrCat(schema_.dsn(), " user=", w), "--schema", schema_.name(),
                             "--handler", "record:effects", "--quiet"});
  EXPECT_TRUE(testing::WaitUntil([&] { return Count("effects") == 1; }))
      << "the role's own worker did not record into its own table";
  own.Signal(SIGTERM);
  EXPECT_TRUE(own.Wait(absl::Seconds(30)).has_value());
  EXPECT_EQ(Count("items"), 1);
}

// The review of 2026-12-06: put_items(), which runs as the owner, called
// check_put_items(bigint, ...) with an int, so a worker that may create in
// the schema made check_put_items(int, ...), the better match, and ran as
// the owner. That form is now the schema's own (migration 43), and partq
// grant refuses, partq migrate and a worker warn, while a role other than
// the owner may create in the schema (no role is confined while one may).
TEST_F(RolesTest, ARoleThatMayCreateInTheSchemaIsRefusedAndCannotPlantAFunction) {
  const std::string w = WorkerThatMayCreate();
  // The overload put_items() would have picked: it exists already.
  auto cw = As(w);
  EXPECT_EQ(Try(*cw,
                "CREATE FUNCTION {schema}.check_put_items(lim int, keys text[], dedups text[], "
                "prios smallint[], delays bigint[], payloads bytea[], grps text[]) RETURNS void "
                "LANGUAGE sql AS 'SELECT'"),
            "42723")  // duplicate_function
      << "a role that may create in the schema planted the overload put_items() calls";
  EXPECT_EQ(Try(*cw,
                "SELECT * FROM {schema}.put_items('a', ARRAY[NULL]::text[], ARRAY[NULL]::text[], "
                "ARRAY[0]::smallint[], ARRAY[0]::bigint[], ARRAY['x'::bytea], "
                "ARRAY[NULL]::text[])"),
            "");
  EXPECT_EQ(Count("items WHERE queue = 'a'"), 1);

  // partq grant refuses, naming the role and the REVOKE; migrate and a
  // worker say so.
  const std::string p = NewRole("producer");
  std::vector<std::string> grant = {"grant", "producer",    p,          "--queue",     "b",
                                    "--dsn", schema_.dsn(), "--schema", schema_.name()};
  PartqResult refused = Partq(grant);
  EXPECT_NE(refused.code, 0);
  const std::string revoke =
      absl::StrCat("REVOKE CREATE ON SCHEMA \"", schema_.name(), "\" FROM \"", w, "\"");
  EXPECT_TRUE(absl::StrContains(refused.err, absl::StrCat("role \"", w, "\" may create objects")))
      << refused.err;
  EXPECT_TRUE(absl::StrContains(refused.err, revoke)) << refused.err;
  EXPECT_EQ(Count(absl::StrCat("grants WHERE role = '", p, "'")), 0);
  PartqResult migrated = Partq({"migrate", "--dsn", schema_.dsn(), "--schema", schema_.name()});
  EXPECT_EQ(migrated.code, 0) << migrated.err;
  EXPECT_TRUE(absl::StrContains(migrated.err, revoke)) << migrated.err;
  const std::string log = absl::StrCat(::testing::TempDir(), "/creators_worker_", getpid(), ".log");
  std::remove(log.c_str());
  testing::ChildProcess worker(
      {testing::PartqBinary(), "worker", "a", "--dsn", absl::StrCat(schema_.dsn(), " user=", w),
       "--schema", schema_.name(), "--handler", "noop"},
      {}, log);
  EXPECT_TRUE(testing::WaitUntil([&] { return Count("items WHERE queue = 'a'") == 0; }));
  worker.Signal(SIGTERM);
  ASSERT_TRUE(worker.Wait(absl::Seconds(30)).has_value());
  std::ifstream in(log);
  const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(absl::StrContains(said, revoke)) << said;
  std::remove(log.c_str());

  // Every role, through PUBLIC: said as such.
  schema_.Q(absl::StrCat("REVOKE CREATE ON SCHEMA {schema} FROM ", w));
  schema_.Q("GRANT CREATE ON SCHEMA {schema} TO PUBLIC");
  refused = Partq(grant);
  EXPECT_NE(refused.code, 0);
  EXPECT_TRUE(absl::StrContains(
      refused.err, absl::StrCat("REVOKE CREATE ON SCHEMA \"", schema_.name(), "\" FROM PUBLIC")))
      << refused.err;
  schema_.Q("REVOKE CREATE ON SCHEMA {schema} FROM PUBLIC");
  PartqOk(grant);
  EXPECT_EQ(Count(absl::StrCat("grants WHERE role = '", p, "'")), 1);
}

// What the guide says to do instead of CREATE on the schema: the owner
// makes the record table and grants INSERT on it. The handler's set-up used
// to run CREATE TABLE IF NOT EXISTS anyway, which needs CREATE on the
// schema even for a table that is there.
TEST_F(RolesTest, AWorkerRoleRecordsIntoATableTheOwnerMadeWithoutCreateOnTheSchema) {
  const std::string w = NewRole("worker");
  PartqOk({"grant", "worker", w, "--queue", "a"});
  schema_.Q(
      "CREATE TABLE {schema}.effects (item_id bigint NOT NULL, session_id uuid NOT NULL, "
      "acked_at timestamptz NOT NULL DEFAULT now())");
  schema_.Q(absl::StrCat("GRANT INSERT ON {schema}.effects TO ", w));
  PartqOk({"enqueue", "a", "one"});
  PartqOk({"enqueue", "a", "two"});
  testing::ChildProcess worker({testing::PartqBinary(), "worker", "a", "--dsn",
                                absl::StrCat(schema_.dsn(), " user=", w), "--schema",
                                schema_.name(), "--handler", "record:effects", "--quiet"});
  EXPECT_TRUE(testing::WaitUntil([&] { return Count("effects") == 2; }))
      << "the worker role recorded " << Count("effects") << " of 2";
  worker.Signal(SIGTERM);
  EXPECT_TRUE(worker.Wait(absl::Seconds(30)).has_value());
  EXPECT_EQ(Count("items"), 0);
}

}  // namespace
}  // namespace partq
