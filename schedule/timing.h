// When a schedule ticks, and what a worker fires when it finds one due.
//
// A Timing is either an interval (`every`: whole seconds, ticks at the
// multiples of it since the Unix epoch, so `every 30s` ticks at :00 and :30
// of each minute whichever worker computes it) or a cron expression
// (cron.h) read in an IANA time zone (absl::LoadTimeZone: the system's
// zoneinfo, Debian's tzdata).
//
// Daylight saving time, as Vixie cron (Debian's cron) and cronie handle it.
// A job at a fixed time of day (minute and hour fields without `*`):
//   - a local time that does not exist (the hour skipped when clocks go
//     forward: 02:30 on the last Sunday of March in Europe/Berlin) fires at
//     the moment the gap ends (03:00 CEST); several such times fire once;
//   - a local time that happens twice (the hour repeated when clocks go
//     back: 02:30 on the last Sunday of October) fires once, at its first
//     occurrence (02:30 CEST).
// So "30 2 * * *" fires exactly once on each of those days. A wildcard job
// (minute or hour field starting with `*`: "*/15 * * * *", "0 * * * *")
// follows the wall clock: the skipped local minutes do not fire, the
// repeated ones fire at both occurrences, so it keeps its pace in real time.
//
// Pure: no clock, no I/O; thread-safe once made.
#ifndef PARTQ_SCHEDULE_TIMING_H_
#define PARTQ_SCHEDULE_TIMING_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "schedule/cron.h"

namespace partq {

class Timing {
 public:
  // InvalidArgument unless `every` is a whole number of seconds from 1s to
  // 366 days.
  static absl::StatusOr<Timing> Every(absl::Duration every);
  // InvalidArgument for a malformed expression (CronExpr::Parse) or a time
  // zone the system does not know (an empty one is UTC).
  static absl::StatusOr<Timing> Cron(absl::string_view expr, absl::string_view time_zone);

  // The first tick strictly after `t`; absl::InfiniteFuture() when there is
  // none within 8 years (a cron expression such as "0 0 30 2 *").
  absl::Time Next(absl::Time t) const;

  // How long after `tick` the next tick comes (a cron's periods vary).
  absl::Duration PeriodAt(absl::Time tick) const { return Next(tick) - tick; }

  bool is_cron() const { return cron_.has_value(); }
  absl::Duration every() const { return every_; }
  const std::string& time_zone() const { return tz_name_; }

 private:
  Timing() = default;

  absl::Duration every_ = absl::ZeroDuration();
  std::optional<CronExpr> cron_;
  absl::TimeZone tz_;
  std::string tz_name_;
};

// What a worker fires for a schedule found due: its next tick `due` is at
// or before `now`. Missed ticks are not made up: the latest tick at or
// before `now` fires (once), the due ones before it are counted as missed
// and skipped, and the next tick is the first after `now`. A worker a
// moment late (less than one period) misses nothing.
struct FirePlan {
  absl::Time tick;     // the tick to fire (its dedup key: schedule:NAME:TICK)
  int64_t missed = 0;  // due ticks before `tick` that will not fire
  absl::Time next;     // the schedule's next tick, after `now`
};
// `due` <= `now`. Ticks more than 400 days before `now` are counted as one.
FirePlan PlanFiring(const Timing& timing, absl::Time due, absl::Time now);

// The same with a catch-up window (a Kubernetes CronJob's
// startingDeadlineSeconds): due ticks at most `catch_up` old at `now` are
// fired late, each once, oldest first, so a tick whose firer died or stalled
// is fired by the next one. Returns the next tick to fire: the oldest due
// tick inside the window (`missed`: the due ticks before it, older than the
// window; `next`: the tick after it, which may be due too); with none inside
// the window, PlanFiring's (only the latest fires). `catch_up` zero is
// PlanFiring.
FirePlan PlanCatchUp(const Timing& timing, absl::Time due, absl::Time now, absl::Duration catch_up);

// The window a schedule gets unless it names one: long enough to cover a
// failover of its firer, whose session expires `session_ttl` after its last
// heartbeat and is deleted by a live member's next `heartbeat`, with one
// `period` of the schedule (Timing::PeriodAt) to spare.
absl::Duration DefaultCatchUp(absl::Duration session_ttl, absl::Duration heartbeat,
                              absl::Duration period);

// A tick as it appears in dedup keys and listings: RFC 3339 in UTC,
// "2026-11-26T06:00:00Z".
std::string FormatTick(absl::Time tick);

}  // namespace partq

#endif  // PARTQ_SCHEDULE_TIMING_H_
