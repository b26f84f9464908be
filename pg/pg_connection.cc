#include "pg/pg_connection.h"

#include <libpq-fe.h>

#include <atomic>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"

namespace partq {
namespace pg_internal {

PgConnection::PgConnection(const std::string& dsn) : pqxx::connection_base(policy_), policy_(dsn) {
  // As pqxx::basic_connection_base does: the base only keeps a reference to
  // the policy until init() uses it.
  init();
}

PgConnection::~PgConnection() noexcept { close(); }

void PgConnection::Policy::Note(handle h) noexcept {
  // Unique across connection objects: a new object may get the old one's
  // address, and its server connection has none of the old statements.
  static std::atomic<uint64_t> generations{0};
  if (h != raw) {
    raw = h;
    if (h != nullptr) generation = ++generations;
  }
}

PgConnection::Policy::handle PgConnection::Policy::do_startconnect(handle orig) {
  handle h = pqxx::connect_direct::do_startconnect(orig);
  Note(h);
  return h;
}

PgConnection::Policy::handle PgConnection::Policy::do_completeconnect(handle orig) {
  handle h = pqxx::connect_direct::do_completeconnect(orig);
  Note(h);
  return h;
}

PgConnection::Policy::handle PgConnection::Policy::do_dropconnect(handle orig) noexcept {
  handle h = pqxx::connect_direct::do_dropconnect(orig);
  Note(h);
  return h;
}

PgConnection::Policy::handle PgConnection::Policy::do_disconnect(handle orig) noexcept {
  handle h = pqxx::connect_direct::do_disconnect(orig);
  Note(h);
  return h;
}

int PipelineResult::size() const { return rows ? PQntuples(rows.get()) : 0; }

bool PipelineResult::is_null(int row, int column) const {
  return PQgetisnull(rows.get(), row, column) != 0;
}

absl::string_view PipelineResult::get(int row, int column) const {
  return absl::string_view(PQgetvalue(rows.get(), row, column),
                           static_cast<size_t>(PQgetlength(rows.get(), row, column)));
}

void Pipeline::Define(const char* name, std::string sql) {
  sql_.emplace_back(name, std::move(sql));
}

namespace {

std::string ErrorText(PGconn* c, const PGresult* r) {
  const char* m = r != nullptr ? PQresultErrorMessage(r) : nullptr;
  if (m == nullptr || *m == '\0') m = PQerrorMessage(c);
  return m != nullptr ? m : "";
}

[[noreturn]] void Broken(PGconn* c, const PGresult* r) {
  throw pqxx::broken_connection(ErrorText(c, r));
}

}  // namespace

const std::string& Pipeline::Sql(const char* name) const {
  for (const auto& [n, text] : sql_) {
    if (n == name) return text;
  }
  throw pqxx::usage_error(absl::StrCat("pipeline: no statement ", name));
}

void Pipeline::Prepare(PgConnection& conn, const char* name) {
  const std::string* sql = &Sql(name);
  PGconn* c = conn.raw();
  std::unique_ptr<PGresult, void (*)(PGresult*)> r(PQprepare(c, name, sql->c_str(), 0, nullptr),
                                                   PQclear);
  if (r == nullptr || PQstatus(c) != CONNECTION_OK) Broken(c, r.get());
  if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
    const char* state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
    throw pqxx::sql_error(ErrorText(c, r.get()), *sql, state != nullptr ? state : "");
  }
  prepared_.insert(name);
}

std::vector<PipelineResult> Pipeline::Run(PgConnection& conn, const std::vector<Step>& steps) {
  PGconn* c = conn.raw();
  if (c == nullptr || PQstatus(c) != CONNECTION_OK) Broken(c, nullptr);
  if (conn.generation() != prepared_generation_) {
    prepared_.clear();
    prepared_generation_ = conn.generation();
  }
  for (const Step& s : steps) {
    if (!unnamed_ && !prepared_.contains(s.name)) Prepare(conn, s.name);
  }

  if (PQenterPipelineMode(c) != 1) Broken(c, nullptr);
  // Whatever happens below, the connection leaves pipeline mode (libpqxx's
  // calls would fail in it); if it cannot, it is unusable and the caller
  // drops it on the exception it gets.
  auto leave = absl::MakeCleanup([c] { PQexitPipelineMode(c); });
  for (const Step& s : steps) {
    const size_t n = s.params.size();
    std::vector<const char*> values(n);
    std::vector<int> lengths(n), formats(n);
    for (size_t k = 0; k < n; ++k) {
      const auto& p = s.params[k];
      values[k] = p ? p->data() : nullptr;
      lengths[k] = p ? static_cast<int>(p->size()) : 0;
      formats[k] = k < s.binary_params.size() && s.binary_params[k] ? 1 : 0;
    }
    const int sent =
        unnamed_
            ? PQsendQueryParams(c, Sql(s.name).c_str(), static_cast<int>(n), nullptr, values.data(),
                                lengths.data(), formats.data(), s.binary ? 1 : 0)
            : PQsendQueryPrepared(c, s.name, static_cast<int>(n), values.data(), lengths.data(),
                                  formats.data(), s.binary ? 1 : 0);
    if (sent != 1) Broken(c, nullptr);
  }
  if (PQpipelineSync(c) != 1) Broken(c, nullptr);

  // Each statement yields its result and then a null; the sync ends it all.
  std::vector<PipelineResult> out(steps.size());
  size_t i = 0;
  int nulls_past_end = 0;
  for (;;) {
    PGresult* raw = PQgetResult(c);
    if (raw == nullptr) {
      if (PQstatus(c) != CONNECTION_OK) Broken(c, nullptr);
      if (i < steps.size()) {
        ++i;
      } else if (++nulls_past_end > 2) {
        Broken(c, nullptr);  // no sync is coming
      }
      continue;
    }
    std::shared_ptr<PGresult> r(raw, PQclear);
    const ExecStatusType status = PQresultStatus(raw);
    if (status == PGRES_PIPELINE_SYNC) break;
    if (status == PGRES_FATAL_ERROR && PQstatus(c) != CONNECTION_OK) Broken(c, raw);
    if (i >= steps.size() || out[i].kind != PipelineResult::Kind::kSkipped || out[i].rows) {
      continue;  // not one we asked for; dropped
    }
    PipelineResult& res = out[i];
    switch (status) {
      case PGRES_TUPLES_OK:
      case PGRES_COMMAND_OK:
        res.kind = PipelineResult::Kind::kOk;
        res.rows = std::move(r);
        break;
      case PGRES_PIPELINE_ABORTED:
        res.kind = PipelineResult::Kind::kSkipped;
        res.rows = std::move(r);  // marks the step as answered
        break;
      default: {
        res.kind = PipelineResult::Kind::kError;
        const char* state = PQresultErrorField(raw, PG_DIAG_SQLSTATE);
        res.sqlstate = state != nullptr ? state : "";
        res.message = ErrorText(c, raw);
        res.rows = std::move(r);
        break;
      }
    }
  }
  std::move(leave).Cancel();
  if (PQexitPipelineMode(c) != 1) Broken(c, nullptr);
  for (PipelineResult& res : out) {
    if (res.kind != PipelineResult::Kind::kOk) res.rows.reset();
  }
  return out;
}

namespace {

// PostgreSQL's type oids (pg_type.dat) of the array elements sent here.
constexpr uint32_t kByteaOid = 17, kInt4Oid = 23, kInt8Oid = 20, kTidOid = 27;

void PutBigEndian(std::string* out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// array_recv's layout: ndim, has-nulls flag, element oid, then per dimension
// its size and lower bound (none for an empty array), then each element as
// its length and bytes.
std::string ArrayHeader(uint32_t oid, size_t n, size_t element_bytes) {
  std::string out;
  out.reserve(20 + n * (4 + element_bytes));
  PutBigEndian(&out, n == 0 ? 0 : 1, 4);
  PutBigEndian(&out, 0, 4);
  PutBigEndian(&out, oid, 4);
  if (n > 0) {
    PutBigEndian(&out, n, 4);
    PutBigEndian(&out, 1, 4);
  }
  return out;
}

// Integers of Bits's width (two's complement, as array_recv reads them).
template <typename Bits, typename T>
std::string BinaryIntArray(uint32_t oid, const std::vector<T>& values) {
  std::string out = ArrayHeader(oid, values.size(), sizeof(Bits));
  for (T v : values) {
    PutBigEndian(&out, sizeof(Bits), 4);
    PutBigEndian(&out, static_cast<Bits>(v), sizeof(Bits));
  }
  return out;
}

}  // namespace

std::string BinaryInt4Array(const std::vector<int>& values) {
  return BinaryIntArray<uint32_t>(kInt4Oid, values);
}

std::string BinaryInt8Array(const std::vector<int64_t>& values) {
  return BinaryIntArray<uint64_t>(kInt8Oid, values);
}

std::string BinaryTidArray(const std::vector<uint64_t>& locators) {
  std::string out = ArrayHeader(kTidOid, locators.size(), 6);
  for (uint64_t l : locators) {
    PutBigEndian(&out, 6, 4);
    PutBigEndian(&out, l >> 16, 4);     // block
    PutBigEndian(&out, l & 0xffff, 2);  // offset
  }
  return out;
}

std::string BinaryByteaArray(const std::vector<absl::string_view>& values) {
  size_t bytes = 0;
  for (absl::string_view v : values) bytes += v.size();
  std::string out = ArrayHeader(kByteaOid, values.size(), 0);
  out.reserve(out.size() + values.size() * 4 + bytes);
  for (absl::string_view v : values) {
    PutBigEndian(&out, v.size(), 4);
    out.append(v.data(), v.size());
  }
  return out;
}

}  // namespace pg_internal
}  // namespace partq
