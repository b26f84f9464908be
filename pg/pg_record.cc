// Reading back what the `record:TABLE` handler wrote (the demo's and the
// fault checker's proof of exactly-once effects).
#include <pqxx/pqxx>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "pg/dsn.h"
#include "pg/pg_store.h"

namespace partq {
namespace {

absl::StatusOr<std::string> QualifiedName(const PgOptions& options, absl::string_view table) {
  std::vector<std::string> parts = absl::StrSplit(table, '.');
  if (parts.size() == 1) parts.insert(parts.begin(), options.schema);
  if (parts.size() != 2) return absl::InvalidArgumentError(absl::StrCat("bad table name ", table));
  for (const auto& p : parts) {
    if (absl::Status st = ValidateSchemaName(p); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("bad table name \"", table, "\""));
    }
  }
  return absl::StrCat("\"", parts[0], "\".\"", parts[1], "\"");
}

}  // namespace

absl::StatusOr<RecordProof> ReadRecordProof(const PgOptions& options, absl::string_view table) {
  auto name = QualifiedName(options, table);
  if (!name.ok()) return name.status();
  try {
    pqxx::connection c(options.dsn);
    pqxx::nontransaction tx(c);
    pqxx::row r = tx.exec1(absl::StrCat("SELECT count(*), count(DISTINCT item_id) FROM ", *name));
    return RecordProof{r[0].as<int64_t>(), r[1].as<int64_t>()};
  } catch (const pqxx::undefined_table&) {
    return RecordProof{};
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("reading ", *name, ": ", RedactDsnPasswords(e.what(), options.dsn)));
  }
}

absl::StatusOr<int64_t> CountRecords(const PgOptions& options, absl::string_view table) {
  auto name = QualifiedName(options, table);
  if (!name.ok()) return name.status();
  try {
    pqxx::connection c(options.dsn);
    pqxx::nontransaction tx(c);
    return tx.exec1(absl::StrCat("SELECT count(*) FROM ", *name))[0].as<int64_t>();
  } catch (const pqxx::undefined_table&) {
    return int64_t{0};
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("counting ", *name, ": ", RedactDsnPasswords(e.what(), options.dsn)));
  }
}

absl::Status DropRecordTable(const PgOptions& options, absl::string_view table) {
  auto name = QualifiedName(options, table);
  if (!name.ok()) return name.status();
  try {
    pqxx::connection c(options.dsn);
    pqxx::nontransaction tx(c);
    tx.exec0(absl::StrCat("DROP TABLE IF EXISTS ", *name));
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("dropping ", *name, ": ", RedactDsnPasswords(e.what(), options.dsn)));
  }
}

}  // namespace partq
