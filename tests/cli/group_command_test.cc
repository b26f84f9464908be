// `partq group` and `partq enqueue --group` against a real PostgreSQL
// (cli/group.cc): what they print, their exit status, and what is left in
// the database. The rules themselves: tests/pg/group_test.cc.
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

class GroupCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Ok({"queue", "create", "resize", "--parts", "2"});
    Ok({"queue", "create", "notify", "--parts", "1"});
  }
  std::vector<std::string> With(std::vector<std::string> args) const {
    args.insert(args.end(), {"--dsn", schema_.dsn(), "--schema", schema_.name()});
    return args;
  }
  std::string Ok(const std::vector<std::string>& args, const std::string& input = "") {
    PartqResult r = Partq(With(args), input);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out;
  }
  // Runs a command that must fail with `code`, writing nothing to stdout;
  // returns its stderr.
  std::string Fails(const std::vector<std::string>& args, int code) {
    PartqResult r = Partq(With(args));
    EXPECT_EQ(r.code, code) << r.out << r.err;
    EXPECT_EQ(r.out, "");
    return r.err;
  }
  int64_t Count(const std::string& table, const std::string& where = "true") const {
    return schema_.QInt(absl::StrCat("SELECT count(*) FROM {schema}.", table, " WHERE ", where));
  }

  TestSchema schema_;
};

TEST_F(GroupCommandTest, CreateEnqueueStartAndStatusAsTheReadmeShowsThem) {
  EXPECT_EQ(Ok({"group", "create", "resize", "upload-7", "--end-queue", "notify", "--end-payload",
                R"({"user": 12})"}),
            "group \"upload-7\" of queue \"resize\": when it ends, an item goes into \"notify\"\n"
            "its items are held until `partq group start resize upload-7`\n");
  EXPECT_EQ(Ok({"enqueue", "resize", "--stdin", "--group", "upload-7"}, "a.jpg\nb.jpg\nc.jpg\n"),
            "3\n");
  Ok({"enqueue", "resize", "--group", "upload-7", "d.jpg"});
  const std::string held = Ok({"group", "status", "resize", "upload-7"});
  EXPECT_TRUE(absl::StrContains(held, "not started")) << held;
  EXPECT_TRUE(absl::StrContains(held, "pending 4 (held 4, in flight 0)")) << held;
  const std::string status = Ok({"status", "resize"});
  EXPECT_TRUE(absl::StrContains(status, "groups: 1 held (not started, 4 items)")) << status;

  const std::string started = Ok({"group", "start", "resize", "upload-7"});
  EXPECT_TRUE(absl::StrContains(started, "started")) << started;
  EXPECT_TRUE(absl::StrContains(started, "held 0")) << started;
  EXPECT_EQ(Count("items", "queue = 'resize' AND run_at = 'infinity'"), 0);

  const nlohmann::json j =
      nlohmann::json::parse(Ok({"group", "status", "resize", "upload-7", "--json"}));
  EXPECT_EQ(j["id"], "upload-7");
  EXPECT_EQ(j["end_queue"], "notify");
  EXPECT_EQ(j["end_payload"], nlohmann::json::parse(R"({"user": 12})"));
  EXPECT_EQ(j["pending"], 4);
  EXPECT_EQ(j["state"], "started");
  EXPECT_EQ(j["held"], 0);

  const std::string list = Ok({"group", "list", "resize", "--all"});
  EXPECT_TRUE(absl::StrContains(list, "upload-7")) << list;
}

// The command printed to run next runs as printed, whatever the id.
TEST_F(GroupCommandTest, TheHintsCommandIsShellQuoted) {
  EXPECT_EQ(Ok({"group", "create", "resize", "it's a batch"}),
            "group \"it's a batch\" of queue \"resize\" created (no end work)\n"
            "its items are held until `partq group start resize 'it'\\''s a batch'`\n");
  EXPECT_TRUE(absl::StrContains(Ok({"group", "status", "resize", "it's a batch"}),
                                "`partq group start resize 'it'\\''s a batch'`"));
}

TEST_F(GroupCommandTest, BadInputIsRefusedAndWritesNothing) {
  EXPECT_TRUE(absl::StrContains(
      Fails({"group", "create", "resize", "g", "--end-queue", "notify", "--end-payload", "{oops"},
            2),
      "--end-payload must be JSON"));
  EXPECT_TRUE(absl::StrContains(Fails({"group", "create", "resize", "g", "--end-payload", "1"}, 2),
                                "--end-payload needs --end-queue"));
  EXPECT_TRUE(absl::StrContains(Fails({"group", "create", "resize", "g", "--end-queue", "nope"}, 1),
                                "unknown queue \"nope\""));
  EXPECT_TRUE(absl::StrContains(Fails({"group", "create", "nope", "g"}, 1), "unknown queue"));
  EXPECT_TRUE(absl::StrContains(Fails({"group", "status", "resize", "never"}, 1),
                                "unknown group \"never\""));
  EXPECT_TRUE(absl::StrContains(Fails({"group", "start", "resize", std::string(201, 'x')}, 2),
                                "invalid group id"));
  EXPECT_TRUE(
      absl::StrContains(Fails({"enqueue", "resize", "--group", "g", "--delay", "10s", "x"}, 2),
                        "--delay cannot be used with --group"));
  EXPECT_TRUE(absl::StrContains(Fails({"group", "pause", "resize", "g"}, 2),
                                "unknown group subcommand \"pause\""));
  EXPECT_TRUE(absl::StrContains(Fails({"group", "status", "resize"}, 2), "usage: partq group"));
  EXPECT_EQ(Count("groups"), 0);
  EXPECT_EQ(Count("items"), 0);

  // A group nothing made is not started (a typo of its id would start, and
  // end, an empty group, refusing the items that come after).
  const std::string unknown = Fails({"group", "start", "resize", "upload-8"}, 1);
  EXPECT_TRUE(absl::StrContains(unknown, "queue \"resize\" has no group \"upload-8\"")) << unknown;
  EXPECT_TRUE(absl::StrContains(unknown, "`partq group create resize upload-8`")) << unknown;
  EXPECT_TRUE(absl::StrContains(unknown, "--create")) << unknown;
  EXPECT_TRUE(absl::StrContains(Fails({"group", "start", "nope", "upload-8"}, 1),
                                "unknown queue \"nope\""));
  EXPECT_TRUE(absl::StrContains(Fails({"group", "status", "resize", "g", "--create"}, 2),
                                "--create goes with group start"));
  EXPECT_EQ(Count("groups"), 0);
  Ok({"enqueue", "resize", "--group", "upload-8", "x"});
  EXPECT_TRUE(absl::StrContains(Ok({"group", "start", "resize", "upload-8"}), "started"))
      << "its item made it";

  // --create starts it all the same; empty, it ends at once. An ended group
  // refuses more items, and says so.
  EXPECT_TRUE(absl::StrContains(Ok({"group", "start", "resize", "empty", "--create"}), "ended"));
  const std::string ended = Fails({"enqueue", "resize", "--group", "empty", "late"}, 1);
  EXPECT_TRUE(absl::StrContains(ended, "group \"empty\" of queue \"resize\" has ended")) << ended;
  EXPECT_FALSE(absl::StrContains(ended, "CONTEXT")) << ended;
  EXPECT_EQ(Count("items", "queue = 'resize' AND payload = 'late'"), 0);
}

}  // namespace
}  // namespace partq
