#include "tests/testing/pg_env.h"

#include <cstdlib>
#include <mutex>
#include <pqxx/pqxx>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "pg/migrations.h"

namespace partq::testing {
namespace {

std::mutex g_mu;
EmbeddedPostgres* g_server = nullptr;  // leaked on purpose; stopped at exit
std::string* g_dsn = nullptr;

void StopServer() {
  delete g_server;
  g_server = nullptr;
}

}  // namespace

const std::string& TestDsn() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_dsn != nullptr) return *g_dsn;
  if (const char* env = std::getenv("PARTQ_TEST_DSN"); env != nullptr && *env) {
    g_dsn = new std::string(env);
    return *g_dsn;
  }
  EmbeddedPostgres::Options opts;
  // Tests run many sessions at once; the default of 100 is close.
  opts.settings = {"max_connections=300", "fsync=off"};
  auto server = EmbeddedPostgres::Start(opts);
  if (!server.ok()) {
    fprintf(stderr, "cannot start embedded PostgreSQL: %s\n", server.status().ToString().c_str());
    abort();
  }
  g_server = server->release();
  std::atexit(StopServer);
  g_dsn = new std::string(g_server->dsn());
  return *g_dsn;
}

EmbeddedPostgres* TestServer() {
  TestDsn();
  return g_server;
}

std::vector<std::vector<std::optional<std::string>>> Query(const std::string& dsn,
                                                           const std::string& sql) {
  std::vector<std::vector<std::optional<std::string>>> out;
  try {
    pqxx::connection c(dsn);
    pqxx::nontransaction tx(c);
    pqxx::result r = tx.exec(sql);
    for (const auto& row : r) {
      std::vector<std::optional<std::string>> cells;
      for (const auto& f : row) {
        cells.push_back(f.is_null() ? std::nullopt : std::optional<std::string>(f.c_str()));
      }
      out.push_back(std::move(cells));
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "query failed: " << sql << ": " << e.what();
  }
  return out;
}

int64_t QueryInt(const std::string& dsn, const std::string& sql) {
  auto rows = Query(dsn, sql);
  if (rows.empty() || rows[0].empty() || !rows[0][0]) {
    ADD_FAILURE() << "no value from " << sql;
    return -1;
  }
  return std::stoll(*rows[0][0]);
}

TestSchema::TestSchema() : dsn_(TestDsn()) {
  absl::BitGen gen;
  name_ = absl::StrCat("t_", absl::Uniform<uint64_t>(gen));
  auto store = NewStore();
  if (store != nullptr) {
    absl::Status st = store->Migrate();
    if (!st.ok()) ADD_FAILURE() << "migrate " << name_ << ": " << st;
  }
}

TestSchema::~TestSchema() {
  // A worker process the test killed can leave its backend finishing a statement in the
  // schema, and the server may then pick the DROP as a deadlock's victim: it goes through
  // once that statement ends.
  const std::string drop = absl::StrCat("DROP SCHEMA IF EXISTS \"", name_, "\" CASCADE");
  for (int attempt = 1;; ++attempt) {
    try {
      pqxx::connection c(dsn_);
      pqxx::nontransaction tx(c);
      tx.exec(drop);
      return;
    } catch (const pqxx::deadlock_detected& e) {
      if (attempt < 5) {
        absl::SleepFor(absl::Milliseconds(200));
        continue;
      }
      ADD_FAILURE() << "query failed " << attempt << " times: " << drop << ": " << e.what();
      return;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "query failed: " << drop << ": " << e.what();
      return;
    }
  }
}

PgOptions TestSchema::options() const {
  PgOptions o;
  o.dsn = dsn_;
  o.schema = name_;
  // The suites run once more as through PgBouncer in transaction mode
  // (tests/pg/CMakeLists.txt): no named statements, per-transaction settings.
  const char* pool_mode = std::getenv("PARTQ_TEST_POOL_MODE");
  o.transaction_pooler = pool_mode != nullptr && std::string(pool_mode) == "transaction";
  return o;
}

std::unique_ptr<Store> TestSchema::NewStore() const {
  auto store = ConnectPg(options());
  if (!store.ok()) {
    ADD_FAILURE() << "connect: " << store.status();
    return nullptr;
  }
  return std::move(*store);
}

std::unique_ptr<BridgeStore> TestSchema::NewBridgeStore() const {
  auto store = ConnectPgBridge(options());
  if (!store.ok()) {
    ADD_FAILURE() << "connect: " << store.status();
    return nullptr;
  }
  return std::move(*store);
}

StoreFactory TestSchema::Factory() const { return PgStoreFactory(options()); }
BridgeStoreFactory TestSchema::BridgeFactory() const { return PgBridgeStoreFactory(options()); }

std::vector<std::vector<std::optional<std::string>>> TestSchema::Q(const std::string& sql) const {
  return Query(dsn_, WithSchema(sql, name_));
}

int64_t TestSchema::QInt(const std::string& sql) const {
  return QueryInt(dsn_, WithSchema(sql, name_));
}

}  // namespace partq::testing
