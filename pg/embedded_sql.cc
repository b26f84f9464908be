#include "pg/embedded_sql.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace partq {

absl::string_view EmbeddedSql(absl::string_view path) {
  for (const EmbeddedSqlFile& f : EmbeddedSqlFiles()) {
    if (path == f.path) return f.text;
  }
  std::fprintf(stderr, "partq: no embedded SQL file %s\n", std::string(path).c_str());
  std::abort();
}

}  // namespace partq
