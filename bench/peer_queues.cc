#include "bench/peer_queues.h"

#include <libpq-fe.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/bench.h"
#include "bench/handler_peers.h"
#include "handlers/child_process.h"

extern char** environ;

namespace partq::bench {
namespace {

constexpr char kPgqConsumer[] = "bench";
// The bench's session id in the results rows PgQ's consumer writes.
constexpr char kPgqSessionId[] = "00000000-0000-4000-8000-000000000001";

std::string PgqQueue(const std::string& schema) { return schema + "_pgq"; }
std::string Results(const std::string& schema) {
  return absl::StrCat("\"", schema, "\".bl_results");
}

absl::Status Failed(absl::string_view what, const std::exception& e) {
  return absl::InternalError(absl::StrCat("bench pgq: ", what, ": ", e.what()));
}

// This process's environment with the PG* variables of `dsn` (as libpq reads
// it) in place of any it had, for node-postgres, which reads them.
absl::StatusOr<std::vector<std::string>> PgEnvironment(const std::string& dsn) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(dsn.c_str(), &error);
  if (options == nullptr) {
    std::string message = error != nullptr ? error : "out of memory";
    if (error != nullptr) PQfreemem(error);
    return absl::InvalidArgumentError(absl::StrCat("bench: the DSN cannot be parsed: ", message));
  }
  static const std::map<std::string, std::string> kVariables = {
      {"host", "PGHOST"},         {"port", "PGPORT"},         {"user", "PGUSER"},
      {"password", "PGPASSWORD"}, {"dbname", "PGDATABASE"},   {"sslmode", "PGSSLMODE"},
      {"hostaddr", "PGHOSTADDR"}, {"passfile", "PGPASSFILE"}, {"application_name", "PGAPPNAME"}};
  std::map<std::string, std::string> set;
  for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    auto v = kVariables.find(o->keyword);
    if (v != kVariables.end() && o->val != nullptr) set[v->second] = o->val;
  }
  PQconninfoFree(options);
  // node-postgres has no hostaddr: a DSN with only an address gives it as the host.
  if (!set.count("PGHOST") && set.count("PGHOSTADDR")) set["PGHOST"] = set["PGHOSTADDR"];
  // What the DSN leaves out comes from this process's PG* variables, as for
  // libpq (PGHOST when the DSN names no host, PGSSLROOTCERT, ...).
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const absl::string_view var(*e);
    if (!set.count(std::string(var.substr(0, var.find('='))))) env.emplace_back(var);
  }
  for (const auto& [name, value] : set) env.push_back(absl::StrCat(name, "=", value));
  return env;
}

// Runs `command` by /bin/sh, its stderr lines to `log`, and returns the one
// line it prints on stdout.
absl::StatusOr<std::string> RunForLine(const std::string& command,
                                       std::optional<std::vector<std::string>> env,
                                       absl::Duration timeout,
                                       const std::function<void(absl::string_view)>& log) {
  ChildOptions co;
  co.command = command;
  co.environment = std::move(env);
  co.on_stderr_line = [log](pid_t, absl::string_view line) {
    if (log) log(line);
  };
  auto child = ChildProcess::Start(std::move(co));
  if (!child.ok()) return child.status();
  // The scripts read no stdin: the request is only what starts the exchange.
  auto line = (*child)->Exchange("", absl::Now() + timeout);
  if (!line.ok()) {
    return absl::InternalError(absl::StrCat("`", command, "` failed: ", line.status().message()));
  }
  (*child)->Stop(absl::Now() + absl::Seconds(10));
  return *line;
}

// A fresh PgQ queue named after `schema` with the bench's consumer, and an
// empty bl_results. PgQ's batch is what lies between two ticks; a tick is due
// as soon as there is one new event (ticker_max_count 1).
void MakePgqQueue(pqxx::nontransaction& tx, const std::string& schema) {
  const std::string queue = PgqQueue(schema);
  tx.exec("CREATE EXTENSION IF NOT EXISTS pgq");
  tx.exec_params("SELECT pgq.drop_queue(queue_name, true) FROM pgq.queue WHERE queue_name = $1",
                 queue);
  tx.exec_params("SELECT pgq.create_queue($1)", queue);
  tx.exec_params("SELECT pgq.set_queue_config($1, 'ticker_max_count', '1')", queue);
  tx.exec_params("SELECT pgq.register_consumer($1, $2)", queue, kPgqConsumer);
  tx.exec(absl::StrCat("TRUNCATE ", Results(schema)));
  tx.exec("CHECKPOINT");
}

// PgQ at a steady rate (SteadyPgq): every kPgqTick, the producer inserts the
// events due by then in one transaction and the ticker ticks; the consumer
// asks for a batch every kPgqPoll while it finds none.
constexpr absl::Duration kPgqTick = absl::Milliseconds(10);
constexpr absl::Duration kPgqPoll = absl::Milliseconds(2);

// What SteadyPgq's threads share. Event g (1..total) is at index g - 1; the
// producer writes sent_us (before its insert) and commit_us, the consumer
// start_us, and SteadyPgq reads them after joining both. Event 0 is the
// warm-up, not counted.
struct PgqSteady {
  explicit PgqSteady(int64_t total) : sent_us(total, 0), commit_us(total, 0), start_us(total, 0) {}
  std::vector<int64_t> sent_us, commit_us, start_us;
  std::atomic<bool> stop{false}, warmed{false};
  std::atomic<int64_t> seen{0}, duplicates{0};
  absl::Mutex mu;
  std::string error ABSL_GUARDED_BY(mu);
  void Fail(absl::string_view what, const std::exception& e) {
    absl::MutexLock lock(&mu);
    if (error.empty()) error = absl::StrCat("bench pgq: ", what, ": ", e.what());
    stop = true;
  }
};

// pgq.ticker() every kPgqTick, as pgqd with ticker_period at that would.
void TickPgq(const std::string& dsn, const std::string& queue, PgqSteady* st) {
  try {
    pqxx::connection c(dsn);
    pqxx::nontransaction tx(c);
    while (!st->stop) {
      tx.exec_params("SELECT pgq.ticker($1)", queue);
      absl::SleepFor(kPgqTick);
    }
  } catch (const std::exception& e) {
    st->Fail("ticker", e);
  }
}

// One consumer: per batch, one transaction of next_batch, its events (their
// handler starts now), their bl_results rows and finish_batch.
void ConsumePgq(const std::string& dsn, const std::string& schema, PgqSteady* st) {
  const int64_t total = static_cast<int64_t>(st->start_us.size());
  try {
    pqxx::connection c(dsn);
    c.prepare("next", "SELECT pgq.next_batch($1, $2)");
    c.prepare("events", "SELECT ev_data::bigint FROM pgq.get_batch_events($1)");
    c.prepare("results",
              absl::StrCat("INSERT INTO ", Results(schema),
                           " (item_id, session_id) SELECT unnest($1::bigint[]), $2::uuid"));
    c.prepare("finish", "SELECT pgq.finish_batch($1)");
    while (!st->stop && st->seen < total) {
      pqxx::work tx(c);
      pqxx::result next = tx.exec_prepared("next", PgqQueue(schema), kPgqConsumer);
      if (next[0][0].is_null()) {
        tx.commit();
        absl::SleepFor(kPgqPoll);
        continue;
      }
      const int64_t batch = next[0][0].as<int64_t>();
      std::vector<int64_t> ids;
      const int64_t now = absl::ToUnixMicros(absl::Now());
      for (const pqxx::row& row : tx.exec_prepared("events", batch)) {
        const int64_t id = row[0].as<int64_t>();
        if (id == 0 && !st->warmed) {
          st->warmed = true;
          continue;
        }
        ids.push_back(id);
        if (id < 1 || id > total || st->start_us[id - 1] != 0) {
          ++st->duplicates;
        } else {
          st->start_us[id - 1] = now;
          ++st->seen;
        }
      }
      tx.exec_prepared("results", "{" + absl::StrJoin(ids, ",") + "}", kPgqSessionId);
      tx.exec_prepared("finish", batch);
      tx.commit();
    }
  } catch (const std::exception& e) {
    st->Fail("consumer", e);
  }
}

// Inserts `rate` events a second through `c` (its "insert" prepared), event
// 1 first, until `total`: every kPgqTick those due by then in one
// transaction, the times before it and of its commit noted. Returns when it
// started and when the last committed.
std::pair<absl::Time, absl::Time> ProducePgq(pqxx::connection& c, const std::string& queue,
                                             double rate, PgqSteady* st) {
  const int64_t total = static_cast<int64_t>(st->commit_us.size());
  const absl::Time t0 = absl::Now();
  absl::Time last = t0;
  try {
    int64_t sent = 0;
    for (int64_t tick = 1; sent < total && !st->stop; ++tick) {
      absl::SleepFor(t0 + tick * kPgqTick - absl::Now());
      const int64_t due = std::min<int64_t>(
          total, static_cast<int64_t>(absl::ToDoubleSeconds(absl::Now() - t0) * rate));
      if (due <= sent) continue;
      const int64_t before = absl::ToUnixMicros(absl::Now());
      for (int64_t i = sent; i < due; ++i) st->sent_us[i] = before;
      pqxx::work tx(c);
      tx.exec_prepared("insert", queue, sent + 1, due);
      tx.commit();
      last = absl::Now();
      for (int64_t i = sent; i < due; ++i) st->commit_us[i] = absl::ToUnixMicros(last);
      sent = due;
    }
  } catch (const std::exception& e) {
    st->Fail("producer", e);
  }
  return {t0, last};
}

}  // namespace

bool IsNodePeer(absl::string_view system) {
  return absl::StartsWith(system, "graphile_worker") || absl::StartsWith(system, "pg_boss");
}

absl::Status LoadPgq(const std::string& dsn, const std::string& schema, int64_t items, int batch) {
  const std::string queue = PgqQueue(schema);
  try {
    pqxx::connection c(dsn);
    pqxx::nontransaction tx(c);
    MakePgqQueue(tx, schema);
    // A batch holds whole transactions: one transaction, then one tick, per batch.
    for (int64_t from = 1; from <= items; from += batch) {
      const int64_t to = std::min<int64_t>(from + batch - 1, items);
      tx.exec_params(
          "SELECT count(pgq.insert_event($1, 'item', g::text)) FROM generate_series($2::bigint, "
          "$3::bigint) g",
          queue, from, to);
      if (tx.exec_params("SELECT pgq.ticker($1)", queue)[0][0].is_null()) {
        return absl::InternalError(absl::StrCat("bench pgq: no tick after events ", from, "-", to));
      }
    }
  } catch (const std::exception& e) {
    return Failed("load", e);
  }
  return absl::OkStatus();
}

absl::StatusOr<double> DrainPgq(const std::string& dsn, const std::string& schema,
                                const std::function<void(bool)>& mark) {
  const std::string queue = PgqQueue(schema);
  try {
    pqxx::connection c(dsn);
    c.prepare("next", "SELECT pgq.next_batch($1, $2)");
    // The handler's write of every event of the batch, as the floor's.
    c.prepare("results", absl::StrCat("INSERT INTO ", Results(schema),
                                      " (item_id, session_id) SELECT ev_data::bigint, $2::uuid "
                                      "FROM pgq.get_batch_events($1)"));
    c.prepare("finish", "SELECT pgq.finish_batch($1)");
    if (mark) mark(true);
    const absl::Time t0 = absl::Now();
    for (;;) {
      pqxx::work tx(c);
      pqxx::result next = tx.exec_prepared("next", queue, kPgqConsumer);
      if (next[0][0].is_null()) break;
      const int64_t batch_id = next[0][0].as<int64_t>();
      tx.exec_prepared("results", batch_id, kPgqSessionId);
      tx.exec_prepared("finish", batch_id);
      tx.commit();
    }
    const absl::Time t1 = absl::Now();
    if (mark) mark(false);
    return absl::ToDoubleSeconds(t1 - t0);
  } catch (const std::exception& e) {
    return Failed("drain", e);
  }
}

absl::StatusOr<NodePeerResult> SteadyPgq(const std::string& dsn, const std::string& schema,
                                         double rate, double seconds, bool from_send) {
  const std::string queue = PgqQueue(schema);
  try {
    pqxx::connection c(dsn);
    pqxx::nontransaction tx(c);
    MakePgqQueue(tx, schema);
    // A tick also when no event came: an event whose insert commits just
    // after a tick counted it (its sequence number) but could not see it
    // waits for the next tick, which pgq.ticker() makes without new events
    // only once the last is older than half ticker_max_lag (3 s by default)
    // and than ticker_idle_period (1 min) or twice the gap before it: without
    // these, 200 ms (the next event) at 5 a second.
    tx.exec_params("SELECT pgq.set_queue_config($1, 'ticker_max_lag', '20 milliseconds')", queue);
    tx.exec_params("SELECT pgq.set_queue_config($1, 'ticker_idle_period', '10 milliseconds')",
                   queue);
  } catch (const std::exception& e) {
    return Failed("steady", e);
  }
  PgqSteady st(std::max<int64_t>(1, std::llround(rate * seconds)));
  std::thread ticker(TickPgq, dsn, queue, &st);
  std::thread consumer(ConsumePgq, dsn, schema, &st);
  auto join = absl::MakeCleanup([&] {
    st.stop = true;
    if (consumer.joinable()) consumer.join();
    if (ticker.joinable()) ticker.join();
  });
  // The producer's connection, and a warm-up event through it, read before
  // the timed ones start: no connection's first statements are timed.
  std::unique_ptr<pqxx::connection> producer;
  try {
    producer = std::make_unique<pqxx::connection>(dsn);
    producer->prepare("insert",
                      "SELECT count(pgq.insert_event($1, 'item', g::text)) FROM "
                      "generate_series($2::bigint, $3::bigint) g");
    pqxx::work tx(*producer);
    tx.exec_prepared("insert", queue, 0, 0);
    tx.commit();
  } catch (const std::exception& e) {
    st.Fail("warm-up", e);
  }
  for (absl::Time end = absl::Now() + absl::Seconds(10); !st.warmed && !st.stop;) {
    if (absl::Now() > end) {
      st.Fail("warm-up", std::runtime_error("its event was not read within 10 s"));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  absl::Time t0 = absl::Now(), last = t0;
  if (!st.stop) std::tie(t0, last) = ProducePgq(*producer, queue, rate, &st);
  // Kept up: every event handled within 10 s of the last commit (as peer.mjs).
  const int64_t total = static_cast<int64_t>(st.commit_us.size());
  while (!st.stop && st.seen < total && absl::Now() < last + absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  std::move(join).Invoke();
  {
    absl::MutexLock lock(&st.mu);
    if (!st.error.empty()) return absl::InternalError(st.error);
  }
  NodePeerResult r;
  r.items = total;
  r.done = st.seen;
  r.duplicates = st.duplicates;
  r.missing = total - st.seen;
  r.kept_up = r.missing == 0;
  r.seconds = absl::ToDoubleSeconds(last - t0);
  r.achieved_rate = r.seconds > 0 ? total / r.seconds : 0;
  std::vector<double> ms;
  const std::vector<int64_t>& from = from_send ? st.sent_us : st.commit_us;
  for (int64_t i = 0; i < total; ++i) {
    if (st.start_us[i] == 0 || st.commit_us[i] == 0) continue;
    ms.push_back(static_cast<double>(std::max<int64_t>(0, st.start_us[i] - from[i])) / 1000.0);
  }
  const Latency l = LatencyOf(std::move(ms));
  r.samples = l.samples;
  r.p50_ms = l.p50_ms;
  r.p99_ms = l.p99_ms;
  r.max_ms = l.max_ms;
  return r;
}

absl::Status DropPgq(const std::string& dsn, const std::string& schema) {
  try {
    pqxx::connection c(dsn);
    pqxx::nontransaction tx(c);
    tx.exec_params(
        "SELECT pgq.drop_queue(queue_name, true) FROM pgq.queue WHERE queue_name = $1 AND "
        "to_regnamespace('pgq') IS NOT NULL",
        PgqQueue(schema));
  } catch (const std::exception& e) {
    return Failed("drop", e);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> NodePeerModules(const std::string& peers_dir) {
  const std::string setup = absl::StrCat(peers_dir, "/../../tools/setup");
  auto dir = RunForLine(absl::StrCat("exec ", ShellQuote(setup), " npm ", ShellQuote(peers_dir)),
                        std::nullopt, absl::Minutes(10), nullptr);
  if (!dir.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("bench: the peers' npm packages cannot be installed (node, npm and the npm "
                     "registry are needed): ",
                     dir.status().message()));
  }
  return absl::StrCat(*dir, "/node_modules");
}

absl::StatusOr<NodePeerResult> RunNodePeer(const NodePeerOptions& options,
                                           const std::string& system, const std::string& mode,
                                           const std::vector<std::string>& args) {
  if (!IsNodePeer(system)) return absl::InvalidArgumentError("bench: not a Node peer: " + system);
  absl::StatusOr<std::string> modules = options.node_modules;
  if (modules->empty()) modules = NodePeerModules(options.peers_dir);
  if (!modules.ok()) return modules.status();
  auto env = PgEnvironment(options.dsn);
  if (!env.ok()) return env.status();
  env->push_back(absl::StrCat("PARTQ_PEERS_NODE_MODULES=", *modules));
  const bool defaults = absl::EndsWith(system, "_default");
  const std::string name = defaults ? system.substr(0, system.size() - 8) : system;
  std::vector<std::string> argv = {
      "exec node", ShellQuote(options.peers_dir + "/peer.mjs"),
      name,        mode,
      "--shape",   defaults ? "default" : "best",
      "--schema",  ShellQuote(absl::StrCat(options.schema, "_", name)),
      "--timeout", std::to_string(absl::ToInt64Seconds(options.timeout))};
  for (const std::string& a : args) argv.push_back(ShellQuote(a));
  auto line = RunForLine(absl::StrJoin(argv, " "), *std::move(env),
                         options.timeout + absl::Seconds(30), options.log);
  if (!line.ok()) return line.status();
  const nlohmann::json j = nlohmann::json::parse(*line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return absl::InternalError(absl::StrCat("bench ", system, ": not a JSON object: ", *line));
  }
  // A number, or 0 where the script gives none (null: no sample).
  auto num = [&j](const char* key) {
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
  };
  auto count = [&num](const char* key) { return static_cast<int64_t>(num(key)); };
  NodePeerResult r;
  r.version =
      j.contains("version") && j["version"].is_string() ? j["version"].get<std::string>() : "";
  r.seconds = num("seconds");
  r.items_per_s = num("items_per_s");
  r.items = count("items");
  r.done = count("done");
  r.duplicates = count("duplicates");
  r.missing = count("missing");
  r.samples = count("samples");
  r.p50_ms = num("p50_ms");
  r.p99_ms = num("p99_ms");
  r.max_ms = num("max_ms");
  r.achieved_rate = num("achieved_rate");
  r.kept_up = j.contains("kept_up") && j["kept_up"].is_boolean() && j["kept_up"].get<bool>();
  if (mode == "drain" && (r.done != r.items || r.duplicates != 0 || r.missing != 0)) {
    return absl::InternalError(absl::StrCat("bench ", system, ": not exactly once: ", r.done,
                                            " of ", r.items, " done, ", r.duplicates, " twice, ",
                                            r.missing, " missing"));
  }
  return r;
}

}  // namespace partq::bench
