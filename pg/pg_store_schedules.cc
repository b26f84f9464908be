// Schedules (Store::AddSchedule ... FireSchedules): the rows and functions
// of migration 15, and the firing transaction.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pg/migrations.h"
#include "pg/pg_store_internal.h"
#include "schedule/timing.h"
#include "store/validate.h"

namespace partq {
namespace pg_internal {
namespace {

// A timestamptz column as microseconds since the epoch (NULL: nullopt); the
// compare-and-set of a tick compares this same expression.
#define PARTQ_MICROS(col) "(date_part('epoch', " col ") * 1000000)::bigint"

std::optional<absl::Time> MicrosTime(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return absl::FromUnixMicros(f.as<int64_t>());
}

// Ticks are whole seconds (intervals of whole seconds, cron minutes, and
// the zone transitions a skipped time moves to), so they travel as Unix
// seconds, exactly. nullopt (no next tick): NULL.
std::optional<int64_t> TickSeconds(absl::Time t) {
  if (t == absl::InfiniteFuture()) return std::nullopt;
  return absl::ToUnixSeconds(t);
}

// The columns Schedule reads, in this order, the payload as `payload`: a
// viewer may not read it (migration 35), so its statement names none.
std::string ScheduleColumns(absl::string_view payload = "payload") {
  return absl::StrCat(
      "name, queue, date_part('epoch', every)::bigint, cron, time_zone, ", payload,
      ", key, priority, " PARTQ_MICROS("next_tick") ", " PARTQ_MICROS(
          "last_tick") ", fired, missed, error, " PARTQ_MICROS("created_at") ", " PARTQ_MICROS("cat"
                                                                                               "ch_"
                                                                                               "u"
                                                                                               "p"));
}
// Past them, FireOneSchedule reads now() and the queue's session TTL.
constexpr int kScheduleColumnCount = 15;

Schedule ReadSchedule(const pqxx::row& r) {
  Schedule s;
  s.spec.name = r[0].as<std::string>();
  s.spec.queue = r[1].as<std::string>();
  if (!r[2].is_null()) s.spec.every = absl::Seconds(r[2].as<int64_t>());
  if (!r[3].is_null()) s.spec.cron = r[3].as<std::string>();
  if (!r[4].is_null()) s.spec.time_zone = r[4].as<std::string>();
  DecodeBytea(r[5].c_str(), &s.spec.payload);
  s.spec.key = Text(r[6]);
  s.spec.priority = r[7].as<int>();
  s.next_tick = MicrosTime(r[8]);
  s.last_tick = MicrosTime(r[9]);
  s.fired = r[10].as<int64_t>();
  s.missed = r[11].as<int64_t>();
  if (!r[12].is_null()) s.error = r[12].as<std::string>();
  s.created_at = *MicrosTime(r[13]);
  if (!r[14].is_null()) s.spec.catch_up = absl::Microseconds(r[14].as<int64_t>());
  return s;
}

// The timing of a stored row: as ValidateSchedule read it when it was
// added, or an error for one the SQL API let through.
absl::StatusOr<Timing> TimingOf(const ScheduleSpec& spec) {
  if (spec.every != absl::ZeroDuration()) return Timing::Every(spec.every);
  return Timing::Cron(spec.cron, spec.time_zone);
}

}  // namespace

absl::Status PgStore::AddSchedule(const ScheduleSpec& spec) {
  absl::StatusOr<Timing> timing = ValidateSchedule(spec, options_.max_payload_bytes);
  if (!timing.ok()) return timing.status();
  return Run(absl::StrCat("add schedule \"", spec.name, "\""), [&]() -> absl::Status {
    PgWork<> tx(*conn_, options_.transaction_pooler);
    // now() is the transaction's start: the first tick is the first after
    // the moment the row is inserted, as the function sees it.
    const absl::Time now =
        absl::FromUnixMicros(tx.exec("SELECT " PARTQ_MICROS("now()"))[0][0].as<int64_t>());
    const absl::Time first = timing->Next(now);
    if (first == absl::InfiniteFuture()) {
      return absl::InvalidArgumentError(absl::StrCat("cron expression \"", spec.cron,
                                                     "\" never fires (no matching day within 8 "
                                                     "years)"));
    }
    const pqxx::binarystring payload(spec.payload.data(), spec.payload.size());
    std::optional<std::string> every, cron, tz;
    if (timing->is_cron()) {
      cron = spec.cron;
      if (!spec.time_zone.empty()) tz = spec.time_zone;
    } else {
      every = absl::StrCat(absl::ToInt64Seconds(spec.every), " seconds");
    }
    try {
      const std::optional<int64_t> catch_up =
          spec.catch_up ? std::optional<int64_t>(absl::ToInt64Microseconds(*spec.catch_up))
                        : std::nullopt;
      tx.exec_params(
          WithSchema("SELECT {schema}.add_schedule($1::text, $2::text, $3::bytea, $4::interval, "
                     "$5::text, $6::text, $7::text, $8::int, to_timestamp($9::bigint), "
                     "$10::bigint * interval '1 microsecond')",
                     options_.schema),
          spec.name, spec.queue, payload, every, cron, tz, spec.key, spec.priority,
          absl::ToUnixSeconds(first), catch_up);
    } catch (const pqxx::sql_error& e) {
      // unknown_queue()'s SQLSTATE, which the store's mapping leaves alone
      // (it means other things elsewhere).
      if (e.sqlstate() == "42704") return UnknownQueue(spec.queue, options_.schema);
      // The function's own words, without PL/pgSQL's CONTEXT lines.
      std::string msg = CleanMessage(e.what());
      msg = msg.substr(0, msg.find("\nCONTEXT:"));
      if (e.sqlstate() == "23505") {
        return absl::AlreadyExistsError(absl::StrCat("add schedule \"", spec.name, "\": ", msg));
      }
      if (e.sqlstate() == "22023") {
        return absl::InvalidArgumentError(absl::StrCat("add schedule \"", spec.name, "\": ", msg));
      }
      throw;
    }
    tx.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<Schedule>> PgStore::ListSchedules(absl::string_view queue) {
  if (!queue.empty()) {
    if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  }
  return Run("list schedules", [&]() -> absl::StatusOr<std::vector<Schedule>> {
    pqxx::transaction_base& tx = Autocommit();
    const std::optional<std::string> q =
        queue.empty() ? std::nullopt : std::optional<std::string>(queue);
    if (ThroughSqlApi(tx)) return ListSchedulesThroughApi(tx, q);
    if (q && tx.exec_params(
                   WithSchema("SELECT 1 FROM {schema}.queues WHERE name = $1", options_.schema), *q)
                 .empty()) {
      return UnknownQueue(queue, options_.schema);
    }
    std::vector<Schedule> out;
    // A viewer may not read payloads: the statement must not name them.
    const bool hidden = !MayRead(tx, options_.schema, "schedules", "payload");
    for (const pqxx::row& r : tx.exec_params(
             WithSchema(absl::StrCat("SELECT ", ScheduleColumns(hidden ? "''::bytea" : "payload"),
                                     " FROM {schema}.schedules WHERE $1::text IS NULL "
                                     "OR queue = $1 ORDER BY name"),
                        options_.schema),
             q)) {
      out.push_back(ReadSchedule(r));
      out.back().payload_hidden = hidden;
    }
    return out;
  });
}

// An operator's or a viewer's list: list_schedules() checks the grant (an
// unknown or ungranted queue is refused by name, 42501), keeps to the
// role's queues, and gives no payload to a role that may not read it.
absl::StatusOr<std::vector<Schedule>> PgStore::ListSchedulesThroughApi(
    pqxx::transaction_base& tx, const std::optional<std::string>& queue) {
  std::vector<Schedule> out;
  for (const pqxx::row& r : tx.exec_params(
           WithSchema(absl::StrCat("SELECT ", ScheduleColumns("coalesce(payload, ''::bytea)"),
                                   ", payload IS NULL FROM {schema}.list_schedules($1::text)"),
                      options_.schema),
           queue)) {
    out.push_back(ReadSchedule(r));
    out.back().payload_hidden = r[kScheduleColumnCount].as<bool>();
  }
  return out;
}

absl::Status PgStore::DeleteSchedule(absl::string_view name) {
  return Run(absl::StrCat("delete schedule \"", name, "\""), [&]() -> absl::Status {
    pqxx::transaction_base& tx = Autocommit();
    if (ThroughSqlApi(tx)) {
      // delete_schedule() checks the operator's grant on the schedule's queue.
      try {
        tx.exec_params(WithSchema("SELECT {schema}.delete_schedule($1)", options_.schema),
                       std::string(name));
      } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() != "42704") throw;
        return absl::NotFoundError(absl::StrCat("unknown schedule \"", name, "\" in schema \"",
                                                options_.schema, "\" (partq schedule list",
                                                SchemaFlag(options_.schema), " shows them)"));
      }
      return absl::OkStatus();
    }
    if (tx.exec_params(
              WithSchema("DELETE FROM {schema}.schedules WHERE name = $1", options_.schema),
              std::string(name))
            .affected_rows() == 0) {
      return absl::NotFoundError(absl::StrCat("unknown schedule \"", name, "\" in schema \"",
                                              options_.schema, "\" (partq schedule list",
                                              SchemaFlag(options_.schema), " shows them)"));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<FiredSchedules> PgStore::FireSchedules(absl::string_view queue) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  FiredSchedules out;
  // One transaction per tick, so one that fails (say, an item the queue
  // refuses) does not hold the others back. Each round fires a due tick (of
  // a catch-up, one of several) or moves a schedule past now, so the rounds
  // are bounded by the due ticks; the cap bounds one call (the firer asks
  // again at once while a tick is still due).
  for (int round = 0; round < 1000; ++round) {
    absl::StatusOr<bool> fired = FireOneSchedule(queue, &out);
    if (!fired.ok()) return fired.status();
    if (!*fired) break;
  }
  absl::Status st = Run("read the next tick", [&]() -> absl::Status {
    pqxx::row r = Autocommit().exec_params1(
        WithSchema(
            "SELECT " PARTQ_MICROS("now()") ", (SELECT " PARTQ_MICROS(
                "min(next_tick)") " FROM {schema}.schedules WHERE queue = $1 AND error IS NULL), "
                                  "EXISTS (SELECT 1 FROM {schema}.queues WHERE name = $1)",
            options_.schema),
        std::string(queue));
    if (!r[2].as<bool>()) return UnknownQueue(queue, options_.schema);
    out.db_now = *MicrosTime(r[0]);
    out.next_due = MicrosTime(r[1]);
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  return out;
}

absl::StatusOr<bool> PgStore::FireOneSchedule(absl::string_view queue, FiredSchedules* out) {
  return Run(
      absl::StrCat("fire a schedule of queue \"", queue, "\""), [&]() -> absl::StatusOr<bool> {
        PgWork<> tx(*conn_, options_.transaction_pooler);
        const std::string q(queue);
        // Items' lock first, as every writer of items takes it before anything
        // else (DeleteQueue takes it, then deletes the queue, whose FK cascade
        // needs this schedule row: the other order could deadlock with it).
        // A worker role may not lock items itself (migration 41): put_items()
        // takes the lock for it.
        if (confined_) {
          Exec(tx, "lock_items_for_put", q);
        } else {
          tx.exec(WithSchema("LOCK TABLE {schema}.items IN ROW EXCLUSIVE MODE", options_.schema));
        }
        // SKIP LOCKED: a row another worker is firing is its business; its
        // compare-and-set moves the tick, and we look again next time.
        pqxx::result rows = tx.exec_params(
            WithSchema(absl::StrCat("SELECT ", ScheduleColumns(), ", " PARTQ_MICROS("now()"),
                                    ", (SELECT " PARTQ_MICROS("session_ttl"),
                                    " FROM {schema}.queues WHERE name = $1)"
                                    " FROM {schema}.schedules WHERE queue = $1 AND error IS NULL "
                                    "AND (next_tick IS NULL OR next_tick <= now()) "
                                    "ORDER BY next_tick NULLS FIRST, name LIMIT 1 "
                                    "FOR UPDATE SKIP LOCKED"),
                       options_.schema),
            q);
        if (rows.empty()) return false;
        const Schedule s = ReadSchedule(rows[0]);
        const absl::Time now = *MicrosTime(rows[0][kScheduleColumnCount]);
        const absl::Duration ttl =
            absl::Microseconds(rows[0][kScheduleColumnCount + 1].as<int64_t>());
        auto cas = [&](const std::string& set, auto&&... args) {
          return tx
              .exec_params(WithSchema(absl::StrCat("UPDATE {schema}.schedules SET ", set,
                                                   " WHERE name = $1 AND " PARTQ_MICROS(
                                                       "next_tick") " IS NOT DISTINCT FROM $2"),
                                      options_.schema),
                           s.spec.name,
                           s.next_tick ? std::optional<int64_t>(absl::ToUnixMicros(*s.next_tick))
                                       : std::nullopt,
                           std::forward<decltype(args)>(args)...)
              .affected_rows();
        };
        absl::StatusOr<Timing> timing = TimingOf(s.spec);
        if (!timing.ok()) {
          // Written through the SQL API, which checks less than the parser.
          cas("error = $3, next_tick = NULL", std::string(timing.status().message()));
          tx.commit();
          return true;
        }
        const absl::Time due = s.next_tick ? *s.next_tick : timing->Next(s.created_at);
        if (due > now) {
          // A row the SQL API added without a first tick, not due yet.
          cas("next_tick = to_timestamp($3::bigint)", TickSeconds(due));
          tx.commit();
          return true;
        }
        // One tick per transaction: the oldest due inside the catch-up
        // window; the next round takes the one after it, if due too.
        const FirePlan plan = PlanCatchUp(*timing, due, now, CatchUpOf(s.spec, *timing, ttl, due));
        const NewItem item = ScheduledItem(s.spec, plan.tick);
        absl::StatusOr<EnqueueArgs> args = CheckNewItem(item, options_.max_payload_bytes);
        if (!args.ok()) {
          cas("error = $3, next_tick = NULL", std::string(args.status().message()));
          tx.commit();
          return true;
        }
        absl::StatusOr<EnqueueResult> r = EnqueueIn(tx, !options_.transaction_pooler, confined_,
                                                    options_.schema, queue, item, *args);
        if (!r.ok()) return r.status();
        // The compare-and-set: with the row locked it cannot fail, but if it
        // did (a row changed under a lock is a bug elsewhere), nothing commits.
        if (cas("next_tick = to_timestamp($3::bigint), last_tick = to_timestamp($4::bigint), "
                "fired = fired + 1, missed = missed + $5",
                TickSeconds(plan.next), TickSeconds(plan.tick), plan.missed) != 1) {
          return absl::AbortedError(
              absl::StrCat("schedule \"", s.spec.name, "\": its tick moved while locked; retry"));
        }
        tx.commit();
        out->fired.push_back(
            ScheduleFiring{s.spec.name, plan.tick, plan.missed, now - plan.tick, *r});
        return true;
      });
}

#undef PARTQ_MICROS

}  // namespace pg_internal
}  // namespace partq
