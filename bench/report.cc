// The benchmark's outputs: a table for people, JSON for tools, a plot.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/bench.h"

namespace partq::bench {
namespace {

int MaxBatch(const BenchOptions& o) { return *std::max_element(o.batches.begin(), o.batches.end()); }

const DrainCell* Find(const BenchReport& r, const std::string& system, int sessions, int batch) {
  for (const auto& c : r.cells) {
    if (c.system == system && c.sessions == sessions && c.batch == batch) return &c;
  }
  return nullptr;
}

nlohmann::json LatencyJson(const Latency& l) {
  return {{"samples", l.samples}, {"p50_ms", l.p50_ms}, {"p99_ms", l.p99_ms}, {"max_ms", l.max_ms}};
}

}  // namespace

std::string FormatTable(const BenchReport& r, const BenchOptions& o) {
  std::string out;
  std::vector<int> batches = o.batches;
  std::sort(batches.rbegin(), batches.rend());
  for (int b : batches) {
    std::vector<int> sessions;
    for (int s : o.sessions) {
      if (Find(r, "floor", s, b) != nullptr) sessions.push_back(s);
    }
    if (sessions.empty()) continue;
    absl::StrAppendFormat(&out, "\nDrain, batch %d: median items/s over %d round(s) (ratio to the floor in the same round)\n",
                          b, o.rounds);
    absl::StrAppendFormat(&out, "%-8s", "sessions");
    for (const auto& sys : DrainSystems()) absl::StrAppendFormat(&out, " %22s", sys);
    out += "\n";
    for (int s : sessions) {
      absl::StrAppendFormat(&out, "%-8d", s);
      for (const auto& sys : DrainSystems()) {
        const DrainCell* c = Find(r, sys, s, b);
        if (c == nullptr) {
          absl::StrAppendFormat(&out, " %22s", "-");
        } else {
          absl::StrAppendFormat(&out, " %13.0f (%5.2fx)", c->median_items_per_s,
                                c->median_ratio_to_floor);
        }
      }
      out += "\n";
    }
  }
  if (r.steady_rate > 0) {
    absl::StrAppendFormat(&out,
                          "\nSteady state at %.0f items/s (achieved %.0f/s, %d sessions): "
                          "enqueue commit -> ack commit p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
                          r.steady_rate, r.steady_achieved, o.steady_sessions,
                          r.steady_latency.p50_ms, r.steady_latency.p99_ms, r.steady_latency.max_ms);
  }
  if (r.pickup_claim.samples > 0) {
    absl::StrAppendFormat(&out,
                          "Idle pick-up (%lld items one at a time): enqueue commit -> claimed "
                          "p50 %.1f ms p99 %.1f ms; -> ack committed p50 %.1f ms p99 %.1f ms\n",
                          static_cast<long long>(r.pickup_claim.samples), r.pickup_claim.p50_ms,
                          r.pickup_claim.p99_ms, r.pickup_ack.p50_ms, r.pickup_ack.p99_ms);
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
  }
  if (r.worker_rss_mb >= 0) {
    absl::StrAppendFormat(&out, "Worker at 16 threads: RSS %.1f MB after draining, peak %.1f MB\n",
                          r.worker_rss_mb, r.worker_peak_rss_mb);
  }
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
                          {"per_round_items_per_s", c.per_round}});
  }
  j["samples"] = nlohmann::json::array();
  for (const auto& s : r.samples) {
    j["samples"].push_back({{"system", s.system},
                            {"sessions", s.sessions},
                            {"batch", s.batch},
                            {"round", s.round},
                            {"items", s.items},
                            {"seconds", s.seconds},
                            {"items_per_s", s.items_per_s}});
  }
  if (r.steady_rate > 0) {
    j["steady"] = {{"rate", r.steady_rate},
                   {"achieved", r.steady_achieved},
                   {"sessions", o.steady_sessions},
                   {"latency", LatencyJson(r.steady_latency)}};
  }
  if (r.pickup_claim.samples > 0) {
    j["pickup"] = {{"claimed", LatencyJson(r.pickup_claim)}, {"acked", LatencyJson(r.pickup_ack)}};
  }
  if (!r.enqueue.empty()) j["enqueue_items_per_s"] = r.enqueue;
  if (r.idle_sessions > 0) {
    j["idle"] = {{"sessions", r.idle_sessions},
                 {"client_calls_per_s", r.idle_client_calls_per_s},
                 {"calls_per_s", r.idle_calls_per_s},
                 {"server_xacts_per_s", r.idle_server_xacts_per_s},
                 {"server_cpu_percent", r.idle_server_cpu_percent}};
  }
  if (r.worker_rss_mb >= 0) {
    j["worker_memory"] = {{"concurrency", 16},
                          {"rss_mb", r.worker_rss_mb},
                          {"peak_rss_mb", r.worker_peak_rss_mb}};
  }
  j["notes"] = r.notes;
  return j.dump(2);
}

absl::Status WritePlot(const BenchReport& r, const BenchOptions& o, const std::string& path) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    return absl::FailedPreconditionError(
        "bench: --plot needs gnuplot (Debian: apt-get install gnuplot-nox); the table and "
        "--json output do not");
  }
  const int b = MaxBatch(o);
  const std::string data = path + ".dat";
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
      "set output '", path, "'\n",
      "set title 'Drain throughput vs sessions (batch ", b, ", median of ", o.rounds,
      " rounds; ", r.machine.count("nproc") ? r.machine.at("nproc") : "?", " cores)'\n",
      "set xlabel 'sessions'\nset ylabel 'items/s'\nset logscale x 2\nset grid\n",
      "set key outside right\nset yrange [0:*]\n", "plot ");
  for (size_t i = 0; i < DrainSystems().size(); ++i) {
    absl::StrAppend(&script, i ? ", " : "", "'", data, "' using 1:", i + 2,
                    " with linespoints lw 2 title '", DrainSystems()[i], "'");
  }
  script += "\n";
  const std::string gp = path + ".gp";
  {
    std::ofstream f(gp);
    f << script;
  }
  const int rc = std::system(absl::StrCat("gnuplot '", gp, "'").c_str());
  std::remove(gp.c_str());
  std::remove(data.c_str());
  if (rc != 0) return absl::InternalError(absl::StrCat("bench: gnuplot failed writing ", path));
  return absl::OkStatus();
}

}  // namespace partq::bench
