#include "handlers/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <climits>
#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "base/utf8.h"

extern char** environ;

namespace partq {
namespace {

constexpr size_t kReadChunk = 64 << 10;
constexpr size_t kMaxStderrLine = 64 << 10;  // a longer stderr line comes in pieces
constexpr size_t kLastStderrLine = 512;      // kept for error messages

// What a child wrote on stdout, for a message: its first bytes, escaped
// (the message may reach a text column and a log line).
constexpr size_t kQuotedOutputBytes = 200;
std::string QuoteOutput(absl::string_view out) {
  if (!out.empty() && out.back() == '\n') out.remove_suffix(1);
  return Quoted(out, kQuotedOutputBytes);
}

std::string Errno(absl::string_view what, int err) {
  return absl::StrCat(what, ": ", strerror(err));
}

// The milliseconds poll(2) should wait to reach `deadline`, rounded up.
int PollTimeout(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(
      INT_MAX, absl::ToInt64Milliseconds(left + absl::Milliseconds(1) - absl::Nanoseconds(1))));
}

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

// Moves a descriptor above 2, so that the child's dup2 onto 0, 1 and 2
// cannot clobber another of its pipes (when this process runs with a
// standard descriptor closed).
bool AboveStdio(int* fd) {
  if (*fd > 2) return true;
  const int moved = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
  if (moved < 0) return false;
  close(*fd);
  *fd = moved;
  return true;
}

bool SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

// Writing to a pipe whose reader is gone raises SIGPIPE, which would kill
// partq. Blocks it in this thread while alive, and consumes the one a write
// raised (EPIPE), unless one was pending already; process-wide dispositions
// are left alone (the technique libpq uses).
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeBlock() {
    if (raised_ && !was_pending_) {
      const timespec zero = {0, 0};
      while (sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;
  void Raised() { raised_ = true; }

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
  bool raised_ = false;
};

}  // namespace

std::string ShellCommand(absl::string_view command) {
  for (const char c : command) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        !absl::StrContains(" \t/._-+:,@=", c)) {
      return std::string(command);
    }
  }
  const absl::string_view trimmed = absl::StripLeadingAsciiWhitespace(command);
  const absl::string_view first = trimmed.substr(0, trimmed.find_first_of(" \t"));
  // The shell's own commands (and `time`, a keyword in bash) are not
  // programs `exec` could find: `exit 3`, `. ./env.sh`, `command prog`. `=`
  // in the first word makes it an assignment (`NAME=value cmd`).
  static const auto* const kBuiltins = new absl::flat_hash_set<absl::string_view>{
      "",         ".",        ":",      "[",     "alias",   "bg",    "break",  "builtin", "cd",
      "command",  "continue", "echo",   "eval",  "exec",    "exit",  "export", "false",   "fc",
      "fg",       "getopts",  "hash",   "jobs",  "kill",    "local", "printf", "pwd",     "read",
      "readonly", "return",   "set",    "shift", "source",  "test",  "time",   "times",   "trap",
      "true",     "type",     "ulimit", "umask", "unalias", "unset", "wait"};
  if (kBuiltins->contains(first) || absl::StrContains(first, '=')) return std::string(command);
  return absl::StrCat("exec ", command);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(ChildOptions options) {
  std::unique_ptr<ChildProcess> child(new ChildProcess(std::move(options)));
  if (absl::Status st = child->Spawn(); !st.ok()) return st;
  return child;
}

absl::Status ChildProcess::Spawn() {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  auto close_all = [&] {
    for (int* fd : {&in[0], &in[1], &out[0], &out[1], &err[0], &err[1]}) CloseFd(fd);
  };
  // O_CLOEXEC from the start: another thread may spawn a process of its own
  // at any moment, and must not inherit these.
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    close_all();
    return absl::InternalError(Errno("pipe2", e));
  }
  for (int* fd : {&in[0], &in[1], &out[0], &out[1], &err[0], &err[1]}) {
    if (!AboveStdio(fd)) {
      const int e = errno;
      close_all();
      return absl::InternalError(Errno("fcntl(F_DUPFD_CLOEXEC)", e));
    }
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 clears close-on-exec on 0, 1 and 2; everything else is closed,
  // including descriptors some library opened without O_CLOEXEC.
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A process group of its own: a kill reaches what the shell started too,
  // and a terminal's Ctrl-C (meant for partq, which then drains) does not.
  // Signals as a fresh process has them: partq's worker threads may block
  // some, and SIGPIPE may be ignored.
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, defaults;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigemptyset(&defaults);
  for (int sig = 1; sig < 32; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaddset(&defaults, sig);
  }
  posix_spawnattr_setsigdefault(&attr, &defaults);

  std::string sh = "sh", dash_c = "-c", command = ShellCommand(options_.command);
  char* argv[] = {sh.data(), dash_c.data(), command.data(), nullptr};
  std::vector<char*> envp;
  if (options_.environment) {
    for (const std::string& entry : *options_.environment) {
      envp.push_back(const_cast<char*>(entry.c_str()));  // posix_spawn does not write it
    }
    envp.push_back(nullptr);
  }
  const int rc = posix_spawn(&pid_, "/bin/sh", &actions, &attr, argv,
                             options_.environment ? envp.data() : environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  CloseFd(&in[0]);
  CloseFd(&out[1]);
  CloseFd(&err[1]);
  stdin_ = in[1];
  stdout_ = out[0];
  stderr_ = err[0];
  if (rc != 0) {
    pid_ = -1;
    reaped_ = true;
    CloseFd(&stdin_);
    CloseFd(&stdout_);
    CloseFd(&stderr_);
    return absl::InternalError(Errno("posix_spawn /bin/sh", rc));
  }
  // pidfd_open through syscall(2): glibc 2.36's <sys/pidfd.h> declares it
  // without C linkage, so C++ cannot link to it.
  absl::Status st;
  if (!SetNonBlocking(stdin_) || !SetNonBlocking(stdout_) || !SetNonBlocking(stderr_)) {
    st = absl::InternalError(Errno("fcntl(O_NONBLOCK)", errno));
  } else if ((pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0))) < 0) {
    st = absl::InternalError(Errno("pidfd_open (Linux 5.3 or later is needed)", errno));
  } else if ((wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
    st = absl::InternalError(Errno("eventfd", errno));
  }
  if (!st.ok()) {
    Kill();
    return st;
  }
  stderr_thread_ = std::thread([this] { StderrLoop(); });
  return absl::OkStatus();
}

ChildProcess::~ChildProcess() { Kill(); }

absl::Status ChildProcess::CheckIdle() {
  if (reaped_) return absl::UnavailableError(absl::StrCat("it ", ended()));
  pollfd fds[2] = {{stdout_, POLLIN, 0}, {pidfd_, POLLIN, 0}};
  while (poll(fds, 2, 0) < 0 && errno == EINTR) {
  }
  if (fds[0].revents != 0) {
    line_.clear();
    absl::Status err;
    const bool open = ReadStdout(&err);
    if (!err.ok()) return err;
    if (!line_.empty()) {
      return Fail(
          absl::StatusCode::kFailedPrecondition,
          absl::StrCat("wrote ", line_.size(),
                       " byte(s) on stdout while no request was pending: ", QuoteOutput(line_)));
    }
    if (!open) {
      const bool exited = WaitExit(absl::Now() + absl::Seconds(1));
      return Fail(absl::StatusCode::kUnavailable,
                  exited ? "exited while idle" : "closed its stdout while idle");
    }
  }
  if (fds[1].revents != 0) return Fail(absl::StatusCode::kUnavailable, "exited while idle");
  return absl::OkStatus();
}

bool ChildProcess::ReadStdout(absl::Status* error) {
  for (;;) {
    // Up to one byte more than the limit: room for the '\n' of a line at
    // the limit. More without a '\n' is too long.
    if (line_.size() > options_.max_line_bytes) {
      *error =
          Fail(absl::StatusCode::kResourceExhausted,
               absl::StrCat("wrote a reply line longer than the limit of ", options_.max_line_bytes,
                            " bytes, beginning ", QuoteOutput(line_)));
      return false;
    }
    const size_t left = options_.max_line_bytes - line_.size();
    const size_t chunk = left >= kReadChunk ? kReadChunk : left + 1;
    const size_t old = line_.size();
    line_.resize(old + chunk);
    const ssize_t n = read(stdout_, &line_[old], chunk);
    line_.resize(old + std::max<ssize_t>(n, 0));
    if (n > 0) {
      size_t peak = peak_line_bytes_.load();
      while (line_.size() > peak && !peak_line_bytes_.compare_exchange_weak(peak, line_.size())) {
      }
      // A complete line: leave the rest in the pipe (one line per request).
      if (memchr(&line_[old], '\n', n) != nullptr) return true;
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return true;
    *error = Fail(absl::StatusCode::kInternal, Errno("reading its stdout", errno));
    return false;
  }
}

absl::StatusOr<std::string> ChildProcess::TakeLine(size_t nl, size_t written,
                                                   size_t request_bytes) {
  if (written < request_bytes) {
    return Fail(absl::StatusCode::kFailedPrecondition,
                absl::StrCat("answered after reading ", written, " of the ", request_bytes,
                             " bytes of the request: ", QuoteOutput(line_)));
  }
  if (nl + 1 != line_.size()) {
    return Fail(absl::StatusCode::kFailedPrecondition,
                absl::StrCat("wrote more than one line in answer to one request: ",
                             QuoteOutput(absl::string_view(line_).substr(0, nl)), ", then ",
                             QuoteOutput(absl::string_view(line_).substr(nl + 1))));
  }
  line_.resize(nl);
  return std::move(line_);
}

bool ChildProcess::LineInPipe(size_t written, size_t request_bytes,
                              absl::StatusOr<std::string>* reply) {
  const size_t scanned = line_.size();
  absl::Status err;
  ReadStdout(&err);
  if (!err.ok()) {
    *reply = err;
    return true;
  }
  const size_t nl = line_.find('\n', scanned);
  if (nl == std::string::npos) return false;
  *reply = TakeLine(nl, written, request_bytes);
  return true;
}

absl::StatusOr<std::string> ChildProcess::ReplyAtDeadline(size_t written, size_t request_bytes) {
  // What reached the pipe while the last poll was ending counts: the
  // answer if it is whole, else said as what it wrote.
  if (absl::StatusOr<std::string> reply; LineInPipe(written, request_bytes, &reply)) return reply;
  return Fail(absl::StatusCode::kDeadlineExceeded,
              line_.empty() ? std::string("did not answer by the deadline")
                            : absl::StrCat("wrote ", line_.size(),
                                           " byte(s) of a line but not its end by the "
                                           "deadline: ",
                                           QuoteOutput(line_)));
}

absl::StatusOr<std::string> ChildProcess::ReplyAfterExit(size_t written, size_t request_bytes) {
  // What it wrote before it exited is still in the pipe.
  if (absl::StatusOr<std::string> reply; LineInPipe(written, request_bytes, &reply)) return reply;
  return Fail(absl::StatusCode::kUnavailable, "exited before answering");
}

absl::StatusOr<std::string> ChildProcess::Exchange(absl::string_view request, absl::Time deadline,
                                                   const std::atomic<bool>* cancel) {
  assert(request.find('\n') == absl::string_view::npos);
  if (reaped_) return absl::UnavailableError(absl::StrCat("it ", ended()));
  std::string out(request);
  out += '\n';
  size_t written = 0;
  line_.clear();
  SigpipeBlock sigpipe;

  for (;;) {
    if (cancel != nullptr && cancel->load()) {
      return Fail(absl::StatusCode::kCancelled, "given up: partq is stopping");
    }
    if (absl::Now() >= deadline) return ReplyAtDeadline(written, out.size());
    pollfd fds[3] = {{stdout_, POLLIN, 0}, {pidfd_, POLLIN, 0}, {stdin_, POLLOUT, 0}};
    const nfds_t n = written < out.size() ? 3 : 2;
    const int r = poll(
        fds, n,
        PollTimeout(cancel == nullptr ? deadline : std::min(deadline, absl::Now() + kCancelPoll)));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Fail(absl::StatusCode::kInternal, Errno("poll", errno));
    }
    if (fds[0].revents != 0) {
      const size_t scanned = line_.size();
      absl::Status err;
      const bool open = ReadStdout(&err);
      if (!err.ok()) return err;
      if (const size_t nl = line_.find('\n', scanned); nl != std::string::npos) {
        return TakeLine(nl, written, out.size());
      }
      if (!open) {
        // Most likely it is exiting; give it a moment, for its exit status.
        const bool exited = WaitExit(std::min(deadline, absl::Now() + absl::Seconds(1)));
        const char* how = exited ? "exited" : "closed its stdout";
        return Fail(
            absl::StatusCode::kUnavailable,
            line_.empty()
                ? absl::StrCat(how, " before answering")
                : absl::StrCat(how, " after writing ", line_.size(),
                               " byte(s) of a line, without its end: ", QuoteOutput(line_)));
      }
    }
    if (fds[1].revents != 0) return ReplyAfterExit(written, out.size());
    if (n == 3 && fds[2].revents != 0) {
      const ssize_t w = write(stdin_, out.data() + written, out.size() - written);
      if (w > 0) {
        written += static_cast<size_t>(w);
      } else if (w < 0 && errno == EPIPE) {
        sigpipe.Raised();
        // Most likely it is exiting (a process closes its stdin first).
        const bool exited = WaitExit(std::min(deadline, absl::Now() + absl::Seconds(1)));
        return Fail(absl::StatusCode::kUnavailable,
                    absl::StrCat(exited ? "exited" : "closed its stdin", " after reading ", written,
                                 " of the ", out.size(), " bytes of the request"));
      } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
        return Fail(absl::StatusCode::kInternal, Errno("writing to its stdin", errno));
      }
    }
  }
}

void ChildProcess::CloseStdin() { CloseFd(&stdin_); }

bool ChildProcess::WaitExit(absl::Time deadline) {
  if (reaped_ || pidfd_ < 0) return true;
  for (;;) {
    pollfd fd = {pidfd_, POLLIN, 0};
    const int r = poll(&fd, 1, PollTimeout(deadline));
    if (r > 0) return true;
    if (r == 0 && absl::Now() >= deadline) return false;
    if (r < 0 && errno != EINTR) return false;
  }
}

void ChildProcess::Stop(absl::Time deadline) {
  CloseStdin();
  WaitExit(deadline);
  Kill();
}

void ChildProcess::Kill() {
  if (pid_ > 0 && !reaped_) {
    // The whole group: the shell and whatever it started. The leader is not
    // reaped yet, so its id (the group's) cannot have been reused.
    kill(-pid_, SIGKILL);
    int status = 0;
    pid_t r;
    while ((r = waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
    }
    wait_status_ = r == pid_ ? status : -1;  // -1: reaped by someone else (SIGCHLD ignored)
    reaped_ = true;
  }
  CloseFd(&stdin_);
  CloseFd(&stdout_);
  CloseFd(&pidfd_);
  if (stderr_thread_.joinable()) {
    // The group is dead, so its stderr ends; the wake-up covers a process
    // that left the group and still holds the pipe.
    const uint64_t one = 1;
    (void)!write(wake_, &one, sizeof one);
    stderr_thread_.join();
  }
  CloseFd(&stderr_);
  CloseFd(&wake_);
}

std::string ChildProcess::ended() const {
  if (!reaped_) return "";
  if (wait_status_ == -1) return "ended (its status was collected elsewhere)";
  if (WIFEXITED(wait_status_))
    return absl::StrCat("exited with status ", WEXITSTATUS(wait_status_));
  if (WIFSIGNALED(wait_status_)) {
    const char* abbrev = sigabbrev_np(WTERMSIG(wait_status_));
    return abbrev != nullptr ? absl::StrCat("was killed by SIG", abbrev)
                             : absl::StrCat("was killed by signal ", WTERMSIG(wait_status_));
  }
  return absl::StrCat("ended with wait status ", wait_status_);
}

std::optional<int> ChildProcess::exit_code() const {
  if (!reaped_ || wait_status_ == -1 || !WIFEXITED(wait_status_)) return std::nullopt;
  return WEXITSTATUS(wait_status_);
}

std::string ChildProcess::last_stderr_line() const {
  absl::MutexLock lock(&mu_);
  return last_stderr_line_;
}

absl::Status ChildProcess::Fail(absl::StatusCode code, absl::string_view what) {
  Kill();
  std::string message = absl::StrCat(what, " (it ", ended());
  if (const std::string last = last_stderr_line(); !last.empty()) {
    // The child's bytes: escaped, since the message may reach a text column.
    absl::StrAppend(&message, "; its last stderr line: \"", PrintableUtf8(last), "\"");
  }
  message += ")";
  return absl::Status(code, message);
}

void ChildProcess::StderrLoop() {
  std::string pending;
  auto emit = [&](absl::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    {
      absl::MutexLock lock(&mu_);
      last_stderr_line_ = std::string(line.substr(0, kLastStderrLine));
    }
    if (options_.on_stderr_line) options_.on_stderr_line(pid_, line);
  };
  char buf[kReadChunk];
  bool stopping = false;
  for (;;) {
    pollfd fds[2] = {{stderr_, POLLIN, 0}, {wake_, POLLIN, 0}};
    const int r = poll(fds, 2, stopping ? 0 : -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    if (fds[1].revents != 0) stopping = true;
    bool eof = false;
    for (;;) {
      const ssize_t n = read(stderr_, buf, sizeof buf);
      if (n > 0) {
        pending.append(buf, static_cast<size_t>(n));
        size_t start = 0;
        for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
          emit(absl::string_view(pending).substr(start, nl - start));
        }
        pending.erase(0, start);
        while (pending.size() >= kMaxStderrLine) {
          emit(absl::string_view(pending).substr(0, kMaxStderrLine));
          pending.erase(0, kMaxStderrLine);
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      // EOF or an error end the loop; EAGAIN means all is read for now.
      eof = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
      break;
    }
    if (eof || stopping) break;
  }
  if (!pending.empty()) emit(pending);
  if (options_.on_stderr_end) options_.on_stderr_end(pid_);
}

}  // namespace partq
