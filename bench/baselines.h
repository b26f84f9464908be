// The plain-SQL side of the benchmark: the baseline queues and the admin
// queries the benchmark needs (truncate, checkpoint, server counters). Uses
// libpqxx directly: baselines are plain SQL by definition, so the "only
// PgStore includes libpqxx" rule of the product libraries does not apply.
//
// Thread-safety: a Sql is one connection, for one thread at a time; Drain
// opens its own connection per session.
#ifndef PARTQ_BENCH_BASELINES_H_
#define PARTQ_BENCH_BASELINES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace partq::bench {

class Sql {
 public:
  static absl::StatusOr<std::unique_ptr<Sql>> Open(const std::string& dsn);
  ~Sql();
  // Runs `sql` (one or more statements, no parameters) in autocommit mode.
  absl::StatusOr<std::vector<std::vector<std::optional<std::string>>>> Query(
      const std::string& sql);
  absl::Status Exec(const std::string& sql);
  // The first column of the first row, or an error when there is none.
  absl::StatusOr<std::string> Scalar(const std::string& sql);

 private:
  struct Impl;
  explicit Sql(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Creates the baseline tables in `schema` (which must exist):
//   bl_jobs(id, payload, status, enqueued_at) and bl_results, the same shape
//   as the record handler's table (item_id, session_id uuid, acked_at); and
//   log_floor's bl_log(id, payload, enqueued_at) and bl_offsets(part, off).
absl::Status CreateBaselineTables(Sql& sql, const std::string& schema);

// Empties the baseline tables, checkpoints, loads `items` jobs (payload like
// partq's; into bl_log for `system` log_floor) and returns. Not timed.
absl::Status LoadBaseline(Sql& sql, const std::string& schema, int64_t items,
                          const std::string& system);

// Drains bl_jobs with `sessions` connections of `system` (one of
// skip_locked_batch, skip_locked_one, naive_update, floor; or bl_log with
// log_floor, whose ack deletes nothing: it moves the session's offset row) at
// `batch`;
// returns the seconds from the moment every connection was ready until the
// last one found nothing left. Every item's ack inserts one bl_results row
// and, but for log_floor's, deletes the item in the same transaction.
// `mark`, when given, is called with true when the clock starts and with
// false when it stops.
absl::StatusOr<double> DrainBaseline(const std::string& dsn, const std::string& schema,
                                     const std::string& system, int sessions, int batch,
                                     int64_t items,
                                     const std::function<void(bool)>& mark = nullptr);

// The idle pick-up's floor (issue 51): what waking for one item costs with
// nothing of a queue's own. One connection LISTENs and, on the thread that
// read the notice, takes the oldest bl_jobs row and writes its result in one
// statement (the drain floor's DELETE ... RETURNING into bl_results,
// committed without waiting for the WAL's flush, as partq's claim); another
// inserts and notifies in one statement, `samples` times, 5-20 ms apart as
// partq's pick-up does. The milliseconds from each insert's return (its
// commit) to the return of the statement that took it: a notice and one
// round trip, the least a queue woken by notices pays. Checks that every job
// was taken once (its bl_results rows).
absl::StatusOr<std::vector<double>> PickupBaseline(const std::string& dsn,
                                                   const std::string& schema, int samples);

}  // namespace partq::bench

#endif  // PARTQ_BENCH_BASELINES_H_
