// The exec transport with real child processes: tests/handlers/test_child.py
// (which misbehaves on request), the example handler and plain sh commands.
// No database; the same children seen through a Consumer are in
// consumer_handlers_test.cc. Nothing here sleeps to wait: calls end by their
// own deadlines, processes are checked in /proc once the calls that must have
// ended them returned.
#include "handlers/exec_handler.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "handlers/child_process.h"
#include "tests/testing/process.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

// --- processes, from /proc --------------------------------------------------

using Proc = testing::ProcessInfo;
using testing::AllProcesses;

// Our children, zombies included.
std::vector<Proc> Children() {
  std::vector<Proc> out;
  for (const Proc& p : AllProcesses()) {
    if (p.ppid == getpid()) out.push_back(p);
  }
  return out;
}

// Live processes of the process group `pgrp`, wherever they were
// reparented (a killed one may stay a zombie until its new parent reaps it).
int LiveInGroup(pid_t pgrp) {
  int n = 0;
  for (const Proc& p : AllProcesses()) n += p.pgrp == pgrp && p.state != 'Z';
  return n;
}

// The peak resident set size of this process, in bytes.
int64_t PeakRss() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    int64_t kb;
    if (absl::StartsWith(line, "VmHWM:") &&
        absl::SimpleAtoi(absl::StripSuffix(absl::StripAsciiWhitespace(line.substr(6)), " kB"),
                         &kb)) {
      return kb * 1024;
    }
  }
  return -1;
}

// The pid in "exec handler (pid 1234): ...".
pid_t PidIn(absl::string_view message) {
  const std::string s(message);
  std::smatch sm;
  pid_t pid = 0;
  if (std::regex_search(s, sm, std::regex("\\(pid ([0-9]+)\\)"))) {
    (void)absl::SimpleAtoi(sm[1].str(), &pid);
  }
  return pid;
}

// --- commands -----------------------------------------------------------------

std::string Quoted(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

// The test child in `mode` (test_child.py); `exec` so that its pid is the
// shell's.
std::string Child(const std::string& mode) {
  return absl::StrCat("exec ", Quoted(PYTHON3), " ", Quoted(TEST_CHILD), " ", mode);
}

ExecOptions Options(const std::string& command) {
  ExecOptions o;
  o.command = command;
  o.queue = "q";
  o.max_attempts = 5;
  o.restart_backoff = absl::Milliseconds(10);
  o.max_restart_backoff = absl::Milliseconds(100);
  o.stop_grace = absl::Seconds(5);
  return o;
}

// Items with these payloads (ids 1, 2, ...), and their calls.
class Batch {
 public:
  explicit Batch(const std::vector<std::string>& payloads,
                 absl::Duration timeout = absl::Seconds(30)) {
    items_.resize(payloads.size());
    calls_.resize(payloads.size());
    for (size_t i = 0; i < payloads.size(); ++i) {
      items_[i].id = static_cast<int64_t>(i + 1);
      items_[i].attempts = 1;
      items_[i].key = absl::StrCat("k", i + 1);
      items_[i].payload = payloads[i];
      items_[i].enqueued_at = absl::Now();
      calls_[i].item = &items_[i];
      calls_[i].deadline = absl::Now() + timeout;
      ptrs_.push_back(&calls_[i]);
    }
  }
  absl::Span<HandlerCall* const> calls() { return ptrs_; }
  HandlerCall& call(size_t i) { return calls_[i]; }

 private:
  std::vector<Item> items_;
  std::vector<HandlerCall> calls_;
  std::vector<HandlerCall*> ptrs_;
};

// Runs `payload` alone (as the consumer does when it isolates an item).
absl::Status RunAlone(ExecHandler& h, const std::string& payload,
                      absl::Duration timeout = absl::Seconds(30)) {
  Batch b({payload}, timeout);
  return h.Handle(b.call(0));
}

// Keeps the replies given to the effects hook, as the integrating adapter
// would receive them.
class Recorder {
 public:
  EffectsApplier Applier() {
    return [this](HandlerCall& call, const ItemReply& reply) {
      absl::MutexLock lock(&mu_);
      replies_[reply.id] = reply;
      call.result = reply.result;
      return absl::OkStatus();
    };
  }
  ItemReply Get(int64_t id) {
    absl::MutexLock lock(&mu_);
    return replies_[id];
  }

 private:
  absl::Mutex mu_;
  std::map<int64_t, ItemReply> replies_;
};

class ExecHandlerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    // Every test destroys its handlers before it ends: nothing may be left.
    for (const Proc& p : Children())
      ADD_FAILURE() << "child " << p.pid << " left, state " << p.state;
  }
};

// --- the protocol, end to end ------------------------------------------------

TEST_F(ExecHandlerTest, BatchWithEffectsBinaryPayloadsAndAFailureWithHints) {
  Recorder rec;
  ExecOptions o = Options(Child("serve"));
  o.apply_effects = rec.Applier();
  ExecHandler h(o);
  Batch b({"hello", std::string("\x00\xff", 2), "effects", "fail"});
  std::vector<absl::Status> st;
  h.HandleBatch(b.calls(), &st);
  ASSERT_EQ(st.size(), 4u);
  EXPECT_TRUE(st[0].ok()) << st[0];
  EXPECT_EQ(b.call(0).result, "hello");
  EXPECT_TRUE(st[1].ok()) << st[1];
  EXPECT_EQ(b.call(1).result, std::string("\x00\xff", 2));  // went out and back as base64

  EXPECT_TRUE(st[2].ok()) << st[2];
  const ItemReply effects = rec.Get(3);
  EXPECT_EQ(effects.result, "done");
  ASSERT_EQ(effects.enqueue.size(), 1u);
  EXPECT_EQ(effects.enqueue[0].queue, "next");
  EXPECT_EQ(effects.enqueue[0].item.payload, std::string("\x00\x01\xff", 3));
  EXPECT_EQ(effects.enqueue[0].item.key, "k1");
  EXPECT_EQ(effects.enqueue[0].item.delay, absl::Milliseconds(1500));
  EXPECT_EQ(effects.enqueue[0].item.priority, 3);
  ASSERT_EQ(effects.publish.size(), 1u);
  EXPECT_EQ(effects.publish[0].topic, "events");
  EXPECT_EQ(effects.publish[0].key, "k2");
  EXPECT_EQ(effects.publish[0].payload, "published");
  EXPECT_EQ(effects.publish[0].headers,
            (std::vector<std::pair<std::string, std::string>>{{"h", "v"}}));

  EXPECT_TRUE(absl::IsUnknown(st[3])) << st[3];
  EXPECT_EQ(st[3].message(), "failed as asked");
  EXPECT_EQ(RetryInOf(st[3]), absl::Seconds(7));
  EXPECT_TRUE(IsDeadNow(st[3]));

  // The next batch goes to the same, long-lived child.
  EXPECT_TRUE(RunAlone(h, "again").ok());
  EXPECT_EQ(h.stats().starts, 1);
  EXPECT_EQ(h.stats().kills, 0);
}

TEST_F(ExecHandlerTest, ExampleHandlerSquaresAndEnqueuesAFollowUp) {
  Recorder rec;
  ExecOptions o = Options(
      absl::StrCat("FOLLOWUP_QUEUE=squares exec ", Quoted(PYTHON3), " ", Quoted(EXAMPLE_HANDLER)));
  o.apply_effects = rec.Applier();
  ExecHandler h(o);
  Batch b({R"({"n": 5})", "not json"});
  std::vector<absl::Status> st;
  h.HandleBatch(b.calls(), &st);
  ASSERT_EQ(st.size(), 2u);
  EXPECT_TRUE(st[0].ok()) << st[0];
  EXPECT_EQ(b.call(0).result, "25");
  const ItemReply r = rec.Get(1);
  ASSERT_EQ(r.enqueue.size(), 1u);
  EXPECT_EQ(r.enqueue[0].queue, "squares");
  EXPECT_EQ(r.enqueue[0].item.payload, R"({"n": 25})");
  EXPECT_EQ(r.enqueue[0].item.key, "k1");
  EXPECT_TRUE(absl::StartsWith(st[1].message(), "bad payload: ")) << st[1];
  EXPECT_TRUE(IsDeadNow(st[1]));
}

// The minimal handler of docs/handler-protocol.md works as it stands.
TEST_F(ExecHandlerTest, TheDocsMinimalHandlerWorks) {
  std::ifstream in(PROTOCOL_DOC);
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t start = doc.find("```python\n");
  ASSERT_NE(start, std::string::npos);
  const size_t end = doc.find("```", start + 10);
  const std::string script = absl::StrCat(::testing::TempDir(), "/minimal_", getpid(), ".py");
  std::ofstream(script) << doc.substr(start + 10, end - start - 10);
  {
    ExecHandler h(Options(absl::StrCat("exec ", Quoted(PYTHON3), " ", Quoted(script))));
    Batch b({"a", std::string("\xff", 1)});
    std::vector<absl::Status> st;
    h.HandleBatch(b.calls(), &st);
    ASSERT_EQ(st.size(), 2u);
    EXPECT_TRUE(st[0].ok()) << st[0];
    EXPECT_TRUE(st[1].ok()) << st[1];
  }
  std::remove(script.c_str());
}

// --- children that misbehave ---------------------------------------------------

TEST_F(ExecHandlerTest, ChildThatExitsAtOnceIsRestartedOnlyAfterABackoff) {
  const std::string starts = absl::StrCat(::testing::TempDir(), "/starts_", getpid());
  std::remove(starts.c_str());
  ExecOptions o = Options(absl::StrCat("echo started >> ", Quoted(starts), "; exit 3"));
  // Long enough that the third start, 2 s after the second failure, is far
  // past the third batch's 100 ms deadline even on a loaded machine.
  o.restart_backoff = absl::Seconds(1);
  o.max_restart_backoff = absl::Seconds(10);
  ExecHandler h(o);
  auto lines = [&] {
    std::ifstream in(starts);
    int n = 0;
    for (std::string l; std::getline(in, l);) ++n;
    return n;
  };

  const absl::Time t0 = absl::Now();  // before the first failure
  absl::Status first = RunAlone(h, "x");
  EXPECT_TRUE(absl::IsUnavailable(first)) << first;
  EXPECT_TRUE(absl::StrContains(first.message(), "exited with status 3")) << first;

  // The second start waits for the backoff (1 s after the failure).
  absl::Status second = RunAlone(h, "x");
  EXPECT_GE(absl::Now() - t0, absl::Seconds(1));
  EXPECT_TRUE(absl::StrContains(second.message(), "exited with status 3")) << second;
  EXPECT_EQ(h.stats().starts, 2);

  // The third is due 2 s after the second failure: a batch that must end
  // before then waits for it, without starting anything and without using
  // its items' attempts.
  absl::Status third = RunAlone(h, "x", absl::Milliseconds(100));
  EXPECT_TRUE(absl::IsUnavailable(third)) << third;
  EXPECT_TRUE(IsThrottled(third)) << third;
  EXPECT_TRUE(absl::StrContains(third.message(), "not restarted in time for this batch")) << third;
  EXPECT_TRUE(absl::StrContains(third.message(), "failed 2 time(s) in a row")) << third;
  EXPECT_TRUE(absl::StrContains(third.message(), "exited with status 3")) << third;
  EXPECT_EQ(h.stats().starts, 2);
  EXPECT_EQ(lines(), 2);
  std::remove(starts.c_str());
}

TEST_F(ExecHandlerTest, PartialLineThenHangIsKilledAtTheDeadline) {
  // A child already started and answering: the timed batch measures the
  // half line, not Python starting on a loaded machine.
  ExecHandler h(Options(Child("serve")));
  ASSERT_TRUE(RunAlone(h, "warm").ok());
  const absl::Time t0 = absl::Now();
  absl::Status st = RunAlone(h, "misbehave:partial-hang", absl::Milliseconds(1500));
  EXPECT_GE(absl::Now() - t0, absl::Milliseconds(1500));
  EXPECT_TRUE(absl::IsDeadlineExceeded(st)) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "of a line but not its end by the deadline")) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "was killed by SIGKILL")) << st;
  EXPECT_TRUE(Children().empty());  // killed and reaped before the call returned
  EXPECT_EQ(h.stats().kills, 1);
}

TEST_F(ExecHandlerTest, HundredMegabyteLineIsCutAtTheLimitAndTheChildKilled) {
  ExecOptions o = Options(Child("huge-line"));
  o.limits.max_reply_bytes = 1 << 20;
  ExecHandler h(o);
  const int64_t rss_before = PeakRss();
  absl::Status st = RunAlone(h, "x");
  EXPECT_TRUE(absl::IsResourceExhausted(st)) << st;
  EXPECT_TRUE(
      absl::StrContains(st.message(), "wrote a reply line longer than the limit of 1048576 bytes"))
      << st;
  // The buffer filled up to the limit and no further; the other 99 MB were
  // never read.
  EXPECT_GE(h.stats().peak_line_bytes, size_t{1} << 20);
  EXPECT_LE(h.stats().peak_line_bytes, (size_t{1} << 20) + 1);
  EXPECT_LT(PeakRss() - rss_before, int64_t{32} << 20);
  EXPECT_TRUE(Children().empty());
}

TEST_F(ExecHandlerTest, ReplyLineOfExactlyTheLimitIsReadAndOneByteMoreIsNot) {
  for (const size_t limit : {size_t{1000}, size_t{200000}}) {  // within one read, and across
    ExecOptions o = Options(Child(absl::StrCat("padded ", limit)));
    o.limits.max_reply_bytes = limit;
    ExecHandler h(o);
    EXPECT_TRUE(RunAlone(h, "x").ok()) << limit;
    EXPECT_EQ(h.stats().peak_line_bytes, limit + 1);  // with its '\n'

    ExecOptions over = Options(Child(absl::StrCat("padded ", limit + 1)));
    over.limits.max_reply_bytes = limit;
    ExecHandler h2(over);
    absl::Status st = RunAlone(h2, "x");
    EXPECT_TRUE(absl::IsResourceExhausted(st)) << limit << ": " << st;
    EXPECT_EQ(h2.stats().peak_line_bytes, limit + 1);
  }
}

TEST_F(ExecHandlerTest, ReplyForAnIdNotGivenFailsTheBatchWithoutBlame) {
  ExecHandler h(Options(Child("unknown-id")));
  Batch b({"a", "b"});
  std::vector<absl::Status> st;
  h.HandleBatch(b.calls(), &st);
  EXPECT_TRUE(st.empty());  // the consumer then runs each item alone
  absl::Status alone = RunAlone(h, "a");
  EXPECT_TRUE(absl::IsInvalidArgument(alone)) << alone;
  EXPECT_TRUE(absl::StrContains(alone.message(),
                                "reply: results[0]: lists item 1001, which was not in the batch"))
      << alone;
  EXPECT_EQ(h.stats().kills, 2);  // out of step with the protocol: not trusted again
  EXPECT_EQ(h.stats().starts, 2);
}

TEST_F(ExecHandlerTest, FewerResultsThanItemsFailsTheBatchAndItemsAloneSucceed) {
  ExecHandler h(Options(Child("fewer")));
  Batch b({"a", "b", "c"});
  std::vector<absl::Status> st;
  h.HandleBatch(b.calls(), &st);
  EXPECT_TRUE(st.empty());
  EXPECT_EQ(h.stats().kills, 1);
  for (const char* p : {"a", "b", "c"}) EXPECT_TRUE(RunAlone(h, p).ok()) << p;
}

TEST_F(ExecHandlerTest, GarbageIsAFailure) {
  ExecHandler h(Options(Child("garbage")));
  absl::Status st = RunAlone(h, "x");
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "reply: not valid JSON")) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "the handler sent \"hello, this is not JSON\""))
      << st;
  EXPECT_EQ(h.stats().kills, 1);
}

// A line the child writes while idle (a stray print, a banner) is quoted in
// the error that says it broke the protocol.
TEST_F(ExecHandlerTest, AStrayStdoutLineIsQuoted) {
  ExecHandler h(Options(absl::StrCat("echo 'Loading model v2'; ", Child("serve"))));
  absl::Status st;
  for (int i = 0; i < 3 && st.ok(); ++i) st = RunAlone(h, "x");  // until the line is seen
  EXPECT_TRUE(absl::StrContains(st.message(), "\"Loading model v2")) << st;
}

// A child that writes a second line for one request, or writes while no
// request is pending, is out of step. Where it is caught depends on when its
// bytes arrive: with the reply (FailedPrecondition), before the next request
// goes out (that request goes to a new child), or as the "reply" to the next
// request (InvalidArgument: not JSON, or another batch's id). Each way it is
// killed.
TEST_F(ExecHandlerTest, OutputBeyondOneLinePerRequestKillsTheChild) {
  for (const char* mode : {"two-lines", "chatter"}) {
    ExecHandler h(Options(Child(mode)));
    for (int i = 0; i < 3 && h.stats().kills == 0; ++i) {
      absl::Status st = RunAlone(h, "x");
      EXPECT_TRUE(st.ok() || absl::IsFailedPrecondition(st) || absl::IsInvalidArgument(st))
          << mode << ": " << st;
    }
    // Killed for it. A chattering child may be caught twice in one call: its
    // line is seen while idle (kill), and the fresh child's answer can arrive
    // in one read with its own chatter (kill again).
    EXPECT_GE(h.stats().kills, 1) << mode;
    EXPECT_LE(h.stats().kills, 2) << mode;
  }
}

// A child that floods its stderr costs its budget of lines in the log, then
// one line saying how much was left out (issue 48: 1 GiB of stderr became
// 1.06 GiB of log).
TEST_F(ExecHandlerTest, AChildsStderrIsRateLimitedInTheLog) {
  ::testing::internal::CaptureStderr();
  {
    ExecOptions o = Options(absl::StrCat("seq 1 20001 >&2; ", Child("serve")));
    o.stderr_lines = 10;
    o.stderr_bytes = 1 << 20;
    o.stderr_interval = absl::Hours(1);  // one window for the whole test
    ExecHandler h(std::move(o));
    EXPECT_TRUE(RunAlone(h, "x").ok());
  }  // the child's stdin closes, it exits, its stderr ends
  const std::string log = ::testing::internal::GetCapturedStderr();
  size_t lines = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, "]: ") && absl::StrContains(line, "exec[pid ") &&
        !absl::StrContains(line, "its stderr")) {
      ++lines;
    }
  }
  EXPECT_EQ(lines, 10u) << log.substr(0, 3000);
  EXPECT_TRUE(absl::StrContains(log, "its stderr: 19991 lines (")) << log.substr(0, 3000);
  EXPECT_LT(log.size(), 4000u) << "bounded, not 20001 lines";
}

// A stderr line longer than kMaxLoggedStderrLine is logged cut, with its
// length, not whole.
TEST_F(ExecHandlerTest, ALongStderrLineIsLoggedCut) {
  ::testing::internal::CaptureStderr();
  {
    ExecHandler h(Options(
        absl::StrCat("head -c 50000 /dev/zero | tr '\\0' y >&2; echo >&2; ", Child("serve"))));
    EXPECT_TRUE(RunAlone(h, "x").ok());
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(absl::StrContains(
      log, absl::StrCat(std::string(ExecHandler::kMaxLoggedStderrLine, 'y'), "... (50000 bytes)")))
      << log.substr(0, 300);
  EXPECT_LT(log.size(), 6000u) << "cut at 4096 bytes, not 50000";
}

// A child gets partq's environment without the database's credentials:
// no PG* or PARTQ_* variable, unless named in pass_env (or pass_all_env).
TEST_F(ExecHandlerTest, AChildGetsTheEnvironmentWithoutThePgAndPartqVariables) {
  const std::map<std::string, std::string> set = {{"PARTQ_DSN", "host=db password=s3cret"},
                                                  {"PGPASSWORD", "s3cret"},
                                                  {"PGHOST", "db.example"},
                                                  {"HANDLER_SETTING", "kept"}};
  for (const auto& [k, v] : set) setenv(k.c_str(), v.c_str(), 1);
  const std::string file = absl::StrCat(::testing::TempDir(), "/child_env_", getpid());
  auto env_of = [&](std::vector<std::string> pass, bool all) {
    std::remove(file.c_str());
    ExecOptions o = Options(absl::StrCat("env > ", Quoted(file), "; ", Child("serve")));
    o.pass_env = std::move(pass);
    o.pass_all_env = all;
    ExecHandler h(std::move(o));
    EXPECT_TRUE(RunAlone(h, "x").ok());
    std::stringstream text;
    text << std::ifstream(file).rdbuf();
    return "\n" + text.str();
  };
  const std::string scrubbed = env_of({}, false);
  EXPECT_TRUE(absl::StrContains(scrubbed, "\nHANDLER_SETTING=kept\n")) << scrubbed;
  EXPECT_TRUE(absl::StrContains(scrubbed, "\nPATH=")) << scrubbed;
  for (const char* name : {"\nPARTQ_DSN=", "\nPGPASSWORD=", "\nPGHOST="}) {
    EXPECT_FALSE(absl::StrContains(scrubbed, name)) << name << " in " << scrubbed;
  }
  EXPECT_FALSE(absl::StrContains(scrubbed, "s3cret")) << scrubbed;
  const std::string named = env_of({"PGHOST"}, false);
  EXPECT_TRUE(absl::StrContains(named, "\nPGHOST=db.example\n")) << named;
  EXPECT_FALSE(absl::StrContains(named, "s3cret")) << named;
  const std::string all = env_of({}, true);
  EXPECT_TRUE(absl::StrContains(all, "\nPGPASSWORD=s3cret\n")) << all;
  EXPECT_TRUE(absl::StrContains(all, "\nPARTQ_DSN=host=db password=s3cret\n")) << all;
  for (const auto& [k, v] : set) unsetenv(k.c_str());
  std::remove(file.c_str());
}

// A command the shell cannot run (status 127, or 126) never took the batch:
// the items are throttled until the next start, not failed, so a misspelt
// command does not dead-letter a queue.
TEST_F(ExecHandlerTest, ACommandThatCannotBeRunThrottlesInsteadOfFailing) {
  ExecHandler h(Options("/nonexistent/partq-test-handler"));
  for (int i = 0; i < 2; ++i) {
    const absl::Status st = RunAlone(h, "x");
    EXPECT_TRUE(IsThrottled(st)) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "status 127")) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "could not be run, so no item used an attempt"))
        << st;
  }
  // A child that ran and then dies before answering is a failure like
  // another: its items use attempts.
  ExecHandler served(Options(Child("serve")));
  EXPECT_TRUE(RunAlone(served, "x").ok());
  const absl::Status crash = RunAlone(served, "crash");
  EXPECT_FALSE(crash.ok());
  EXPECT_FALSE(IsThrottled(crash)) << crash;
}

TEST_F(ExecHandlerTest, ChildThatNeverAnswersIsKilledAtTheDeadline) {
  ExecHandler h(Options(Child("never")));
  absl::Status st = RunAlone(h, "x", absl::Milliseconds(500));
  EXPECT_TRUE(absl::IsDeadlineExceeded(st)) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "did not answer by the deadline")) << st;
  EXPECT_TRUE(Children().empty());
}

TEST_F(ExecHandlerTest, KillReachesWhatTheShellStarted) {
  // The shell starts a grandchild in the background, then becomes the child.
  ExecHandler h(Options(absl::StrCat("sleep 300 & ", Child("never"))));
  absl::Status st = RunAlone(h, "x", absl::Milliseconds(500));
  EXPECT_TRUE(absl::IsDeadlineExceeded(st)) << st;
  const pid_t pid = PidIn(st.message());
  ASSERT_GT(pid, 0) << st;
  // SIGKILL went to the whole group, the orphaned sleep included (it dies as
  // soon as the kernel gets to it).
  ASSERT_TRUE(testing::WaitUntil([&] { return LiveInGroup(pid) == 0; }, absl::Seconds(10)));
}

TEST_F(ExecHandlerTest, PayloadThatCrashesTheChildFailsAloneWhileTheOthersSucceed) {
  ExecHandler h(Options(Child("serve")));
  Batch b({"a", "crash", "c"});
  std::vector<absl::Status> st;
  h.HandleBatch(b.calls(), &st);
  EXPECT_TRUE(st.empty());  // no blame: every item runs alone
  EXPECT_TRUE(RunAlone(h, "a").ok());
  absl::Status crash = RunAlone(h, "crash");
  EXPECT_TRUE(absl::IsUnavailable(crash)) << crash;
  EXPECT_TRUE(absl::StrContains(crash.message(), "exited with status 3")) << crash;
  EXPECT_TRUE(absl::StrContains(crash.message(), "its last stderr line: \"crashing on purpose\""))
      << crash;
  EXPECT_TRUE(RunAlone(h, "c").ok());
  EXPECT_EQ(h.stats().starts, 3);  // the first, after the batch's crash, after the lone crash
}

// --- logs and lifecycle ---------------------------------------------------------

TEST_F(ExecHandlerTest, StderrLinesReachTheLogWithThePidPrefix) {
  SetLogLevel(LogLevel::kWarning);
  ::testing::internal::CaptureStderr();
  {
    ExecHandler h(Options(Child("serve")));
    EXPECT_TRUE(RunAlone(h, "log:hello from the child").ok());
  }  // destruction: the child's stderr is read to its end
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(
      std::regex_search(log, std::regex(" W partq: exec\\[pid [0-9]+\\]: hello from the child\n")))
      << log;
}

TEST_F(ExecHandlerTest, NoChildIsLeftAfterTheHandlerIsDestroyedEvenOneThatIgnoresEof) {
  std::vector<pid_t> pids;
  {
    ExecHandler h(Options(Child("serve")));
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&h] {
        for (int i = 0; i < 5; ++i) EXPECT_TRUE(RunAlone(h, "x").ok());
      });
    }
    for (auto& t : threads) t.join();
    const int64_t live = h.stats().starts;
    EXPECT_GE(live, 1);
    EXPECT_LE(live, 3);  // one per call running at once, at most
    for (const Proc& p : Children()) pids.push_back(p.pid);
    EXPECT_EQ(static_cast<int64_t>(pids.size()), live);
  }  // stdin closed: they exit, and are reaped
  EXPECT_TRUE(Children().empty());

  // A child that ignores the end of its stdin is killed after the grace period.
  ExecOptions o = Options(absl::StrCat("trap '' TERM; ", Quoted(PYTHON3), " ", Quoted(TEST_CHILD),
                                       " serve; exec sleep 300"));
  o.stop_grace = absl::Milliseconds(300);
  absl::Time t0;
  {
    ExecHandler h(o);
    EXPECT_TRUE(RunAlone(h, "x").ok());
    t0 = absl::Now();
  }
  EXPECT_GE(absl::Now() - t0, absl::Milliseconds(300));
  EXPECT_TRUE(Children().empty());
  for (pid_t pid : pids) EXPECT_EQ(LiveInGroup(pid), 0) << pid;
}

TEST(ShellCommand, APlainCommandIsExecutedInPlaceAndAnythingElseIsLeftToTheShell) {
  EXPECT_EQ(ShellCommand("python3 examples/python/handler.py"),
            "exec python3 examples/python/handler.py");
  EXPECT_EQ(ShellCommand("./thumbnail --size=256 a,b"), "exec ./thumbnail --size=256 a,b");
  for (const char* left :
       {"exec python3 h.py", "exec\tpython3 h.py", "  exec python3 h.py", "FOO=1 python3 h.py",
        "cd dir && ./h", "python3 'my handler.py'", "h $ARG", "h > log", "", "  ", "exit 3",
        ". ./env.sh", "command python3 h.py", "time python3 h.py", "eval python3 h.py"}) {
    EXPECT_EQ(ShellCommand(left), left) << left;
  }
}

TEST_F(ExecHandlerTest, APlainCommandsChildIsTheProgramWithNoShellBesideIt) {
  const std::string command = absl::StrCat(PYTHON3, " ", TEST_CHILD, " serve");
  if (ShellCommand(command) == command) GTEST_SKIP() << "the paths need quoting: " << command;
  ExecHandler h(Options(command));
  ASSERT_TRUE(RunAlone(h, "x").ok());
  // The child leads a process group of its own; without the exec the shell
  // would lead it and the program run beside it, in the same group.
  std::vector<pid_t> leaders;
  for (const Proc& p : Children()) {
    if (p.pgrp == p.pid && p.state != 'Z') leaders.push_back(p.pid);
  }
  ASSERT_EQ(leaders.size(), 1u);
  EXPECT_EQ(LiveInGroup(leaders[0]), 1);
  std::ifstream comm(absl::StrCat("/proc/", leaders[0], "/comm"));
  std::string name;
  std::getline(comm, name);
  EXPECT_TRUE(absl::StartsWith(name, "python")) << name;
}

TEST(ParseExecSpec, TakesTheRestVerbatimAndRefusesAnEmptyCommand) {
  auto h = ParseExecSpec("exec:python3 h.py --a=1,2", ExecOptions());
  EXPECT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(absl::IsInvalidArgument(ParseExecSpec("exec:  ", ExecOptions()).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseExecSpec("noop", ExecOptions()).status()));
}

}  // namespace
}  // namespace partq
