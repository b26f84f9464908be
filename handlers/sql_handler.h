// The `sql:STATEMENT` handler: one SQL statement per item, run inside the
// transaction that acknowledges the item, so its writes commit exactly when
// the ack does (handler.h). With a stored procedure, a handler in PL/pgSQL:
//
//   partq worker orders --handler 'sql:CALL app.handle_order($1, $2)'
//
// Parameters, by number; the statement uses those it needs:
//   $1 the item's id            bigint
//   $2 the payload              as the statement types it: bytea gets the
//                               bytes, any other type the payload as text
//                               (which must then be UTF-8 without NUL)
//   $3 the key                  text, NULL without one
//   $4 the attempt              integer, 1 for the first
//   $5 the queue                text
//   $6 the dedup key            text, NULL without one
//   $7 the part                 integer
//   $8 the priority             integer
//   $9 when it was enqueued     timestamptz
// PostgreSQL types each parameter from where the statement uses it (an
// argument of a procedure gets the argument's type, `SELECT $2` text); one it
// leaves open (not used below the highest one used, or used where any type
// fits, as in `$2 IS NULL`) is declared with the type above. Using $10 or
// more is an error.
//
// The statement is prepared once per connection (Tx::Prepare). Setup
// prepares it before the worker joins, so a statement that does not parse or
// names something missing stops the worker at start with the server's
// message. An error the statement raises (RAISE EXCEPTION in a procedure)
// fails that item with the server's message: it is retried and
// dead-lettered by the queue's policy, and its writes roll back. If the
// statement returns a row, the first column of the first row is the item's
// result (`partq wait`): bytes for bytea, else its text; NULL is none. A CALL
// returns one row of the procedure's OUT and INOUT parameters.
//
// Thread-safe: the only state is the statement text.
#ifndef PARTQ_HANDLERS_SQL_HANDLER_H_
#define PARTQ_HANDLERS_SQL_HANDLER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "consumer/builtin_handlers.h"
#include "consumer/handler.h"
#include "store/store.h"

namespace partq {

class SqlHandler final : public Handler {
 public:
  // The highest parameter number the statement may use.
  static constexpr int kMaxParams = 9;

  // A handler running `statement` for items of `queue` ($5). InvalidArgument
  // for an empty statement.
  static absl::StatusOr<std::unique_ptr<SqlHandler>> Create(absl::string_view statement,
                                                            absl::string_view queue);

  // Prepares the statement: the server's error when it does not parse or
  // names something missing; FailedPrecondition for a store without SQL.
  absl::Status Setup(Tx& tx) override;
  absl::Status Handle(HandlerCall& call) override;
  // Each item in turn; once one fails, the transaction is aborted (PostgreSQL
  // runs nothing more in it), so the items after it are not run and are
  // reported OK: the consumer rolls the batch back and runs them again
  // without blaming them (handler.h).
  void HandleBatch(absl::Span<HandlerCall* const> calls,
                   std::vector<absl::Status>* statuses) override;

  const std::string& statement() const { return statement_; }

 private:
  SqlHandler(std::string statement, std::string queue)
      : statement_(std::move(statement)), queue_(std::move(queue)) {}

  std::string statement_;
  std::string queue_;
};

// The stage kind "sql:STATEMENT" for ParseHandlerSpec, for items of `queue`.
HandlerStageKind SqlStageKind(absl::string_view queue);

}  // namespace partq

#endif  // PARTQ_HANDLERS_SQL_HANDLER_H_
