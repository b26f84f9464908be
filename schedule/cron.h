// A cron expression (crontab(5), as Vixie cron and cronie read it): five
// fields, minute hour day-of-month month day-of-week, each a list of `*`,
// N, N-M, `*`/S, N-M/S or N/S (N up to the field's maximum, every S), with
// the names JAN..DEC and SUN..SAT (any case) in the month and weekday
// fields, 0 or 7 for Sunday, and the macros @yearly (@annually), @monthly,
// @weekly, @daily (@midnight) and @hourly. No seconds field, no year field,
// no @reboot and none of Quartz's L, W or #.
//
// Days: when both the day-of-month and the day-of-week field are restricted
// (neither starts with `*`), a day matches if either matches (cron's OR
// rule: "0 0 1,15 * MON" runs on the 1st, the 15th and every Monday);
// otherwise both must match, which makes the `*` one irrelevant.
//
// Pure: no clock, no I/O. Thread-safe (immutable once parsed).
#ifndef PARTQ_SCHEDULE_CRON_H_
#define PARTQ_SCHEDULE_CRON_H_

#include <bitset>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"

namespace partq {

class CronExpr {
 public:
  // InvalidArgument naming the field and what is wrong with it, e.g.
  // `cron field 2 (hour): 24 is out of range 0-23`, or the field count
  // ("6 fields; partq takes 5 ...").
  static absl::StatusOr<CronExpr> Parse(absl::string_view text);

  // Whether the expression fires at this local minute.
  bool Matches(absl::CivilMinute m) const;
  // The first local minute after `m` that matches; nullopt-like: a minute
  // in year 10000 or later when none comes within `years` years (an
  // expression such as "0 0 30 2 *" never fires).
  absl::CivilMinute NextAfter(absl::CivilMinute m, int years = 8) const;

  const std::string& text() const { return text_; }
  // The minute or the hour field starts with `*` (or it is @hourly): cron
  // calls such a job a wildcard job and runs it by the clock on the wall
  // through daylight saving changes, rather than at a fixed time of day
  // (timing.h says what that means).
  bool wildcard() const { return wildcard_; }

 private:
  CronExpr() = default;
  bool DayMatches(absl::CivilDay d) const;

  std::string text_;
  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_;     // 1..31
  std::bitset<13> months_;   // 1..12
  std::bitset<7> weekdays_;  // 0 = Sunday
  bool day_or_ = false;      // both day fields restricted: OR rule
  bool wildcard_ = false;
};

}  // namespace partq

#endif  // PARTQ_SCHEDULE_CRON_H_
