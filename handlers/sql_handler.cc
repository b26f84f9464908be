#include "handlers/sql_handler.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "base/utf8.h"

namespace partq {
namespace {

// The type of each parameter ($1..$9) where the statement leaves it open.
// bytea for the payload: it can carry any payload, text cannot.
const std::vector<std::string>& FallbackTypes() {
  static const auto* types = new std::vector<std::string>{
      "bigint", "bytea", "text", "integer", "text", "text", "integer", "integer", "timestamptz"};
  return *types;
}

// What Setup and Handle say of a statement that PostgreSQL parses as one that could end or split
// the ack transaction: its commit must be the ack's (exactly once).
absl::Status EndsTheTransaction(const std::string& statement) {
  return absl::InvalidArgumentError(absl::StrCat(
      "sql: PostgreSQL parses ", Quoted(statement, 200),
      " as a statement that is not a query, INSERT, UPDATE, DELETE, MERGE, VALUES or CALL; "
      "the statement runs inside the transaction that acknowledges the item and may not end it "
      "(COMMIT, ROLLBACK, SAVEPOINT, ...) or be another kind"));
}

// The value of parameter `i` ($i+1) for `item`, in the text form of `type`.
absl::StatusOr<std::optional<std::string>> ParamValue(int i, const Item& item,
                                                      const std::string& queue,
                                                      const std::string& type) {
  std::optional<std::string> v;
  switch (i) {
    case 0:
      v = absl::StrCat(item.id);
      break;
    case 1:
      v = item.payload;
      break;
    case 2:
      v = item.key;
      break;
    case 3:
      v = absl::StrCat(item.attempts);
      break;
    case 4:
      v = queue;
      break;
    case 5:
      v = item.dedup_key;
      break;
    case 6:
      v = absl::StrCat(item.part);
      break;
    case 7:
      v = absl::StrCat(item.priority);
      break;
    case 8:
      v = absl::FormatTime("%Y-%m-%d %H:%M:%E6S+00", item.enqueued_at, absl::UTCTimeZone());
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("no parameter $", i + 1));
  }
  if (!v) return v;
  if (type == "bytea") return absl::StrCat("\\x", absl::BytesToHexString(*v));
  // Text parameters travel as C strings in the server's text encoding.
  if (!IsValidUtf8(*v) || absl::StrContains(*v, absl::string_view("\0", 1))) {
    return absl::InvalidArgumentError(
        absl::StrCat("$", i + 1, " is not UTF-8 text without NUL bytes, which its type ", type,
                     " needs; declare it bytea (e.g. $", i + 1, "::bytea) to take the bytes"));
  }
  return v;
}

// The result a row's first column makes: bytea's "\x..." text as its bytes,
// any other type as its text.
std::optional<std::string> ResultOf(const std::vector<Row>& rows, const PreparedStatement& p) {
  if (rows.empty() || rows[0].empty() || !rows[0][0]) return std::nullopt;
  const std::string& text = *rows[0][0];
  absl::string_view hex = text;
  if (!p.column_types.empty() && p.column_types[0] == "bytea" && absl::ConsumePrefix(&hex, "\\x") &&
      hex.size() % 2 == 0 &&
      std::all_of(hex.begin(), hex.end(), [](char c) { return absl::ascii_isxdigit(c); })) {
    return absl::HexStringToBytes(hex);
  }
  return text;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqlHandler>> SqlHandler::Create(absl::string_view statement,
                                                               absl::string_view queue) {
  statement = absl::StripAsciiWhitespace(statement);
  if (statement.empty()) {
    return absl::InvalidArgumentError(
        "sql:STATEMENT needs a statement, like sql:CALL app.handle($1, $2)");
  }
  return std::unique_ptr<SqlHandler>(new SqlHandler(std::string(statement), std::string(queue)));
}

absl::Status SqlHandler::Setup(Tx& tx) {
  absl::StatusOr<PreparedStatement> p = tx.Prepare(statement_, FallbackTypes());
  if (absl::IsUnimplemented(p.status())) {
    return absl::FailedPreconditionError("the sql: handler needs a PostgreSQL store");
  }
  if (!p.ok()) {
    return absl::Status(p.status().code(), absl::StrCat("sql: PostgreSQL refused the statement \"",
                                                        statement_, "\": ", p.status().message()));
  }
  if (!p->keeps_transaction) return EndsTheTransaction(statement_);
  if (p->param_types.size() > static_cast<size_t>(kMaxParams)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sql: the statement uses $", p->param_types.size(),
                     "; the sql: handler binds $1 to $", kMaxParams,
                     " (id, payload, key, attempt, queue, dedup key, part, priority, "
                     "enqueued at)"));
  }
  return absl::OkStatus();
}

absl::Status SqlHandler::Handle(HandlerCall& call) {
  // Prepared once per connection; from then on an answer from memory.
  absl::StatusOr<PreparedStatement> p = call.tx->Prepare(statement_, FallbackTypes());
  if (!p.ok()) return p.status();
  if (!p->keeps_transaction) return EndsTheTransaction(statement_);
  if (p->param_types.size() > static_cast<size_t>(kMaxParams)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sql: the statement uses $", p->param_types.size()));
  }
  std::vector<std::optional<std::string>> params;
  params.reserve(p->param_types.size());
  for (size_t i = 0; i < p->param_types.size(); ++i) {
    absl::StatusOr<std::optional<std::string>> v =
        ParamValue(static_cast<int>(i), *call.item, queue_, p->param_types[i]);
    if (!v.ok()) return v.status();
    params.push_back(*std::move(v));
  }
  absl::StatusOr<std::vector<Row>> rows = call.tx->Exec(statement_, params);
  if (!rows.ok()) return rows.status();
  call.result = ResultOf(*rows, *p);
  return absl::OkStatus();
}

void SqlHandler::HandleBatch(absl::Span<HandlerCall* const> calls,
                             std::vector<absl::Status>* statuses) {
  statuses->assign(calls.size(), absl::OkStatus());
  for (size_t i = 0; i < calls.size(); ++i) {
    (*statuses)[i] = CallHandle(*this, *calls[i]);
    if (!(*statuses)[i].ok()) break;
  }
}

HandlerStageKind SqlStageKind(absl::string_view queue) {
  HandlerStageKind kind;
  kind.name = "sql";
  kind.usage = "sql:STATEMENT";
  kind.make = [queue = std::string(queue)](
                  absl::string_view statement) -> absl::StatusOr<std::unique_ptr<Handler>> {
    absl::StatusOr<std::unique_ptr<SqlHandler>> h = SqlHandler::Create(statement, queue);
    if (!h.ok()) return h.status();
    return std::unique_ptr<Handler>(std::move(*h));
  };
  return kind;
}

}  // namespace partq
