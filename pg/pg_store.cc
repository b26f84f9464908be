// PgStore: connection handling, error mapping, schema, queues and sessions.
// Items live in pg_store_items.cc, the SQL in sql/ (pg_store_sql.cc composes it).
#include "pg/pg_store.h"

#include <libpq-fe.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/utf8.h"
#include "partitioner/part.h"
#include "pg/dsn.h"
#include "pg/migrations.h"
#include "pg/pg_store_internal.h"

namespace partq {

std::string ChannelFor(absl::string_view schema, absl::string_view queue) {
  // Two murmur2 hashes (stable across processes and builds, unlike
  // absl::Hash) of differently prefixed inputs make 64 bits: a channel name
  // of fixed length whatever the names, and a collision only costs a
  // spurious wake-up.
  const std::string full = absl::StrCat(schema, ".", queue);
  const uint32_t hi = Murmur2(full);
  const uint32_t lo = Murmur2(absl::StrCat("partq:", full));
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%08x%08x", hi, lo);
  return absl::StrCat("partq_", buf);
}

namespace pg_internal {

// --- errors -----------------------------------------------------------------------

std::string CleanMessage(absl::string_view message) {
  absl::string_view m = message;
  // The server's CONTEXT lines name partq's own PL/pgSQL functions (the SQL
  // API raising a user's error), which says nothing to the user.
  if (size_t at = m.find("\nCONTEXT:"); at != absl::string_view::npos) m = m.substr(0, at);
  m = absl::StripAsciiWhitespace(m);
  for (absl::string_view prefix : {"ERROR:", "FATAL:", "PANIC:"}) {
    if (absl::ConsumePrefix(&m, prefix)) {
      m = absl::StripLeadingAsciiWhitespace(m);
      break;
    }
  }
  return std::string(m);
}

std::string SchemaFlag(absl::string_view schema) {
  return schema == PgOptions().schema ? "" : absl::StrCat(" --schema ", schema);
}

namespace {

// "`partq migrate`" as the user must type it to fix a missing or old schema.
std::string MigrateCommand(absl::string_view schema) {
  return absl::StrCat("`partq migrate", SchemaFlag(schema), "`");
}

absl::Status FromSqlState(absl::string_view sqlstate, const std::string& prefix,
                          const std::string& msg, absl::string_view schema, bool* drop) {
  auto text = [&](absl::string_view extra) { return absl::StrCat(prefix, extra, msg); };
  absl::string_view cls = sqlstate.substr(0, 2);
  if (cls == "08" || sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03") {
    *drop = true;
    return absl::UnavailableError(text("database connection lost: "));
  }
  if (sqlstate == "40001" || sqlstate == "40P01") {
    return absl::AbortedError(text("transaction conflict, retry: "));
  }
  if (sqlstate == "42P01" || sqlstate == "3F000" || sqlstate == "42883") {
    // A missing relation in our schema means `partq migrate` never ran there.
    if (!schema.empty() && absl::StrContains(msg, absl::StrCat(schema, "."))) {
      return absl::FailedPreconditionError(absl::StrCat(prefix, "partq schema \"", schema,
                                                        "\" not found (or incomplete): run ",
                                                        MigrateCommand(schema), " (", msg, ")"));
    }
    if (!schema.empty() && sqlstate == "3F000") {
      return absl::FailedPreconditionError(absl::StrCat(prefix, "partq schema \"", schema,
                                                        "\" not found: run ",
                                                        MigrateCommand(schema), " (", msg, ")"));
    }
    return absl::InternalError(text(""));
  }
  if (sqlstate == "42P05" || sqlstate == "26000") {
    // A prepared statement of partq's that exists already, or no longer:
    // every statement went to a server connection the connection did not
    // prepare it on, which only a pooler in transaction mode does.
    *drop = true;
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, msg,
        " (partq's prepared statements vanish or exist already from one statement to the next: "
        "the connection goes through a pooler in transaction mode, such as PgBouncer's "
        "pool_mode = transaction; run partq with --pool-mode transaction or "
        "PARTQ_POOL_MODE=transaction, PgOptions::transaction_pooler in C++)"));
  }
  // The SQL API's own errors (migrations 6 and 12): an unknown queue or
  // group, a group that has ended, a group with other end work.
  if (sqlstate == "42704" &&
      (absl::StartsWith(msg, "unknown queue") || absl::StartsWith(msg, "unknown group"))) {
    return absl::NotFoundError(text(""));
  }
  if (sqlstate == "55000") return absl::FailedPreconditionError(text(""));
  if (sqlstate == "23505" || sqlstate == "42710") return absl::AlreadyExistsError(text(""));
  if (sqlstate == "23503") return absl::FailedPreconditionError(text(""));
  if (cls == "22") return absl::InvalidArgumentError(text("invalid value: "));
  if (sqlstate == "57014") return absl::DeadlineExceededError(text("statement canceled: "));
  if (sqlstate == "42501") return absl::PermissionDeniedError(text(""));
  if (cls == "53") {
    if (sqlstate == "53300") *drop = true;
    return absl::ResourceExhaustedError(text("database out of resources: "));
  }
  return absl::InternalError(text(""));
}

}  // namespace

PgError ClassifyException(std::exception_ptr error, absl::string_view what,
                          absl::string_view schema) {
  const std::string prefix = what.empty() ? std::string() : absl::StrCat(what, ": ");
  PgError out;
  try {
    std::rethrow_exception(error);
  } catch (const pqxx::in_doubt_error& e) {
    out.drop_connection = true;
    out.status = MarkOutcomeUnknown(absl::UnavailableError(
        absl::StrCat(prefix,
                     "the connection broke during COMMIT; the transaction may or may not have "
                     "committed: ",
                     CleanMessage(e.what()))));
  } catch (const pqxx::broken_connection& e) {
    out.drop_connection = true;
    out.status = absl::UnavailableError(
        absl::StrCat(prefix, "database connection lost: ", CleanMessage(e.what())));
  } catch (const pqxx::statement_completion_unknown& e) {
    out.drop_connection = true;
    out.status = absl::UnavailableError(absl::StrCat(
        prefix,
        "the connection broke mid-statement; its outcome is unknown: ", CleanMessage(e.what())));
  } catch (const pqxx::serialization_failure& e) {
    out.status = absl::AbortedError(
        absl::StrCat(prefix, "serialization failure, retry: ", CleanMessage(e.what())));
  } catch (const pqxx::deadlock_detected& e) {
    out.status =
        absl::AbortedError(absl::StrCat(prefix, "deadlock, retry: ", CleanMessage(e.what())));
  } catch (const pqxx::insufficient_privilege& e) {
    // libpqxx 6.4 leaves sqlstate() empty in this subclass.
    out.status =
        FromSqlState("42501", prefix, CleanMessage(e.what()), schema, &out.drop_connection);
  } catch (const pqxx::sql_error& e) {
    out.status =
        FromSqlState(e.sqlstate(), prefix, CleanMessage(e.what()), schema, &out.drop_connection);
  } catch (const std::exception& e) {
    out.status = absl::InternalError(absl::StrCat(prefix, CleanMessage(e.what())));
  } catch (...) {
    out.status = absl::InternalError(absl::StrCat(prefix, "unknown exception"));
  }
  return out;
}

absl::Status ClassifyConnectError(absl::string_view message) {
  const std::string msg = CleanMessage(message);
  auto has = [&](absl::string_view s) { return absl::StrContains(msg, s); };
  // libpq's own parsing of the connection string or URI.
  if (has("connection info string") || has("invalid connection option") || has("URI") ||
      has("percent-encoded") || has("invalid integer value") || has("invalid port number") ||
      (has("invalid ") && has(" value: \""))) {
    return absl::InvalidArgumentError(absl::StrCat("malformed connection string: ", msg));
  }
  if (has("password authentication failed") || has("no password supplied") ||
      has("authentication failed") || (has("role \"") && has("does not exist"))) {
    return absl::UnauthenticatedError(absl::StrCat("PostgreSQL rejected the login: ", msg));
  }
  if (has("no pg_hba.conf entry") || has("permission denied")) {
    return absl::PermissionDeniedError(absl::StrCat("PostgreSQL refused the connection: ", msg));
  }
  if (has("database \"") && has("does not exist")) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot connect to PostgreSQL: ", msg, " (create it or fix --dsn)"));
  }
  if (has("timeout expired")) {
    return absl::UnavailableError(absl::StrCat(
        "cannot connect to PostgreSQL: ", msg,
        " (no answer within connect_timeout; set it in the DSN or $PGCONNECT_TIMEOUT)"));
  }
  return absl::UnavailableError(
      absl::StrCat("cannot connect to PostgreSQL: ", msg,
                   " (is the server up at that address? give its DSN with --dsn or $PARTQ_DSN)"));
}

// --- encoding ---------------------------------------------------------------------

bool DecodeBytea(absl::string_view text, std::string* out) {
  if (!absl::ConsumePrefix(&text, "\\x") || text.size() % 2 != 0) return false;
  // HexStringToBytes assumes well-formed input.
  if (!std::all_of(text.begin(), text.end(),
                   [](char c) { return absl::ascii_isxdigit(static_cast<unsigned char>(c)); })) {
    return false;
  }
  *out = absl::HexStringToBytes(text);
  return true;
}

std::string TextArray(const std::vector<std::optional<std::string>>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    if (!values[i]) {
      out += "NULL";
      continue;
    }
    out += '"';
    for (char c : *values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

std::string IntArray(const std::vector<int>& values) {
  return absl::StrCat("{", absl::StrJoin(values, ","), "}");
}
std::string IntArray(const std::vector<int64_t>& values) {
  return absl::StrCat("{", absl::StrJoin(values, ","), "}");
}
std::string IntArray(const std::vector<std::optional<int>>& values) {
  return absl::StrCat("{",
                      absl::StrJoin(values, ",",
                                    [](std::string* out, const std::optional<int>& v) {
                                      absl::StrAppend(out, v ? absl::StrCat(*v) : "NULL");
                                    }),
                      "}");
}
std::optional<int> AttemptsBefore(const Item& item) {
  if (item.attempts < 1) return std::nullopt;
  return item.attempts - 1;
}
bool ParsePartKey(absl::string_view text, int* part, std::optional<ItemKey>* key) {
  std::vector<absl::string_view> f = absl::StrSplit(text, ':');
  if (!absl::SimpleAtoi(f[0], part)) return false;
  ItemKey k;
  key->reset();
  if (f.size() == 3 && absl::SimpleAtoi(f[1], &k.priority) && absl::SimpleAtoi(f[2], &k.id)) {
    *key = k;
  }
  return true;
}

std::string BoolArray(const std::vector<bool>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += values[i] ? 't' : 'f';
  }
  out += '}';
  return out;
}

int64_t Micros(absl::Duration d) { return absl::ToInt64Microseconds(d); }

int64_t KeyHash(absl::string_view key) { return Murmur2(key) & 0x7fffffffu; }

// --- connection ---------------------------------------------------------------------

const char* BeginSql(bool local_settings) {
  static const std::string with = absl::StrCat("BEGIN; ", kLocalSettings);
  return local_settings ? with.c_str() : "BEGIN";
}

namespace {

// A libpq connection string: `dsn` (key=value words or a URI) with
// application_name set to `name`, written as key=value words (libpq parses
// `dsn`; what it cannot parse is left as it is, for the connection to refuse
// with libpq's message).
std::string WithApplicationName(const std::string& dsn, absl::string_view name) {
  // Values in single quotes, with backslashes and quotes escaped, as libpq reads them.
  auto quoted = [](absl::string_view v) {
    return absl::StrCat("'", absl::StrReplaceAll(v, {{"\\", "\\\\"}, {"'", "\\'"}}), "'");
  };
  std::string out;
  if (!dsn.empty()) {
    char* error = nullptr;
    PQconninfoOption* options = PQconninfoParse(dsn.c_str(), &error);
    if (options == nullptr) {
      PQfreemem(error);
      return dsn;
    }
    for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
      if (o->val == nullptr || absl::string_view(o->keyword) == "application_name") continue;
      absl::StrAppend(&out, o->keyword, "=", quoted(o->val), " ");
    }
    PQconninfoFree(options);
  }
  absl::StrAppend(&out, "application_name=", quoted(name));
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PgConnection>> OpenConnection(const PgOptions& options) {
  std::unique_ptr<PgConnection> conn;
  try {
    // Through a transaction pooler a session setting would stay on one server
    // connection (and reach other clients of it), so application_name goes
    // in the startup packet, which PgBouncer passes on to each server
    // connection it lends this client; jit is set per transaction (PgWork,
    // BeginSql).
    conn = std::make_unique<PgConnection>(
        options.transaction_pooler ? WithApplicationName(options.dsn, options.application_name)
                                   : options.dsn);
  } catch (const pqxx::broken_connection& e) {
    return ClassifyConnectError(RedactDsnPasswords(e.what(), options.dsn));
  } catch (const std::exception& e) {
    return ClassifyConnectError(RedactDsnPasswords(e.what(), options.dsn));
  }
  if (options.transaction_pooler) return conn;
  try {
    // Set here rather than in the DSN, which may be a URI or key=value text.
    // JIT off: partq's statements are short, and their plans' costs follow
    // the items table's statistics; once those describe a backlog of
    // millions, PostgreSQL's default thresholds (jit_above_cost 100000)
    // made every ack and claim compile 131 functions with inlining and
    // optimization, 2-3 s of CPU each, so the backlog grew and the queue
    // stopped (issue 27's soak, found with auto_explain). A handler that
    // wants JIT for its own statements can SET LOCAL jit = on.
    pqxx::nontransaction tx(*conn);
    tx.exec_params(
        "SELECT set_config('application_name', $1, false), set_config('jit', 'off', false)",
        options.application_name);
  } catch (...) {
    return ClassifyException(std::current_exception(), "connecting", "").status;
  }
  return conn;
}

PgStore::PgStore(PgOptions options)
    : options_(std::move(options)),
      qschema_(WithSchema("{schema}", options_.schema)),
      handler_statements_(/*named=*/!options_.transaction_pooler) {
  DefinePipeline();
}

void PgStore::DefinePipeline() {
  pipeline_ = Pipeline();
  pipeline_.SetUnnamed(options_.transaction_pooler);
  for (auto& [name, sql] : PipelinedStatements(options_.schema, confined_)) {
    pipeline_.Define(name, std::move(sql));
  }
}

namespace {

// Whether the role `conn` logged in as may not delete from or update the
// schema's items itself (a worker role since migrations 39 and 40): its
// statements then write through the schema's rules and functions, and its
// new items go in through put_items() (migration 41). Not for a schema not
// made yet.
bool WritesThroughRules(PgConnection& conn, absl::string_view qschema) {
  pqxx::nontransaction tx(conn);
  return tx
      .exec_params1(
          "SELECT NOT coalesce(has_table_privilege(to_regclass($1), 'DELETE') AND "
          "has_table_privilege(to_regclass($1), 'UPDATE'), true)",
          absl::StrCat(qschema, ".items"))[0]
      .as<bool>();
}

}  // namespace

pqxx::transaction_base& PgStore::Autocommit() {
  if (options_.transaction_pooler) {
    autocommit_ = std::make_unique<PgWork<>>(*conn_, /*local_settings=*/true);
  } else {
    autocommit_ = std::make_unique<pqxx::nontransaction>(*conn_);
  }
  return *autocommit_;
}

// With a listener: under ConnUse, so a Wait under way has ended and the next
// one sees `gone`.
PgStore::~PgStore() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (shared_ == nullptr) return;
  ConnUse use(shared_.get(), &use_depth_);
  DropConnection();
  shared_->gone = true;
}

SharedConn::SharedConn() : wake_fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

SharedConn::~SharedConn() {
  if (wake_fd >= 0) close(wake_fd);
}

ConnUse::ConnUse(SharedConn* shared, int* depth) : shared_(shared), depth_(depth) {
  if (shared_ == nullptr || (*depth_)++ > 0) return;
  shared_->callers.fetch_add(1);
  const uint64_t one = 1;
  // Ends a Wait under way; a token nobody reads only makes the next Wait
  // return early once.
  if (write(shared_->wake_fd, &one, sizeof(one)) < 0) {
    // EAGAIN: the counter is full of tokens already, which wakes it as well.
  }
  shared_->mu.Lock();
  shared_->callers.fetch_sub(1);
}

ConnUse::~ConnUse() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (shared_ == nullptr || --(*depth_) > 0) return;
  // libpqxx reconnects a broken connection underneath by itself (and
  // LISTENs again): what was sent meanwhile is lost, as after a reconnect
  // of ours.
  if (shared_->conn != nullptr && shared_->conn->generation() != shared_->generation) {
    shared_->generation = shared_->conn->generation();
    shared_->missed = true;
  }
  shared_->mu.Unlock();
}

// With a listener, the caller holds shared_->mu (ConnUse).
void PgStore::DropConnection() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Closed first, so the receiver's removal sends no UNLISTEN down a
  // connection that may be stalled.
  if (conn_ != nullptr && receiver_ != nullptr) conn_->disconnect();
  receiver_.reset();
  conn_.reset();
  if (shared_ != nullptr) shared_->conn = nullptr;
}

// With a listener, the caller holds shared_->mu (Run's ConnUse).
absl::Status PgStore::EnsureConnected() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (conn_ != nullptr) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<PgConnection>> conn = OpenConnection(options_);
  if (!conn.ok()) return conn.status();
  try {
    if (const bool confined = WritesThroughRules(**conn, qschema_); confined != confined_) {
      confined_ = confined;
      DefinePipeline();
    }
    // Definitions only: libpqxx sends each Parse on first use.
    unprepared_.clear();
    for (Statement& st : PreparedStatements(options_.schema, confined_)) {
      // Through a transaction pooler the next statement may run on another
      // server connection, where a name prepared here does not exist.
      if (st.prepared && !options_.transaction_pooler) {
        (*conn)->prepare(st.name, st.sql);
      } else {
        unprepared_.emplace(st.name, std::move(st.sql));
      }
    }
  } catch (...) {
    return ClassifyException(std::current_exception(), "preparing statements", "").status;
  }
  conn_ = std::move(*conn);
  handler_statements_.Clear();  // prepared on the old connection
  begun_ = false;
  if (shared_ != nullptr) {
    // A listener shares the connection: listen on the new one too. What
    // was sent while there was none is lost, which the listener is told.
    try {
      ListenOnConnection();
    } catch (...) {
      PgError e = ClassifyException(std::current_exception(), "listen", options_.schema);
      DropConnection();
      return e.status;
    }
    shared_->missed = true;
  }
  return absl::OkStatus();
}

absl::Status UnknownQueue(absl::string_view name, absl::string_view schema, bool suggest_create) {
  // The schema, too: a queue created under another --schema is "unknown"
  // here, and creating it again here would make a second one.
  const std::string unknown =
      absl::StrCat("unknown queue \"", name, "\" in schema \"", schema, "\"");
  if (!suggest_create) return absl::NotFoundError(unknown);
  return absl::NotFoundError(absl::StrCat(unknown, " (create it with: partq queue create ", name,
                                          " --parts N", SchemaFlag(schema), ")"));
}

absl::Status PgStore::Fail(absl::string_view what, std::exception_ptr error) {
  PgError e = ClassifyException(error, what, options_.schema);
  // Some losses surface as a plain SQL error; the connection state tells.
  const bool broken = conn_ != nullptr && !conn_->is_open();
  if (e.drop_connection || broken) DropConnection();
  if (broken && e.status.code() != absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(
        absl::StrCat(what, ": database connection lost: ", e.status.message()));
  }
  return e.status;
}

// --- schema ---------------------------------------------------------------------------

absl::Status PgStore::Migrate() { return MigrateTo(kSchemaVersion); }

namespace {

// Taken first in every migrating transaction: until it is held nothing else
// may look at the schema, so 20 processes migrating at once run one after
// another, and each later one sees the schema the earlier ones committed.
constexpr char kMigrateLockKey[] = "hashtextextended('partq.migrate:' || $1, 0)";

// Who holds the migration lock of schema $1 (no row: it went meanwhile). A
// bigint advisory lock shows in pg_locks as its high and low halves
// (classid, objid) with objsubid 1; a prepared transaction's has no backend.
// What pg_stat_activity hides from a role without pg_read_all_stats is
// "unknown".
constexpr char kMigrateLockHolder[] = R"(
SELECT coalesce(a.pid::text, 'none (a prepared transaction: see pg_prepared_xacts)'),
       coalesce(a.usename, 'unknown'), coalesce(a.application_name, ''),
       CASE WHEN a.client_addr IS NOT NULL THEN host(a.client_addr)
            WHEN a.client_port = -1 THEN 'a local socket' ELSE 'unknown' END,
       coalesce(a.state, 'unknown'), l.pid IS NOT NULL
FROM (SELECT hashtextextended('partq.migrate:' || $1, 0) AS k) key
JOIN pg_locks l
  ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
 AND l.classid = ((key.k >> 32) & 4294967295)::oid AND l.objid = (key.k & 4294967295)::oid
LEFT JOIN pg_stat_activity a ON a.pid = l.pid
LIMIT 1)";

// How long a migrate waits for its lock before it says who holds it: a
// fleet migrating at once takes turns of milliseconds, and says nothing.
constexpr absl::Duration kMigrateLockQuiet = absl::Seconds(2);

// Says on stderr who holds the schema's migration lock (kMigrateLockHolder).
void SayWhoHoldsTheMigrateLock(pqxx::transaction_base& tx, const std::string& schema) {
  const pqxx::result holder = tx.exec_params(kMigrateLockHolder, schema);
  if (holder.empty()) return;
  const pqxx::row& h = holder[0];
  const std::string app = h[2].as<std::string>();
  if (app == "partq") {
    std::fprintf(stderr,
                 "partq: waiting for the migration lock of schema %s: another partq migrate "
                 "holds it (backend %s, user %s)\n",
                 Quoted(schema).c_str(), h[0].c_str(), Quoted(h[1].c_str()).c_str());
    return;
  }
  std::fprintf(stderr,
               "partq: waiting for the migration lock of schema %s, held by backend %s (user %s, "
               "application %s, from %s, state %s): any role that can connect may take it; if "
               "that is not a migrate, end it%s%s%s\n",
               Quoted(schema).c_str(), h[0].c_str(), Quoted(h[1].c_str()).c_str(),
               Quoted(app).c_str(), Quoted(h[3].c_str()).c_str(), Quoted(h[4].c_str()).c_str(),
               h[5].as<bool>() ? " with SELECT pg_terminate_backend(" : " (ROLLBACK PREPARED)",
               h[5].as<bool>() ? h[0].c_str() : "", h[5].as<bool>() ? ")" : "");
}

// Takes the schema's migration lock (kMigrateLockKey) for the rest of `tx`.
// Any role that can connect may take the same advisory lock, and a partq
// migrate that simply waited would hang without a word (issue 48): after
// kMigrateLockQuiet, stderr says who holds it (once per `*said`), then the
// migrate waits.
void TakeMigrateLock(pqxx::transaction_base& tx, const std::string& schema, bool* said) {
  const std::string try_lock =
      absl::StrCat("SELECT pg_try_advisory_xact_lock(", kMigrateLockKey, ")");
  const absl::Time quiet_until = absl::Now() + kMigrateLockQuiet;
  do {
    if (tx.exec_params(try_lock, schema)[0][0].as<bool>()) return;
    absl::SleepFor(absl::Milliseconds(20));
  } while (absl::Now() < quiet_until);
  if (!*said) {
    SayWhoHoldsTheMigrateLock(tx, schema);
    *said = true;
  }
  tx.exec_params(absl::StrCat("SELECT pg_advisory_xact_lock(", kMigrateLockKey, ")"), schema);
}

}  // namespace

absl::StatusOr<int> PgStore::SchemaVersionLocked(pqxx::transaction_base& tx) {
  const int current = tx.exec(WithSchema(
      "SELECT coalesce(max(version), 0) FROM {schema}.schema_migrations", options_.schema))[0][0]
                          .as<int>();
  if (current > kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("partq schema \"", options_.schema, "\" is at version ", current,
                     ", newer than this partq (", kSchemaVersion, "): upgrade partq"));
  }
  return current;
}

absl::Status PgStore::MigrateTo(int to_version) {
  if (to_version < 1 || to_version > kSchemaVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("no schema version ", to_version, ": this partq knows 1..", kSchemaVersion));
  }
  bool said = false;  // who holds the lock, once
  absl::Status st = Run("migrate", [&]() -> absl::Status {
    PgWork<> tx(*conn_, options_.transaction_pooler);
    TakeMigrateLock(tx, options_.schema, &said);
    // Checked first so a user without CREATE on the database can still run
    // an up-to-date schema.
    if (tx.exec_params("SELECT 1 FROM pg_namespace WHERE nspname = $1", options_.schema).empty()) {
      tx.exec(WithSchema("CREATE SCHEMA {schema}", options_.schema));
    }
    tx.exec(SchemaBootstrapSql(options_.schema));
    tx.commit();
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  // Each migration in a transaction of its own (as River and Flyway apply
  // theirs): a failure leaves the schema at the last version that committed,
  // and the next run goes on from there.
  for (const Migration& m : Migrations()) {
    if (m.version > to_version) break;
    st = Run("migrate", [&]() -> absl::Status {
      PgWork<> tx(*conn_, options_.transaction_pooler);
      TakeMigrateLock(tx, options_.schema, &said);
      absl::StatusOr<int> current = SchemaVersionLocked(tx);
      if (!current.ok()) return current.status();
      if (m.version <= *current) return absl::OkStatus();
      tx.exec(WithSchema(m.sql, options_.schema));
      tx.exec_params(WithSchema("INSERT INTO {schema}.schema_migrations (version, description) "
                                "VALUES ($1, $2)",
                                options_.schema),
                     m.version, m.description);
      tx.commit();
      return absl::OkStatus();
    });
    if (!st.ok()) {
      return absl::Status(st.code(), absl::StrCat("migration ", m.version, " (pg/", m.file,
                                                  "): ", st.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<AppliedMigration>> PgStore::MigrationStatus() {
  std::vector<AppliedMigration> out;
  absl::Status st = Run("reading the schema's migrations", [&]() -> absl::Status {
    out.clear();
    pqxx::transaction_base& tx = Autocommit();
    std::map<int, std::pair<std::string, int64_t>> applied;
    if (tx.exec_params("SELECT to_regclass(quote_ident($1) || '.schema_migrations') IS NOT NULL",
                       options_.schema)[0][0]
            .as<bool>()) {
      for (const pqxx::row& r :
           tx.exec(WithSchema("SELECT version, description, "
                              "(extract(epoch FROM applied_at) * 1000000)::bigint "
                              "FROM {schema}.schema_migrations ORDER BY version",
                              options_.schema))) {
        applied[r[0].as<int>()] = {r[1].as<std::string>(), r[2].as<int64_t>()};
      }
    }
    for (const Migration& m : Migrations()) {
      AppliedMigration a{m.version, m.description, std::nullopt};
      if (auto it = applied.find(m.version); it != applied.end()) {
        a.applied_at = absl::FromUnixMicros(it->second.second);
        applied.erase(it);
      }
      out.push_back(std::move(a));
    }
    // Versions this binary does not know (a newer partq migrated the schema).
    for (const auto& [version, row] : applied) {
      out.push_back({version, row.first, absl::FromUnixMicros(row.second), /*known=*/false});
    }
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  return out;
}

absl::Status PgStore::CheckSchema() {
  return Run("checking the schema", [&]() -> absl::Status {
    pqxx::transaction_base& tx = Autocommit();
    pqxx::result r = tx.exec_params(
        "SELECT to_regclass(quote_ident($1) || '.schema_migrations') IS NOT NULL", options_.schema);
    if (!r[0][0].as<bool>()) {
      return absl::FailedPreconditionError(absl::StrCat("partq schema \"", options_.schema,
                                                        "\" not found: run ",
                                                        MigrateCommand(options_.schema)));
    }
    const int version = tx.exec(WithSchema(
        "SELECT coalesce(max(version), 0) FROM {schema}.schema_migrations", options_.schema))[0][0]
                            .as<int>();
    if (version > kSchemaVersion) {
      return absl::FailedPreconditionError(
          absl::StrCat("partq schema \"", options_.schema, "\" is at version ", version,
                       ", newer than this partq (", kSchemaVersion, "): upgrade partq"));
    }
    if (version < kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          "partq schema \"", options_.schema, "\" is at version ", version,
          ", older than this partq (", kSchemaVersion, "): run ", MigrateCommand(options_.schema)));
    }
    return absl::OkStatus();
  });
}

// --- queues -----------------------------------------------------------------------------

namespace {

const char* AssignmentName(AssignmentKind k) {
  return k == AssignmentKind::kSticky ? "sticky" : "lexical";
}

// QueueConfig::fair_by as the queues table holds it (NULL: none).
std::optional<std::string> FairByText(FairBy fair_by) {
  if (fair_by == FairBy::kNone) return std::nullopt;
  return std::string(FairByName(fair_by));
}

// QueueConfig::key_concurrency as the queues table holds it (NULL: none).
std::optional<int> KeyConcurrencyValue(int n) {
  if (n == 0) return std::nullopt;
  return n;
}

QueueConfig QueueFromRow(const pqxx::row& r) {
  QueueConfig c;
  c.name = r[0].as<std::string>();
  c.parts = r[1].as<int>();
  c.assignment =
      r[2].as<std::string>() == "sticky" ? AssignmentKind::kSticky : AssignmentKind::kLexical;
  c.session_ttl = absl::Microseconds(r[3].as<int64_t>());
  c.max_attempts = r[4].as<int>();
  c.ordered = r[5].as<bool>();
  c.dlq_topic = Text(r[6]);
  c.paused = r[7].as<bool>();
  if (!r[8].is_null()) c.rate = r[8].as<double>();
  for (absl::string_view n : absl::StrSplit(r[9].as<std::string>(), ',', absl::SkipEmpty())) {
    int count = 0;
    if (absl::SimpleAtoi(n, &count)) c.grown_from.push_back(count);
  }
  // NULL is none; the table's CHECK allows only 'key' besides.
  c.fair_by = r[10].is_null() ? FairBy::kNone : FairBy::kKey;
  c.key_concurrency = r[11].is_null() ? 0 : r[11].as<int>();
  c.max_payload_bytes = r[12].as<int64_t>();
  return c;
}

// "1:5,2:7" -> parts at epochs.
std::vector<OwnedPart> ParseOwned(const std::optional<std::string>& text) {
  std::vector<OwnedPart> out;
  if (!text) return out;
  for (absl::string_view item : absl::StrSplit(*text, ',', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, ':');
    OwnedPart p;
    if (absl::SimpleAtoi(kv.first, &p.part) && absl::SimpleAtoi(kv.second, &p.epoch.value)) {
      out.push_back(p);
    }
  }
  return out;
}

// Members "id,id" and owners "part:session:epoch,..." into a GroupView.
void ParseGroup(const std::optional<std::string>& members, const std::optional<std::string>& owners,
                GroupView* view) {
  if (members) {
    for (absl::string_view id : absl::StrSplit(*members, ',', absl::SkipEmpty())) {
      view->members.push_back(SessionId{std::string(id)});
    }
  }
  if (owners) {
    for (absl::string_view item : absl::StrSplit(*owners, ',', absl::SkipEmpty())) {
      std::vector<absl::string_view> f = absl::StrSplit(item, ':');
      if (f.size() != 3) continue;
      PartOwner o;
      if (!absl::SimpleAtoi(f[0], &o.part)) continue;
      if (f[1].empty()) {  // a delta's row that went (GroupView::unowned)
        view->unowned.push_back(o.part);
        continue;
      }
      if (!absl::SimpleAtoi(f[2], &o.epoch.value)) continue;
      o.session.value = std::string(f[1]);
      view->owners.push_back(std::move(o));
    }
  }
}

// The queue's paused, rate and parts at columns `first`.. of a heartbeat's or a group read's
// row (each may be NULL: unknown), and, with `group`, the generation, unchanged and delta
// that follow them.
void ReadGroupState(const pqxx::row& row, int first, bool group, GroupView* view) {
  view->paused = !row[first].is_null() && row[first].as<bool>();
  if (!row[first + 1].is_null()) view->rate = row[first + 1].as<double>();
  if (!row[first + 2].is_null()) view->parts = row[first + 2].as<int>();
  if (!group) return;
  view->generation = row[first + 3].as<int64_t>();
  view->unchanged = row[first + 4].as<bool>();
  view->delta = row[first + 5].as<bool>();
}

}  // namespace

absl::Status PgStore::CreateQueue(const QueueConfig& config) {
  if (absl::Status st = ValidateQueueConfig(config); !st.ok()) return st;
  return Run(absl::StrCat("create queue \"", config.name, "\""), [&]() -> absl::Status {
    pqxx::transaction_base& tx = Autocommit();
    pqxx::result r = Exec(tx, "create_queue", config.name, config.parts,
                          std::string(AssignmentName(config.assignment)),
                          Micros(config.session_ttl), config.max_attempts, config.ordered,
                          config.dlq_topic, config.rate, FairByText(config.fair_by),
                          KeyConcurrencyValue(config.key_concurrency), config.max_payload_bytes);
    if (r.empty()) {
      return absl::AlreadyExistsError(absl::StrCat("queue \"", config.name, "\" already exists"));
    }
    return absl::OkStatus();
  });
}

absl::Status PgStore::QueueNotFound(pqxx::transaction_base& tx, absl::string_view name) {
  if (!ThroughSqlApi(tx)) return UnknownQueue(name, options_.schema);
  // Row-level security hides a queue not granted to a viewer or a worker:
  // it may exist. The grant named with this role's name, as the SQL API's
  // hints do.
  const std::string role = tx.exec("SELECT quote_ident(session_user)")[0][0].as<std::string>();
  return absl::NotFoundError(
      absl::StrCat("queue \"", name, "\" is unknown in schema \"", options_.schema,
                   "\", or not one of this role's queues (its owner grants one: partq grant "
                   "viewer|worker ",
                   role, " --queue ", name, SchemaFlag(options_.schema), ")"));
}

absl::StatusOr<QueueConfig> PgStore::GetQueue(absl::string_view name) {
  if (absl::Status st = ValidateQueueName(name); !st.ok()) return st;
  return Run(absl::StrCat("get queue \"", name, "\""), [&]() -> absl::StatusOr<QueueConfig> {
    pqxx::transaction_base& tx = Autocommit();
    pqxx::result r = Exec(tx, "get_queue", std::string(name));
    if (r.empty()) return QueueNotFound(tx, name);
    return QueueFromRow(r[0]);
  });
}

absl::StatusOr<std::vector<QueueConfig>> PgStore::ListQueues() {
  return Run("list queues", [&]() -> absl::StatusOr<std::vector<QueueConfig>> {
    pqxx::transaction_base& tx = Autocommit();
    std::vector<QueueConfig> out;
    for (const pqxx::row& row : Exec(tx, "list_queues")) out.push_back(QueueFromRow(row));
    return out;
  });
}

namespace {

std::string Count(int64_t n, absl::string_view noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

}  // namespace

absl::StatusOr<DeletedQueue> PgStore::DeleteQueue(absl::string_view name, QueueContents contents) {
  if (absl::Status st = ValidateQueueName(name); !st.ok()) return st;
  return Run(absl::StrCat("delete queue \"", name, "\""), [&]() -> absl::StatusOr<DeletedQueue> {
    PgWork<> tx(*conn_, options_.transaction_pooler);
    // No enqueue locks the queue row (items have no FK to queues: it would
    // cost a lookup per insert), so a lock on that row alone would not keep
    // enqueues out. This lock on items does (SHARE ROW EXCLUSIVE: as SHARE
    // against writers, and against another delete, which with SHARE would
    // hold it and then wait for it to delete rows: a deadlock): it waits for every
    // transaction writing items to end and holds new writers until this one
    // commits, and every writer takes its lock on items before it reads the
    // queue row (Enqueue in its one statement, EnqueueBatch and IngestKafka
    // by lock_items_for_enqueue), so when they go on the queue is gone.
    // Acks and nacks write items too, so dead_items holds still as well: the
    // counts below are all the work the queue holds, and none can be added
    // between the check and the delete. It briefly pauses all writers of
    // items, which is fine for a rare admin command.
    // The queue row lock (FOR UPDATE) then holds off a join
    // (a session's FK locks the row) and `queue set`. It comes second: a
    // static re-join holds items' ROW EXCLUSIVE lock (it marks abandoned
    // items) when its FK check locks the queue row, so taking the row first
    // could deadlock with it.
    tx.exec(WithSchema("LOCK TABLE {schema}.items IN SHARE ROW EXCLUSIVE MODE", options_.schema));
    const std::string q(name);
    if (tx.exec_params(WithSchema("SELECT 1 FROM {schema}.queues WHERE name = $1 FOR UPDATE",
                                  options_.schema),
                       q)
            .empty()) {
      // Nothing to delete: making the queue is no fix for that.
      return UnknownQueue(name, options_.schema, /*suggest_create=*/false);
    }
    if (contents == QueueContents::kRefuse) {
      const pqxx::row r = Exec(tx, "queue_contents", q)[0];
      const int64_t ready = r[0].as<int64_t>(), delayed = r[1].as<int64_t>(),
                    in_flight = r[2].as<int64_t>(), dead = r[3].as<int64_t>();
      const int64_t items = ready + delayed + in_flight;
      if (items > 0 || dead > 0) {
        std::string holds;
        if (items > 0) {
          holds = absl::StrCat(Count(items, "item"), " (", ready, " ready, ", delayed, " delayed, ",
                               in_flight, " in flight)");
        }
        if (dead > 0) absl::StrAppend(&holds, items > 0 ? " and " : "", Count(dead, "dead item"));
        return absl::FailedPreconditionError(absl::StrCat(
            "queue \"", name, "\" still holds ", holds,
            "; nothing was deleted. To delete them with the queue: partq queue delete ", name,
            " --force", SchemaFlag(options_.schema)));
      }
    }
    auto delete_from = [&](absl::string_view table) {
      return tx
          .exec_params(WithSchema(absl::StrCat("DELETE FROM {schema}.", table, " WHERE queue = $1"),
                                  options_.schema),
                       q)
          .affected_rows();
    };
    DeletedQueue out;
    // Sessions (and through them session_parts) and schedules cascade from
    // queues; the schedules first, to count them.
    out.schedules = delete_from("schedules");
    tx.exec_params(WithSchema("DELETE FROM {schema}.queues WHERE name = $1", options_.schema), q);
    out.items = delete_from("items");
    out.dead_items = delete_from("dead_items");
    delete_from("results");
    delete_from("cancelled_items");
    delete_from("part_claims");
    delete_from("throughput");
    // After the cascade, whose deletions of session_parts its triggers log
    // here; the generation itself stays (group_generations), so a queue
    // created again under the name never repeats one a reader has seen.
    delete_from("group_changes");
    // The bridge's offsets into this queue: a queue created again under the
    // name starts from the topic's committed group offsets, not from where
    // the deleted one stopped.
    delete_from("kafka_offsets");
    // Sessions of the queue re-read their group at this notice (sent at
    // the commit) and stop there, on the queue they no longer find, rather
    // than at their next heartbeat up to TTL/3 later.
    Exec(tx, "notify", ChannelFor(options_.schema, name), std::string("g"));
    tx.commit();
    return out;
  });
}

absl::Status PgStore::SetDeadLetterTopic(absl::string_view name,
                                         const std::optional<std::string>& topic) {
  if (absl::Status st = ValidateQueueName(name); !st.ok()) return st;
  if (topic) {
    if (absl::Status st = ValidateTopicName(*topic); !st.ok()) return st;
  }
  return Run(absl::StrCat("set the dead-letter topic of queue \"", name, "\""),
             [&]() -> absl::Status {
               pqxx::transaction_base& tx = Autocommit();
               if (tx.exec_params(WithSchema("UPDATE {schema}.queues SET dlq_topic = $2 "
                                             "WHERE name = $1",
                                             options_.schema),
                                  std::string(name), topic)
                       .affected_rows() == 0) {
                 return UnknownQueue(name, options_.schema);
               }
               return absl::OkStatus();
             });
}

// --- sessions ---------------------------------------------------------------------------

absl::StatusOr<JoinResult> PgStore::Join(const JoinRequest& request) {
  if (absl::Status st = ValidateQueueName(request.queue); !st.ok()) return st;
  if (request.instance_id.size() > 255) {
    return absl::InvalidArgumentError("instance id is longer than 255 characters");
  }
  return Run(absl::StrCat("join queue \"", request.queue, "\""),
             [&]() -> absl::StatusOr<JoinResult> {
               pqxx::transaction_base& tx = Autocommit();
               std::optional<std::string> instance;
               if (!request.instance_id.empty()) instance = request.instance_id;
               pqxx::result r = Exec(tx, "join", request.queue, instance, request.host, request.pid,
                                     ChannelFor(options_.schema, request.queue));
               if (r.empty()) return UnknownQueue(request.queue, options_.schema);
               JoinResult out;
               out.id.value = r[0][0].as<std::string>();
               out.incarnation = r[0][1].as<int64_t>();
               out.kept = ParseOwned(Text(r[0][2]));
               out.paused = !r[0][4].is_null() && r[0][4].as<bool>();
               if (!r[0][5].is_null()) out.rate = r[0][5].as<double>();
               return out;
             });
}

absl::StatusOr<GroupView> PgStore::HeartbeatSince(absl::string_view queue, const SessionId& session,
                                                  int64_t incarnation, int64_t known_generation,
                                                  const FinishCounts& finished) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run("heartbeat", [&]() -> absl::StatusOr<GroupView> {
    return HeartbeatOn(Autocommit(), HeartbeatRequest{std::string(queue), session, incarnation,
                                                      known_generation, finished});
  });
}

absl::StatusOr<std::vector<GroupView>> PgStore::HeartbeatMany(
    const std::vector<HeartbeatRequest>& requests) {
  for (const HeartbeatRequest& r : requests) {
    if (absl::Status st = ValidateQueueName(r.queue); !st.ok()) return st;
  }
  // Rows are written queue by queue in name order (expiries, generations,
  // sweeps), as every other transaction writes one queue's: no deadlock.
  std::vector<size_t> order(requests.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].queue < requests[b].queue; });
  return Run("heartbeats", [&]() -> absl::StatusOr<std::vector<GroupView>> {
    PgWork<> tx(*conn_, options_.transaction_pooler);
    std::vector<GroupView> out(requests.size());
    for (size_t i : order) out[i] = HeartbeatOn(tx, requests[i]);
    tx.commit();
    return out;
  });
}

GroupView PgStore::HeartbeatOn(pqxx::transaction_base& tx, const HeartbeatRequest& h) {
  // The idle fleet's heartbeat: alive, nothing changed, nobody to expire,
  // nothing to count. One small statement; otherwise the full one below
  // (pg_store_sql.cc, "heartbeat_idle").
  if (h.known_generation >= 0 && h.finished.empty()) {
    pqxx::result idle = Exec(tx, "heartbeat_idle", h.queue, h.session.value, h.incarnation);
    if (idle[0][0].as<int64_t>() > 0 && idle[0][1].as<int64_t>() == h.known_generation &&
        !idle[0][2].as<bool>()) {
      GroupView view;
      view.alive = true;
      view.unchanged = true;
      view.generation = h.known_generation;
      ReadGroupState(idle[0], 3, /*group=*/false, &view);
      return view;
    }
  }
  pqxx::result r = Exec(tx, "heartbeat", h.queue, h.session.value, h.incarnation,
                        ChannelFor(options_.schema, h.queue), h.finished.acked, h.finished.retried,
                        h.finished.dead, h.known_generation, kGroupChangesKept);
  GroupView view;
  view.alive = r[0][0].as<int64_t>() > 0;
  view.expired = r[0][1].as<int64_t>();
  ParseGroup(Text(r[0][2]), Text(r[0][3]), &view);
  ReadGroupState(r[0], 5, /*group=*/true, &view);
  return view;
}

absl::StatusOr<GroupView> PgStore::ReadGroupSince(absl::string_view queue,
                                                  int64_t known_generation) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run("read group", [&]() -> absl::StatusOr<GroupView> {
    pqxx::transaction_base& tx = Autocommit();
    pqxx::result r =
        Exec(tx, "read_group", std::string(queue), known_generation, kGroupChangesKept);
    if (r[0][0].as<int64_t>() == 0) return UnknownQueue(queue, options_.schema);
    GroupView view;
    ParseGroup(Text(r[0][1]), Text(r[0][2]), &view);
    ReadGroupState(r[0], 3, /*group=*/true, &view);
    return view;
  });
}

absl::StatusOr<std::vector<OwnedPart>> PgStore::AcquireParts(absl::string_view queue,
                                                             const SessionId& session,
                                                             const std::vector<int>& parts) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  std::vector<int> sorted = parts;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  if (!sorted.empty() && sorted.front() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("negative part ", sorted.front()));
  }
  auto gone = [&] {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", session.value, " is gone (expired or left): join again"));
  };
  std::vector<OwnedPart> out;
  absl::Status st = Run("acquire parts", [&]() -> absl::Status {
    pqxx::transaction_base& tx = Autocommit();
    try {
      for (const pqxx::row& row :
           Exec(tx, "acquire", std::string(queue), session.value, IntArray(sorted))) {
        if (row[0].as<int>() < 0) return gone();
        out.push_back(OwnedPart{row[0].as<int>(), Epoch{row[1].as<int64_t>()}});
      }
    } catch (const pqxx::foreign_key_violation&) {
      return gone();  // our row was deleted after the statement's snapshot
    }
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  std::sort(out.begin(), out.end(),
            [](const OwnedPart& a, const OwnedPart& b) { return a.part < b.part; });
  return out;
}

absl::Status PgStore::ReleaseParts(absl::string_view queue, const SessionId& session,
                                   const std::vector<OwnedPart>& parts) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  if (parts.empty()) return absl::OkStatus();
  std::vector<int> ps;
  std::vector<int64_t> es;
  for (const OwnedPart& p : parts) {
    ps.push_back(p.part);
    es.push_back(p.epoch.value);
  }
  return Run("release parts", [&]() -> absl::Status {
    pqxx::transaction_base& tx = Autocommit();
    Exec(tx, "release", std::string(queue), session.value, IntArray(ps), IntArray(es),
         ChannelFor(options_.schema, queue));
    return absl::OkStatus();
  });
}

absl::Status PgStore::Leave(absl::string_view queue, const SessionId& session,
                            int64_t incarnation) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run("leave", [&]() -> absl::Status {
    pqxx::transaction_base& tx = Autocommit();
    Exec(tx, "leave", std::string(queue), session.value, incarnation,
         ChannelFor(options_.schema, queue));
    return absl::OkStatus();
  });
}

absl::Status PgStore::SetPaused(absl::string_view queue, bool paused) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run(absl::StrCat(paused ? "pause" : "resume", " queue \"", queue, "\""),
             [&]() -> absl::Status {
               pqxx::result r = Exec(Autocommit(), "set_paused", std::string(queue), paused,
                                     ChannelFor(options_.schema, queue));
               if (r[0][0].as<int64_t>() == 0) return UnknownQueue(queue, options_.schema);
               return absl::OkStatus();
             });
}

absl::Status PgStore::SetRate(absl::string_view queue, std::optional<double> per_second) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  if (absl::Status st = ValidateRate(per_second); !st.ok()) return st;
  return Run(absl::StrCat("set the rate of queue \"", queue, "\""), [&]() -> absl::Status {
    pqxx::result r = Exec(Autocommit(), "set_rate", std::string(queue), per_second,
                          ChannelFor(options_.schema, queue));
    if (r[0][0].as<int64_t>() == 0) return UnknownQueue(queue, options_.schema);
    return absl::OkStatus();
  });
}

absl::StatusOr<int> PgStore::GrowParts(absl::string_view queue, int parts) {
  if (absl::Status st = ValidateGrowth(queue, 1, parts); !st.ok()) return st;
  absl::StatusOr<QueueConfig> config = GetQueue(queue);
  if (!config.ok()) return config.status();
  int current = config->parts;
  // A grow that read a count another grow has changed since tries again
  // with the count that one left (at most once per grow that overtook it).
  for (;;) {
    if (absl::Status st = ValidateGrowth(queue, current, parts); !st.ok()) return st;
    if (parts == current) return current;
    absl::StatusOr<int> now =
        Run(absl::StrCat("grow the parts of queue \"", queue, "\""), [&]() -> absl::StatusOr<int> {
          pqxx::result r = Exec(Autocommit(), "grow_parts", std::string(queue), parts, current,
                                ChannelFor(options_.schema, queue));
          if (r.empty()) return UnknownQueue(queue, options_.schema);
          return r[0][1].as<int64_t>() > 0 ? parts : r[0][0].as<int>();
        });
    if (!now.ok()) return now.status();
    if (*now == parts) return current;
    current = *now;
  }
}

absl::Status PgStore::SetFairBy(absl::string_view queue, FairBy fair_by) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run(absl::StrCat("set the fair share of queue \"", queue, "\""), [&]() -> absl::Status {
    pqxx::result r = Exec(Autocommit(), "set_fair_by", std::string(queue), FairByText(fair_by));
    if (r.affected_rows() == 0) return UnknownQueue(queue, options_.schema);
    return absl::OkStatus();
  });
}

absl::Status PgStore::SetKeyConcurrency(absl::string_view queue, int n) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  if (absl::Status st = ValidateKeyConcurrency(n); !st.ok()) return st;
  return Run(
      absl::StrCat("set the key concurrency of queue \"", queue, "\""), [&]() -> absl::Status {
        pqxx::result r =
            Exec(Autocommit(), "set_key_concurrency", std::string(queue), KeyConcurrencyValue(n));
        if (r.empty()) return UnknownQueue(queue, options_.schema);
        return ValidateKeyConcurrencyFor(queue, r[0][0].as<bool>(), n);
      });
}

absl::Status PgStore::SetMaxPayload(absl::string_view queue, int64_t bytes) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  if (absl::Status st = ValidateMaxPayload(bytes); !st.ok()) return st;
  return Run(absl::StrCat("set the payload limit of queue \"", queue, "\""), [&]() -> absl::Status {
    pqxx::result r = Exec(Autocommit(), "set_max_payload", std::string(queue), bytes);
    if (r.affected_rows() == 0) return UnknownQueue(queue, options_.schema);
    return absl::OkStatus();
  });
}

absl::Status PgStore::ReleaseClaims(absl::string_view queue, const SessionId& session,
                                    int64_t incarnation) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run("release claims", [&]() -> absl::Status {
    Exec(Autocommit(), "release_claims", std::string(queue), session.value, incarnation);
    return absl::OkStatus();
  });
}

absl::Status PgStore::NotifyGroup(absl::string_view queue) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  return Run("notify group", [&]() -> absl::Status {
    pqxx::transaction_base& tx = Autocommit();
    Exec(tx, "notify", ChannelFor(options_.schema, queue), std::string("g"));
    return absl::OkStatus();
  });
}

// --- listen -----------------------------------------------------------------------------

namespace {

// Why Listen and ListenHere refuse through a transaction pooler: LISTEN
// registers the session of one server connection, which the pooler lends to
// other clients after each transaction.
absl::Status ListenThroughPooler() {
  return absl::FailedPreconditionError(
      "LISTEN does not work through a transaction pooler (PgBouncer's pool_mode = "
      "transaction): poll instead (ConsumerOptions::poll_only, `partq worker --poll-only`)");
}

// The notices of queue channel payloads; others are skipped.
std::vector<Notice> ParseNotices(const std::vector<std::string>& payloads) {
  std::vector<Notice> out;
  for (const std::string& payload : payloads) {
    Notice n;
    absl::string_view p = payload;
    if (p == "g") {
      n.kind = Notice::Kind::kGroup;
    } else if (p == "r") {
      n.kind = Notice::Kind::kReleased;
    } else if (p == "s") {
      n.kind = Notice::Kind::kSchedules;
    } else if (absl::ConsumePrefix(&p, "i:")) {
      // "i:PART" or "i:PART:PRIORITY:ID" (NotifyParts, kEnqueue); anything else
      // wakes every part from its head.
      n.kind = Notice::Kind::kItems;
      if (!ParsePartKey(p, &n.part, &n.from)) n.part = -1;
    } else {
      continue;  // not ours
    }
    out.push_back(n);
  }
  return out;
}

class PgListener final : public Listener {
 public:
  // channel -> the queue its notices are of ("" for one queue's listener:
  // Notice::queue stays empty).
  PgListener(std::unique_ptr<PgConnection> conn,
             const std::vector<std::pair<std::string, std::string>>& channels)
      : conn_(std::move(conn)) {
    for (const auto& [channel, queue] : channels) {
      receivers_.push_back(std::make_unique<Receiver>(*conn_, channel, queue, &inbox_));
    }
  }
  ~PgListener() override {
    // The receivers unlisten through the connection, so they go first.
    receivers_.clear();
    conn_.reset();
  }

  absl::StatusOr<std::vector<Notice>> Wait(absl::Duration timeout) override {
    if (conn_ == nullptr) {
      return absl::UnavailableError("listener connection lost: make a new listener");
    }
    try {
      conn_->get_notifs();
      if (inbox_.empty() && timeout > absl::ZeroDuration()) {
        const int64_t us = Micros(timeout);
        conn_->await_notification(static_cast<long>(us / 1000000), static_cast<long>(us % 1000000));
        conn_->get_notifs();
      }
      if (!conn_->is_open()) throw pqxx::broken_connection("connection closed");
    } catch (...) {
      PgError e = ClassifyException(std::current_exception(), "listen", "");
      receivers_.clear();
      conn_.reset();
      if (e.status.code() == absl::StatusCode::kUnavailable) return e.status;
      return absl::UnavailableError(e.status.message());
    }
    std::vector<Notice> out;
    for (const auto& [queue, payload] : inbox_) {
      for (Notice& n : ParseNotices({payload})) {
        n.queue = queue;
        out.push_back(std::move(n));
      }
    }
    inbox_.clear();
    return out;
  }

 private:
  using Inbox = std::vector<std::pair<std::string, std::string>>;  // queue, payload
  class Receiver final : public pqxx::notification_receiver {
   public:
    Receiver(pqxx::connection_base& c, const std::string& channel, std::string queue, Inbox* sink)
        : pqxx::notification_receiver(c, channel), queue_(std::move(queue)), sink_(sink) {}
    void operator()(const std::string& payload, int) override {
      sink_->emplace_back(queue_, payload);
    }

   private:
    const std::string queue_;
    Inbox* sink_;
  };

  Inbox inbox_;
  std::unique_ptr<PgConnection> conn_;
  std::vector<std::unique_ptr<Receiver>> receivers_;
};

// Puts what a notification receiver gets into the shared inbox. It runs in
// whichever thread reads the connection, which holds `mu` then.
class SharedReceiver final : public pqxx::notification_receiver {
 public:
  SharedReceiver(pqxx::connection_base& c, const std::string& channel, SharedConn* shared)
      : pqxx::notification_receiver(c, channel), shared_(shared) {}
  void operator()(const std::string& payload, int) override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (shared_->waiting) shared_->inbox.push_back(payload);
  }

 private:
  SharedConn* const shared_;
};

// Waits on the socket of a store's connection between the store's calls
// (ListenHere; SharedConn says who has the connection when).
class SharedListener final : public Listener {
 public:
  explicit SharedListener(std::shared_ptr<SharedConn> shared) : shared_(std::move(shared)) {}
  ~SharedListener() override {
    absl::MutexLock lock(&shared_->mu);
    shared_->waiting = false;  // the store's receiver keeps nothing from now on
    shared_->inbox.clear();
  }

  absl::StatusOr<std::vector<Notice>> Wait(absl::Duration timeout) override {
    SharedConn& s = *shared_;
    absl::MutexLock lock(&s.mu);
    auto no_calls = [&s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
      return s.gone || s.callers.load() == 0;
    };
    s.mu.Await(absl::Condition(&no_calls));
    if (s.gone) return absl::UnavailableError("the listener's store was closed");
    if (s.inbox.empty() && !s.missed) {
      if (s.conn == nullptr || !Receive(s, timeout)) {
        // No connection now, or a broken one: the store reconnects on its
        // next call (which then sets `missed`) or goes. Until then there is
        // nothing to read, so wait rather than spin.
        auto changed = [&s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) { return s.gone || s.missed; };
        s.mu.AwaitWithTimeout(absl::Condition(&changed), timeout);
        if (s.gone) return absl::UnavailableError("the listener's store was closed");
      }
    }
    std::vector<Notice> out = ParseNotices(s.inbox);
    s.inbox.clear();
    if (s.missed) {
      s.missed = false;
      out.push_back(Notice{Notice::Kind::kGroup, -1, std::nullopt, ""});
      out.push_back(Notice{Notice::Kind::kItems, -1, std::nullopt, ""});
    }
    return out;
  }

 private:
  // Reads what is there, or waits up to `timeout` for the socket or a store
  // call, and reads again. False if the connection is broken.
  static bool Receive(SharedConn& s, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    try {
      s.conn->get_notifs();
      if (!s.inbox.empty() || timeout <= absl::ZeroDuration()) return true;
      const int sock = PQsocket(s.conn->raw());
      if (sock < 0) return false;
      pollfd fds[2] = {{sock, POLLIN, 0}, {s.wake_fd, POLLIN, 0}};
      const int ms = static_cast<int>(std::min<int64_t>(
          absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1))), INT32_MAX));
      if (poll(fds, 2, ms) < 0) return true;  // EINTR: the caller waits again
      if (fds[1].revents != 0) {
        uint64_t tokens;
        while (read(s.wake_fd, &tokens, sizeof(tokens)) > 0) {
        }
      }
      if (fds[0].revents != 0) s.conn->get_notifs();
      return s.conn->is_open();
    } catch (...) {
      return false;  // the store sees the break on its next call and reconnects
    }
  }

  const std::shared_ptr<SharedConn> shared_;
};

}  // namespace

// The caller holds shared_->mu (ConnUse).
void PgStore::ListenOnConnection() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  receiver_.reset();
  receiver_ = std::make_unique<SharedReceiver>(*conn_, listen_channel_, shared_.get());
  shared_->conn = conn_.get();
  shared_->generation = conn_->generation();
}

absl::StatusOr<std::unique_ptr<Listener>> PgStore::ListenHere(absl::string_view queue) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  if (options_.transaction_pooler) return ListenThroughPooler();
  if (shared_ != nullptr) {
    return absl::FailedPreconditionError("this store has a listener on its connection already");
  }
  auto shared = std::make_shared<SharedConn>();
  if (shared->wake_fd < 0) return absl::InternalError("eventfd failed for the listener");
  return Run("listen", [&]() -> absl::StatusOr<std::unique_ptr<Listener>> {
    listen_channel_ = ChannelFor(options_.schema, queue);
    // The receiver's constructor sends LISTEN, so notices sent after this
    // returns are seen. A failure leaves the store as it was.
    shared_ = shared;
    try {
      ConnUse use(shared_.get(), &use_depth_);
      ListenOnConnection();
    } catch (...) {
      receiver_.reset();
      shared_.reset();
      throw;
    }
    return std::unique_ptr<Listener>(std::make_unique<SharedListener>(shared));
  });
}

absl::StatusOr<std::unique_ptr<Listener>> PgStore::Listen(absl::string_view queue) {
  if (absl::Status st = ValidateQueueName(queue); !st.ok()) return st;
  if (options_.transaction_pooler) return ListenThroughPooler();
  PgOptions options = options_;
  options.application_name = absl::StrCat(options_.application_name, "/listen");
  absl::StatusOr<std::unique_ptr<PgConnection>> conn = OpenConnection(options);
  if (!conn.ok()) return conn.status();
  try {
    // The receiver's constructor sends LISTEN, so notices sent after this
    // returns are seen.
    return std::unique_ptr<Listener>(std::make_unique<PgListener>(
        std::move(*conn), std::vector<std::pair<std::string, std::string>>{
                              {ChannelFor(options_.schema, queue), ""}}));
  } catch (...) {
    return ClassifyException(std::current_exception(), "listen", options_.schema).status;
  }
}

absl::StatusOr<std::unique_ptr<Listener>> PgStore::ListenMany(
    const std::vector<std::string>& queues) {
  std::vector<std::pair<std::string, std::string>> channels;
  for (const std::string& q : queues) {
    if (absl::Status st = ValidateQueueName(q); !st.ok()) return st;
    channels.emplace_back(ChannelFor(options_.schema, q), q);
  }
  if (options_.transaction_pooler) return ListenThroughPooler();
  PgOptions options = options_;
  options.application_name = absl::StrCat(options_.application_name, "/listen");
  absl::StatusOr<std::unique_ptr<PgConnection>> conn = OpenConnection(options);
  if (!conn.ok()) return conn.status();
  try {
    // Each receiver's constructor sends its LISTEN, so notices sent after
    // this returns are seen.
    return std::unique_ptr<Listener>(std::make_unique<PgListener>(std::move(*conn), channels));
  } catch (...) {
    return ClassifyException(std::current_exception(), "listen", options_.schema).status;
  }
}

}  // namespace pg_internal

// --- factories --------------------------------------------------------------------------

namespace {

absl::StatusOr<std::unique_ptr<pg_internal::PgStore>> ConnectPgStore(const PgOptions& options) {
  if (absl::Status st = ValidateSchemaName(options.schema); !st.ok()) return st;
  auto store = std::make_unique<pg_internal::PgStore>(options);
  if (absl::Status st = store->EnsureConnected(); !st.ok()) return st;
  return store;
}

}  // namespace

absl::Status MigratePg(const PgOptions& options, int to_version) {
  auto store = ConnectPgStore(options);
  if (!store.ok()) return store.status();
  return (*store)->MigrateTo(to_version);
}

absl::StatusOr<std::vector<AppliedMigration>> PgMigrationStatus(const PgOptions& options) {
  auto store = ConnectPgStore(options);
  if (!store.ok()) return store.status();
  return (*store)->MigrationStatus();
}

absl::Status PgGrant(const PgOptions& options, absl::string_view kind, absl::string_view role,
                     const std::vector<std::string>& queues) {
  auto store = ConnectPgStore(options);
  if (!store.ok()) return store.status();
  if (absl::Status st = (*store)->CheckSchema(); !st.ok()) return st;
  return (*store)->Grant(kind, role, queues);
}

absl::StatusOr<int> PgRevoke(const PgOptions& options, absl::string_view kind,
                             absl::string_view role, const std::vector<std::string>& queues) {
  auto store = ConnectPgStore(options);
  if (!store.ok()) return store.status();
  if (absl::Status st = (*store)->CheckSchema(); !st.ok()) return st;
  return (*store)->Revoke(kind, role, queues);
}

absl::StatusOr<std::vector<QueueGrant>> PgListGrants(const PgOptions& options,
                                                     const std::optional<std::string>& queue) {
  auto store = ConnectPgStore(options);
  if (!store.ok()) return store.status();
  if (absl::Status st = (*store)->CheckSchema(); !st.ok()) return st;
  return (*store)->ListGrants(queue);
}

absl::StatusOr<std::vector<std::string>> PgSchemaCreators(const PgOptions& options) {
  auto store = ConnectPgStore(options);
  if (!store.ok()) return store.status();
  return (*store)->SchemaCreators();
}

absl::StatusOr<std::unique_ptr<Store>> ConnectPg(const PgOptions& options) {
  auto store = ConnectPgStore(options);
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(std::move(*store));
}

StoreFactory PgStoreFactory(PgOptions options) {
  return [options = std::move(options)]() { return ConnectPg(options); };
}

absl::StatusOr<std::unique_ptr<BridgeStore>> ConnectPgBridge(const PgOptions& options) {
  if (absl::Status st = ValidateSchemaName(options.schema); !st.ok()) return st;
  auto store = std::make_unique<pg_internal::PgStore>(options);
  if (absl::Status st = store->EnsureConnected(); !st.ok()) return st;
  return std::unique_ptr<BridgeStore>(std::move(store));
}

BridgeStoreFactory PgBridgeStoreFactory(PgOptions options) {
  return [options = std::move(options)]() { return ConnectPgBridge(options); };
}

}  // namespace partq
