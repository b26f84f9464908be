// The benchmark's outputs: a table for people, JSON for tools, a plot.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "bench/bench.h"
#include "bench/peer_queues.h"

namespace partq::bench {
namespace {

int MaxBatch(const BenchOptions& o) { return *std::max_element(o.batches.begin(), o.batches.end()); }

const DrainCell* Find(const BenchReport& r, const std::string& system, int sessions, int batch) {
  for (const auto& c : r.cells) {
    if (c.system == system && c.sessions == sessions && c.batch == batch) return &c;
  }
  return nullptr;
}

bool IsPeerQueue(const std::string& system) {
  return std::find(PeerQueueSystems().begin(), PeerQueueSystems().end(), system) !=
         PeerQueueSystems().end();
}

bool IsHandlerSystem(const std::string& system) {
  return std::find(HandlerSystems().begin(), HandlerSystems().end(), system) !=
         HandlerSystems().end();
}

// A ratio in `width` characters ("0.61x"), or "-" for none: 0 is what a
// cell gets when the system it is divided by did not run in its rounds.
std::string Ratio(double ratio, int width) {
  return ratio > 0 ? absl::StrFormat("%*.2fx", width - 1, ratio)
                   : absl::StrFormat("%*s", width, "-");
}

nlohmann::json LatencyJson(const Latency& l) {
  return {{"samples", l.samples}, {"p50_ms", l.p50_ms}, {"p99_ms", l.p99_ms}, {"max_ms", l.max_ms}};
}

// The other queues (peer_queues.h), a row per drain, with partq's drains of
// the same rounds divided by theirs: partq (a result row per item, as PgQ's
// drain writes) and partq_noop (no write, as Graphile Worker's and pg-boss's
// no-op handlers).
std::string PeerQueueTable(const BenchReport& r, const BenchOptions& o) {
  std::string rows;
  for (const DrainCell& c : r.cells) {
    if (!IsPeerQueue(c.system)) continue;
    absl::StrAppendFormat(&rows, "%-8d %-6d %-24s %10.0f", c.sessions, c.batch, c.system,
                          c.median_items_per_s);
    for (const char* ref : {"partq", "partq_noop"}) {
      auto it = c.median_ratio_to.find(ref);
      absl::StrAppend(
          &rows, " ",
          Ratio(it == c.median_ratio_to.end() || it->second <= 0 ? 0 : 1 / it->second, 15));
    }
    absl::StrAppend(&rows, " ", Ratio(c.median_ratio_to_floor, 9), "\n");
  }
  if (rows.empty()) return "";
  return absl::StrFormat(
      "\nOther queues: median items/s over %d round(s); partq's drains in the same rounds "
      "divided by theirs (bench/README.md)\n%-8s %-6s %-24s %10s %15s %15s %9s\n%s",
      o.rounds, "sessions", "batch", "system", "items/s", "partq/it", "partq_noop/it", "to floor",
      rows);
}

}  // namespace

bool SteadyOverLimit(const BenchReport& r, const BenchOptions& o) {
  return o.steady_p99_limit_ms > 0 && r.steady_rate > 0 &&
         r.steady_latency.p99_ms > o.steady_p99_limit_ms;
}

Latency LatencyOf(std::vector<double> ms) {
  Latency l;
  l.samples = static_cast<int64_t>(ms.size());
  if (ms.empty()) return l;
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) {
    size_t i = static_cast<size_t>(p * static_cast<double>(ms.size() - 1) + 0.5);
    return ms[std::min(i, ms.size() - 1)];
  };
  l.p50_ms = pct(0.50);
  l.p99_ms = pct(0.99);
  l.max_ms = ms.back();
  return l;
}

std::string PeerShortfall(bool kept_up, double achieved, const BenchOptions& o) {
  if (!kept_up) return ", fell behind";
  if (achieved < 0.98 * o.steady_rate) return ", but its producer fell short of the rate";
  return "";
}

std::string FormatTable(const BenchReport& r, const BenchOptions& o) {
  std::string out;
  std::vector<int> batches = o.batches;
  std::sort(batches.rbegin(), batches.rend());
  for (int b : batches) {
    // The sessions with a cell at this batch, whichever systems ran.
    std::vector<int> sessions;
    for (int s : o.sessions) {
      for (const auto& sys : DrainSystems()) {
        if (Find(r, sys, s, b) != nullptr) {
          sessions.push_back(s);
          break;
        }
      }
    }
    if (sessions.empty()) continue;
    // The table's columns, every one in its place whatever ran, so tables
    // of runs with different --systems line up; the handlers have a table of
    // their own.
    std::vector<std::string> systems;
    bool any = false;
    for (const auto& sys : DrainSystems()) {
      if (IsHandlerSystem(sys) || IsPeerQueue(sys)) continue;
      systems.push_back(sys);
      for (int s : sessions) any = any || Find(r, sys, s, b) != nullptr;
    }
    if (any) {
      absl::StrAppendFormat(&out,
                            "\nDrain, batch %d: median items/s over %d round(s) (ratio to the "
                            "floor in the same round)\n",
                            b, o.rounds);
      absl::StrAppendFormat(&out, "%-8s", "sessions");
      for (const auto& sys : systems) absl::StrAppendFormat(&out, " %22s", sys);
      out += "\n";
      for (int s : sessions) {
        absl::StrAppendFormat(&out, "%-8d", s);
        for (const auto& sys : systems) {
          const DrainCell* c = Find(r, sys, s, b);
          if (c == nullptr) {
            absl::StrAppendFormat(&out, " %22s", "-");
          } else {
            absl::StrAppendFormat(&out, " %13.0f (%s)", c->median_items_per_s,
                                  Ratio(c->median_ratio_to_floor, 6));
          }
        }
        out += "\n";
      }
      // Against the log's floor too (issue 47), where it ran in the same rounds.
      for (int s : sessions) {
        const DrainCell* c = Find(r, "partq", s, b);
        if (c == nullptr) continue;
        auto it = c->median_ratio_to.find(kLogFloor);
        if (it == c->median_ratio_to.end()) continue;
        absl::StrAppendFormat(&out, "partq over log_floor, %d sessions: %s\n", s,
                              Ratio(it->second, 6));
      }
    }
    // CPU per item of the same drains: where a fleet's limit is (the
    // server's share: in production the workers run elsewhere).
    std::string cpu;
    for (int s : sessions) {
      for (const auto& sys : systems) {
        const DrainCell* c = Find(r, sys, s, b);
        if (c == nullptr || c->median_server_us_per_item < 0) continue;
        absl::StrAppendFormat(&cpu, "%-8d %-18s %12.2f %9s %12.2f\n", s, sys,
                              c->median_server_us_per_item, Ratio(c->median_server_cpu_to_floor, 9),
                              c->median_client_us_per_item);
      }
    }
    if (!cpu.empty()) {
      absl::StrAppendFormat(&out,
                            "\nCPU per item, batch %d: median µs over %d round(s) (server: the "
                            "postmaster and its children; client: this process)\n%-8s %-18s "
                            "%12s %9s %12s\n%s",
                            b, o.rounds, "sessions", "system", "server µs", "to floor", "client µs",
                            cpu);
    }
    // The handlers: a row each, with ratios to the in-process systems too.
    std::string rows;
    for (int s : sessions) {
      for (const auto& sys : HandlerSystems()) {
        const DrainCell* c = Find(r, sys, s, b);
        if (c == nullptr) continue;
        absl::StrAppendFormat(&rows, "%-8d %-18s %13.0f", s, sys, c->median_items_per_s);
        for (const auto& ref : ReferenceSystems()) {
          auto it = c->median_ratio_to.find(ref);
          absl::StrAppend(&rows, " ", Ratio(it == c->median_ratio_to.end() ? 0 : it->second, 14));
        }
        absl::StrAppend(&rows, " ", Ratio(c->median_ratio_to_floor, 10), "\n");
      }
    }
    if (!rows.empty()) {
      absl::StrAppendFormat(&out,
                            "\nHandlers writing a result per item, batch %d: median items/s over "
                            "%d round(s) (median of per-round ratios)\n%-8s %-18s %13s",
                            b, o.rounds, "sessions", "system", "items/s");
      for (const auto& ref : ReferenceSystems()) absl::StrAppendFormat(&out, " %14s", "to " + ref);
      absl::StrAppendFormat(&out, " %10s\n%s", "to floor", rows);
    }
  }
  out += PeerQueueTable(r, o);
  // The transports with failing items, against themselves without.
  std::string failing;
  for (const DrainCell& c : r.cells) {
    const std::string without = WithoutFailures(c.system);
    if (without.empty()) continue;
    auto it = c.median_ratio_to.find(without);
    absl::StrAppendFormat(&failing, "%-8d %-6d %-18s %13.0f %22s\n", c.sessions, c.batch, c.system,
                          c.median_items_per_s,
                          Ratio(it == c.median_ratio_to.end() ? 0 : it->second, 22));
  }
  if (!failing.empty()) {
    absl::StrAppendFormat(&out,
                          "\nHandlers with 1 %% of items failing once (bench-peer --fail-every "
                          "100): median items/s over %d round(s) (median of per-round ratios)\n"
                          "%-8s %-6s %-18s %13s %22s\n%s",
                          o.rounds, "sessions", "batch", "system", "items/s",
                          "to it without failures", failing);
  }
  if (r.steady_rate > 0) {
    absl::StrAppendFormat(&out,
                          "\nSteady state at %.0f items/s (achieved %.0f/s, %d sessions): "
                          "enqueue commit -> ack commit p50 %.1f ms, p99 %.1f ms, max %.1f ms\n"
                          "  of which enqueue commit -> claimed p50 %.1f ms, p99 %.1f ms; "
                          "claimed -> ack commit p50 %.1f ms, p99 %.1f ms\n",
                          r.steady_rate, r.steady_achieved, o.steady_sessions,
                          r.steady_latency.p50_ms, r.steady_latency.p99_ms, r.steady_latency.max_ms,
                          r.steady_to_claimed.p50_ms, r.steady_to_claimed.p99_ms,
                          r.steady_claimed_to_acked.p50_ms, r.steady_claimed_to_acked.p99_ms);
    if (o.steady_p99_limit_ms > 0) {
      absl::StrAppendFormat(&out, "  p99 limit %g ms: %s\n", o.steady_p99_limit_ms,
                            SteadyOverLimit(r, o) ? "EXCEEDED" : "met");
    }
  }
  if (r.soak.ran) {
    const SoakOptions& so = o.soak;
    const auto& k = r.soak;
    absl::StrAppendFormat(
        &out,
        "\nSoak at %.0f items/s for %.0f s (%d sessions, %d joins, %d leaves; samples in %s):\n"
        "  first 5 min: %.0f acked/s, p50 %.1f ms, p99 %.1f ms\n"
        "  last 5 min:  %.0f acked/s, p50 %.1f ms, p99 %.1f ms (%.2fx and %.2fx the first)\n"
        "  items table at most %.0f MB (index %.0f MB), at the end %.0f MB (index %.0f MB)\n",
        so.rate, so.seconds, so.sessions, k.joins, k.leaves, so.out, k.first_rate, k.first.p50_ms,
        k.first.p99_ms, k.last_rate, k.last.p50_ms, k.last.p99_ms,
        k.first_rate > 0 ? k.last_rate / k.first_rate : 0,
        k.first.p99_ms > 0 ? k.last.p99_ms / k.first.p99_ms : 0, k.max_table_mb, k.max_index_mb,
        k.end_table_mb, k.end_index_mb);
  }
  if (r.pickup_claim.samples > 0) {
    absl::StrAppendFormat(&out,
                          "Idle pick-up (%lld items one at a time): enqueue commit -> claimed "
                          "p50 %.1f ms p99 %.1f ms; -> ack committed p50 %.1f ms p99 %.1f ms\n",
                          static_cast<long long>(r.pickup_claim.samples), r.pickup_claim.p50_ms,
                          r.pickup_claim.p99_ms, r.pickup_ack.p50_ms, r.pickup_ack.p99_ms);
    if (r.pickup_floor.samples > 0) {
      absl::StrAppendFormat(
          &out,
          "  the floor (a LISTEN, then one DELETE ... RETURNING on the thread that read the "
          "notice): p50 %.1f ms p99 %.1f ms; partq's claim p50 %.2fx, p99 %.2fx the floor's\n",
          r.pickup_floor.p50_ms, r.pickup_floor.p99_ms,
          r.pickup_floor.p50_ms > 0 ? r.pickup_claim.p50_ms / r.pickup_floor.p50_ms : 0,
          r.pickup_floor.p99_ms > 0 ? r.pickup_claim.p99_ms / r.pickup_floor.p99_ms : 0);
    }
  }
  // Where each latency starts (bench/peers/peer.mjs): the commit of the producer's call of
  // the item's tick at the steady rate, just before the send for pick-up.
  for (const auto& [name, list] :
       {std::pair<std::string, const std::map<std::string, BenchReport::PeerLatency>*>{
            "at the steady rate: the commit of their producer's call", &r.peer_steady},
        {"idle pick-up: their producer's send", &r.peer_pickup}}) {
    if (list->empty()) continue;
    absl::StrAppendFormat(&out, "Other queues, %s -> their handler's start (%d workers)\n", name,
                          o.steady_sessions);
    for (const auto& [system, l] : *list) {
      // PgQ's events go to its one consumer (SteadyPgq), not to the workers.
      absl::StrAppendFormat(
          &out, "  %-24s p50 %.1f ms p99 %.1f ms max %.1f ms (%lld items%s)%s\n", system,
          l.latency.p50_ms, l.latency.p99_ms, l.latency.max_ms,
          static_cast<long long>(l.latency.samples), system == "pgq" ? ", one consumer" : "",
          list == &r.peer_steady ? absl::StrFormat("; achieved %.0f/s%s", l.achieved_rate,
                                                   PeerShortfall(l.kept_up, l.achieved_rate, o))
                                 : "");
    }
  }
  if (!r.enqueue.empty()) {
    out += "Enqueue items/s:";
    for (const auto& [k, v] : r.enqueue) absl::StrAppendFormat(&out, "  %s %.0f", k, v);
    out += "\n";
  }
  if (r.idle_sessions > 0) {
    absl::StrAppendFormat(&out,
                          "Idle cost of %d sessions: %.1f store calls/s (client), %.1f "
                          "transactions/s (server), server CPU %.1f%% of a core\n",
                          r.idle_sessions, r.idle_client_calls_per_s, r.idle_server_xacts_per_s,
                          r.idle_server_cpu_percent);
    std::vector<std::string> parts;
    for (const auto& [k, v] : r.idle_calls_per_s) {
      // claim_probe: the claims that also probed for abandoned claims.
      parts.push_back(absl::StrFormat(k == "claim_probe" ? "(%s %.1f)" : "%s %.1f", k, v));
    }
    absl::StrAppend(&out, "  by call: ", absl::StrJoin(parts, ", "), "\n");
    absl::StrAppendFormat(&out,
                          "  %.3f transactions/s per session; a delayed item claimed after its "
                          "due time: p50 %.1f ms, p99 %.1f ms, max %.1f ms (%lld items)\n",
                          r.idle_server_xacts_per_s / r.idle_sessions, r.idle_delayed_late.p50_ms,
                          r.idle_delayed_late.p99_ms, r.idle_delayed_late.max_ms,
                          static_cast<long long>(r.idle_delayed_late.samples));
  }
  if (r.worker_rss_mb >= 0) {
    absl::StrAppendFormat(&out, "Worker at 16 threads: RSS %.1f MB after draining, peak %.1f MB\n",
                          r.worker_rss_mb, r.worker_peak_rss_mb);
  }
  if (r.scale_ran) out += FormatScale(r.scale);
  for (const auto& n : r.notes) absl::StrAppend(&out, "note: ", n, "\n");
  return out;
}

std::string ToJson(const BenchReport& r, const BenchOptions& o) {
  nlohmann::json j;
  j["machine"] = r.machine;
  j["options"] = {{"sessions", o.sessions},         {"batches", o.batches},
                  {"items", o.items},               {"rounds", o.rounds},
                  {"parts", o.parts},               {"full", o.full},
                  {"sweep_sessions", o.sweep_sessions},
                  {"only", std::vector<std::string>(o.only.begin(), o.only.end())}};
  j["systems"] = DrainSystems();
  j["drain"] = nlohmann::json::array();
  for (const auto& c : r.cells) {
    j["drain"].push_back({{"system", c.system},
                          {"sessions", c.sessions},
                          {"batch", c.batch},
                          {"median_items_per_s", c.median_items_per_s},
                          {"median_ratio_to_floor", c.median_ratio_to_floor},
                          {"median_ratio_to", c.median_ratio_to},
                          {"per_round_items_per_s", c.per_round},
                          {"median_server_cpu_us_per_item", c.median_server_us_per_item},
                          {"median_client_cpu_us_per_item", c.median_client_us_per_item},
                          {"median_server_cpu_to_floor", c.median_server_cpu_to_floor}});
  }
  j["samples"] = nlohmann::json::array();
  for (const auto& s : r.samples) {
    j["samples"].push_back({{"system", s.system},
                            {"sessions", s.sessions},
                            {"batch", s.batch},
                            {"round", s.round},
                            {"items", s.items},
                            {"seconds", s.seconds},
                            {"items_per_s", s.items_per_s},
                            {"results", s.results},
                            {"server_cpu_us_per_item", s.server_us_per_item},
                            {"client_cpu_us_per_item", s.client_us_per_item}});
  }
  if (r.steady_rate > 0) {
    j["steady"] = {{"rate", r.steady_rate},
                   {"achieved", r.steady_achieved},
                   {"sessions", o.steady_sessions},
                   {"latency", LatencyJson(r.steady_latency)},
                   {"to_claimed", LatencyJson(r.steady_to_claimed)},
                   {"claimed_to_acked", LatencyJson(r.steady_claimed_to_acked)}};
  }
  if (r.soak.ran) {
    const auto& k = r.soak;
    j["soak"] = {{"rate", o.soak.rate},
                 {"seconds", o.soak.seconds},
                 {"sessions", o.soak.sessions},
                 {"joins", k.joins},
                 {"leaves", k.leaves},
                 {"samples_file", o.soak.out},
                 {"first_5min", {{"acked_per_s", k.first_rate}, {"latency", LatencyJson(k.first)}}},
                 {"last_5min", {{"acked_per_s", k.last_rate}, {"latency", LatencyJson(k.last)}}},
                 {"items_mb", {{"max", k.max_table_mb}, {"end", k.end_table_mb}}},
                 {"index_mb", {{"max", k.max_index_mb}, {"end", k.end_index_mb}}},
                 {"enqueued", k.enqueued},
                 {"unsure", k.unsure},
                 {"recorded", k.acked_rows}};
  }
  if (r.pickup_claim.samples > 0) {
    j["pickup"] = {{"claimed", LatencyJson(r.pickup_claim)}, {"acked", LatencyJson(r.pickup_ack)}};
    if (r.pickup_floor.samples > 0) j["pickup"]["floor"] = LatencyJson(r.pickup_floor);
  }
  for (const auto& [key, list] :
       {std::pair<const char*, const std::map<std::string, BenchReport::PeerLatency>*>{
            "peer_steady", &r.peer_steady},
        {"peer_pickup", &r.peer_pickup}}) {
    for (const auto& [system, l] : *list) {
      j[key][system] = {{"latency", LatencyJson(l.latency)},
                        {"achieved", l.achieved_rate},
                        {"kept_up", l.kept_up}};
    }
  }
  if (!r.enqueue.empty()) j["enqueue_items_per_s"] = r.enqueue;
  if (r.idle_sessions > 0) {
    j["idle"] = {{"sessions", r.idle_sessions},
                 {"client_calls_per_s", r.idle_client_calls_per_s},
                 {"calls_per_s", r.idle_calls_per_s},
                 {"server_xacts_per_s", r.idle_server_xacts_per_s},
                 {"server_cpu_percent", r.idle_server_cpu_percent},
                 {"server_xacts_per_s_per_session", r.idle_server_xacts_per_s / r.idle_sessions},
                 {"delayed_claimed_after_due", LatencyJson(r.idle_delayed_late)}};
  }
  if (r.worker_rss_mb >= 0) {
    j["worker_memory"] = {{"concurrency", 16},
                          {"rss_mb", r.worker_rss_mb},
                          {"peak_rss_mb", r.worker_peak_rss_mb}};
  }
  j["notes"] = r.notes;
  return j.dump(2);
}

namespace {

// A gnuplot string literal: single quotes, a quote inside doubled.
std::string GnuplotQuote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "''"}}), "'");
}

// Runs gnuplot with `args` (no shell between: paths are only ever argv
// entries); its stdout to /dev/null when `quiet`. Returns its exit status,
// or -1 when it could not be started (errno says why).
int RunGnuplot(const std::vector<std::string>& args, bool quiet) {
  std::vector<std::string> argv = {"gnuplot"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargs;
  for (auto& a : argv) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid;
  const int err = posix_spawnp(&pid, "gnuplot", &actions, nullptr, cargs.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    errno = err;
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The checks of CheckPlot that need no gnuplot.
absl::Status CheckPlotRequest(const BenchOptions& o, const std::string& path) {
  if (!absl::EndsWithIgnoreCase(path, ".svg") && !absl::EndsWithIgnoreCase(path, ".png")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--plot: \"", path, "\" must end in .svg or .png (the format follows it)"));
  }
  if (!o.only.count("drain")) {
    return absl::InvalidArgumentError(
        "--plot draws the drain's throughput against sessions, and --only leaves the drain out");
  }
  return absl::OkStatus();
}

constexpr char kNeedsGnuplot[] =
    "--plot needs gnuplot (Debian: apt-get install gnuplot-nox); the table and --json output "
    "do not";

}  // namespace

absl::Status CheckPlot(const BenchOptions& o, const std::string& path) {
  if (absl::Status st = CheckPlotRequest(o, path); !st.ok()) return st;
  if (RunGnuplot({"--version"}, /*quiet=*/true) != 0) {
    return absl::FailedPreconditionError(kNeedsGnuplot);
  }
  return absl::OkStatus();
}

absl::Status WritePlot(const BenchReport& r, const BenchOptions& o, const std::string& path) {
  // gnuplot itself is not probed again: a missing one fails to start below.
  if (absl::Status st = CheckPlotRequest(o, path); !st.ok()) return st;
  // The data and the script go to a directory of their own, removed after.
  char tmpl[] = "/tmp/partq-plot.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("--plot: no temporary directory: ", strerror(errno)));
  }
  const std::string dir = tmpl;
  auto cleanup = absl::MakeCleanup([&] {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  });
  const int b = MaxBatch(o);
  const std::string data = dir + "/drain.dat";
  {
    std::ofstream f(data);
    f << "# sessions";
    for (const auto& sys : DrainSystems()) f << " " << sys;
    f << "\n";
    for (int s : o.sessions) {
      f << s;
      for (const auto& sys : DrainSystems()) {
        const DrainCell* c = Find(r, sys, s, b);
        f << " " << (c ? absl::StrCat(c->median_items_per_s) : std::string("NaN"));
      }
      f << "\n";
    }
  }
  const bool png = absl::EndsWithIgnoreCase(path, ".png");
  std::string script = absl::StrCat(
      png ? "set terminal pngcairo size 900,560 noenhanced\n"
          : "set terminal svg size 900,560 dynamic noenhanced\n",
      "set output ", GnuplotQuote(path), "\n",
      "set title 'Drain throughput vs sessions (batch ", b, ", median of ", o.rounds,
      " rounds; ", r.machine.count("nproc") ? r.machine.at("nproc") : "?", " cores)'\n",
      "set xlabel 'sessions'\nset ylabel 'items/s'\nset logscale x 2\nset grid\n",
      "set key outside right\nset yrange [0:*]\n", "plot ");
  // Only the systems that ran: a column of NaN alone is an error to gnuplot.
  bool first = true;
  for (size_t i = 0; i < DrainSystems().size(); ++i) {
    const std::string& sys = DrainSystems()[i];
    if (!std::any_of(o.sessions.begin(), o.sessions.end(),
                     [&](int s) { return Find(r, sys, s, b) != nullptr; })) {
      continue;
    }
    absl::StrAppend(&script, first ? "" : ", ", GnuplotQuote(data), " using 1:", i + 2,
                    " with linespoints lw 2 title '", sys, "'");
    first = false;
  }
  if (first) return absl::FailedPreconditionError("--plot: the run has no drain results to plot");
  script += "\n";
  const std::string gp = dir + "/drain.gp";
  {
    std::ofstream f(gp);
    f << script;
    if (!f) return absl::UnavailableError(absl::StrCat("--plot: cannot write ", gp));
  }
  const int rc = RunGnuplot({gp}, /*quiet=*/false);
  if (rc < 0 && errno == ENOENT) return absl::FailedPreconditionError(kNeedsGnuplot);
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("--plot: gnuplot ", rc < 0 ? strerror(errno) : "failed", " writing ", path));
  }
  return absl::OkStatus();
}

}  // namespace partq::bench
