// cli/args.h: flag parsing and the duration parser (regressions found by
// fuzz/duration_fuzzer.cc).
#include "cli/args.h"

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
  EXPECT_FALSE(ParseDurationFlag("inf").ok());
  EXPECT_FALSE(ParseDurationFlag("5x").ok());
  EXPECT_FALSE(ParseDurationFlag("").ok());
}

}  // namespace
}  // namespace partq::cli
