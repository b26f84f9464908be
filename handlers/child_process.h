// A long-lived child process spoken to in lines: one request line written to
// its stdin, one reply line read from its stdout, within a deadline.
//
// The command runs as `/bin/sh -c COMMAND` (so the shell's quoting, variables
// and `exec` apply) in a process group of its own, with its stdin, stdout
// and stderr on pipes and no other descriptor of ours open (close-on-exec
// everywhere, and every descriptor above 2 closed in the child), default
// signal dispositions and an empty signal mask. Killing it kills the whole
// group (the shell and what it started) with SIGKILL and reaps it: no zombie
// is left.
//
// Its stderr is read on a thread of its own, line by line, and handed to a
// callback as it comes (it is never mixed into the protocol).
//
// Memory: a reply line is read into a buffer that never holds more than
// max_line_bytes + 1 bytes; a longer line kills the child.
//
// Thread-safety: Exchange, Stop and Kill are called by one thread at a time
// (the owner); peak_line_bytes and last_stderr_line from any thread.
#ifndef PARTQ_HANDLERS_CHILD_PROCESS_H_
#define PARTQ_HANDLERS_CHILD_PROCESS_H_

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace partq {

struct ChildOptions {
  std::string command;  // run by /bin/sh -c
  // A stdout line (without its '\n') longer than this kills the child.
  size_t max_line_bytes = 16 << 20;
  // Each line the child writes to stderr (without '\n'; a line over 64 KiB
  // comes in pieces), with the child's pid. Called on the child's stderr
  // thread; must be thread-safe. May be empty.
  std::function<void(pid_t pid, absl::string_view line)> on_stderr_line;
  // Once the child's stderr has ended (after its last on_stderr_line), on
  // the same thread. May be empty.
  std::function<void(pid_t pid)> on_stderr_end;
  // The child's environment, "NAME=value" each; nullopt: this process's.
  std::optional<std::vector<std::string>> environment;
};

// The text given to `/bin/sh -c` for `command`: a plain command (words of
// letters, digits and `/._-+:,@=`, separated by blanks, the first a program:
// neither one of the shell's own commands, such as `exec` or `exit`, nor an
// assignment) gets `exec ` in front, so the shell becomes the program and the
// child's pid is the program's, as a shell that does not exec its last
// command (Debian's dash) would otherwise leave itself between them.
// Anything else (quotes, variables, `&&`, `NAME=value cmd`, ...) is left to
// the shell as written.
std::string ShellCommand(absl::string_view command);

class ChildProcess {
 public:
  // Starts the child. Internal if a pipe or the spawn fails (the message says
  // which); a command that does not exist still starts (the shell) and exits
  // with status 127.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(ChildOptions options);
  ~ChildProcess();  // Kill()
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Whether the child can take a request now: it is running and has written
  // nothing on stdout since its last reply. If not, kills it and says why.
  absl::Status CheckIdle();

  // Writes `request` (which must not contain '\n'; the '\n' is added) to the
  // child's stdin while reading its stdout, and returns the first line it
  // writes back, without the '\n'. Any failure kills the child (kill() and
  // reap), and the status says what happened:
  //   DeadlineExceeded   no complete line by `deadline` (it hangs, or wrote a
  //                      partial line);
  //   ResourceExhausted  the line grew past max_line_bytes;
  //   Unavailable        it exited, closed stdout or stopped reading stdin;
  //   FailedPrecondition it answered before reading the whole request, or
  //                      wrote more than one line;
  //   Cancelled          `cancel` (when given) was set, by another thread:
  //                      seen within kCancelPoll.
  // After a success the child may have exited (it answered, then quit):
  // CheckIdle says so before the next request.
  absl::StatusOr<std::string> Exchange(absl::string_view request, absl::Time deadline,
                                       const std::atomic<bool>* cancel = nullptr);
  // How often Exchange looks at its cancel flag.
  static constexpr absl::Duration kCancelPoll = absl::Milliseconds(50);

  // Graceful stop: closes its stdin (a well-behaved child exits on EOF),
  // waits for it to exit until `deadline`, then Kill().
  void CloseStdin();
  void Stop(absl::Time deadline);
  // SIGKILL to the process group, reap, join the stderr thread (after it
  // has passed on what the child wrote). Idempotent.
  void Kill();

  bool running() const { return !reaped_; }
  // How it ended ("exited with status 3", "was killed by SIGKILL"); empty
  // while it runs.
  std::string ended() const;
  // Its exit status once it has exited (not when killed by a signal).
  std::optional<int> exit_code() const;
  // The largest number of bytes the reply buffer ever held.
  size_t peak_line_bytes() const { return peak_line_bytes_.load(); }
  // The last line the child wrote to stderr (at most 512 bytes), or "".
  std::string last_stderr_line() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit ChildProcess(ChildOptions options) : options_(std::move(options)) {}
  absl::Status Spawn();
  // Reads what stdout has now (non-blocking) into line_. Returns false on
  // EOF or a read error.
  bool ReadStdout(absl::Status* error);
  // Exchange's steps, for a request of `request_bytes` of which `written`
  // went out. TakeLine: the complete line in line_ that ends at `nl`, if the
  // whole request went out first and nothing follows the line.
  absl::StatusOr<std::string> TakeLine(size_t nl, size_t written, size_t request_bytes);
  // Reads what the pipe holds now: true, with *reply set, when that ends a
  // line (the reply or why it is none) or the read failed.
  bool LineInPipe(size_t written, size_t request_bytes, absl::StatusOr<std::string>* reply);
  // At the deadline: the reply if what reached the pipe completes it, else
  // DeadlineExceeded.
  absl::StatusOr<std::string> ReplyAtDeadline(size_t written, size_t request_bytes);
  // Once it has exited: the reply if it wrote one first, else Unavailable.
  absl::StatusOr<std::string> ReplyAfterExit(size_t written, size_t request_bytes);
  // Waits (poll on the pidfd) until the child exits or `deadline`.
  bool WaitExit(absl::Time deadline);
  void StderrLoop();
  // Kills the child and returns `st` with how it ended added to the message.
  absl::Status Fail(absl::StatusCode code, absl::string_view what);

  const ChildOptions options_;
  pid_t pid_ = -1;
  int stdin_ = -1, stdout_ = -1, stderr_ = -1;
  int pidfd_ = -1;
  int wake_ = -1;  // eventfd: tells the stderr thread to drain and stop
  bool reaped_ = false;
  int wait_status_ = 0;
  std::string line_;  // the reply being read
  std::atomic<size_t> peak_line_bytes_{0};
  std::thread stderr_thread_;
  mutable absl::Mutex mu_;
  std::string last_stderr_line_ ABSL_GUARDED_BY(mu_);
};

}  // namespace partq

#endif  // PARTQ_HANDLERS_CHILD_PROCESS_H_
