#include "tests/testing/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/testing/wait.h"

#ifndef PARTQ_BINARY
#error "PARTQ_BINARY must be defined by the build"
#endif

namespace partq::testing {

std::string PartqBinary() { return PARTQ_BINARY; }

namespace {
[[noreturn]] void Exec(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env) {
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}
}  // namespace

ChildProcess::ChildProcess(std::vector<std::string> argv, std::map<std::string, std::string> env,
                           std::string log) {
  pid_ = fork();
  if (pid_ == 0) {
    if (!log.empty()) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
    }
    Exec(argv, env);
  }
}

ChildProcess::~ChildProcess() {
  if (Running()) {
    Signal(SIGKILL);
    Wait(absl::Seconds(10));
  }
}

void ChildProcess::Signal(int sig) {
  if (pid_ > 0 && !status_) kill(pid_, sig);
}

bool ChildProcess::Running() {
  if (pid_ <= 0 || status_) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = st;
    return false;
  }
  return true;
}

std::optional<int> ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (Running()) {
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return status_;
}

std::vector<std::string> AsServerOwner(std::vector<std::string> argv) {
  if (geteuid() != 0) return argv;
  std::vector<std::string> out = {"/usr/bin/setpriv", "--reuid=postgres", "--regid=postgres",
                                  "--init-groups", "--"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

int RunCommand(const std::vector<std::string>& argv, std::string* out,
               std::map<std::string, std::string> env, const std::string& input) {
  int outp[2], inp[2];
  if (pipe(outp) != 0 || pipe(inp) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(outp[1], 1);
    dup2(inp[0], 0);
    close(outp[0]);
    close(inp[1]);
    Exec(argv, env);
  }
  close(outp[1]);
  close(inp[0]);
  // Feed stdin from a writer thread-free loop: small inputs fit the pipe; for
  // larger ones write in a child.
  pid_t feeder = fork();
  if (feeder == 0) {
    close(outp[0]);
    size_t off = 0;
    while (off < input.size()) {
      ssize_t n = write(inp[1], input.data() + off, input.size() - off);
      if (n <= 0) break;
      off += n;
    }
    _exit(0);
  }
  close(inp[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(outp[0], buf, sizeof(buf))) > 0) {
    if (out) out->append(buf, n);
  }
  close(outp[0]);
  int st = 0;
  waitpid(feeder, nullptr, 0);
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

PortFileServer::PortFileServer(std::vector<std::string> argv, const std::string& dir) {
  static std::atomic<int> servers{0};
  const std::string name = absl::StrCat(dir, "/server-", getpid(), "-", ++servers);
  port_file_ = name + ".port";
  log_ = name + ".log";
  argv.insert(argv.end(), {"--port-file", port_file_});
  process_ =
      std::make_unique<ChildProcess>(std::move(argv), std::map<std::string, std::string>{}, log_);
  WaitUntil([&] { return std::filesystem::exists(port_file_) || !process_->Running(); },
            absl::Minutes(1));
  port_ = std::atoi(ReadFile(port_file_).c_str());
}

PortFileServer::~PortFileServer() {
  process_.reset();
  std::remove(port_file_.c_str());
  if (!::testing::Test::HasFailure()) std::remove(log_.c_str());
}

std::vector<ProcessInfo> AllProcesses() {
  std::vector<ProcessInfo> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    pid_t pid;
    if (!absl::SimpleAtoi(e.path().filename().string(), &pid)) continue;
    // A process that exits between the listing and the read fails the read
    // (ESRCH, which libstdc++ throws from the stream): it is gone, skip it.
    std::string stat;
    try {
      std::ifstream in(e.path() / "stat");
      stat.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    } catch (const std::exception&) {
      continue;
    }
    const size_t paren = stat.rfind(')');  // the command name may hold spaces
    if (paren == std::string::npos || paren + 2 > stat.size()) continue;
    std::istringstream rest(stat.substr(paren + 2));
    ProcessInfo p;
    p.pid = pid;
    rest >> p.state >> p.ppid >> p.pgrp;
    out.push_back(p);
  }
  return out;
}

// Through files rather than pipes: nothing to drain while the child runs.
PartqResult Partq(const std::vector<std::string>& args, const std::string& input) {
  char tmpl[] = "/tmp/partq-cli-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string in = dir + "/in", out = dir + "/out", err = dir + "/err";
  std::ofstream(in) << input;
  pid_t pid = fork();
  if (pid == 0) {
    int fi = open(in.c_str(), O_RDONLY);
    int fo = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fe = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fi, 0);
    dup2(fo, 1);
    dup2(fe, 2);
    unsetenv("PARTQ_DSN");
    unsetenv("PARTQ_SCHEMA");
    std::vector<std::string> argv = {PartqBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    Exec(argv, {});
  }
  int st = 0;
  waitpid(pid, &st, 0);
  PartqResult r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return r;
}

}  // namespace partq::testing
