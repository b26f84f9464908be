// partq's SQL files, embedded at build time (pg/embed_sql.cmake): the numbered
// migrations under pg/migrations/ and the statements under pg/sql/, each the
// file's bytes as it is in the repository, named by its path under pg/
// ("migrations/0001_initial_schema.sql"). The only substitution the code makes
// is the schema's name (WithSchema, migrations.h).
#ifndef PARTQ_PG_EMBEDDED_SQL_H_
#define PARTQ_PG_EMBEDDED_SQL_H_

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace partq {

struct EmbeddedSqlFile {
  const char* path;  // under pg/, e.g. "sql/heartbeat.sql"
  const char* text;  // the file's bytes
};

// Every embedded file, sorted by path.
absl::Span<const EmbeddedSqlFile> EmbeddedSqlFiles();

// The text of the file at `path`; aborts when there is none (a statement's
// file is part of the build, so a missing one is a bug, not an input error).
absl::string_view EmbeddedSql(absl::string_view path);

}  // namespace partq

#endif  // PARTQ_PG_EMBEDDED_SQL_H_
