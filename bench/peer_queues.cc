#include "bench/peer_queues.h"

#include <libpq-fe.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
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

}  // namespace

bool IsNodePeer(absl::string_view system) {
  return absl::StartsWith(system, "graphile_worker") || absl::StartsWith(system, "pg_boss");
}

absl::Status LoadPgq(const std::string& dsn, const std::string& schema, int64_t items, int batch) {
  const std::string queue = PgqQueue(schema);
  try {
    pqxx::connection c(dsn);
    pqxx::nontransaction tx(c);
    tx.exec("CREATE EXTENSION IF NOT EXISTS pgq");
    tx.exec_params("SELECT pgq.drop_queue(queue_name, true) FROM pgq.queue WHERE queue_name = $1",
                   queue);
    tx.exec_params("SELECT pgq.create_queue($1)", queue);
    // PgQ's batch is what lies between two ticks: the load ticks after every
    // `batch` events, and a tick is due as soon as there is one new event.
    tx.exec_params("SELECT pgq.set_queue_config($1, 'ticker_max_count', '1')", queue);
    tx.exec_params("SELECT pgq.register_consumer($1, $2)", queue, kPgqConsumer);
    tx.exec(absl::StrCat("TRUNCATE ", Results(schema)));
    tx.exec("CHECKPOINT");
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
