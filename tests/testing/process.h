// Child processes for tests that run real `partq` binaries.
#ifndef PARTQ_TESTS_TESTING_PROCESS_H_
#define PARTQ_TESTS_TESTING_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace partq::testing {

// The partq binary built with the tests.
std::string PartqBinary();

class ChildProcess {
 public:
  // Starts argv[0] with argv, with `env` added to this process's environment;
  // output goes to `log` (appended), or is inherited when empty.
  ChildProcess(std::vector<std::string> argv, std::map<std::string, std::string> env = {},
               std::string log = "");
  ~ChildProcess();  // SIGKILLs and reaps if still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int sig);
  // Waits up to `timeout`; the exit status (as from waitpid) or nullopt.
  std::optional<int> Wait(absl::Duration timeout);
  bool Running();

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// A server in a child process that says where it listens by writing its
// port to a file: `--port-file PATH` is appended to argv, PATH in `dir`,
// and the constructor waits (up to a minute) until the file appears or the
// process exits. Its output goes to log(). Destruction kills it and removes
// its files, but the log of a test that failed.
class PortFileServer {
 public:
  PortFileServer(std::vector<std::string> argv, const std::string& dir);
  ~PortFileServer();
  int port() const { return port_; }  // 0 when it did not start
  const std::string& log() const { return log_; }

 private:
  std::string port_file_;
  std::string log_;
  std::unique_ptr<ChildProcess> process_;
  int port_ = 0;
};

// A process as /proc/PID/stat shows it.
struct ProcessInfo {
  pid_t pid = 0;
  char state = '?';  // 'Z': a zombie, not reaped yet
  pid_t ppid = 0;
  pid_t pgrp = 0;
};
// Every process on the machine, at one moment (some may be gone already).
std::vector<ProcessInfo> AllProcesses();

// argv run as the user PostgreSQL's servers run as: through setpriv as
// `postgres` when this process is root (setpriv execs in place, so a signal
// reaches the server itself), else unchanged. For servers that refuse root
// (postgres, Patroni's, pgbouncer).
std::vector<std::string> AsServerOwner(std::vector<std::string> argv);

// The whole of a file ("" when it cannot be read): logs, pid and port files.
std::string ReadFile(const std::string& path);

// Runs a command to completion; returns its exit code and stdout.
int RunCommand(const std::vector<std::string>& argv, std::string* out,
               std::map<std::string, std::string> env = {}, const std::string& input = "");

// What a run of the partq binary ended with.
struct PartqResult {
  int code = -1;  // the exit status (128 + the signal if killed)
  std::string out;
  std::string err;
};
// Runs `partq args...` to completion with `input` on stdin, without this
// process's PARTQ_DSN and PARTQ_SCHEMA (so only the flags given count);
// captures stdout and stderr apart.
PartqResult Partq(const std::vector<std::string>& args, const std::string& input = "");

}  // namespace partq::testing

#endif  // PARTQ_TESTS_TESTING_PROCESS_H_
