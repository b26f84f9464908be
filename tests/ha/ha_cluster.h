// Highly available PostgreSQL for the `ha` tests (issue 29): two PostgreSQL 15
// nodes on loopback with synchronous streaming replication, run either by a
// real Patroni cluster (Debian's `patroni` 3.0, one `etcd` of Debian's
// etcd-server as its store) or as a plain primary and standby that the test
// promotes with `pg_ctl promote`, as managed clouds do. Clients reach the
// writable node through libpq's multi-host DSN with
// target_session_attrs=read-write, as docs/high-availability.md tells users.
//
// The servers run as `postgres` when the test runs as root (PostgreSQL
// refuses root). Everything lives in one temporary directory, removed on
// destruction unless `keep` (a failed test keeps it for its logs).
//
// Thread-safety: none; the test thread drives it.
#ifndef PARTQ_TESTS_HA_HA_CLUSTER_H_
#define PARTQ_TESTS_HA_HA_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/testing/process.h"

namespace partq::testing {

class HaCluster {
 public:
  virtual ~HaCluster();
  // postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/postgres?target_session_attrs=read-write
  std::string Dsn() const;
  // One node alone.
  std::string NodeDsn(int port) const;
  const std::vector<int>& ports() const { return ports_; }
  const std::string& dir() const { return dir_; }
  // The port of the node that is out of recovery now, or 0.
  int Leader() const;
  // The other node's port.
  int Other(int port) const { return port == ports_[0] ? ports_[1] : ports_[0]; }
  // Waits until `leader` is out of recovery and streams to the other node
  // synchronously (pg_stat_replication.sync_state = 'sync').
  absl::Status WaitSynchronous(int leader, absl::Duration timeout);
  // SIGKILLs the postmaster whose data directory is `data_dir`; its pid.
  static absl::StatusOr<int> KillPostmaster(const std::string& data_dir);
  // Keep the directory (and its logs) at destruction.
  void keep() { keep_ = true; }

 protected:
  HaCluster() = default;
  // A fresh temporary directory owned by the servers' user.
  absl::Status MakeDir(const std::string& prefix);
  // pg_ctl -m immediate stop on each data directory with a postmaster.pid.
  void StopServers(const std::vector<std::string>& data_dirs);

  std::vector<int> ports_;
  std::string dir_;
  bool keep_ = false;
};

// Patroni with synchronous_mode, loop_wait 1 s and master_start_timeout 0 (a
// crashed primary fails over at once instead of being restarted in place).
class PatroniCluster : public HaCluster {
 public:
  // Starts etcd and two Patroni members, waits for a leader with a
  // synchronous standby. FailedPrecondition naming the package when patroni
  // or etcd is not installed.
  static absl::StatusOr<std::unique_ptr<PatroniCluster>> Start();
  ~PatroniCluster() override;

  // `patronictl switchover --leader <current> --candidate <other> --force`,
  // once Patroni names the candidate its synchronous standby. Returns the
  // candidate's port.
  absl::StatusOr<int> Switchover();
  // SIGKILLs the leader's postmaster (Patroni then fails over). Returns the
  // port of the node that should take over.
  absl::StatusOr<int> KillLeaderPostgres();
  // `patronictl list`, for logs.
  std::string Members() const;
  // Waits until Patroni names the member on `port` its synchronous standby.
  absl::Status WaitSyncStandby(int port, absl::Duration timeout) const;

 private:
  PatroniCluster() = default;
  std::string Config(int i) const;
  std::string NameOf(int port) const;

  int etcd_port_ = 0, etcd_peer_port_ = 0;
  std::vector<int> rest_ports_;
  std::vector<std::string> configs_, data_dirs_;
  std::unique_ptr<ChildProcess> etcd_;
  std::vector<std::unique_ptr<ChildProcess>> patroni_;
};

// A primary (synchronous_standby_names = '*') and a standby made with
// pg_basebackup -R. No manager: a failover is a kill and `pg_ctl promote`.
class StreamingPair : public HaCluster {
 public:
  static absl::StatusOr<std::unique_ptr<StreamingPair>> Start();
  ~StreamingPair() override;
  // SIGKILLs the primary's postmaster, then promotes the standby; returns
  // the standby's port.
  absl::StatusOr<int> KillPrimaryAndPromote();

 private:
  StreamingPair() = default;
  std::string bindir_;
  std::vector<std::string> data_dirs_;  // [0] primary, [1] standby
};

}  // namespace partq::testing

#endif  // PARTQ_TESTS_HA_HA_CLUSTER_H_
