// `partq queue` against a real PostgreSQL (cli/admin.cc, CmdQueue): what it
// prints, its exit status, and what is left in the database.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "partitioner/part.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"

namespace partq {
namespace {

using testing::Partq;
using testing::PartqResult;
using testing::TestSchema;

class QueueCommandTest : public ::testing::Test {
 protected:
  // `args` plus this test's --dsn and --schema.
  std::vector<std::string> With(std::vector<std::string> args) const {
    args.insert(args.end(), {"--dsn", schema_.dsn(), "--schema", schema_.name()});
    return args;
  }
  // Runs partq with `args` (and this test's connection) and expects exit 0.
  std::string Ok(const std::vector<std::string>& args, const std::string& input = "") {
    PartqResult r = Partq(With(args), input);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out;
  }
  // Moves the queue's oldest item to the dead items, as Finish moves it.
  void DeadLetterOldest(const std::string& queue) const {
    schema_.Q(absl::StrCat(R"sql(
    WITH d AS (DELETE FROM {schema}.items
               WHERE id = (SELECT min(id) FROM {schema}.items WHERE queue = ')sql",
                           queue, R"sql(')
               RETURNING *)
    INSERT INTO {schema}.dead_items (id, queue, part, key, dedup_key, priority, attempts,
                                     enqueued_at, last_error, payload)
    SELECT id, queue, part, key, dedup_key, priority, 1, enqueued_at, 'boom', payload FROM d)sql"));
  }
  int64_t Count(const std::string& table, const std::string& where) const {
    return schema_.QInt(absl::StrCat("SELECT count(*) FROM {schema}.", table, " WHERE ", where));
  }
  // A command refused with exit `code`, saying `says` on stderr and nothing
  // on stdout.
  struct Refused {
    std::vector<std::string> args;
    int code;
    std::string says;
  };
  void ExpectRefused(const std::vector<Refused>& cases) {
    for (const Refused& c : cases) {
      PartqResult r = Partq(With(c.args));
      EXPECT_EQ(r.code, c.code) << absl::StrJoin(c.args, " ") << ": " << r.err;
      EXPECT_TRUE(absl::StrContains(r.err, c.says)) << r.err;
      EXPECT_EQ(r.out, "");
    }
  }

  TestSchema schema_;
};

// Queue names are case-sensitive: creating "QA" beside "qa" makes a second
// queue, and says so on stderr, in case the other was meant.
TEST_F(QueueCommandTest, CreateWarnsOfAQueueWhoseNameDiffersOnlyInCase) {
  PartqResult first = Partq(With({"queue", "create", "qa", "--parts", "2"}));
  EXPECT_EQ(first.code, 0) << first.err;
  EXPECT_EQ(first.err, "");
  PartqResult second = Partq(With({"queue", "create", "QA", "--parts", "2"}));
  EXPECT_EQ(second.code, 0) << second.err;
  EXPECT_TRUE(absl::StartsWith(second.out, "created queue \"QA\": 2 parts")) << second.out;
  EXPECT_EQ(second.err,
            "partq: warning: queue \"qa\" exists too; names are case-sensitive, so \"QA\" is "
            "another queue with workers and items of its own\n");
  EXPECT_EQ(Count("queues", "lower(name) = 'qa'"), 2);
  // Neither an unrelated name nor the same name again.
  EXPECT_EQ(Partq(With({"queue", "create", "qb", "--parts", "2"})).err, "");
  EXPECT_EQ(Partq(With({"queue", "create", "qa", "--parts", "2"})).err, "");
}

// The reported bug: `queue delete` on a queue with pending items printed
// `deleted queue "orders"` and the items were gone.
TEST_F(QueueCommandTest, DeleteRefusesAQueueThatHoldsWorkAndSaysToPassForce) {
  Ok({"queue", "create", "orders", "--parts", "2"});
  Ok({"enqueue", "orders", "--stdin"}, "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n");
  Ok({"enqueue", "orders", "--delay", "1h", "later"});
  // One of them dead-lettered (moved as Finish moves it).
  DeadLetterOldest("orders");

  PartqResult r = Partq(With({"queue", "delete", "orders"}));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, absl::StrCat("partq: error: queue \"orders\" still holds 11 items (10 ready, 1 "
                                "delayed, 0 in flight) and 1 dead item; nothing was deleted. To "
                                "delete them with the queue: partq queue delete orders --force "
                                "--schema ",
                                schema_.name(), "\n"));
  EXPECT_EQ(Count("queues", "name = 'orders'"), 1);
  EXPECT_EQ(Count("items", "queue = 'orders'"), 11);
  EXPECT_EQ(Count("dead_items", "queue = 'orders'"), 1);

  EXPECT_EQ(Ok({"queue", "delete", "orders", "--force"}),
            "deleted queue \"orders\" with 11 items and 1 dead item\n");
  EXPECT_EQ(Count("queues", "name = 'orders'"), 0);
  EXPECT_EQ(Count("items", "queue = 'orders'"), 0);
  EXPECT_EQ(Count("dead_items", "queue = 'orders'"), 0);
}

TEST_F(QueueCommandTest, DeleteOfAnEmptyQueueNeedsNoForce) {
  Ok({"queue", "create", "empty", "--parts", "1"});
  Ok({"queue", "create", "forced", "--parts", "1"});
  EXPECT_EQ(Ok({"queue", "delete", "empty"}), "deleted queue \"empty\"\n");
  EXPECT_EQ(Ok({"queue", "delete", "forced", "--force"}),
            "deleted queue \"forced\" with 0 items and 0 dead items\n");
  EXPECT_EQ(Count("queues", "true"), 0);
  // Its schedules go with it, and it says how many.
  Ok({"queue", "create", "reports", "--parts", "1"});
  Ok({"schedule", "add", "nightly", "reports", "--every", "24h", "x"});
  Ok({"schedule", "add", "hourly", "reports", "--every", "1h", "x"});
  EXPECT_EQ(Ok({"queue", "delete", "reports"}),
            "deleted queue \"reports\" (and its 2 schedules)\n");
  EXPECT_EQ(Count("schedules", "true"), 0);
}

TEST_F(QueueCommandTest, DeleteRejectsBadInputAndDeletesNothing) {
  Ok({"queue", "create", "q", "--parts", "1"});
  Ok({"enqueue", "q", "x"});
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {{"queue", "delete", "nosuch"}, 1, "unknown queue \"nosuch\""},
           {{"queue", "delete", "nosuch", "--force"}, 1, "unknown queue \"nosuch\""},
           {{"queue", "delete", "q; DROP TABLE items", "--force"}, 2, "invalid queue name"},
           {{"queue", "delete", "q'--", "--force"}, 2, "invalid queue name"},
           {{"queue", "delete", "--force"}, 2, "usage: partq queue delete NAME [--force]"},
           {{"queue", "delete", "q", "extra", "--force"}, 2, "usage: partq queue delete NAME"},
           {{"queue", "create", "p", "--parts", "1", "--force"}, 2,
            "--force goes with queue delete"},
           {{"queue", "list", "--force"}, 2, "--force goes with queue delete"},
       }) {
    PartqResult r = Partq(With(c.args));
    EXPECT_EQ(r.code, c.code) << c.args[2] << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, c.says)) << r.err;
    EXPECT_EQ(r.out, "");
  }
  EXPECT_EQ(Count("queues", "true"), 1);
  EXPECT_EQ(Count("items", "queue = 'q'"), 1);
}

// `queue set --parts` grows a queue to a multiple of its count; it refuses
// to shrink, a count that is not a multiple and an unknown queue, and
// changes nothing then. Items enqueued after the grow use the new count,
// and a key's new part is its old part plus a multiple of the old count.
TEST_F(QueueCommandTest, SetPartsGrowsToAMultipleAndRefusesTheRest) {
  Ok({"queue", "create", "orders", "--parts", "16"});
  Ok({"enqueue", "orders", "--key", "customer-7", "before"});
  EXPECT_EQ(Ok({"queue", "set", "orders", "--parts", "64"}),
            "queue \"orders\" grew from 16 to 64 parts: its workers rebalance onto them; items "
            "enqueued before run in their old parts (an ordered queue's keys in order)\n");
  EXPECT_EQ(Count("queues", "name = 'orders' AND parts = 64 AND grown_from = '{16}'"), 1);
  EXPECT_EQ(Ok({"queue", "set", "orders", "--parts", "64"}),
            "queue \"orders\" has 64 parts already\n");
  Ok({"enqueue", "orders", "--key", "customer-7", "after"});
  const int64_t before =
      schema_.QInt("SELECT part FROM {schema}.items WHERE payload = 'before'::bytea");
  const int64_t after =
      schema_.QInt("SELECT part FROM {schema}.items WHERE payload = 'after'::bytea");
  EXPECT_EQ(before, PartForKey("customer-7", 16));
  EXPECT_EQ(after, PartForKey("customer-7", 64));
  EXPECT_EQ(after % 16, before);

  struct Case {
    std::vector<std::string> args;
    int code;
    std::string err;
  };
  for (const Case& c : std::vector<Case>{
           {{"queue", "set", "orders", "--parts", "32"},
            2,
            "partq: error: queue \"orders\" has 64 parts and cannot shrink to 32: a queue's parts "
            "only grow, to a multiple of 64 (128, 192, 256, ...)\n"},
           {{"queue", "set", "orders", "--parts", "96"},
            2,
            "partq: error: queue \"orders\" has 64 parts: 96 is not a multiple of 64; parts grow "
            "to a multiple (128, 192, 256, ...), so each part splits and every key keeps its "
            "order\n"},
           {{"queue", "set", "orders", "--parts", "8192"},
            2,
            "partq: error: --parts must be between 1 and 4096 (got 8192)\n"},
           {{"queue", "set", "nosuch", "--parts", "8"},
            1,
            absl::StrCat("partq: error: unknown queue \"nosuch\" in schema \"", schema_.name(),
                         "\" (create it with: partq queue create nosuch --parts N --schema ",
                         schema_.name(), ")\n")},
       }) {
    PartqResult r = Partq(With(c.args));
    EXPECT_EQ(r.code, c.code) << c.args[2] << " " << c.args[4] << ": " << r.err;
    EXPECT_EQ(r.err, c.err);
    EXPECT_EQ(r.out, "");
  }
  EXPECT_EQ(Count("queues", "name = 'orders' AND parts = 64 AND grown_from = '{16}'"), 1);
  EXPECT_EQ(Count("queues", "true"), 1);
}

// `queue create` twice with the same settings is not an error (the Helm
// chart's migration job runs it on every upgrade); only the settings whose
// flags are given are compared.
TEST_F(QueueCommandTest, CreateOfAnExistingQueueWithTheSameSettingsSucceeds) {
  const std::vector<std::string> create = {"queue",       "create",         "orders", "--parts",
                                           "16",          "--max-attempts", "5",      "--ordered",
                                           "--dlq-topic", "orders.dlq"};
  EXPECT_EQ(Ok(create),
            "created queue \"orders\": 16 parts, lexical assignment, session TTL 10s, "
            "max attempts 5, ordered, dead-letter topic orders.dlq\n");
  const std::string exists =
      "queue \"orders\" already exists with these settings: 16 parts, lexical assignment, session "
      "TTL 10s, max attempts 5, ordered, dead-letter topic orders.dlq\n";
  PartqResult again = Partq(With(create));
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(again.out, exists);
  EXPECT_EQ(again.err, "");
  // The same settings spelled otherwise, and fewer flags: flags not given
  // ask for nothing (the defaults, max attempts 25 and no ordering, do not
  // count against the queue).
  EXPECT_EQ(Ok({"queue", "create", "orders", "--parts=16", "--assignment", "lexical",
                "--session-ttl", "10000ms", "--max-attempts=5"}),
            exists);
  EXPECT_EQ(Ok({"queue", "create", "orders", "--parts", "16"}), exists);
  EXPECT_EQ(Count("queues", "true"), 1);
  EXPECT_EQ(Count("queues",
                  "name = 'orders' AND parts = 16 AND max_attempts = 5 AND ordered AND "
                  "dlq_topic = 'orders.dlq' AND session_ttl = '10s'"),
            1);
}

// Asked for other settings, `queue create` fails and changes nothing, and
// shows each setting given next to the existing one.
TEST_F(QueueCommandTest, CreateOfAnExistingQueueWithOtherSettingsFailsAndShowsBoth) {
  Ok({"queue", "create", "orders", "--parts", "16", "--max-attempts", "5", "--dlq-topic",
      "orders.dlq"});
  const std::string unchanged =
      "name = 'orders' AND parts = 16 AND max_attempts = 5 AND NOT ordered AND "
      "assignment = 'lexical' AND dlq_topic = 'orders.dlq' AND session_ttl = '10s'";
  ASSERT_EQ(Count("queues", unchanged), 1);

  PartqResult r = Partq(With({"queue", "create", "orders", "--parts", "32", "--max-attempts", "5",
                              "--assignment", "sticky"}));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "partq: error: queue \"orders\" already exists with other settings; nothing was "
            "changed:\n"
            "  setting       existing  requested\n"
            "  parts         16        32         <- differs\n"
            "  assignment    lexical   sticky     <- differs\n"
            "  max attempts  5         5\n"
            "A queue's settings are fixed when it is created, except its dead-letter topic, "
            "rate limit, fair share, key concurrency, payload limit and part count, which grows to "
            "a multiple "
            "(partq queue set).\n");

  // Each setting on its own, the ones a flag cannot turn off included.
  struct Case {
    std::vector<std::string> flags;
    std::string row;
  };
  for (const Case& c : std::vector<Case>{
           {{"--max-attempts", "25"}, "  max attempts  5         25         <- differs\n"},
           {{"--session-ttl", "30s"}, "  session TTL  10s       30s        <- differs\n"},
           {{"--ordered"}, "  ordered  no        yes        <- differs\n"},
           {{"--dlq-topic", ""}, "  dead-letter topic  orders.dlq  (none)     <- differs\n"},
           {{"--dlq-topic", "other.dlq"},
            "  dead-letter topic  orders.dlq  other.dlq  <- differs\n"},
           // --rate was parsed and then not compared: exit 0 whatever it asked.
           {{"--rate", "20/s"}, "  rate limit  none      20/s       <- differs\n"},
       }) {
    std::vector<std::string> args = {"queue", "create", "orders", "--parts", "16"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    PartqResult one = Partq(With(args));
    EXPECT_EQ(one.code, 1) << c.flags[0];
    EXPECT_EQ(one.out, "") << c.flags[0];
    EXPECT_TRUE(absl::StrContains(one.err, "already exists with other settings")) << one.err;
    EXPECT_TRUE(absl::StrContains(one.err, c.row)) << one.err;
  }
  EXPECT_EQ(Count("queues", "true"), 1);
  EXPECT_EQ(Count("queues", unchanged), 1);
}

// --fair-by key|none: at creation or by `queue set`, shown by queue list,
// status and their --json; anything else is refused and changes nothing.
TEST_F(QueueCommandTest, FairByIsSetAtCreationOrByQueueSetAndShown) {
  EXPECT_EQ(Ok({"queue", "create", "t", "--parts", "2", "--fair-by", "key"}),
            "created queue \"t\": 2 parts, lexical assignment, session TTL 10s, max attempts 25, "
            "fair by key\n");
  EXPECT_EQ(Count("queues", "name = 't' AND fair_by = 'key'"), 1);
  EXPECT_TRUE(absl::StrContains(Ok({"queue", "list"}), " FAIR_BY "));
  EXPECT_TRUE(absl::StrContains(Ok({"queue", "list", "--json"}), "\"fair_by\": \"key\""));
  EXPECT_TRUE(absl::StrContains(Ok({"status", "t"}), "fair by key"));
  EXPECT_TRUE(absl::StrContains(Ok({"status", "t", "--json"}), "\"fair_by\": \"key\""));
  EXPECT_TRUE(absl::StrContains(Ok({"queue", "set", "t", "--fair-by", "none"}), "no fair share"));
  EXPECT_EQ(Count("queues", "name = 't' AND fair_by IS NULL"), 1);
  EXPECT_TRUE(absl::StrContains(Ok({"queue", "set", "t", "--fair-by", "key"}), "in turn"));
  // Asked for at creation of an existing queue, it is compared like the others.
  PartqResult other = Partq(With({"queue", "create", "t", "--parts", "2", "--fair-by", "none"}));
  EXPECT_EQ(other.code, 1);
  EXPECT_TRUE(absl::StrContains(other.err, "  fair by  key       none       <- differs\n"))
      << other.err;
  ExpectRefused({
      {{"queue", "set", "t", "--fair-by", "tenant"},
       2,
       "--fair-by: fair share can be by \"key\" or \"none\", not \"tenant\""},
      {{"queue", "create", "u", "--parts", "1", "--fair-by", "tenant"}, 2, "--fair-by"},
      {{"queue", "set", "t", "--fair-by", ""}, 2, "--fair-by"},
      {{"queue", "set", "t", "--fair-by", "key", "--rate", "5/s"}, 2, "one setting at a time"},
      // An empty $RATE in a script must not turn a limit off unseen.
      {{"queue", "set", "t", "--rate", ""}, 2, "--rate must be N/s"},
      {{"queue", "create", "u", "--parts", "1", "--rate", ""}, 2, "--rate must be N/s"},
      {{"queue", "set", "nosuch", "--fair-by", "key"}, 1, "unknown queue \"nosuch\""},
  });
  EXPECT_EQ(Count("queues", "name = 't' AND fair_by = 'key'"), 1);
  EXPECT_EQ(Count("queues", "name = 'u'"), 0);
}

// A rate limit is shown in the unit that needs no exponent (a walkthrough
// set 0.0001/h and read back 2.77778e-08/s).
TEST_F(QueueCommandTest, RateLimitsAreShownWithoutAnExponent) {
  int n = 0;
  for (const auto& [given, shown] :
       std::vector<std::pair<std::string, std::string>>{{"500/s", "rate limit 500/s"},
                                                        {"10/min", "rate limit 10/min"},
                                                        {"0.0001/h", "rate limit 0.0001/h"},
                                                        {"1000000", "rate limit 1000000/s"},
                                                        {"0.00001/h", "rate limit 0.00001/h"}}) {
    const std::string name = absl::StrCat("r", n++);
    EXPECT_TRUE(
        absl::StrContains(Ok({"queue", "create", name, "--parts", "1", "--rate", given}), shown))
        << given;
  }
}

// --key-concurrency N|none: at creation or by `queue set`, shown by queue
// list, status and their --json; 0, a word or a negative number is refused
// and changes nothing.
TEST_F(QueueCommandTest, KeyConcurrencyIsSetAtCreationOrByQueueSetAndShown) {
  EXPECT_EQ(Ok({"queue", "create", "t", "--parts", "2", "--key-concurrency", "3"}),
            "created queue \"t\": 2 parts, lexical assignment, session TTL 10s, max attempts 25, "
            "key concurrency 3\n");
  EXPECT_EQ(Count("queues", "name = 't' AND key_concurrency = 3"), 1);
  EXPECT_TRUE(absl::StrContains(Ok({"queue", "list"}), " KEY_CONC "));
  EXPECT_TRUE(absl::StrContains(Ok({"queue", "list", "--json"}), "\"key_concurrency\": 3"));
  EXPECT_TRUE(absl::StrContains(Ok({"status", "t"}), "key concurrency 3"));
  EXPECT_TRUE(absl::StrContains(Ok({"status", "t", "--json"}), "\"key_concurrency\": 3"));
  EXPECT_TRUE(absl::StrContains(Ok({"queue", "set", "t", "--key-concurrency", "none"}),
                                "no key concurrency bound"));
  EXPECT_EQ(Count("queues", "name = 't' AND key_concurrency IS NULL"), 1);
  EXPECT_TRUE(absl::StrContains(Ok({"queue", "list", "--json"}), "\"key_concurrency\": null"));
  EXPECT_TRUE(absl::StrContains(Ok({"queue", "set", "t", "--key-concurrency", "2"}),
                                "at most 2 items of a key in flight at once"));
  // Asked for at creation of an existing queue, it is compared like the others.
  PartqResult other =
      Partq(With({"queue", "create", "t", "--parts", "2", "--key-concurrency", "5"}));
  EXPECT_EQ(other.code, 1);
  EXPECT_TRUE(absl::StrContains(other.err, "key concurrency  2         5          <- differs"))
      << other.err;
  ExpectRefused({
      {{"queue", "set", "t", "--key-concurrency", "0"},
       2,
       "--key-concurrency: key concurrency must be a number 1..1000000 or \"none\", not \"0\""},
      {{"queue", "set", "t", "--key-concurrency", "abc"}, 2, "not \"abc\""},
      {{"queue", "set", "t", "--key-concurrency", "-1"}, 2, "--key-concurrency"},
      {{"queue", "set", "t", "--key-concurrency", "1000001"}, 2, "--key-concurrency"},
      {{"queue", "create", "u", "--parts", "1", "--key-concurrency", "0"}, 2, "--key-concurrency"},
      {{"queue", "set", "t", "--key-concurrency", "2", "--rate", "5/s"},
       2,
       "one setting at a time"},
      {{"queue", "set", "nosuch", "--key-concurrency", "2"}, 1, "unknown queue \"nosuch\""},
  });
  // An ordered queue runs one item of a key at a time already: a bound is refused.
  Ok({"queue", "create", "o", "--parts", "1", "--ordered"});
  ExpectRefused({
      {{"queue", "create", "p", "--parts", "1", "--ordered", "--key-concurrency", "2"},
       2,
       "queue \"p\" is ordered: it already runs one item of a key at a time"},
      {{"queue", "set", "o", "--key-concurrency", "2"}, 2, "queue \"o\" is ordered"},
  });
  EXPECT_EQ(Count("queues", "name = 't' AND key_concurrency = 2"), 1);
  EXPECT_EQ(Count("queues", "name = 'u' OR name = 'p'"), 0);
  EXPECT_EQ(Count("queues", "name = 'o' AND key_concurrency IS NULL"), 1);
}

// `partq status` printed 4,103 lines for a 4096-part queue (issue 25): past
// 64 parts it prints a summary by owner, --parts the table, --json all of it;
// and it says how many items died in the last minute.
TEST_F(QueueCommandTest, StatusSummarisesManyPartsAndCountsRecentDeadItems) {
  Ok({"queue", "create", "wide", "--parts", "100"});
  Ok({"enqueue", "wide", "--stdin"}, "1\n2\n3\n");
  DeadLetterOldest("wide");
  const std::string summary = Ok({"status", "wide"});
  EXPECT_TRUE(absl::StrContains(summary, "100 parts (the table of every part: --parts), by owner:"))
      << summary;
  EXPECT_TRUE(absl::StrContains(summary, "without a live owner: parts 0-99")) << summary;
  EXPECT_TRUE(absl::StrContains(summary, "furthest behind: part ")) << summary;
  EXPECT_TRUE(absl::StrContains(summary, "dead-lettered in it and still dead: 1 item")) << summary;
  // No worker ran: nobody reported anything finished.
  EXPECT_TRUE(absl::StrContains(summary, "last minute: 0.00 acked/s, 0.00 failed/s (retried)"))
      << summary;
  EXPECT_TRUE(absl::StrContains(summary, "dead-lettered/s (no live worker: the rates are what"))
      << summary;
  EXPECT_LT(std::count(summary.begin(), summary.end(), '\n'), 20) << summary;
  const std::string table = Ok({"status", "wide", "--parts"});
  EXPECT_GT(std::count(table.begin(), table.end(), '\n'), 100) << "a line per part";
  EXPECT_TRUE(absl::StrContains(table, " PART OWNER")) << table;
  const std::string json = Ok({"status", "wide", "--json"});
  EXPECT_TRUE(absl::StrContains(json, "\"dead_last_minute\": 1")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"part\": 99")) << "every part, whatever the count";
  // The oldest ready item's age: null where nothing is ready (the text's "-"), not 0.
  const nlohmann::json parsed = nlohmann::json::parse(json);
  int with_ready = 0;
  for (const auto& part : parsed.at("parts")) {
    const bool ready = part.at("ready").get<int64_t>() > 0;
    with_ready += ready;
    EXPECT_EQ(part.at("oldest_ready_age_seconds").is_null(), !ready) << part.dump();
  }
  EXPECT_GE(with_ready, 1);
  EXPECT_TRUE(parsed.at("totals").at("oldest_ready_age_seconds").is_number()) << json;
  // A queue of 64 parts or fewer gets its table without asking.
  Ok({"queue", "create", "narrow", "--parts", "64"});
  EXPECT_TRUE(absl::StrContains(Ok({"status", "narrow"}), " PART OWNER"));
}

}  // namespace
}  // namespace partq
