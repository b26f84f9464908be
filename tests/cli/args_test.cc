// cli/args.h: flag parsing and the duration parser (regressions found by
// fuzz/duration_fuzzer.cc).
#include "cli/args.h"

#include "absl/strings/match.h"
#include "cli/common.h"
#include "gtest/gtest.h"

namespace partq::cli {
namespace {

TEST(ParseDurationFlag, BareNumberTooLargeForADurationIsRefusedNotInfinite) {
  // absl::Seconds(1e308) saturates to InfiniteDuration; it used to be
  // returned as a valid duration.
  for (const char* text : {"1e308", "-1e300", "1e20"}) {
    auto d = ParseDurationFlag(text);
    EXPECT_FALSE(d.ok()) << text << " parsed as " << *d;
    EXPECT_TRUE(absl::IsInvalidArgument(d.status())) << text;
  }
}

TEST(ParseDurationFlag, BareNumbersAreSecondsAndUnitsWork) {
  EXPECT_EQ(*ParseDurationFlag("1.5"), absl::Milliseconds(1500));
  EXPECT_EQ(*ParseDurationFlag("1m30s"), absl::Seconds(90));
  EXPECT_EQ(*ParseDurationFlag("7d"), absl::Hours(7 * 24));
  EXPECT_EQ(*ParseDurationFlag("0.5d"), absl::Hours(12));
  EXPECT_FALSE(ParseDurationFlag("d").ok());
  EXPECT_FALSE(ParseDurationFlag("1d2h").ok()) << "days stand alone";
  EXPECT_FALSE(ParseDurationFlag("infd").ok());
  EXPECT_FALSE(ParseDurationFlag("inf").ok());
  EXPECT_FALSE(ParseDurationFlag("5x").ok());
  EXPECT_FALSE(ParseDurationFlag("").ok());
}

TEST(ArgsParse, AValueFlagDoesNotSwallowTheNextOption) {
  auto a = Args::Parse({"q", "--handler", "--concurrency", "4"}, {"handler", "concurrency"}, {});
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(a.status()));
  EXPECT_NE(a.status().message().find("--handler needs a value"), std::string::npos) << a.status();
  // Spelled with '=', a value may start with "--"; a lone "-" or "--x" is a value too.
  auto b =
      Args::Parse({"--handler=--odd", "--key", "-", "--dsn", "--"}, {"handler", "key", "dsn"}, {});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b->Get("handler"), "--odd");
  EXPECT_EQ(*b->Get("key"), "-");
  EXPECT_EQ(*b->Get("dsn"), "--");
}

// A flag given twice counts the last time: the Helm chart appends
// worker.extraArgs after the flags it generates, so `--batch=200` there
// overrides the chart's --batch (the convention of Go's flag package too).
TEST(ArgsParse, AFlagGivenTwiceCountsTheLastTime) {
  auto a = Args::Parse({"q", "--batch=100", "--poll-only", "--batch", "200"}, {"batch"},
                       {"poll-only"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a->Get("batch"), "200");
  EXPECT_TRUE(a->Has("poll-only"));
  // A repeatable flag (partq worker --queue) keeps every value, in order.
  EXPECT_EQ(a->GetAll("batch"), (std::vector<std::string>{"100", "200"}));
  EXPECT_TRUE(a->GetAll("queue").empty());
}

TEST(Help, WantsHelpStopsAtTheSeparator) {
  EXPECT_TRUE(WantsHelp({"q", "--help"}));
  EXPECT_TRUE(WantsHelp({"-h"}));
  EXPECT_FALSE(WantsHelp({"q", "--", "--help"}));  // a payload
  EXPECT_FALSE(WantsHelp({"q", "--helpful"}));
  EXPECT_FALSE(WantsHelp({}));
}

TEST(Help, EveryCommandOfTheMainHelpHasItsOwn) {
  const std::string main = MainHelp();
  for (const char* cmd : {"migrate", "queue", "enqueue", "wait", "cancel", "worker", "status",
                          "bench", "demo", "bridge"}) {
    EXPECT_TRUE(absl::StrContains(main, absl::StrCat("  ", cmd, " "))) << cmd;
    ASSERT_TRUE(CommandHelp(cmd).has_value()) << cmd;
    EXPECT_TRUE(absl::StrContains(*CommandHelp(cmd), absl::StrCat("partq ", cmd))) << cmd;
  }
  EXPECT_FALSE(CommandHelp("nope").has_value());
}

// The commands partq prints to run next must run as printed (issue 49: the
// `group create` hint printed an id with a space or a quote as it was).
TEST(ShellQuote, QuotesWhatTheShellWouldSplitOrInterpret) {
  EXPECT_EQ(ShellQuote("upload-7"), "upload-7");
  EXPECT_EQ(ShellQuote("a/b.c:d@e%f+g=h,i_j"), "a/b.c:d@e%f+g=h,i_j");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("two words"), "'two words'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("$(rm -rf ~) `x` \"y\" *"), "'$(rm -rf ~) `x` \"y\" *'");
  EXPECT_EQ(ShellQuote("caf\xc3\xa9"), "'caf\xc3\xa9'");
  // Control bytes cannot be typed inside '...': ANSI-C quoting, every one escaped.
  EXPECT_EQ(ShellQuote("a\nb'\\\x1b"), "$'a\\x0ab\\x27\\x5c\\x1b'");
}

}  // namespace
}  // namespace partq::cli
