// The benchmark's runs. Why it is shaped this way:
// - Each drain cell (sessions, batch) runs every system back to back in one
//   round, in an order rotated per round, and ratios are taken within the
//   round: on a shared 2-core machine absolute rates swing, ratios hold.
// - Every system starts from truncated tables right after a CHECKPOINT, so
//   none pays full-page writes the others do not.
// - partq's consumers join and settle (every part owned, balanced) on an
//   empty queue and warm up on a few batches each (WarmUp); the clock starts
//   when the COPY of the N items has committed and stops when the last ack
//   has committed. Startup and rebalancing are not what a drain measures.
// - Every drain is checked: N result rows at the end, or the run fails.
#include "bench/bench.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "bench/baselines.h"
#include "bench/handler_peers.h"
#include "bench/peer_queues.h"
#include "bench/tracking_store.h"
#include "consumer/builtin_handlers.h"
#include "consumer/consumer.h"
#include "handlers/exec_handler.h"
#include "handlers/http_handler.h"

namespace partq::bench {
namespace {

constexpr char kQueue[] = "bench";
constexpr char kRecordTable[] = "bench_effects";

bool Among(const std::vector<std::string>& systems, const std::string& system) {
  return std::find(systems.begin(), systems.end(), system) != systems.end();
}

// The examples square the n of a payload {"n": K}; every other system's
// payload is K itself, which the bench's peers and partq_result answer as
// the result. So the results rows of a drain add up to a known sum.
bool Squares(const std::string& system) {
  return system == "partq_exec_python" || system == "partq_http_node";
}
std::string PayloadOf(const std::string& system, int64_t k) {
  return Squares(system) ? absl::StrCat("{\"n\": ", k, "}") : absl::StrCat(k);
}
int64_t ResultOf(const std::string& system, int64_t k) { return Squares(system) ? k * k : k; }
// Warm-up items are numbered apart from the drain's 0..N-1.
int64_t WarmK(int64_t i) { return -(i + 1); }

// The *_fail systems' peers fail one item in this many (1 %).
constexpr int kFailEvery = 100;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Rounds' latencies in one: the medians of their p50 and p99, the largest max.
Latency MedianLatency(const std::vector<Latency>& rounds) {
  Latency l;
  if (rounds.empty()) return l;
  std::vector<double> p50, p99;
  for (const Latency& r : rounds) {
    l.samples += r.samples;
    p50.push_back(r.p50_ms);
    p99.push_back(r.p99_ms);
    l.max_ms = std::max(l.max_ms, r.max_ms);
  }
  l.p50_ms = Median(p50);
  l.p99_ms = Median(p99);
  return l;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// utime + stime (clock ticks) of the postmaster and its children, with
// those of the children that have exited (the postmaster's cutime and
// cstime): a backend that disconnects keeps its share in the sum.
int64_t ServerCpuTicks(int postmaster) {
  if (postmaster <= 0) return -1;
  int64_t total = 0;
  DIR* d = opendir("/proc");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) {
    int pid;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::vector<std::string> f = absl::StrSplit(stat.substr(paren + 2), ' ');
    // After "pid (comm) ": state ppid ... utime is field 14 overall, so index 11 here.
    int ppid;
    int64_t ut, st;
    if (f.size() < 13 || !absl::SimpleAtoi(f[1], &ppid) || !absl::SimpleAtoi(f[11], &ut) ||
        !absl::SimpleAtoi(f[12], &st)) {
      continue;
    }
    if (pid == postmaster || ppid == postmaster) total += ut + st;
    int64_t cut, cst;
    if (pid == postmaster && f.size() > 14 && absl::SimpleAtoi(f[13], &cut) &&
        absl::SimpleAtoi(f[14], &cst)) {
      total += cut + cst;
    }
  }
  closedir(d);
  return total;
}

// CPU seconds (user + system) of this process: the bench's clients, partq's
// consumers among them.
double CpuSecondsOfSelf() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// What a producer on a fixed schedule owes by now: the items numbered from
// *next, every `stride`-th (producer p of n enqueues p, p+n, ...), below
// `total` and below what `rate` items/s since `t0` make due. Their numbers
// go to *seqs (cleared first), their payloads are the numbers; *next moves
// past them.
std::vector<NewItem> DueItems(double rate, absl::Time t0, int64_t total, int stride, int64_t* next,
                              std::vector<int64_t>* seqs) {
  const double due = rate * absl::ToDoubleSeconds(absl::Now() - t0);
  std::vector<NewItem> items;
  seqs->clear();
  while (*next < total && *next < static_cast<int64_t>(due)) {
    NewItem it;
    it.payload = absl::StrCat(*next);
    items.push_back(std::move(it));
    seqs->push_back(*next);
    *next += stride;
  }
  return items;
}

double RssMb(pid_t pid, const char* field) {
  for (absl::string_view line :
       absl::StrSplit(ReadFile(absl::StrCat("/proc/", pid, "/status")), '\n')) {
    if (absl::ConsumePrefix(&line, field)) {
      line = absl::StripLeadingAsciiWhitespace(absl::StripPrefix(line, ":"));
      int64_t kb;
      std::string num(line.substr(0, line.find(' ')));
      if (absl::SimpleAtoi(num, &kb)) return kb / 1024.0;
    }
  }
  return -1;
}

class Bench {
 public:
  explicit Bench(BenchOptions o) : o_(std::move(o)), schema_(o_.pg.schema) {}
  absl::StatusOr<BenchReport> Run();

 private:
  void Log(const std::string& line) const {
    if (o_.verbose)
      fprintf(stderr, "[%6.1fs] %s\n", absl::ToDoubleSeconds(absl::Now() - start_), line.c_str());
  }
  absl::Status Setup();
  absl::Status ResetQueue(int parts);
  absl::Status CheckResults(const std::string& table, int64_t items);
  // The results rows of a drain of `system` (HandlerSystems()): one per item,
  // each with a result, adding up to what the `warm` warm-up items and the
  // `items` drained ones should give (a *_fail system's failing items: a
  // dead item each instead). Returns how many of the drained items have a
  // result.
  absl::StatusOr<int64_t> CheckResultRows(const std::string& system, int64_t warm, int64_t items);
  StoreFactory Factory() const { return PgStoreFactory(o_.pg); }
  // A consumer of the bench queue (not started): one worker, `batch`, its
  // store reporting to `tracker`.
  std::unique_ptr<Consumer> NewConsumer(Handler* handler, int batch, Tracker* tracker);
  // Starts `handlers.size()` consumers, the i-th running handlers[i] and all
  // reporting to `tracker`, and waits until they own every part, balanced.
  absl::StatusOr<std::vector<std::unique_ptr<Consumer>>> StartConsumers(
      const std::vector<Handler*>& handlers, int batch, Tracker* tracker, int parts);
  absl::StatusOr<std::vector<std::unique_ptr<Consumer>>> StartConsumers(int n, int batch,
                                                                        Tracker* tracker,
                                                                        int parts) {
    return StartConsumers(std::vector<Handler*>(n, handler_.get()), batch, tracker, parts);
  }
  static void StopAll(std::vector<std::unique_ptr<Consumer>>& consumers);

  // What one drain of a partq system runs: a handler per session, the
  // peers they talk to. Members go in reverse order: the handlers (an exec
  // handler closes its children's stdin and waits for them) before the peers.
  struct DrainHandlers {
    std::vector<std::unique_ptr<PeerServer>> peers;
    std::vector<std::unique_ptr<Handler>> owned;
    std::vector<Handler*> handlers;
  };
  absl::StatusOr<DrainHandlers> MakeHandlers(const std::string& system, int sessions);
  // Whether this run can drive `system` (its peer's binary or script known).
  absl::Status CanRun(const std::string& system) const;
  // The example a partq_exec_python or partq_http_node drain runs.
  std::string ExampleScript(const std::string& system) const;

  // One drain of `items`: how long it took and, for HandlerSystems(), how
  // many of its items left a results row with a result (checked).
  struct DrainRun {
    double seconds = 0;
    int64_t results = 0;
    // CPU seconds over the timed part: the server's (postmaster and
    // children; -1 when it is not on this host) and this process's.
    double server_cpu_s = -1, client_cpu_s = -1;
  };
  // What a drain's CPU marks record (Mark at its start and at its end).
  struct CpuMark {
    int64_t server_ticks = -1;
    double client_s = 0;
  };
  CpuMark Mark() const { return {ServerCpuTicks(postmaster_), CpuSecondsOfSelf()}; }
  static void SetCpu(DrainRun& run, const CpuMark& a, const CpuMark& b) {
    if (a.server_ticks >= 0 && b.server_ticks >= a.server_ticks) {
      run.server_cpu_s = static_cast<double>(b.server_ticks - a.server_ticks) /
                         static_cast<double>(sysconf(_SC_CLK_TCK));
    }
    run.client_cpu_s = b.client_s - a.client_s;
  }
  absl::StatusOr<DrainRun> Drain(const std::string& system, int sessions, int batch, int64_t items);
  // After a Node peer's run: its schemas go (the script makes them anew at
  // every start) and a CHECKPOINT follows, so the next system, partq's next
  // round included, does not run beside the vacuum and writes of what the
  // peer left (a backlog it fell behind on, a million finished jobs: partq's
  // round after the three peers at 50,000/s had p99 30-80 ms against 4.5-5.7
  // before them, docs/benchmarks-history.md).
  absl::Status ForgetPeer(const std::string& system) {
    const std::string name =
        absl::EndsWith(system, "_default") ? system.substr(0, system.size() - 8) : system;
    for (const char* suffix : {"", "_results"}) {
      if (auto st = sql_->Exec(
              absl::StrCat("DROP SCHEMA IF EXISTS \"", schema_, "_", name, suffix, "\" CASCADE"));
          !st.ok()) {
        return st;
      }
    }
    return sql_->Exec("CHECKPOINT");
  }
  // How the graphile_worker and pg_boss systems' script is run.
  NodePeerOptions PeerOptions() const {
    return {o_.peers_dir,
            o_.pg.dsn,
            schema_,
            absl::Minutes(10),
            [this](absl::string_view line) { Log(absl::StrCat("  peer: ", line)); },
            peer_modules_};
  }
  absl::StatusOr<DrainRun> DrainPartq(const std::string& system, int sessions, int batch,
                                      int64_t items);
  // Runs a few batches per session through the consumers just started, with
  // payloads PayloadOf(system, WarmK(i)); returns how many items the tracker
  // has seen acked by then.
  absl::StatusOr<int64_t> WarmUp(Tracker& tracker, int sessions, int batch,
                                 const std::string& system = "partq");
  // The Node peers' steady and pickup runs of one round, into `runs` by
  // system and workload.
  using PeerRuns = std::map<std::pair<std::string, std::string>, std::vector<NodePeerResult>>;
  absl::Status PeerLatencies(const std::string& mode, PeerRuns& runs);
  absl::Status PgqLatency(const std::string& mode, PeerRuns& runs);
  static void SummarizePeers(const PeerRuns& runs, BenchReport& r);
  // One steady round's latencies (BenchReport::steady_latency and its halves) and rate.
  struct SteadyRound {
    Latency whole, to_claimed, claimed_to_acked;
    double achieved = 0;
  };
  absl::StatusOr<SteadyRound> Steady();
  absl::Status Pickup(std::vector<double>& claim_ms, std::vector<double>& ack_ms);
  absl::Status Enqueue(std::map<std::string, std::vector<double>>& rates);
  absl::Status Idle(BenchReport& r);
  // The soak (SoakOptions): its samples to o_.soak.out, its summary to r.soak.
  absl::Status Soak(BenchReport& r);
  // The server's postmaster, from postmaster.pid through SQL; 0 when the
  // server is not on this host or cannot be asked.
  int PostmasterPid(Sql& sql) const;
  absl::Status Memory(BenchReport& r);
  void Machine(BenchReport& r);
  void Diagnose(BenchReport& r);

  const BenchOptions o_;
  const std::string schema_;
  // The Node peers' node_modules (NodePeerModules), found by CanRun.
  mutable std::string peer_modules_;
  std::unique_ptr<Sql> sql_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Handler> handler_;         // record:, partq's
  std::unique_ptr<Handler> result_handler_;  // partq_result's
  std::unique_ptr<Handler> noop_handler_;    // partq_noop's
  int postmaster_ = 0;
  absl::Time start_ = absl::Now();
};

absl::Status Bench::Setup() {
  auto sql = Sql::Open(o_.pg.dsn);
  if (!sql.ok()) return sql.status();
  sql_ = std::move(*sql);
  if (auto st = sql_->Exec(absl::StrCat("DROP SCHEMA IF EXISTS \"", schema_,
                                        "\" CASCADE; CREATE SCHEMA \"", schema_, "\""));
      !st.ok()) {
    return st;
  }
  auto store = ConnectPg(o_.pg);
  if (!store.ok()) return store.status();
  store_ = std::move(*store);
  if (auto st = store_->Migrate(); !st.ok()) return st;
  if (auto st = CreateBaselineTables(*sql_, schema_); !st.ok()) return st;
  // The record handler's table, made up front so each run only truncates it.
  if (auto st = sql_->Exec(absl::StrCat("CREATE TABLE \"", schema_, "\".", kRecordTable,
                                        " (item_id bigint NOT NULL, session_id uuid NOT NULL, "
                                        "acked_at timestamptz NOT NULL DEFAULT now())"));
      !st.ok()) {
    return st;
  }
  auto h = ParseHandlerSpec(absl::StrCat("record:", kRecordTable));
  if (!h.ok()) return h.status();
  handler_ = std::move(*h);
  // What the bench's peers answer, without a transport.
  result_handler_ = MakeHandler([](HandlerCall& call) {
    call.result = call.item->payload;
    return absl::OkStatus();
  });
  noop_handler_ = MakeHandler([](HandlerCall&) { return absl::OkStatus(); });
  postmaster_ = o_.postmaster_pid != 0 ? o_.postmaster_pid : PostmasterPid(*sql_);
  return absl::OkStatus();
}

int Bench::PostmasterPid(Sql& sql) const {
  int pid = 0;
  auto text = sql.Scalar("SELECT split_part(pg_read_file('postmaster.pid'), E'\\n', 1)");
  if (!text.ok() || !absl::SimpleAtoi(*text, &pid)) return 0;
  return kill(pid, 0) == 0 ? pid : 0;  // else not on this host
}

absl::Status Bench::ResetQueue(int parts) {
  (void)store_->DeleteQueue(kQueue, QueueContents::kDelete);  // a run's leftovers
  if (auto st =
          sql_->Exec(absl::StrCat("TRUNCATE \"", schema_, "\".items, \"", schema_, "\".results, \"",
                                  schema_, "\".dead_items, \"", schema_, "\".", kRecordTable));
      !st.ok()) {
    return st;
  }
  QueueConfig q;
  q.name = kQueue;
  q.parts = parts;
  return store_->CreateQueue(q);
}

absl::Status Bench::CheckResults(const std::string& table, int64_t items) {
  auto n = sql_->Scalar(absl::StrCat("SELECT count(*) FROM \"", schema_, "\".", table));
  if (!n.ok()) return n.status();
  if (*n != absl::StrCat(items)) {
    return absl::InternalError(
        absl::StrCat("bench: ", table, " has ", *n, " result rows, expected ", items));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Bench::CheckResultRows(const std::string& system, int64_t warm,
                                               int64_t items) {
  // A handler that answers without a result leaves no results row (the
  // bench's items have no dedup key).
  // A *_fail drain's failing items are dead-lettered, without a result.
  const int fail_every = WithoutFailures(system).empty() ? 0 : kFailEvery;
  int64_t rows_expected = 0, sum = 0, dead_expected = 0;
  auto count = [&](int64_t k) {
    if (FailsEvery(fail_every, k)) {
      ++dead_expected;
    } else if (!NoResult(system)) {
      ++rows_expected;
      sum += ResultOf(system, k);
    }
  };
  for (int64_t i = 0; i < warm; ++i) count(WarmK(i));
  const int64_t warm_rows = rows_expected;
  for (int64_t k = 0; k < items; ++k) count(k);
  auto dead = sql_->Scalar(absl::StrCat("SELECT count(*) FROM \"", schema_, "\".dead_items"));
  if (!dead.ok()) return dead.status();
  if (*dead != absl::StrCat(dead_expected)) {
    return absl::InternalError(
        absl::StrCat("bench: ", system, " left ", *dead, " dead items, expected ", dead_expected));
  }
  auto rows = sql_->Query(absl::StrCat(
      "SELECT count(*), count(result), coalesce(sum(convert_from(result, 'UTF8')::numeric), 0) "
      "FROM \"",
      schema_, "\".results"));
  if (!rows.ok()) return rows.status();
  const std::vector<std::string> want = {absl::StrCat(rows_expected), absl::StrCat(rows_expected),
                                         absl::StrCat(sum)};
  std::vector<std::string> got;
  for (const auto& v : rows->at(0)) got.push_back(v.value_or("NULL"));
  if (got != want) {
    return absl::InternalError(
        absl::StrCat("bench: ", system, " left results (rows, with a result, their sum) ",
                     absl::StrJoin(got, ", "), ", expected ", absl::StrJoin(want, ", ")));
  }
  return rows_expected - warm_rows;
}

std::unique_ptr<Consumer> Bench::NewConsumer(Handler* handler, int batch, Tracker* tracker) {
  ConsumerOptions co;
  co.queue = kQueue;
  co.concurrency = 1;  // one worker connection per session, like the baselines
  co.batch = batch;
  co.vacuum_interval = absl::Seconds(o_.vacuum_interval_seconds);
  return std::make_unique<Consumer>(TrackingFactory(Factory(), tracker), co, handler);
}

absl::StatusOr<std::vector<std::unique_ptr<Consumer>>> Bench::StartConsumers(
    const std::vector<Handler*>& handlers, int batch, Tracker* tracker, int parts) {
  const int n = static_cast<int>(handlers.size());
  std::vector<std::unique_ptr<Consumer>> consumers;
  for (int i = 0; i < n; ++i) {
    consumers.push_back(NewConsumer(handlers[i], batch, tracker));
    if (auto st = consumers.back()->Start(); !st.ok()) {
      StopAll(consumers);
      return st;
    }
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(60) + absl::Milliseconds(300 * n);
  while (absl::Now() < deadline) {
    auto st = store_->Status(kQueue);
    if (st.ok() && static_cast<int>(st->sessions.size()) == n) {
      std::map<std::string, int> count;
      bool all = true;
      for (const auto& p : st->parts) {
        all = all && p.owner.has_value();
        if (p.owner) ++count[p.owner->value];
      }
      int lo = parts, hi = 0;
      for (const auto& s : st->sessions) {
        lo = std::min(lo, count[s.id.value]);
        hi = std::max(hi, count[s.id.value]);
      }
      if (all && hi - lo <= 1) {
        absl::SleepFor(absl::Milliseconds(100));  // let OnAssign reach the claimers
        return consumers;
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  StopAll(consumers);
  return absl::DeadlineExceededError(absl::StrCat("bench: ", n, " sessions did not settle"));
}

void Bench::StopAll(std::vector<std::unique_ptr<Consumer>>& consumers) {
  std::vector<std::thread> t;
  for (auto& c : consumers) t.emplace_back([&c] { c->Stop(); });
  for (auto& x : t) x.join();
  consumers.clear();
}

absl::StatusOr<int64_t> Bench::WarmUp(Tracker& tracker, int sessions, int batch,
                                      const std::string& system) {
  // Eight batches per session through the statements the measurement uses:
  // a new connection plans a prepared statement afresh for its first five
  // runs (custom plans) and loads its catalog caches, a few milliseconds for
  // the ack statement, which a long-lived worker pays once and a drain of
  // 20000 items would count as ~20% of its time.
  const int64_t n = static_cast<int64_t>(sessions) * batch * 8;
  std::vector<NewItem> warm(n);
  for (int64_t i = 0; i < n; ++i) warm[i].payload = PayloadOf(system, WarmK(i));
  const int64_t before = tracker.acked();
  if (auto st = store_->EnqueueBatch(kQueue, warm); !st.ok()) return st.status();
  if (!tracker.WaitAcked(before + n, absl::Now() + absl::Minutes(2))) {
    return absl::DeadlineExceededError(
        absl::StrCat("bench: ", system, " warm-up did not finish in 2 minutes"));
  }
  return before + n;
}

absl::Status Bench::CanRun(const std::string& system) const {
  if (IsNodePeer(system)) {
    // Installed (or found) once, before the run; every drain uses it.
    if (!peer_modules_.empty()) return absl::OkStatus();
    absl::StatusOr<std::string> modules = NodePeerModules(o_.peers_dir);
    if (!modules.ok()) return modules.status();
    peer_modules_ = *std::move(modules);
  }
  if (system == "pgq") {
    auto n = sql_->Scalar("SELECT count(*) FROM pg_available_extensions WHERE name = 'pgq'");
    if (!n.ok()) return n.status();
    if (*n == "0") {
      return absl::FailedPreconditionError(
          "bench: pgq needs PgQ on the server (Debian: apt install postgresql-15-pgq3)");
    }
  }
  if ((system == "partq_exec" || system == "partq_http" || system == "partq_exec_noop" ||
       system == "partq_http_noop" || !WithoutFailures(system).empty()) &&
      o_.worker_binary.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("bench: ", system, " needs the partq binary for its peer (worker_binary)"));
  }
  // Checked before the run: a script that is not there would only show as
  // a child failing and restarted until the warm-up gives up.
  if (Squares(system) && access(ExampleScript(system).c_str(), R_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("bench: ", system, " runs ", ExampleScript(system),
                     ", which cannot be read; --examples DIR names the examples directory"));
  }
  return absl::OkStatus();
}

std::string Bench::ExampleScript(const std::string& system) const {
  return absl::StrCat(o_.examples_dir,
                      system == "partq_exec_python" ? "/python/handler.py" : "/node/server.mjs");
}

absl::StatusOr<Bench::DrainHandlers> Bench::MakeHandlers(const std::string& system, int sessions) {
  DrainHandlers d;
  if (system == "partq" || system == "partq_result" || system == "partq_noop") {
    d.handlers.assign(sessions, system == "partq"          ? handler_.get()
                                : system == "partq_result" ? result_handler_.get()
                                                           : noop_handler_.get());
    return d;
  }
  const std::string peer_flags = NoResult(system) ? " --no-result"
                                 : !WithoutFailures(system).empty()
                                     ? absl::StrCat(" --fail-every ", kFailEvery)
                                     : "";
  const std::string self = ShellQuote(o_.worker_binary);
  // A handler per session, as each worker process has its own: an exec
  // handler's child, an http handler's connection and its sidecar.
  for (int i = 0; i < sessions; ++i) {
    if (system == "partq_exec" || system == "partq_exec_noop" || system == "partq_exec_python" ||
        system == "partq_exec_fail") {
      ExecOptions eo;
      eo.command = system != "partq_exec_python"
                       ? absl::StrCat("exec ", self, " bench-peer exec", peer_flags)
                       : absl::StrCat("exec python3 ", ShellQuote(ExampleScript(system)));
      eo.queue = kQueue;
      eo.max_attempts = QueueConfig{}.max_attempts;
      // The Python example logs a line per item on stderr, which partq
      // reads either way; below the log level, they are dropped.
      eo.stderr_level = system != "partq_exec_python" ? LogLevel::kWarning : LogLevel::kDebug;
      d.owned.push_back(std::make_unique<ExecHandler>(std::move(eo)));
    } else {
      // The Node example runs in the background of a shell that waits for
      // the end of its stdin, so a bench killed outright leaves no server.
      const std::string command =
          system != "partq_http_node"
              ? absl::StrCat("exec ", self, " bench-peer http", peer_flags)
              : absl::StrCat("PORT=0 node ", ShellQuote(ExampleScript(system)),
                             " & p=$!; cat >/dev/null; kill $p");
      auto peer = PeerServer::Start(command, absl::Seconds(30));
      if (!peer.ok()) return peer.status();
      HttpHandlerOptions ho;
      ho.url = (*peer)->url();
      ho.queue = kQueue;
      ho.max_attempts = QueueConfig{}.max_attempts;
      d.peers.push_back(std::move(*peer));
      auto h = HttpHandler::Create(std::move(ho));
      if (!h.ok()) return h.status();
      d.owned.push_back(std::move(*h));
    }
    d.handlers.push_back(d.owned.back().get());
  }
  return d;
}

absl::StatusOr<Bench::DrainRun> Bench::DrainPartq(const std::string& system, int sessions,
                                                  int batch, int64_t items) {
  if (auto st = ResetQueue(o_.parts); !st.ok()) return st;
  auto handlers = MakeHandlers(system, sessions);
  if (!handlers.ok()) return handlers.status();
  Tracker tracker;
  auto consumers = StartConsumers(handlers->handlers, batch, &tracker, o_.parts);
  if (!consumers.ok()) return consumers.status();
  auto warm = WarmUp(tracker, sessions, batch, system);
  if (!warm.ok()) {
    StopAll(*consumers);
    return warm.status();
  }
  std::vector<NewItem> batch_items(items);
  for (int64_t i = 0; i < items; ++i) batch_items[i].payload = PayloadOf(system, i);
  if (auto st = sql_->Exec("CHECKPOINT"); !st.ok()) return st;
  auto n = store_->EnqueueBatch(kQueue, batch_items);
  const CpuMark m0 = Mark();  // reading /proc takes a moment: before the clock starts
  const absl::Time t0 = absl::Now();
  if (!n.ok()) {
    StopAll(*consumers);
    return n.status();
  }
  const bool done = tracker.WaitAcked(*warm + items, absl::Now() + absl::Minutes(5));
  const absl::Time t1 = absl::Now();
  const CpuMark m1 = Mark();
  StopAll(*consumers);
  handlers->owned.clear();  // exec children stopped, then the peers
  handlers->peers.clear();
  if (!done) {
    return absl::DeadlineExceededError(
        absl::StrCat("bench: ", system, " drain did not finish in 5 minutes"));
  }
  DrainRun run{absl::ToDoubleSeconds(t1 - t0), 0};
  SetCpu(run, m0, m1);
  if (system == "partq") {
    if (auto st = CheckResults(kRecordTable, *warm + items); !st.ok()) return st;
    return run;
  }
  // The tracker started at zero, so *warm is the number of warm-up items.
  auto results = CheckResultRows(system, *warm, items);
  if (!results.ok()) return results.status();
  if (NoResult(system)) {
    // Nothing to add up: the check is that every item is gone, acked.
    auto left = sql_->Scalar(absl::StrCat("SELECT count(*) FROM \"", schema_, "\".items"));
    if (!left.ok()) return left.status();
    if (*left != "0") {
      return absl::InternalError(
          absl::StrCat("bench: ", system, " left ", *left, " items after its drain"));
    }
    return run;
  }
  run.results = *results;
  return run;
}

absl::Status Bench::PeerLatencies(const std::string& mode, PeerRuns& runs) {
  for (const std::string& system : PeerQueueSystems()) {
    if (system == "pgq" && o_.systems.count(system)) {
      if (absl::Status st = PgqLatency(mode, runs); !st.ok()) return st;
      continue;
    }
    if (!o_.systems.count(system) || !IsNodePeer(system)) continue;
    std::vector<std::string> args = {"--workers", std::to_string(o_.steady_sessions)};
    if (mode == "steady") {
      // The script takes whole numbers: a rate of at least 1/s, a second at least.
      args.insert(
          args.end(),
          {"--rate", absl::StrFormat("%.0f", std::max(1.0, std::round(o_.steady_rate))),
           "--seconds", absl::StrFormat("%.0f", std::max(1.0, std::round(o_.steady_seconds)))});
    } else {
      args.insert(args.end(), {"--samples", std::to_string(o_.pickup_samples)});
    }
    auto run = RunNodePeer(PeerOptions(), system, mode, args);
    if (!run.ok()) return run.status();
    if (absl::Status st = ForgetPeer(system); !st.ok()) return st;
    Log(absl::StrFormat("         %-24s %s: p50 %.1f ms p99 %.1f ms max %.1f ms%s", system, mode,
                        run->p50_ms, run->p99_ms, run->max_ms,
                        mode == "steady"
                            ? absl::StrFormat(" (achieved %.0f/s%s)", run->achieved_rate,
                                              PeerShortfall(run->kept_up, run->achieved_rate, o_))
                            : ""));
    runs[{system, mode}].push_back(*std::move(run));
  }
  return absl::OkStatus();
}

// PgQ at the steady rate (SteadyPgq: one consumer, a ticker every 10 ms), or
// its pick-up: the same at 5 events a second, so that each comes alone 200 ms
// after the one before, as the Node peers' pick-ups do. Its events are
// checked exactly once by its own results rows.
absl::Status Bench::PgqLatency(const std::string& mode, PeerRuns& runs) {
  constexpr double kPickupsPerSecond = 5;
  auto run = mode == "steady" ? SteadyPgq(o_.pg.dsn, schema_, o_.steady_rate, o_.steady_seconds)
                              : SteadyPgq(o_.pg.dsn, schema_, kPickupsPerSecond,
                                          o_.pickup_samples / kPickupsPerSecond,
                                          /*from_send=*/true);
  if (!run.ok()) return run.status();
  if (run->duplicates > 0) {
    return absl::InternalError(
        absl::StrCat("bench pgq: ", run->duplicates, " events were read twice (", mode, ")"));
  }
  auto rows = sql_->Scalar(absl::StrCat("SELECT count(DISTINCT item_id) = count(*) AND count(*) = ",
                                        run->done, " FROM \"", schema_, "\".bl_results"));
  if (!rows.ok()) return rows.status();
  if (*rows != "t") {
    return absl::InternalError("bench pgq: its results rows are not one per event read");
  }
  Log(absl::StrFormat(
      "         %-24s %s: p50 %.1f ms p99 %.1f ms max %.1f ms%s", "pgq", mode, run->p50_ms,
      run->p99_ms, run->max_ms,
      mode == "steady"   ? absl::StrFormat(" (achieved %.0f/s%s)", run->achieved_rate,
                                           PeerShortfall(run->kept_up, run->achieved_rate, o_))
      : run->missing > 0 ? absl::StrFormat(" (%lld not read)", static_cast<long long>(run->missing))
                         : ""));
  runs[{"pgq", mode}].push_back(*std::move(run));
  return absl::OkStatus();
}

void Bench::SummarizePeers(const PeerRuns& runs, BenchReport& r) {
  for (const auto& [key, list] : runs) {
    std::vector<double> p50, p99, achieved;
    BenchReport::PeerLatency l;
    for (const NodePeerResult& x : list) {
      p50.push_back(x.p50_ms);
      p99.push_back(x.p99_ms);
      achieved.push_back(x.achieved_rate);
      l.latency.samples += x.samples;
      l.latency.max_ms = std::max(l.latency.max_ms, x.max_ms);
      l.kept_up = l.kept_up && x.kept_up;
    }
    l.latency.p50_ms = Median(p50);
    l.latency.p99_ms = Median(p99);
    l.achieved_rate = Median(achieved);
    (key.second == "steady" ? r.peer_steady : r.peer_pickup)[key.first] = l;
  }
}

absl::StatusOr<Bench::DrainRun> Bench::Drain(const std::string& system, int sessions, int batch,
                                             int64_t items) {
  if (system == "partq" || Among(HandlerSystems(), system)) {
    return DrainPartq(system, sessions, batch, items);
  }
  if (IsNodePeer(system)) {
    // The script loads, drains and checks exactly once itself; it times the
    // drain alone, so there are no CPU marks around it.
    std::vector<std::string> args = {"--items", std::to_string(items), "--workers",
                                     std::to_string(sessions)};
    // Graphile Worker's "batch jobs" carry the cell's batch, as partq's
    // batches do; pg-boss's best fetch is its own (peer.mjs).
    if (system == "graphile_worker") args.insert(args.end(), {"--batch", std::to_string(batch)});
    auto peer = RunNodePeer(PeerOptions(), system, "drain", args);
    if (!peer.ok()) return peer.status();
    if (absl::Status st = ForgetPeer(system); !st.ok()) return st;
    return DrainRun{peer->seconds, 0};
  }
  CpuMark m0, m1;
  auto mark = [&](bool start) { (start ? m0 : m1) = Mark(); };
  if (system == "pgq") {
    if (auto st = LoadPgq(o_.pg.dsn, schema_, items, batch); !st.ok()) return st;
    auto secs = DrainPgq(o_.pg.dsn, schema_, mark);
    if (!secs.ok()) return secs.status();
    if (auto st = CheckResults("bl_results", items); !st.ok()) return st;
    // Exactly once: as many distinct events as rows, all of them in range.
    auto once = sql_->Scalar(absl::StrCat(
        "SELECT count(DISTINCT item_id) = count(*) AND min(item_id) = 1 AND max(item_id) = ", items,
        " FROM \"", schema_, "\".bl_results"));
    if (!once.ok()) return once.status();
    if (*once != "t") {
      return absl::InternalError("bench pgq: an event was consumed twice and another never");
    }
    DrainRun run{*secs, 0};
    SetCpu(run, m0, m1);
    return run;
  }
  if (auto st = LoadBaseline(*sql_, schema_, items, system); !st.ok()) return st;
  auto secs = DrainBaseline(o_.pg.dsn, schema_, system, sessions, batch, items, mark);
  if (!secs.ok()) return secs.status();
  if (auto st = CheckResults("bl_results", items); !st.ok()) return st;
  DrainRun run{*secs, 0};
  SetCpu(run, m0, m1);
  return run;
}

absl::StatusOr<Bench::SteadyRound> Bench::Steady() {
  if (auto st = ResetQueue(o_.parts); !st.ok()) return st;
  const int64_t total = static_cast<int64_t>(o_.steady_rate * o_.steady_seconds);
  Tracker tracker(total);
  const int batch = *std::max_element(o_.batches.begin(), o_.batches.end());
  auto consumers = StartConsumers(o_.steady_sessions, batch, &tracker, o_.parts);
  if (!consumers.ok()) return consumers.status();
  auto warm = WarmUp(tracker, o_.steady_sessions, batch);
  if (!warm.ok()) {
    StopAll(*consumers);
    return warm.status();
  }
  // Two producers, each enqueueing its share every 10 ms on a fixed schedule
  // (catching up when late), one COPY per tick.
  constexpr int kProducers = 2;
  constexpr absl::Duration kTick = absl::Milliseconds(10);
  std::vector<int64_t> enq_us(total, 0);
  std::string error;
  absl::Mutex mu;
  const absl::Time t0 = absl::Now();
  absl::Time last_enqueue = t0;
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      auto store = ConnectPg(o_.pg);
      if (!store.ok()) {
        absl::MutexLock lock(&mu);
        error = store.status().ToString();
        return;
      }
      int64_t next = p;  // this producer's sequence numbers: p, p+2, ...
      for (int64_t tick = 1; next < total; ++tick) {
        absl::SleepFor(t0 + tick * kTick - absl::Now());
        std::vector<int64_t> seqs;
        std::vector<NewItem> items = DueItems(o_.steady_rate, t0, total, kProducers, &next, &seqs);
        if (items.empty()) continue;
        auto n = (*store)->EnqueueBatch(kQueue, items);
        const absl::Time now = absl::Now();
        if (!n.ok()) {
          absl::MutexLock lock(&mu);
          error = n.status().ToString();
          return;
        }
        for (int64_t s : seqs) enq_us[s] = absl::ToUnixMicros(now);
        absl::MutexLock lock(&mu);
        last_enqueue = std::max(last_enqueue, now);
      }
    });
  }
  for (auto& t : producers) t.join();
  const bool done =
      error.empty() && tracker.WaitAcked(*warm + total, absl::Now() + absl::Seconds(60));
  StopAll(*consumers);
  if (!error.empty()) return absl::InternalError(absl::StrCat("bench steady: ", error));
  if (!done) return absl::DeadlineExceededError("bench steady: consumers did not keep up");
  std::vector<double> whole, to_claimed, to_acked;
  auto ms = [](int64_t from_us, int64_t to_us) {
    return static_cast<double>(std::max<int64_t>(0, to_us - from_us)) / 1000.0;
  };
  for (int64_t s = 0; s < total; ++s) {
    whole.push_back(ms(enq_us[s], tracker.acked_us(s)));
    to_claimed.push_back(ms(enq_us[s], tracker.claimed_us(s)));
    to_acked.push_back(ms(tracker.claimed_us(s), tracker.acked_us(s)));
  }
  if (auto st = CheckResults(kRecordTable, *warm + total); !st.ok()) return st;
  return SteadyRound{LatencyOf(std::move(whole)), LatencyOf(std::move(to_claimed)),
                     LatencyOf(std::move(to_acked)),
                     total / absl::ToDoubleSeconds(last_enqueue - t0)};
}

absl::Status Bench::Pickup(std::vector<double>& claim_ms, std::vector<double>& ack_ms) {
  if (auto st = ResetQueue(o_.parts); !st.ok()) return st;
  const int k = o_.pickup_samples;
  Tracker tracker(k);
  const int batch = *std::max_element(o_.batches.begin(), o_.batches.end());
  auto consumers = StartConsumers(1, batch, &tracker, o_.parts);
  if (!consumers.ok()) return consumers.status();
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> gap(5, 20);
  absl::Status st;
  for (int i = 0; i < k && st.ok(); ++i) {
    absl::SleepFor(absl::Milliseconds(gap(rng)));  // idle: nothing in flight
    NewItem it;
    it.payload = absl::StrCat(i);
    auto e = store_->Enqueue(kQueue, it);
    const int64_t enq = absl::ToUnixMicros(absl::Now());
    if (!e.ok()) {
      st = e.status();
      break;
    }
    if (!tracker.WaitAcked(i + 1, absl::Now() + absl::Seconds(10))) {
      st = absl::DeadlineExceededError("bench pickup: an item was not acked within 10s");
      break;
    }
    claim_ms.push_back(std::max<int64_t>(0, tracker.claimed_us(i) - enq) / 1000.0);
    ack_ms.push_back(std::max<int64_t>(0, tracker.acked_us(i) - enq) / 1000.0);
  }
  StopAll(*consumers);
  return st;
}

absl::Status Bench::Enqueue(std::map<std::string, std::vector<double>>& rates) {
  if (auto st = ResetQueue(o_.parts); !st.ok()) return st;
  const absl::Duration budget = absl::Milliseconds(1500);
  // single: one item, one transaction, one round trip.
  {
    int64_t n = 0;
    const absl::Time t0 = absl::Now();
    while (absl::Now() - t0 < budget && n < o_.items) {
      NewItem it;
      it.payload = absl::StrCat(n);
      if (auto e = store_->Enqueue(kQueue, it); !e.ok()) return e.status();
      ++n;
    }
    rates["single"].push_back(n / absl::ToDoubleSeconds(absl::Now() - t0));
  }
  // batch: 100 items per EnqueueBatch call.
  {
    int64_t n = 0;
    std::vector<NewItem> items(100);
    const absl::Time t0 = absl::Now();
    while (absl::Now() - t0 < budget && n < o_.items * 5) {
      for (auto& it : items) it.payload = absl::StrCat(n++);
      if (auto e = store_->EnqueueBatch(kQueue, items); !e.ok()) return e.status();
    }
    rates["batch_100"].push_back(n / absl::ToDoubleSeconds(absl::Now() - t0));
  }
  // copy: big EnqueueBatch calls (COPY), 50k items each.
  {
    const int64_t total = std::min<int64_t>(200000, o_.items * 10);
    std::vector<NewItem> items(std::min<int64_t>(50000, total));
    int64_t n = 0;
    const absl::Time t0 = absl::Now();
    while (n < total) {
      for (auto& it : items) it.payload = absl::StrCat(n++);
      if (auto e = store_->EnqueueBatch(kQueue, items); !e.ok()) return e.status();
    }
    rates["copy"].push_back(n / absl::ToDoubleSeconds(absl::Now() - t0));
  }
  // The SQL API from a driver, 1000 items a statement: enqueue() once per
  // item (sql_single) against enqueue_many() once for all (sql_many).
  for (const char* form : {"sql_single", "sql_many"}) {
    const std::string call =
        std::string(form) == "sql_single"
            ? absl::StrCat("SELECT count(\"", schema_, "\".enqueue('", kQueue,
                           "', g::text)) FROM generate_series(1, 1000) g")
            : absl::StrCat("SELECT count(*) FROM \"", schema_, "\".enqueue_many('", kQueue,
                           "', ARRAY(SELECT g::text FROM generate_series(1, 1000) g))");
    int64_t n = 0;
    const absl::Time t0 = absl::Now();
    while (absl::Now() - t0 < budget && n < o_.items * 10) {
      auto got = sql_->Scalar(call);
      if (!got.ok()) return got.status();
      if (*got != "1000") return absl::InternalError(absl::StrCat(form, " enqueued ", *got));
      n += 1000;
    }
    rates[form].push_back(n / absl::ToDoubleSeconds(absl::Now() - t0));
  }
  return absl::OkStatus();
}

absl::Status Bench::Idle(BenchReport& r) {
  const int n = o_.idle_sessions;
  // A server without room for them (--dsn) fails here, before the sessions
  // start and die one by one on "too many clients". A role other than a
  // superuser cannot use the reserved slots (PostgreSQL 16 adds
  // reserved_connections), and sees other roles' backends with a NULL type
  // (the server's background processes among them: a few slots counted too
  // many, on the safe side).
  auto free_slots = sql_->Scalar(R"sql(
SELECT current_setting('max_connections')::int
       - CASE WHEN current_setting('is_superuser') = 'on' THEN 0
              ELSE current_setting('superuser_reserved_connections')::int
                   + coalesce(nullif(current_setting('reserved_connections', true), '')::int, 0)
         END
       - (SELECT count(*) FROM pg_stat_activity
          WHERE backend_type = 'client backend' OR backend_type IS NULL)::int)sql");
  int64_t free = 0;
  if (free_slots.ok() && absl::SimpleAtoi(*free_slots, &free) &&
      free < int64_t{kIdleConnectionsPerSession} * n) {
    return absl::FailedPreconditionError(absl::StrCat(
        "skipped: ", n, " idle sessions hold about ", kIdleConnectionsPerSession * n,
        " connections and the server has ", free,
        " free (max_connections): raise max_connections or pass a smaller --idle-sessions"));
  }
  const int parts = std::max(o_.parts, 128);
  if (auto st = ResetQueue(parts); !st.ok()) return st;
  // The idle fleet must still start a delayed item on time (issue 47): after
  // the idle window, kDelayed items with delays of 0.5-1.5 s, one at a time.
  constexpr int kDelayed = 20;
  Tracker tracker(kDelayed);
  Log(absl::StrCat("idle: starting ", n, " sessions"));
  auto consumers = StartConsumers(n, 100, &tracker, parts);
  if (!consumers.ok()) return consumers.status();
  // PostgreSQL 15 flushes a backend's statistics when it goes idle, but at
  // most once a second and otherwise up to 10 s later (PGSTAT_IDLE_INTERVAL):
  // without this wait the start-up burst (joins, rebalances) lands in the
  // window and the server's transaction count reads 20-30x the clients' calls.
  absl::SleepFor(absl::Seconds(11));
  const std::string xacts_sql =
      "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = "
      "current_database()";
  auto x0 = sql_->Scalar(xacts_sql);
  const auto c0 = tracker.calls();
  const int64_t cpu0 = ServerCpuTicks(postmaster_);
  const absl::Time t0 = absl::Now();
  absl::SleepFor(absl::Seconds(o_.idle_seconds));
  auto x1 = sql_->Scalar(xacts_sql);
  const auto c1 = tracker.calls();
  const int64_t cpu1 = ServerCpuTicks(postmaster_);
  const double secs = absl::ToDoubleSeconds(absl::Now() - t0);
  // Due time -> claimed. The due time is taken before the enqueue's round
  // trip (the server's now() is later), so a sample overstates the lateness
  // by up to one round trip, never understates it.
  std::mt19937 rng(47);
  std::uniform_int_distribution<int> delay_ms(500, 1500);
  std::vector<double> late_ms;
  absl::Status delayed_st;
  for (int i = 0; i < kDelayed && delayed_st.ok(); ++i) {
    NewItem it;
    it.payload = absl::StrCat(i);
    it.delay = absl::Milliseconds(delay_ms(rng));
    const int64_t due = absl::ToUnixMicros(absl::Now() + it.delay);
    if (auto e = store_->Enqueue(kQueue, it); !e.ok()) {
      delayed_st = e.status();
    } else if (!tracker.WaitAcked(i + 1, absl::Now() + absl::Seconds(10))) {
      delayed_st = absl::DeadlineExceededError(
          "bench idle: a delayed item was not acked within 10 s of its enqueue");
    } else {
      late_ms.push_back(std::max<int64_t>(0, tracker.claimed_us(i) - due) / 1000.0);
    }
  }
  StopAll(*consumers);
  if (!delayed_st.ok()) return delayed_st;
  r.idle_delayed_late = LatencyOf(late_ms);
  r.idle_sessions = n;
  int64_t calls = 0;
  for (const auto& [what, count] : c1) {
    auto it = c0.find(what);
    const int64_t d = count - (it == c0.end() ? 0 : it->second);
    if (absl::EndsWith(what, "_rows")) continue;  // rows returned, not calls
    if (d > 0) r.idle_calls_per_s[what] = d / secs;
    if (what != "claim_probe") calls += d;  // a kind of claim, counted there too
  }
  r.idle_client_calls_per_s = calls / secs;
  int64_t a, b;
  if (x0.ok() && x1.ok() && absl::SimpleAtoi(*x0, &a) && absl::SimpleAtoi(*x1, &b)) {
    // Minus our own reading; the server flushes these counters lazily (about
    // once a second per backend), so this is approximate.
    r.idle_server_xacts_per_s = (b - a - 1) / secs;
  }
  if (cpu0 >= 0 && cpu1 >= 0) {
    r.idle_server_cpu_percent = 100.0 * (cpu1 - cpu0) / sysconf(_SC_CLK_TCK) / secs;
  }
  return absl::OkStatus();
}

namespace {

// One row of the soak's table: what the sampler read at the end of an
// interval; the rates and latencies are filled in after the run, from the
// tracker's per-item times.
struct SoakSample {
  double t = 0;
  int sessions = 0;
  int64_t backlog = 0;  // enqueued (confirmed) minus acked (tracked), in process
  // From the server; -1 when it could not be asked (restarting).
  double items_mb = -1, index_mb = -1, claims_kb = -1;
  int64_t dead = -1, live = -1, vacuums = -1, claims_dead = -1, horizon_xids = -1;
  double server_cpu = -1, client_cpu = -1;  // % of one core over the interval
  std::string events;
  // After the run.
  double enq_per_s = 0, acked_per_s = 0, p50_ms = 0, p99_ms = 0;
};

}  // namespace

absl::Status Bench::Soak(BenchReport& r) {
  const SoakOptions& so = o_.soak;
  if (so.out.empty()) return absl::InvalidArgumentError("bench soak: needs a file for its samples");
  if (auto st = ResetQueue(o_.parts); !st.ok()) return st;
  const int64_t total = static_cast<int64_t>(so.rate * so.seconds);
  Tracker tracker(total);
  const int batch = *std::max_element(o_.batches.begin(), o_.batches.end());
  auto started = StartConsumers(so.sessions, batch, &tracker, o_.parts);
  if (!started.ok()) return started.status();
  std::deque<std::unique_ptr<Consumer>> consumers;
  for (auto& c : *started) consumers.push_back(std::move(c));
  auto stop_all = [&] {
    std::vector<std::unique_ptr<Consumer>> v;
    for (auto& c : consumers) v.push_back(std::move(c));
    consumers.clear();
    StopAll(v);
  };
  auto warm = WarmUp(tracker, so.sessions, batch);
  if (!warm.ok()) {
    stop_all();
    return warm.status();
  }
  Log(absl::StrFormat(
      "soak: %.0f items/s for %.0f s, %d sessions, churn every %.0f s, table keeper %s", so.rate,
      so.seconds, so.sessions, so.churn_seconds,
      o_.vacuum_interval_seconds > 0 ? absl::StrFormat("every %.0f s", o_.vacuum_interval_seconds)
                                     : std::string("off")));

  // Producers as the steady workload's, but living through a restart: a
  // batch whose COPY failed may or may not have committed, so it is not sent
  // again (that could enqueue it twice) but counted as unsure; the exactly-
  // once check at the end allows for it.
  constexpr int kProducers = 2;
  constexpr absl::Duration kTick = absl::Milliseconds(10);
  std::vector<int64_t> enq_us(total, 0);
  std::atomic<int64_t> enqueued{0}, unsure{0}, enqueue_errors{0};
  std::atomic<bool> quit{false};
  const absl::Time t0 = absl::Now();
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      std::unique_ptr<Store> store;
      int64_t next = p;
      for (int64_t tick = 1; next < total && !quit; ++tick) {
        absl::SleepFor(t0 + tick * kTick - absl::Now());
        if (store == nullptr) {
          auto s = ConnectPg(o_.pg);
          if (!s.ok()) {
            ++enqueue_errors;
            continue;  // what is due stays due
          }
          store = std::move(*s);
        }
        std::vector<int64_t> seqs;
        std::vector<NewItem> items = DueItems(so.rate, t0, total, kProducers, &next, &seqs);
        if (items.empty()) continue;
        auto n = store->EnqueueBatch(kQueue, items);
        if (!n.ok()) {
          ++enqueue_errors;
          unsure += static_cast<int64_t>(items.size());
          store.reset();
          continue;
        }
        const int64_t now_us = absl::ToUnixMicros(absl::Now());
        for (int64_t s : seqs) enq_us[s] = now_us;
        enqueued += static_cast<int64_t>(items.size());
      }
    });
  }
  std::atomic<int> restart_rc{-1};
  if (so.restart_at > 0 && !so.restart_command.empty()) {
    threads.emplace_back([&] {
      absl::SleepFor(t0 + absl::Seconds(so.restart_at) - absl::Now());
      if (quit) return;
      Log(absl::StrCat("soak: restarting the server: ", so.restart_command));
      const int rc = std::system(so.restart_command.c_str());
      restart_rc = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
      Log(absl::StrCat("soak: restart command exited ", restart_rc.load()));
    });
  }
  for (const auto& [at, length] : so.holds) {
    threads.emplace_back([&, at = at, length = length] {
      absl::SleepFor(t0 + absl::Seconds(at) - absl::Now());
      if (quit) return;
      auto sql = Sql::Open(o_.pg.dsn);
      if (!sql.ok()) {
        Log(absl::StrCat("soak: the snapshot at ", at,
                         " s was not held: ", sql.status().message()));
        return;
      }
      Log(absl::StrFormat("soak: holding a snapshot for %.0f s", length));
      // One simple query: the transaction's snapshot is held while it sleeps.
      auto st = (*sql)->Exec(absl::StrFormat(
          "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1; SELECT pg_sleep(%f); COMMIT", length));
      Log(absl::StrCat("soak: snapshot released", st.ok() ? "" : ": ", st.message()));
    });
  }

  // The sampler, on the main thread, which also makes the churn.
  const std::string items_rel = absl::StrCat("\"", schema_, "\".items");
  const std::string claims_rel = absl::StrCat("\"", schema_, "\".part_claims");
  const std::string sample_sql = absl::StrCat(
      "SELECT pg_relation_size('", items_rel, "'), pg_indexes_size('", items_rel,
      "'), pg_total_relation_size('", claims_rel,
      "'), i.n_dead_tup, i.n_live_tup, i.autovacuum_count + i.vacuum_count, c.n_dead_tup, "
      "(SELECT coalesce(max(age(backend_xmin)), 0) FROM pg_stat_activity) "
      "FROM pg_stat_user_tables i, pg_stat_user_tables c WHERE i.relid = '",
      items_rel, "'::regclass AND c.relid = '", claims_rel, "'::regclass");
  std::unique_ptr<Sql> sampler;
  std::vector<SoakSample> samples;
  const absl::Duration every = absl::Seconds(so.sample_seconds);
  int64_t cpu_ticks = ServerCpuTicks(postmaster_);
  double self_cpu = CpuSecondsOfSelf();
  absl::Time last = t0, next_churn = t0 + absl::Seconds(so.churn_seconds);
  bool join_next = true;
  std::string events;
  absl::Status failure;
  for (int k = 1; absl::Now() < t0 + absl::Seconds(so.seconds); ++k) {
    const absl::Time due = t0 + k * every;
    while (so.churn_seconds > 0 && next_churn <= due) {
      absl::SleepFor(next_churn - absl::Now());
      if (join_next) {
        consumers.push_back(NewConsumer(handler_.get(), batch, &tracker));
        if (auto st = consumers.back()->Start(); !st.ok()) {
          consumers.pop_back();
          Log(absl::StrCat("soak: a session could not join: ", st.message()));
        } else {
          ++r.soak.joins;
          absl::StrAppend(&events, events.empty() ? "" : ",", "join");
        }
      } else if (consumers.size() > 1) {
        // The oldest leaves, so every session in turn is replaced.
        std::unique_ptr<Consumer> c = std::move(consumers.front());
        consumers.pop_front();
        c->Stop();
        ++r.soak.leaves;
        absl::StrAppend(&events, events.empty() ? "" : ",", "leave");
      }
      join_next = !join_next;
      next_churn += absl::Seconds(so.churn_seconds);
    }
    absl::SleepFor(due - absl::Now());
    const absl::Time now = absl::Now();
    SoakSample s;
    s.t = absl::ToDoubleSeconds(now - t0);
    s.sessions = static_cast<int>(consumers.size());
    s.backlog = enqueued.load() - (tracker.acked() - *warm);
    if (sampler == nullptr) {
      auto q = Sql::Open(o_.pg.dsn);
      if (q.ok()) sampler = std::move(*q);
    }
    if (sampler != nullptr) {
      auto rows = sampler->Query(sample_sql);
      if (rows.ok() && !rows->empty() && rows->at(0).size() == 8) {
        auto num = [&](int i) {
          double v = -1;
          if (rows->at(0)[i]) (void)absl::SimpleAtod(*rows->at(0)[i], &v);
          return v;
        };
        s.items_mb = num(0) / 1048576;
        s.index_mb = num(1) / 1048576;
        s.claims_kb = num(2) / 1024;
        s.dead = static_cast<int64_t>(num(3));
        s.live = static_cast<int64_t>(num(4));
        s.vacuums = static_cast<int64_t>(num(5));
        s.claims_dead = static_cast<int64_t>(num(6));
        s.horizon_xids = static_cast<int64_t>(num(7));
      } else {
        sampler.reset();  // the server restarting: asked again next time
      }
    }
    // The postmaster changes with a restart.
    if (postmaster_ != 0 && kill(postmaster_, 0) != 0) postmaster_ = 0;
    if (postmaster_ == 0 && sampler != nullptr && o_.postmaster_pid == 0) {
      postmaster_ = PostmasterPid(*sampler);
      cpu_ticks = -1;
    }
    const double secs = absl::ToDoubleSeconds(now - last);
    const int64_t ticks = ServerCpuTicks(postmaster_);
    if (ticks >= 0 && cpu_ticks >= 0 && ticks >= cpu_ticks) {
      s.server_cpu = 100.0 * (ticks - cpu_ticks) / sysconf(_SC_CLK_TCK) / secs;
    }
    cpu_ticks = ticks;
    const double self = CpuSecondsOfSelf();
    s.client_cpu = 100.0 * (self - self_cpu) / secs;
    self_cpu = self;
    s.events = events.empty() ? "-" : events;
    events.clear();
    last = now;
    samples.push_back(s);
    if (k % 6 == 0) {
      Log(
          absl::StrFormat("soak: t=%.0fs sessions %d backlog %lld items %.0f MB index %.0f MB "
                          "dead %lld server CPU %.0f%%",
                          s.t, s.sessions, static_cast<long long>(s.backlog), s.items_mb,
                          s.index_mb, static_cast<long long>(s.dead), s.server_cpu));
    }
  }
  quit = true;
  for (auto& t : threads) t.join();
  // What is left is drained before the consumers stop; acks whose reply was
  // lost in the restart are not tracked, so the server says when it is done.
  const absl::Time drain_deadline = absl::Now() + absl::Minutes(5);
  bool drained = false;
  while (!drained && absl::Now() < drain_deadline) {
    auto left = sql_->Scalar(
        absl::StrCat("SELECT count(*) FROM ", items_rel, " WHERE queue = '", kQueue, "'"));
    if (!left.ok()) {
      auto q = Sql::Open(o_.pg.dsn);  // our own connection died in the restart
      if (q.ok()) sql_ = std::move(*q);
    } else {
      drained = *left == "0";
    }
    if (!drained) absl::SleepFor(absl::Milliseconds(500));
  }
  stop_all();
  if (!drained) return absl::DeadlineExceededError("bench soak: the backlog did not drain");

  // Rates and latencies per interval, by the time of each item's ack.
  const int64_t t0_us = absl::ToUnixMicros(t0);
  const int64_t every_us = absl::ToInt64Microseconds(every);
  const size_t n = samples.size();
  std::vector<std::vector<float>> ms(n);
  std::vector<int64_t> enq_n(n, 0);
  auto bucket = [&](int64_t us) -> int64_t {
    const int64_t b = (us - t0_us) / every_us;
    return std::clamp<int64_t>(b, 0, static_cast<int64_t>(n) - 1);
  };
  int64_t tracked = 0;
  for (int64_t i = 0; i < total && n > 0; ++i) {
    if (enq_us[i] == 0) continue;
    ++enq_n[bucket(enq_us[i])];
    const int64_t a = tracker.acked_us(i);
    if (a == 0) continue;  // its ack's reply lost in the restart
    ms[bucket(a)].push_back(static_cast<float>(std::max<int64_t>(0, a - enq_us[i]) / 1000.0));
    ++tracked;
  }
  const double window = 300;  // the first and last five minutes
  std::vector<double> first_ms, last_ms;
  int64_t first_n = 0, last_n = 0;
  double first_s = 0, last_s = 0;
  const double end_t = n ? samples.back().t : 0;
  for (size_t i = 0; i < n; ++i) {
    SoakSample& s = samples[i];
    const double len = i == 0 ? s.t : s.t - samples[i - 1].t;
    s.enq_per_s = enq_n[i] / len;
    s.acked_per_s = ms[i].size() / len;
    Latency l = LatencyOf(std::vector<double>(ms[i].begin(), ms[i].end()));
    s.p50_ms = l.p50_ms;
    s.p99_ms = l.p99_ms;
    if (s.t <= window) {
      first_ms.insert(first_ms.end(), ms[i].begin(), ms[i].end());
      first_n += ms[i].size();
      first_s += len;
    }
    if (s.t > end_t - window) {
      last_ms.insert(last_ms.end(), ms[i].begin(), ms[i].end());
      last_n += ms[i].size();
      last_s += len;
    }
    r.soak.max_table_mb = std::max(r.soak.max_table_mb, s.items_mb);
    r.soak.max_index_mb = std::max(r.soak.max_index_mb, s.index_mb);
    if (s.items_mb >= 0) {
      r.soak.end_table_mb = s.items_mb;
      r.soak.end_index_mb = s.index_mb;
    }
  }
  r.soak.ran = true;
  r.soak.first = LatencyOf(first_ms);
  r.soak.last = LatencyOf(last_ms);
  r.soak.first_rate = first_s > 0 ? first_n / first_s : 0;
  r.soak.last_rate = last_s > 0 ? last_n / last_s : 0;
  r.soak.enqueued = enqueued;
  r.soak.unsure = unsure;

  std::ofstream f(so.out);
  f << "t\tsessions\tenq_per_s\tacked_per_s\tbacklog\tp50_ms\tp99_ms\titems_mb\tindex_mb\t"
       "dead_tup\tlive_tup\tvacuums\tclaims_kb\tclaims_dead\thorizon_xids\tserver_cpu\t"
       "client_cpu\tevents\n";
  for (const SoakSample& s : samples) {
    f << absl::StrFormat(
        "%.1f\t%d\t%.0f\t%.0f\t%lld\t%.2f\t%.2f\t%.2f\t%.2f\t%lld\t%lld\t%lld\t%.0f\t%lld\t%lld\t%."
        "1f"
        "\t%.1f\t%s\n",
        s.t, s.sessions, s.enq_per_s, s.acked_per_s, static_cast<long long>(s.backlog), s.p50_ms,
        s.p99_ms, s.items_mb, s.index_mb, static_cast<long long>(s.dead),
        static_cast<long long>(s.live), static_cast<long long>(s.vacuums), s.claims_kb,
        static_cast<long long>(s.claims_dead), static_cast<long long>(s.horizon_xids), s.server_cpu,
        s.client_cpu, s.events);
  }
  f.close();
  if (!f) return absl::InternalError(absl::StrCat("bench soak: could not write ", so.out));

  // Exactly once: one record row per item acked, none twice; every item
  // whose enqueue was confirmed among them, and at most the unsure ones more.
  auto rows = sql_->Query(absl::StrCat("SELECT count(*), count(DISTINCT item_id) FROM \"", schema_,
                                       "\".", kRecordTable));
  if (!rows.ok()) return rows.status();
  int64_t count = 0, distinct = 0;
  if (!absl::SimpleAtoi(rows->at(0)[0].value_or(""), &count) ||
      !absl::SimpleAtoi(rows->at(0)[1].value_or(""), &distinct)) {
    return absl::InternalError("bench soak: could not count the record rows");
  }
  r.soak.acked_rows = count - *warm;
  const std::string summary = absl::StrFormat(
      "soak: %lld items enqueued (%lld more unsure: their COPY failed, %lld errors), %lld record "
      "rows (%lld distinct), %lld acks tracked; %s",
      static_cast<long long>(enqueued.load()), static_cast<long long>(unsure.load()),
      static_cast<long long>(enqueue_errors.load()), static_cast<long long>(r.soak.acked_rows),
      static_cast<long long>(distinct - *warm), static_cast<long long>(tracked),
      restart_rc.load() < 0 ? std::string("no restart")
                            : absl::StrCat("restart command exit ", restart_rc.load()));
  r.notes.push_back(summary);
  Log(summary);
  if (count != distinct) {
    return absl::InternalError(
        absl::StrCat("bench soak: ", count - distinct, " items were recorded twice"));
  }
  if (r.soak.acked_rows < enqueued || r.soak.acked_rows > enqueued + unsure) {
    return absl::InternalError(absl::StrCat("bench soak: ", r.soak.acked_rows,
                                            " items recorded, expected ", enqueued.load(), " to ",
                                            enqueued + unsure));
  }
  return absl::OkStatus();
}

absl::Status Bench::Memory(BenchReport& r) {
  if (o_.worker_binary.empty()) {
    r.notes.push_back("memory: no worker binary given; skipped");
    return absl::OkStatus();
  }
  if (auto st = ResetQueue(o_.parts); !st.ok()) return st;
  const int batch = *std::max_element(o_.batches.begin(), o_.batches.end());
  std::vector<std::string> argv = {o_.worker_binary,
                                   "worker",
                                   kQueue,
                                   "--dsn",
                                   o_.pg.dsn,
                                   "--schema",
                                   schema_,
                                   "--handler",
                                   absl::StrCat("record:", kRecordTable),
                                   "--concurrency",
                                   "16",
                                   "--batch",
                                   absl::StrCat(batch),
                                   "--quiet"};
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("bench memory: fork failed");
  if (pid == 0) {
    FILE* devnull = fopen("/dev/null", "w");
    if (devnull != nullptr) {
      dup2(fileno(devnull), 1);
      dup2(fileno(devnull), 2);
    }
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  const int64_t items = o_.items;
  std::vector<NewItem> batch_items(items);
  for (int64_t i = 0; i < items; ++i) batch_items[i].payload = absl::StrCat(i);
  absl::Status st;
  if (auto n = store_->EnqueueBatch(kQueue, batch_items); !n.ok()) st = n.status();
  const absl::Time deadline = absl::Now() + absl::Minutes(2);
  while (st.ok()) {
    auto c = sql_->Scalar(absl::StrCat("SELECT count(*) FROM \"", schema_, "\".", kRecordTable));
    if (c.ok() && *c == absl::StrCat(items)) break;
    if (absl::Now() > deadline) st = absl::DeadlineExceededError("bench memory: worker too slow");
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return absl::InternalError("bench memory: the worker exited early");
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  r.worker_rss_mb = RssMb(pid, "VmRSS");
  r.worker_peak_rss_mb = RssMb(pid, "VmHWM");
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  return st;
}

void Bench::Machine(BenchReport& r) {
  r.machine["nproc"] = absl::StrCat(std::thread::hardware_concurrency());
  for (absl::string_view line : absl::StrSplit(ReadFile("/proc/cpuinfo"), '\n')) {
    if (absl::ConsumePrefix(&line, "model name")) {
      r.machine["cpu"] = std::string(absl::StripAsciiWhitespace(
          absl::StripPrefix(absl::StripLeadingAsciiWhitespace(line), ":")));
      break;
    }
  }
  for (absl::string_view line : absl::StrSplit(ReadFile("/proc/meminfo"), '\n')) {
    if (absl::ConsumePrefix(&line, "MemTotal:")) {
      r.machine["ram"] = std::string(absl::StripAsciiWhitespace(line));
      break;
    }
  }
  for (const char* s :
       {"server_version", "shared_buffers", "max_connections", "fsync", "synchronous_commit",
        "wal_level", "full_page_writes", "max_wal_size", "checkpoint_timeout", "work_mem",
        "autovacuum_naptime"}) {
    auto v = sql_->Scalar(absl::StrCat("SHOW ", s));
    if (v.ok()) r.machine[absl::StrCat("pg.", s)] = *v;
  }
  // WAL segments made ahead for reuse: without them, every 16 MB of WAL
  // stalls every commit while one is made (StartBenchServer's WarmWal).
  // Reading pg_wal needs pg_monitor; without it the entry is left out.
  auto ahead = sql_->Scalar(
      "SELECT count(*) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$' AND name > "
      "pg_walfile_name(pg_current_wal_lsn())");
  if (ahead.ok()) r.machine["pg.wal_segments_ahead"] = *ahead;
}

void Bench::Diagnose(BenchReport& r) {
  auto rows = sql_->Query(
      "SELECT calls, round(total_exec_time::numeric, 1), round(mean_exec_time::numeric, 3), "
      "plans, round(total_plan_time::numeric, 1), rows, shared_blks_hit, "
      "left(regexp_replace(query, '\\s+', ' ', 'g'), 90) "
      "FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 15");
  if (!rows.ok()) {
    r.notes.push_back(absl::StrCat("diagnose: ", rows.status().message()));
    return;
  }
  r.notes.push_back(
      "pg_stat_statements: calls | total ms | mean ms | plans | plan ms | rows | shared hits | "
      "query");
  for (const auto& row : *rows) {
    std::vector<std::string> f;
    for (const auto& v : row) f.push_back(v.value_or(""));
    r.notes.push_back(absl::StrJoin(f, " | "));
  }
}

int64_t ItemsFor(int64_t items, int batch) {
  // Scaled so each measurement takes about a second or two: one commit per
  // item is ~100x slower than batches of 100 where fsync is slow.
  const double f = batch >= 100 ? 1.0 : batch >= 10 ? 0.25 : 0.01;
  return std::max<int64_t>(100, static_cast<int64_t>(items * f));
}

absl::StatusOr<BenchReport> Bench::Run() {
  if (auto st = Setup(); !st.ok()) return st;
  BenchReport r;
  if (o_.diagnose) {
    (void)sql_->Exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
    (void)sql_->Exec("SELECT pg_stat_statements_reset()");
  }
  Machine(r);
  const int max_batch = *std::max_element(o_.batches.begin(), o_.batches.end());
  // The drain cells: (sessions, batch, systems).
  struct Cell {
    int sessions, batch;
    std::vector<std::string> systems;
  };
  std::vector<Cell> cells;
  for (int b : o_.batches) {
    for (int s : o_.sessions) {
      if (!o_.full && b != max_batch && s != o_.sweep_sessions) continue;
      Cell c{s, b,
             {"floor", "log_floor", "partq", b == 1 ? "skip_locked_one" : "skip_locked_batch"}};
      c.systems.insert(c.systems.end(), HandlerSystems().begin(), HandlerSystems().end());
      // The other queues in the session sweep (they take no batch but PgQ's tick).
      if (b == max_batch) {
        for (const std::string& x : PeerQueueSystems()) {
          if (RunsInCell(x, s)) c.systems.push_back(x);
        }
      }
      // One-at-a-time systems take no batch: they run in the session sweep.
      if (b == max_batch && b != 1) {
        c.systems.push_back("skip_locked_one");
        c.systems.push_back("naive_update");
      } else if (b == 1) {
        c.systems.push_back("naive_update");
      }
      // Chosen systems only; by default all but the opt-in ones.
      c.systems.erase(std::remove_if(c.systems.begin(), c.systems.end(),
                                     [&](const std::string& x) {
                                       return o_.systems.empty() ? Among(OptInSystems(), x)
                                                                 : !o_.systems.count(x);
                                     }),
                      c.systems.end());
      if (c.systems.empty()) continue;
      for (const std::string& x : c.systems) {
        if (absl::Status st = CanRun(x); !st.ok()) return st;
      }
      cells.push_back(c);
    }
  }
  const bool drain = o_.only.count("drain") > 0;
  std::vector<SteadyRound> steady;
  std::vector<double> pc, pa, pf;
  PeerRuns peer_runs;
  std::map<std::string, std::vector<double>> enq;
  for (int round = 1; round <= o_.rounds; ++round) {
    for (const Cell& c : drain ? cells : std::vector<Cell>{}) {
      // Rotate the order each round so no system always runs first.
      std::vector<std::string> order = c.systems;
      std::rotate(order.begin(), order.begin() + (round - 1) % order.size(), order.end());
      for (const std::string& system : order) {
        const bool one = system == "skip_locked_one" || system == "naive_update";
        const int64_t n = ItemsFor(o_.items, one ? 1 : c.batch);
        auto run = Drain(system, c.sessions, c.batch, n);
        if (!run.ok()) return run.status();
        DrainSample s{system, c.sessions,   c.batch,          round,
                      n,      run->seconds, n / run->seconds, run->results};
        if (run->server_cpu_s >= 0) s.server_us_per_item = run->server_cpu_s * 1e6 / n;
        s.client_us_per_item = run->client_cpu_s * 1e6 / n;
        Log(absl::StrFormat("round %d  %-18s sessions %2d batch %3d  %6lld items  %8.0f items/s",
                            round, system, c.sessions, c.batch, static_cast<long long>(n),
                            s.items_per_s));
        r.samples.push_back(s);
      }
    }
    // partq's own steady rounds, unless --systems names only others (as
    // bench/held_snapshot.sh does to hold a snapshot beside PgQ alone).
    if (o_.only.count("steady") && (o_.systems.empty() || o_.systems.count("partq"))) {
      auto s = Steady();
      if (!s.ok()) return s.status();
      steady.push_back(*s);
      Log(absl::StrFormat(
          "round %d  steady %.0f/s: p50 %.1f ms p99 %.1f ms max %.1f ms (to claimed p50 %.1f "
          "p99 %.1f, claimed to acked p50 %.1f p99 %.1f)",
          round, s->achieved, s->whole.p50_ms, s->whole.p99_ms, s->whole.max_ms,
          s->to_claimed.p50_ms, s->to_claimed.p99_ms, s->claimed_to_acked.p50_ms,
          s->claimed_to_acked.p99_ms));
    }
    if (o_.only.count("steady")) {
      if (auto st = PeerLatencies("steady", peer_runs); !st.ok()) return st;
    }
    if (o_.only.count("pickup")) {
      std::vector<double> claim, ack;
      if (auto st = Pickup(claim, ack); !st.ok()) return st;
      pc.insert(pc.end(), claim.begin(), claim.end());
      pa.insert(pa.end(), ack.begin(), ack.end());
      Log(absl::StrFormat("round %d  pickup: claim p99 %.1f ms, ack p99 %.1f ms", round,
                          LatencyOf(claim).p99_ms, LatencyOf(ack).p99_ms));
      if (o_.systems.empty() || o_.systems.count("floor")) {
        auto floor = PickupBaseline(o_.pg.dsn, schema_, o_.pickup_samples);
        if (!floor.ok()) return floor.status();
        pf.insert(pf.end(), floor->begin(), floor->end());
        Log(absl::StrFormat("         %-24s pickup: p50 %.1f ms p99 %.1f ms", "floor",
                            LatencyOf(*floor).p50_ms, LatencyOf(*floor).p99_ms));
      }
      if (auto st = PeerLatencies("pickup", peer_runs); !st.ok()) return st;
    }
    if (o_.only.count("enqueue")) {
      if (auto st = Enqueue(enq); !st.ok()) return st;
      Log(absl::StrFormat(
          "round %d  enqueue: single %.0f/s, batch_100 %.0f/s, copy %.0f/s; SQL API: enqueue() "
          "%.0f/s, enqueue_many() %.0f/s",
          round, enq["single"].back(), enq["batch_100"].back(), enq["copy"].back(),
          enq["sql_single"].back(), enq["sql_many"].back()));
    }
  }
  // Cells: medians and within-round ratios to the floor.
  for (const Cell& c : cells) {
    for (const std::string& system : c.systems) {
      DrainCell dc{system, c.sessions, c.batch, 0, 0, {}, {}};
      std::map<std::string, std::vector<double>> ratios;  // by the system divided by
      for (const auto& s : r.samples) {
        if (s.system != system || s.sessions != c.sessions || s.batch != c.batch) continue;
        dc.per_round.push_back(s.items_per_s);
        for (const auto& f : r.samples) {
          // The floor's own ratio is 1; a reference is not given a ratio to itself.
          const bool reference =
              f.system == "floor" ||
              ((f.system == kLogFloor || Among(ReferenceSystems(), f.system)) &&
               f.system != system);
          const bool same = f.round == s.round && f.sessions == s.sessions && f.batch == s.batch;
          if ((reference || f.system == WithoutFailures(system)) && same) {
            ratios[f.system].push_back(s.items_per_s / f.items_per_s);
          }
        }
      }
      if (dc.per_round.empty()) continue;
      dc.median_items_per_s = Median(dc.per_round);
      dc.median_ratio_to_floor = Median(ratios["floor"]);
      // CPU per item: medians, and the server's per round over the floor's.
      std::vector<double> server, client, server_ratio;
      for (const auto& s : r.samples) {
        if (s.system != system || s.sessions != c.sessions || s.batch != c.batch) continue;
        client.push_back(s.client_us_per_item);
        if (s.server_us_per_item < 0) continue;
        server.push_back(s.server_us_per_item);
        for (const auto& f : r.samples) {
          if (f.system == "floor" && f.round == s.round && f.sessions == s.sessions &&
              f.batch == s.batch && f.server_us_per_item > 0) {
            server_ratio.push_back(s.server_us_per_item / f.server_us_per_item);
          }
        }
      }
      if (!server.empty()) dc.median_server_us_per_item = Median(server);
      dc.median_client_us_per_item = Median(client);
      dc.median_server_cpu_to_floor = Median(server_ratio);
      for (const std::string& ref : ReferenceSystems()) {
        if (ratios.count(ref)) dc.median_ratio_to[ref] = Median(ratios[ref]);
      }
      if (ratios.count(kLogFloor)) dc.median_ratio_to[kLogFloor] = Median(ratios[kLogFloor]);
      if (const std::string without = WithoutFailures(system); ratios.count(without)) {
        dc.median_ratio_to[without] = Median(ratios[without]);
      }
      r.cells.push_back(dc);
    }
  }
  if (!steady.empty()) {
    std::vector<double> achieved;
    std::vector<Latency> whole, to_claimed, to_acked;
    for (const SteadyRound& s : steady) {
      achieved.push_back(s.achieved);
      whole.push_back(s.whole);
      to_claimed.push_back(s.to_claimed);
      to_acked.push_back(s.claimed_to_acked);
    }
    r.steady_rate = o_.steady_rate;
    r.steady_achieved = Median(achieved);
    r.steady_latency = MedianLatency(whole);
    r.steady_to_claimed = MedianLatency(to_claimed);
    r.steady_claimed_to_acked = MedianLatency(to_acked);
  }
  if (o_.only.count("soak")) {
    if (auto st = Soak(r); !st.ok()) return st;
  }
  SummarizePeers(peer_runs, r);
  r.pickup_claim = LatencyOf(pc);
  r.pickup_ack = LatencyOf(pa);
  r.pickup_floor = LatencyOf(pf);
  for (const auto& [k, v] : enq) r.enqueue[k] = Median(v);
  if (o_.only.count("idle")) {
    // A server without room for the idle sessions' connections should not
    // cost the rest of the report.
    if (auto st = Idle(r); !st.ok()) {
      r.notes.push_back(absl::StrCat("idle: ", st.message()));
      Log(r.notes.back());
    } else {
      Log(
          absl::StrFormat("idle: %d sessions, %.0f calls/s (client), %.0f xacts/s (server), "
                          "server CPU %.1f%%",
                          r.idle_sessions, r.idle_client_calls_per_s, r.idle_server_xacts_per_s,
                          r.idle_server_cpu_percent));
    }
  }
  if (o_.only.count("scale")) {
    ScaleOptions so;
    so.sessions = o_.scale_sessions;
    so.parts = o_.scale_parts;
    so.idle_warmup = o_.scale_warmup;
    so.idle = absl::Seconds(o_.idle_seconds);
    so.verbose = o_.verbose;
    so.server_cpu_ticks = [this] { return ServerCpuTicks(postmaster_); };
    auto sr = RunScale(so, Factory(), o_.pg.dsn, schema_);
    if (!sr.ok()) return sr.status();
    r.scale_ran = true;
    r.scale = std::move(*sr);
  }
  if (o_.only.count("memory")) {
    if (auto st = Memory(r); !st.ok()) {
      r.notes.push_back(absl::StrCat("memory: ", st.message()));
      Log(r.notes.back());
    } else {
      Log(absl::StrFormat("memory: worker RSS %.1f MB (peak %.1f MB)", r.worker_rss_mb,
                          r.worker_peak_rss_mb));
    }
  }
  if (o_.diagnose) Diagnose(r);
  // Leave nothing behind in a shared database.
  (void)sql_->Exec(absl::StrCat("DROP SCHEMA IF EXISTS \"", schema_, "\" CASCADE"));
  for (const std::string& x : PeerQueueSystems()) {
    if (!o_.systems.count(x)) continue;
    if (x == "pgq") {
      (void)DropPgq(o_.pg.dsn, schema_);
    } else {
      const std::string name = absl::StrCat(schema_, "_", absl::StripSuffix(x, "_default"));
      (void)sql_->Exec(
          absl::StrCat("DROP SCHEMA IF EXISTS \"", name, "\", \"", name, "_results\" CASCADE"));
    }
  }
  return r;
}

}  // namespace

absl::StatusOr<BenchReport> RunBench(const BenchOptions& options) {
  if (options.sessions.empty() || options.batches.empty() || options.rounds < 1) {
    return absl::InvalidArgumentError("bench: need sessions, batches and at least one round");
  }
  return Bench(options).Run();
}

}  // namespace partq::bench
