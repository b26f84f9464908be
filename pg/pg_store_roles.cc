// Roles per queue (schema migrations 29, 30, 34 and 35; docs/guide/operations-and-roles.md, "Roles
// per queue"): the rows of `grants` that the SQL API's authorize() reads, written by the schema's
// owner through `partq grant` and `partq revoke`. Admin operations.
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/utf8.h"
#include "pg/embedded_sql.h"
#include "pg/migrations.h"
#include "pg/pg_store.h"
#include "pg/pg_store_internal.h"
#include "store/validate.h"

namespace partq {
namespace pg_internal {

namespace {

absl::Status ValidateGrantKind(absl::string_view kind) {
  if (kind == "producer" || kind == "operator" || kind == "viewer" || kind == "worker" ||
      kind == "publish") {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the kind of a grant is producer, operator, viewer, worker or publish (got ",
                   Quoted(kind), ")"));
}

// The queue names of a grant, or a publish grant's Kafka topics.
absl::Status ValidateGrantObjects(absl::string_view kind, const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    absl::Status st = kind == "publish" ? ValidateTopicName(n) : ValidateQueueName(n);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

// A grant or revoke remakes the role's policies (migration 36), which takes
// each table's exclusive lock: behind a transaction that has read a table,
// the wait would queue every queue's claims, acks and enqueues behind it.
// It gives up instead, and says so, after this long.
constexpr char kGrantLockTimeout[] = "SET LOCAL lock_timeout = '5s'";

// The worker's table privileges (worker_privileges(), migration 39: no
// DELETE, UPDATE on columns), granted to `role`, or with `revoke` taken
// back, but USAGE on the schema, which stays (the SQL API needs it).
void WorkerPrivileges(pqxx::transaction_base& tx, absl::string_view schema, const std::string& role,
                      bool revoke) {
  tx.exec_params(WithSchema("SELECT {schema}.worker_privileges($1::name, $2::boolean)", schema),
                 role, revoke);
}

// A viewer's column privileges, every column the console reads but payloads
// (migration 35), granted to `role` or taken back.
void ViewerPrivileges(pqxx::transaction_base& tx, absl::string_view schema, absl::string_view role,
                      bool revoke) {
  tx.exec_params(WithSchema("SELECT {schema}.viewer_privileges($1::name, $2::boolean)", schema),
                 std::string(role), revoke);
}

// A role's worker and viewer grants may not mix: a worker's table
// privileges would read the viewed queue's payloads (migration 36). The
// error for a grant of `kind` to `role`, if it holds grants of the other.
absl::Status RefuseMixedGrant(pqxx::transaction_base& tx, absl::string_view schema,
                              absl::string_view kind, const std::string& role) {
  if (kind != "worker" && kind != "viewer") return absl::OkStatus();
  const std::string other = kind == "worker" ? "viewer" : "worker";
  pqxx::result r = tx.exec_params(
      WithSchema(
          "SELECT queue FROM {schema}.grants WHERE role = $1 AND kind = $2 ORDER BY 1 LIMIT 1",
          schema),
      role, other);
  if (r.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "role ", Quoted(role), " is a ", other, " of queue ", Quoted(r[0][0].c_str()),
      ": a role is a worker or a viewer, not both (a worker's table privileges would read what a "
      "viewer may not); grant ",
      kind, " to a role of its own"));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> PgStore::SchemaCreators() {
  return Run("read who may create in the schema",
             [&]() -> absl::StatusOr<std::vector<std::string>> {
               pqxx::read_transaction tx(*conn_);
               std::vector<std::string> roles;
               for (const auto& row : Exec(tx, "schema_creators", options_.schema)) {
                 roles.push_back(row[0].c_str());
               }
               return roles;
             });
}

bool MayRead(pqxx::transaction_base& tx, absl::string_view schema, absl::string_view table,
             absl::string_view column) {
  return tx
      .exec_params("SELECT has_column_privilege(format('%I.%I', $1::text, $2::text), $3, 'SELECT')",
                   std::string(schema), std::string(table), std::string(column))[0][0]
      .as<bool>();
}

absl::Status PgStore::Grant(absl::string_view kind, absl::string_view role,
                            const std::vector<std::string>& queues) {
  if (absl::Status st = ValidateGrantKind(kind); !st.ok()) return st;
  if (absl::Status st = ValidateGrantObjects(kind, queues); !st.ok()) return st;
  return Run(absl::StrCat("grant ", kind, " to role ", Quoted(role)), [&]() -> absl::Status {
    PgWork<> tx(*conn_, options_.transaction_pooler);
    tx.exec(kGrantLockTimeout);
    if (tx.exec_params("SELECT 1 FROM pg_roles WHERE rolname = $1", std::string(role)).empty()) {
      return absl::NotFoundError(absl::StrCat("role ", Quoted(role),
                                              " does not exist (CREATE ROLE makes it, with "
                                              "LOGIN for a role that connects)"));
    }
    std::vector<std::string> creators;
    for (const auto& row : Exec(tx, "schema_creators", options_.schema)) {
      creators.push_back(row[0].c_str());
    }
    if (!creators.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          SchemaCreatorsProblem(options_.schema, creators), "; partq grant refuses until then"));
    }
    Exec(tx, "forget_earlier_role", std::string(role));
    for (const std::string& q : queues) {
      if (kind == "publish") {
        Exec(tx, "grant_topic", q, std::string(role));
        continue;
      }
      if (Exec(tx, "get_queue", q).empty()) return UnknownQueue(q, options_.schema);
      if (absl::Status st = RefuseMixedGrant(tx, options_.schema, kind, std::string(role));
          !st.ok()) {
        return st;
      }
      Exec(tx, "grant_queue_right", q, std::string(role), std::string(kind));
    }
    // The functions are the schema's: a role needs to see it, nothing more;
    // a worker uses the tables, within its queues' rows (migration 30).
    tx.exec(absl::StrCat("GRANT USAGE ON SCHEMA ", tx.quote_name(options_.schema), " TO ",
                         tx.quote_name(std::string(role))));
    if (kind == "worker")
      WorkerPrivileges(tx, options_.schema, std::string(role), /*revoke=*/false);
    // A viewer reads its queues' rows, but no payload (migration 35).
    if (kind == "viewer") ViewerPrivileges(tx, options_.schema, role, /*revoke=*/false);
    // The role's policies are made again as the transaction commits (the
    // trigger grants_changed, migration 36).
    tx.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<int> PgStore::Revoke(absl::string_view kind, absl::string_view role,
                                    const std::vector<std::string>& queues) {
  if (absl::Status st = ValidateGrantKind(kind); !st.ok()) return st;
  if (absl::Status st = ValidateGrantObjects(kind, queues); !st.ok()) return st;
  int removed = 0;
  absl::Status st =
      Run(absl::StrCat("revoke ", kind, " from role ", Quoted(role)), [&]() -> absl::Status {
        removed = 0;
        PgWork<> tx(*conn_, options_.transaction_pooler);
        tx.exec(kGrantLockTimeout);
        // An earlier role's rows of this name are not this role's to revoke
        // (migration 38); a dropped role's own rows are, by its name.
        Exec(tx, "forget_earlier_role", std::string(role));
        for (const std::string& q : queues) {
          // A queue's grants go with it (ON DELETE CASCADE): a name that
          // is no queue is a typo, said as grant says it, not "0 removed".
          if (kind != "publish" && Exec(tx, "get_queue", q).empty()) {
            return UnknownQueue(q, options_.schema, /*suggest_create=*/false);
          }
          removed +=
              static_cast<int>((kind == "publish" ? Exec(tx, "revoke_topic", q, std::string(role))
                                                  : Exec(tx, "revoke_queue_right", q,
                                                         std::string(role), std::string(kind)))
                                   .affected_rows());
        }
        // A role with no worker (viewer) grant left is no longer confined to
        // any queue's rows: it keeps no table (column) privilege either.
        const bool last =
            (kind == "worker" || kind == "viewer") &&
            tx.exec_params(WithSchema("SELECT 1 FROM {schema}.grants WHERE role = $1 AND kind = $2",
                                      options_.schema),
                           std::string(role), std::string(kind))
                .empty();
        if (kind == "worker" && last) {
          WorkerPrivileges(tx, options_.schema, std::string(role), /*revoke=*/true);
        }
        if (kind == "viewer" && last) ViewerPrivileges(tx, options_.schema, role, /*revoke=*/true);
        // A role revoked from its last worker and viewer grant, its
        // privileges taken back with them, is confined no longer (migration
        // 36; a queue's delete leaves it confined to nothing).
        if (last) {
          tx.exec_params(WithSchema("DELETE FROM {schema}.confined_roles c USING pg_roles p "
                                    "WHERE p.oid = c.role_oid AND p.rolname = $1 AND NOT EXISTS ("
                                    "SELECT 1 FROM {schema}.grants g WHERE g.role = $1 "
                                    "AND g.kind IN ('worker', 'viewer'))",
                                    options_.schema),
                         std::string(role));
        }
        tx.commit();
        return absl::OkStatus();
      });
  if (!st.ok()) return st;
  return removed;
}

absl::StatusOr<std::vector<QueueGrant>> PgStore::ListGrants(
    const std::optional<std::string>& queue) {
  if (queue) {
    if (absl::Status st = ValidateQueueName(*queue); !st.ok()) return st;
  }
  std::vector<QueueGrant> out;
  absl::Status st = Run("list the grants", [&]() -> absl::Status {
    out.clear();
    for (const pqxx::row& r : Exec(Autocommit(), "list_grants", queue)) {
      out.push_back({r[0].as<std::string>(""), r[1].as<std::string>(), r[2].as<std::string>(),
                     r[5].as<std::string>(""), absl::FromUnixMicros(r[3].as<int64_t>()),
                     r[4].as<bool>()});
    }
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  return out;
}

}  // namespace pg_internal

std::string SchemaCreatorsProblem(absl::string_view schema, const std::vector<std::string>& roles) {
  // As identifiers, for the REVOKE to paste.
  auto ident = [](absl::string_view name) {
    return absl::StrCat("\"", absl::StrReplaceAll(name, {{"\"", "\"\""}}), "\"");
  };
  const std::string revoke = absl::StrCat("REVOKE CREATE ON SCHEMA ", ident(schema), " FROM ");
  const char* why =
      ": a function made there could run in place of partq's own, as the schema's owner, so no "
      "role is confined to its queues while ";
  if (roles.size() == 1 && roles[0] == "PUBLIC") {
    return absl::StrCat("every role may create objects in schema ", ident(schema),
                        " (CREATE granted to PUBLIC)", why, "it may; ", revoke, "PUBLIC");
  }
  std::vector<std::string> names;
  for (const std::string& r : roles) names.push_back(ident(r));
  const std::string list = absl::StrJoin(names, ", ");
  return absl::StrCat(roles.size() == 1 ? "role " : "roles ", list,
                      " may create objects in schema ", ident(schema),
                      " (CREATE on it) without owning it", why,
                      roles.size() == 1 ? "it may" : "they may", "; ", revoke, list,
                      " (the owner makes a record:TABLE handler's table: "
                      "docs/guide/operations-and-roles.md, \"Worker roles\")");
}

}  // namespace partq
