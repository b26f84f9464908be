// `partq schedule add|list|delete`: an item into a queue at every tick of an
// interval or a cron expression, fired by the queue's workers exactly once
// per tick (consumer/schedule_firer.h, docs/architecture.md "Schedules").
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/utf8.h"
#include "cli/common.h"
#include "nlohmann/json.hpp"
#include "schedule/timing.h"
#include "store/validate.h"

namespace partq::cli {
namespace {

constexpr char kAddUsage[] =
    "usage: partq schedule add NAME QUEUE (--every 30s | --cron '*/5 * * * *' [--tz ZONE]) "
    "[--key K] [--priority N] [--catch-up 30s] PAYLOAD";

std::string When(const ScheduleSpec& s) {
  if (s.every != absl::ZeroDuration()) return absl::StrCat("every ", absl::FormatDuration(s.every));
  return absl::StrCat("cron '", s.cron, "' ", s.time_zone.empty() ? "UTC" : s.time_zone);
}

std::string TimeText(const std::optional<absl::Time>& t) {
  return t ? absl::FormatTime("%Y-%m-%d %H:%M:%S", *t, absl::UTCTimeZone()) : "-";
}

nlohmann::json TimeJson(const std::optional<absl::Time>& t) {
  return t ? nlohmann::json(FormatTick(*t)) : nlohmann::json();
}

int Add(const Args& args) {
  const auto& pos = args.positional();
  if (auto u = WrongPositionals(pos, 1, {"NAME", "QUEUE", "PAYLOAD"}, kAddUsage)) return *u;
  ScheduleSpec s;
  s.name = pos[1];
  s.queue = pos[2];
  s.payload = pos[3];
  // The interval's range and every other rule are ValidateSchedule's, so
  // the CLI, the C++ API and the SQL API refuse the same things.
  if (auto every = args.Get("every")) {
    auto d = ParseDurationFlag(*every);
    if (!d.ok()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--every: ", d.status().message())));
    }
    if (*d == absl::ZeroDuration()) {
      return Fail(absl::InvalidArgumentError(
          "--every 0s: the interval must be a whole number of seconds from 1s to 366 days"));
    }
    s.every = *d;
  }
  s.cron = args.GetOr("cron", "");
  if (args.Has("cron") && s.cron.empty()) {
    return Fail(absl::InvalidArgumentError("--cron needs an expression, e.g. --cron '0 * * * *'"));
  }
  s.time_zone = args.GetOr("tz", "");
  if (args.Has("tz") && s.time_zone.empty()) {
    // An empty zone is UTC to ValidateSchedule (the default): given as a
    // flag it is more likely a variable that was not set.
    return Fail(absl::InvalidArgumentError(
        "--tz needs a time zone name, e.g. --tz Europe/Berlin or --tz UTC (without --tz a cron "
        "schedule runs in UTC)"));
  }
  if (auto c = args.Get("catch-up")) {
    auto d = ParseDurationFlag(*c);
    if (!d.ok()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--catch-up: ", d.status().message())));
    }
    s.catch_up = *d;  // ValidateSchedule checks its range
  }
  if (auto k = args.Get("key")) {
    if (absl::Status st = ValidateKeyText("--key", *k); !st.ok()) return Fail(st);
    s.key = *k;
  }
  auto prio = args.Int("priority", 0, -32768, 32767);
  if (!prio.ok()) return Fail(prio.status());
  s.priority = static_cast<int>(*prio);
  auto opts = ConnectionOptions(args);
  if (!opts.ok()) return Fail(opts.status());
  auto timing = ValidateSchedule(s, opts->max_payload_bytes);
  if (!timing.ok()) return Fail(timing.status());
  auto store = ConnectChecked(*opts);
  if (!store.ok()) return Fail(store.status());
  if (absl::Status st = (*store)->AddSchedule(s); !st.ok()) return Fail(st);
  auto added = (*store)->ListSchedules(s.queue);
  if (!added.ok()) return Fail(added.status());
  for (const Schedule& a : *added) {
    if (a.spec.name != s.name) continue;
    printf("added schedule \"%s\" on queue \"%s\": %s; first tick %s UTC\n", s.name.c_str(),
           s.queue.c_str(), When(s).c_str(), TimeText(a.next_tick).c_str());
  }
  return 0;
}

int List(const Args& args) {
  const auto& pos = args.positional();
  if (pos.size() > 2) {
    return *WrongPositionals(pos, 1, {"QUEUE"}, "usage: partq schedule list [QUEUE] [--json]");
  }
  const std::string queue = pos.size() == 2 ? pos[1] : "";
  if (!queue.empty()) {
    if (absl::Status st = ValidateQueueName(queue); !st.ok()) return Fail(st);
  }
  auto store = ConnectChecked(args);
  if (!store.ok()) return Fail(store.status());
  auto all = (*store)->ListSchedules(queue);
  if (!all.ok()) return Fail(all.status());
  if (args.Has("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const Schedule& s : *all) {
      const bool every = s.spec.every != absl::ZeroDuration();
      out.push_back({{"name", s.spec.name},
                     {"queue", s.spec.queue},
                     {"every_seconds", every ? nlohmann::json(absl::ToInt64Seconds(s.spec.every))
                                             : nlohmann::json()},
                     {"cron", every ? nlohmann::json() : nlohmann::json(s.spec.cron)},
                     {"time_zone",
                      every ? nlohmann::json()
                            : nlohmann::json(s.spec.time_zone.empty() ? "UTC" : s.spec.time_zone)},
                     {"key", s.spec.key ? nlohmann::json(*s.spec.key) : nlohmann::json()},
                     {"priority", s.spec.priority},
                     // JSON text is UTF-8: a binary payload shows as its size alone;
                     // a role that may not read payloads (a viewer) sees neither.
                     {"payload", IsValidUtf8(s.spec.payload) && !s.payload_hidden
                                     ? nlohmann::json(s.spec.payload)
                                     : nlohmann::json()},
                     {"payload_bytes",
                      s.payload_hidden ? nlohmann::json() : nlohmann::json(s.spec.payload.size())},
                     {"next_tick", TimeJson(s.next_tick)},
                     {"last_tick", TimeJson(s.last_tick)},
                     {"fired", s.fired},
                     {"missed", s.missed},
                     {"catch_up_seconds",
                      s.spec.catch_up ? nlohmann::json(absl::ToDoubleSeconds(*s.spec.catch_up))
                                      : nlohmann::json()},
                     {"error", s.error.empty() ? nlohmann::json() : nlohmann::json(s.error)},
                     {"created_at", TimeJson(s.created_at)}});
    }
    PrintJson(out.dump(2));
    return 0;
  }
  if (all->empty()) {
    printf(queue.empty() ? "no schedules\n" : "no schedules on %s\n", queue.c_str());
    return 0;
  }
  printf("%-24s %-20s %-36s %-19s %-19s %8s %8s %9s\n", "NAME", "QUEUE", "WHEN", "NEXT (UTC)",
         "LAST (UTC)", "FIRED", "MISSED", "CATCH-UP");
  for (const Schedule& s : *all) {
    printf("%-24s %-20s %-36s %-19s %-19s %8lld %8lld %9s\n", s.spec.name.c_str(),
           s.spec.queue.c_str(), When(s.spec).c_str(), TimeText(s.next_tick).c_str(),
           TimeText(s.last_tick).c_str(), static_cast<long long>(s.fired),
           static_cast<long long>(s.missed),
           s.spec.catch_up ? absl::FormatDuration(*s.spec.catch_up).c_str() : "default");
    if (!s.error.empty()) printf("  error: %s\n", PrintableUtf8(s.error).c_str());
    // A tick a minute overdue (the firer runs within a second when a worker
    // runs): say why nothing fires, which NEXT in the past alone did not.
    if (s.next_tick && absl::Now() - *s.next_tick > absl::Minutes(1)) {
      printf("  overdue since %s UTC: a schedule fires only while a worker of %s runs\n",
             TimeText(s.next_tick).c_str(), s.spec.queue.c_str());
    }
  }
  return 0;
}

int Delete(const Args& args) {
  if (auto u =
          WrongPositionals(args.positional(), 1, {"NAME"}, "usage: partq schedule delete NAME")) {
    return *u;
  }
  const std::string& name = args.positional()[1];
  auto store = ConnectChecked(args);
  if (!store.ok()) return Fail(store.status());
  if (absl::Status st = (*store)->DeleteSchedule(name); !st.ok()) return Fail(st);
  printf("deleted schedule \"%s\"\n", name.c_str());
  return 0;
}

}  // namespace

int CmdSchedule(const std::vector<std::string>& argv) {
  auto args = Args::Parse(
      argv, With(ConnectionFlags(), {"every", "cron", "tz", "key", "priority", "catch-up"}),
      {"json"});
  if (!args.ok()) return Fail(args.status());
  const auto& pos = args->positional();
  const std::string sub = pos.empty() ? "" : pos[0];
  if (sub != "add") {
    for (const char* flag : {"every", "cron", "tz", "key", "priority", "catch-up"}) {
      if (args->Has(flag)) return Usage(absl::StrCat("--", flag, " goes with schedule add"));
    }
  }
  if (sub != "list" && args->Has("json")) return Usage("--json goes with schedule list");
  if (sub == "add") return Add(*args);
  if (sub == "list") return List(*args);
  if (sub == "delete") return Delete(*args);
  if (!sub.empty()) {
    return Usage(absl::StrCat("unknown schedule subcommand ", Quoted(sub), " (add, list, delete)"));
  }
  return Usage("schedule needs a subcommand: add, list or delete");
}

}  // namespace partq::cli
