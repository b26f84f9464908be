#include "schedule/cron.h"

#include "absl/time/civil_time.h"
#include "gtest/gtest.h"

namespace partq {
namespace {

CronExpr MustParse(absl::string_view text) {
  auto e = CronExpr::Parse(text);
  EXPECT_TRUE(e.ok()) << text << ": " << e.status();
  return *e;
}

std::string ErrorOf(absl::string_view text) {
  auto e = CronExpr::Parse(text);
  EXPECT_FALSE(e.ok()) << text << " parsed";
  EXPECT_TRUE(absl::IsInvalidArgument(e.status())) << e.status();
  return std::string(e.status().message());
}

TEST(CronParse, EveryFiveMinutesMatchesMultiplesOfFive) {
  CronExpr e = MustParse("*/5 * * * *");
  EXPECT_TRUE(e.Matches(absl::CivilMinute(2026, 1, 1, 0, 0)));
  EXPECT_TRUE(e.Matches(absl::CivilMinute(2026, 1, 1, 13, 55)));
  EXPECT_FALSE(e.Matches(absl::CivilMinute(2026, 1, 1, 13, 56)));
}

TEST(CronParse, ListsRangesStepsAndNames) {
  CronExpr e = MustParse("0,30 9-17/4 * jan-MAR,Dec mon-fri");
  // 2026-01-05 is a Monday.
  EXPECT_TRUE(e.Matches(absl::CivilMinute(2026, 1, 5, 9, 30)));
  EXPECT_TRUE(e.Matches(absl::CivilMinute(2026, 1, 5, 13, 0)));
  EXPECT_TRUE(e.Matches(absl::CivilMinute(2026, 1, 5, 17, 0)));
  EXPECT_FALSE(e.Matches(absl::CivilMinute(2026, 1, 5, 11, 0)));  // 9,13,17 only
  EXPECT_FALSE(e.Matches(absl::CivilMinute(2026, 1, 4, 9, 0)));   // Sunday
  EXPECT_FALSE(e.Matches(absl::CivilMinute(2026, 4, 6, 9, 0)));   // April
  EXPECT_TRUE(e.Matches(absl::CivilMinute(2026, 12, 7, 9, 0)));   // December, Monday
}

TEST(CronParse, SevenIsSundayLikeZero) {
  CronExpr e = MustParse("0 0 * * 7");
  EXPECT_TRUE(e.Matches(absl::CivilMinute(2026, 1, 4, 0, 0)));  // Sunday
  EXPECT_FALSE(e.Matches(absl::CivilMinute(2026, 1, 5, 0, 0)));
}

TEST(CronParse, ValueWithStepRunsToTheFieldsMaximum) {
  CronExpr e = MustParse("50/5 * * * *");
  EXPECT_FALSE(e.Matches(absl::CivilMinute(2026, 1, 1, 0, 45)));
  EXPECT_TRUE(e.Matches(absl::CivilMinute(2026, 1, 1, 0, 50)));
  EXPECT_TRUE(e.Matches(absl::CivilMinute(2026, 1, 1, 0, 55)));
}

TEST(CronParse, BothDayFieldsRestrictedMatchEither) {
  // The 1st and 15th, and every Monday (cron's OR rule).
  CronExpr e = MustParse("0 0 1,15 * MON");
  EXPECT_TRUE(e.Matches(absl::CivilMinute(2026, 1, 1, 0, 0)));   // Thursday the 1st
  EXPECT_TRUE(e.Matches(absl::CivilMinute(2026, 1, 5, 0, 0)));   // Monday the 5th
  EXPECT_FALSE(e.Matches(absl::CivilMinute(2026, 1, 6, 0, 0)));  // Tuesday the 6th
}

TEST(CronParse, OneDayFieldStarredMeansTheOtherAlone) {
  CronExpr weekday = MustParse("0 0 * * MON");
  EXPECT_FALSE(weekday.Matches(absl::CivilMinute(2026, 1, 1, 0, 0)));
  EXPECT_TRUE(weekday.Matches(absl::CivilMinute(2026, 1, 5, 0, 0)));
  CronExpr dom = MustParse("0 0 13 * *");
  EXPECT_TRUE(dom.Matches(absl::CivilMinute(2026, 2, 13, 0, 0)));
  EXPECT_FALSE(dom.Matches(absl::CivilMinute(2026, 2, 14, 0, 0)));
}

TEST(CronParse, MacrosExpand) {
  EXPECT_TRUE(MustParse("@daily").Matches(absl::CivilMinute(2026, 3, 3, 0, 0)));
  EXPECT_FALSE(MustParse("@daily").Matches(absl::CivilMinute(2026, 3, 3, 0, 1)));
  EXPECT_TRUE(MustParse("@HOURLY").Matches(absl::CivilMinute(2026, 3, 3, 7, 0)));
  EXPECT_EQ(MustParse(" @weekly ").text(), "@weekly");
  EXPECT_NE(ErrorOf("@reboot").find("unknown cron macro"), std::string::npos);
}

TEST(CronParse, SixFieldsAreRefusedSayingSo) {
  const std::string msg = ErrorOf("0 */5 * * * *");
  EXPECT_NE(msg.find("has 6 fields"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no seconds or year field"), std::string::npos) << msg;
  EXPECT_NE(ErrorOf("* * * *").find("has 4 fields"), std::string::npos);
  EXPECT_NE(ErrorOf("").find("has 0 fields"), std::string::npos);
}

TEST(CronParse, MalformedFieldsAreNamed) {
  EXPECT_EQ(ErrorOf("0 24 * * *"), "cron field 2 (hour): 24 is out of range 0-23");
  EXPECT_EQ(ErrorOf("60 * * * *"), "cron field 1 (minute): 60 is out of range 0-59");
  EXPECT_EQ(ErrorOf("* * 0 * *"), "cron field 3 (day-of-month): 0 is out of range 1-31");
  EXPECT_EQ(ErrorOf("* * * 13 *"), "cron field 4 (month): 13 is out of range 1-12");
  EXPECT_EQ(ErrorOf("* * * * 8"), "cron field 5 (day-of-week): 8 is out of range 0-7");
  EXPECT_EQ(ErrorOf("* * * FOO *"),
            "cron field 4 (month): unknown name \"FOO\" (use JAN..DEC or numbers)");
  EXPECT_EQ(ErrorOf("MON * * * *"), "cron field 1 (minute): \"MON\" is not a number");
  EXPECT_EQ(ErrorOf("*/0 * * * *"),
            "cron field 1 (minute): step \"0\" must be a number from 1 to 60");
  EXPECT_EQ(ErrorOf("* 5-2 * * *"), "cron field 2 (hour): range \"5-2\" runs backwards");
  EXPECT_EQ(ErrorOf("1,,2 * * * *"), "cron field 1 (minute): empty list element in \"1,,2\"");
  EXPECT_EQ(ErrorOf("* * * * 1-"), "cron field 5 (day-of-week): a value is missing");
  EXPECT_EQ(ErrorOf("99999999999 * * * *"),
            "cron field 1 (minute): \"99999999999\" is not a number");
}

TEST(CronNext, SkipsToTheNextMatchingMinute) {
  CronExpr e = MustParse("30 2 * * *");
  EXPECT_EQ(e.NextAfter(absl::CivilMinute(2026, 1, 1, 2, 30)),
            absl::CivilMinute(2026, 1, 2, 2, 30));
  EXPECT_EQ(e.NextAfter(absl::CivilMinute(2026, 1, 1, 2, 29)),
            absl::CivilMinute(2026, 1, 1, 2, 30));
  // The 29th of February: the next leap year.
  EXPECT_EQ(MustParse("0 0 29 2 *").NextAfter(absl::CivilMinute(2026, 1, 1, 0, 0)),
            absl::CivilMinute(2028, 2, 29, 0, 0));
}

TEST(CronNext, AnExpressionThatNeverFiresEndsInYear10000) {
  EXPECT_EQ(MustParse("0 0 30 2 *").NextAfter(absl::CivilMinute(2026, 1, 1, 0, 0)).year(), 10000);
}

}  // namespace
}  // namespace partq
