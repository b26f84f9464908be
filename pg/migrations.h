// partq's versioned schema. Migration N turns version N-1 into version N; all
// statements use the placeholder {schema} for the (validated) schema name, as
// an identifier, and {schema_name} where they need it as text.
#ifndef PARTQ_PG_MIGRATIONS_H_
#define PARTQ_PG_MIGRATIONS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace partq {

struct Migration {
  int version;
  const char* description;
  std::string sql;  // with {schema} placeholders
};

// All migrations in version order; the last one's version is kSchemaVersion.
const std::vector<Migration>& Migrations();

// `sql` with {schema} replaced by the quoted schema name, and {schema_name}
// by the bare name (for string literals: a validated name needs no escaping).
std::string WithSchema(absl::string_view sql, absl::string_view schema);

}  // namespace partq

#endif  // PARTQ_PG_MIGRATIONS_H_
