#include "handlers/exec_handler.h"

#include <algorithm>
#include <cassert>
#include <memory>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "base/log_limiter.h"
#include "base/utf8.h"
#include "handlers/child_process.h"

extern char** environ;

namespace partq {

struct ExecHandler::Slot {
  std::unique_ptr<ChildProcess> child;
  bool answered = false;  // the child has answered a request
  int failures = 0;       // failed batches in a row: the restart backoff
  absl::Time failed_at;
  std::string last_failure;
};

namespace {

std::string RandomPrefix() {
  absl::BitGen gen;
  return absl::StrFormat("%016x", absl::Uniform<uint64_t>(gen));
}

void MaxInto(std::atomic<size_t>& into, size_t v) {
  size_t cur = into.load();
  while (v > cur && !into.compare_exchange_weak(cur, v)) {
  }
}

}  // namespace

std::vector<std::string> ChildEnvironment(const ExecOptions& options) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const absl::string_view entry = *e;
    const absl::string_view name = entry.substr(0, entry.find('='));
    const bool secret = absl::StartsWith(name, "PG") || absl::StartsWith(name, "PARTQ_");
    if (secret && !options.pass_all_env &&
        std::find(options.pass_env.begin(), options.pass_env.end(), name) ==
            options.pass_env.end()) {
      continue;
    }
    out.emplace_back(entry);
  }
  return out;
}

ExecHandler::ExecHandler(ExecOptions options)
    : options_(std::move(options)),
      environment_(ChildEnvironment(options_)),
      batch_prefix_(RandomPrefix()) {}

ExecHandler::~ExecHandler() {
  absl::MutexLock lock(&mu_);
  assert(free_.size() == slots_.size());  // no call may be running
  // All children get EOF first, then share one grace period.
  const absl::Time deadline = absl::Now() + options_.stop_grace;
  for (auto& slot : slots_) {
    if (slot->child) slot->child->CloseStdin();
  }
  for (auto& slot : slots_) {
    if (slot->child) {
      slot->child->Stop(deadline);
      MaxInto(peak_line_bytes_, slot->child->peak_line_bytes());
      slot->child.reset();
    }
  }
}

ExecHandler::Slot* ExecHandler::Acquire() {
  absl::MutexLock lock(&mu_);
  if (free_.empty()) {
    slots_.push_back(std::make_unique<Slot>());
    return slots_.back().get();
  }
  Slot* slot = free_.back();  // the most recently used: its child is warm
  free_.pop_back();
  return slot;
}

void ExecHandler::Release(Slot* slot) {
  absl::MutexLock lock(&mu_);
  free_.push_back(slot);
}

ExecHandler::Stats ExecHandler::stats() const {
  Stats s;
  s.starts = starts_.load();
  s.kills = kills_.load();
  s.peak_line_bytes = peak_line_bytes_.load();
  return s;
}

absl::Status ExecHandler::Failed(Slot& slot, pid_t pid, const absl::Status& st) {
  if (slot.child) {
    MaxInto(peak_line_bytes_, slot.child->peak_line_bytes());
    slot.child.reset();  // killed and reaped already, or now
    kills_.fetch_add(1);
  }
  if (absl::IsCancelled(st)) {
    // The consumer gave the call up (it is stopping): not the child's
    // failure, nor the batch's.
    const std::string message = absl::StrCat("exec handler (pid ", pid, "): ", st.message());
    PARTQ_LOG(Info) << message;
    return absl::CancelledError(message);
  }
  ++slot.failures;
  slot.failed_at = absl::Now();
  if (options_.metrics != nullptr) {
    // The child's answer broke the protocol, it missed the deadline, or it
    // died (closed its pipes, exited, was killed).
    options_.metrics->Failure(absl::IsDeadlineExceeded(st) ? "timeout"
                              : absl::IsUnavailable(st)    ? "died"
                                                           : "bad_reply");
  }
  // The deadline is the worker's --handler-timeout from the batch's start.
  const std::string message = absl::StrCat(
      "exec handler (pid ", pid, "): ", st.message(),
      absl::IsDeadlineExceeded(st) ? "; the deadline is the worker's --handler-timeout" : "");
  slot.last_failure = message;
  PARTQ_LOG(Warning) << message;
  return WithFailureKind(absl::Status(st.code(), message),
                         absl::IsDeadlineExceeded(st) ? FailureKind::kTimeout
                         : absl::IsUnavailable(st)    ? FailureKind::kCrash
                                                      : FailureKind::kProtocol);
}

absl::Duration ExecHandler::RestartBackoff(const Slot& slot) const {
  if (slot.failures <= 0) return absl::ZeroDuration();
  const int doublings = std::min(slot.failures - 1, 30);
  return std::min(options_.restart_backoff * (int64_t{1} << doublings),
                  options_.max_restart_backoff);
}

absl::Status ExecHandler::Ready(Slot& slot, absl::Time deadline, const std::atomic<bool>* cancel) {
  if (slot.child) {
    const pid_t pid = slot.child->pid();
    absl::Status idle = slot.child->CheckIdle();
    if (idle.ok()) return idle;
    if (absl::IsFailedPrecondition(idle)) {
      (void)Failed(slot, pid, idle);  // it broke the protocol while idle
    } else {
      // It exited between batches (some handlers quit after a number of
      // batches): not a failure of any batch, so no backoff.
      PARTQ_LOG(Info) << "exec handler (pid " << pid << "): " << idle.message()
                      << "; starting another";
      MaxInto(peak_line_bytes_, slot.child->peak_line_bytes());
      slot.child.reset();
    }
  }
  if (slot.failures > 0) {
    const absl::Time next = slot.failed_at + RestartBackoff(slot);
    if (next > deadline) {
      // Nothing was sent: the batch waits for the next start, its items'
      // attempts given back.
      const absl::Duration wait = next - absl::Now();
      std::string message =
          absl::StrCat("exec handler: not restarted in time for this batch (next start in ",
                       absl::FormatDuration(wait), ", after its deadline); it failed ",
                       slot.failures, " time(s) in a row, the last time: ", slot.last_failure);
      return Throttled(absl::UnavailableError(std::move(message)), wait);
    }
    // Back-pressure: this worker thread waits rather than failing items
    // that are not to blame (unless the consumer gives the call up).
    while (absl::Now() < next) {
      if (cancel != nullptr && cancel->load()) {
        return absl::CancelledError(
            "exec handler: given up while waiting to restart the child: "
            "partq is stopping");
      }
      absl::SleepFor(std::min(next - absl::Now(), ChildProcess::kCancelPoll));
    }
  }
  ChildOptions co;
  co.command = options_.command;
  co.environment = environment_;
  co.max_line_bytes = options_.limits.max_reply_bytes;
  // The child's stderr in the log, within its budget (see the header).
  auto budget = std::make_shared<LogLimiter>(options_.stderr_lines, options_.stderr_bytes,
                                             options_.stderr_interval);
  co.on_stderr_line = [level = options_.stderr_level, budget](pid_t pid, absl::string_view line) {
    if (level < GetLogLevel()) return;
    // A long line costs what is logged of it: it is cut.
    const LogLimiter::Verdict v = budget->Admit(std::min(line.size(), kMaxLoggedStderrLine));
    if (!v.log) return;
    if (v.dropped.any()) {
      LogLine(level, absl::StrCat("exec[pid ", pid, "]: its stderr: ", v.dropped.Describe()));
    }
    LogLine(level,
            line.size() <= kMaxLoggedStderrLine
                ? absl::StrCat("exec[pid ", pid, "]: ", line)
                : absl::StrCat("exec[pid ", pid, "]: ", CutAtCharacter(line, kMaxLoggedStderrLine),
                               "... (", line.size(), " bytes)"));
  };
  co.on_stderr_end = [level = options_.stderr_level, budget](pid_t pid) {
    if (const LogLimiter::Dropped d = budget->TakeDropped(); d.any() && level >= GetLogLevel()) {
      LogLine(level, absl::StrCat("exec[pid ", pid, "]: its stderr: ", d.Describe()));
    }
  };
  auto child = ChildProcess::Start(std::move(co));
  if (!child.ok()) {
    if (options_.metrics != nullptr) options_.metrics->Failure("start");
    ++slot.failures;
    slot.failed_at = absl::Now();
    slot.last_failure = absl::StrCat("exec handler: cannot start: ", child.status().message());
    return Throttled(absl::Status(child.status().code(), slot.last_failure), RestartBackoff(slot));
  }
  slot.child = std::move(*child);
  slot.answered = false;
  if (starts_.fetch_add(1) > 0 && options_.metrics != nullptr) options_.metrics->Restarted();
  PARTQ_LOG(Info) << "exec handler (pid " << slot.child->pid() << "): started " << options_.command;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ItemReply>> ExecHandler::Run(absl::Span<HandlerCall* const> calls) {
  const absl::Time now = absl::Now();
  absl::Time deadline = absl::InfiniteFuture();
  for (const HandlerCall* call : calls) deadline = std::min(deadline, call->deadline);
  if (deadline == absl::InfiniteFuture()) deadline = now + options_.default_timeout;

  const std::atomic<bool>* cancel = calls.front()->cancel;  // the calls share it
  Slot* slot = Acquire();
  absl::Cleanup release = [&] { Release(slot); };
  if (absl::Status st = Ready(*slot, deadline, cancel); !st.ok()) return st;

  BatchRequest request;
  request.batch_id = absl::StrCat(batch_prefix_, "-", batches_.fetch_add(1) + 1);
  request.queue = options_.queue;
  request.max_attempts = options_.max_attempts;
  request.deadline = deadline;
  request.now = absl::Now();  // after a restart backoff, less time is left
  std::vector<const Item*> items;
  std::vector<int64_t> ids;
  for (const HandlerCall* call : calls) {
    items.push_back(call->item);
    ids.push_back(call->item->id);
  }
  const pid_t pid = slot->child->pid();
  const absl::Time sent = absl::Now();
  auto line = slot->child->Exchange(EncodeRequest(request, items), deadline, cancel);
  if (options_.metrics != nullptr) options_.metrics->Request(absl::Now() - sent);
  MaxInto(peak_line_bytes_, slot->child->peak_line_bytes());
  if (!line.ok()) {
    // The shell's 126 and 127 (not executable, not found) from a child that
    // never answered: the command could not be run, so no item is to blame
    // and none uses an attempt; the batch waits for the next start.
    const bool never_ran = !slot->answered && !slot->child->running() &&
                           (slot->child->exit_code() == 126 || slot->child->exit_code() == 127);
    absl::Status failed = Failed(*slot, pid, line.status());
    if (!never_ran) return failed;
    const absl::Duration wait = RestartBackoff(*slot);
    return Throttled(absl::Status(failed.code(), absl::StrCat(failed.message(),
                                                              "; the command could not be run, "
                                                              "so no item used an attempt")),
                     wait);
  }
  slot->answered = true;
  auto replies = ParseReply(*line, request.batch_id, ids, options_.limits);
  if (!replies.ok()) {
    // Out of step with the protocol: whatever it does next cannot be trusted.
    slot->child->Kill();
    return Failed(*slot, pid, replies.status());
  }
  slot->failures = 0;
  return replies;
}

void ExecHandler::HandleBatch(absl::Span<HandlerCall* const> calls,
                              std::vector<absl::Status>* statuses) {
  statuses->clear();
  if (calls.empty()) return;
  auto replies = Run(calls);
  if (!replies.ok() && IsThrottled(replies.status())) {
    // The child was not there to take the batch: every item waits.
    statuses->assign(calls.size(), replies.status());
    return;
  }
  if (!replies.ok()) {
    // Alone, the failure is the item's. In a batch it is no one's in
    // particular: no statuses, and the consumer runs each item alone.
    if (calls.size() == 1) statuses->push_back(replies.status());
    return;
  }
  *statuses = ApplyReplies(calls, *replies, options_.apply_effects);
}

absl::Status ExecHandler::Handle(HandlerCall& call) { return HandleAsBatch(*this, call); }

absl::StatusOr<std::unique_ptr<Handler>> ParseExecSpec(absl::string_view spec,
                                                       ExecOptions options) {
  if (!absl::ConsumePrefix(&spec, "exec:")) {
    return absl::InvalidArgumentError(absl::StrCat("handler \"", spec, "\" is not exec:COMMAND"));
  }
  if (absl::StripAsciiWhitespace(spec).empty()) {
    return absl::InvalidArgumentError(
        "handler \"exec:\": exec:COMMAND needs a command, like exec:'python3 handler.py'");
  }
  options.command = std::string(spec);
  return std::unique_ptr<Handler>(std::make_unique<ExecHandler>(std::move(options)));
}

}  // namespace partq
