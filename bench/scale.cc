#include "bench/scale.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/tracking_store.h"
#include "coordinator/heartbeat.h"
#include "coordinator/session.h"
#include "store/validate.h"

namespace partq::bench {
namespace {

// What every session's listener believes it owns, under one lock so the
// sampler sees all beliefs at one moment.
struct Beliefs {
  absl::Mutex mu;
  std::vector<std::map<int, int64_t>> held ABSL_GUARDED_BY(mu);  // part -> epoch
  std::vector<bool> dead ABSL_GUARDED_BY(mu);  // abandoned: a dead process believes nothing
};

class BeliefListener : public PartListener {
 public:
  BeliefListener(Beliefs* b, int index) : b_(b), i_(index) {}
  void OnRevoke(const std::vector<OwnedPart>& parts) override { Drop(parts); }
  void OnLost(const std::vector<OwnedPart>& parts) override { Drop(parts); }
  void OnAssign(const std::vector<OwnedPart>& parts) override {
    absl::MutexLock lock(&b_->mu);
    for (const auto& p : parts) b_->held[i_][p.part] = p.epoch.value;
  }

 private:
  void Drop(const std::vector<OwnedPart>& parts) {
    absl::MutexLock lock(&b_->mu);
    for (const auto& p : parts) b_->held[i_].erase(p.part);
  }
  Beliefs* const b_;
  const int i_;
};

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

// The database's view: owner and epoch of each owned part, live members.
struct DbGroup {
  std::map<int, std::pair<std::string, int64_t>> owners;
  std::set<std::string> members;
};

class Db {
 public:
  Db(std::unique_ptr<Sql> sql, const std::string& schema, const std::string& queue)
      : sql_(std::move(sql)),
        parts_sql_(absl::StrCat("SELECT part, session_id::text, epoch FROM \"", schema,
                                "\".session_parts WHERE queue = ", Quote(queue))),
        members_sql_(absl::StrCat("SELECT id::text FROM \"", schema, "\".sessions WHERE queue = ",
                                  Quote(queue), " AND expires_at >= now()")) {}

  absl::StatusOr<DbGroup> Read(bool members) {
    DbGroup g;
    auto rows = sql_->Query(parts_sql_);
    if (!rows.ok()) return rows.status();
    for (const auto& row : *rows) {
      int part;
      int64_t epoch;
      if (!absl::SimpleAtoi(row[0].value_or(""), &part) ||
          !absl::SimpleAtoi(row[2].value_or(""), &epoch)) {
        return absl::InternalError("scale: unreadable session_parts row");
      }
      g.owners[part] = {row[1].value_or(""), epoch};
    }
    if (members) {
      auto m = sql_->Query(members_sql_);
      if (!m.ok()) return m.status();
      for (const auto& row : *m) g.members.insert(row[0].value_or(""));
    }
    return g;
  }
  Sql& sql() { return *sql_; }

 private:
  std::unique_ptr<Sql> sql_;
  const std::string parts_sql_, members_sql_;
};

// Every part owned by a live member other than `gone` (a session that
// stopped heartbeating: live in the database until it expires), counts
// differing by at most one.
bool Balanced(const DbGroup& g, int parts, const std::string& gone) {
  if (static_cast<int>(g.owners.size()) != parts || g.members.empty()) return false;
  std::map<std::string, int> count;
  for (const auto& m : g.members) {
    if (m != gone) count[m] = 0;
  }
  for (const auto& [part, o] : g.owners) {
    auto it = count.find(o.first);
    if (it == count.end()) return false;
    ++it->second;
  }
  int lo = parts, hi = 0;
  for (const auto& [m, c] : count) {
    lo = std::min(lo, c);
    hi = std::max(hi, c);
  }
  return hi - lo <= 1;
}

int64_t Moved(const DbGroup& before, const DbGroup& after) {
  int64_t n = 0;
  for (const auto& [part, o] : after.owners) {
    auto it = before.owners.find(part);
    if (it == before.owners.end() || it->second.first != o.first) ++n;
  }
  return n;
}

// Samples the owner check until stopped (ScaleReport::owner_samples).
class OwnerSampler {
 public:
  OwnerSampler(Db* db, Beliefs* beliefs) : db_(db), b_(beliefs) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~OwnerSampler() { Stop(); }
  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }
  // While paused it reads nothing: the idle window measures the fleet's
  // own cost, not the sampler's reads of every owner row.
  void Pause(bool paused) {
    absl::MutexLock lock(&mu_);
    paused_ = paused;
  }
  int64_t samples() const { return samples_.load(); }
  int64_t double_owned() const { return double_owned_.load(); }
  int64_t stale() const { return stale_.load(); }
  absl::Status status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  void Loop() {
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        if (mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Milliseconds(100))) return;
        if (paused_) continue;
      }
      absl::MutexLock beliefs(&b_->mu);  // no belief changes while the database is read
      auto g = db_->Read(/*members=*/false);
      if (!g.ok()) {
        absl::MutexLock lock(&mu_);
        status_ = g.status();
        return;
      }
      std::set<int> seen;
      for (size_t i = 0; i < b_->held.size(); ++i) {
        if (b_->dead[i]) continue;
        for (const auto& [part, epoch] : b_->held[i]) {
          if (!seen.insert(part).second) ++double_owned_;
          auto it = g->owners.find(part);
          if (it == g->owners.end() || it->second.second != epoch) ++stale_;
        }
      }
      ++samples_;
    }
  }

  Db* const db_;
  Beliefs* const b_;
  std::thread thread_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> samples_{0}, double_owned_{0}, stale_{0};
};

// The machine's steal time so far, in ticks (/proc/stat's "cpu" line, the
// eighth value): time the hypervisor ran something else while this VM's
// CPUs wanted to run. -1 when unknown.
int64_t StealTicks() {
  FILE* f = fopen("/proc/stat", "r");
  if (f == nullptr) return -1;
  char line[512];
  const bool got = fgets(line, sizeof line, f) != nullptr;
  fclose(f);
  if (!got) return -1;
  std::vector<absl::string_view> v = absl::StrSplit(line, ' ', absl::SkipEmpty());
  int64_t steal;
  if (v.size() < 9 || v[0] != "cpu" || !absl::SimpleAtoi(v[8], &steal)) return -1;
  return steal;
}

}  // namespace

absl::StatusOr<ScaleReport> RunScale(const ScaleOptions& o, const StoreFactory& factory,
                                     const std::string& dsn, const std::string& schema) {
  if (auto st = ValidateQueueName(o.queue); !st.ok()) return st;
  auto log = [&](const std::string& s) {
    if (o.verbose) fprintf(stderr, "scale: %s\n", s.c_str());
  };
  auto admin = factory();
  if (!admin.ok()) return admin.status();
  QueueConfig qc;
  qc.name = o.queue;
  qc.parts = o.parts;
  qc.assignment = AssignmentKind::kSticky;
  qc.session_ttl = o.session_ttl;
  if (auto st = (*admin)->CreateQueue(qc); !st.ok()) return st;
  auto sql_main = Sql::Open(dsn);
  if (!sql_main.ok()) return sql_main.status();
  auto sql_sampler = Sql::Open(dsn);
  if (!sql_sampler.ok()) return sql_sampler.status();
  Db db(std::move(*sql_main), schema, o.queue);
  Db sampler_db(std::move(*sql_sampler), schema, o.queue);

  ScaleReport r;
  r.sessions = o.sessions;
  r.parts = o.parts;
  const absl::Duration interval = DefaultHeartbeatInterval(o.session_ttl);
  r.heartbeat_interval_s = absl::ToDoubleSeconds(interval);
  auto intervals = [&](absl::Duration d) { return absl::FDivDuration(d, interval); };

  Tracker tracker;
  const StoreFactory tracked = TrackingFactory(factory, &tracker);
  Beliefs beliefs;
  const int total = o.sessions + 1;  // the joiner too
  {
    absl::MutexLock lock(&beliefs.mu);
    beliefs.held.resize(total);
    beliefs.dead.assign(total, false);
  }
  std::vector<std::unique_ptr<BeliefListener>> listeners;
  std::vector<std::unique_ptr<Session>> sessions;
  for (int i = 0; i < total; ++i) {
    listeners.push_back(std::make_unique<BeliefListener>(&beliefs, i));
    SessionOptions so;
    so.queue = o.queue;
    so.host = absl::StrCat("scale-", i);
    sessions.push_back(std::make_unique<Session>(tracked, so, listeners.back().get()));
  }
  OwnerSampler sampler(&sampler_db, &beliefs);
  absl::Status result;
  auto stop_all = [&] {
    std::vector<std::thread> t;
    for (auto& s : sessions) t.emplace_back([&s] { s->Stop(); });
    for (auto& x : t) x.join();
  };
  // Polls the database until it is balanced; the time it first had every
  // part owned goes to *full.
  std::string gone;  // the "SIGKILLed" session, once there is one
  auto await_balanced = [&](absl::Time* full, DbGroup* out) -> absl::Status {
    const absl::Time deadline = absl::Now() + o.phase_timeout;
    for (;;) {
      auto g = db.Read(/*members=*/true);
      if (!g.ok()) return g.status();
      const absl::Time now = absl::Now();
      if (full != nullptr && *full == absl::InfiniteFuture() &&
          static_cast<int>(g->owners.size()) == o.parts) {
        *full = now;
      }
      if (Balanced(*g, o.parts, gone)) {
        *out = std::move(*g);
        return absl::OkStatus();
      }
      if (now > deadline) return absl::DeadlineExceededError("scale: the group did not balance");
      absl::SleepFor(absl::Milliseconds(20));
    }
  };
  // Balanced, and every live session done with its hand-offs: then read the
  // owners the moves are counted against.
  auto settle = [&](absl::Time* balanced_at, DbGroup* out) -> absl::Status {
    DbGroup g;
    if (auto st = await_balanced(nullptr, &g); !st.ok()) return st;
    *balanced_at = absl::Now();
    for (auto& s : sessions) {
      if (s->state() == Session::State::kActive && !s->WaitStable(o.phase_timeout)) {
        return absl::DeadlineExceededError("scale: a session did not settle");
      }
    }
    auto after = db.Read(/*members=*/true);
    if (!after.ok()) return after.status();
    *out = std::move(*after);
    return absl::OkStatus();
  };

  do {
    // Join: start_threads sessions joining at once, as a rollout would.
    log(absl::StrCat("starting ", o.sessions, " sessions on ", o.parts, " parts"));
    std::atomic<int> next{0};
    std::vector<std::thread> starters;
    absl::Mutex start_mu;
    absl::Status start_status;
    for (int t = 0; t < std::max(1, o.start_threads); ++t) {
      starters.emplace_back([&] {
        for (int i; (i = next++) < o.sessions;) {
          if (auto st = sessions[i]->Start(); !st.ok()) {
            absl::MutexLock lock(&start_mu);
            start_status.Update(st);
          }
        }
      });
    }
    for (auto& t : starters) t.join();
    if (!start_status.ok()) {
      result = start_status;
      break;
    }
    const absl::Time last_join = absl::Now();
    absl::Time full = absl::InfiniteFuture();
    DbGroup g;
    if (result = await_balanced(&full, &g); !result.ok()) break;
    r.balanced_intervals = intervals(absl::Now() - last_join);
    r.full_intervals = intervals(full - last_join);
    absl::Time at;
    if (result = settle(&at, &g); !result.ok()) break;
    log(absl::StrFormat("balanced %.2f intervals after the last join", r.balanced_intervals));

    // Idle, from the moment every session has had one more round (its
    // heartbeat) since the group settled: that round reads the group whole
    // once, for the changes since its last read; the idle window measures
    // what comes after.
    {
      std::vector<int64_t> rounds;
      for (auto& s : sessions) rounds.push_back(s->rounds() + o.idle_warmup);
      const absl::Time deadline = absl::Now() + o.phase_timeout;
      for (size_t i = 0; i < rounds.size(); ++i) {
        while (sessions[i]->state() == Session::State::kActive &&
               sessions[i]->rounds() <= rounds[i] && absl::Now() < deadline) {
          absl::SleepFor(absl::Milliseconds(20));
        }
      }
    }
    const std::string generation_sql =
        absl::StrCat("SELECT coalesce(max(generation), 0) FROM \"", schema,
                     "\".group_generations WHERE queue = ", Quote(o.queue));
    auto gen0 = db.sql().Scalar(generation_sql);
    const std::map<std::string, int64_t> c0 = tracker.calls();
    const int64_t cpu0 = o.server_cpu_ticks ? o.server_cpu_ticks() : -1;
    const int64_t steal0 = StealTicks();
    // Where the server preloads it (--diagnose; scripts/test's server).
    sampler.Pause(true);
    const bool pgss = db.sql().Exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements").ok() &&
                      db.sql().Exec("SELECT pg_stat_statements_reset()").ok();
    const absl::Time t0 = absl::Now();
    absl::SleepFor(o.idle);
    const std::map<std::string, int64_t> c1 = tracker.calls();
    auto gen1 = db.sql().Scalar(generation_sql);
    sampler.Pause(false);
    const int64_t cpu1 = o.server_cpu_ticks ? o.server_cpu_ticks() : -1;
    const int64_t steal1 = StealTicks();
    const double secs = absl::ToDoubleSeconds(absl::Now() - t0);
    r.idle_seconds = secs;
    int64_t calls = 0;
    auto delta = [&](const std::string& what) {
      auto a = c0.find(what);
      auto b = c1.find(what);
      return (b == c1.end() ? 0 : b->second) - (a == c0.end() ? 0 : a->second);
    };
    for (const auto& [what, count] : c1) {
      if (absl::EndsWith(what, "_rows")) continue;
      const int64_t d = delta(what);
      if (d > 0) r.idle_calls_per_s[what] = d / secs;
      calls += d;
    }
    r.idle_calls_per_s_per_session = calls / secs / o.sessions;
    const int64_t group_reads = delta("heartbeat") + delta("read_group");
    r.idle_owner_rows = delta("heartbeat_owner_rows") + delta("read_group_owner_rows");
    if (group_reads > 0) {
      r.idle_owner_rows_per_heartbeat = static_cast<double>(r.idle_owner_rows) / group_reads;
    }
    int64_t g0, g1;
    if (gen0.ok() && gen1.ok() && absl::SimpleAtoi(*gen0, &g0) && absl::SimpleAtoi(*gen1, &g1)) {
      r.idle_generation_moves = g1 - g0;
    }
    if (cpu0 >= 0 && cpu1 >= cpu0) {
      r.idle_server_cpu_percent = 100.0 * (cpu1 - cpu0) / sysconf(_SC_CLK_TCK) / secs;
    }
    if (steal0 >= 0 && steal1 >= steal0) {
      r.idle_steal_percent = 100.0 * (steal1 - steal0) / sysconf(_SC_CLK_TCK) / secs;
    }
    if (pgss) {
      auto row = db.sql().Query(
          "SELECT sum(calls), sum(total_exec_time) / nullif(sum(calls), 0), "
          "sum(shared_blks_hit + shared_blks_read)::float8 / nullif(sum(calls), 0) "
          "FROM pg_stat_statements "
          // The renewal both heartbeat statements begin with (pg_store_sql.cc,
          // kHeartbeatMe), up to the expiry's expression, which may change.
          "WHERE query LIKE '%SET heartbeat_at = now(), expires_at = %'");
      double v;
      if (row.ok() && !row->empty() && absl::SimpleAtod((*row)[0][1].value_or(""), &v)) {
        r.heartbeat_mean_ms = v;
        if (absl::SimpleAtod((*row)[0][2].value_or(""), &v)) r.heartbeat_blocks_per_call = v;
      }
    }
    log(absl::StrFormat("idle: %.3f calls/s per session", r.idle_calls_per_s_per_session));

    // A join: the newcomer takes its fair share and nothing else moves.
    DbGroup before = g;
    absl::Time t = absl::Now();
    if (result = sessions[o.sessions]->Start(); !result.ok()) break;
    if (result = settle(&at, &g); !result.ok()) break;
    r.join = {Moved(before, g), o.parts / (o.sessions + 1), intervals(at - t)};
    log(absl::StrCat("join moved ", r.join.moved, " (lower bound ", r.join.lower_bound, ")"));

    // A leave: the leaver's parts, and nothing else.
    auto owned_by = [](const DbGroup& group, const SessionId& id) {
      int64_t n = 0;
      for (const auto& [part, owner] : group.owners) n += owner.first == id.value;
      return n;
    };
    before = g;
    t = absl::Now();
    const int64_t leaver_parts = owned_by(before, sessions[0]->id());
    sessions[0]->Stop();
    if (result = settle(&at, &g); !result.ok()) break;
    r.leave = {Moved(before, g), leaver_parts, intervals(at - t)};
    log(absl::StrCat("leave moved ", r.leave.moved, " (lower bound ", r.leave.lower_bound, ")"));

    // A "SIGKILL": the session stops heartbeating; the others expire it.
    before = g;
    const int64_t victim_parts = owned_by(before, sessions[1]->id());
    {
      absl::MutexLock lock(&beliefs.mu);
      beliefs.dead[1] = true;
    }
    gone = sessions[1]->id().value;
    t = absl::Now();
    sessions[1]->Abandon();
    if (result = settle(&at, &g); !result.ok()) break;
    r.kill = {Moved(before, g), victim_parts, intervals(at - t)};
    log(absl::StrCat("kill moved ", r.kill.moved, " (lower bound ", r.kill.lower_bound, ")"));
  } while (false);

  stop_all();
  sampler.Stop();
  r.owner_samples = sampler.samples();
  r.double_owned = sampler.double_owned();
  r.stale_beliefs = sampler.stale();
  for (const auto& [what, n] : tracker.calls()) r.run_calls[what] = n;
  r.rejoins = r.run_calls["join"] - static_cast<int64_t>(sessions.size());
  (void)(*admin)->DeleteQueue(o.queue, QueueContents::kDelete);
  if (!result.ok()) return result;
  if (auto st = sampler.status(); !st.ok()) return st;
  return r;
}

std::string FormatScale(const ScaleReport& r) {
  std::string out = absl::StrFormat(
      "Scale: %d sessions on %d parts (sticky), heartbeat every %.2f s\n"
      "  last join -> every part owned %.2f intervals, balanced %.2f intervals\n"
      "  idle: %.3f store calls/s per session, %.1f owner rows per group read (generation "
      "moved %lld times), server CPU %.1f%% of a core; heartbeat statement %.3f ms mean, %.0f "
      "buffers per call\n",
      r.sessions, r.parts, r.heartbeat_interval_s, r.full_intervals, r.balanced_intervals,
      r.idle_calls_per_s_per_session, r.idle_owner_rows_per_heartbeat,
      static_cast<long long>(r.idle_generation_moves), r.idle_server_cpu_percent,
      r.heartbeat_mean_ms, r.heartbeat_blocks_per_call);
  std::vector<std::string> by;
  for (const auto& [k, v] : r.idle_calls_per_s) by.push_back(absl::StrFormat("%s %.1f", k, v));
  absl::StrAppend(&out, "  idle calls/s (fleet): ", absl::StrJoin(by, ", "), "\n");
  const double fleet_calls = r.idle_calls_per_s_per_session * r.sessions;
  if (r.idle_server_cpu_percent >= 0 && fleet_calls > 0) {
    absl::StrAppendFormat(&out,
                          "  idle window %.0f s: server CPU %.0f us per store call; the machine's "
                          "steal time %.1f%% of a core\n",
                          r.idle_seconds, 1e4 * r.idle_server_cpu_percent / fleet_calls,
                          r.idle_steal_percent);
  }
  for (const auto& [name, m] : {std::pair<const char*, const ScaleMoves&>{"join", r.join},
                                {"leave", r.leave},
                                {"kill", r.kill}}) {
    absl::StrAppendFormat(
        &out,
        "  %-5s moved %lld parts, lower bound %lld (%.3fx), balanced in "
        "%.2f intervals\n",
        name, static_cast<long long>(m.moved), static_cast<long long>(m.lower_bound),
        m.lower_bound > 0 ? static_cast<double>(m.moved) / m.lower_bound : 0.0, m.intervals);
  }
  absl::StrAppendFormat(&out,
                        "  owner check: %lld samples, %lld parts believed twice, %lld beliefs "
                        "the database did not hold; %lld re-joins after a lapsed lease\n",
                        static_cast<long long>(r.owner_samples),
                        static_cast<long long>(r.double_owned),
                        static_cast<long long>(r.stale_beliefs), static_cast<long long>(r.rejoins));
  std::vector<std::string> calls;
  for (const auto& [k, v] : r.run_calls) {
    calls.push_back(absl::StrCat(k, " ", v));
  }
  absl::StrAppend(&out, "  store calls over the run: ", absl::StrJoin(calls, ", "), "\n");
  return out;
}

}  // namespace partq::bench
