// partq's versioned schema: one numbered .sql file per migration under
// pg/migrations/ (NNNN_name.sql), embedded at build time (embedded_sql.h).
// Migration N turns version N-1 into version N and runs in a transaction of
// its own. A file's first line is `-- Migration N: what it does`; the rest is
// the SQL as it runs, with the placeholder {schema} for the (validated) schema
// name as an identifier, and {schema_name} where a statement needs it as text.
// Nothing else is substituted, so `partq migrate --print` shows a DBA exactly
// what runs.
#ifndef PARTQ_PG_MIGRATIONS_H_
#define PARTQ_PG_MIGRATIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace partq {

struct Migration {
  int version;
  std::string description;  // from the file's first line
  std::string file;         // "migrations/0001_initial_schema.sql"
  std::string sql;          // the whole file, with {schema} placeholders
};

// All migrations in version order; the last one's version is kSchemaVersion.
// Versions may leave gaps (a branch's migration keeps its number while
// another's is merged), never repeat.
const std::vector<Migration>& Migrations();

// `sql` with {schema} replaced by the quoted schema name, and {schema_name}
// by the bare name (for string literals: a validated name needs no escaping).
std::string WithSchema(absl::string_view sql, absl::string_view schema);

// The script that takes schema `schema` from version `from` to version `to`
// (0 < to <= kSchemaVersion, from < to): for a DBA's own tools (Flyway,
// sqitch, psql). Each migration in its own transaction, with the row partq
// records in schema_migrations; from 0, the schema and that table first.
// InvalidArgument for a bad range or schema name.
absl::StatusOr<std::string> MigrationScript(absl::string_view schema, int from, int to);

// The statements that make the schema and its version table, before any
// migration (run by Migrate itself).
std::string SchemaBootstrapSql(absl::string_view schema);

}  // namespace partq

#endif  // PARTQ_PG_MIGRATIONS_H_
