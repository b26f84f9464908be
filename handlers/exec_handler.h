// `--handler exec:COMMAND`: a handler in any language, run as a long-lived
// child process that speaks the handler protocol (docs/handler-protocol.md)
// in JSON Lines: one request line per batch on its stdin, one reply line on
// its stdout, its log on stderr.
//
// Children: each call takes a child of its own from a pool (started lazily
// with /bin/sh -c COMMAND, see child_process.h), so there are at most as many
// children as calls running at once (the consumer's concurrency), and each
// has one batch in flight. A child that dies, hangs past the batch's
// deadline, writes a partial, overlong or invalid reply (unknown, duplicate
// or missing ids, garbage), or writes on stdout when not asked, is killed
// (SIGKILL to its process group, reaped) and started again on next use, after
// a restart backoff that doubles with each failure in a row (so a command
// that exits at once is not restarted in a loop). The batch then fails
// without blame (HandleBatch reports no statuses), so the consumer runs each
// item alone, and only an item that breaks the child on its own accumulates
// failed attempts. When no child could take the batch — the command cannot be
// run (the shell's status 126 or 127 before any answer), no child could be
// started, or the restart backoff outlasts the batch's deadline — nothing was
// sent: every item's status is Throttled (consumer/handler.h) until the next
// start, and no item uses an attempt for it.
//
// Environment: a child gets partq's, without its secrets: every variable
// whose name starts with PG (libpq's: PGPASSWORD, PGPASSFILE, PGHOST...) or
// PARTQ_ (PARTQ_DSN, PARTQ_HANDLER_AUTH...) is left out, except those named
// in options.pass_env; options.pass_all_env passes everything
// (ChildEnvironment).
//
// Each line of a child's stderr goes to partq's log as `exec[pid N]: LINE`
// (at options.stderr_level), at most options.stderr_lines lines and
// stderr_bytes bytes per stderr_interval per child, each cut at
// kMaxLoggedStderrLine bytes; the rest is counted and said in one line
// (`exec[pid N]: its stderr: K lines (B bytes) not logged over the last D`)
// with the next line logged, or when the child's stderr ends. (A child that writes a
// gigabyte costs a few kilobytes of log.) Its last line is kept whole for
// the error of a batch it fails, logged or not.
//
// The reply's per-item outcomes are final (Handler::StatusesAreFinal): an ok
// item's effects go through options.apply_effects (ApplyReplies, effects.h)
// inside the ack transaction, a failed one becomes a status with RetryIn /
// DeadNow hints and writes nothing, and the consumer records them all in
// that one ack without sending any item again.
//
// Threading: HandleBatch and Handle may be called from many threads at once.
// The handler must outlive its calls; destroying it closes every child's
// stdin, waits up to stop_grace for them to exit, then kills and reaps them.
#ifndef PARTQ_HANDLERS_EXEC_HANDLER_H_
#define PARTQ_HANDLERS_EXEC_HANDLER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/log.h"
#include "consumer/handler.h"
#include "handlers/effects.h"
#include "handlers/handler_metrics.h"
#include "handlers/protocol.h"

namespace partq {

struct ExecOptions {
  std::string command;   // run by /bin/sh -c
  std::string queue;     // the queue the items come from (sent with each item)
  int max_attempts = 0;  // the queue's (sent with each item)
  ReplyLimits limits;    // limits.max_reply_bytes also caps the reply line
  // A batch whose calls have no deadline (InfiniteFuture) gets this long.
  absl::Duration default_timeout = absl::Minutes(5);
  // The wait before restarting a child after the first failure in a row;
  // doubles with each further one, up to max_restart_backoff.
  absl::Duration restart_backoff = absl::Milliseconds(100);
  absl::Duration max_restart_backoff = absl::Seconds(5);
  // How long destruction waits for children to exit after their stdin closed.
  absl::Duration stop_grace = absl::Seconds(2);
  // The level of the children's stderr lines in partq's log. Warning (shown
  // by default): it is the only window on a failing handler.
  LogLevel stderr_level = LogLevel::kWarning;
  // Variables a child gets although their names start with PG or PARTQ_
  // (see above); all of them with pass_all_env.
  std::vector<std::string> pass_env;
  bool pass_all_env = false;
  // The budget of each child's stderr in the log (see above).
  int stderr_lines = 50;
  int64_t stderr_bytes = 32 << 10;
  absl::Duration stderr_interval = absl::Seconds(10);
  EffectsApplier apply_effects = ApplyEffects;
  std::shared_ptr<HandlerMetrics> metrics;  // may be null
};

class ExecHandler : public Handler {
 public:
  // A stderr line longer than this is logged cut, with its size.
  static constexpr size_t kMaxLoggedStderrLine = 4096;

  explicit ExecHandler(ExecOptions options);
  ~ExecHandler() override;
  ExecHandler(const ExecHandler&) = delete;
  ExecHandler& operator=(const ExecHandler&) = delete;

  absl::Status Handle(HandlerCall& call) override;
  // One request for all `calls`. On a failure of the whole batch (see
  // above) *statuses is left empty, except for a batch of one item, which
  // gets the failure as its status.
  void HandleBatch(absl::Span<HandlerCall* const> calls,
                   std::vector<absl::Status>* statuses) override;
  // True: each item's status is the reply's, its effects applied by
  // ApplyReplies (effects.h), and a failure without blame writes nothing.
  bool StatusesAreFinal() const override { return true; }

  struct Stats {
    int64_t starts = 0;          // children started
    int64_t kills = 0;           // children killed (or found dead) after a failed batch
    size_t peak_line_bytes = 0;  // the most any child's reply buffer held
  };
  Stats stats() const;

 private:
  struct Slot;
  // The replies to `calls`, in their order, or why the batch failed.
  absl::StatusOr<std::vector<ItemReply>> Run(absl::Span<HandlerCall* const> calls);
  // A running, idle child in `slot` (started or restarted, after the
  // backoff, if needed), or why there is none by `deadline` or before
  // `cancel` (may be null) is set.
  absl::Status Ready(Slot& slot, absl::Time deadline, const std::atomic<bool>* cancel);
  // The wait before the next start of `slot`'s child, after its failures.
  absl::Duration RestartBackoff(const Slot& slot) const;
  // The child of `slot` failed a batch with `st`: kill it, count the failure.
  absl::Status Failed(Slot& slot, pid_t pid, const absl::Status& st);
  Slot* Acquire() ABSL_LOCKS_EXCLUDED(mu_);
  void Release(Slot* slot) ABSL_LOCKS_EXCLUDED(mu_);

  const ExecOptions options_;
  const std::vector<std::string> environment_;  // ChildEnvironment(options_)
  const std::string batch_prefix_;  // random, so batch ids differ across processes
  std::atomic<int64_t> batches_{0};
  std::atomic<int64_t> starts_{0};
  std::atomic<int64_t> kills_{0};
  std::atomic<size_t> peak_line_bytes_{0};
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<Slot*> free_ ABSL_GUARDED_BY(mu_);
};

// The environment of an exec child under `options`: this process's
// ("NAME=value" each, from `environ`), without the variables whose names
// start with PG or PARTQ_ unless options.pass_env names them or
// options.pass_all_env is set.
std::vector<std::string> ChildEnvironment(const ExecOptions& options);

// "exec:COMMAND" as a handler: COMMAND is everything after "exec:", commas
// included (so exec must be the whole spec, not part of a chain), run by
// /bin/sh -c. `options` gives the rest (queue, max_attempts, limits...).
// InvalidArgument for an empty command or a spec that is not exec:.
absl::StatusOr<std::unique_ptr<Handler>> ParseExecSpec(absl::string_view spec, ExecOptions options);

}  // namespace partq

#endif  // PARTQ_HANDLERS_EXEC_HANDLER_H_
