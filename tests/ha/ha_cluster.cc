#include "tests/ha/ha_cluster.h"

#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <pqxx/pqxx>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "pg/embedded_postgres.h"
#include "tests/observability/scrape.h"
#include "tests/testing/wait.h"

namespace partq::testing {
namespace {

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return static_cast<bool>(f);
}

// The node answers and is (not) in recovery; nullopt when it does not answer.
std::optional<bool> InRecovery(const std::string& dsn) {
  try {
    pqxx::connection c(dsn + " connect_timeout=1");
    pqxx::nontransaction tx(c);
    return tx.exec1("SELECT pg_is_in_recovery()")[0].as<bool>();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

HaCluster::~HaCluster() {
  if (!dir_.empty() && !keep_) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::string HaCluster::Dsn() const {
  return absl::StrCat("postgresql://postgres@127.0.0.1:", ports_[0], ",127.0.0.1:", ports_[1],
                      "/postgres?target_session_attrs=read-write");
}

std::string HaCluster::NodeDsn(int port) const {
  return absl::StrCat("host=127.0.0.1 port=", port, " user=postgres dbname=postgres");
}

int HaCluster::Leader() const {
  for (int port : ports_) {
    if (InRecovery(NodeDsn(port)) == std::optional<bool>(false)) return port;
  }
  return 0;
}

absl::Status HaCluster::WaitSynchronous(int leader, absl::Duration timeout) {
  const bool ok = WaitUntil(
      [&] {
        try {
          pqxx::connection c(NodeDsn(leader) + " connect_timeout=1");
          pqxx::nontransaction tx(c);
          return !tx.exec1("SELECT pg_is_in_recovery()")[0].as<bool>() &&
                 tx.exec1("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'")[0]
                         .as<int>() == 1;
        } catch (const std::exception&) {
          return false;
        }
      },
      timeout, absl::Milliseconds(100));
  if (ok) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat("node ", leader,
                                                  " is not a primary with a synchronous standby "
                                                  "after ",
                                                  absl::FormatDuration(timeout)));
}

absl::StatusOr<int> HaCluster::KillPostmaster(const std::string& data_dir) {
  const std::string pidfile = ReadFile(data_dir + "/postmaster.pid");
  int pid = 0;
  if (!absl::SimpleAtoi(pidfile.substr(0, pidfile.find('\n')), &pid) || pid <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no running server in ", data_dir, " (postmaster.pid: '", pidfile, "')"));
  }
  if (kill(pid, SIGKILL) != 0) {
    return absl::InternalError(absl::StrCat("kill ", pid, ": ", strerror(errno)));
  }
  return pid;
}

absl::Status HaCluster::MakeDir(const std::string& prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp: ", strerror(errno)));
  }
  dir_ = tmpl;
  if (geteuid() == 0) {
    const passwd* pg = getpwnam("postgres");
    if (pg == nullptr) return absl::FailedPreconditionError("no `postgres` user (postgresql-15)");
    if (chown(dir_.c_str(), pg->pw_uid, pg->pw_gid) != 0) {
      return absl::InternalError(absl::StrCat("chown ", dir_, ": ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

void HaCluster::StopServers(const std::vector<std::string>& data_dirs) {
  for (const std::string& d : data_dirs) {
    if (!std::filesystem::exists(d + "/postmaster.pid")) continue;
    (void)RunAsServerOwner(
        {PostgresBindir() + "/pg_ctl", "-D", d, "-m", "immediate", "-w", "-t", "30", "stop"},
        dir_ + "/teardown.log");
  }
}

// --- Patroni -----------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<PatroniCluster>> PatroniCluster::Start() {
  for (const char* tool : {"patroni", "patronictl", "etcd"}) {
    if (FindInPath(tool).empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          tool,
          " is not installed: the ha tests need Debian's patroni and etcd-server packages "
          "(scripts/lib.sh installs them)"));
    }
  }
  if (PostgresBindir().empty()) {
    return absl::FailedPreconditionError("no PostgreSQL server binaries (postgresql-15)");
  }
  std::unique_ptr<PatroniCluster> c(new PatroniCluster());
  if (absl::Status st = c->MakeDir("partq-patroni"); !st.ok()) return st;
  c->etcd_port_ = FreePort();
  c->etcd_peer_port_ = FreePort();
  for (int i = 0; i < 2; ++i) {
    c->ports_.push_back(FreePort());
    c->rest_ports_.push_back(FreePort());
    c->data_dirs_.push_back(absl::StrCat(c->dir_, "/n", i + 1));
    c->configs_.push_back(absl::StrCat(c->dir_, "/n", i + 1, ".yml"));
    if (!WriteFile(c->configs_[i], c->Config(i))) {
      return absl::InternalError(absl::StrCat("cannot write ", c->configs_[i]));
    }
  }
  const std::string etcd_url = absl::StrCat("http://127.0.0.1:", c->etcd_port_);
  const std::string peer_url = absl::StrCat("http://127.0.0.1:", c->etcd_peer_port_);
  c->etcd_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{FindInPath("etcd"), "--name", "e", "--data-dir", c->dir_ + "/etcd",
                               "--listen-client-urls", etcd_url, "--advertise-client-urls",
                               etcd_url, "--listen-peer-urls", peer_url,
                               "--initial-advertise-peer-urls", peer_url, "--initial-cluster",
                               "e=" + peer_url},
      std::map<std::string, std::string>{}, c->dir_ + "/etcd.log");
  std::string health;
  if (!WaitUntil([&] { return HttpGet(c->etcd_port_, "/health", &health) == 200; },
                 absl::Seconds(30), absl::Milliseconds(100))) {
    return absl::UnavailableError(
        absl::StrCat("etcd did not become healthy in 30 s; see ", c->dir_, "/etcd.log"));
  }
  // The first member bootstraps (initdb) and leads; the second clones it.
  for (int i = 0; i < 2; ++i) {
    c->patroni_.push_back(std::make_unique<ChildProcess>(
        AsServerOwner({FindInPath("patroni"), c->configs_[i]}),
        std::map<std::string, std::string>{}, absl::StrCat(c->dir_, "/patroni-n", i + 1, ".log")));
    if (i == 0 && !WaitUntil([&] { return c->Leader() == c->ports_[0]; }, absl::Seconds(60),
                             absl::Milliseconds(100))) {
      return absl::UnavailableError(absl::StrCat(
          "the first Patroni member did not lead within 60 s; see ", c->dir_, "/patroni-n1.log"));
    }
  }
  if (absl::Status st = c->WaitSynchronous(c->ports_[0], absl::Seconds(90)); !st.ok()) {
    return absl::UnavailableError(
        absl::StrCat(st.message(), "; see ", c->dir_, "/patroni-n2.log\n", c->Members()));
  }
  if (absl::Status st = c->WaitSyncStandby(c->ports_[1], absl::Seconds(60)); !st.ok()) return st;
  return c;
}

std::string PatroniCluster::Config(int i) const {
  // Timings: a 1 s loop so failovers take seconds; ttl 20 s is Patroni's
  // minimum. use_pg_rewind lets the old leader rejoin as a standby.
  std::string yml = R"(scope: partq-ha
name: n{N}
restapi:
  listen: 127.0.0.1:{REST}
  connect_address: 127.0.0.1:{REST}
etcd3:
  hosts: 127.0.0.1:{ETCD}
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 1
    retry_timeout: 5
    master_start_timeout: 0
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      parameters:
        max_connections: 200
        fsync: "off"
        wal_log_hints: "on"
  initdb:
    - encoding: UTF8
    - locale: C
    - auth: trust
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:{PORT}
  connect_address: 127.0.0.1:{PORT}
  data_dir: {DATA}
  bin_dir: {BIN}
  pgpass: {DIR}/pgpass-n{N}
  authentication:
    superuser: {username: postgres}
    replication: {username: postgres}
    rewind: {username: postgres}
  parameters:
    unix_socket_directories: {DIR}
)";
  return absl::StrReplaceAll(yml, {{"{N}", absl::StrCat(i + 1)},
                                   {"{REST}", absl::StrCat(rest_ports_[i])},
                                   {"{ETCD}", absl::StrCat(etcd_port_)},
                                   {"{PORT}", absl::StrCat(ports_[i])},
                                   {"{DATA}", data_dirs_[i]},
                                   {"{BIN}", PostgresBindir()},
                                   {"{DIR}", dir_}});
}

absl::Status PatroniCluster::WaitSyncStandby(int port, absl::Duration timeout) const {
  // Patroni's own view (its REST API answers /sync with 200 on the member its
  // DCS names synchronous), which may lag pg_stat_replication: a switchover
  // to a candidate not named there yet is dropped (seen: "received switchover
  // request", then nothing).
  const int rest = rest_ports_[port == ports_[0] ? 0 : 1];
  std::string body;
  if (WaitUntil([&] { return HttpGet(rest, "/sync", &body) == 200; }, timeout,
                absl::Milliseconds(100))) {
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(absl::StrCat("Patroni does not name ", NameOf(port),
                                                  " the synchronous standby after ",
                                                  absl::FormatDuration(timeout), "\n", Members()));
}

std::string PatroniCluster::NameOf(int port) const { return port == ports_[0] ? "n1" : "n2"; }

std::string PatroniCluster::Members() const {
  std::string out;
  RunCommand({FindInPath("patronictl"), "-c", configs_[0], "list"}, &out);
  return out;
}

absl::StatusOr<int> PatroniCluster::Switchover() {
  const int leader = Leader();
  if (leader == 0) return absl::FailedPreconditionError("no leader to switch over from");
  const int candidate = Other(leader);
  if (absl::Status st = WaitSyncStandby(candidate, absl::Seconds(60)); !st.ok()) return st;
  std::string out;
  const int rc = RunCommand({FindInPath("patronictl"), "-c", configs_[0], "switchover", "--leader",
                             NameOf(leader), "--candidate", NameOf(candidate), "--force"},
                            &out);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("patronictl switchover exited ", rc, ": ", out));
  }
  return candidate;
}

absl::StatusOr<int> PatroniCluster::KillLeaderPostgres() {
  const int leader = Leader();
  if (leader == 0) return absl::FailedPreconditionError("no leader to kill");
  // Patroni fails over only to the member it names synchronous.
  if (absl::Status st = WaitSyncStandby(Other(leader), absl::Seconds(60)); !st.ok()) return st;
  auto pid = KillPostmaster(data_dirs_[leader == ports_[0] ? 0 : 1]);
  if (!pid.ok()) return pid.status();
  return Other(leader);
}

PatroniCluster::~PatroniCluster() {
  // Patroni stops its server on SIGTERM; whatever is left is stopped hard.
  for (auto& p : patroni_) p->Signal(SIGTERM);
  for (auto& p : patroni_) {
    if (!p->Wait(absl::Seconds(30))) p->Signal(SIGKILL);
  }
  patroni_.clear();
  StopServers(data_dirs_);
  etcd_.reset();
}

// --- a primary and a standby --------------------------------------------------------------

absl::StatusOr<std::unique_ptr<StreamingPair>> StreamingPair::Start() {
  std::unique_ptr<StreamingPair> c(new StreamingPair());
  c->bindir_ = PostgresBindir();
  if (c->bindir_.empty()) {
    return absl::FailedPreconditionError("no PostgreSQL server binaries (postgresql-15)");
  }
  if (absl::Status st = c->MakeDir("partq-pair"); !st.ok()) return st;
  const std::string log = c->dir_ + "/setup.log";
  for (int i = 0; i < 2; ++i) {
    c->ports_.push_back(FreePort());
    c->data_dirs_.push_back(absl::StrCat(c->dir_, i == 0 ? "/primary" : "/standby"));
  }
  auto start = [&](int i) {
    return RunAsServerOwner(
        {c->bindir_ + "/pg_ctl", "-D", c->data_dirs_[i], "-l",
         absl::StrCat(c->dir_, i == 0 ? "/primary.log" : "/standby.log"), "-w", "-t", "60", "-o",
         absl::StrCat("-p ", c->ports_[i], " -k ", c->dir_,
                      " -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off",
                      i == 0 ? " -c synchronous_standby_names=*" : ""),
         "start"},
        log);
  };
  if (absl::Status st =
          RunAsServerOwner({c->bindir_ + "/initdb", "-D", c->data_dirs_[0], "-U", "postgres",
                            "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C"},
                           log);
      !st.ok()) {
    return st;
  }
  if (absl::Status st = start(0); !st.ok()) return st;
  if (absl::Status st = RunAsServerOwner(
          {c->bindir_ + "/pg_basebackup", "-D", c->data_dirs_[1], "-R", "-X", "stream", "-h",
           "127.0.0.1", "-p", absl::StrCat(c->ports_[0]), "-U", "postgres"},
          log);
      !st.ok()) {
    return st;
  }
  if (absl::Status st = start(1); !st.ok()) return st;
  if (absl::Status st = c->WaitSynchronous(c->ports_[0], absl::Seconds(60)); !st.ok()) return st;
  return c;
}

absl::StatusOr<int> StreamingPair::KillPrimaryAndPromote() {
  auto pid = KillPostmaster(data_dirs_[0]);
  if (!pid.ok()) return pid.status();
  if (absl::Status st =
          RunAsServerOwner({bindir_ + "/pg_ctl", "-D", data_dirs_[1], "-w", "-t", "60", "promote"},
                           dir_ + "/setup.log");
      !st.ok()) {
    return st;
  }
  return ports_[1];
}

StreamingPair::~StreamingPair() { StopServers(data_dirs_); }

}  // namespace partq::testing
