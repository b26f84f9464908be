// PgStore: items — enqueue (single, COPY batch, in the caller's transaction),
// claim, finish, item state and queue status.
#include <libpq-fe.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "partitioner/part.h"
#include "pg/migrations.h"
#include "pg/pg_store.h"
#include "pg/pg_store_internal.h"

namespace partq {
namespace pg_internal {
namespace {

// A claim larger than this is a caller bug; it would also make one statement
// hold many row locks.
constexpr int kMaxClaim = 10000;
// Statements a handler's Tx::Exec prepares (HandlerStatements).
constexpr absl::string_view kCachedVerbs[] = {"INSERT", "UPDATE", "DELETE", "SELECT",
                                              "WITH",   "VALUES", "MERGE"};
// Rows per statement on the batched-INSERT path (items with dedup keys).
constexpr size_t kInsertChunk = 2000;
// A batch touching more parts than this sends one "any part" notice instead
// of one per part.
constexpr size_t kMaxPartNotices = 32;

std::string ByteaLiteral(absl::string_view bytes) {
  return absl::StrCat("\\x", absl::BytesToHexString(bytes));
}

std::string TimestampText(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%E6S+00", t, absl::UTCTimeZone());
}

// --- statements on the libpq handle (Tx::Prepare) -------------------------------------

using PgResultPtr = std::unique_ptr<PGresult, void (*)(PGresult*)>;

// The server's error as a person reads it: the message, its detail and hint,
// and where in the statement it points; without libpq's "ERROR:" and the
// CONTEXT lines (which name partq's own call path as much as the user's).
std::string ServerMessage(PGconn* c, const PGresult* r) {
  const char* primary = r != nullptr ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  if (primary == nullptr) return CleanMessage(PQerrorMessage(c));
  std::string out = primary;
  if (const char* d = PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL)) {
    absl::StrAppend(&out, " (", d, ")");
  }
  if (const char* h = PQresultErrorField(r, PG_DIAG_MESSAGE_HINT)) {
    absl::StrAppend(&out, " (hint: ", h, ")");
  }
  if (const char* p = PQresultErrorField(r, PG_DIAG_STATEMENT_POSITION)) {
    absl::StrAppend(&out, " (at character ", p, ")");
  }
  return out;
}

// The exception libpqxx would have thrown for a failed libpq call, so that
// ClassifyException maps it like any other.
[[noreturn]] void ThrowFailure(PGconn* c, const PGresult* r, absl::string_view sql) {
  if (r == nullptr || PQstatus(c) != CONNECTION_OK) {
    throw pqxx::broken_connection(CleanMessage(PQerrorMessage(c)));
  }
  const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  throw pqxx::sql_error(ServerMessage(c, r), std::string(sql), state != nullptr ? state : "");
}

// N of "... parameter $N" in the server's message (the number is kept in
// every translation), or 0.
int ParameterNumber(const char* primary) {
  if (primary == nullptr) return 0;
  const absl::string_view message = primary;
  for (size_t at = message.find('$'); at != absl::string_view::npos;
       at = message.find('$', at + 1)) {
    size_t end = at + 1;
    while (end < message.size() && absl::ascii_isdigit(message[end])) ++end;
    int n = 0;
    if (end > at + 1 && absl::SimpleAtoi(message.substr(at + 1, end - at - 1), &n)) return n;
  }
  return 0;
}

// Whether PostgreSQL's own grammar takes `text` for a statement that runs inside the
// transaction and cannot end it: one that SQL PREPARE accepts (a query, INSERT, UPDATE, DELETE,
// MERGE, VALUES), or a CALL (a procedure called inside a transaction block may not commit).
// PREPARE refuses every other kind at the statement's first word, and the server says where:
// that word is read at the error's position, so comments, nesting, case and line ends are the
// server's to read, never a text guard's (issue 48: `/* /* */ */ COMMIT` passed one).
bool KeepsTransaction(pqxx::transaction_base& tx, PGconn* c, const std::string& text,
                      const std::vector<std::string>& param_types) {
  std::string sql = "PREPARE partq_kind_check";
  if (!param_types.empty()) absl::StrAppend(&sql, "(", absl::StrJoin(param_types, ", "), ")");
  absl::StrAppend(&sql, " AS ");
  const size_t start = sql.size();
  sql += text;
  for (int attempt = 0;; ++attempt) {
    tx.exec("SAVEPOINT partq_kind_check");
    // The extended protocol: one statement, whatever the text holds after it.
    PgResultPtr r(PQexecParams(c, sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0), PQclear);
    if (r != nullptr && PQresultStatus(r.get()) == PGRES_COMMAND_OK) {
      tx.exec("DEALLOCATE partq_kind_check");
      tx.exec("RELEASE SAVEPOINT partq_kind_check");
      return true;
    }
    if (r == nullptr || PQstatus(c) != CONNECTION_OK) ThrowFailure(c, r.get(), sql);
    const char* state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
    const char* position = PQresultErrorField(r.get(), PG_DIAG_STATEMENT_POSITION);
    tx.exec("ROLLBACK TO SAVEPOINT partq_kind_check");
    tx.exec("RELEASE SAVEPOINT partq_kind_check");
    // A PREPARE outlives a rollback: one left on a pooled server connection is dropped, once.
    if (state != nullptr && absl::string_view(state) == "42P05" && attempt == 0) {
      tx.exec("DEALLOCATE partq_kind_check");
      continue;
    }
    size_t chars = 0;  // 1-based, in characters
    if (state == nullptr || absl::string_view(state) != "42601" || position == nullptr ||
        !absl::SimpleAtoi(position, &chars) || chars == 0) {
      return false;
    }
    size_t at = 0;  // the byte where character `chars` begins
    for (size_t seen = 0; at < sql.size(); ++at) {
      if ((static_cast<unsigned char>(sql[at]) & 0xC0) != 0x80 && ++seen == chars) break;
    }
    if (at < start) return false;
    size_t end = at;
    while (end < sql.size() && (absl::ascii_isalnum(sql[end]) || sql[end] == '_')) ++end;
    return absl::EqualsIgnoreCase(absl::string_view(sql).substr(at, end - at), "call");
  }
}

// The Tx a FinishBody sees: the Finish transaction itself. PostgreSQL aborts
// the whole transaction when a statement fails, until a ROLLBACK TO SAVEPOINT
// (which handlers may use to isolate items); only those succeed then. So the
// last failure is remembered and any later success clears it, and Finish
// knows whether the transaction can still commit.
class PgTx final : public Tx {
 public:
  PgTx(pqxx::transaction_base& tx, PgConnection& conn, HandlerStatements& statements,
       const std::map<std::string, std::string, std::less<>>& unprepared, const PgOptions& options,
       bool puts)
      : tx_(tx),
        conn_(conn),
        statements_(statements),
        unprepared_(unprepared),
        options_(options),
        schema_(options.schema),
        puts_(puts) {}

  absl::StatusOr<std::vector<Row>> Exec(
      absl::string_view sql, const std::vector<std::optional<std::string>>& params) override {
    if (const HandlerStatements::Described* d =
            statements_.FindDescribed(conn_.generation(), sql)) {
      return ExecDescribed(*d, sql, params);
    }
    try {
      const std::optional<std::string> name = statements_.NameFor(conn_, sql);
      pqxx::result r =
          name ? tx_.exec_prepared(*name, pqxx::prepare::make_dynamic_params(params))
               : tx_.exec_params(std::string(sql), pqxx::prepare::make_dynamic_params(params));
      std::vector<Row> rows;
      rows.reserve(r.size());
      for (const pqxx::row& row : r) {
        Row out;
        out.reserve(row.size());
        for (const pqxx::field& f : row) out.push_back(Text(f));
        rows.push_back(std::move(out));
      }
      error_ = PgError{};
      return rows;
    } catch (...) {
      return Failed();
    }
  }
  absl::Status ExecScript(absl::string_view sql) override {
    try {
      tx_.exec(std::string(sql));
      error_ = PgError{};
      return absl::OkStatus();
    } catch (...) {
      return Failed();
    }
  }
  absl::StatusOr<PreparedStatement> Prepare(
      absl::string_view sql, const std::vector<std::string>& fallback_types) override;
  absl::Status Savepoint(absl::string_view name) override { return Utility("SAVEPOINT ", name); }
  absl::Status ReleaseSavepoint(absl::string_view name) override {
    return Utility("RELEASE SAVEPOINT ", name);
  }
  absl::Status RollbackToSavepoint(absl::string_view name) override {
    return Utility("ROLLBACK TO SAVEPOINT ", name);
  }
  absl::Status RenewSavepoint(absl::string_view name) override {
    if (absl::Status st = CheckSavepointName(name); !st.ok()) return st;
    return ExecScript(absl::StrCat("RELEASE SAVEPOINT ", name, "; SAVEPOINT ", name));
  }
  absl::StatusOr<EnqueueResult> Enqueue(absl::string_view queue, const NewItem& item) override {
    if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
    absl::StatusOr<EnqueueArgs> args = CheckNewItem(item, options_.max_payload_bytes);
    if (!args.ok()) return args.status();
    try {
      auto r = EnqueueIn(tx_, !options_.transaction_pooler, puts_, schema_, queue, item, *args);
      error_ = PgError{};
      return r;
    } catch (...) {
      return Failed();
    }
  }
  absl::Status Publish(const OutboxEvent& event) override {
    if (absl::Status st = ValidateTopicName(event.topic); !st.ok()) return st;
    std::optional<std::string> key;
    if (event.key) key = absl::BytesToHexString(*event.key);
    try {
      ExecStatement(tx_, unprepared_, "write_outbox", event.topic, key,
                    absl::BytesToHexString(event.payload), event.headers_json);
      error_ = PgError{};
      return absl::OkStatus();
    } catch (...) {
      return Failed();
    }
  }
  pqxx::transaction_base* pqxx() override { return &tx_; }
  const std::string& schema() const override { return schema_; }

  // The failure that leaves the transaction aborted (OK if none does).
  const PgError& error() const { return error_; }

 private:
  static absl::Status CheckSavepointName(absl::string_view name) {
    // Savepoint names are partq's own identifiers, never user input; a name
    // outside [a-z_][a-z0-9_]* is a bug in the caller.
    const bool ok = !name.empty() && !absl::ascii_isdigit(name[0]) &&
                    std::all_of(name.begin(), name.end(), [](char c) {
                      return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_';
                    });
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad savepoint name \"", name, "\""));
    return absl::OkStatus();
  }
  absl::Status Utility(absl::string_view verb, absl::string_view name) {
    if (absl::Status st = CheckSavepointName(name); !st.ok()) return st;
    return ExecScript(absl::StrCat(verb, name));
  }

  absl::StatusOr<std::vector<Row>> ExecDescribed(
      const HandlerStatements::Described& d, absl::string_view sql,
      const std::vector<std::optional<std::string>>& params);

  // In a catch block: remembers the statement's failure, and a lost
  // connection for good.
  absl::Status Failed() {
    const bool dropped = error_.drop_connection;
    error_ = ClassifyException(std::current_exception(), "handler statement", "");
    error_.drop_connection = error_.drop_connection || dropped;
    return error_.status;
  }

  pqxx::transaction_base& tx_;
  PgConnection& conn_;
  HandlerStatements& statements_;
  const std::map<std::string, std::string, std::less<>>& unprepared_;  // PgStore's
  const PgOptions& options_;
  const std::string& schema_;
  const bool puts_;  // PgStore::confined_: enqueues go through put_items()
  PgError error_;
};

absl::StatusOr<PreparedStatement> PgTx::Prepare(absl::string_view sql,
                                                const std::vector<std::string>& fallback_types) {
  if (const HandlerStatements::Described* d = statements_.FindDescribed(conn_.generation(), sql)) {
    return d->info;
  }
  const std::optional<std::string> name = statements_.NewDescribedName();
  if (!name) {
    return absl::ResourceExhaustedError(absl::StrCat("more than ", HandlerStatements::kMaxEntries,
                                                     " statements prepared on one connection"));
  }
  const std::string text(sql);
  // Not named() (a transaction pooler): described through the unnamed
  // statement, within this transaction, so on one server connection; run by
  // its text and the parameter types found here (ExecDescribed).
  const std::string prepare_as = statements_.named() ? *name : "";
  try {
    // A Parse that fails aborts the transaction; this savepoint keeps it
    // usable, both for the retries below and for the caller.
    tx_.exec("SAVEPOINT partq_prepare");
    PGconn* c = conn_.raw();
    // PostgreSQL infers each parameter's type from where the statement uses
    // it, and refuses one it cannot type ("could not determine data type of
    // parameter $N": 42P08 where it is used, as in `$2 IS NULL`; 42P18 for
    // one not used at all): that one is then declared its fallback type and
    // the Parse tried again, one parameter at a time.
    std::vector<Oid> types;
    std::optional<std::vector<Oid>> fallbacks;
    for (;;) {
      PgResultPtr r(PQprepare(c, prepare_as.c_str(), text.c_str(), static_cast<int>(types.size()),
                              types.empty() ? nullptr : types.data()),
                    PQclear);
      if (r != nullptr && PQresultStatus(r.get()) == PGRES_COMMAND_OK) break;
      if (r == nullptr || PQstatus(c) != CONNECTION_OK) ThrowFailure(c, r.get(), text);
      const char* state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
      const bool untyped = state != nullptr && (absl::string_view(state) == "42P18" ||
                                                absl::string_view(state) == "42P08");
      const int n =
          untyped ? ParameterNumber(PQresultErrorField(r.get(), PG_DIAG_MESSAGE_PRIMARY)) : 0;
      tx_.exec("ROLLBACK TO SAVEPOINT partq_prepare");
      if (n < 1 || n > 1000 || (static_cast<size_t>(n) <= types.size() && types[n - 1] != 0)) {
        tx_.exec("RELEASE SAVEPOINT partq_prepare");
        error_ = PgError{};
        return ClassifyException(
                   std::make_exception_ptr(pqxx::sql_error(ServerMessage(c, r.get()), text,
                                                           state != nullptr ? state : "")),
                   "", "")
            .status;
      }
      if (!fallbacks) {
        fallbacks.emplace();
        for (const pqxx::row& row :
             tx_.exec_params("SELECT coalesce(to_regtype(t)::oid, 'text'::regtype::oid) "
                             "FROM unnest($1::text[]) WITH ORDINALITY AS f(t, n) ORDER BY n",
                             TextArray(std::vector<std::optional<std::string>>(
                                 fallback_types.begin(), fallback_types.end())))) {
          fallbacks->push_back(row[0].as<Oid>());
        }
      }
      types.resize(std::max(types.size(), static_cast<size_t>(n)), 0);
      types[n - 1] =
          static_cast<size_t>(n) <= fallbacks->size() ? (*fallbacks)[n - 1] : 25;  // text
    }
    PgResultPtr described(PQdescribePrepared(c, prepare_as.c_str()), PQclear);
    if (described == nullptr || PQresultStatus(described.get()) != PGRES_COMMAND_OK) {
      ThrowFailure(c, described.get(), text);
    }
    std::vector<int64_t> oids;
    std::vector<uint32_t> param_oids;
    const int params = PQnparams(described.get());
    for (int i = 0; i < params; ++i) {
      oids.push_back(PQparamtype(described.get(), i));
      param_oids.push_back(PQparamtype(described.get(), i));
    }
    const int columns = PQnfields(described.get());
    for (int i = 0; i < columns; ++i) oids.push_back(PQftype(described.get(), i));
    // Names, not oids, for the handler: a domain by its base type (binding
    // and decoding go by the base type's text form).
    PreparedStatement info;
    const pqxx::result names = tx_.exec_params(R"sql(
SELECT format_type(CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END, NULL)
FROM unnest($1::oid[]) WITH ORDINALITY AS u(o, n) JOIN pg_type t ON t.oid = u.o
ORDER BY u.n)sql",
                                               IntArray(oids));
    for (int i = 0; i < static_cast<int>(names.size()); ++i) {
      (i < params ? info.param_types : info.column_types).push_back(names[i][0].as<std::string>());
    }
    info.keeps_transaction = KeepsTransaction(tx_, c, text, info.param_types);
    tx_.exec("RELEASE SAVEPOINT partq_prepare");
    error_ = PgError{};
    statements_.AddDescribed(text, {prepare_as, conn_.generation(), info, std::move(param_oids)});
    return info;
  } catch (...) {
    return Failed();
  }
}

absl::StatusOr<std::vector<Row>> PgTx::ExecDescribed(
    const HandlerStatements::Described& d, absl::string_view sql,
    const std::vector<std::optional<std::string>>& params) {
  if (params.size() != d.info.param_types.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the statement takes ", d.info.param_types.size(), " parameters; given ", params.size()));
  }
  try {
    PGconn* c = conn_.raw();
    if (c == nullptr) throw pqxx::broken_connection("no connection");
    // Text format: libpq reads each as a C string, so the caller must not
    // pass NUL bytes (a bytea goes as its "\x..." text form).
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    const std::string text = d.name.empty() ? std::string(sql) : std::string();
    PgResultPtr r(d.name.empty()
                      ? PQexecParams(c, text.c_str(), static_cast<int>(values.size()),
                                     d.param_oids.data(), values.data(), nullptr, nullptr, 0)
                      : PQexecPrepared(c, d.name.c_str(), static_cast<int>(values.size()),
                                       values.data(), nullptr, nullptr, 0),
                  PQclear);
    const ExecStatusType status = r != nullptr ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) ThrowFailure(c, r.get(), sql);
    if (PQtransactionStatus(c) == PQTRANS_IDLE) {
      // The statement ended the transaction it was to run in (a COMMIT):
      // whatever it wrote committed without the ack. Nothing more may run
      // on this connection as if the transaction were still open.
      error_.drop_connection = true;
      error_.status = absl::InternalError(
          "handler statement: it ended the ack transaction; a handler must not commit it");
      return error_.status;
    }
    std::vector<Row> rows(PQntuples(r.get()));
    const int columns = PQnfields(r.get());
    for (size_t i = 0; i < rows.size(); ++i) {
      rows[i].reserve(columns);
      for (int k = 0; k < columns; ++k) {
        if (PQgetisnull(r.get(), static_cast<int>(i), k)) {
          rows[i].push_back(std::nullopt);
        } else {
          rows[i].push_back(std::string(PQgetvalue(r.get(), static_cast<int>(i), k),
                                        PQgetlength(r.get(), static_cast<int>(i), k)));
        }
      }
    }
    error_ = PgError{};
    return rows;
  } catch (...) {
    return Failed();
  }
}

}  // namespace

const HandlerStatements::Described* HandlerStatements::FindDescribed(uint64_t generation,
                                                                     absl::string_view sql) const {
  auto it = described_.find(sql);
  if (it == described_.end() || it->second.generation != generation) return nullptr;
  return &it->second;
}

std::optional<std::string> HandlerStatements::NewDescribedName() {
  if (described_.size() >= kMaxEntries) return std::nullopt;
  return absl::StrCat("partq_prepared_", described_names_++);
}

void HandlerStatements::AddDescribed(std::string sql, Described described) {
  described_.insert_or_assign(std::move(sql), std::move(described));
}

std::optional<std::string> HandlerStatements::NameFor(pqxx::connection_base& conn,
                                                      absl::string_view sql) {
  auto it = names_.find(sql);
  if (it != names_.end()) return it->second;
  absl::string_view head = absl::StripLeadingAsciiWhitespace(sql);
  const bool dml =
      std::any_of(std::begin(kCachedVerbs), std::end(kCachedVerbs),
                  [&](absl::string_view verb) { return absl::StartsWithIgnoreCase(head, verb); });
  // Not named(): every statement goes as it comes, unnamed.
  if (!named_ || !dml || names_.size() >= kMaxEntries) return std::nullopt;
  std::string name = absl::StrCat("partq_handler_", names_.size());
  // Registers the definition; libpqxx sends the Parse on first use.
  conn.prepare(name, std::string(sql));
  names_.emplace(std::string(sql), name);
  return name;
}

// --- enqueue ------------------------------------------------------------------------

absl::StatusOr<EnqueueArgs> CheckNewItem(const NewItem& item, int64_t max_payload_bytes) {
  if (absl::Status st = ValidateNewItem(item, max_payload_bytes); !st.ok()) return st;
  EnqueueArgs args;
  if (item.key) {
    args.key = item.key;
    args.key_hash = KeyHash(*item.key);
  }
  args.dedup_key = item.dedup_key;
  args.priority = item.priority;
  // A negative delay means "now"; the database clock decides what now is.
  args.delay_us = std::max<int64_t>(0, Micros(item.delay));
  return args;
}

namespace {

// One try of EnqueueIn for a worker role: put_item.sql makes the item as
// enqueue.sql does and returns a live duplicate's id itself (the role may
// not see a queue it only produces to); nullopt for a duplicate that
// finished before it was found.
std::optional<EnqueueResult> PutItemOnce(pqxx::transaction_base& tx, bool prepared,
                                         const std::string& schema, const std::string& q,
                                         const pqxx::binarystring& payload,
                                         const std::string& channel, const NewItem& item,
                                         const EnqueueArgs& args) {
  pqxx::result r = prepared
                       ? tx.exec_prepared("put_item", q, args.key, args.dedup_key, args.priority,
                                          args.delay_us, payload, channel, item.group)
                       : tx.exec_params(PutItemSql(schema), q, args.key, args.dedup_key,
                                        args.priority, args.delay_us, payload, channel, item.group);
  if (r[0][0].is_null()) return std::nullopt;
  return EnqueueResult{r[0][0].as<int64_t>(), r[0][1].as<int>(), r[0][2].as<bool>()};
}

}  // namespace

absl::StatusOr<EnqueueResult> EnqueueIn(pqxx::transaction_base& tx, bool prepared, bool puts,
                                        const std::string& schema, absl::string_view queue,
                                        const NewItem& item, const EnqueueArgs& args) {
  const std::string q(queue);
  const pqxx::binarystring payload(item.payload.data(), item.payload.size());
  if (item.group && !puts) {
    pqxx::result r = tx.exec_params(EnqueueGroupedSql(schema), q, payload, args.key, args.dedup_key,
                                    args.priority, *item.group);
    return EnqueueResult{r[0][0].as<int64_t>(), r[0][1].as<int>(), r[0][2].as<bool>()};
  }
  const std::string channel = ChannelFor(schema, queue);
  // A dedup hit whose live item is acked before we look it up: insert again
  // (once; a second miss is a real race worth reporting).
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (puts) {
      if (std::optional<EnqueueResult> r =
              PutItemOnce(tx, prepared, schema, q, payload, channel, item, args)) {
        return *r;
      }
      continue;
    }
    pqxx::result r =
        prepared ? tx.exec_prepared("enqueue", q, args.key_hash, args.key, args.dedup_key,
                                    args.priority, args.delay_us, payload, channel)
                 : tx.exec_params(EnqueueSql(schema), q, args.key_hash, args.key, args.dedup_key,
                                  args.priority, args.delay_us, payload, channel);
    if (r.empty()) return UnknownQueue(queue, schema);
    if (!r[0][1].is_null()) {
      return EnqueueResult{r[0][1].as<int64_t>(), r[0][2].as<int>(), false};
    }
    pqxx::result dup = prepared ? tx.exec_prepared("dedup_lookup", q, args.dedup_key)
                                : tx.exec_params(WithSchema("SELECT id, part FROM {schema}.items "
                                                            "WHERE queue = $1 AND dedup_key = $2",
                                                            schema),
                                                 q, args.dedup_key);
    if (!dup.empty()) return EnqueueResult{dup[0][0].as<int64_t>(), dup[0][1].as<int>(), true};
  }
  return absl::AbortedError(absl::StrCat("enqueue into \"", queue, "\": dedup key \"",
                                         *args.dedup_key,
                                         "\" is being finished concurrently; retry"));
}

absl::StatusOr<EnqueueResult> PgStore::Enqueue(absl::string_view queue, const NewItem& item) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  absl::StatusOr<EnqueueArgs> args = CheckNewItem(item, options_.max_payload_bytes);
  if (!args.ok()) return args.status();
  bool sent = false;
  absl::StatusOr<EnqueueResult> r = Run(absl::StrCat("enqueue into \"", queue, "\""), [&]() {
    // Autocommit: the statement is its own transaction (one round trip; three
    // through a transaction pooler, Autocommit says why).
    pqxx::transaction_base& tx = Autocommit();
    sent = true;
    return EnqueueIn(tx, !options_.transaction_pooler, confined_, options_.schema, queue, item,
                     *args);
  });
  // An autocommit INSERT commits as it runs: a connection that broke while the
  // server ran it leaves the item there or not (through a pooler the explicit
  // COMMIT says so itself: in_doubt_error).
  if (!r.ok() && sent && !options_.transaction_pooler && absl::IsUnavailable(r.status()) &&
      !OutcomeUnknown(r.status())) {
    return MarkOutcomeUnknown(r.status());
  }
  return r;
}

absl::StatusOr<int64_t> PgStore::EnqueueBatch(absl::string_view queue,
                                              const std::vector<NewItem>& items) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  if (items.empty()) return 0;
  if (items.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError("batch is too large");
  }
  std::vector<EnqueueArgs> args;
  args.reserve(items.size());
  bool dedup = false;
  for (size_t i = 0; i < items.size(); ++i) {
    absl::StatusOr<EnqueueArgs> a = CheckNewItem(items[i], options_.max_payload_bytes);
    if (!a.ok()) {
      return absl::Status(a.status().code(),
                          absl::StrCat("item ", i, " of the batch: ", a.status().message()));
    }
    dedup = dedup || a->dedup_key.has_value() || items[i].group.has_value();
    args.push_back(*std::move(a));
  }
  if (confined_) return EnqueueBatchPut(queue, items, args);
  // COPY cannot skip dedup conflicts nor hold groups, so batches with dedup
  // keys or groups insert.
  return dedup ? EnqueueBatchInsert(queue, items, args) : EnqueueBatchCopy(queue, items, args);
}

namespace {

// Reserves `n` item ids in `tx`, the transaction's first statements; returns
// the queue's part count (0 when the queue is unknown), the ids and the
// transaction's now(). Takes the enqueue lock on items first (pg_store_sql.cc,
// lock_items_for_enqueue), so the queue cannot be deleted before the items
// are written.
struct Reservation {
  int parts = 0;
  std::vector<int64_t> ids;
  absl::Time now;
};
Reservation ReserveIds(pqxx::transaction_base& tx,
                       const std::map<std::string, std::string, std::less<>>& unprepared,
                       const std::string& queue, size_t n) {
  Reservation out;
  ExecStatement(tx, unprepared, "lock_items_for_enqueue");
  pqxx::result r = ExecStatement(tx, unprepared, "reserve_ids", queue, static_cast<int64_t>(n));
  if (r[0][0].is_null()) return out;
  out.parts = r[0][0].as<int>();
  out.now = absl::FromUnixMicros(r[0][4].as<int64_t>());
  const int64_t lo = r[0][1].as<int64_t>();
  const int64_t hi = r[0][2].as<int64_t>();
  const int64_t count = r[0][3].as<int64_t>();
  out.ids.reserve(n);
  if (count == static_cast<int64_t>(n) && hi - lo + 1 == count) {
    for (int64_t id = lo; id <= hi; ++id) out.ids.push_back(id);
  } else {
    // Someone else's nextval interleaved with ours: ask for an explicit list
    // (the first n values become a gap, which sequences have anyway).
    for (const pqxx::row& row :
         ExecStatement(tx, unprepared, "reserve_id_list", static_cast<int64_t>(n))) {
      out.ids.push_back(row[0].as<int64_t>());
    }
  }
  return out;
}

// The lowest key added to each part: what the enqueue notices carry.
using LowestKeys = absl::flat_hash_map<int, ItemKey>;
void AddKey(LowestKeys& lowest, int part, ItemKey key) {
  auto [it, fresh] = lowest.try_emplace(part, key);
  if (!fresh && key < it->second) it->second = key;
}

// The enqueue notices of a transaction: one per part with the lowest key it
// added there, so an owner reads from below that key rather than from the
// part's head (Notice::from); too many parts, one notice with the lowest key
// of all for every part.
void NotifyParts(pqxx::transaction_base& tx,
                 const std::map<std::string, std::string, std::less<>>& unprepared,
                 const std::string& channel, const LowestKeys& lowest) {
  if (lowest.empty()) return;
  if (lowest.size() > kMaxPartNotices) {
    ItemKey low = lowest.begin()->second;
    for (const auto& [part, key] : lowest) low = std::min(low, key);
    ExecStatement(tx, unprepared, "notify", channel,
                  absl::StrCat("i:-1:", low.priority, ":", low.id));
    return;
  }
  std::vector<std::pair<int, ItemKey>> list(lowest.begin(), lowest.end());
  std::sort(list.begin(), list.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<int> parts, prios;
  std::vector<int64_t> ids;
  for (const auto& [part, key] : list) {
    parts.push_back(part);
    prios.push_back(key.priority);
    ids.push_back(key.id);
  }
  ExecStatement(tx, unprepared, "notify_parts", channel, IntArray(parts), IntArray(prios),
                IntArray(ids));
}

}  // namespace

absl::StatusOr<int64_t> PgStore::CopyItems(pqxx::transaction_base& tx, absl::string_view queue,
                                           const std::vector<CopyRow>& rows) {
  const std::string q(queue);
  Reservation res = ReserveIds(tx, unprepared_, q, rows.size());
  if (res.parts == 0) return UnknownQueue(queue, options_.schema);
  bool delayed = false, origin = false;
  for (const CopyRow& r : rows) {
    delayed = delayed || r.delay_us > 0;
    origin = origin || r.origin != nullptr;
  }
  // Rows go grouped by part (in id order within a part): a claim then
  // reads, and its ack deletes, rows that sit side by side on a few pages
  // instead of one row on each of many, and the index inserts of a part
  // come together.
  std::vector<int> row_parts(rows.size());
  std::vector<size_t> order(rows.size());
  LowestKeys parts;
  for (size_t i = 0; i < rows.size(); ++i) {
    row_parts[i] = rows[i].part_key ? PartForKey(*rows[i].part_key, res.parts)
                                    : PartForId(res.ids[i], res.parts);
    AddKey(parts, row_parts[i], ItemKey{rows[i].priority, res.ids[i]});
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return row_parts[a] < row_parts[b]; });
  // The optional columns are sent only when some row has them: a COPY
  // without run_at leaves the column's default, now().
  std::vector<std::string> cols = {"id", "queue", "part", "key", "priority", "payload"};
  if (delayed) cols.push_back("run_at");
  if (origin) {
    for (const char* c : {"origin_topic", "origin_partition", "origin_offset", "headers"}) {
      cols.push_back(c);
    }
  }
  {
    pqxx::stream_to copy(tx, qschema_ + ".items", cols);
    for (size_t i : order) {
      const CopyRow& r = rows[i];
      auto base =
          std::make_tuple(res.ids[i], q, row_parts[i], r.key, r.priority, ByteaLiteral(r.payload));
      // The database clock: the transaction's now() plus the delay.
      auto run_at = [&] {
        return std::make_tuple(TimestampText(res.now + absl::Microseconds(r.delay_us)));
      };
      auto from = [&] {
        if (r.origin == nullptr) {
          return std::make_tuple(std::optional<std::string>(), std::optional<int32_t>(),
                                 std::optional<int64_t>(), std::optional<std::string>());
        }
        return std::make_tuple(std::optional<std::string>(r.origin->topic),
                               std::optional<int32_t>(r.origin->partition),
                               std::optional<int64_t>(r.origin->offset), r.origin->headers_json);
      };
      if (delayed && origin) {
        copy << std::tuple_cat(base, run_at(), from());
      } else if (delayed) {
        copy << std::tuple_cat(base, run_at());
      } else if (origin) {
        copy << std::tuple_cat(base, from());
      } else {
        copy << base;
      }
    }
    copy.complete();
  }
  NotifyParts(tx, unprepared_, ChannelFor(options_.schema, queue), parts);
  return static_cast<int64_t>(rows.size());
}

absl::StatusOr<int64_t> PgStore::EnqueueBatchCopy(absl::string_view queue,
                                                  const std::vector<NewItem>& items,
                                                  const std::vector<EnqueueArgs>& args) {
  return Run(absl::StrCat("enqueue batch into \"", queue, "\""), [&]() -> absl::StatusOr<int64_t> {
    std::vector<CopyRow> rows(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      rows[i].key = args[i].key;
      rows[i].part_key = args[i].key;
      rows[i].priority = args[i].priority;
      rows[i].payload = items[i].payload;
      rows[i].delay_us = args[i].delay_us;
    }
    PgWork<> tx(*conn_, options_.transaction_pooler);
    absl::StatusOr<int64_t> n = CopyItems(tx, queue, rows);
    if (n.ok()) tx.commit();
    return n;
  });
}

absl::StatusOr<int64_t> PgStore::EnqueueBatchInsert(absl::string_view queue,
                                                    const std::vector<NewItem>& items,
                                                    const std::vector<EnqueueArgs>& args) {
  return Run(absl::StrCat("enqueue batch into \"", queue, "\""), [&]() -> absl::StatusOr<int64_t> {
    const std::string q(queue);
    PgWork<> tx(*conn_, options_.transaction_pooler);
    Reservation res = ReserveIds(tx, unprepared_, q, items.size());
    if (res.parts == 0) return UnknownQueue(queue, options_.schema);
    // The batch's groups, each held until commit; started or not.
    absl::flat_hash_map<std::string, bool> started;
    for (const NewItem& item : items) {
      if (item.group) started.emplace(*item.group, false);
    }
    if (!started.empty()) {
      std::vector<std::optional<std::string>> names;
      for (const auto& [name, unused] : started) names.push_back(name);
      for (const pqxx::row& row : Exec(tx, "hold_groups", q, TextArray(names))) {
        started[row[0].as<std::string>()] = row[1].as<bool>();
      }
    }
    LowestKeys parts;
    int64_t written = 0;
    for (size_t begin = 0; begin < items.size(); begin += kInsertChunk) {
      const size_t end = std::min(items.size(), begin + kInsertChunk);
      std::vector<int64_t> ids, delays;
      std::vector<int> ps, prios;
      std::vector<std::optional<std::string>> keys, dedups, payloads, groups;
      std::vector<bool> held;
      for (size_t i = begin; i < end; ++i) {
        const int part =
            args[i].key ? PartForKey(*args[i].key, res.parts) : PartForId(res.ids[i], res.parts);
        const bool waits = items[i].group && !started.at(*items[i].group);
        // A held item wakes nobody: group_start sends its notice.
        if (!waits) AddKey(parts, part, ItemKey{args[i].priority, res.ids[i]});
        groups.push_back(items[i].group);
        held.push_back(waits);
        ids.push_back(res.ids[i]);
        ps.push_back(part);
        keys.push_back(args[i].key);
        dedups.push_back(args[i].dedup_key);
        prios.push_back(args[i].priority);
        delays.push_back(args[i].delay_us);
        payloads.push_back(absl::BytesToHexString(items[i].payload));
      }
      pqxx::result r =
          started.empty()
              ? Exec(tx, "insert_batch", q, IntArray(ids), IntArray(ps), TextArray(keys),
                     TextArray(dedups), IntArray(prios), IntArray(delays), TextArray(payloads))
              : Exec(tx, "insert_batch_grouped", q, IntArray(ids), IntArray(ps), TextArray(keys),
                     TextArray(dedups), IntArray(prios), IntArray(delays), TextArray(payloads),
                     TextArray(groups), BoolArray(held));
      written += r[0][0].as<int64_t>();
    }
    NotifyParts(tx, unprepared_, ChannelFor(options_.schema, queue), parts);
    tx.commit();
    return written;
  });
}

absl::StatusOr<int64_t> PgStore::EnqueueBatchPut(absl::string_view queue,
                                                 const std::vector<NewItem>& items,
                                                 const std::vector<EnqueueArgs>& args) {
  return Run(absl::StrCat("enqueue batch into \"", queue, "\""), [&]() -> absl::StatusOr<int64_t> {
    const std::string q(queue);
    PgWork<> tx(*conn_, options_.transaction_pooler);
    LowestKeys parts;
    int64_t written = 0;
    for (size_t begin = 0; begin < items.size(); begin += kInsertChunk) {
      const size_t end = std::min(items.size(), begin + kInsertChunk);
      std::vector<int64_t> delays;
      std::vector<int> prios;
      std::vector<std::optional<std::string>> keys, dedups, payloads, groups;
      for (size_t i = begin; i < end; ++i) {
        keys.push_back(args[i].key);
        dedups.push_back(args[i].dedup_key);
        prios.push_back(args[i].priority);
        delays.push_back(args[i].delay_us);
        payloads.push_back(absl::BytesToHexString(items[i].payload));
        groups.push_back(items[i].group);
      }
      // One row per item, in order: id, part, duplicate, waits.
      const pqxx::result r =
          Exec(tx, "put_items", q, TextArray(keys), TextArray(dedups), IntArray(prios),
               IntArray(delays), TextArray(payloads), TextArray(groups));
      for (size_t j = 0; j < r.size(); ++j) {
        if (r[j][2].as<bool>()) continue;
        ++written;
        // A held item wakes nobody: group_start sends its notice.
        if (!r[j][3].as<bool>()) {
          AddKey(parts, r[j][1].as<int>(),
                 ItemKey{args[begin + j].priority, r[j][0].as<int64_t>()});
        }
      }
    }
    NotifyParts(tx, unprepared_, ChannelFor(options_.schema, queue), parts);
    tx.commit();
    return written;
  });
}

// --- claim --------------------------------------------------------------------------

namespace {

// A claim's parameters, encoded and bound in the order ClaimCtes
// (pg_store_sql.cc) reads them, after $1 queue and $2 session.
struct ClaimArgs {
  std::optional<std::string> session;
  std::string parts, epochs, after_prio, after_id, limits;
  int key_bound = 0;  // KeyBound (store.h)
  bool suspect = false;
  std::string fly_parts, fly_ids;
  int limit = 0;
  std::string cursor_prio, cursor_id, records, behind, above;
  std::string key_after;
  int64_t max_bytes = 0;  // ClaimRequest::max_bytes (0: none, and the unbounded statements)
  bool fair = false;
  // ClaimPart::key_cursors of every part, flattened (the fair form's only).
  std::string key_cursor_parts, key_cursor_keys, key_cursor_ids;
  // ClaimPart::key_floors of every part (fragments/key_floor.sql; the keyed
  // form's only).
  std::string key_floors;
};

// A claiming statement's parameters from ClaimArgs, in text, for the
// pipeline (RunGuarded), in the order ClaimCtes (pg_store_sql.cc) numbers
// them: `c`'s, appended to `params`. The fair and keyed forms take the key
// cursors, the keyed one the key floors too.
void AppendClaimParams(const ClaimArgs& c, std::vector<std::optional<std::string>>* params) {
  for (const std::string* p : {&c.parts, &c.epochs, &c.after_prio, &c.after_id, &c.limits}) {
    params->push_back(*p);
  }
  params->push_back(absl::StrCat(c.key_bound));
  params->push_back(c.suspect ? "true" : "false");
  params->push_back(c.fly_parts);
  params->push_back(c.fly_ids);
  params->push_back(absl::StrCat(c.limit));
  for (const std::string* p :
       {&c.cursor_prio, &c.cursor_id, &c.records, &c.behind, &c.key_after, &c.above}) {
    params->push_back(*p);
  }
  if (c.max_bytes > 0) params->push_back(absl::StrCat(c.max_bytes));
  if (c.fair || c.key_bound != 0) {
    for (const std::string* p : {&c.key_cursor_parts, &c.key_cursor_keys, &c.key_cursor_ids}) {
      params->push_back(*p);
    }
  }
  if (!c.fair && c.key_bound != 0) params->push_back(c.key_floors);
}

// Of a claiming statement's three forms, the one for `c`: fair, with a key
// bound (ordered, key concurrency), or neither.
const char* ClaimStatementName(const ClaimArgs& c, const char* plain, const char* fair,
                               const char* keyed) {
  return c.fair ? fair : c.key_bound != 0 ? keyed : plain;
}

// The plan guard a claiming statement for `c` runs after: the keyed forms'
// also keeps sorts out where an index gives the order (pg/sql/plan_guard_keyed.sql).
const char* GuardFor(const ClaimArgs& c) {
  return !c.fair && c.key_bound != 0 ? kPlanGuardKeyed : kPlanGuard;
}

// The cursor sentinel: sorts before every item, so the scan starts at the
// part's head (see ClaimCtes).
constexpr int kHeadPriority = -32768;
constexpr int64_t kHeadId = INT64_MIN;
// A cursor past every item: with no cursor, every item read may be in flight.
constexpr int kLastPriority = 32767;
constexpr int64_t kLastId = INT64_MAX;

// A claim's limits, per part and in all, are 1..kMaxClaim.
absl::Status CheckClaimLimits(const ClaimRequest& request) {
  for (const ClaimPart& p : request.parts) {
    if (p.limit < 1 || p.limit > kMaxClaim) {
      return absl::InvalidArgumentError(
          absl::StrCat("claim: part ", p.part, " limit ", p.limit, " is not 1..", kMaxClaim));
    }
  }
  if (request.limit < 1 || request.limit > kMaxClaim) {
    return absl::InvalidArgumentError(
        absl::StrCat("claim: limit ", request.limit, " is not 1..", kMaxClaim));
  }
  return absl::OkStatus();
}

// The form of claiming statement `name` for `request`: bounded by bytes or not.
const char* ClaimForm(const char* name, int64_t max_bytes) {
  return max_bytes > 0 ? BoundedName(name) : name;
}

// Only a session's claim looks for abandoned items (its own parts').
bool ProbesSuspects(const ClaimRequest& request) {
  return request.include_suspect && !request.session.value.empty();
}

// ClaimPart::key_floors and key_heads of `request`'s parts as
// fragments/key_floors.sql reads them: {"part": {"keys": {"key": id, ...},
// "heads": true}, ...}. A key that is not UTF-8 (jsonb's keys are) matches
// no item's key, and its items are probed all the way down, as without a
// floor.
std::string KeyFloorsJson(const ClaimRequest& request) {
  nlohmann::json floors = nlohmann::json::object();
  for (const ClaimPart& p : request.parts) {
    if (p.key_floors.empty() && !p.key_heads) continue;
    nlohmann::json& of = floors[absl::StrCat(p.part)];
    of["keys"] = nlohmann::json::object();
    for (const auto& [key, id] : p.key_floors) of["keys"][key] = id;
    if (p.key_heads) of["heads"] = true;
  }
  return floors.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::StatusOr<ClaimArgs> MakeClaimArgs(const ClaimRequest& request) {
  if (absl::Status st = CheckClaimLimits(request); !st.ok()) return st;
  ClaimArgs a;
  if (!request.session.value.empty()) a.session = request.session.value;
  std::vector<int> parts, prios, limits, cursor_prios;
  std::vector<int64_t> epochs, ids, cursor_ids, records;
  std::vector<bool> behind, above;
  std::vector<std::optional<std::string>> key_after, key_cursor_keys;
  std::vector<int> key_cursor_parts;
  std::vector<int64_t> key_cursor_ids;
  for (const ClaimPart& p : request.parts) {
    key_after.push_back(p.key_after);
    // A read of the keys' heads uses neither the look behind nor key_cursors.
    for (size_t k = 0; !p.key_heads && k < p.key_cursors.size(); ++k) {
      key_cursor_parts.push_back(p.part);
      key_cursor_keys.push_back(p.key_cursors[k].first);
      key_cursor_ids.push_back(p.key_cursors[k].second);
    }
    parts.push_back(p.part);
    epochs.push_back(p.epoch.value);
    prios.push_back(p.after ? p.after->priority : kHeadPriority);
    ids.push_back(p.after ? p.after->id : kHeadId);
    limits.push_back(p.limit);
    cursor_prios.push_back(p.cursor ? p.cursor->priority : kLastPriority);
    cursor_ids.push_back(p.cursor ? p.cursor->id : kLastId);
    records.push_back(p.record);
    behind.push_back(p.behind && !p.key_heads);
    above.push_back(p.above && !p.key_heads);
  }
  a.behind = BoolArray(behind);
  a.above = BoolArray(above);
  a.key_after = TextArray(key_after);
  a.max_bytes = std::max<int64_t>(0, request.max_bytes);
  a.fair = request.fair;
  a.key_cursor_parts = IntArray(key_cursor_parts);
  a.key_cursor_keys = TextArray(key_cursor_keys);
  a.key_cursor_ids = IntArray(key_cursor_ids);
  a.key_floors = KeyFloorsJson(request);
  a.cursor_prio = IntArray(cursor_prios);
  a.cursor_id = IntArray(cursor_ids);
  a.records = IntArray(records);
  a.parts = IntArray(parts);
  a.epochs = IntArray(epochs);
  a.after_prio = IntArray(prios);
  a.after_id = IntArray(ids);
  a.limits = IntArray(limits);
  a.key_bound = KeyBound(request);
  a.suspect = ProbesSuspects(request);
  std::vector<int> fly_parts;
  std::vector<int64_t> fly_ids;
  for (const auto& [part, id] : request.in_flight) {
    fly_parts.push_back(part);
    fly_ids.push_back(id);
  }
  a.fly_parts = IntArray(fly_parts);
  a.fly_ids = IntArray(fly_ids);
  a.limit = request.limit;
  return a;
}

// "(block,offset)" <-> block << 16 | offset.
uint64_t LocatorFromCtid(absl::string_view text) {
  uint64_t block = 0, offset = 0;
  if (!absl::ConsumePrefix(&text, "(") || !absl::ConsumeSuffix(&text, ")")) return 0;
  std::pair<absl::string_view, absl::string_view> bo = absl::StrSplit(text, ',');
  if (!absl::SimpleAtoi(bo.first, &block) || !absl::SimpleAtoi(bo.second, &offset) ||
      offset > 0xffff || block > 0xffffffffu) {
    return 0;
  }
  return block << 16 | offset;
}
std::optional<std::string> CtidFromLocator(uint64_t locator) {
  if (locator == 0) return std::nullopt;
  return absl::StrCat("(", locator >> 16, ",", locator & 0xffff, ")");
}
// The ctids of `locators` as a tid[] literal (NULL where not located).
std::string CtidArray(const std::vector<uint64_t>& locators) {
  std::vector<std::optional<std::string>> ctids;
  ctids.reserve(locators.size());
  for (uint64_t l : locators) ctids.push_back(CtidFromLocator(l));
  return TextArray(ctids);
}

// The text cells of one row: of a libpqxx result, or of a result the
// pipeline read (the claims it runs after kPlanGuard).
struct PqxxCells {
  const pqxx::row& row;
  bool null(int c) const { return row[c].is_null(); }
  absl::string_view get(int c) const { return absl::string_view(row[c].c_str(), row[c].size()); }
};
struct PipelineCells {
  const PipelineResult& result;
  int row;
  bool null(int c) const { return result.is_null(row, c); }
  absl::string_view get(int c) const { return result.get(row, c); }
};

template <typename Cells>
std::optional<std::string> TextCell(const Cells& row, int c) {
  if (row.null(c)) return std::nullopt;
  return std::string(row.get(c));
}

// A claimed item from its columns, starting at column `c`: id, part, key,
// dedup_key, priority, attempts, payload, enqueued (µs), run_at (µs), epoch,
// suspect, ctid, claim record (NULL: none written), group.
template <typename Cells>
absl::StatusOr<Item> ItemFromCells(const Cells& row, int c) {
  Item it;
  int64_t enqueued = 0, run = 0;
  const absl::string_view suspect = row.get(c + 10);
  if (row.null(c) || !absl::SimpleAtoi(row.get(c), &it.id) || row.null(c + 1) ||
      !absl::SimpleAtoi(row.get(c + 1), &it.part) || row.null(c + 4) ||
      !absl::SimpleAtoi(row.get(c + 4), &it.priority) || row.null(c + 5) ||
      !absl::SimpleAtoi(row.get(c + 5), &it.attempts) || row.null(c + 7) ||
      !absl::SimpleAtoi(row.get(c + 7), &enqueued) || row.null(c + 8) ||
      !absl::SimpleAtoi(row.get(c + 8), &run) || row.null(c + 9) ||
      !absl::SimpleAtoi(row.get(c + 9), &it.claim_epoch.value) ||
      (suspect != "t" && suspect != "f") ||
      (!row.null(c + 12) && !absl::SimpleAtoi(row.get(c + 12), &it.claim_record))) {
    return absl::InternalError("claim: malformed row");
  }
  it.key = TextCell(row, c + 2);
  it.dedup_key = TextCell(row, c + 3);
  if (!DecodeBytea(row.get(c + 6), &it.payload)) {
    return absl::InternalError(absl::StrCat("claim: item ", it.id, " has a malformed payload"));
  }
  it.enqueued_at = absl::FromUnixMicros(enqueued);
  it.run_at = absl::FromUnixMicros(run);
  it.suspect = suspect == "t";
  it.locator = LocatorFromCtid(row.get(c + 11));
  it.group = TextCell(row, c + 13);
  return it;
}

// A statement's failure in a flight, thrown as libpqxx throws it from exec
// (ClassifyException tells a retry from the rest by the exception's type).
[[noreturn]] void ThrowStepError(const PipelineResult& step, const char* what) {
  const std::string& state = step.sqlstate;
  if (state == "40001") throw pqxx::serialization_failure(step.message);
  if (state == "40P01") throw pqxx::deadlock_detected(step.message);
  throw pqxx::sql_error(step.message, what, state.c_str());
}

// Runs statement `name` (Pipeline::Define'd, its parameters and rows in
// text) after kPlanGuard in one flight: in the transaction under way, or in
// an implicit one that ends with the flight; with `chain`, in a transaction
// of its own that COMMIT AND CHAIN ends, leaving the next one begun. Its
// result; throws what Pipeline::Run throws, and a statement's error (or one
// skipped) as libpqxx would.
PipelineResult RunGuarded(Pipeline& pipeline, PgConnection& conn, const char* name,
                          std::vector<std::optional<std::string>> params, bool chain = false,
                          const char* guard = kPlanGuard) {
  std::vector<Pipeline::Step> steps = {{guard, {}}, {name, std::move(params)}};
  if (chain) {
    steps.insert(steps.begin(), {kPipelinedBegin, {}});
    steps.push_back({kPipelinedChain, {}});
  }
  std::vector<PipelineResult> res = pipeline.Run(conn, std::move(steps));
  for (const PipelineResult& step : res) {
    if (step.kind == PipelineResult::Kind::kError) ThrowStepError(step, name);
    if (step.kind != PipelineResult::Kind::kOk) {
      throw pqxx::sql_error("the statement was skipped", name);
    }
  }
  return std::move(res[chain ? 2 : 1]);
}

// Big-endian integers of PostgreSQL's binary format.
template <typename T>
bool FromBinary(absl::string_view cell, T* out) {
  if (cell.size() != sizeof(T)) return false;
  typename std::make_unsigned<T>::type v = 0;
  for (unsigned char b : cell) v = static_cast<decltype(v)>(v << 8 | b);
  *out = static_cast<T>(v);
  return true;
}

// A row of the pipelined claim (pg/sql/pipelined_ack_claim.sql) in binary:
// id int8, key text, dedup_key text, priority int2, attempts int4, payload
// bytea, enqueued_at and run_at timestamptz (µs since 2000-01-01), ctid tid
// (block uint32, offset uint16), claim record int8 (NULL: none written),
// group text. The claim read `part` at `epoch`.
absl::StatusOr<Item> ItemFromBinary(const PipelineResult& r, int row, int part, Epoch epoch) {
  constexpr int64_t kPostgresEpochUs = 946684800LL * 1000000;  // 2000-01-01 in Unix µs
  Item it;
  it.part = part;
  it.claim_epoch = epoch;
  int16_t priority = 0;
  int32_t attempts = 0;
  int64_t enqueued = 0, run = 0;
  uint32_t block = 0;
  uint16_t offset = 0;
  const absl::string_view tid = r.get(row, 8);
  if (!FromBinary(r.get(row, 0), &it.id) || !FromBinary(r.get(row, 3), &priority) ||
      !FromBinary(r.get(row, 4), &attempts) || !FromBinary(r.get(row, 6), &enqueued) ||
      !FromBinary(r.get(row, 7), &run) || tid.size() != 6 ||
      !FromBinary(tid.substr(0, 4), &block) || !FromBinary(tid.substr(4), &offset) ||
      (!r.is_null(row, 9) && !FromBinary(r.get(row, 9), &it.claim_record))) {
    return absl::InternalError("claim: malformed binary row");
  }
  if (!r.is_null(row, 1)) it.key = std::string(r.get(row, 1));
  if (!r.is_null(row, 2)) it.dedup_key = std::string(r.get(row, 2));
  if (!r.is_null(row, 10)) it.group = std::string(r.get(row, 10));
  it.priority = priority;
  it.attempts = attempts;
  it.payload = std::string(r.get(row, 5));
  it.enqueued_at = absl::FromUnixMicros(enqueued + kPostgresEpochUs);
  it.run_at = absl::FromUnixMicros(run + kPostgresEpochUs);
  it.locator = static_cast<uint64_t>(block) << 16 | offset;
  return it;
}

}  // namespace

absl::StatusOr<std::vector<Item>> PgStore::Claim(const ClaimRequest& request) {
  if (absl::Status st = ValidateQueueName(request.queue); !st.ok()) return st;
  if (request.parts.empty() && !request.include_suspect) return std::vector<Item>{};
  absl::StatusOr<ClaimArgs> a = MakeClaimArgs(request);
  if (!a.ok()) return a.status();
  return Run("claim", [&]() -> absl::StatusOr<std::vector<Item>> {
    std::vector<Item> out;
    // A claim runs after the plan guard in one flight, one implicit
    // transaction (which ends at the flight's Sync, so the guard's settings
    // last for the claim and nothing after it; through a transaction pooler
    // the flight holds one server connection): a generic plan, where the
    // planner picked a custom one for the claim's LIMIT and planned it anew
    // on every call, which took longer than running it (BENCHMARKS.md), and
    // JIT off. Without a key bound, in the form whose bound is the literal 0
    // (ClaimCtes, `unkeyed`): no key probes in its plan. A fair claim ran in
    // a transaction of its own for the same reason: a BEGIN and a COMMIT more.
    // With a key bound, the keyed guard (GuardFor), and never leaving a
    // transaction begun, as before it ran here.
    std::vector<std::optional<std::string>> params = {request.queue, a->session};
    AppendClaimParams(*a, &params);
    const char* form = ClaimForm(
        ClaimStatementName(*a, kPipelinedClaim, kPipelinedClaimFair, kPipelinedClaimKeyed),
        a->max_bytes);
    const bool keyed = GuardFor(*a) == kPlanGuardKeyed;
    const PipelineResult r =
        request.begin_after && !options_.transaction_pooler && !keyed
            ? ClaimThenBegin(form, std::move(params))
            : RunGuarded(pipeline_, *conn_, form, std::move(params), /*chain=*/false, GuardFor(*a));
    out.reserve(r.size());
    for (int row = 0; row < r.size(); ++row) {
      absl::StatusOr<Item> it = ItemFromCells(PipelineCells{r, row}, 0);
      if (!it.ok()) return it.status();
      out.push_back(*std::move(it));
    }
    return out;
  });
}

// The pipelined claim `form` in a transaction of its own, committed by
// COMMIT AND CHAIN in the same flight, which leaves the next transaction
// begun for the Finish of what it claimed (ClaimRequest::begin_after); with
// nothing claimed, that transaction is committed at once.
PipelineResult PgStore::ClaimThenBegin(const char* form,
                                       std::vector<std::optional<std::string>> params) {
  begun_ = true;  // until it is known to be committed or rolled back
  PipelineResult r;
  try {
    r = RunGuarded(pipeline_, *conn_, form, std::move(params), /*chain=*/true);
  } catch (const pqxx::broken_connection&) {
    throw;  // Run drops the connection, and begun_ with it
  } catch (...) {
    pqxx::nontransaction tx(*conn_);
    tx.exec("ROLLBACK");
    begun_ = false;
    throw;
  }
  if (r.size() == 0) {
    pqxx::nontransaction tx(*conn_);
    tx.exec("COMMIT");
    begun_ = false;
  }
  return r;
}

// --- finish -------------------------------------------------------------------------

namespace {

// The outcomes of one Finish attempt, as parameters of the finish statement.
struct OutcomeArgs {
  std::vector<int64_t> ack_ids;
  std::vector<int> ack_parts;
  std::vector<uint64_t> ack_locators;  // Item::locator; 0: not located
  std::vector<std::optional<std::string>> ack_results;  // the handler's, as it gave them
  std::vector<int64_t> o_ids, o_delays;
  std::vector<int> o_parts;
  std::vector<bool> o_dead, o_refund;
  std::vector<std::optional<std::string>> o_errors;
  std::vector<std::optional<int>> o_was;  // AttemptsBefore: what the row must still have
};

absl::StatusOr<OutcomeArgs> MakeOutcomeArgs(const std::vector<Outcome>& outcomes,
                                            absl::Span<const Item> given) {
  absl::flat_hash_map<int64_t, const Item*> by_id;
  for (const Item& item : given) by_id.emplace(item.id, &item);
  OutcomeArgs a;
  absl::flat_hash_set<int64_t> seen;
  for (const Outcome& o : outcomes) {
    auto it = by_id.find(o.id);
    if (it == by_id.end() || !seen.insert(o.id).second) {
      return absl::InternalError(
          absl::StrCat("finish: the handler returned an outcome for item ", o.id,
                       it == by_id.end() ? ", which it was not given" : " twice"));
    }
    const Item& item = *it->second;
    if (o.kind == Outcome::Kind::kLeave) continue;
    if (o.kind == Outcome::Kind::kAck) {
      a.ack_ids.push_back(o.id);
      a.ack_parts.push_back(item.part);
      a.ack_locators.push_back(item.locator);
      a.ack_results.push_back(o.result);
    } else {
      a.o_ids.push_back(o.id);
      a.o_parts.push_back(item.part);
      a.o_dead.push_back(o.kind == Outcome::Kind::kDead);
      a.o_delays.push_back(std::max<int64_t>(0, Micros(o.retry_delay)));
      a.o_refund.push_back(o.refund_attempt);
      a.o_errors.push_back(o.error);
      a.o_was.push_back(AttemptsBefore(item));
    }
  }
  return a;
}

// Results in hex, as the text forms take them (decode(..., 'hex')).
std::vector<std::optional<std::string>> HexResults(
    const std::vector<std::optional<std::string>>& results) {
  std::vector<std::optional<std::string>> hex;
  hex.reserve(results.size());
  for (const auto& r : results) {
    hex.push_back(r ? std::optional<std::string>(absl::BytesToHexString(*r)) : std::nullopt);
  }
  return hex;
}

// The parameters $1-$16 of the general Finish (finish.sql, FinishCtes), in
// text, for a statement the pipeline runs (RunGuarded).
std::vector<std::optional<std::string>> FinishParams(const FinishRequest& request,
                                                     const std::vector<int>& parts,
                                                     const std::vector<int64_t>& epochs,
                                                     const OutcomeArgs& a,
                                                     const std::string& ctids) {
  return {request.queue,
          request.session.value,
          IntArray(parts),
          IntArray(epochs),
          IntArray(a.ack_ids),
          IntArray(a.ack_parts),
          ctids,
          TextArray(HexResults(a.ack_results)),
          IntArray(a.o_ids),
          IntArray(a.o_parts),
          BoolArray(a.o_dead),
          IntArray(a.o_delays),
          BoolArray(a.o_refund),
          TextArray(a.o_errors),
          absl::StrCat(std::max(1, request.max_attempts)),
          IntArray(a.o_was)};
}

}  // namespace

void PgStore::CountInGroups(pqxx::transaction_base& tx, const std::string& queue,
                            absl::Span<const Item> given, const FinishResult& out) {
  absl::flat_hash_set<int64_t> acked(out.acked.begin(), out.acked.end());
  absl::flat_hash_set<int64_t> dead(out.dead.begin(), out.dead.end());
  std::vector<std::optional<std::string>> groups;
  std::vector<int64_t> done, died;
  for (const Item& item : given) {
    if (!item.group) continue;
    const bool a = acked.count(item.id) > 0, d = dead.count(item.id) > 0;
    if (!a && !d) continue;  // retried or left: still pending
    groups.push_back(item.group);
    done.push_back(a ? 1 : 0);
    died.push_back(d ? 1 : 0);
  }
  if (groups.empty()) return;
  const std::vector<int64_t> none(groups.size(), 0);
  Exec(tx, "groups_finished", queue, TextArray(groups), IntArray(done), IntArray(died),
       IntArray(none));
}

absl::StatusOr<FinishResult> PgStore::Finish(const FinishRequest& request, const FinishBody& body) {
  if (absl::Status st = ValidateQueueName(request.queue); !st.ok()) return st;
  // Optimistic first: the handler runs, then one statement fences, finishes
  // and claims ahead. If a part was lost meanwhile (rare: only a session that
  // expired or was re-joined elsewhere loses parts without revoking them
  // first) or an item is no longer there (finished already, by a COMMIT
  // whose outcome was unknown), all of that rolls back, and the second
  // attempt locks and looks first, so the handler runs only for items that
  // are still ours and still there.
  bool again = false;
  absl::StatusOr<FinishResult> r = FinishOnce(request, body, /*lock_first=*/false, &again);
  if (r.ok() && again) r = FinishOnce(request, body, /*lock_first=*/true, &again);
  return r;
}

// The rows of the general Finish statement: libpqxx's, or the pipeline's
// when it ran after kPlanGuard (RunGuarded).
struct FinishRows {
  // Calls fn(cells) for each row.
  template <typename Fn>
  void Each(Fn&& fn) const {
    if (guarded) {
      for (int row = 0; row < guarded->size(); ++row) fn(PipelineCells{*guarded, row});
    } else {
      for (const pqxx::row& row : r) fn(PqxxCells{row});
    }
  }

  pqxx::result r;
  std::optional<PipelineResult> guarded;
};

// The state of one FinishOnce, shared by its steps (PgStore::FinishInTx and
// what it calls, in the order they run).
struct FinishAttempt {
  FinishAttempt(const FinishRequest& r, bool lock) : request(r), lock_first(lock) {}

  // An item belongs to the fence when its part is there at its claim epoch.
  bool InFence(const Item& item) const {
    auto it = wanted.find(item.part);
    return it != wanted.end() && it->second == item.claim_epoch.value;
  }

  const FinishRequest& request;
  const bool lock_first;
  absl::flat_hash_map<int, int64_t> wanted;  // part -> epoch claimed under
  std::vector<int> parts;                    // the fence: wanted's parts and epochs,
  std::vector<int64_t> epochs;               // in the request's order
  pqxx::nontransaction* tx = nullptr;        // the transaction, while FinishInTx runs
  bool open = true;                          // tx not committed or rolled back yet
  std::vector<Item> kept;                    // given, when it is not request.items
  absl::Span<const Item> given;              // the items still ours: the body's
  size_t outcomes = 0;                       // how many the body returned
  OutcomeArgs args;                          // and what they say
  bool located = false;                      // every acked row located by its claim
  bool grouped = false;                      // an item of a queue group among them
  std::optional<ClaimRequest> claim;         // the claim ahead (FinishRequest::next)
  std::optional<ClaimArgs> next;             // and as the general statement's arguments
  FinishResult out;
  bool again = false;  // nothing committed: run again locking first (FinishOnce)
  bool drop = false;   // a handler statement broke the connection
};

namespace {

// The common case runs pipelined (pg/sql/pipelined_ack_claim.sql): every
// item acked where its claim saw it (with or without the handler's
// results), and a claim (if any) of one part without a suspect probe, not fair (the
// pipelined statement reads in (priority, id) order) and without an ordered
// claim's released keys (ClaimPart::key_cursors: only the general forms read
// their next items). Items of queue groups
// are counted in their groups before the COMMIT (groups_finished), which
// the pipelined flight sends with the ack: they take the general path.
bool PipelinedAckServes(const FinishAttempt& f) {
  const OutcomeArgs& a = f.args;
  return !f.grouped && !f.lock_first && !a.ack_ids.empty() && a.o_ids.empty() && f.located &&
         (!f.claim || (!ProbesSuspects(*f.claim) && f.claim->parts.size() == 1 && !f.claim->fair &&
                       f.claim->parts[0].key_cursors.empty() && !f.claim->parts[0].above));
}

bool AnyResult(const OutcomeArgs& a) {
  return std::any_of(a.ack_results.begin(), a.ack_results.end(),
                     [](const auto& r) { return r.has_value(); });
}

// The pipelined ack's statement: with the claim ahead in a plain or a
// keyed form, reading from the cursor or behind it; with the handler's
// results if it returned any.
const char* PipelinedAckName(const FinishAttempt& f) {
  const std::optional<ClaimRequest>& claim = f.claim;
  const char* name = kPipelinedAck;
  if (claim) {
    const bool keyed = KeyBound(*claim) != 0;
    name = ClaimForm(claim->parts[0].behind && !claim->parts[0].key_heads
                         ? (keyed ? kPipelinedAckClaimBehindKeyed : kPipelinedAckClaimBehind)
                         : (keyed ? kPipelinedAckClaimKeyed : kPipelinedAckClaim),
                     claim->max_bytes);
  }
  return AnyResult(f.args) ? ResultsName(name) : name;
}

// The results' parameters of the pipelined ack's form with results
// (pipelined_res_results.sql), in binary: the ids with a result, and those.
void AppendResultParams(const OutcomeArgs& a, std::vector<std::optional<std::string>>* params,
                        std::vector<bool>* binary) {
  std::vector<int64_t> ids;
  std::vector<absl::string_view> results;
  for (size_t i = 0; i < a.ack_ids.size(); ++i) {
    if (!a.ack_results[i]) continue;
    ids.push_back(a.ack_ids[i]);
    results.push_back(*a.ack_results[i]);
  }
  params->push_back(BinaryInt8Array(ids));
  params->push_back(BinaryByteaArray(results));
  binary->resize(params->size(), true);
}

// The pipelined ack's parameters, and in `binary` which travel in binary
// (BinaryInt8Array says why).
std::vector<std::optional<std::string>> PipelinedAckParams(const FinishAttempt& f,
                                                           std::vector<bool>* binary) {
  const OutcomeArgs& a = f.args;
  // The fence: the parts of the acked items at their claim epochs.
  std::vector<int> fence_parts;
  std::vector<int64_t> fence_epochs;
  for (int part : a.ack_parts) {
    if (std::find(fence_parts.begin(), fence_parts.end(), part) == fence_parts.end()) {
      fence_parts.push_back(part);
      fence_epochs.push_back(f.wanted.at(part));
    }
  }
  // The statement's check compares the deleted ids in order.
  std::vector<int64_t> sorted_ids = a.ack_ids;
  std::sort(sorted_ids.begin(), sorted_ids.end());
  std::vector<std::optional<std::string>> params = {f.request.queue,
                                                    f.request.session.value,
                                                    BinaryInt4Array(fence_parts),
                                                    BinaryInt8Array(fence_epochs),
                                                    BinaryInt8Array(sorted_ids),
                                                    BinaryTidArray(a.ack_locators)};
  *binary = {false, false, true, true, true, true};
  if (!f.claim) {
    if (AnyResult(a)) AppendResultParams(a, &params, binary);
    return params;
  }
  const ClaimRequest& claim = *f.claim;
  const ClaimPart& cp = claim.parts[0];
  params.push_back(absl::StrCat(cp.part));
  params.push_back(absl::StrCat(cp.epoch.value));
  params.push_back(absl::StrCat(cp.after ? cp.after->priority : kHeadPriority));
  params.push_back(absl::StrCat(cp.after ? cp.after->id : kHeadId));
  params.push_back(absl::StrCat(std::min(cp.limit, claim.limit)));
  params.push_back(absl::StrCat(KeyBound(claim)));
  // In flight there (the new claim record keeps them), and what the read
  // skips up to the cursor: those and the items finished now (past the
  // cursor it looks at neither).
  std::vector<int64_t> fly;
  for (const auto& [part, id] : claim.in_flight) {
    if (part == cp.part) fly.push_back(id);
  }
  // A read that starts at the cursor and does not look behind it meets none
  // of them: it sends none. A read of the keys' heads looks behind it (a
  // key's floor is often an item in flight, or one acked now).
  std::vector<int64_t> skip;
  if (cp.behind || cp.key_heads || !cp.after || !cp.cursor || *cp.after < *cp.cursor) {
    skip = a.ack_ids;
    skip.insert(skip.end(), fly.begin(), fly.end());
  }
  params.push_back(BinaryInt8Array(fly));
  params.push_back(BinaryInt8Array(skip));
  binary->resize(params.size(), false);
  binary->end()[-1] = binary->end()[-2] = true;
  params.push_back(absl::StrCat(cp.cursor ? cp.cursor->priority : kLastPriority));
  params.push_back(absl::StrCat(cp.cursor ? cp.cursor->id : kLastId));
  params.push_back(absl::StrCat(cp.record));
  if (claim.max_bytes > 0) params.push_back(absl::StrCat(claim.max_bytes));
  if (KeyBound(claim) != 0) params.push_back(KeyFloorsJson(claim));
  binary->resize(params.size(), false);
  if (AnyResult(a)) AppendResultParams(a, &params, binary);
  return params;
}

// Reads the general Finish statement's rows into f.out: ('p', part) for
// each part still held, ('a'|'r'|'d', id) per row written, ('n', count) from
// the lean form, and ('c', ...) for each claimed item, read only after the
// COMMIT (*claimed says there are some). Sets f.again when a part was lost
// and the attempt did not lock first.
absl::Status ReadFinishRows(const FinishRows& rows, FinishAttempt& f, bool* claimed) {
  absl::flat_hash_set<int> held;
  bool malformed = false;
  rows.Each([&](const auto& row) {
    const absl::string_view k = row.get(0);
    const char kind = k.empty() ? '\0' : k[0];
    if (kind == 'c') {
      *claimed = true;  // read after the commit
      return;
    }
    int64_t n = 0;
    if (row.null(1) || !absl::SimpleAtoi(row.get(1), &n)) {
      malformed = true;
    } else if (kind == 'p') {
      held.insert(static_cast<int>(n));
    } else if (kind == 'n') {
      // The lean statement counts; it deletes all or Finish rolls back.
      if (n == static_cast<int64_t>(f.args.ack_ids.size())) f.out.acked = f.args.ack_ids;
    } else {
      (kind == 'a' ? f.out.acked : kind == 'r' ? f.out.retried : f.out.dead).push_back(n);
    }
  });
  if (malformed) return absl::InternalError("finish: malformed row");
  if (std::any_of(f.given.begin(), f.given.end(),
                  [&](const Item& item) { return held.count(item.part) == 0; })) {
    // A part is no longer ours: nothing of this attempt may commit.
    if (!f.lock_first) {
      f.again = true;
      return absl::OkStatus();
    }
    return absl::InternalError("finish: a part locked by the fence was not held");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FinishResult> PgStore::FinishOnce(const FinishRequest& request,
                                                 const FinishBody& body, bool lock_first,
                                                 bool* again) {
  FinishAttempt f(request, lock_first);
  for (const OwnedPart& p : request.parts) {
    if (f.wanted.emplace(p.part, p.epoch.value).second) {
      f.parts.push_back(p.part);
      f.epochs.push_back(p.epoch.value);
    }
  }
  absl::Status st = Run(
      "finish", [&]() -> absl::Status { return FinishInTx(f, body); }, /*keep_begun=*/true);
  *again = f.again;
  // Only now: the transaction that used the connection is gone.
  if (f.drop) {
    ConnUse use(shared_.get(), &use_depth_);
    DropConnection();
  }
  if (!st.ok()) return st;
  if (f.again) return FinishResult{};
  return std::move(f.out);
}

absl::Status PgStore::FinishInTx(FinishAttempt& f, const FinishBody& body) {
  // The transaction is driven by statements, not pqxx::work, so its COMMIT
  // can carry the next one's BEGIN (FinishRequest::begin_next): that saves
  // a round trip per batch, a quarter of an ack's.
  pqxx::nontransaction tx(*conn_);
  if (begun_) {
    begun_ = false;
  } else {
    tx.exec(BeginSql(options_.transaction_pooler));
  }
  f.tx = &tx;
  auto rollback = absl::MakeCleanup([&] {
    f.tx = nullptr;
    if (!f.open) return;
    try {
      tx.exec("ROLLBACK");
    } catch (...) {
      // The connection is gone (the caller's error says so); the server
      // rolls back on its own.
    }
  });
  KeepFenced(f);
  if (absl::Status st = RunFinishBody(f, body); !st.ok()) return st;
  if (f.request.next) f.claim = f.request.next();
  return PipelinedAckServes(f) ? FinishPipelined(f) : FinishGeneral(f);
}

void PgStore::KeepFenced(FinishAttempt& f) {
  const FinishRequest& request = f.request;
  // Locking first, the fence statement says which parts are still held and
  // which items still there.
  const bool locked = f.lock_first && !request.items.empty();
  absl::flat_hash_set<int64_t> held, there;
  if (locked) {
    std::vector<int64_t> ids;
    std::vector<std::optional<int>> was;
    for (const Item& item : request.items) {
      ids.push_back(item.id);
      was.push_back(AttemptsBefore(item));
    }
    for (const pqxx::row& row :
         Exec(*f.tx, "fence", request.queue, request.session.value, IntArray(f.parts),
              IntArray(f.epochs), IntArray(ids), IntArray(was))) {
      (row[0].c_str()[0] == 'p' ? held : there).insert(row[1].as<int64_t>());
    }
  }
  auto ours = [&](const Item& item) {
    return f.InFence(item) && (!locked || (held.count(item.part) && there.count(item.id)));
  };
  f.given = request.items;  // usually all of them, passed without a copy
  if (std::all_of(request.items.begin(), request.items.end(), ours)) return;
  for (const Item& item : request.items) {
    if (ours(item)) {
      f.kept.push_back(item);
    } else {
      f.out.fenced.push_back(item.id);
    }
  }
  f.given = f.kept;
}

absl::Status PgStore::RunFinishBody(FinishAttempt& f, const FinishBody& body) {
  // The body runs even with no items (a handler's one-time setup uses
  // that); its writes commit with the outcomes.
  PgTx handler_tx(*f.tx, *conn_, handler_statements_, unprepared_, options_, confined_);
  absl::StatusOr<std::vector<Outcome>> outcomes = body(handler_tx, f.given);
  f.drop = handler_tx.error().drop_connection;
  if (!outcomes.ok()) return outcomes.status();
  if (!handler_tx.error().status.ok()) {
    // The body carried on after a failed statement without rolling back
    // to a savepoint: the server aborted the transaction; it cannot commit.
    return handler_tx.error().status;
  }
  if (outcomes->size() != f.given.size()) {
    return absl::InternalError(absl::StrCat("finish: the handler returned ", outcomes->size(),
                                            " outcomes for ", f.given.size(), " items"));
  }
  absl::StatusOr<OutcomeArgs> a = MakeOutcomeArgs(*outcomes, f.given);
  if (!a.ok()) return a.status();
  f.outcomes = outcomes->size();
  f.args = *std::move(a);
  f.located = std::none_of(f.args.ack_locators.begin(), f.args.ack_locators.end(),
                           [](uint64_t l) { return l == 0; });
  f.grouped = std::any_of(f.given.begin(), f.given.end(),
                          [](const Item& item) { return item.group.has_value(); });
  return absl::OkStatus();
}

absl::Status PgStore::FinishPipelined(FinishAttempt& f) {
  // (The general path checks the claim in MakeClaimArgs.)
  if (f.claim) {
    if (absl::Status bad = CheckClaimLimits(*f.claim); !bad.ok()) return bad;
  }
  std::vector<bool> binary_params;
  std::vector<std::optional<std::string>> params = PipelinedAckParams(f, &binary_params);
  const bool chain = f.claim.has_value() && f.request.begin_next;
  std::vector<PipelineResult> res;
  try {
    std::vector<Pipeline::Step> steps = {
        {f.claim && KeyBound(*f.claim) != 0 ? kPlanGuardKeyed : kPlanGuard, {}},
        {PipelinedAckName(f), std::move(params), /*binary=*/true, std::move(binary_params)},
        {chain ? kPipelinedChain : kPipelinedCommit, {}}};
    // COMMIT AND CHAIN keeps the transaction's characteristics, not its SET
    // LOCALs: the next one sets them again.
    if (chain && options_.transaction_pooler) steps.push_back({kPipelinedLocalSettings, {}});
    res = pipeline_.Run(*conn_, steps);
  } catch (const pqxx::broken_connection& e) {
    // The COMMIT was in the flight: it may or may not have run.
    f.open = false;
    throw pqxx::in_doubt_error(e.what());
  }
  bool settings_failed = false;  // kPipelinedLocalSettings, after the COMMIT
  for (int i = 0; i < static_cast<int>(res.size()); ++i) {
    const PipelineResult& step = res[i];
    if (step.kind == PipelineResult::Kind::kOk) continue;
    if (i == 3) {
      settings_failed = true;  // the ack committed; the new transaction is not used
      continue;
    }
    if (step.kind == PipelineResult::Kind::kError && step.sqlstate == "PQ001") {
      // A part was lost or an item is gone: nothing committed. Roll back and
      // run again locking first (Finish).
      f.again = true;
      return absl::OkStatus();
    }
    if (step.kind == PipelineResult::Kind::kError) {
      throw pqxx::sql_error(step.message, i == 2 ? "COMMIT" : "pipelined ack",
                            step.sqlstate.c_str());
    }
  }
  f.open = false;
  f.out.acked = f.args.ack_ids;
  const PipelineResult& rows = res[1];
  if (f.claim) f.out.next.reserve(rows.size());
  for (int row = 0; f.claim && row < rows.size(); ++row) {
    if (rows.is_null(row, 0)) continue;  // the claim's one row of NULLs
    absl::StatusOr<Item> item =
        ItemFromBinary(rows, row, f.claim->parts[0].part, f.claim->parts[0].epoch);
    // Cannot happen (the server wrote these columns); the item stays ready
    // in the database and is claimed again.
    if (!item.ok()) continue;
    f.out.next.push_back(*std::move(item));
  }
  if (chain && (f.out.next.empty() || settings_failed)) {
    // Nothing to run in the transaction the COMMIT began: end it, so the
    // next batch's transaction does not start with a stale now(). The ack
    // has committed; a failure here only costs the connection.
    try {
      f.tx->exec("ROLLBACK");
    } catch (...) {
      f.drop = true;
    }
  } else {
    begun_ = chain;
  }
  f.out.next_begun = chain && !f.out.next.empty() && !settings_failed;
  return absl::OkStatus();
}

absl::Status PgStore::FinishGeneral(FinishAttempt& f) {
  if (f.claim) {
    absl::StatusOr<ClaimArgs> c = MakeClaimArgs(*f.claim);
    if (!c.ok()) return c.status();
    f.next = *std::move(c);
  }
  const OutcomeArgs& a = f.args;
  FinishRows rows;
  bool claimed_rows = false;
  if (f.outcomes > 0 || f.next) {
    RunFinishStatement(f, &rows);
    absl::Status st = ReadFinishRows(rows, f, &claimed_rows);
    if (!st.ok() || f.again) return st;
  }
  if (f.out.acked.size() != a.ack_ids.size() ||
      f.out.retried.size() + f.out.dead.size() != a.o_ids.size()) {
    if (!f.lock_first) {
      f.again = true;  // look which are still there, then run those only
      return absl::OkStatus();
    }
    // The fence found these rows and only this session touches them while it
    // holds their parts, so a row gone since means two Finish calls raced for
    // one item. Write nothing.
    return absl::AbortedError(
        absl::StrCat("finish: ",
                     a.ack_ids.size() + a.o_ids.size() - f.out.acked.size() - f.out.retried.size() -
                         f.out.dead.size(),
                     " of ", a.ack_ids.size() + a.o_ids.size(),
                     " items were no longer there (finished concurrently?); nothing was written"));
  }
  if (f.grouped) CountInGroups(*f.tx, f.request.queue, f.given, f.out);
  const bool chain = f.request.begin_next && claimed_rows;
  try {
    f.tx->exec(!chain                        ? "COMMIT"
               : options_.transaction_pooler ? absl::StrCat("COMMIT; ", BeginSql(true))
                                             : "COMMIT; BEGIN");
  } catch (const pqxx::broken_connection& e) {
    f.open = false;
    throw pqxx::in_doubt_error(e.what());
  }
  f.open = false;
  begun_ = chain;
  f.out.next_begun = chain;
  // The claimed items are read only now: the server waits for nothing while
  // the client turns a hundred rows into Items.
  if (claimed_rows) {
    rows.Each([&](const auto& row) {
      if (row.get(0) != "c") return;
      absl::StatusOr<Item> item = ItemFromCells(row, 1);
      // Cannot happen (the server wrote the payload's text form); the item
      // stays ready in the database and is claimed again.
      if (item.ok()) f.out.next.push_back(*std::move(item));
    });
  }
  return absl::OkStatus();
}

void PgStore::RunFinishStatement(FinishAttempt& f, FinishRows* rows) {
  const FinishRequest& request = f.request;
  const std::optional<ClaimArgs>& next = f.next;
  const OutcomeArgs& a = f.args;
  pqxx::nontransaction& tx = *f.tx;
  const std::string ctids = CtidArray(a.ack_locators);
  // The lean statement (pg/sql/fragments/ack_ctes.sql), if every item is acked
  // and every row located by its claim.
  const bool lean = !f.lock_first && a.o_ids.empty() && f.located;
  std::vector<int64_t> result_ids;
  std::vector<std::optional<std::string>> results;
  for (size_t i = 0; lean && i < a.ack_ids.size(); ++i) {
    if (a.ack_results[i]) {
      result_ids.push_back(a.ack_ids[i]);
      results.push_back(absl::BytesToHexString(*a.ack_results[i]));
    }
  }
  if (lean && next) {
    // After the plan guard, as the claims are (PgStore::Claim says why): its
    // settings last to the COMMIT, after the handler's statements.
    std::vector<std::optional<std::string>> params = {request.queue,        request.session.value,
                                                      IntArray(f.parts),    IntArray(f.epochs),
                                                      IntArray(a.ack_ids),  ctids,
                                                      IntArray(result_ids), TextArray(results)};
    AppendClaimParams(*next, &params);
    rows->guarded = RunGuarded(
        pipeline_, *conn_,
        ClaimForm(ClaimStatementName(*next, kPipelinedLeanAckClaim, kPipelinedLeanAckClaimFair,
                                     kPipelinedLeanAckClaimKeyed),
                  next->max_bytes),
        std::move(params), /*chain=*/false, GuardFor(*next));
  } else if (lean) {
    rows->r =
        Exec(tx, "ack", request.queue, request.session.value, IntArray(f.parts), IntArray(f.epochs),
             IntArray(a.ack_ids), ctids, IntArray(result_ids), TextArray(results));
  } else if (next) {
    // The general form after the plan guard too (PipelinedStatements says why).
    std::vector<std::optional<std::string>> params =
        FinishParams(request, f.parts, f.epochs, a, ctids);
    AppendClaimParams(*next, &params);
    rows->guarded = RunGuarded(
        pipeline_, *conn_,
        ClaimForm(ClaimStatementName(*next, kPipelinedFinishClaim, kPipelinedFinishClaimFair,
                                     kPipelinedFinishClaimKeyed),
                  next->max_bytes),
        std::move(params), /*chain=*/false, GuardFor(*next));
  } else {
    rows->guarded = RunGuarded(pipeline_, *conn_, kPipelinedFinish,
                               FinishParams(request, f.parts, f.epochs, a, ctids));
  }
}

// --- item state -----------------------------------------------------------------------

bool PgStore::ThroughSqlApi(pqxx::transaction_base& tx) {
  int through = through_sql_api_.load();
  if (through < 0) {
    // Not only a role without privileges: a worker's sees its own queues'
    // rows only, so an id of another queue would read as acked.
    through = Exec(tx, "owns_items")[0][0].as<bool>() ? 0 : 1;
    through_sql_api_.store(through);
  }
  return through == 1;
}

namespace {

// An item's state as the SQL API's item_state() gives it, from `row`'s
// columns at `at`: state, attempts, result, last_error.
ItemState ItemStateOfApiRow(const pqxx::row& row, int at, int64_t id) {
  ItemState s;
  s.id = id;
  const std::string state = row[at].as<std::string>();
  s.attempts = row[at + 1].is_null() ? 0 : row[at + 1].as<int>();
  s.error = Text(row[at + 3]).value_or("");
  if (state == "pending") {
    s.kind = ItemState::Kind::kPending;
  } else if (state == "dead") {
    s.kind = ItemState::Kind::kDead;
  } else if (state == "cancelled") {
    s.kind = ItemState::Kind::kCancelled;
  } else if (state == "done") {
    s.kind = ItemState::Kind::kDone;
    std::string result;
    if (!row[at + 2].is_null() &&
        DecodeBytea(absl::string_view(row[at + 2].c_str(), row[at + 2].size()), &result)) {
      s.result = std::move(result);
    }
  }
  return s;
}

}  // namespace

absl::StatusOr<ItemState> PgStore::GetItemState(absl::string_view queue, int64_t id) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run("item state", [&]() -> absl::StatusOr<ItemState> {
    pqxx::transaction_base& tx = Autocommit();
    if (ThroughSqlApi(tx)) {
      // One row; an unknown queue, or one the role has no grant on, raises.
      pqxx::result r = Exec(tx, "item_state_api", std::string(queue), id);
      ItemState s;
      s.id = id;
      return r.empty() ? s : ItemStateOfApiRow(r[0], 0, id);
    }
    pqxx::result r = Exec(tx, "item_state", std::string(queue), id);
    ItemState state;
    state.id = id;
    bool elsewhere = false;
    int64_t high_water = 0;
    for (const pqxx::row& row : r) {
      const char k = row[0].c_str()[0];
      if (k == 's') {
        if (row[2].as<int>() == 0) return UnknownQueue(queue, options_.schema);
        high_water = row[3].as<int64_t>();
        continue;
      }
      if (row[1].as<std::string>() != queue) {
        elsewhere = true;
        continue;
      }
      switch (k) {
        case 'p':
          state.kind = ItemState::Kind::kPending;
          state.attempts = row[2].as<int>();
          state.error = Text(row[3]).value_or("");
          break;
        case 'd':
          state.kind = ItemState::Kind::kDead;
          state.attempts = row[2].as<int>();
          state.error = Text(row[3]).value_or("");
          break;
        case 'c':
          state.kind = ItemState::Kind::kCancelled;
          state.attempts = row[2].as<int>();
          break;
        case 'r': {
          state.kind = ItemState::Kind::kDone;
          if (!row[4].is_null()) {
            std::string result;
            if (DecodeBytea(absl::string_view(row[4].c_str(), row[4].size()), &result)) {
              state.result = std::move(result);
            }
          }
          break;
        }
        default:
          break;
      }
    }
    if (state.kind == ItemState::Kind::kUnknown && !elsewhere && id >= 1 && id <= high_water) {
      // Allocated and in no table: acked without a result row. (Ids are
      // shared by all queues of the schema and a vanished id does not say
      // which queue it had, nor whether its insert committed; see README.)
      state.kind = ItemState::Kind::kDone;
    }
    return state;
  });
}

absl::StatusOr<ItemDetail> PgStore::DescribeItem(absl::string_view queue, int64_t id) {
  absl::StatusOr<ItemState> state = GetItemState(queue, id);
  if (!state.ok()) return state.status();
  ItemDetail d;
  d.state = *std::move(state);
  if (d.state.kind != ItemState::Kind::kPending) return d;
  return Run("describe item", [&]() -> absl::StatusOr<ItemDetail> {
    pqxx::transaction_base& tx = Autocommit();
    // A role that does not own the item tables gets what the SQL API's
    // item_state() says, no more (GetItemState).
    if (ThroughSqlApi(tx)) {
      d.where_hidden = true;
      return d;
    }
    // pg/sql/item_detail.sql; no row when it finished meanwhile: then what
    // it became.
    const pqxx::result rows = Exec(tx, "item_detail", std::string(queue), id, kItemPayloadHead);
    if (rows.empty()) {
      absl::StatusOr<ItemState> now = GetItemState(queue, id);
      if (!now.ok()) return now.status();
      d.state = *std::move(now);
    }
    for (const pqxx::row& row : rows) {
      d.part = row[0].as<int>();
      d.key = Text(row[1]);
      d.group = Text(row[2]);
      d.priority = row[3].as<int>();
      d.enqueued_at = absl::FromUnixMicros(row[4].as<int64_t>());
      if (!row[5].is_null()) d.run_at = absl::FromUnixMicros(row[5].as<int64_t>());
      d.in_flight = row[6].as<bool>();
      d.db_now = absl::FromUnixMicros(row[7].as<int64_t>());
      d.payload_bytes = row[8].as<int64_t>();
      DecodeBytea(absl::string_view(row[9].c_str(), row[9].size()), &d.payload_head);
    }
    return d;
  });
}

absl::StatusOr<ItemState> PgStore::GetItemStateByDedupKey(absl::string_view queue,
                                                          absl::string_view dedup_key) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run("item state", [&]() -> absl::StatusOr<ItemState> {
    pqxx::transaction_base& tx = Autocommit();
    if (ThroughSqlApi(tx)) {
      pqxx::result r = Exec(tx, "item_state_dedup_api", std::string(queue), std::string(dedup_key));
      if (r.empty() || r[0][0].is_null()) return ItemState{};
      return ItemStateOfApiRow(r[0], 1, r[0][0].as<int64_t>());
    }
    pqxx::result r = Exec(tx, "item_state_dedup", std::string(queue), std::string(dedup_key));
    ItemState pending, finished;
    for (const pqxx::row& row : r) {
      const char k = row[0].c_str()[0];
      if (k == 'q') {
        if (row[2].as<int>() == 0) return UnknownQueue(queue, options_.schema);
        continue;
      }
      ItemState& s = k == 'p' ? pending : finished;
      s.id = row[1].as<int64_t>();
      s.attempts = row[2].as<int>();
      s.error = Text(row[3]).value_or("");
      if (k == 'p') {
        s.kind = ItemState::Kind::kPending;
      } else if (k == 'd') {
        s.kind = ItemState::Kind::kDead;
      } else if (k == 'c') {
        s.kind = ItemState::Kind::kCancelled;
      } else {
        s.kind = ItemState::Kind::kDone;
        std::string result;
        if (!row[4].is_null() &&
            DecodeBytea(absl::string_view(row[4].c_str(), row[4].size()), &result)) {
          s.result = std::move(result);
        }
      }
    }
    return pending.kind != ItemState::Kind::kUnknown ? pending : finished;
  });
}

// --- cancel ---------------------------------------------------------------------------

namespace {

// cancel_items()'s names of the outcomes (migration 13).
CancelOutcome::Kind CancelKind(absl::string_view state) {
  using Kind = CancelOutcome::Kind;
  if (state == "cancelled") return Kind::kCancelled;
  if (state == "already_cancelled") return Kind::kAlreadyCancelled;
  if (state == "in_flight") return Kind::kInFlight;
  if (state == "done") return Kind::kDone;
  if (state == "dead") return Kind::kDead;
  return Kind::kUnknown;
}

}  // namespace

absl::StatusOr<std::vector<CancelOutcome>> PgStore::CancelItems(absl::string_view queue,
                                                                const std::vector<int64_t>& ids) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  if (absl::Status st = ValidateItemIds(ids); !st.ok()) return st;
  const std::string q(queue);
  const std::string what = absl::StrCat("cancel items of queue \"", queue, "\"");
  // The asked ids by part; those no longer items of the queue go with the
  // first call (cancel_items() only tells their state). A role that does not
  // own the tables (a producer's) cannot read them to group the ids: it
  // calls the SQL API once per id.
  std::map<int, std::vector<int64_t>> by_part;
  bool through_api = false;
  absl::Status st = Run(what, [&]() -> absl::Status {
    pqxx::transaction_base& tx = Autocommit();
    through_api = ThroughSqlApi(tx);
    if (through_api) return absl::OkStatus();
    bool known = false;
    for (const pqxx::row& row : Exec(tx, "cancel_parts", q, IntArray(ids))) {
      if (row[0].is_null()) {
        known = row[1].as<int64_t>() > 0;
      } else {
        by_part[row[0].as<int>()].push_back(row[1].as<int64_t>());
      }
    }
    if (!known) return UnknownQueue(queue, options_.schema);
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  absl::flat_hash_set<int64_t> live;
  for (const auto& [part, part_ids] : by_part) live.insert(part_ids.begin(), part_ids.end());
  std::vector<int64_t> rest;
  for (int64_t id : ids) {
    if (live.count(id) == 0) rest.push_back(id);
  }
  std::vector<std::vector<int64_t>> calls;
  for (auto& [part, part_ids] : by_part) calls.push_back(std::move(part_ids));
  if (through_api) {
    // Not knowing the parts, one id per call: an id is in one part.
    for (int64_t id : rest) calls.push_back({id});
  } else {
    if (calls.empty()) calls.emplace_back();
    calls.front().insert(calls.front().end(), rest.begin(), rest.end());
  }
  // One part per transaction (cancel_items() says why): each call is a
  // Run of its own, so through a transaction pooler too.
  absl::flat_hash_map<int64_t, CancelOutcome::Kind> kind_of;
  for (const std::vector<int64_t>& call : calls) {
    if (call.empty()) continue;
    st = Run(what, [&]() -> absl::Status {
      pqxx::result r =
          Exec(Autocommit(), through_api ? "cancel_items_api" : "cancel_items", q, IntArray(call));
      if (r.empty()) return UnknownQueue(queue, options_.schema);  // deleted meanwhile
      for (const pqxx::row& row : r) kind_of[row[0].as<int64_t>()] = CancelKind(row[1].c_str());
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
  }
  std::vector<CancelOutcome> out;
  absl::flat_hash_set<int64_t> seen;
  for (int64_t id : ids) {
    if (!seen.insert(id).second) continue;
    auto it = kind_of.find(id);
    out.push_back({id, it == kind_of.end() ? CancelOutcome::Kind::kUnknown : it->second});
  }
  return out;
}

absl::StatusOr<CancelOutcome> PgStore::CancelByDedupKey(absl::string_view queue,
                                                        absl::string_view dedup_key) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  if (absl::Status st = ValidateKeyText("dedup key", dedup_key); !st.ok()) return st;
  return Run(absl::StrCat("cancel in queue \"", queue, "\" by dedup key"),
             [&]() -> absl::StatusOr<CancelOutcome> {
               pqxx::transaction_base& tx = Autocommit();
               pqxx::result r =
                   Exec(tx, ThroughSqlApi(tx) ? "cancel_by_dedup_key_api" : "cancel_by_dedup_key",
                        std::string(queue), std::string(dedup_key));
               if (r.empty()) return UnknownQueue(queue, options_.schema);
               CancelOutcome out;
               if (!r[0][0].is_null()) out.id = r[0][0].as<int64_t>();
               out.kind = CancelKind(r[0][1].c_str());
               return out;
             });
}

// --- status ---------------------------------------------------------------------------

absl::StatusOr<QueueStatus> PgStore::Status(absl::string_view queue) {
  absl::StatusOr<QueueConfig> config = GetQueue(queue);
  if (!config.ok()) return config.status();
  return Run("status", [&]() -> absl::StatusOr<QueueStatus> {
    // One snapshot for sessions and parts, so the numbers agree.
    PgWork<pqxx::repeatable_read, pqxx::read_only> tx(*conn_, options_.transaction_pooler);
    QueueStatus status;
    status.config = *config;
    status.db_now = absl::FromUnixMicros(
        tx.exec("SELECT (extract(epoch FROM now()) * 1000000)::bigint")[0][0].as<int64_t>());
    for (const pqxx::row& row : Exec(tx, "status_sessions", std::string(queue))) {
      SessionInfo s;
      s.id.value = row[0].as<std::string>();
      s.instance_id = row[1].as<std::string>();
      s.host = row[2].as<std::string>();
      s.pid = row[3].as<int>();
      s.since_heartbeat = absl::Microseconds(row[4].as<int64_t>());
      s.expires_in = absl::Microseconds(row[5].as<int64_t>());
      s.parts_owned = row[6].as<int>();
      s.since_start = absl::Microseconds(row[8].as<int64_t>());
      s.also_serves = absl::StrSplit(row[9].as<std::string>(), ',', absl::SkipEmpty());
      status.sessions.push_back(std::move(s));
    }
    {
      std::map<std::string, SessionInfo*> by_id;
      for (SessionInfo& s : status.sessions) by_id[s.id.value] = &s;
      for (const pqxx::row& row : Exec(tx, "status_session_throughput", std::string(queue))) {
        auto it = by_id.find(row[0].as<std::string>());
        if (it == by_id.end()) continue;
        it->second->throughput.push_back(
            {absl::FromUnixSeconds(row[1].as<int64_t>()),
             {row[2].as<int64_t>(), row[3].as<int64_t>(), row[4].as<int64_t>()}});
      }
    }
    status.parts.reserve(config->parts);
    for (const pqxx::row& row : Exec(tx, "status_parts", std::string(queue), config->parts)) {
      PartStatus p;
      p.part = row[0].as<int>();
      if (!row[1].is_null()) p.owner = SessionId{row[1].as<std::string>()};
      p.epoch.value = row[2].as<int64_t>();
      p.ready = row[3].as<int64_t>();
      p.delayed = row[4].as<int64_t>();
      p.in_flight = row[5].as<int64_t>();
      p.dead = row[6].as<int64_t>();
      p.oldest_ready_age = absl::Microseconds(row[7].as<int64_t>());
      p.held = row[8].as<int64_t>();
      p.cancelled = row[9].as<int64_t>();
      p.dead_last_minute = row[10].as<int64_t>();
      status.parts.push_back(std::move(p));
    }
    {
      const pqxx::row g = Exec(tx, "status_groups", std::string(queue))[0];
      status.groups.held = g[0].as<int64_t>();
      status.groups.started = g[1].as<int64_t>();
      status.groups.ended = g[2].as<int64_t>();
      status.groups.pending = g[3].as<int64_t>();
    }
    for (const pqxx::row& row : Exec(tx, "status_throughput", std::string(queue))) {
      ThroughputMinute m;
      m.minute = absl::FromUnixSeconds(row[0].as<int64_t>());
      m.counts = {row[1].as<int64_t>(), row[2].as<int64_t>(), row[3].as<int64_t>()};
      status.throughput.push_back(m);
    }
    for (const pqxx::row& row : Exec(tx, "status_horizon")) {
      VacuumHorizon h;
      h.holder = row[0].as<std::string>();
      h.who = row[1].as<std::string>();
      h.xid_age = row[2].as<int64_t>();
      h.age = absl::Microseconds(row[3].as<int64_t>());
      status.horizon = std::move(h);
    }
    tx.commit();
    return status;
  });
}

absl::StatusOr<std::optional<absl::Duration>> PgStore::NextDue(absl::string_view queue,
                                                               const std::vector<int>& parts) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run("next_due", [&]() -> absl::StatusOr<std::optional<absl::Duration>> {
    pqxx::transaction_base& tx = Autocommit();
    const pqxx::result r = Exec(tx, "next_due", std::string(queue), IntArray(parts));
    if (r.empty() || r[0][0].is_null()) return std::nullopt;
    return absl::Microseconds(std::max<int64_t>(0, r[0][0].as<int64_t>()));
  });
}

absl::StatusOr<SnapshotBounds> PgStore::CurrentSnapshot() {
  return Run("current_snapshot", [&]() -> absl::StatusOr<SnapshotBounds> {
    pqxx::transaction_base& tx = Autocommit();
    const pqxx::result r = Exec(tx, "current_snapshot");
    return SnapshotBounds{r[0][0].as<int64_t>(), r[0][1].as<int64_t>(), r[0][2].as<int64_t>(1)};
  });
}

absl::StatusOr<std::vector<std::string>> PgStore::QueuesWithWork(
    const std::vector<std::string>& queues) {
  std::vector<std::optional<std::string>> names;
  for (const std::string& q : queues) {
    if (absl::Status st = ValidateQueueName(q); !st.ok()) return st;
    names.emplace_back(q);
  }
  return Run("queues_with_work", [&]() -> absl::StatusOr<std::vector<std::string>> {
    pqxx::transaction_base& tx = Autocommit();
    std::vector<std::string> out;
    for (const pqxx::row& row : Exec(tx, "queues_with_work", TextArray(names))) {
      out.push_back(row[0].as<std::string>());
    }
    return out;
  });
}

absl::StatusOr<QueueOwners> PgStore::Owners(absl::string_view queue) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run("owners", [&]() -> absl::StatusOr<QueueOwners> {
    pqxx::transaction_base& tx = Autocommit();
    QueueOwners out;
    bool found = false;
    std::vector<std::pair<int, std::string>> owned;
    for (const pqxx::row& row : Exec(tx, "owners", std::string(queue))) {
      switch (row[0].c_str()[0]) {
        case 'q':
          found = true;
          out.owners.resize(row[3].as<int>());
          break;
        case 's':
          out.sessions.push_back({SessionId{row[1].as<std::string>()}, row[2].as<std::string>(),
                                  row[3].as<int>(), absl::Microseconds(row[4].as<int64_t>()),
                                  absl::Microseconds(row[5].as<int64_t>())});
          break;
        case 'p':
          owned.emplace_back(row[3].as<int>(), row[1].as<std::string>());
          break;
        default:
          out.has_items = true;
      }
    }
    if (!found) return QueueNotFound(tx, queue);
    for (auto& [part, session] : owned) {
      if (part >= 0 && part < static_cast<int>(out.owners.size())) {
        out.owners[part] = SessionId{std::move(session)};
      }
    }
    std::sort(out.sessions.begin(), out.sessions.end(),
              [](const auto& a, const auto& b) { return a.id.value < b.id.value; });
    return out;
  });
}

// --- dead items --------------------------------------------------------------------------

absl::StatusOr<std::vector<DeadItem>> PgStore::ListDead(absl::string_view queue, int limit) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run("list dead items", [&]() -> absl::StatusOr<std::vector<DeadItem>> {
    pqxx::transaction_base& tx = Autocommit();
    const std::string q(queue);
    if (tx.exec_params(WithSchema("SELECT 1 FROM {schema}.queues WHERE name = $1", options_.schema),
                       q)
            .empty()) {
      return QueueNotFound(tx, queue);
    }
    std::vector<DeadItem> out;
    // A viewer may not read payloads: the statement must not name them.
    const bool hidden = !MayRead(tx, options_.schema, "dead_items", "payload");
    for (const pqxx::row& r :
         Exec(tx, hidden ? "dead_list_hidden" : "dead_list", q, limit, kDeadPayloadHead)) {
      DeadItem d;
      d.id = r[0].as<int64_t>();
      d.part = r[1].as<int>();
      d.key = Text(r[2]);
      d.dedup_key = Text(r[3]);
      d.attempts = r[4].as<int>();
      d.enqueued_at = absl::FromUnixMicros(r[5].as<int64_t>());
      d.failed_at = absl::FromUnixMicros(r[6].as<int64_t>());
      d.last_error = r[7].as<std::string>();
      d.payload_bytes = r[8].as<int64_t>();
      d.payload_hidden = hidden;
      DecodeBytea(absl::string_view(r[9].c_str(), r[9].size()), &d.payload_head);
      out.push_back(std::move(d));
    }
    return out;
  });
}

absl::StatusOr<Requeued> PgStore::RequeueDead(absl::string_view queue,
                                              const std::vector<int64_t>& ids) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run("requeue dead items", [&]() -> absl::StatusOr<Requeued> {
    PgWork<> tx(*conn_, options_.transaction_pooler);
    // Items' lock before the queue row is read, as every writer of items
    // takes it (DeleteQueue says why).
    Exec(tx, "lock_items_for_enqueue");
    const std::string q(queue);
    if (tx.exec_params(WithSchema("SELECT 1 FROM {schema}.queues WHERE name = $1", options_.schema),
                       q)
            .empty()) {
      return UnknownQueue(queue, options_.schema);
    }
    // pg/sql/dead_requeue.sql; the owners hear of the items at once with
    // the notice (NotifyParts, as an enqueue sends it).
    const pqxx::row r = Exec(tx, "dead_requeue", q, IntArray(ids))[0];
    Requeued out;
    LowestKeys parts;
    for (absl::string_view m : absl::StrSplit(r[2].c_str(), ',', absl::SkipEmpty())) {
      int part = 0;
      std::optional<ItemKey> key;
      if (ParsePartKey(m, &part, &key) && key) {
        AddKey(parts, part, *key);
        out.requeued_ids.push_back(key->id);
      }
    }
    for (absl::string_view k : absl::StrSplit(r[3].c_str(), ',', absl::SkipEmpty())) {
      int64_t id = 0;
      if (absl::SimpleAtoi(k, &id)) out.kept_ids.push_back(id);
    }
    std::sort(out.requeued_ids.begin(), out.requeued_ids.end());
    NotifyParts(tx, unprepared_, ChannelFor(options_.schema, queue), parts);
    tx.commit();
    out.requeued = r[0].as<int64_t>();
    out.kept = r[1].as<int64_t>();
    return out;
  });
}

absl::StatusOr<DeadDeleted> PgStore::DeleteDead(absl::string_view queue,
                                                const std::vector<int64_t>& ids) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run("delete dead items", [&]() -> absl::StatusOr<DeadDeleted> {
    // The queue check and the delete in one statement (pg/sql/dead_delete.sql).
    PgWork<> tx(*conn_, options_.transaction_pooler);
    const pqxx::row r = Exec(tx, "dead_delete", std::string(queue), IntArray(ids))[0];
    if (r[0].as<int64_t>() == 0) return UnknownQueue(queue, options_.schema);
    tx.commit();
    DeadDeleted out;
    out.deleted = r[1].as<int64_t>();
    for (absl::string_view k : absl::StrSplit(r[2].c_str(), ',', absl::SkipEmpty())) {
      int64_t id = 0;
      if (absl::SimpleAtoi(k, &id)) out.missing_ids.push_back(id);
    }
    return out;
  });
}

absl::StatusOr<Pruned> PgStore::Prune(absl::string_view queue, absl::Duration older_than,
                                      bool dead) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  if (older_than < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("a retention age cannot be negative");
  }
  // Whole microseconds, as PostgreSQL keeps times; an age past what an
  // interval holds is "everything" anyway.
  const int64_t micros = std::min<int64_t>(absl::ToInt64Microseconds(older_than),
                                           int64_t{100} * 365 * 86400 * 1000000);
  return Run(absl::StrCat("prune queue \"", queue, "\""), [&]() -> absl::StatusOr<Pruned> {
    const pqxx::row r = Exec(Autocommit(), "prune", std::string(queue), micros, dead).at(0);
    Pruned out;
    out.results = r[0].as<int64_t>();
    out.cancelled = r[1].as<int64_t>();
    out.groups = r[2].as<int64_t>();
    out.dead = r[3].as<int64_t>();
    return out;
  });
}

namespace {

// Keeps what the server says during one statement (VACUUM's warnings: a
// table skipped for its lock or its owner) instead of printing it.
class NoticeKeeper final : public pqxx::errorhandler {
 public:
  explicit NoticeKeeper(pqxx::connection_base& conn) : pqxx::errorhandler(conn) {}
  bool operator()(const char msg[]) noexcept override {
    try {
      text_.append(msg);
    } catch (...) {
    }
    return false;  // not passed on: nothing else prints it
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

}  // namespace

absl::StatusOr<std::vector<TableVacuum>> PgStore::VacuumQueueTables() {
  struct Due {
    std::string table;
    int64_t dead;
    bool may;
    std::string horizon;
    bool readable;  // both tables, by this role
  };
  auto due = Run("look for queue tables to vacuum", [&]() -> absl::StatusOr<std::vector<Due>> {
    std::vector<Due> out;
    for (const pqxx::row& row : Exec(Autocommit(), "vacuum_due", options_.schema)) {
      out.push_back(Due{row[0].as<std::string>(), row[1].as<int64_t>(), row[2].as<bool>(),
                        Text(row[3]).value_or(""), row[4].as<bool>()});
    }
    return out;
  });
  if (!due.ok()) return due.status();
  std::vector<TableVacuum> out;
  for (const Due& d : *due) {
    TableVacuum v;
    v.table = d.table;
    v.dead_rows = d.dead;
    auto last = vacuumed_at_horizon_.find(d.table);
    if (!d.may) {
      v.outcome = TableVacuum::Outcome::kDenied;
    } else if (!d.horizon.empty() && last != vacuumed_at_horizon_.end() &&
               last->second == d.horizon) {
      // The same oldest snapshot as at our last vacuum: every row that died
      // since died after it, and vacuum could remove none of them.
      v.outcome = TableVacuum::Outcome::kHorizonHeld;
    } else {
      // The name comes from the fixed list the statement reads, the schema
      // is quoted: nothing of a caller's reaches this text.
      const std::string sql = absl::StrCat("VACUUM (SKIP_LOCKED) ", qschema_, ".", d.table);
      auto ran = Run(absl::StrCat("vacuum ", d.table), [&]() -> absl::StatusOr<bool> {
        // Outside any transaction (VACUUM cannot run in one), through a
        // transaction pooler too: one statement is its own transaction.
        NoticeKeeper notices(*conn_);
        const absl::Time start = absl::Now();
        pqxx::nontransaction tx(*conn_);
        tx.exec0(sql);
        v.took = absl::Now() - start;
        // SKIP_LOCKED: "skipping vacuum of ... --- lock not available".
        return !absl::StrContains(notices.text(), "skipping");
      });
      if (!ran.ok()) return ran.status();
      if (*ran) {
        v.outcome = TableVacuum::Outcome::kVacuumed;
        vacuumed_at_horizon_[d.table] = d.horizon;
        // Neither is judged on one vacuum's count of dead rows, nor by a
        // role that may not read the tables' rows; a rebuild or a shrink
        // that failed fails no vacuum: the keeper says why.
        const std::optional<int64_t> churn = Churn(d.table, d.dead);
        if (churn.has_value() && d.readable) {
          auto rebuilt = RebuildBloatedIndexes(d.table, *churn);
          if (rebuilt.ok()) {
            v.rebuilt = *std::move(rebuilt);
          } else {
            v.rebuild_error = rebuilt.status();
          }
          auto shrunk = ShrinkBloatedTable(d.table, *churn);
          if (shrunk.ok()) {
            v.shrunk = *shrunk;
          } else {
            v.shrink_error = shrunk.status();
          }
        }
      } else {
        v.outcome = TableVacuum::Outcome::kBusy;
        v.took = absl::ZeroDuration();
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

namespace {

// An index is rebuilt when it is at least this big and this many times what
// its entries need (bloated_indexes.sql): room for the half-empty pages a
// churning btree keeps, far below what a held snapshot leaves (items_ready
// measured 11 KB an entry after a minute's hold at 20k items/s, issue 47).
constexpr int64_t kRebuildMinBytes = 16 << 20;
constexpr double kRebuildFactor = 4;
// A table is shrunk when it is at least as big, and this many times what its
// rows need (bloated_table.sql): a busy queue's table was 1.1 times that at
// 5,000 items/s and about 1.9 at 20,000 (there with the row width seen at
// 5,000: the table had no statistics), and one after a minute's hold beside
// 20,000 items/s 3 times its size before.
constexpr double kShrinkFactor = 3;
// How long after a shrink that gave back under a sixteenth of the table the
// next is tried.
constexpr absl::Duration kShrinkRetry = absl::Minutes(1);
// How long a rebuild waits for a lock, or for a snapshot older than its own
// to go, and how long one statement of it may take: past either it gives
// up until the next vacuum (the keeper's connection, which the collector
// and the firer share, is not held longer).
constexpr char kRebuildTimeouts[] = "SET lock_timeout = '5s'; SET statement_timeout = '20s'";
constexpr char kRebuildTimeoutsReset[] = "RESET lock_timeout; RESET statement_timeout";
constexpr char kRebuildLock[] = "hashtextextended('partq.rebuild:' || $1, 0)";

// A rebuild's statement stopped by kRebuildTimeouts (or a cancel).
bool GaveUp(const pqxx::sql_error& e) {
  return e.sqlstate() == "55P03" || e.sqlstate() == "57014" ||
         absl::StrContains(e.what(), "lock timeout") ||
         absl::StrContains(e.what(), "statement timeout");
}

}  // namespace

// The rows that die between two vacuums of `table` at the rate the queue
// runs now, this vacuum's `dead` counted: the more of its last two
// vacuums' (which rows a vacuum finds dead varies with when it comes: the
// keeper's rounds and autovacuum's interleave). The first vacuum after a
// held snapshot counts every row that died under it, and so the table is
// measured two vacuums later. Nullopt at this store's first vacuum of it
// (one count alone may be far under the churn).
std::optional<int64_t> PgStore::Churn(const std::string& table, int64_t dead) {
  auto [last, first] = vacuumed_dead_.try_emplace(table, dead);
  if (first) return std::nullopt;
  const int64_t churn = std::max(dead, last->second);
  last->second = dead;
  return churn;
}

absl::StatusOr<std::optional<TableVacuum::Shrink>> PgStore::ShrinkBloatedTable(
    const std::string& table, int64_t churn) {
  return Run(absl::StrCat("hand back the empty pages of ", table),
             [&]() -> absl::StatusOr<std::optional<TableVacuum::Shrink>> {
               // A shrink that gave little back (the table's end in use, or
               // its lock not to be had) is not tried again for a while:
               // each try may spend 5 s asking for the lock.
               auto last = shrink_tried_.find(table);
               const absl::Time now = absl::Now();
               if (last != shrink_tried_.end() && now >= last->second &&
                   now - last->second < kShrinkRetry) {
                 return std::nullopt;
               }
               pqxx::nontransaction tx(*conn_);
               const pqxx::result bloated = Exec(tx, "bloated_table", table, churn,
                                                 kRebuildMinBytes, kShrinkFactor, options_.schema);
               if (bloated.empty()) return std::nullopt;
               TableVacuum::Shrink s;
               s.bytes_before = bloated[0][0].as<int64_t>();
               // TRUNCATE overrides the table's vacuum_truncate = false.
               const std::string name = absl::StrCat(qschema_, ".", table);
               NoticeKeeper notices(*conn_);
               tx.exec0(absl::StrCat("VACUUM (SKIP_LOCKED, TRUNCATE) ", name));
               s.took = absl::Now() - now;
               // SKIP_LOCKED: another vacuum had the table; the next round asks again.
               if (absl::StrContains(notices.text(), "skipping")) return std::nullopt;
               s.bytes_after =
                   tx.exec_params1("SELECT pg_relation_size($1::regclass)", name)[0].as<int64_t>();
               if (s.bytes_before - s.bytes_after < s.bytes_before / 16) {
                 shrink_tried_[table] = now;
               } else {
                 shrink_tried_.erase(table);
               }
               return s;
             });
}

// Drops what rebuilds that gave up or died left of `table`'s indexes
// (leftover_rebuilds.sql); false when a drop gave up.
bool PgStore::DropUnfinishedRebuilds(pqxx::transaction_base& tx, const std::string& table) {
  for (const pqxx::row& r : Exec(tx, "leftover_rebuilds", options_.schema, table)) {
    try {
      tx.exec0(absl::StrCat("DROP INDEX CONCURRENTLY IF EXISTS ", qschema_, ".",
                            tx.quote_name(r[0].as<std::string>())));
    } catch (const pqxx::sql_error& e) {
      if (!GaveUp(e)) throw;
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::vector<TableVacuum::Rebuild>> PgStore::RebuildBloatedIndexes(
    const std::string& table, int64_t churn) {
  // Through a transaction pooler the SETs of the timeouts could reach
  // another client's server connection: no rebuild there.
  if (options_.transaction_pooler) return std::vector<TableVacuum::Rebuild>{};
  return Run(
      absl::StrCat("rebuild the bloated indexes of ", table),
      [&]() -> absl::StatusOr<std::vector<TableVacuum::Rebuild>> {
        std::vector<TableVacuum::Rebuild> out;
        pqxx::nontransaction tx(*conn_);
        const pqxx::result bloated =
            Exec(tx, "bloated_indexes", options_.schema, table, kRebuildMinBytes, kRebuildFactor,
                 churn);
        if (bloated.empty() && Exec(tx, "leftover_rebuilds", options_.schema, table).empty()) {
          return out;
        }
        // One keeper of the schema at a time (each queue has one).
        if (!tx.exec_params1(absl::StrCat("SELECT pg_try_advisory_lock(", kRebuildLock, ")"),
                             options_.schema)[0]
                 .as<bool>()) {
          return out;
        }
        // The connection goes on serving the collector and the firer:
        // whatever happens, it keeps neither the lock nor the timeouts
        // (a connection that broke has lost both).
        auto restore = absl::MakeCleanup([&] {
          try {
            tx.exec0(kRebuildTimeoutsReset);
            tx.exec_params(absl::StrCat("SELECT pg_advisory_unlock(", kRebuildLock, ")"),
                           options_.schema);
          } catch (const std::exception&) {
          }
        });
        tx.exec0(kRebuildTimeouts);
        if (!DropUnfinishedRebuilds(tx, table)) return out;
        for (const pqxx::row& r : bloated) {
          TableVacuum::Rebuild b;
          b.index = r[0].as<std::string>();
          b.bytes_before = r[1].as<int64_t>();
          const std::string index = absl::StrCat(qschema_, ".", tx.quote_name(b.index));
          const absl::Time start = absl::Now();
          try {
            tx.exec0(absl::StrCat("REINDEX INDEX CONCURRENTLY ", index));
          } catch (const pqxx::sql_error& e) {
            if (!GaveUp(e)) throw;
            // An unfinished new index would be kept up to date by
            // every write until dropped: it goes now if it can.
            DropUnfinishedRebuilds(tx, table);
            break;
          }
          b.took = absl::Now() - start;
          b.bytes_after =
              tx.exec_params1("SELECT pg_relation_size($1::regclass)", index)[0].as<int64_t>();
          out.push_back(std::move(b));
        }
        return out;
      });
}

// --- in the caller's transaction ---------------------------------------------------------

}  // namespace pg_internal

absl::StatusOr<EnqueueResult> EnqueueInTx(pqxx::transaction_base& tx, const PgOptions& options,
                                          absl::string_view queue, const NewItem& item) {
  if (absl::Status st = ValidateSchemaName(options.schema); !st.ok()) return st;
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  absl::StatusOr<pg_internal::EnqueueArgs> args =
      pg_internal::CheckNewItem(item, options.max_payload_bytes);
  if (!args.ok()) return args.status();
  try {
    // Unprepared: the connection is the caller's, and so are its statement names.
    const bool puts = !tx.exec_params1(
                             "SELECT coalesce(has_table_privilege(to_regclass($1), "
                             "'INSERT'), true)",
                             WithSchema("{schema}.items", options.schema))[0]
                           .as<bool>();
    return pg_internal::EnqueueIn(tx, false, puts, options.schema, queue, item, *args);
  } catch (...) {
    return pg_internal::ClassifyException(std::current_exception(),
                                          absl::StrCat("enqueue into \"", queue, "\""),
                                          options.schema)
        .status;
  }
}

}  // namespace partq
