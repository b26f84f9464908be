// A throwaway PostgreSQL server for `partq demo`, `partq bench` and tests.
//
// Uses Debian's server binaries (/usr/lib/postgresql/15/bin, or the directory
// in $PARTQ_PG_BINDIR). When run as root the cluster belongs to, and the
// server runs as, the `postgres` user (PostgreSQL refuses to run as root).
// The server listens on 127.0.0.1 at a free port and on a Unix socket in its
// own temporary directory, with trust authentication for local use.
//
// Thread-safety: none; one owner drives it. The destructor stops the server
// (fast) and removes its directory unless `keep` was set.
#ifndef PARTQ_PG_EMBEDDED_POSTGRES_H_
#define PARTQ_PG_EMBEDDED_POSTGRES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace partq {

class EmbeddedPostgres {
 public:
  struct Options {
    bool keep = false;  // leave the data directory behind
    int port = 0;       // 0: pick a free one
    // Extra server settings, "name=value" each (passed as -c name=value).
    std::vector<std::string> settings;
    bool quiet = true;  // send server output to a log file, not stderr
  };

  // Creates a cluster (initdb) and starts it; waits until it accepts connections.
  static absl::StatusOr<std::unique_ptr<EmbeddedPostgres>> Start(const Options& options);
  static absl::StatusOr<std::unique_ptr<EmbeddedPostgres>> Start() { return Start(Options{}); }
  ~EmbeddedPostgres();

  EmbeddedPostgres(const EmbeddedPostgres&) = delete;
  EmbeddedPostgres& operator=(const EmbeddedPostgres&) = delete;

  // libpq connection string (TCP on 127.0.0.1).
  std::string dsn() const;
  int port() const { return port_; }
  const std::string& dir() const { return dir_; }

  enum class StopMode { kSmart, kFast, kImmediate };
  absl::Status Stop(StopMode mode = StopMode::kFast);
  absl::Status StartAgain();
  // Stop then start with the same data.
  absl::Status Restart(StopMode mode = StopMode::kFast);
  bool running() const { return running_; }

 private:
  EmbeddedPostgres() = default;
  absl::Status RunAsOwner(const std::vector<std::string>& argv, const std::string& log) const;

  std::string bindir_;
  std::string dir_;  // temp dir: data/, socket, log
  int port_ = 0;
  Options options_;
  bool running_ = false;
  bool as_postgres_ = false;
};

// For tests that run servers of their own (tests/ha: streaming replicas, Patroni):
// Debian's server binaries directory ($PARTQ_PG_BINDIR first; "" when there are none);
// argv run to completion as the user servers run as (`postgres` when this process is
// root), output appended to `log`.
std::string PostgresBindir();
absl::Status RunAsServerOwner(const std::vector<std::string>& argv, const std::string& log);

}  // namespace partq

#endif  // PARTQ_PG_EMBEDDED_POSTGRES_H_
