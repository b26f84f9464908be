// `partq schedule` against a real PostgreSQL (cli/schedule.cc): what it
// prints, its exit status, and that bad input writes nothing.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"

namespace partq {
namespace {

using testing::Partq;
using testing::PartqResult;
using testing::TestSchema;

class ScheduleCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Ok({"queue", "create", "q", "--parts", "4"});
    Ok({"queue", "create", "other", "--parts", "1"});
  }
  std::vector<std::string> With(std::vector<std::string> args) const {
    args.insert(args.end(), {"--dsn", schema_.dsn(), "--schema", schema_.name()});
    return args;
  }
  std::string Ok(const std::vector<std::string>& args) {
    PartqResult r = Partq(With(args));
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out;
  }
  int64_t Schedules() const { return schema_.QInt("SELECT count(*) FROM {schema}.schedules"); }

  TestSchema schema_;
};

TEST_F(ScheduleCommandTest, AddListAndDelete) {
  const std::string added = Ok({"schedule", "add", "half-minute", "q", "--every", "30s", "ping"});
  EXPECT_TRUE(absl::StartsWith(added,
                               "added schedule \"half-minute\" on queue \"q\": every 30s; first "
                               "tick "))
      << added;
  EXPECT_TRUE(absl::StrContains(added, ":00 UTC\n") || absl::StrContains(added, ":30 UTC\n"))
      << added;
  Ok({"schedule", "add", "berlin", "other", "--cron", "30 2 * * *", "--tz", "Europe/Berlin",
      "--key", "tenant-1", "--priority", "-5", "--catch-up", "90m", "{\"report\":true}"});

  const std::string list = Ok({"schedule", "list"});
  EXPECT_TRUE(absl::StartsWith(list, "NAME ")) << list;
  EXPECT_TRUE(absl::StrContains(list, "cron '30 2 * * *' Europe/Berlin")) << list;
  EXPECT_TRUE(absl::StrContains(list, "every 30s")) << list;
  EXPECT_TRUE(absl::StrContains(list, "CATCH-UP")) << list;
  EXPECT_TRUE(absl::StrContains(list, "1h30m")) << list;
  EXPECT_TRUE(absl::StrContains(list, "default")) << list;
  EXPECT_FALSE(absl::StrContains(list, "overdue")) << list;
  // No worker of q runs, so nothing fires: a tick past due by more than a
  // minute says so, where NEXT in the past alone did not.
  schema_.Q(
      "UPDATE {schema}.schedules SET next_tick = now() - interval '2 minutes' "
      "WHERE name = 'half-minute'");
  const std::string overdue = Ok({"schedule", "list", "q"});
  EXPECT_TRUE(absl::StrContains(overdue, " UTC: a schedule fires only while a worker of q runs\n"))
      << overdue;
  EXPECT_TRUE(absl::StrContains(overdue, "  overdue since ")) << overdue;

  nlohmann::json j = nlohmann::json::parse(Ok({"schedule", "list", "other", "--json"}));
  ASSERT_EQ(j.size(), 1u) << j.dump();
  EXPECT_EQ(j[0]["name"], "berlin");
  EXPECT_EQ(j[0]["queue"], "other");
  EXPECT_EQ(j[0]["cron"], "30 2 * * *");
  EXPECT_EQ(j[0]["time_zone"], "Europe/Berlin");
  EXPECT_TRUE(j[0]["every_seconds"].is_null());
  EXPECT_EQ(j[0]["key"], "tenant-1");
  EXPECT_EQ(j[0]["priority"], -5);
  EXPECT_EQ(j[0]["payload"], "{\"report\":true}");
  EXPECT_EQ(j[0]["fired"], 0);
  EXPECT_EQ(j[0]["missed"], 0);
  EXPECT_EQ(j[0]["catch_up_seconds"], 5400);
  EXPECT_TRUE(j[0]["last_tick"].is_null());
  // 02:30 in Berlin is 00:30 or 01:30 UTC.
  const std::string next = j[0]["next_tick"];
  EXPECT_TRUE(absl::EndsWith(next, "T00:30:00Z") || absl::EndsWith(next, "T01:30:00Z")) << next;

  EXPECT_EQ(Ok({"schedule", "delete", "berlin"}), "deleted schedule \"berlin\"\n");
  PartqResult again = Partq(With({"schedule", "delete", "berlin"}));
  EXPECT_EQ(again.code, 1);
  EXPECT_TRUE(absl::StrContains(again.err, "unknown schedule \"berlin\"")) << again.err;
  EXPECT_EQ(Ok({"schedule", "list", "other"}), "no schedules on other\n");
  EXPECT_EQ(Schedules(), 1);
}

TEST_F(ScheduleCommandTest, BadInputGetsAClearErrorAndWritesNothing) {
  Ok({"schedule", "add", "taken", "q", "--every", "1m", "x"});
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"schedule", "add", "s", "nosuch", "--every", "30s", "x"}, 1, "unknown queue \"nosuch\""},
      {{"schedule", "add", "s", "q", "--cron", "0 */5 * * * *", "x"},
       2,
       "cron expression \"0 */5 * * * *\" has 6 fields; partq takes 5: minute hour day-of-month "
       "month day-of-week (no seconds or year field)"},
      {{"schedule", "add", "s", "q", "--cron", "61 * * * *", "x"},
       2,
       "cron field 1 (minute): 61 is out of range 0-59"},
      {{"schedule", "add", "s", "q", "--every", "0s", "x"}, 2, "--every 0s: the interval must be"},
      {{"schedule", "add", "s", "q", "--every", "soon", "x"}, 2, "--every: "},
      {{"schedule", "add", "s", "q", "--every", "30s", "--cron", "* * * * *", "x"},
       2,
       "give either --every or --cron, not both"},
      {{"schedule", "add", "s", "q", "x"}, 2, "a schedule needs --every DURATION or --cron"},
      {{"schedule", "add", "s", "q", "--cron", "* * * * *", "--tz", "Europe/Nowhere", "x"},
       2,
       "unknown time zone \"Europe/Nowhere\""},
      {{"schedule", "add", "s", "q", "--every", "30s", "--tz", "UTC", "x"},
       2,
       "--tz applies to --cron only"},
      // An empty --tz (an unset variable, say) is not taken for UTC.
      {{"schedule", "add", "s", "q", "--cron", "0 3 * * *", "--tz", "", "x"},
       2,
       "--tz needs a time zone name, e.g. --tz Europe/Berlin or --tz UTC"},
      {{"schedule", "add", "taken", "other", "--every", "30s", "x"},
       1,
       "schedule \"taken\" already exists (on queue \"q\"); delete it first to change it"},
      {{"schedule", "add", "bad name", "q", "--every", "30s", "x"}, 2, "invalid schedule name"},
      {{"schedule", "add", "s", "q", "--every", "30s"}, 2, "PAYLOAD"},
      {{"schedule", "add", "s", "q", "--priority", "99999", "--every", "30s", "x"},
       2,
       "--priority"},
      {{"schedule", "list", "--every", "30s"}, 2, "--every goes with schedule add"},
      {{"schedule", "add", "s", "q", "--every", "30s", "--catch-up", "400d", "x"},
       2,
       "the window must be from 0s (fire only the latest missed tick) to 366 days"},
      {{"schedule", "add", "s", "q", "--every", "30s", "--catch-up", "soon", "x"},
       2,
       "--catch-up: "},
      {{"schedule", "list", "nosuch"}, 1, "unknown queue \"nosuch\""},
      {{"schedule", "delete"}, 2, "NAME"},
      {{"schedule", "frobnicate"}, 2, "unknown schedule subcommand \"frobnicate\""},
      {{"schedule"}, 2, "schedule needs a subcommand"},
  };
  for (const Case& c : cases) {
    PartqResult r = Partq(With(c.args));
    EXPECT_EQ(r.code, c.code) << c.args[2] << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, c.says)) << "want \"" << c.says << "\" in: " << r.err;
    EXPECT_EQ(r.out, "");
  }
  EXPECT_EQ(Schedules(), 1);
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.schedules WHERE name = 'taken' AND "
                         "queue = 'q' AND every = interval '1 minute'"),
            1);
}

TEST_F(ScheduleCommandTest, DeletingAQueueDeletesItsSchedules) {
  Ok({"schedule", "add", "a", "q", "--every", "1h", "x"});
  Ok({"schedule", "add", "b", "other", "--every", "1h", "x"});
  Ok({"queue", "delete", "q"});
  EXPECT_EQ(schema_.QInt("SELECT count(*) FROM {schema}.schedules WHERE queue = 'q'"), 0);
  EXPECT_EQ(Schedules(), 1);
}

}  // namespace
}  // namespace partq
