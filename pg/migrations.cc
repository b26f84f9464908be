#include "pg/migrations.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "pg/embedded_sql.h"
#include "pg/pg_store.h"
#include "store/validate.h"

namespace partq {

namespace {

// The files are part of the build, so a malformed one is a bug of this
// repository, found by every test that migrates: abort with its name.
[[noreturn]] void BadFile(absl::string_view file, absl::string_view why) {
  std::fprintf(stderr, "partq: pg/%s: %s\n", std::string(file).c_str(),
               std::string(why).c_str());
  std::abort();
}

// "migrations/0012_queue_groups.sql" with its first line
// "-- Migration 12: queue groups: ...".
Migration Parse(const EmbeddedSqlFile& f) {
  Migration m;
  m.file = f.path;
  m.sql = f.text;
  const absl::string_view name = absl::string_view(f.path).substr(sizeof("migrations/") - 1);
  if (name.size() < 6 || name[4] != '_' || !absl::SimpleAtoi(name.substr(0, 4), &m.version) ||
      m.version <= 0) {
    BadFile(f.path, "a migration's name is NNNN_name.sql, NNNN its version");
  }
  const absl::string_view first = absl::string_view(f.text).substr(0, m.sql.find('\n'));
  const std::string lead = absl::StrCat("-- Migration ", m.version, ": ");
  if (!absl::StartsWith(first, lead) || first.size() == lead.size()) {
    BadFile(f.path, absl::StrCat("the first line must be \"", lead, "<what it does>\""));
  }
  m.description = std::string(first.substr(lead.size()));
  return m;
}

}  // namespace

const std::vector<Migration>& Migrations() {
  static const auto* migrations = [] {
    auto* all = new std::vector<Migration>;
    for (const EmbeddedSqlFile& f : EmbeddedSqlFiles()) {
      if (absl::StartsWith(f.path, "migrations/")) all->push_back(Parse(f));
    }
    std::sort(all->begin(), all->end(),
              [](const Migration& a, const Migration& b) { return a.version < b.version; });
    for (size_t i = 1; i < all->size(); ++i) {
      if ((*all)[i].version == (*all)[i - 1].version) BadFile((*all)[i].file, "version repeated");
    }
    if (all->empty() || all->back().version != kSchemaVersion) {
      BadFile("migrations/", absl::StrCat("the last migration must be kSchemaVersion (",
                                          kSchemaVersion, ", pg_store.h)"));
    }
    return all;
  }();
  return *migrations;
}

std::string WithSchema(absl::string_view sql, absl::string_view schema) {
  // The schema name is validated ([a-z_][a-z0-9_]*) before it gets here; the
  // quotes make it an identifier even if it is a reserved word, and it needs
  // no escaping inside a string literal.
  return absl::StrReplaceAll(sql, {{"{schema}", absl::StrCat("\"", schema, "\"")},
                                   {"{schema_name}", std::string(schema)}});
}

std::string SchemaBootstrapSql(absl::string_view schema) {
  return WithSchema(R"sql(CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.schema_migrations (
  version      int PRIMARY KEY,
  description  text NOT NULL,
  applied_at   timestamptz NOT NULL DEFAULT now()
);
)sql",
                    schema);
}

absl::StatusOr<std::string> MigrationScript(absl::string_view schema, int from, int to) {
  if (absl::Status st = ValidateSchemaName(schema); !st.ok()) return st;
  if (from < 0 || to > kSchemaVersion || from > to) {
    return absl::InvalidArgumentError(absl::StrCat(
        "migrations run from a version to a later one, within 0..", kSchemaVersion, " (got --from ",
        from, " --to ", to, ")"));
  }
  // A script of what is pending, when nothing is: a comment, no statement.
  if (from == to) {
    return absl::StrCat("-- partq schema \"", schema, "\": at version ", to,
                        ", nothing to migrate.\n");
  }
  std::string out = absl::StrCat("-- partq schema \"", schema, "\": migrations ", from + 1, " to ",
                                 to, ", each in a transaction of its own.\n");
  if (from == 0) absl::StrAppend(&out, "\n", SchemaBootstrapSql(schema));
  for (const Migration& m : Migrations()) {
    if (m.version <= from || m.version > to) continue;
    // Dollar quoting keeps the description a literal whatever it holds.
    absl::StrAppend(&out, "\nBEGIN;\n", WithSchema(m.sql, schema),
                    WithSchema("INSERT INTO {schema}.schema_migrations (version, description) "
                               "VALUES (",
                               schema),
                    m.version, ", $partq$", m.description, "$partq$);\nCOMMIT;\n");
  }
  return out;
}

}  // namespace partq
