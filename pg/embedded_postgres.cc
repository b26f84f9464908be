#include "pg/embedded_postgres.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace partq {
namespace {

absl::StatusOr<int> PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return absl::InternalError(absl::StrCat("picking a port: ", strerror(errno)));
  }
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

}  // namespace

std::string PostgresBindir() {
  if (const char* env = std::getenv("PARTQ_PG_BINDIR"); env != nullptr && *env) return env;
  for (const char* v : {"15", "16", "17", "14", "13"}) {
    std::string dir = absl::StrCat("/usr/lib/postgresql/", v, "/bin");
    if (access((dir + "/initdb").c_str(), X_OK) == 0) return dir;
  }
  return "";
}

namespace {

// Runs argv (optionally as `user`), output appended to `log`; waits for it.
absl::Status RunCommand(const std::vector<std::string>& argv, const std::string& log,
                        const passwd* user) {
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    if (user != nullptr) {
      if (setgid(user->pw_gid) != 0 || setuid(user->pw_uid) != 0) _exit(126);
      setenv("HOME", user->pw_dir, 1);
      setenv("USER", user->pw_name, 1);
    }
    // A cluster of our own must not pick up the caller's libpq settings.
    for (const char* v : {"PGHOST", "PGPORT", "PGDATA", "PGUSER", "PGDATABASE", "PGOPTIONS"})
      unsetenv(v);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("`", absl::StrJoin(argv, " "), "` failed (status ", status, "); see ", log));
}

}  // namespace

absl::Status RunAsServerOwner(const std::vector<std::string>& argv, const std::string& log) {
  return RunCommand(argv, log, geteuid() == 0 ? getpwnam("postgres") : nullptr);
}

absl::Status EmbeddedPostgres::RunAsOwner(const std::vector<std::string>& argv,
                                          const std::string& log) const {
  return RunCommand(argv, log, as_postgres_ ? getpwnam("postgres") : nullptr);
}

absl::StatusOr<std::unique_ptr<EmbeddedPostgres>> EmbeddedPostgres::Start(const Options& options) {
  std::unique_ptr<EmbeddedPostgres> pg(new EmbeddedPostgres());
  pg->options_ = options;
  pg->bindir_ = PostgresBindir();
  if (pg->bindir_.empty()) {
    return absl::FailedPreconditionError(
        "no PostgreSQL server binaries found (install Debian's postgresql-15, or set "
        "PARTQ_PG_BINDIR)");
  }
  pg->as_postgres_ = geteuid() == 0;
  const passwd* owner = nullptr;
  if (pg->as_postgres_) {
    owner = getpwnam("postgres");
    if (owner == nullptr) {
      return absl::FailedPreconditionError(
          "running as root, but there is no `postgres` user to run the embedded server as "
          "(install postgresql-15)");
    }
  }
  std::string tmpl = (std::filesystem::temp_directory_path() / "partq-pg-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp: ", strerror(errno)));
  }
  pg->dir_ = tmpl;
  if (owner != nullptr && chown(pg->dir_.c_str(), owner->pw_uid, owner->pw_gid) != 0) {
    return absl::InternalError(absl::StrCat("chown ", pg->dir_, ": ", strerror(errno)));
  }
  if (options.port != 0) {
    pg->port_ = options.port;
  } else {
    auto port = PickFreePort();
    if (!port.ok()) return port.status();
    pg->port_ = *port;
  }
  const std::string log = pg->dir_ + "/setup.log";
  absl::Status st =
      pg->RunAsOwner({pg->bindir_ + "/initdb", "-D", pg->dir_ + "/data", "-U", "postgres",
                      "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C"},
                     log);
  if (!st.ok()) return st;
  st = pg->StartAgain();
  if (!st.ok()) return st;
  return pg;
}

absl::Status EmbeddedPostgres::StartAgain() {
  std::string opts = absl::StrCat("-p ", port_, " -k ", dir_, " -c listen_addresses=127.0.0.1");
  for (const auto& s : options_.settings) absl::StrAppend(&opts, " -c ", s);
  const std::string log = dir_ + "/server.log";
  absl::Status st = RunAsOwner(
      {bindir_ + "/pg_ctl", "-D", dir_ + "/data", "-l", log, "-o", opts, "-w", "-t", "60", "start"},
      dir_ + "/setup.log");
  if (!st.ok()) return st;
  running_ = true;
  return absl::OkStatus();
}

absl::Status EmbeddedPostgres::Stop(StopMode mode) {
  if (!running_) return absl::OkStatus();
  const char* m = mode == StopMode::kSmart  ? "smart"
                  : mode == StopMode::kFast ? "fast"
                                            : "immediate";
  absl::Status st =
      RunAsOwner({bindir_ + "/pg_ctl", "-D", dir_ + "/data", "-m", m, "-w", "-t", "60", "stop"},
                 dir_ + "/setup.log");
  if (st.ok()) running_ = false;
  return st;
}

absl::Status EmbeddedPostgres::Restart(StopMode mode) {
  absl::Status st = Stop(mode);
  if (!st.ok()) return st;
  return StartAgain();
}

std::string EmbeddedPostgres::dsn() const {
  return absl::StrCat("host=127.0.0.1 port=", port_, " user=postgres dbname=postgres");
}

EmbeddedPostgres::~EmbeddedPostgres() {
  (void)Stop(StopMode::kFast);
  if (!options_.keep && !dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

}  // namespace partq
