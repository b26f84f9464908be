#include "schedule/timing.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"

namespace partq {
namespace {

// More than any change of a zone's UTC offset (an hour for DST; a few
// zones have moved by more, once).
constexpr absl::Duration kWindow = absl::Hours(3);

}  // namespace

absl::StatusOr<Timing> Timing::Every(absl::Duration every) {
  if (every < absl::Seconds(1) || every > absl::Hours(366 * 24) ||
      every != absl::Trunc(every, absl::Seconds(1))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--every ", absl::FormatDuration(every),
        ": the interval must be a whole number of seconds from 1s to 366 days (8784h)"));
  }
  Timing t;
  t.every_ = every;
  t.tz_name_ = "UTC";
  t.tz_ = absl::UTCTimeZone();
  return t;
}

absl::StatusOr<Timing> Timing::Cron(absl::string_view expr, absl::string_view time_zone) {
  auto cron = CronExpr::Parse(expr);
  if (!cron.ok()) return cron.status();
  Timing t;
  t.cron_ = std::move(*cron);
  t.tz_name_ = time_zone.empty() ? "UTC" : std::string(time_zone);
  // LoadTimeZone reads /usr/share/zoneinfo; it also accepts fixed offsets
  // in its own syntax ("Fixed/UTC+01:00"), which is fine.
  if (!absl::LoadTimeZone(t.tz_name_, &t.tz_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown time zone \"", t.tz_name_,
        "\" (use an IANA name such as Europe/Berlin or UTC; the system's zoneinfo, Debian's "
        "tzdata package, must be installed)"));
  }
  return t;
}

absl::Time Timing::Next(absl::Time t) const {
  if (!cron_) {
    // Multiples of every_ since the epoch: the same grid on every worker.
    const int64_t period = absl::ToInt64Seconds(every_);
    const int64_t s = absl::ToUnixSeconds(t);  // rounds toward the past
    const int64_t base = s >= 0 ? s - s % period : s - ((s % period) + period) % period;
    return absl::FromUnixSeconds(base + period);
  }
  // The usual case: no change of UTC offset near t or the tick, and the
  // first matching local minute after t's is the tick.
  const absl::CivilMinute from(absl::ToCivilMinute(t, tz_));
  const absl::CivilMinute limit(from.year() + 8, from.month(), from.day(), from.hour(),
                                from.minute());
  const absl::CivilMinute c = cron_->NextAfter(from);
  if (c > limit) return absl::InfiniteFuture();
  const absl::TimeZone::TimeInfo info = tz_.At(absl::CivilSecond(c));
  if (info.kind == absl::TimeZone::TimeInfo::UNIQUE && info.pre > t &&
      tz_.At(t - kWindow).offset == tz_.At(info.pre + kWindow).offset) {
    return info.pre;
  }
  // Near a change: the local minutes around t's, each with the instants it
  // fires at (timing.h), the earliest after t wins. An instant is at most
  // kWindow away from its local minute read in any offset, so minutes more
  // than that past the best one found cannot beat it.
  absl::Time best = absl::InfiniteFuture();
  absl::CivilMinute stop = limit;
  for (absl::CivilMinute m = cron_->NextAfter(from - kWindow / absl::Minutes(1)); m <= stop;
       m = cron_->NextAfter(m)) {
    const absl::TimeZone::TimeInfo i = tz_.At(absl::CivilSecond(m));
    absl::Time at[2];
    int n = 0;
    switch (i.kind) {
      case absl::TimeZone::TimeInfo::UNIQUE:
        at[n++] = i.pre;
        break;
      case absl::TimeZone::TimeInfo::SKIPPED:
        if (!cron_->wildcard()) at[n++] = i.trans;
        break;
      case absl::TimeZone::TimeInfo::REPEATED:
        at[n++] = i.pre;
        if (cron_->wildcard()) at[n++] = i.post;
        break;
    }
    for (int k = 0; k < n; ++k) {
      if (at[k] > t && at[k] < best) {
        best = at[k];
        stop = std::min(limit, m + 2 * (kWindow / absl::Minutes(1)));
      }
    }
  }
  return best;
}

FirePlan PlanFiring(const Timing& timing, absl::Time due, absl::Time now) {
  FirePlan plan;
  plan.tick = due;
  if (due > now) {
    plan.next = due;
    return plan;
  }
  if (now - due > absl::Hours(400 * 24)) {
    // Down for more than 400 days: counting each tick (a minute's schedule
    // has half a million a year) is not worth the loop.
    plan.missed = 1;
    plan.tick = timing.Next(now - absl::Hours(400 * 24));
  }
  if (!timing.is_cron()) {
    const int64_t k = (now - plan.tick) / timing.every();
    plan.tick += k * timing.every();
    plan.missed += k;
    plan.next = plan.tick + timing.every();
    return plan;
  }
  for (absl::Time n = timing.Next(plan.tick); n <= now; n = timing.Next(n)) {
    plan.tick = n;
    ++plan.missed;
  }
  plan.next = timing.Next(now);
  return plan;
}

FirePlan PlanCatchUp(const Timing& timing, absl::Time due, absl::Time now,
                     absl::Duration catch_up) {
  if (due > now) return PlanFiring(timing, due, now);
  const absl::Time oldest = now - std::max(catch_up, absl::ZeroDuration());
  FirePlan plan;
  plan.tick = due;
  if (due < oldest) {
    // Skip the ticks older than the window, counting them.
    if (now - due > absl::Hours(400 * 24)) {
      plan.missed = 1;  // as PlanFiring: years of ticks count as one
      plan.tick = timing.Next(now - absl::Hours(400 * 24));
    }
    if (!timing.is_cron()) {
      absl::Duration rest;
      const int64_t k = absl::IDivDuration(
          oldest - plan.tick + timing.every() - absl::Nanoseconds(1), timing.every(), &rest);
      plan.tick += k * timing.every();
      plan.missed += k;
    } else {
      while (plan.tick < oldest) {
        plan.tick = timing.Next(plan.tick);
        ++plan.missed;
      }
    }
    // None due inside the window: only the latest fires.
    if (plan.tick > now) return PlanFiring(timing, due, now);
  }
  // As PlanFiring: an interval's next tick is a period on (the same as
  // Next for a tick on its grid).
  plan.next = timing.is_cron() ? timing.Next(plan.tick) : plan.tick + timing.every();
  return plan;
}

absl::Duration DefaultCatchUp(absl::Duration session_ttl, absl::Duration heartbeat,
                              absl::Duration period) {
  return session_ttl + heartbeat + period;
}

std::string FormatTick(absl::Time tick) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", tick, absl::UTCTimeZone());
}

}  // namespace partq
