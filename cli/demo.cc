// partq demo: the whole story on an embedded, throwaway PostgreSQL.
//
// A fleet of `partq worker` processes (this binary) forms a group on a queue
// of 64 parts; then the queue gets 500k items, which the workers drain with
// the record handler while the demo adds a session, stops one gracefully and
// SIGKILLs one, showing parts move. At the end it reads the database back
// and proves: every item recorded exactly once, nothing lost, every event
// happened while items were left. Exit status 1 if any check fails.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "cli/common.h"
#include "pg/embedded_postgres.h"
#include "pg/pg_store.h"

namespace partq::cli {
namespace {

constexpr char kQueue[] = "demo";
constexpr int kParts = 64;
constexpr absl::Duration kTtl = absl::Seconds(3);
// Items per enqueue transaction. Up to this many appear at once (one COPY),
// so a drain starts with the whole backlog; it bounds the client's memory
// (~136 bytes an item) for a large --items.
constexpr int64_t kEnqueueChunk = 1000000;

// Items not finished: ready, delayed or in flight.
int64_t Left(const QueueStatus& st) {
  int64_t n = 0;
  for (const auto& p : st.parts) n += p.ready + p.delayed + p.in_flight;
  return n;
}

struct Worker {
  std::string name;
  pid_t pid = -1;
  bool alive = false;
};

pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* f = fopen(log.c_str(), "a");
    if (f != nullptr) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

class Demo {
 public:
  // `keep`: the workers' log stays after a run that passed (it always stays
  // after one that did not).
  Demo(PgOptions pg, int64_t items, int workers, bool tty, bool keep)
      : pg_(std::move(pg)), batch_(items), initial_workers_(workers), tty_(tty), keep_(keep) {}

  int Run();

 private:
  void StartWorker();
  // The group, from Store::Owners (cheap at any backlog); reconnects after
  // an error.
  absl::StatusOr<QueueOwners> Glance();
  void Draw(const QueueOwners& group);
  void Event(const std::string& what);
  // Polls until every part has an owner and `expect_sessions` sessions are
  // listed; returns how long that took from `since`.
  absl::Duration WaitAllOwned(absl::Time since, int expect_sessions);
  // Draws for `d` while work flows; false as soon as the queue is empty.
  bool Watch(absl::Duration d);
  // The backlog for the status line, counted by Status on a connection of
  // its own once a second until Stop: a count takes seconds on a large
  // backlog, and neither the events nor their timings may wait for it.
  void CountBacklog();
  // Enqueues `n` more items, numbered on from those enqueued before.
  absl::Status Enqueue(int64_t n);
  // A fresh queue and proof table, whatever an earlier run left.
  absl::Status Setup();
  // Starts the first workers and waits for them to own every part.
  void FormGroup();
  // The events while items are left; the one the backlog drained before
  // (empty if none).
  absl::StatusOr<std::string> TellStory();
  // Whether work is left to show `what` with, after a top-up if the backlog
  // is gone or low.
  absl::StatusOr<bool> WorkLeftFor(const std::string& what);
  // Stops the workers still running and waits for them.
  void StopWorkers();
  // The proof, read back from the database, and the verdict; the exit status.
  int Report(absl::Duration run_time, const std::string& missed);

  PgOptions pg_;
  const int64_t batch_;  // --items: the first enqueue, and each top-up's size
  // Enqueued so far; written by the main thread only, read by CountBacklog.
  std::atomic<int64_t> items_{0};
  const int initial_workers_;
  const bool tty_;
  const bool keep_;
  std::unique_ptr<Store> store_;
  std::vector<Worker> workers_;
  std::vector<std::string> events_;
  std::vector<std::pair<std::string, absl::Duration>> gaps_;
  std::string log_;
  absl::Time start_;
  absl::Time last_draw_;
  int drawn_lines_ = 0;

  absl::Mutex mu_;
  bool counting_ ABSL_GUARDED_BY(mu_) = true;
  int64_t remaining_ ABSL_GUARDED_BY(mu_) = -1;  // -1: not counted yet
  double rate_ ABSL_GUARDED_BY(mu_) = 0;         // items/s between the last counts
};

void Demo::StartWorker() {
  Worker w;
  w.name = absl::StrCat("w", workers_.size() + 1);
  const std::string self = SelfPath();
  w.pid = Spawn(
      {self.empty() ? "partq" : self, "worker", kQueue, "--dsn", pg_.dsn, "--schema", pg_.schema,
       "--handler", "record:demo_effects", "--concurrency", "2", "--batch", "100", "--quiet"},
      log_);
  w.alive = w.pid > 0;
  workers_.push_back(w);
}

absl::StatusOr<QueueOwners> Demo::Glance() {
  auto group = store_->Owners(kQueue);
  if (!group.ok()) {
    auto s = ConnectPg(pg_);
    if (s.ok()) store_ = std::move(*s);
  }
  return group;
}

void Demo::CountBacklog() {
  int64_t last = -1;
  absl::Time last_at;
  auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !counting_; };
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (!counting_) return;
    }
    // What is left is what was enqueued less what the record handler wrote:
    // a count of a table that only grows takes milliseconds, where counting
    // the items left (Store::Status) takes seconds on a backlog being drained
    // and left the line frozen meanwhile.
    const absl::Time now = absl::Now();
    absl::StatusOr<int64_t> acked = CountRecords(pg_, "demo_effects");
    absl::MutexLock lock(&mu_);
    if (acked.ok()) {
      const int64_t n = std::max<int64_t>(0, items_ - *acked);
      if (last >= 0 && now > last_at) {
        const double r = (last - n) / absl::ToDoubleSeconds(now - last_at);
        rate_ = rate_ == 0 ? r : 0.6 * rate_ + 0.4 * r;
      }
      last = n;
      last_at = now;
      remaining_ = n;
    }
    mu_.AwaitWithTimeout(absl::Condition(&stopped), absl::Milliseconds(250));
  }
}

void Demo::Event(const std::string& what) {
  const std::string line =
      absl::StrFormat("[%5.1fs] %s", absl::ToDoubleSeconds(absl::Now() - start_), what);
  events_.push_back(line);
  if (!tty_) printf("%s\n", line.c_str());
}

void Demo::Draw(const QueueOwners& group) {
  const absl::Time now = absl::Now();
  if (now - last_draw_ < absl::Milliseconds(250)) return;
  last_draw_ = now;
  int64_t remaining;
  double rate;
  {
    absl::MutexLock lock(&mu_);
    remaining = remaining_;
    rate = rate_;
  }
  // One letter per worker, kept while it lives (w1 is A, w2 B...: a part
  // that moves changes letter, the others keep theirs), by the session's pid;
  // '?' for a session of no worker of ours, '.' for an unowned part.
  std::map<std::string, char> letter;
  std::map<std::string, int> owned;
  for (const auto& o : group.owners) {
    if (o) ++owned[o->value];
  }
  std::vector<std::string> legend;
  for (const auto& s : group.sessions) {
    std::string name = "?";
    char c = '?';
    for (size_t k = 0; k < workers_.size(); ++k) {
      if (workers_[k].pid != s.pid) continue;
      name = workers_[k].name;
      c = static_cast<char>('A' + k % 26);
    }
    letter[s.id.value] = c;
    legend.push_back(absl::StrFormat("%c=%s(%d parts)", c, name, owned[s.id.value]));
  }
  std::string bar;
  for (const auto& o : group.owners) bar += o ? letter[o->value] : '.';
  std::vector<std::string> lines;
  lines.push_back(absl::StrFormat(
      "partq demo  t=%5.1fs  backlog %7s / %lld  throughput %7.0f items/s",
      absl::ToDoubleSeconds(now - start_), remaining < 0 ? "-" : absl::StrCat(remaining),
      static_cast<long long>(items_), rate > 0 ? rate : 0.0));
  lines.push_back("parts  [" + bar + "]");
  lines.push_back("       " + absl::StrJoin(legend, "  "));
  if (!tty_) {
    printf("%s | %s %s\n", lines[0].c_str(), lines[1].c_str(), absl::StrJoin(legend, " ").c_str());
    fflush(stdout);
    return;
  }
  lines.push_back("events:");
  for (size_t i = events_.size() > 8 ? events_.size() - 8 : 0; i < events_.size(); ++i) {
    lines.push_back("  " + events_[i]);
  }
  if (drawn_lines_ > 0) printf("\x1b[%dA", drawn_lines_);
  for (const auto& l : lines) printf("\x1b[2K%s\n", l.c_str());
  drawn_lines_ = static_cast<int>(lines.size());
  fflush(stdout);
}

absl::Duration Demo::WaitAllOwned(absl::Time since, int expect_sessions) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    auto group = Glance();
    if (group.ok()) {
      const bool all = std::all_of(group->owners.begin(), group->owners.end(),
                                   [](const auto& o) { return o.has_value(); });
      if (all && static_cast<int>(group->sessions.size()) == expect_sessions) {
        return absl::Now() - since;
      }
      Draw(*group);
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::InfiniteDuration();
}

bool Demo::Watch(absl::Duration d) {
  const absl::Time until = absl::Now() + d;
  do {
    auto group = Glance();
    if (group.ok()) {
      Draw(*group);
      if (!group->has_items) return false;
    }
    absl::SleepFor(absl::Milliseconds(50));
  } while (absl::Now() < until);
  return true;
}

absl::Status Demo::Enqueue(int64_t n) {
  std::vector<NewItem> batch;
  const int64_t from = items_.load();
  for (int64_t i = from; i < from + n; ++i) {
    NewItem it;
    it.payload = absl::StrCat("{\"order\":", i, "}");
    batch.push_back(std::move(it));
    if (static_cast<int64_t>(batch.size()) == kEnqueueChunk || i + 1 == from + n) {
      auto done = store_->EnqueueBatch(kQueue, batch);
      if (!done.ok()) return done.status();
      items_ += static_cast<int64_t>(batch.size());
      batch.clear();
    }
  }
  return absl::OkStatus();
}

absl::Status Demo::Setup() {
  auto store = ConnectPg(pg_);
  if (!store.ok()) return store.status();
  store_ = std::move(*store);
  if (absl::Status st = store_->Migrate(); !st.ok()) return st;
  // A kept or shared database: start fresh, whatever an earlier run left.
  (void)store_->DeleteQueue(kQueue, QueueContents::kDelete);
  QueueConfig q;
  q.name = kQueue;
  q.parts = kParts;
  q.session_ttl = kTtl;
  q.max_attempts = 5;
  if (absl::Status st = store_->CreateQueue(q); !st.ok()) return st;
  printf("partq demo: queue \"%s\" with %d parts (session TTL %s)\n\n", kQueue, kParts,
         absl::FormatDuration(kTtl).c_str());
  // A fresh proof table for this run (a kept database may have an old one).
  return DropRecordTable(pg_, "demo_effects");
}

void Demo::FormGroup() {
  // The group forms on the empty queue first: with the backlog already
  // there, a fast fleet drained most of it while it formed, before any event.
  log_ = absl::StrCat("/tmp/partq-demo-", getpid(), ".log");
  start_ = absl::Now();
  for (int i = 0; i < initial_workers_; ++i) StartWorker();
  Event(absl::StrCat("started ", initial_workers_, " worker processes (record handler)"));
  gaps_.push_back({"initial join", WaitAllOwned(start_, initial_workers_)});
  Event(absl::StrFormat(
      "all %d parts owned after %s", kParts,
      absl::FormatDuration(absl::Trunc(gaps_.back().second, absl::Milliseconds(1)))));
}

absl::StatusOr<bool> Demo::WorkLeftFor(const std::string& what) {
  // The fleet can drain the backlog before an event (a fast machine, a
  // small --items) or while an event waits for the one before it to settle
  // (a loaded one): an event is only worth showing with work to move, so a
  // backlog that is gone or below a quarter of --items gets another
  // --items first (at most one top-up per event).
  int64_t remaining;
  {
    absl::MutexLock lock(&mu_);
    remaining = remaining_;
  }
  const bool low = remaining >= 0 && remaining < batch_ / 4;
  bool work_left = !low && Watch(absl::Milliseconds(500));
  if (!work_left) {
    if (absl::Status st = Enqueue(batch_); !st.ok()) return st;
    Event(absl::StrFormat("backlog low: enqueued %lld more items before \"%s\"",
                          static_cast<long long>(batch_), what));
    // One look, not another half second: a fast fleet drains a small
    // --items within it (demo_top_up did, in a clean run).
    work_left = Watch(absl::ZeroDuration());
  }
  return work_left;
}

absl::StatusOr<std::string> Demo::TellStory() {
  // The story, each event half a second after the last settled, while items
  // are left. The SIGKILL comes last: its parts keep their items through the
  // TTL, so work is left when they move.
  int sessions = initial_workers_;
  auto moved = [&](const std::string& what, const std::string& who, absl::Time t) {
    gaps_.push_back({what + " of " + who, WaitAllOwned(t, sessions)});
    Event(absl::StrFormat(
        "%s's parts owned again after %s", who,
        absl::FormatDuration(absl::Trunc(gaps_.back().second, absl::Milliseconds(1)))));
  };
  const std::vector<std::pair<std::string, std::function<void()>>> story = {
      {"add a session",
       [&] {
         StartWorker();
         ++sessions;
         Event(absl::StrCat(workers_.back().name, " joins: parts move to it"));
         const absl::Time t = absl::Now();
         gaps_.push_back({"join of " + workers_.back().name, WaitAllOwned(t, sessions)});
       }},
      {"stop one gracefully",
       [&] {
         Worker& w = workers_[0];
         kill(w.pid, SIGTERM);
         --sessions;
         Event(absl::StrCat(w.name, " stopped with SIGTERM: drains, hands its parts over at once"));
         moved("graceful stop", w.name, absl::Now());
         waitpid(w.pid, nullptr, 0);
         w.alive = false;
       }},
      {"SIGKILL one",
       [&] {
         Worker& w = workers_[1];
         kill(w.pid, SIGKILL);
         waitpid(w.pid, nullptr, 0);
         w.alive = false;
         --sessions;
         Event(absl::StrCat(w.name, " killed with SIGKILL: its parts wait for the ",
                            absl::FormatDuration(kTtl), " TTL"));
         moved("SIGKILL", w.name, absl::Now());
       }},
  };
  for (const auto& [what, act] : story) {
    absl::StatusOr<bool> work_left = WorkLeftFor(what);
    if (!work_left.ok()) return work_left.status();
    if (!*work_left) return what;
    act();
  }
  return std::string();
}

void Demo::StopWorkers() {
  for (auto& w : workers_) {
    if (w.alive) kill(w.pid, SIGTERM);
  }
  for (auto& w : workers_) {
    if (w.alive) waitpid(w.pid, nullptr, 0);
  }
}

int Demo::Report(absl::Duration run_time, const std::string& missed) {
  auto verify = store_->Status(kQueue);
  if (!verify.ok()) return Fail(verify.status());
  int64_t dead = 0;
  for (const auto& p : verify->parts) dead += p.dead;
  const int64_t left = Left(*verify);
  auto proof = ReadRecordProof(pg_, "demo_effects");
  if (!proof.ok()) return Fail(proof.status());
  const int64_t recorded = proof->rows, distinct = proof->distinct_items;
  const int64_t duplicates = recorded - distinct;
  const int64_t lost = items_ - distinct - dead;
  printf("\nResult (read back from the database):\n");
  printf("  items enqueued        %lld\n", static_cast<long long>(items_));
  printf("  recorded exactly once %lld\n", static_cast<long long>(distinct));
  printf("  duplicates            %lld\n", static_cast<long long>(duplicates));
  printf("  lost                  %lld\n", static_cast<long long>(lost));
  printf("  dead-lettered         %lld\n", static_cast<long long>(dead));
  printf("  left in the queue     %lld\n", static_cast<long long>(left));
  printf("  throughput            %.0f items/s over %.1fs (%d sessions at most, 2 threads each)\n",
         distinct / absl::ToDoubleSeconds(run_time), absl::ToDoubleSeconds(run_time),
         initial_workers_ + 1);
  printf("  parts without an owner, per event:\n");
  for (const auto& [what, gap] : gaps_) {
    printf("    %-24s %s\n", what.c_str(),
           gap == absl::InfiniteDuration()
               ? "never recovered"
               : absl::FormatDuration(absl::Trunc(gap, absl::Milliseconds(1))).c_str());
  }
  const bool exactly_once = duplicates == 0 && lost == 0 && left == 0 &&
                            std::all_of(gaps_.begin(), gaps_.end(), [](const auto& g) {
                              return g.second != absl::InfiniteDuration();
                            });
  const bool ok = exactly_once && missed.empty();
  if (ok && !keep_) {
    std::remove(log_.c_str());
  } else {
    printf("  worker logs: %s\n", log_.c_str());
  }
  if (ok) {
    printf("\nOK: every item was acknowledged exactly once.\n");
  } else if (exactly_once) {
    // The proof holds, but not under the events it is meant to show.
    printf(
        "\nINCOMPLETE: every item was acknowledged exactly once, but the backlog drained "
        "before the demo could %s: run it with more --items (default 500000).\n",
        missed.c_str());
  } else {
    printf("\nFAILED: see the numbers above.\n");
  }
  return ok ? 0 : 1;
}

int Demo::Run() {
  if (absl::Status st = Setup(); !st.ok()) return Fail(st);
  FormGroup();

  Event(absl::StrFormat("enqueueing %lld items via COPY...", static_cast<long long>(batch_)));
  const absl::Time t0 = absl::Now();
  if (absl::Status st = Enqueue(batch_); !st.ok()) return Fail(st);
  const absl::Time drain_start = absl::Now();
  std::thread counter([this] { CountBacklog(); });
  auto stop_counting = absl::MakeCleanup([&] {
    {
      absl::MutexLock lock(&mu_);
      counting_ = false;
    }
    counter.join();
  });
  const absl::Duration enqueue_time = drain_start - t0;
  Event(absl::StrFormat("enqueued %lld items in %.2fs (%.0f items/s)",
                        static_cast<long long>(batch_), absl::ToDoubleSeconds(enqueue_time),
                        batch_ / absl::ToDoubleSeconds(enqueue_time)));

  absl::StatusOr<std::string> missed = TellStory();
  if (!missed.ok()) return Fail(missed.status());
  while (Watch(absl::Milliseconds(250))) {
    if (absl::Now() - drain_start > absl::Minutes(5)) {
      Event("giving up: the backlog did not drain in 5 minutes");
      break;
    }
  }
  const absl::Duration run_time = absl::Now() - drain_start;
  std::move(stop_counting).Invoke();
  StopWorkers();
  return Report(run_time, *missed);
}

}  // namespace

int CmdDemo(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, With(ConnectionFlags(), {"items", "workers"}), {"keep", "plain"});
  if (!args.ok()) return Fail(args.status());
  if (auto u =
          WrongPositionals(args->positional(), 0, {}, "usage: partq demo [--keep] [--items N]")) {
    return *u;
  }
  auto items = args->Int("items", 500000, 1000, 10000000);
  if (!items.ok()) return Fail(items.status());
  auto workers = args->Int("workers", 3, 2, 32);
  if (!workers.ok()) return Fail(workers.status());
  auto pg = ConnectionOptions(*args);
  if (!pg.ok()) return Fail(pg.status());
  std::unique_ptr<EmbeddedPostgres> server;
  if (!args->Has("dsn") && std::getenv("PARTQ_DSN") == nullptr) {
    printf("partq demo: starting an embedded PostgreSQL...\n");
    EmbeddedPostgres::Options o;
    o.keep = args->Has("keep");
    o.settings = {"max_connections=200"};
    auto s = EmbeddedPostgres::Start(o);
    if (!s.ok()) return Fail(s.status());
    server = std::move(*s);
    pg->dsn = server->dsn();
    printf("  %s (data in %s%s)\n", pg->dsn.c_str(), server->dir().c_str(),
           o.keep ? ", kept" : ", removed at exit");
  }
  pg->application_name = "partq demo";
  const bool tty = isatty(1) && !args->Has("plain");
  return Demo(*pg, *items, static_cast<int>(*workers), tty, args->Has("keep")).Run();
}

}  // namespace partq::cli
