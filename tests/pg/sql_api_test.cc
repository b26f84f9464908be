// The SQL API (migration 6: enqueue(), enqueue_item(), item_state(), ...)
// against a real PostgreSQL, checked against the C++ producer and store it
// mirrors: the same parts, channel, dedup, checks and states; the caller's
// transaction decides; DeleteQueue keeps items out of a deleted queue; and
// the Python and Node examples of docs/sql-api.md run.
#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "consumer/consumer.h"
#include "gtest/gtest.h"
#include "partitioner/part.h"
#include "pg/migrations.h"
#include "pg/pg_store.h"
#include "producer/producer.h"
#include "tests/store/store_test_util.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using testing::TestSchema;
using testing::WaitUntil;

// A text[] literal of `values` (elements quoted, so any text goes; nullopt
// is NULL).
std::string TextArrayLiteral(const std::vector<std::optional<std::string>>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out.push_back(',');
    if (!values[i]) {
      out += "NULL";
      continue;
    }
    out.push_back('"');
    for (char c : *values[i]) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('"');
  }
  return out + "}";
}
std::string TextArrayLiteral(const std::vector<std::string>& values) {
  return TextArrayLiteral(std::vector<std::optional<std::string>>(values.begin(), values.end()));
}

// The notices a connection receives on `channel`, in order.
struct NoticeReceiver : pqxx::notification_receiver {
  NoticeReceiver(pqxx::connection_base& c, const std::string& channel)
      : pqxx::notification_receiver(c, channel) {}
  void operator()(const std::string& payload, int) override { got.push_back(payload); }
  std::vector<std::string> got;
};

// UTF-8 of a code point.
std::string Utf8(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  }
  return out;
}

// Keys of every kind a producer sends: empty, short ASCII, non-ASCII from
// each UTF-8 length, and long ones up to the 1024-byte limit (every length
// mod 4, so each murmur2 tail is covered).
std::vector<std::string> ManyKeys() {
  std::mt19937 gen(20240611);
  std::vector<std::string> keys = {"", "a", "ab", "abc", "abcd", "customer-42", "\x7f"};
  const char32_t kNonAscii[] = {U'é', U'ß', U'Ж', U'中', U'日', U'本', U'€', U'😀', U'𝄞', U'ﬁ'};
  auto ascii = [&](size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(' ' + gen() % 95));
    return s;
  };
  for (int i = 0; i < 2000; ++i) keys.push_back(ascii(gen() % 40));
  for (int i = 0; i < 800; ++i) {
    std::string s;
    const int n = 1 + gen() % 12;
    for (int k = 0; k < n; ++k) {
      s += gen() % 3 == 0 ? ascii(1 + gen() % 3) : Utf8(kNonAscii[gen() % std::size(kNonAscii)]);
    }
    keys.push_back(s);
  }
  for (int i = 0; i < 200; ++i) {
    std::string s = ascii(100 + gen() % 800);
    while (s.size() < 1024 && gen() % 4 != 0) s += Utf8(kNonAscii[gen() % std::size(kNonAscii)]);
    keys.push_back(s.substr(0, 1024));
  }
  keys.push_back(std::string(1024, 'k'));
  keys.push_back(std::string(1021, 'k'));
  return keys;
}

class SqlApiTest : public ::testing::Test {
 protected:
  void CreateQueue(const std::string& name, int parts, int max_attempts = 25) {
    QueueConfig q;
    q.name = name;
    q.parts = parts;
    q.max_attempts = max_attempts;
    ASSERT_TRUE(schema_.NewStore()->CreateQueue(q).ok());
  }

  // `sql` with {schema} replaced, run in a transaction of its own.
  pqxx::result Run(const std::string& sql) {
    pqxx::connection c(schema_.dsn());
    pqxx::work w(c);
    pqxx::result r = w.exec(WithSchema(sql, schema_.name()));
    w.commit();
    return r;
  }

  // The SQLSTATE and message `sql` fails with ("" and "" when it does not).
  std::pair<std::string, std::string> Fails(const std::string& sql) {
    pqxx::connection c(schema_.dsn());
    pqxx::work w(c);
    try {
      w.exec(WithSchema(sql, schema_.name()));
    } catch (const pqxx::sql_error& e) {
      return {e.sqlstate(), e.what()};
    }
    return {"", ""};
  }

  int64_t Left(const std::string& queue) {
    return schema_.QInt("SELECT count(*) FROM {schema}.items WHERE queue = '" + queue + "'");
  }

  ConsumerOptions Options(const std::string& queue) {
    ConsumerOptions o;
    o.queue = queue;
    o.concurrency = 1;
    o.batch = 10;
    o.poll_interval = absl::Milliseconds(50);
    o.backoff.base = absl::Milliseconds(10);
    o.backoff.max = absl::Milliseconds(50);
    return o;
  }

  // Notifies "end" on the queue's channel from `c` and waits until
  // `receiver` (on `listener`) has it: notices arrive in commit order, so
  // all those of earlier commits have arrived too.
  bool EndAndWait(pqxx::connection& c, pqxx::connection& listener, NoticeReceiver& receiver,
                  const std::string& queue) {
    {
      pqxx::work w(c);
      w.exec_params("SELECT pg_notify($1, 'end')", ChannelFor(schema_.name(), queue));
      w.commit();
    }
    return WaitUntil([&] {
      listener.await_notification(0, 50000);
      return !receiver.got.empty() && receiver.got.back() == "end";
    });
  }

  // Starts DeleteQueue(q, kDelete) on a thread of its own, into `out`, and
  // returns once it waits for a lock (held by the caller's transaction).
  std::thread DeleteWhenFree(const std::string& queue, absl::StatusOr<DeletedQueue>* out) {
    PgOptions deleter = schema_.options();
    deleter.application_name = "sqlapi-delete";
    std::thread t([deleter, queue, out] {
      *out = (*ConnectPg(deleter))->DeleteQueue(queue, QueueContents::kDelete);
    });
    EXPECT_TRUE(WaitUntil([&] { return WaitingForALock("sqlapi-delete"); }));
    return t;
  }

  // The backend of a connection whose application_name is `name` waits for
  // a lock.
  bool WaitingForALock(const std::string& name) {
    return testing::QueryInt(schema_.dsn(),
                             "SELECT count(*) FROM pg_stat_activity WHERE application_name = '" +
                                 name + "' AND wait_event_type = 'Lock'") > 0;
  }

  TestSchema schema_;
};

TEST_F(SqlApiTest, PartForKeyIsThePartitionersForThousandsOfKeys) {
  const std::vector<std::string> keys = ManyKeys();
  pqxx::connection c(schema_.dsn());
  pqxx::work w(c);
  for (int parts : {1, 2, 3, 7, 16, 97, 1000, 4096}) {
    pqxx::result r =
        w.exec_params(WithSchema("SELECT {schema}.part_for_key(k, $2) FROM unnest($1::text[]) "
                                 "WITH ORDINALITY AS t(k, n) ORDER BY n",
                                 schema_.name()),
                      TextArrayLiteral(keys), parts);
    ASSERT_EQ(r.size(), keys.size());
    int wrong = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (r[i][0].as<int>() != PartForKey(keys[i], parts) && ++wrong <= 3) {
        ADD_FAILURE() << "key \"" << absl::CHexEscape(keys[i]) << "\" with " << parts
                      << " parts: SQL " << r[i][0].as<int>() << ", C++ "
                      << PartForKey(keys[i], parts);
      }
    }
    EXPECT_EQ(wrong, 0) << parts << " parts";
  }
}

TEST_F(SqlApiTest, Murmur2IsTheCppOneOverArbitraryBytes) {
  std::mt19937 gen(7);
  std::vector<std::string> data, hex;
  for (int i = 0; i < 1000; ++i) {
    std::string s(gen() % 70, '\0');
    for (char& ch : s) ch = static_cast<char>(gen());
    hex.push_back(absl::BytesToHexString(s));
    data.push_back(std::move(s));
  }
  pqxx::connection c(schema_.dsn());
  pqxx::work w(c);
  pqxx::result r =
      w.exec_params(WithSchema("SELECT {schema}.murmur2(decode(h, 'hex')) FROM unnest($1::text[]) "
                               "WITH ORDINALITY AS t(h, n) ORDER BY n",
                               schema_.name()),
                    TextArrayLiteral(hex));
  ASSERT_EQ(r.size(), data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    ASSERT_EQ(r[i][0].as<int64_t>(), static_cast<int64_t>(Murmur2(data[i]))) << hex[i];
  }
}

TEST_F(SqlApiTest, KeyedItemsGoToTheCppProducersPart) {
  CreateQueue("a", 16);
  CreateQueue("b", 5);
  std::vector<std::string> keys = ManyKeys();
  keys.resize(400);
  auto store = schema_.NewStore();
  pqxx::connection c(schema_.dsn());
  for (const char* queue : {"a", "b"}) {
    pqxx::work w(c);
    pqxx::result r = w.exec_params(
        WithSchema("SELECT e.id, e.part, t.k FROM unnest($2::text[]) WITH ORDINALITY AS t(k, n), "
                   "LATERAL {schema}.enqueue_item($1, 'p', key => t.k) e ORDER BY t.n",
                   schema_.name()),
        std::string(queue), TextArrayLiteral(keys));
    w.commit();
    ASSERT_EQ(r.size(), keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      NewItem item;
      item.key = keys[i];
      auto cpp = store->Enqueue(queue, item);
      ASSERT_TRUE(cpp.ok()) << cpp.status();
      ASSERT_EQ(r[i][1].as<int>(), cpp->part)
          << queue << " \"" << absl::CHexEscape(keys[i]) << "\"";
      ASSERT_EQ(r[i][2].as<std::string>(), keys[i]) << "the key is stored as given";
    }
  }
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items i WHERE i.part <> "
                         "{schema}.part_for_key(i.key, (SELECT parts FROM {schema}.queues q "
                         "WHERE q.name = i.queue))"),
            0);
}

TEST_F(SqlApiTest, KeylessItemsTakeThePartOfTheirId) {
  CreateQueue("q", 12);
  // (The call refers to g: a call that does not is run once for all rows.)
  // 3,000 items are about 94 runs of 32 ids (kKeylessRun): enough for every part.
  pqxx::result r =
      Run("SELECT e.id, e.part FROM generate_series(1, 3000) AS g, "
          "LATERAL {schema}.enqueue_item('q', 'p' || g) e");
  ASSERT_EQ(r.size(), 3000u);
  std::set<int> parts;
  for (const auto& row : r) {
    EXPECT_EQ(row[1].as<int>(), PartForId(row[0].as<int64_t>(), 12));
    parts.insert(row[1].as<int>());
  }
  EXPECT_EQ(parts.size(), 12u) << "spread over every part";
}

TEST_F(SqlApiTest, ChannelIsTheOneTheConsumersListenOn) {
  for (const std::string& q :
       std::vector<std::string>{"q", "orders.v2", "A-b_c", std::string(63, 'x'), "9"}) {
    EXPECT_EQ(testing::Query(schema_.dsn(), WithSchema("SELECT {schema}.channel_for('" + q + "')",
                                                       schema_.name()))[0][0],
              ChannelFor(schema_.name(), q))
        << q;
  }
}

// A notice per inserted item, on commit: none for a rolled-back enqueue or a
// dedup hit. Notifications reach a listener in commit order, so everything
// before the final marker came from the transactions before it.
TEST_F(SqlApiTest, EnqueueNotifiesTheQueuesChannelOnCommitOnly) {
  CreateQueue("q", 8);
  pqxx::connection listener(schema_.dsn());
  NoticeReceiver receiver(listener, ChannelFor(schema_.name(), "q"));
  listener.get_notifs();  // LISTEN is sent

  pqxx::connection c(schema_.dsn());
  {
    pqxx::work w(c);
    w.exec(WithSchema("SELECT {schema}.enqueue('q', 'rolled back')", schema_.name()));
    w.abort();
  }
  std::vector<std::string> want;
  for (const char* dedup : {"d1", "d1", "d2"}) {
    pqxx::work w(c);
    pqxx::row r = w.exec_params1(
        WithSchema("SELECT part, duplicate, id FROM {schema}.enqueue_item('q', 'x', "
                   "dedup_key => $1, priority => -3)",
                   schema_.name()),
        std::string(dedup));
    w.commit();
    // The part and the item's key (Notice::from), as the C++ producer says it.
    if (!r[1].as<bool>()) {
      want.push_back(absl::StrCat("i:", r[0].as<int>(), ":-3:", r[2].as<int64_t>()));
    }
  }
  ASSERT_EQ(want.size(), 2u);
  ASSERT_TRUE(EndAndWait(c, listener, receiver, "q"));
  receiver.got.pop_back();
  EXPECT_EQ(receiver.got, want);
}

TEST_F(SqlApiTest, ALongPollingConsumerIsWokenBySqlEnqueues) {
  CreateQueue("q", 8);
  auto handler = MakeHandler([](HandlerCall&) { return absl::OkStatus(); });
  ConsumerOptions o = Options("q");
  o.poll_interval = absl::Minutes(10);  // only a NOTIFY can wake it in time
  Consumer consumer(schema_.Factory(), o, handler.get());
  ASSERT_TRUE(consumer.Start().ok());
  ASSERT_TRUE(consumer.session().WaitStable(absl::Seconds(30)));
  auto store = schema_.NewStore();
  for (int i = 0; i < 5; ++i) {
    const int64_t id =
        Run(absl::StrCat("SELECT {schema}.enqueue('q', 'wake ", i, "')"))[0][0].as<int64_t>();
    EXPECT_TRUE(WaitUntil(
        [&] {
          auto st = store->GetItemState("q", id);
          return st.ok() && st->kind == ItemState::Kind::kDone;
        },
        absl::Seconds(60)))
        << "item " << i << " was not picked up";
  }
  consumer.Stop();
  EXPECT_EQ(consumer.stats().acked, 5);
}

TEST_F(SqlApiTest, DelayAndPriorityAreHonouredByAConsumer) {
  CreateQueue("q", 1);
  Run("CREATE TABLE {schema}.handled (payload text, at timestamptz DEFAULT clock_timestamp(), "
      "n serial)");
  for (int i = 0; i < 5; ++i) {
    Run(absl::StrCat("SELECT {schema}.enqueue('q', 'low", i, "', priority => 5)"));
  }
  Run("SELECT {schema}.enqueue('q', 'urgent', priority => -5)");
  // First of all by priority, but not before its time.
  Run("SELECT {schema}.enqueue('q', 'later', priority => -10, delay => '1.5 seconds')");
  EXPECT_EQ(schema_.QInt("SELECT (extract(epoch FROM run_at - enqueued_at) * 1000)::bigint "
                         "FROM {schema}.items WHERE payload = 'later'"),
            1500);
  Run("CREATE TABLE {schema}.due AS "
      "SELECT convert_from(payload, 'UTF8') AS payload, run_at FROM {schema}.items");
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE payload = 'urgent' "
                         "AND priority = -5 AND run_at = enqueued_at"),
            1);
  auto handler = MakeHandler([](HandlerCall& call) {
    return call.tx
        ->Exec("INSERT INTO \"" + call.tx->schema() + "\".handled (payload) VALUES ($1)",
               {call.item->payload})
        .status();
  });
  ConsumerOptions o = Options("q");
  o.batch = 1;
  Consumer consumer(schema_.Factory(), o, handler.get());
  ASSERT_TRUE(consumer.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }));
  consumer.Stop();
  std::vector<std::string> order;
  for (const auto& row : schema_.Q("SELECT payload FROM {schema}.handled "
                                   "WHERE payload <> 'later' ORDER BY n")) {
    order.push_back(*row[0]);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"urgent", "low0", "low1", "low2", "low3", "low4"}));
  // Handled no earlier than its run_at (both the database's clock).
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.handled h JOIN {schema}.due d USING "
                         "(payload) WHERE h.at >= d.run_at"),
            7);
}

TEST_F(SqlApiTest, DedupIsTheCppProducersAndTheKeyIsFreeOnceTheItemIsDone) {
  CreateQueue("q", 4);
  auto store = schema_.NewStore();
  auto enqueue_sql = [&] {
    auto r = Run("SELECT id, duplicate FROM {schema}.enqueue_item('q', 'x', dedup_key => 'd')");
    return std::make_pair(r[0][0].as<int64_t>(), r[0][1].as<bool>());
  };
  const auto [first, first_dup] = enqueue_sql();
  EXPECT_FALSE(first_dup);
  const auto [again, again_dup] = enqueue_sql();
  EXPECT_EQ(again, first);
  EXPECT_TRUE(again_dup);
  NewItem item;
  item.payload = "y";
  item.dedup_key = "d";
  auto cpp = store->Enqueue("q", item);
  ASSERT_TRUE(cpp.ok()) << cpp.status();
  EXPECT_EQ(cpp->id, first);
  EXPECT_TRUE(cpp->duplicate);
  // And the other way round: a live C++ item is a hit for SQL.
  item.dedup_key = "c";
  auto cpp_first = store->Enqueue("q", item);
  ASSERT_TRUE(cpp_first.ok());
  EXPECT_EQ(Run("SELECT {schema}.enqueue('q', 'x', dedup_key => 'c')")[0][0].as<int64_t>(),
            cpp_first->id);
  auto pending = Run("SELECT id, state FROM {schema}.item_state_by_dedup_key('q', 'd')");
  EXPECT_EQ(pending[0][0].as<int64_t>(), first);
  EXPECT_EQ(pending[0][1].as<std::string>(), "pending");

  auto handler = MakeHandler([](HandlerCall& call) {
    call.result = "r" + std::to_string(call.item->id);
    return absl::OkStatus();
  });
  Consumer consumer(schema_.Factory(), Options("q"), handler.get());
  ASSERT_TRUE(consumer.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 0; }));
  consumer.Stop();
  auto done =
      Run("SELECT id, state, encode(result, 'escape') FROM "
          "{schema}.item_state_by_dedup_key('q', 'd')");
  EXPECT_EQ(done[0][0].as<int64_t>(), first);
  EXPECT_EQ(done[0][1].as<std::string>(), "done");
  EXPECT_EQ(done[0][2].as<std::string>(), "r" + std::to_string(first));
  const auto [next, next_dup] = enqueue_sql();
  EXPECT_NE(next, first) << "the key is free once its item is done";
  EXPECT_FALSE(next_dup);
}

TEST_F(SqlApiTest, ItemStateIsTheStoresForEveryState) {
  CreateQueue("q", 2, /*max_attempts=*/1);
  CreateQueue("other", 2);
  auto store = schema_.NewStore();
  auto enqueue = [&](const std::string& queue, const std::string& payload,
                     absl::Duration delay = absl::ZeroDuration()) {
    NewItem item;
    item.payload = payload;
    item.delay = delay;
    auto r = store->Enqueue(queue, item);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->id : 0;
  };
  const int64_t with_result = enqueue("q", "result");
  const int64_t plain = enqueue("q", "plain");
  const int64_t bad = enqueue("q", "bad");
  const int64_t later = enqueue("q", "later", absl::Hours(1));
  const int64_t elsewhere = enqueue("other", "x");
  const int64_t cancelled = enqueue("q", "cancelled", absl::Hours(1));
  ASSERT_TRUE(store->CancelItems("q", {cancelled}).ok());
  auto handler = MakeHandler([](HandlerCall& call) -> absl::Status {
    if (call.item->payload == "bad") return absl::InternalError("bad payload \"bad\"");
    if (call.item->payload == "result") call.result = std::string("\x00\xffok", 4);
    return absl::OkStatus();
  });
  Consumer consumer(schema_.Factory(), Options("q"), handler.get());
  ASSERT_TRUE(consumer.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return Left("q") == 1; }));
  consumer.Stop();

  const char* kKinds[] = {"pending", "done", "dead", "cancelled", "unknown"};
  for (int64_t id :
       {with_result, plain, bad, later, elsewhere, cancelled, int64_t{1} << 40, int64_t{-1}}) {
    auto want = store->GetItemState("q", id);
    ASSERT_TRUE(want.ok()) << want.status();
    auto got = Run(absl::StrCat(
        "SELECT state, attempts, encode(result, 'hex'), last_error FROM {schema}.item_state('q', ",
        id, ")"));
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0][0].as<std::string>(), kKinds[static_cast<int>(want->kind)]) << id;
    EXPECT_EQ(got[0][1].as<int>(), want->attempts) << id;
    EXPECT_EQ(got[0][2].is_null() ? std::string() : absl::HexStringToBytes(got[0][2].c_str()),
              want->result.value_or(""))
        << id;
    EXPECT_EQ(got[0][3].is_null() ? std::string() : got[0][3].as<std::string>(), want->error) << id;
  }
  // The states the loop should have met.
  EXPECT_EQ(Run(absl::StrCat("SELECT state FROM {schema}.item_state('q', ", bad, ")"))[0][0]
                .as<std::string>(),
            "dead");
  EXPECT_EQ(Run(absl::StrCat("SELECT state FROM {schema}.item_state('q', ", cancelled, ")"))[0][0]
                .as<std::string>(),
            "cancelled");
  EXPECT_EQ(Run(absl::StrCat("SELECT encode(result, 'hex') FROM {schema}.item_state('q', ",
                             with_result, ")"))[0][0]
                .as<std::string>(),
            "00ff6f6b");
}

// A producer role granted what docs/sql-api.md ("Privileges") lists for
// enqueue and item_state gets an answer for every state: a cancelled item's
// is in cancelled_items, which the list once left out.
TEST_F(SqlApiTest, ItemStateRunsWithTheDocumentedGrants) {
  CreateQueue("q", 2);
  auto store = schema_.NewStore();
  NewItem item;
  item.payload = "x";
  item.delay = absl::Hours(1);
  item.dedup_key = "k";
  auto cancelled = store->Enqueue("q", item);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  ASSERT_TRUE(store->CancelItems("q", {cancelled->id}).ok());
  const std::string role = absl::StrCat("partq_producer_", schema_.name());
  Run(absl::StrCat("CREATE ROLE ", role, " LOGIN"));
  for (const char* grant :
       {"USAGE ON SCHEMA {schema}", "SELECT ON {schema}.queues", "INSERT, SELECT ON {schema}.items",
        "USAGE, SELECT ON SEQUENCE {schema}.items_id_seq",
        "SELECT ON {schema}.dead_items, {schema}.results, {schema}.cancelled_items"}) {
    Run(absl::StrCat("GRANT ", grant, " TO ", role));
  }
  std::string got;
  try {
    pqxx::connection c(absl::StrCat(schema_.dsn(), " user=", role));
    pqxx::work w(c);
    const std::string id =
        w.exec1(WithSchema("SELECT {schema}.enqueue('q', 'y')", schema_.name()))[0].c_str();
    for (const std::string& call : {absl::StrCat("item_state('q', ", id, ")"),
                                    absl::StrCat("item_state('q', ", cancelled->id, ")"),
                                    std::string("item_state('q', 1000000000)"),
                                    std::string("item_state_by_dedup_key('q', 'k')")}) {
      const std::string sql = absl::StrCat("SELECT state FROM {schema}.", call);
      got += w.exec1(WithSchema(sql, schema_.name()))[0].as<std::string>() + " ";
    }
  } catch (const std::exception& e) {
    got = e.what();
  }
  Run(absl::StrCat("DROP OWNED BY ", role));
  Run(absl::StrCat("DROP ROLE ", role));
  EXPECT_EQ(got, "pending cancelled unknown cancelled ");
}

// cancel() and cancel_by_dedup_key() say what CancelItems says, in the
// caller's transaction: only a committed cancel removes the item.
TEST_F(SqlApiTest, CancelIsTheStoresInTheCallersTransaction) {
  CreateQueue("q", 2);
  CreateQueue("other", 2);
  auto store = schema_.NewStore();
  auto enqueue = [&](const std::string& queue, const std::string& payload,
                     std::optional<std::string> dedup = std::nullopt) {
    NewItem item;
    item.payload = payload;
    item.dedup_key = dedup;
    item.delay = absl::Hours(1);
    auto r = store->Enqueue(queue, item);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->id : 0;
  };
  const int64_t a = enqueue("q", "a");
  const int64_t b = enqueue("q", "b", "key-b");
  const int64_t elsewhere = enqueue("other", "x");
  auto cancel = [&](int64_t id) {
    return Run(absl::StrCat("SELECT {schema}.cancel('q', ", id, ")"))[0][0].as<std::string>();
  };
  {
    pqxx::connection c(schema_.dsn());
    pqxx::work w(c);
    EXPECT_EQ(w.exec(WithSchema(absl::StrCat("SELECT {schema}.cancel('q', ", a, ")"),
                                schema_.name()))[0][0]
                  .as<std::string>(),
              "cancelled");
    w.abort();
  }
  EXPECT_EQ(Left("q"), 2) << "a rolled-back cancel removes nothing";
  EXPECT_EQ(cancel(a), "cancelled");
  EXPECT_EQ(cancel(a), "already_cancelled");
  EXPECT_EQ(cancel(elsewhere), "unknown");
  EXPECT_EQ(cancel(int64_t{1} << 40), "unknown");
  auto by_key = Run("SELECT id, state FROM {schema}.cancel_by_dedup_key('q', 'key-b')");
  EXPECT_EQ(by_key[0][0].as<int64_t>(), b);
  EXPECT_EQ(by_key[0][1].as<std::string>(), "cancelled");
  by_key = Run("SELECT id, state FROM {schema}.cancel_by_dedup_key('q', 'none')");
  EXPECT_TRUE(by_key[0][0].is_null());
  EXPECT_EQ(by_key[0][1].as<std::string>(), "unknown");
  auto state = store->GetItemState("q", b);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->kind, ItemState::Kind::kCancelled);
  EXPECT_EQ(Left("q"), 0);
  EXPECT_EQ(Left("other"), 1);

  EXPECT_EQ(Fails("SELECT {schema}.cancel('nope', 1)").first, "42704");
  EXPECT_EQ(Fails("SELECT {schema}.cancel('bad name', 1)").first, "22023");
  EXPECT_EQ(Fails("SELECT {schema}.cancel('q', 0)").first, "22023");
  EXPECT_EQ(Fails("SELECT {schema}.cancel('q', NULL)").first, "22023");
  EXPECT_EQ(Fails("SELECT * FROM {schema}.cancel_by_dedup_key('nope', 'k')").first, "42704");
}

// The race cancel_items() is built for (migration 13): the part's owner
// starts a claim while a cancel of one of its items is open. The claim's
// snapshot still shows the item ready; it waits for the cancel's hold on
// the claim record and then returns nothing from the part, and its next
// claim gets the others, never the cancelled one.
TEST_F(SqlApiTest, AClaimBehindAnOpenCancelReturnsNoneOfThePart) {
  CreateQueue("q", 1);
  PgOptions o = schema_.options();
  o.application_name = "sqlapi-claim";
  auto owner = ConnectPg(o);
  ASSERT_TRUE(owner.ok()) << owner.status();
  std::vector<int64_t> ids;
  for (const char* p : {"x", "y", "z"}) {
    NewItem item;
    item.payload = p;
    ids.push_back((*owner)->Enqueue("q", item)->id);
  }
  auto join = (*owner)->Join({"q", "", "h", 1});
  ASSERT_TRUE(join.ok()) << join.status();
  auto parts = (*owner)->AcquireParts("q", join->id, {0});
  ASSERT_TRUE(parts.ok() && parts->size() == 1u);
  ClaimRequest claim;
  claim.queue = "q";
  claim.session = join->id;
  ClaimPart part;
  part.epoch = (*parts)[0].epoch;
  claim.parts = {part};
  claim.limit = 10;

  pqxx::connection c(schema_.dsn());
  pqxx::work cancel(c);
  EXPECT_EQ(cancel
                .exec(WithSchema(absl::StrCat("SELECT {schema}.cancel('q', ", ids[1], ")"),
                                 schema_.name()))[0][0]
                .as<std::string>(),
            "cancelled");
  absl::StatusOr<std::vector<Item>> blocked;
  std::thread claimer([&] { blocked = (*owner)->Claim(claim); });
  ASSERT_TRUE(WaitUntil([&] { return WaitingForALock("sqlapi-claim"); }));
  cancel.commit();
  claimer.join();
  ASSERT_TRUE(blocked.ok()) << blocked.status();
  EXPECT_TRUE(blocked->empty()) << "claimed " << blocked->size() << " items, one cancelled";
  auto next = (*owner)->Claim(claim);
  ASSERT_TRUE(next.ok()) << next.status();
  std::vector<int64_t> got;
  for (const Item& i : *next) got.push_back(i.id);
  EXPECT_EQ(got, (std::vector<int64_t>{ids[0], ids[2]}));
  FinishRequest fin;
  fin.queue = "q";
  fin.session = join->id;
  fin.parts = *parts;
  fin.items = *next;
  auto done = (*owner)->Finish(fin, [](Tx&, absl::Span<const Item> items) {
    std::vector<Outcome> out;
    for (const Item& i : items) {
      Outcome ack;
      ack.id = i.id;
      ack.part = i.part;
      out.push_back(ack);
    }
    return absl::StatusOr<std::vector<Outcome>>(out);
  });
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->acked.size(), 2u);
  EXPECT_TRUE(done->fenced.empty());
}

// The other order: a claim that has replaced the record and not committed
// (here its statements, in an open transaction) holds the record; the
// cancel waits for it and then sees the item in flight, and leaves it.
TEST_F(SqlApiTest, ACancelBehindAnOpenClaimSeesTheItemInFlight) {
  CreateQueue("q", 1);
  auto store = schema_.NewStore();
  NewItem item;
  item.payload = "x";
  const int64_t id = store->Enqueue("q", item)->id;
  auto join = store->Join({"q", "", "h", 1});
  ASSERT_TRUE(join.ok()) << join.status();
  auto parts = store->AcquireParts("q", join->id, {0});
  ASSERT_TRUE(parts.ok() && parts->size() == 1u);
  pqxx::connection c(schema_.dsn());
  pqxx::work claim(c);
  claim.exec(WithSchema(absl::StrCat(R"sql(
WITH old AS (DELETE FROM {schema}.part_claims WHERE queue = 'q' AND part = 0 RETURNING epoch)
INSERT INTO {schema}.part_claims (queue, part, epoch, ids) SELECT 'q', 0, epoch, '{)sql",
                                     id, "}' FROM old"),
                        schema_.name()));
  PgOptions o = schema_.options();
  o.application_name = "sqlapi-cancel";
  absl::StatusOr<std::vector<CancelOutcome>> got;
  std::thread canceller([&] { got = (*ConnectPg(o))->CancelItems("q", {id}); });
  ASSERT_TRUE(WaitUntil([&] { return WaitingForALock("sqlapi-cancel"); }));
  claim.commit();
  canceller.join();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].kind, CancelOutcome::Kind::kInFlight);
  EXPECT_EQ(Left("q"), 1);
}

// An open cancel holds off AcquireParts (an unowned part gets no owner,
// whose claims could read the cancelled item before the cancel commits),
// but not enqueues, joins or another queue's acquisition.
TEST_F(SqlApiTest, AnOpenCancelHoldsOffAcquisitionsOfItsQueueOnly) {
  CreateQueue("q", 1);
  CreateQueue("r", 1);
  auto store = schema_.NewStore();
  NewItem item;
  item.payload = "x";
  const int64_t id = store->Enqueue("q", item)->id;
  pqxx::connection c(schema_.dsn());
  pqxx::work cancel(c);
  cancel.exec(WithSchema(absl::StrCat("SELECT {schema}.cancel('q', ", id, ")"), schema_.name()));
  ASSERT_TRUE(store->Enqueue("q", item).ok());
  auto other = store->Join({"r", "", "h", 1});
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(store->AcquireParts("r", other->id, {0}).ok());
  auto join = store->Join({"q", "", "h", 1});
  ASSERT_TRUE(join.ok()) << join.status();
  PgOptions o = schema_.options();
  o.application_name = "sqlapi-acquire";
  absl::StatusOr<std::vector<OwnedPart>> acquired;
  std::thread acquirer([&] { acquired = (*ConnectPg(o))->AcquireParts("q", join->id, {0}); });
  ASSERT_TRUE(WaitUntil([&] { return WaitingForALock("sqlapi-acquire"); }));
  cancel.commit();
  acquirer.join();
  ASSERT_TRUE(acquired.ok()) << acquired.status();
  EXPECT_EQ(acquired->size(), 1u);
  EXPECT_EQ(Left("q"), 1);
}

TEST_F(SqlApiTest, OnlyACommittedTransactionLeavesAnItem) {
  CreateQueue("q", 4);
  pqxx::connection c(schema_.dsn());
  {
    pqxx::work w(c);
    w.exec(WithSchema("SELECT {schema}.enqueue('q', 'never')", schema_.name()));
    EXPECT_EQ(Left("q"), 0) << "visible before commit";
    w.abort();
  }
  EXPECT_EQ(Left("q"), 0);
  {
    pqxx::work w(c);
    w.exec(WithSchema("SELECT {schema}.enqueue('q', 'once')", schema_.name()));
    w.commit();
  }
  EXPECT_EQ(Left("q"), 1);
}

TEST_F(SqlApiTest, PayloadsAreTextAsUtf8OrBytes) {
  CreateQueue("q", 4);
  // A plain literal is text: no "function is not unique".
  const int64_t text = Run("SELECT {schema}.enqueue('q', 'héllo')")[0][0].as<int64_t>();
  const int64_t bytes = Run("SELECT {schema}.enqueue('q', '\\x00ff'::bytea)")[0][0].as<int64_t>();
  const int64_t named =
      Run("SELECT {schema}.enqueue(queue => 'q', payload => 'n')")[0][0].as<int64_t>();
  auto payload = [&](int64_t id) {
    return absl::HexStringToBytes(*schema_.Q(
        absl::StrCat("SELECT encode(payload, 'hex') FROM {schema}.items WHERE id = ", id))[0][0]);
  };
  EXPECT_EQ(payload(text), "h\xc3\xa9llo");
  EXPECT_EQ(payload(bytes), std::string("\x00\xff", 2));
  EXPECT_EQ(payload(named), "n");
}

TEST_F(SqlApiTest, BadArgumentsFailWithTheCppProducersMessages) {
  CreateQueue("q", 4);
  auto store = schema_.NewStore();
  struct Case {
    std::string sql;
    std::string state;
    std::string says;
    std::optional<NewItem> cpp;  // the same item through C++, which must say the same
  };
  NewItem big_priority;
  big_priority.priority = 40000;
  NewItem long_key;
  long_key.key = std::string(1025, 'k');
  NewItem long_dedup;
  long_dedup.dedup_key = std::string(1025, 'd');
  NewItem long_delay;
  long_delay.delay = absl::Hours(24 * 3651);
  const Case cases[] = {
      {"SELECT {schema}.enqueue('nope', 'x')", "42704",
       absl::StrCat("unknown queue \"nope\" in schema \"", schema_.name(),
                    "\" (create it with: partq queue create nope --parts N --schema ",
                    schema_.name(), ")"),
       std::nullopt},
      {"SELECT {schema}.enqueue('bad name!', 'x')", "22023", "invalid queue name \"bad name!\"",
       std::nullopt},
      {"SELECT {schema}.enqueue(NULL, 'x')", "22023", "invalid queue name NULL", std::nullopt},
      {"SELECT {schema}.enqueue('q', NULL::bytea)", "22023", "payload must not be NULL",
       std::nullopt},
      {"SELECT {schema}.enqueue('q', 'x', priority => 40000)", "22023",
       "priority 40000 is out of range -32768..32767", big_priority},
      {"SELECT {schema}.enqueue('q', 'x', key => repeat('k', 1025))", "22023",
       "key is 1025 bytes; the limit is 1024", long_key},
      {"SELECT {schema}.enqueue('q', 'x', dedup_key => repeat('d', 1025))", "22023",
       "dedup key is 1025 bytes; the limit is 1024", long_dedup},
      {"SELECT {schema}.enqueue('q', 'x', delay => '3651 days')", "22023",
       "is longer than 10 years", long_delay},
      {"SELECT {schema}.enqueue('q', repeat('p', 1048577))", "22023",
       "payload is 1048577 bytes; the limit is 1048576 (the queue's, partq queue set "
       "--max-payload)",
       std::nullopt},
      // The queue's limit (partq queue set --max-payload), rolled back with the case.
      {"UPDATE {schema}.queues SET max_payload_bytes = 10 WHERE name = 'q'; "
       "SELECT {schema}.enqueue('q', 'eleven byte')",
       "22023", "payload is 11 bytes; the limit is 10 (the queue's", std::nullopt},
      {"SELECT * FROM {schema}.item_state('nope', 1)", "42704", "unknown queue \"nope\"",
       std::nullopt},
      {"SELECT * FROM {schema}.item_state_by_dedup_key('nope', 'd')", "42704",
       "unknown queue \"nope\"", std::nullopt},
      {"SELECT {schema}.part_for_key('a', 0)", "22023", "parts must be between 1 and 4096, not 0",
       std::nullopt},
      {"SELECT {schema}.part_for_key('a', 4097)", "22023",
       "parts must be between 1 and 4096, not 4097", std::nullopt},
  };
  for (const Case& c : cases) {
    auto [state, message] = Fails(c.sql);
    EXPECT_EQ(state, c.state) << c.sql << ": " << message;
    EXPECT_TRUE(absl::StrContains(message, c.says)) << c.sql << ": " << message;
    if (c.cpp) {
      auto cpp = store->Enqueue("q", *c.cpp);
      ASSERT_FALSE(cpp.ok()) << c.sql;
      EXPECT_TRUE(absl::StrContains(cpp.status().message(), c.says)) << cpp.status();
    }
  }
  auto cpp_unknown = store->Enqueue("nope", NewItem{});
  EXPECT_TRUE(absl::StrContains(cpp_unknown.status().message(), cases[0].says))
      << cpp_unknown.status();
  // At the limits, all is well.
  Run("SELECT {schema}.enqueue('q', repeat('p', 1048576), key => repeat('k', 1024), "
      "dedup_key => repeat('d', 1024), priority => -32768, delay => '-1 day')");
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE run_at = enqueued_at"), 1)
      << "a negative delay means now";
}

// enqueue_many() (migration 25) is enqueue_item() for each payload, in one
// call: the parts of the C++ producer, ids in the order given, the payloads
// as given (text as UTF-8, bytes as they are), one answer per payload in that
// order; a group's items are held and counted.
TEST_F(SqlApiTest, EnqueueManyIsEnqueueItemForEachPayloadInOrder) {
  CreateQueue("q", 16);
  std::vector<std::string> keys = ManyKeys();
  keys.resize(300);
  std::vector<std::optional<std::string>> maybe_keys;
  std::vector<std::string> payloads;
  for (size_t i = 0; i < keys.size(); ++i) {
    maybe_keys.push_back(i % 3 == 0 ? std::nullopt : std::optional<std::string>(keys[i]));
    payloads.push_back(absl::StrCat("p", i, i % 7 == 0 ? "é" : ""));
  }
  pqxx::connection c(schema_.dsn());
  pqxx::work w(c);
  pqxx::result r = w.exec_params(
      WithSchema("SELECT id, part, duplicate FROM {schema}.enqueue_many('q', $1::text[], "
                 "keys => $2::text[], priority => 3)",
                 schema_.name()),
      TextArrayLiteral(payloads), TextArrayLiteral(maybe_keys));
  w.commit();
  ASSERT_EQ(r.size(), payloads.size());
  int64_t last = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    const int64_t id = r[i][0].as<int64_t>();
    EXPECT_GT(id, last) << "ids in the order given";
    last = id;
    EXPECT_FALSE(r[i][2].as<bool>());
    const int want = maybe_keys[i] ? PartForKey(*maybe_keys[i], 16) : PartForId(id, 16);
    ASSERT_EQ(r[i][1].as<int>(), want) << i;
    const auto row = schema_.Q(
        absl::StrCat("SELECT encode(payload, 'hex'), key, part, priority, run_at = enqueued_at "
                     "FROM {schema}.items WHERE id = ",
                     id));
    ASSERT_EQ(row.size(), 1u);
    EXPECT_EQ(absl::HexStringToBytes(*row[0][0]), payloads[i]);
    EXPECT_EQ(row[0][1], maybe_keys[i]);
    EXPECT_EQ(*row[0][2], std::to_string(want));
    EXPECT_EQ(*row[0][3], "3");
    EXPECT_EQ(*row[0][4], "t");
  }
  // Bytes, untouched; a delay for all.
  auto bytes =
      Run("SELECT id FROM {schema}.enqueue_many('q', ARRAY['\\x00ff'::bytea, '\\x'::bytea], "
          "delay => '1 hour')");
  ASSERT_EQ(bytes.size(), 2u);
  EXPECT_EQ(*schema_.Q(absl::StrCat("SELECT encode(payload, 'hex') FROM {schema}.items WHERE id = ",
                                    bytes[0][0].as<int64_t>()))[0][0],
            "00ff");
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items "
                         "WHERE run_at - enqueued_at = interval '1 hour'"),
            2);
  // None: no rows, nothing written.
  EXPECT_EQ(Run("SELECT * FROM {schema}.enqueue_many('q', '{}'::text[])").size(), 0u);
  EXPECT_EQ(Left("q"), 302);
  // A group's items: held until it starts, counted.
  auto grouped =
      Run("SELECT id FROM {schema}.enqueue_many('q', ARRAY['a', 'b', 'c'], group_id => 'g')");
  ASSERT_EQ(grouped.size(), 3u);
  EXPECT_EQ(Run("SELECT held FROM {schema}.group_status('q', 'g')")[0][0].as<int64_t>(), 3);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE group_id = 'g' AND "
                         "run_at = 'infinity'"),
            3);
}

// Dedup keys as enqueue_item has them: a live item's key returns that item;
// a key given twice in one call is one item; the call again is all hits.
TEST_F(SqlApiTest, EnqueueManyDedupsWithinTheCallAndAgainstLiveItems) {
  CreateQueue("q", 4);
  const int64_t live =
      Run("SELECT {schema}.enqueue('q', 'x', dedup_key => 'd0')")[0][0].as<int64_t>();
  const std::string call =
      "SELECT id, duplicate FROM {schema}.enqueue_many('q', ARRAY['a', 'b', 'c', 'd', 'e'], "
      "dedup_keys => ARRAY['d0', 'd1', 'd1', NULL, 'd2'])";
  auto first = Run(call);
  ASSERT_EQ(first.size(), 5u);
  EXPECT_EQ(first[0][0].as<int64_t>(), live);
  EXPECT_TRUE(first[0][1].as<bool>());
  EXPECT_FALSE(first[1][1].as<bool>());
  EXPECT_EQ(first[2][0].as<int64_t>(), first[1][0].as<int64_t>()) << "d1 twice is one item";
  EXPECT_TRUE(first[2][1].as<bool>());
  EXPECT_FALSE(first[3][1].as<bool>());
  EXPECT_FALSE(first[4][1].as<bool>());
  EXPECT_EQ(Left("q"), 4);
  auto again = Run(call);
  ASSERT_EQ(again.size(), 5u);
  for (int i : {0, 1, 2, 4}) {
    EXPECT_EQ(again[i][0].as<int64_t>(), first[i][0].as<int64_t>()) << i;
    EXPECT_TRUE(again[i][1].as<bool>()) << i;
  }
  EXPECT_FALSE(again[3][1].as<bool>()) << "no dedup key: a new item";
  EXPECT_EQ(Left("q"), 5);

  // A key another transaction is enqueueing: the call waits for it, then
  // returns its item (read in a snapshot taken after the wait).
  pqxx::connection other(schema_.dsn());
  pqxx::work open(other);
  const int64_t theirs = open.exec(WithSchema(
      "SELECT {schema}.enqueue('q', 'y', dedup_key => 'd9')", schema_.name()))[0][0]
                             .as<int64_t>();
  std::optional<std::pair<int64_t, bool>> mine;
  std::thread t([&] {
    pqxx::connection c(schema_.dsn());
    c.set_variable("application_name", "'sqlapi-many'");
    pqxx::work w(c);
    pqxx::row r =
        w.exec1(WithSchema("SELECT id, duplicate FROM {schema}.enqueue_many('q', ARRAY['z'], "
                           "dedup_keys => ARRAY['d9'])",
                           schema_.name()));
    w.commit();
    mine = {r[0].as<int64_t>(), r[1].as<bool>()};
  });
  EXPECT_TRUE(WaitUntil([&] { return WaitingForALock("sqlapi-many"); }));
  open.commit();
  t.join();
  ASSERT_TRUE(mine.has_value());
  EXPECT_EQ(mine->first, theirs);
  EXPECT_TRUE(mine->second);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE dedup_key = 'd9'"), 1);

  // A key whose live item is finished between the insert that met it and
  // the read that looks for it: enqueued anew, as enqueue_item does. The
  // finish is made to fall there by a trigger after the call's insert.
  const int64_t racing =
      Run("SELECT {schema}.enqueue('q', 'x', dedup_key => 'race')")[0][0].as<int64_t>();
  Run(absl::StrCat(
      "CREATE FUNCTION {schema}.finish_race() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "DELETE FROM {schema}.items WHERE id = ",
      racing,
      "; RETURN NULL; END $$; "
      "CREATE TRIGGER finish_race AFTER INSERT ON {schema}.items "
      "FOR EACH STATEMENT EXECUTE FUNCTION {schema}.finish_race()"));
  // (Arrays that start at 0: answers go by position, not subscript.)
  auto raced =
      Run("SELECT id, duplicate FROM {schema}.enqueue_many('q', '[0:0]={y}'::text[], "
          "dedup_keys => '[0:0]={race}'::text[])");
  Run("DROP TRIGGER finish_race ON {schema}.items");
  ASSERT_EQ(raced.size(), 1u);
  ASSERT_FALSE(raced[0][0].is_null());
  EXPECT_NE(raced[0][0].as<int64_t>(), racing);
  EXPECT_FALSE(raced[0][1].as<bool>());
  EXPECT_EQ(schema_.QInt("SELECT id FROM {schema}.items WHERE dedup_key = 'race'"),
            raced[0][0].as<int64_t>());
  EXPECT_EQ(*schema_.Q("SELECT convert_from(payload, 'UTF8') FROM {schema}.items "
                       "WHERE dedup_key = 'race'")[0][0],
            "y");
}

// Two calls that share dedup keys, given in opposite orders, never wait for
// each other in a cycle: the keys are inserted in key order. (In the order
// given, B would hold k2 while waiting for A's k1, and A's k2 would wait for
// B: a deadlock, 40P01.)
TEST_F(SqlApiTest, EnqueueManyCallsSharingDedupKeysDoNotDeadlock) {
  CreateQueue("q", 4);
  pqxx::connection a(schema_.dsn());
  pqxx::work wa(a);
  const int64_t a1 = wa.exec(WithSchema("SELECT id FROM {schema}.enqueue_many('q', ARRAY['a1'], "
                                        "dedup_keys => ARRAY['k1'])",
                                        schema_.name()))[0][0]
                         .as<int64_t>();
  std::optional<pqxx::result> b_rows;
  std::string b_error;
  std::thread b([&] {
    try {
      pqxx::connection c(schema_.dsn());
      c.set_variable("application_name", "'sqlapi-order'");
      pqxx::work w(c);
      pqxx::result r = w.exec(WithSchema(
          "SELECT id, duplicate FROM {schema}.enqueue_many('q', ARRAY['b2', 'b1'], "
          "dedup_keys => ARRAY['k2', 'k1'])",
          schema_.name()));
      w.commit();
      b_rows = r;
    } catch (const std::exception& e) {
      b_error = e.what();
    }
  });
  EXPECT_TRUE(WaitUntil([&] { return WaitingForALock("sqlapi-order"); }));
  std::string a_error;
  int64_t a2 = 0;
  try {
    a2 = wa.exec(WithSchema("SELECT id FROM {schema}.enqueue_many('q', ARRAY['a2'], "
                            "dedup_keys => ARRAY['k2'])",
                            schema_.name()))[0][0]
             .as<int64_t>();
    wa.commit();
  } catch (const std::exception& e) {
    a_error = e.what();
  }
  b.join();
  EXPECT_EQ(a_error, "");
  EXPECT_EQ(b_error, "");
  ASSERT_TRUE(b_rows.has_value());
  ASSERT_EQ(b_rows->size(), 2u);
  EXPECT_EQ((*b_rows)[0][0].as<int64_t>(), a2) << "k2 is A's";
  EXPECT_EQ((*b_rows)[1][0].as<int64_t>(), a1) << "k1 is A's";
  EXPECT_TRUE((*b_rows)[0][1].as<bool>());
  EXPECT_TRUE((*b_rows)[1][1].as<bool>());
  EXPECT_EQ(Left("q"), 2);
}

// One notice per part with the lowest id the call added there, as the C++
// producer's batches send them; past 32 parts one for all; on commit only.
TEST_F(SqlApiTest, EnqueueManyNotifiesEachPartOnceOnCommit) {
  CreateQueue("few", 8);
  CreateQueue("many", 64);
  pqxx::connection listener(schema_.dsn());
  NoticeReceiver few(listener, ChannelFor(schema_.name(), "few"));
  NoticeReceiver many(listener, ChannelFor(schema_.name(), "many"));
  listener.get_notifs();  // LISTEN is sent
  // Keyless items go to parts in runs of 32 ids (kKeylessRun): 100 runs reach
  // every part of "few" and more than 32 of "many".
  const std::string hundred_runs =
      "ARRAY(SELECT 'p' || g FROM generate_series(1, 3200) g), priority => -2";
  pqxx::connection c(schema_.dsn());
  {
    pqxx::work w(c);
    w.exec(WithSchema("SELECT * FROM {schema}.enqueue_many('few', " + hundred_runs + ")",
                      schema_.name()));
    w.abort();
  }
  pqxx::result r = Run("SELECT id, part FROM {schema}.enqueue_many('few', " + hundred_runs + ")");
  std::map<int, int64_t> lowest;
  for (const auto& row : r) {
    auto [it, fresh] = lowest.try_emplace(row[1].as<int>(), row[0].as<int64_t>());
    if (!fresh) it->second = std::min(it->second, row[0].as<int64_t>());
  }
  ASSERT_EQ(lowest.size(), 8u);
  std::vector<std::string> want;
  for (const auto& [part, id] : lowest) want.push_back(absl::StrCat("i:", part, ":-2:", id));
  pqxx::result m = Run("SELECT min(id), count(DISTINCT part) FROM {schema}.enqueue_many('many', " +
                       hundred_runs + ")");
  ASSERT_GT(m[0][1].as<int>(), 32);
  ASSERT_TRUE(EndAndWait(c, listener, many, "many"));
  std::sort(few.got.begin(), few.got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(few.got, want);
  EXPECT_EQ(many.got,
            (std::vector<std::string>{absl::StrCat("i:-1:-2:", m[0][0].as<int64_t>()), "end"}));
}

// What enqueue_item refuses, enqueue_many refuses for any of its items,
// naming the first; and arrays that do not line up. Nothing is enqueued.
TEST_F(SqlApiTest, EnqueueManyRefusesBadInputAndEnqueuesNothing) {
  CreateQueue("q", 4);
  const std::string unknown = absl::StrCat(
      "unknown queue \"nope\" in schema \"", schema_.name(),
      "\" (create it with: partq queue create nope --parts N --schema ", schema_.name(), ")");
  const std::pair<std::string, std::string> cases[] = {
      {"SELECT * FROM {schema}.enqueue_many('nope', ARRAY['a'])", unknown},
      {"SELECT * FROM {schema}.enqueue_many('nope', '{}'::text[])", unknown},
      {"SELECT * FROM {schema}.enqueue_many('bad name!', ARRAY['a'])",
       "invalid queue name \"bad name!\""},
      {"SELECT * FROM {schema}.enqueue_many('q', NULL::text[])", "payloads must not be NULL"},
      {"SELECT * FROM {schema}.enqueue_many('q', ARRAY['a', NULL, 'c'])",
       "item 2: payload must not be NULL"},
      {"SELECT * FROM {schema}.enqueue_many('q', ARRAY['a', 'b'], keys => ARRAY['k'])",
       "keys must have one element per payload (NULL for none): 1 for 2 payloads"},
      {"SELECT * FROM {schema}.enqueue_many('q', ARRAY['a'], dedup_keys => ARRAY['x', 'y'])",
       "dedup_keys must have one element per payload (NULL for none): 2 for 1 payloads"},
      {"SELECT * FROM {schema}.enqueue_many('q', ARRAY[['a'], ['b']])",
       "must be one-dimensional arrays"},
      {"SELECT * FROM {schema}.enqueue_many('q', ARRAY['a'], priority => 40000)",
       "priority 40000 is out of range -32768..32767"},
      {"SELECT * FROM {schema}.enqueue_many('q', ARRAY['a'], delay => '3651 days')",
       "is longer than 10 years"},
      {"SELECT * FROM {schema}.enqueue_many('q', ARRAY['a', 'b', 'c'], "
       "keys => ARRAY[NULL, NULL, repeat('k', 1025)])",
       "item 3: key is 1025 bytes; the limit is 1024"},
      {"SELECT * FROM {schema}.enqueue_many('q', ARRAY['a', 'b'], "
       "dedup_keys => ARRAY['ok', repeat('d', 1025)])",
       "item 2: dedup key is 1025 bytes; the limit is 1024"},
      {"UPDATE {schema}.queues SET max_payload_bytes = 10 WHERE name = 'q'; "
       "SELECT * FROM {schema}.enqueue_many('q', ARRAY['short', 'eleven byte'])",
       "item 2: payload is 11 bytes; the limit is 10 (the queue's, partq queue set "
       "--max-payload)"},
      {"SELECT * FROM {schema}.enqueue_many('q', ARRAY['a', 'b'], group_id => 'g', "
       "delay => '1 minute')",
       "cannot have a delay"},
  };
  for (const auto& [sql, says] : cases) {
    auto [state, message] = Fails(sql);
    EXPECT_EQ(state, sql.find("nope") != std::string::npos ? "42704" : "22023")
        << sql << ": " << message;
    EXPECT_TRUE(absl::StrContains(message, says)) << sql << ": " << message;
  }
  EXPECT_EQ(Left("q"), 0);
  // An untyped array literal could be either payload type: the driver says
  // which (docs/sql-api.md).
  EXPECT_EQ(Fails("SELECT * FROM {schema}.enqueue_many('q', '{a,b}')").first, "42725");
  EXPECT_EQ(Run("SELECT * FROM {schema}.enqueue_many('q', '{a,b}'::text[])").size(), 2u);
}

// A consumer that polls once in ten minutes drains what enqueue_many
// enqueued: its notices wake the parts' owner.
TEST_F(SqlApiTest, AConsumerIsWokenByEnqueueMany) {
  CreateQueue("q", 8);
  auto handler = MakeHandler([](HandlerCall&) { return absl::OkStatus(); });
  ConsumerOptions o = Options("q");
  o.poll_interval = absl::Minutes(10);
  Consumer consumer(schema_.Factory(), o, handler.get());
  ASSERT_TRUE(consumer.Start().ok());
  ASSERT_TRUE(consumer.session().WaitStable(absl::Seconds(30)));
  Run("SELECT count(*) FROM {schema}.enqueue_many('q', "
      "ARRAY(SELECT 'w' || g FROM generate_series(1, 500) g))");
  EXPECT_TRUE(WaitUntil([&] { return Left("q") == 0; }, absl::Seconds(60)));
  consumer.Stop();
  EXPECT_EQ(consumer.stats().acked, 500);
}

// DeleteQueue (C++) holds items' SHARE ROW EXCLUSIVE lock while it deletes
// the queue: an enqueue through SQL waits for it, then finds no queue.
// Schedules added through SQL (migration 15): the store lists them, and the
// first worker to look computes the first tick (SQL has no cron parser).
TEST_F(SqlApiTest, SchedulesAddedThroughSqlAreTheStoresAndGetTheirFirstTickFromAWorker) {
  CreateQueue("q", 4);
  Run("SELECT {schema}.add_schedule('hourly', 'q', 'ping', every => '1 hour', key => 'k', "
      "priority => 2)");
  Run("SELECT {schema}.add_schedule('berlin', 'q', '\\x00ff'::bytea, cron => ' 30 2 * * * ', "
      "time_zone => 'Europe/Berlin')");
  auto store = schema_.NewStore();
  ASSERT_OK_AND_ASSIGN(std::vector<Schedule> all, store->ListSchedules("q"));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].spec.name, "berlin");
  EXPECT_EQ(all[0].spec.cron, "30 2 * * *");
  EXPECT_EQ(all[0].spec.payload, std::string("\x00\xff", 2));
  EXPECT_EQ(all[1].spec.every, absl::Hours(1));
  EXPECT_EQ(all[1].spec.key, "k");
  EXPECT_EQ(all[1].spec.priority, 2);
  EXPECT_FALSE(all[0].next_tick.has_value());
  EXPECT_FALSE(all[1].next_tick.has_value());

  ASSERT_OK_AND_ASSIGN(FiredSchedules f, store->FireSchedules("q"));
  EXPECT_TRUE(f.fired.empty());
  ASSERT_OK_AND_ASSIGN(all, store->ListSchedules("q"));
  ASSERT_TRUE(all[0].next_tick.has_value() && all[1].next_tick.has_value());
  // 02:30 in Berlin: 00:30 or 01:30 UTC; the hourly one on the next hour.
  const int64_t berlin = absl::ToUnixSeconds(*all[0].next_tick) % 86400;
  EXPECT_TRUE(berlin == 1800 || berlin == 5400) << *all[0].next_tick;
  EXPECT_EQ(absl::ToUnixSeconds(*all[1].next_tick) % 3600, 0);
  EXPECT_GT(*all[1].next_tick, all[1].created_at);
  EXPECT_LE(*all[1].next_tick, all[1].created_at + absl::Hours(1));

  pqxx::result listed = Run("SELECT name, queue, fired FROM {schema}.list_schedules('q')");
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0][0].as<std::string>(), "berlin");
  EXPECT_EQ(Run("SELECT count(*) FROM {schema}.list_schedules()")[0][0].as<int>(), 2);
  Run("SELECT {schema}.delete_schedule('berlin')");
  ASSERT_OK_AND_ASSIGN(all, store->ListSchedules(""));
  EXPECT_EQ(all.size(), 1u);
}

// SQL checks the field count and characters of a cron expression; a field
// only the C++ parser refuses stops the schedule with its error instead of
// firing it wrongly.
TEST_F(SqlApiTest, ACronFieldOnlyTheParserRefusesStopsTheScheduleWithTheError) {
  CreateQueue("q", 1);
  Run("SELECT {schema}.add_schedule('odd', 'q', 'x', cron => '99 * * * *')");
  auto store = schema_.NewStore();
  ASSERT_OK_AND_ASSIGN(FiredSchedules f, store->FireSchedules("q"));
  EXPECT_TRUE(f.fired.empty());
  EXPECT_FALSE(f.next_due.has_value());
  ASSERT_OK_AND_ASSIGN(std::vector<Schedule> all, store->ListSchedules("q"));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].error, "cron field 1 (minute): 99 is out of range 0-59");
  EXPECT_FALSE(all[0].next_tick.has_value());
  EXPECT_EQ(all[0].fired, 0);
  EXPECT_EQ(Left("q"), 0);
}

TEST_F(SqlApiTest, BadScheduleArgumentsFailWithTheStoresMessages) {
  CreateQueue("q", 1);
  Run("SELECT {schema}.add_schedule('taken', 'q', 'x', every => '1 minute')");
  struct Case {
    std::string sql, state, says;
  };
  const Case bad[] = {
      {"SELECT {schema}.add_schedule('s', 'nope', 'x', every => '1 s')", "42704",
       "unknown queue \"nope\""},
      {"SELECT {schema}.add_schedule('s', 'q', 'x', cron => '0 */5 * * * *')", "22023",
       "cron expression \"0 */5 * * * *\" has 6 fields; partq takes 5: minute hour "
       "day-of-month month day-of-week (no seconds or year field)"},
      {"SELECT {schema}.add_schedule('s', 'q', 'x', cron => '* * * *')", "22023", "has 4 fields"},
      {"SELECT {schema}.add_schedule('s', 'q', 'x', cron => '* * ? * *')", "22023",
       "cron field 3 (day-of-month): \"?\" has characters cron does not use"},
      {"SELECT {schema}.add_schedule('s', 'q', 'x', every => '0 s')", "22023",
       "the interval must be a whole number of seconds from 1s to 366 days"},
      {"SELECT {schema}.add_schedule('s', 'q', 'x', every => '1.5 s')", "22023",
       "the interval must be a whole number of seconds"},
      {"SELECT {schema}.add_schedule('s', 'q', 'x', every => '1 s', cron => '* * * * *')",
       "22023", "give either every or cron, not both"},
      {"SELECT {schema}.add_schedule('s', 'q', 'x')", "22023", "a schedule needs every"},
      {"SELECT {schema}.add_schedule('s', 'q', 'x', cron => '* * * * *', "
       "time_zone => 'Europe/Nowhere')",
       "22023", "unknown time zone \"Europe/Nowhere\""},
      {"SELECT {schema}.add_schedule('s', 'q', 'x', every => '1 s', time_zone => 'UTC')",
       "22023", "time_zone applies to cron only"},
      {"SELECT {schema}.add_schedule('taken', 'q', 'x', every => '1 s')", "23505",
       "schedule \"taken\" already exists (on queue \"q\")"},
      {"SELECT {schema}.add_schedule('bad name', 'q', 'x', every => '1 s')", "22023",
       "invalid schedule name \"bad name\""},
      {"SELECT {schema}.add_schedule('s', 'q', 'x', every => '1 s', priority => 40000)", "22023",
       "priority 40000 is out of range"},
      {"SELECT {schema}.delete_schedule('nope')", "42704", "unknown schedule \"nope\""},
      {"SELECT * FROM {schema}.list_schedules('nope')", "42704", "unknown queue \"nope\""},
  };
  for (const Case& c : bad) {
    auto [state, message] = Fails(c.sql);
    EXPECT_EQ(state, c.state) << c.sql << ": " << message;
    EXPECT_TRUE(absl::StrContains(message, c.says)) << c.sql << ": " << message;
  }
  EXPECT_EQ(Run("SELECT count(*) FROM {schema}.schedules")[0][0].as<int>(), 1);
}

TEST_F(SqlApiTest, AnEnqueueWaitsForTheDeleteOfItsQueueAndThenFails) {
  CreateQueue("q", 4);
  // Holds the queue row, so the delete stops right after taking its lock on
  // items (it locks the row next) until this transaction ends.
  pqxx::connection holder(schema_.dsn());
  pqxx::work hold(holder);
  hold.exec(
      WithSchema("SELECT 1 FROM {schema}.queues WHERE name = 'q' FOR KEY SHARE", schema_.name()));
  absl::StatusOr<DeletedQueue> deleted;
  std::thread del = DeleteWhenFree("q", &deleted);

  std::string state, message;
  std::thread enq([&] {
    pqxx::connection c(schema_.dsn());
    pqxx::work w(c);
    w.exec("SET application_name = 'sqlapi-enqueue'");
    try {
      w.exec(WithSchema("SELECT {schema}.enqueue('q', 'too late')", schema_.name()));
      w.commit();
    } catch (const pqxx::sql_error& e) {
      state = e.sqlstate();
      message = e.what();
    }
  });
  ASSERT_TRUE(WaitUntil([&] { return WaitingForALock("sqlapi-enqueue"); }));
  hold.commit();
  del.join();
  enq.join();
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(state, "42704") << message;
  EXPECT_TRUE(absl::StrContains(message, "unknown queue \"q\"")) << message;
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items"), 0);
}

// The other order: a transaction that enqueued makes the delete wait, and
// the delete then deletes its item with the queue.
TEST_F(SqlApiTest, ADeleteWaitsForAnOpenEnqueueAndDeletesItsItem) {
  CreateQueue("q", 4);
  pqxx::connection c(schema_.dsn());
  pqxx::work w(c);
  w.exec(WithSchema("SELECT {schema}.enqueue('q', 'in time')", schema_.name()));
  absl::StatusOr<DeletedQueue> deleted;
  std::thread del = DeleteWhenFree("q", &deleted);
  w.commit();
  del.join();
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(deleted->items, 1);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items"), 0);
}

// A REPEATABLE READ transaction keeps the snapshot it started with, where a
// queue deleted since still exists: the enqueue fails (40001, retry) rather
// than write an item into a queue that is gone.
TEST_F(SqlApiTest, ARepeatableReadEnqueueIntoAQueueDeletedSinceItsSnapshotFails) {
  CreateQueue("q", 4);
  CreateQueue("kept", 4);
  pqxx::connection c(schema_.dsn());
  pqxx::transaction<pqxx::repeatable_read> w(c);
  w.exec(WithSchema("SELECT count(*) FROM {schema}.queues", schema_.name()));  // the snapshot
  ASSERT_TRUE(schema_.NewStore()->DeleteQueue("q", QueueContents::kRefuse).ok());
  try {
    w.exec(WithSchema("SELECT {schema}.enqueue('q', 'x')", schema_.name()));
    ADD_FAILURE() << "enqueued into a deleted queue";
  } catch (const pqxx::serialization_failure& e) {
    EXPECT_TRUE(absl::StrContains(e.what(), "could not serialize")) << e.what();
  }
  w.abort();
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items"), 0);
  // A live queue is fine in REPEATABLE READ.
  pqxx::transaction<pqxx::repeatable_read> ok(c);
  ok.exec(WithSchema("SELECT {schema}.enqueue('kept', 'x')", schema_.name()));
  ok.commit();
  EXPECT_EQ(Left("kept"), 1);
}

// The examples of docs/sql-api.md, run as a reader would, against the test
// database: Debian's Python with python3-psycopg2, and Node with the pg of
// examples/sql-api/package-lock.json (tools/setup installs it into its cache,
// like the checkers' packages).
class SqlApiExampleTest : public SqlApiTest {
 protected:
  // libpq's PG* variables for the test database, which both drivers read.
  std::map<std::string, std::string> Env() {
    pqxx::connection c(schema_.dsn());
    return {{"PGHOST", c.hostname() != nullptr ? c.hostname() : ""},
            {"PGPORT", c.port() != nullptr ? c.port() : ""},
            {"PGUSER", c.username()},
            {"PGDATABASE", c.dbname()},
            {"PARTQ_SCHEMA", schema_.name()},
            {"PARTQ_DSN", ""}};
  }

  // What the examples print and write, the same for both.
  void ExpectTheExamplesWork(const std::string& out) {
    const std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
    ASSERT_EQ(lines.size(), 7u) << out;
    const auto order = schema_.Q(
        "SELECT id, part FROM {schema}.items WHERE dedup_key = 'order-1001' AND key = 'c-42' AND "
        "convert_from(payload, 'UTF8')::jsonb = "
        "'{\"order\": 1001, \"customer\": \"c-42\", \"amount\": 19.5}'");
    ASSERT_EQ(order.size(), 1u) << "one order item";
    const std::string id = *order[0][0], part = *order[0][1];
    EXPECT_EQ(part, std::to_string(PartForKey("c-42", 6)));
    EXPECT_EQ(lines[0], absl::StrCat("item ", id, " part ", part, " duplicate false"));
    EXPECT_EQ(lines[1], absl::StrCat("item ", id, " part ", part, " duplicate true"));
    const auto bytes = schema_.Q(
        "SELECT id FROM {schema}.items WHERE payload = '\\x00ff726177'::bytea AND priority = -1 "
        "AND run_at - enqueued_at = interval '5 minutes'");
    ASSERT_EQ(bytes.size(), 1u) << "the bytes item";
    EXPECT_EQ(lines[2], absl::StrCat("bytes item ", *bytes[0][0]));
    // enqueue_many: three orders in the order given, the first and last
    // under key c-7 (so in its part), the middle one keyless.
    const auto many = schema_.Q(absl::StrCat(
        "SELECT id, key, part, convert_from(payload, 'UTF8')::jsonb->>'order' FROM {schema}.items "
        "WHERE id > ",
        *bytes[0][0], " ORDER BY id"));
    ASSERT_EQ(many.size(), 3u) << out;
    EXPECT_EQ(lines[3],
              absl::StrCat("many items ", *many[0][0], " ", *many[1][0], " ", *many[2][0]));
    EXPECT_EQ(*many[0][3], "1002");
    EXPECT_EQ(*many[1][3], "1003");
    EXPECT_EQ(*many[2][3], "1004");
    EXPECT_EQ(many[0][1], "c-7");
    EXPECT_EQ(many[1][1], std::nullopt);
    EXPECT_EQ(*many[0][2], std::to_string(PartForKey("c-7", 6)));
    EXPECT_EQ(*many[2][2], *many[0][2]);
    EXPECT_EQ(lines[4], "rolled back");
    EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.items WHERE payload = 'never'"), 0);
    EXPECT_TRUE(absl::StartsWith(lines[5], "error 42704: unknown queue \"no-such-queue\"")) << out;
    EXPECT_EQ(lines[6], absl::StrCat("item ", id, " is pending"));
    EXPECT_EQ(Left("orders"), 5);
  }
};

TEST_F(SqlApiExampleTest, PythonExampleEnqueuesThroughPsycopg2) {
  CreateQueue("orders", 6);
  std::string out;
  const int code = testing::RunCommand(
      {PARTQ_SYSTEM_PYTHON3, std::string(PARTQ_SOURCE_DIR) + "/examples/sql-api/enqueue.py",
       "orders"},
      &out, Env());
  ASSERT_EQ(code, 0) << out;
  ExpectTheExamplesWork(out);
}

TEST_F(SqlApiExampleTest, NodeExampleEnqueuesThroughPg) {
  CreateQueue("orders", 6);
  const std::string dir = std::string(PARTQ_SOURCE_DIR) + "/examples/sql-api";
  std::string npm_dir;
  ASSERT_EQ(
      testing::RunCommand({std::string(PARTQ_SOURCE_DIR) + "/tools/setup", "npm", dir}, &npm_dir),
      0)
      << "tools/setup could not install examples/sql-api's npm packages";
  npm_dir = std::string(absl::StripAsciiWhitespace(npm_dir));
  // Node resolves `import 'pg'` from the script's own directory upwards: the
  // script runs from a directory whose node_modules is the installed one.
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/partq-sql-api-XXXXXX";
  const fs::path run = mkdtemp(tmpl);
  fs::copy_file(dir + "/enqueue.mjs", run / "enqueue.mjs");
  fs::create_directory_symlink(fs::path(npm_dir) / "node_modules", run / "node_modules");
  std::string out;
  const int code =
      testing::RunCommand({PARTQ_NODE, (run / "enqueue.mjs").string(), "orders"}, &out, Env());
  fs::remove_all(run);
  ASSERT_EQ(code, 0) << out;
  ExpectTheExamplesWork(out);
}

}  // namespace
}  // namespace partq
