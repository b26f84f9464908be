#include "schedule/timing.h"

#include <vector>

#include "absl/time/civil_time.h"
#include "gtest/gtest.h"

namespace partq {
namespace {

absl::Time Utc(int y, int mo, int d, int h, int mi, int s = 0) {
  return absl::FromCivil(absl::CivilSecond(y, mo, d, h, mi, s), absl::UTCTimeZone());
}

Timing Cron(absl::string_view expr, absl::string_view tz) {
  auto t = Timing::Cron(expr, tz);
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

// The ticks of `timing` in (from, to].
std::vector<absl::Time> Ticks(const Timing& timing, absl::Time from, absl::Time to) {
  std::vector<absl::Time> out;
  for (absl::Time t = timing.Next(from); t <= to; t = timing.Next(t)) out.push_back(t);
  return out;
}

TEST(TimingEvery, TicksOnMultiplesOfTheIntervalSinceTheEpoch) {
  auto every = Timing::Every(absl::Seconds(30));
  ASSERT_TRUE(every.ok());
  EXPECT_EQ(every->Next(Utc(2026, 1, 1, 0, 0, 0)), Utc(2026, 1, 1, 0, 0, 30));
  EXPECT_EQ(every->Next(Utc(2026, 1, 1, 0, 0, 29) + absl::Milliseconds(999)),
            Utc(2026, 1, 1, 0, 0, 30));
  EXPECT_EQ(every->Next(Utc(2026, 1, 1, 0, 0, 30)), Utc(2026, 1, 1, 0, 1, 0));
  // Before the epoch too (rounding toward the past, not toward zero).
  EXPECT_EQ(every->Next(absl::FromUnixSeconds(-45)), absl::FromUnixSeconds(-30));
}

TEST(TimingEvery, RefusesZeroFractionsAndMoreThanAYear) {
  for (absl::Duration d :
       {absl::ZeroDuration(), absl::Seconds(-1), absl::Milliseconds(1500), absl::Hours(367 * 24)}) {
    auto t = Timing::Every(d);
    EXPECT_TRUE(absl::IsInvalidArgument(t.status())) << d;
    EXPECT_NE(t.status().message().find("whole number of seconds"), std::string::npos);
  }
}

TEST(TimingCron, UnknownTimeZoneIsRefused) {
  auto t = Timing::Cron("* * * * *", "Mars/Olympus_Mons");
  EXPECT_TRUE(absl::IsInvalidArgument(t.status()));
  EXPECT_NE(t.status().message().find("unknown time zone \"Mars/Olympus_Mons\""),
            std::string::npos);
  EXPECT_EQ(Cron("* * * * *", "").time_zone(), "UTC");
}

TEST(TimingCron, ReadsTheExpressionInItsTimeZone) {
  // 09:00 in Berlin is 08:00 UTC in winter and 07:00 UTC in summer.
  Timing t = Cron("0 9 * * *", "Europe/Berlin");
  EXPECT_EQ(t.Next(Utc(2026, 1, 10, 12, 0)), Utc(2026, 1, 11, 8, 0));
  EXPECT_EQ(t.Next(Utc(2026, 7, 10, 12, 0)), Utc(2026, 7, 11, 7, 0));
}

// 2026-03-29: at 02:00 CET (01:00 UTC) Berlin's clocks go to 03:00 CEST.
TEST(TimingCronDst, SpringForwardFiresASkippedFixedTimeOnceWhenTheGapEnds) {
  Timing t = Cron("30 2 * * *", "Europe/Berlin");
  EXPECT_EQ(Ticks(t, Utc(2026, 3, 27, 12, 0), Utc(2026, 3, 30, 12, 0)),
            (std::vector<absl::Time>{Utc(2026, 3, 28, 1, 30),     // 02:30 CET
                                     Utc(2026, 3, 29, 1, 0),      // the gap's end, 03:00 CEST
                                     Utc(2026, 3, 30, 0, 30)}));  // 02:30 CEST
  // Every quarter of the skipped hour: one firing, at the gap's end.
  Timing quarters = Cron("0,15,30,45 2 * * *", "Europe/Berlin");
  EXPECT_EQ(Ticks(quarters, Utc(2026, 3, 28, 12, 0), Utc(2026, 3, 29, 12, 0)),
            (std::vector<absl::Time>{Utc(2026, 3, 29, 1, 0)}));
}

TEST(TimingCronDst, SpringForwardWildcardJobKeepsItsPaceInRealTime) {
  Timing t = Cron("*/30 * * * *", "Europe/Berlin");
  EXPECT_EQ(Ticks(t, Utc(2026, 3, 29, 0, 0), Utc(2026, 3, 29, 2, 0)),
            (std::vector<absl::Time>{Utc(2026, 3, 29, 0, 30),  // 01:30 CET
                                     Utc(2026, 3, 29, 1, 0),   // 03:00 CEST
                                     Utc(2026, 3, 29, 1, 30),  // 03:30 CEST
                                     Utc(2026, 3, 29, 2, 0)}));
}

// 2026-10-25: at 03:00 CEST (01:00 UTC) Berlin's clocks go back to 02:00 CET.
TEST(TimingCronDst, FallBackFiresARepeatedFixedTimeOnceAtItsFirstOccurrence) {
  Timing t = Cron("30 2 * * *", "Europe/Berlin");
  EXPECT_EQ(Ticks(t, Utc(2026, 10, 24, 12, 0), Utc(2026, 10, 26, 12, 0)),
            (std::vector<absl::Time>{Utc(2026, 10, 25, 0, 30),     // 02:30 CEST
                                     Utc(2026, 10, 26, 1, 30)}));  // 02:30 CET
  // Asked from inside the repeated hour, after the first 02:30: tomorrow.
  EXPECT_EQ(t.Next(Utc(2026, 10, 25, 1, 15)), Utc(2026, 10, 26, 1, 30));
}

TEST(TimingCronDst, FallBackWildcardJobFiresInBothPassesOfTheRepeatedHour) {
  Timing t = Cron("*/30 * * * *", "Europe/Berlin");
  EXPECT_EQ(Ticks(t, Utc(2026, 10, 24, 23, 45), Utc(2026, 10, 25, 2, 0)),
            (std::vector<absl::Time>{Utc(2026, 10, 25, 0, 0),     // 02:00 CEST
                                     Utc(2026, 10, 25, 0, 30),    // 02:30 CEST
                                     Utc(2026, 10, 25, 1, 0),     // 02:00 CET
                                     Utc(2026, 10, 25, 1, 30),    // 02:30 CET
                                     Utc(2026, 10, 25, 2, 0)}));  // 03:00 CET
}

TEST(TimingCron, NeverFiringExpressionHasNoNextTick) {
  EXPECT_EQ(Cron("0 0 30 2 *", "UTC").Next(Utc(2026, 1, 1, 0, 0)), absl::InfiniteFuture());
}

TEST(PlanFiring, OnTimeFiresTheDueTickAndMissesNothing) {
  auto every = Timing::Every(absl::Seconds(10));
  ASSERT_TRUE(every.ok());
  const absl::Time due = Utc(2026, 1, 1, 0, 0, 10);
  FirePlan p = PlanFiring(*every, due, due + absl::Seconds(9));
  EXPECT_EQ(p.tick, due);
  EXPECT_EQ(p.missed, 0);
  EXPECT_EQ(p.next, Utc(2026, 1, 1, 0, 0, 20));
}

TEST(PlanFiring, AfterDowntimeFiresOnlyTheLatestTickAndCountsTheRest) {
  auto every = Timing::Every(absl::Seconds(10));
  ASSERT_TRUE(every.ok());
  const absl::Time due = Utc(2026, 1, 1, 0, 0, 10);
  FirePlan p = PlanFiring(*every, due, Utc(2026, 1, 1, 0, 1, 5));
  EXPECT_EQ(p.tick, Utc(2026, 1, 1, 0, 1, 0));
  EXPECT_EQ(p.missed, 5);  // :10 :20 :30 :40 :50
  EXPECT_EQ(p.next, Utc(2026, 1, 1, 0, 1, 10));

  Timing cron = Cron("0 * * * *", "Europe/Berlin");
  FirePlan c = PlanFiring(cron, Utc(2026, 1, 1, 10, 0), Utc(2026, 1, 2, 10, 30));
  EXPECT_EQ(c.tick, Utc(2026, 1, 2, 10, 0));
  EXPECT_EQ(c.missed, 24);
  EXPECT_EQ(c.next, Utc(2026, 1, 2, 11, 0));
}

TEST(PlanFiring, DowntimeOfYearsIsBoundedAndStillFiresTheLatest) {
  Timing cron = Cron("* * * * *", "UTC");
  FirePlan c = PlanFiring(cron, Utc(2020, 1, 1, 0, 0), Utc(2026, 1, 1, 0, 0, 30));
  EXPECT_EQ(c.tick, Utc(2026, 1, 1, 0, 0));
  EXPECT_GE(c.missed, 400 * 24 * 60);  // a minute each, bounded to 400 days
  EXPECT_EQ(c.next, Utc(2026, 1, 1, 0, 1));
}

// Issue 49: a 1 s schedule lost 3 ticks when its firer was SIGKILLed (TTL
// 4 s): the next firer fired only the latest. Inside the window each due
// tick fires, oldest first, one per plan; older ones are missed.
TEST(PlanCatchUp, TicksInsideTheWindowFireEachOldestFirst) {
  auto every = Timing::Every(absl::Seconds(1));
  ASSERT_TRUE(every.ok());
  const absl::Time t0 = Utc(2026, 1, 1, 0, 0, 10);
  const absl::Time now = t0 + absl::Milliseconds(5500);  // ticks t0 .. t0+5 are due
  std::vector<absl::Time> fired;
  int64_t missed = 0;
  absl::Time due = t0;
  for (int i = 0; i < 100 && due <= now; ++i) {
    const FirePlan p = PlanCatchUp(*every, due, now, absl::Seconds(30));
    fired.push_back(p.tick);
    missed += p.missed;
    due = p.next;
  }
  EXPECT_EQ(fired, (std::vector<absl::Time>{t0, t0 + absl::Seconds(1), t0 + absl::Seconds(2),
                                            t0 + absl::Seconds(3), t0 + absl::Seconds(4),
                                            t0 + absl::Seconds(5)}));
  EXPECT_EQ(missed, 0);
  EXPECT_EQ(due, t0 + absl::Seconds(6)) << "the next after now";

  // A window of 2 s: t0 .. t0+3 are older than now - 2 s (t0 + 3.5 s).
  FirePlan p = PlanCatchUp(*every, t0, now, absl::Seconds(2));
  EXPECT_EQ(p.tick, t0 + absl::Seconds(4));
  EXPECT_EQ(p.missed, 4);
  EXPECT_EQ(p.next, t0 + absl::Seconds(5));
  // A tick exactly as old as the window is inside it.
  p = PlanCatchUp(*every, t0, t0 + absl::Seconds(3), absl::Seconds(2));
  EXPECT_EQ(p.tick, t0 + absl::Seconds(1));
  EXPECT_EQ(p.missed, 1);
}

TEST(PlanCatchUp, WithNoTickInsideTheWindowOnlyTheLatestFires) {
  auto every = Timing::Every(absl::Seconds(10));
  ASSERT_TRUE(every.ok());
  const absl::Time due = Utc(2026, 1, 1, 0, 0, 10);
  const absl::Time now = Utc(2026, 1, 1, 0, 1, 5);
  // Zero: PlanFiring's rule, always.
  const FirePlan zero = PlanCatchUp(*every, due, now, absl::ZeroDuration());
  const FirePlan old = PlanFiring(*every, due, now);
  EXPECT_EQ(zero.tick, old.tick);
  EXPECT_EQ(zero.missed, old.missed);
  EXPECT_EQ(zero.next, old.next);
  // 3 s: the :00 tick is 5 s old, outside: the latest fires as after downtime.
  const FirePlan small = PlanCatchUp(*every, due, now, absl::Seconds(3));
  EXPECT_EQ(small.tick, Utc(2026, 1, 1, 0, 1, 0));
  EXPECT_EQ(small.missed, 5);
  EXPECT_EQ(small.next, Utc(2026, 1, 1, 0, 1, 10));
  // Not due: nothing to fire yet.
  const FirePlan early = PlanCatchUp(*every, due, due - absl::Seconds(1), absl::Seconds(30));
  EXPECT_EQ(early.next, due);
}

TEST(PlanCatchUp, CronTicksCatchUpInTheirZone) {
  Timing cron = Cron("0 * * * *", "Europe/Berlin");
  // Hourly; 3 h 30 min late with a 2 h window: 10:00 and 11:00 (UTC) are
  // missed, 12:00 fires first, then 13:00.
  const absl::Time now = Utc(2026, 1, 1, 13, 30);
  FirePlan p = PlanCatchUp(cron, Utc(2026, 1, 1, 10, 0), now, absl::Hours(2));
  EXPECT_EQ(p.tick, Utc(2026, 1, 1, 12, 0));
  EXPECT_EQ(p.missed, 2);
  EXPECT_EQ(p.next, Utc(2026, 1, 1, 13, 0));
  p = PlanCatchUp(cron, p.next, now, absl::Hours(2));
  EXPECT_EQ(p.tick, Utc(2026, 1, 1, 13, 0));
  EXPECT_EQ(p.missed, 0);
  EXPECT_EQ(p.next, Utc(2026, 1, 1, 14, 0));
  EXPECT_EQ(cron.PeriodAt(Utc(2026, 1, 1, 13, 0)), absl::Hours(1));
}

TEST(DefaultCatchUp, CoversAFailoverAndAPeriod) {
  // TTL 4 s, heartbeat 4/3 s, every 1 s.
  EXPECT_EQ(DefaultCatchUp(absl::Seconds(4), absl::Seconds(4) / 3, absl::Seconds(1)),
            absl::Seconds(4) + absl::Seconds(4) / 3 + absl::Seconds(1));
}

TEST(FormatTick, IsRfc3339InUtc) {
  EXPECT_EQ(FormatTick(Utc(2026, 11, 26, 6, 0)), "2026-11-26T06:00:00Z");
}

}  // namespace
}  // namespace partq
