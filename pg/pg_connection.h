// Private to pg/pg_store*.cc (like pg_store_internal.h): the
// connection PgStore uses, and libpq's pipeline mode on it.
//
// libpqxx 6.4 sends one statement and waits for its result before the next;
// it does not wrap libpq's pipeline mode (PostgreSQL 14+ libpq), which sends
// several statements in one flight and reads their results afterwards. The
// hot path of Finish needs exactly that: the ack statement and the COMMIT
// that must follow it only if it succeeded (the server skips the rest of a
// pipeline after an error). So PgConnection is a libpqxx connection that also
// hands out libpq's handle, and Pipeline runs statements prepared on that
// handle. Between two libpqxx calls the connection is idle, so libpq calls
// there leave libpqxx's view of it unchanged: Pipeline leaves pipeline mode
// and reads every result before it returns.
#ifndef PARTQ_PG_PG_CONNECTION_H_
#define PARTQ_PG_PG_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"

namespace partq {
namespace pg_internal {

class PgConnection final : public pqxx::connection_base {
 public:
  // Connects at once (like pqxx::connection); throws what libpqxx throws.
  explicit PgConnection(const std::string& dsn);
  ~PgConnection() noexcept;
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // libpq's handle of the server connection; nullptr while there is none.
  pg_conn* raw() const { return policy_.raw; }
  // Unique to the server connection: changes whenever libpqxx opens a new
  // one underneath, so statements prepared through raw() are known gone.
  uint64_t generation() const { return policy_.generation; }

 private:
  // connect_direct, remembering the handle it hands to libpqxx.
  struct Policy final : public pqxx::connect_direct {
    explicit Policy(const std::string& dsn) : pqxx::connect_direct(dsn) {}
    handle do_startconnect(handle orig) override;
    handle do_completeconnect(handle orig) override;
    handle do_dropconnect(handle orig) noexcept override;
    handle do_disconnect(handle orig) noexcept override;
    void Note(handle h) noexcept;

    pg_conn* raw = nullptr;
    uint64_t generation = 0;
  };
  Policy policy_;
};

// The result of one statement of a pipeline.
struct PipelineResult {
  enum class Kind { kOk, kError, kSkipped };
  Kind kind = Kind::kSkipped;
  std::string sqlstate;  // kError
  std::string message;   // kError: the server's message
  // kOk: the rows (empty for a command). Owned; freed with this object.
  std::shared_ptr<pg_result> rows;
  int size() const;
  bool is_null(int row, int column) const;
  absl::string_view get(int row, int column) const;
};

// Statements prepared on a PgConnection's libpq handle (names distinct from
// the ones libpqxx prepares), and the pipeline that runs them.
class Pipeline {
 public:
  struct Step {
    const char* name;                                // a statement added with Define
    std::vector<std::optional<std::string>> params;  // nullopt is NULL
    bool binary = false;  // rows in PostgreSQL's binary format, else text
    // Which params are in PostgreSQL's binary format (BinaryInt8Array and
    // the like, below), by position; the rest (and all, when shorter) are text.
    std::vector<bool> binary_params = {};
  };
  // Registers a statement; it is prepared on first use on each server
  // connection.
  void Define(const char* name, std::string sql);
  // `unnamed`: nothing is prepared; each step is sent whole as the unnamed
  // statement (Parse, Bind, Execute in the same flight), for a transaction
  // pooler, where a name prepared on one server connection is not on the next.
  void SetUnnamed(bool unnamed) { unnamed_ = unnamed; }
  // Sends `steps` in one flight and reads one result per step. A statement
  // that fails makes the server skip the ones after it (kSkipped) and leaves
  // an open transaction aborted. Throws pqxx::broken_connection if the
  // connection breaks (which statements ran is then unknown), and
  // pqxx::sql_error if a statement cannot be prepared.
  std::vector<PipelineResult> Run(PgConnection& conn, const std::vector<Step>& steps);

 private:
  void Prepare(PgConnection& conn, const char* name);
  const std::string& Sql(const char* name) const;  // of a statement Define'd

  std::vector<std::pair<std::string, std::string>> sql_;  // name -> text
  uint64_t prepared_generation_ = 0;
  absl::flat_hash_set<std::string> prepared_;  // on prepared_generation_
  bool unnamed_ = false;
};

// One-dimensional arrays in PostgreSQL's binary format (array_recv), for a
// parameter whose type is that array type: the server reads them without
// parsing text (a batch's ids and ctids as text literals: ~2 % of the
// server's CPU in a drain, BENCHMARKS.md). Ctids are locators (Item::locator:
// block << 16 | offset).
std::string BinaryInt4Array(const std::vector<int>& values);
std::string BinaryInt8Array(const std::vector<int64_t>& values);
std::string BinaryTidArray(const std::vector<uint64_t>& locators);
std::string BinaryByteaArray(const std::vector<absl::string_view>& values);

}  // namespace pg_internal
}  // namespace partq

#endif  // PARTQ_PG_PG_CONNECTION_H_
