// PgStore's queue groups (schema migration 12; store.h, "Queue groups").
// The rules live in the SQL functions group_create(), group_start() and
// group_status(), so the SQL API and C++ say the same; this file calls
// them. Admin operations, run unprepared.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/utf8.h"
#include "pg/migrations.h"
#include "pg/pg_store_internal.h"
#include "store/validate.h"

namespace partq {
namespace pg_internal {
namespace {

std::optional<absl::Time> TimeOrNull(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return absl::FromUnixMicros(f.as<int64_t>());
}

// Microseconds since the Unix epoch of a timestamptz column, for TimeOrNull.
std::string Micros(absl::string_view column) {
  return absl::StrCat("(extract(epoch FROM ", column, ") * 1000000)::bigint");
}

// A GroupStatus from the columns group_status() returns, as GroupColumns()
// selects them: pending, held, in_flight, done, dead, cancelled, then the
// times, end_queue, end_payload, end_item, end_error; `id` first.
GroupStatus GroupFromRow(const pqxx::row& r) {
  GroupStatus g;
  g.id = r[0].as<std::string>();
  g.pending = r[1].as<int64_t>();
  g.held = r[2].as<int64_t>();
  g.in_flight = r[3].as<int64_t>();
  g.done = r[4].as<int64_t>();
  g.dead = r[5].as<int64_t>();
  g.cancelled = r[6].as<int64_t>();
  g.created_at = absl::FromUnixMicros(r[7].as<int64_t>());
  g.started_at = TimeOrNull(r[8]);
  g.cancelled_at = TimeOrNull(r[9]);
  g.ended_at = TimeOrNull(r[10]);
  g.end_queue = Text(r[11]);
  g.end_payload = Text(r[12]);
  if (!r[13].is_null()) g.end_item = r[13].as<int64_t>();
  g.end_error = Text(r[14]);
  return g;
}

// The columns GroupFromRow reads, from a row `x` of group_status() or of
// the groups table (whose held and in_flight are given as `held`, `flying`).
// Without `end_payload` the end payload is NULL: a viewer may not read it
// (migration 35), so the statement must not name it.
std::string GroupColumns(absl::string_view id, absl::string_view held, absl::string_view flying,
                         bool end_payload = true) {
  return absl::StrCat(id, ", x.pending, ", held, ", ", flying, ", x.done, x.dead, x.cancelled, ",
                      Micros("x.created_at"), ", ", Micros("x.started_at"), ", ",
                      Micros("x.cancelled_at"), ", ", Micros("x.ended_at"), ", x.end_queue::text, ",
                      end_payload ? "x.end_payload::text" : "NULL::text",
                      ", x.end_item, x.end_error");
}

}  // namespace

absl::Status PgStore::CreateGroup(absl::string_view queue, const GroupSpec& spec) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  if (absl::Status st = ValidateGroupId(spec.id); !st.ok()) return st;
  if (spec.end_queue) {
    if (absl::Status st = ValidateQueueName(*spec.end_queue); !st.ok()) return st;
  }
  absl::Status st = Run(
      absl::StrCat("create group \"", spec.id, "\" of queue \"", queue, "\""),
      [&]() -> absl::Status {
        Autocommit().exec_params(
            WithSchema("SELECT {schema}.group_create($1, $2, $3, $4::jsonb)", options_.schema),
            std::string(queue), spec.id, spec.end_queue, spec.end_payload);
        return absl::OkStatus();
      });
  if (!absl::IsAlreadyExists(st)) return st;
  // The schema's message names only the end queue it has; say both sides'
  // end work, so one that differs only in its payload is seen.
  absl::StatusOr<GroupStatus> has = GetGroup(queue, spec.id);
  if (!has.ok()) return st;
  auto work = [](const std::optional<std::string>& q, const std::optional<std::string>& p) {
    if (!q) return std::string("no end work");
    return absl::StrCat("end queue \"", *q, "\" with end payload ", p ? PrintableUtf8(*p) : "none");
  };
  return absl::AlreadyExistsError(
      absl::StrCat(st.message(), ": it has ", work(has->end_queue, has->end_payload),
                   ", this asked for ", work(spec.end_queue, spec.end_payload)));
}

absl::StatusOr<GroupStatus> PgStore::StartGroup(absl::string_view queue, absl::string_view id) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  if (absl::Status st = ValidateGroupId(id); !st.ok()) return st;
  const std::string what = absl::StrCat("start group \"", id, "\" of queue \"", queue, "\"");
  absl::Status st = Run(what, [&]() -> absl::Status {
    PgWork<> tx(*conn_, options_.transaction_pooler);
    tx.exec_params(WithSchema("SELECT {schema}.group_start($1, $2)", options_.schema),
                   std::string(queue), std::string(id));
    tx.commit();
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  return GetGroup(queue, id);
}

absl::StatusOr<GroupStatus> PgStore::GetGroup(absl::string_view queue, absl::string_view id) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  if (absl::Status st = ValidateGroupId(id); !st.ok()) return st;
  return Run(
      absl::StrCat("read group \"", id, "\" of queue \"", queue, "\""),
      [&]() -> absl::StatusOr<GroupStatus> {
        pqxx::result r = Autocommit().exec_params(
            WithSchema(absl::StrCat("SELECT ", GroupColumns("$2::text", "x.held", "x.in_flight"),
                                    " FROM {schema}.group_status($1, $2) x"),
                       options_.schema),
            std::string(queue), std::string(id));
        return GroupFromRow(r[0]);
      });
}

absl::StatusOr<std::vector<GroupStatus>> PgStore::ListGroups(absl::string_view queue,
                                                             bool include_ended, int limit) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run(absl::StrCat("list groups of queue \"", queue, "\""),
             [&]() -> absl::StatusOr<std::vector<GroupStatus>> {
               pqxx::transaction_base& tx = Autocommit();
               std::vector<GroupStatus> out;
               if (ThroughSqlApi(tx)) {
                 // A producer's or an operator's may not read the table
                 // (migration 46): list_groups() checks the role's grant.
                 for (const pqxx::row& r : tx.exec_params(
                          WithSchema(absl::StrCat("SELECT ", GroupColumns("x.group_id", "0", "0"),
                                                  " FROM {schema}.list_groups($1, $2, $3) x"),
                                     options_.schema),
                          std::string(queue), include_ended, limit)) {
                   out.push_back(GroupFromRow(r));
                 }
                 return out;
               }
               tx.exec_params(WithSchema("SELECT {schema}.require_queue($1)", options_.schema),
                              std::string(queue));
               const std::string columns = GroupColumns(
                   "x.id::text", "0", "0", MayRead(tx, options_.schema, "groups", "end_payload"));
               for (const pqxx::row& r : tx.exec_params(
                        WithSchema(absl::StrCat("SELECT ", columns,
                                                " FROM {schema}.groups x WHERE x.queue = $1"
                                                " AND ($2 OR x.ended_at IS NULL)"
                                                " ORDER BY x.created_at DESC, x.id LIMIT $3"),
                                   options_.schema),
                        std::string(queue), include_ended, limit)) {
                 out.push_back(GroupFromRow(r));
               }
               return out;
             });
}

// How often a producer's group cancel is tried when a claim's transaction
// conflicts with it (CancelGroup).
constexpr int kGroupCancelAttempts = 5;

absl::StatusOr<GroupStatus> PgStore::CancelGroup(absl::string_view queue, absl::string_view id,
                                                 bool run_end) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  if (absl::Status st = ValidateGroupId(id); !st.ok()) return st;
  // First the group (no more items; maybe no end work), then its items part
  // by part as CancelItems takes them: a transaction that held one part's
  // claim record while waiting for another's could deadlock with a claim.
  // A role that does not own the tables (a producer's) calls the SQL API's
  // group_cancel(), which checks its grant and does both in one transaction,
  // in every part of the group's items: a claim of two of them can deadlock
  // with it (40P01), which rolls it back whole, so it is tried again.
  const std::string what = absl::StrCat("cancel group \"", id, "\" of queue \"", queue, "\"");
  bool through_api = false;
  absl::Status st;
  for (int attempt = 1; attempt <= kGroupCancelAttempts; ++attempt) {
    st = Run(what, [&]() -> absl::Status {
      pqxx::transaction_base& tx = Autocommit();
      through_api = ThroughSqlApi(tx);
      if (through_api) Exec(tx, "group_cancel_api", std::string(queue), std::string(id), run_end);
      return absl::OkStatus();
    });
    if (!absl::IsAborted(st)) break;
  }
  if (!st.ok()) return st;
  if (through_api) return GetGroup(queue, id);
  std::vector<int64_t> ids;
  st = Run(what, [&]() -> absl::Status {
    PgWork<> tx(*conn_, options_.transaction_pooler);
    pqxx::result r =
        tx.exec_params(WithSchema("SELECT unnest({schema}.group_mark_cancelled($1::text, "
                                  "$2::text, $3::boolean))",
                                  options_.schema),
                       std::string(queue), std::string(id), run_end);
    for (const pqxx::row& row : r) ids.push_back(row[0].as<int64_t>());
    tx.commit();
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  if (!ids.empty()) {
    absl::StatusOr<std::vector<CancelOutcome>> done = CancelItems(queue, ids);
    if (!done.ok()) return done.status();
  }
  return GetGroup(queue, id);
}

}  // namespace pg_internal
}  // namespace partq
