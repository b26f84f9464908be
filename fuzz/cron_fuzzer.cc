// Fuzz target: CronExpr::Parse and Timing::Next, the parser behind
// `partq schedule add --cron` and the tick computation every worker runs.
// Parse must return an expression or InvalidArgument and never crash; the
// ticks of a parsed expression must strictly increase and match it, in UTC
// and across Europe/Berlin's DST changes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "schedule/cron.h"
#include "schedule/timing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto expr = partq::CronExpr::Parse(text);
  if (!expr.ok()) {
    if (!absl::IsInvalidArgument(expr.status())) abort();
    return 0;
  }
  // Around the spring and autumn changes of 2026 (Europe/Berlin).
  const absl::Time starts[] = {absl::FromUnixSeconds(1774742400 - 7200),
                               absl::FromUnixSeconds(1792886400 - 7200)};
  for (const char* zone : {"UTC", "Europe/Berlin"}) {
    auto timing = partq::Timing::Cron(text, zone);
    if (!timing.ok()) abort();  // parsed once, must parse again
    absl::TimeZone tz;
    if (!absl::LoadTimeZone(zone, &tz)) return 0;
    for (absl::Time t : starts) {
      for (int i = 0; i < 8; ++i) {
        const absl::Time next = timing->Next(t);
        if (next == absl::InfiniteFuture()) break;
        if (next <= t) abort();
        // A tick in UTC is a matching minute; in a zone with DST it may be
        // the end of a gap instead (timing.h).
        if (std::string(zone) == "UTC" && !expr->Matches(absl::ToCivilMinute(next, tz))) abort();
        t = next;
      }
    }
  }
  return 0;
}
