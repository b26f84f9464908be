#include "consumer/builtin_handlers.h"

#include "gtest/gtest.h"

namespace partq {
namespace {

TEST(ParseHandlerSpec, AcceptsEachBuiltinAndChains) {
  for (const char* spec : {"noop", "sleep:0", "sleep:2", "fail:0", "fail:0.01", "fail:1",
                           "record:effects", "record:s1.effects", "crash:poison",
                           "fail:0.01,sleep:2,record:effects", " noop , sleep:1 "}) {
    EXPECT_TRUE(ParseHandlerSpec(spec).ok()) << spec;
  }
}

TEST(ParseHandlerSpec, RejectsMalformedSpecsWithTheReason) {
  struct Case {
    const char* spec;
    const char* says;
  } cases[] = {
      {"", "empty handler"},
      {"bogus", "unknown handler \"bogus\""},
      {"sleep", "sleep:MS"},
      {"sleep:-1", "sleep:MS"},
      {"sleep:abc", "sleep:MS"},
      {"fail:1.5", "fail:RATE"},
      {"fail:nan", "fail:RATE"},
      {"record:", "record:TABLE"},
      {"record:Robert'); DROP TABLE students;--", "record:TABLE"},
      {"record:a.b.c", "record:TABLE"},
      {"noop:1", "no argument"},
      {"noop,,noop", "unknown handler"},
      {"crash:", "crash:PAYLOAD"},
      // exec: and http: are whole specs (handlers/handler_spec.cc); in a
      // chain they were "unknown", beside a list that named them.
      {"fail:0.1,exec:python3 x.py", "exec: must be the whole --handler spec"},
      {"noop,http://localhost:8080/", "http: must be the whole --handler spec"},
  };
  for (const auto& c : cases) {
    auto h = ParseHandlerSpec(c.spec);
    ASSERT_FALSE(h.ok()) << c.spec;
    EXPECT_TRUE(absl::IsInvalidArgument(h.status())) << c.spec;
    EXPECT_NE(h.status().message().find(c.says), std::string::npos)
        << c.spec << " -> " << h.status();
  }
}

// A stage kind from above consumer/ (as the CLI adds sql:) takes the rest of
// the spec, commas included, as its argument.
TEST(ParseHandlerSpec, AnAddedStageKindTakesTheRestOfTheSpec) {
  std::vector<std::string> made;
  HandlerStageKind kind;
  kind.name = "sql";
  kind.usage = "sql:STATEMENT";
  kind.make = [&](absl::string_view arg) -> absl::StatusOr<std::unique_ptr<Handler>> {
    if (arg.empty()) return absl::InvalidArgumentError("sql:STATEMENT needs a statement");
    made.emplace_back(arg);
    return MakeHandler([](HandlerCall&) { return absl::OkStatus(); });
  };
  EXPECT_TRUE(ParseHandlerSpec("sql:CALL p($1, $2)", {kind}).ok());
  EXPECT_TRUE(
      ParseHandlerSpec("fail:0, sleep:0 , sql: INSERT INTO t VALUES ($1, 'a,b') ", {kind}).ok());
  EXPECT_EQ(made, (std::vector<std::string>{"CALL p($1, $2)", "INSERT INTO t VALUES ($1, 'a,b')"}));

  auto empty = ParseHandlerSpec("noop,sql:", {kind});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("needs a statement"), std::string::npos);
  // Unknown without the kind, and the known list names it when it is there.
  auto without = ParseHandlerSpec("sql:SELECT 1");
  ASSERT_FALSE(without.ok());
  EXPECT_NE(without.status().message().find("unknown handler \"sql\""), std::string::npos);
  auto bogus = ParseHandlerSpec("bogus", {kind});
  ASSERT_FALSE(bogus.ok());
  EXPECT_NE(bogus.status().message().find("publish:TOPIC, sql:STATEMENT"), std::string::npos)
      << bogus.status();
}

TEST(ParseHandlerSpec, FailRateOneAlwaysFailsAndZeroNever) {
  Item item;
  HandlerCall call;
  call.item = &item;
  auto always = ParseHandlerSpec("fail:1");
  auto never = ParseHandlerSpec("fail:0");
  ASSERT_TRUE(always.ok() && never.ok());
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE((*always)->Handle(call).ok());
    EXPECT_TRUE((*never)->Handle(call).ok());
  }
}

}  // namespace
}  // namespace partq
