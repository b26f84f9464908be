// Test access to a real PostgreSQL 15.
//
// TestDsn() is $PARTQ_TEST_DSN when set, else the DSN of an embedded server
// that this test process starts on first use and stops at exit. Each test that
// uses the database gets a fresh schema (TestSchema), so tests never see each
// other's rows and can run in parallel.
#ifndef PARTQ_TESTS_TESTING_PG_ENV_H_
#define PARTQ_TESTS_TESTING_PG_ENV_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pg/embedded_postgres.h"
#include "pg/pg_store.h"
#include "store/store.h"

namespace partq::testing {

const std::string& TestDsn();
// The embedded server, or nullptr when $PARTQ_TEST_DSN points elsewhere.
EmbeddedPostgres* TestServer();

// Runs one SQL statement on a fresh connection; returns rows as text. Aborts
// the test on failure. For assertions on database state.
std::vector<std::vector<std::optional<std::string>>> Query(const std::string& dsn,
                                                           const std::string& sql);
// The first column of the first row as an integer.
int64_t QueryInt(const std::string& dsn, const std::string& sql);

// A fresh, migrated schema named t_<random>, dropped on destruction.
class TestSchema {
 public:
  TestSchema();
  ~TestSchema();
  const std::string& name() const { return name_; }
  const std::string& dsn() const { return dsn_; }
  // dsn() and name(); transaction_pooler when $PARTQ_TEST_POOL_MODE is
  // "transaction" (the pg suites run once that way too).
  PgOptions options() const;
  // A new connected store on this schema (fails the test if it cannot connect).
  std::unique_ptr<Store> NewStore() const;
  StoreFactory Factory() const;
  // The same for the Kafka bridge's operations.
  std::unique_ptr<BridgeStore> NewBridgeStore() const;
  BridgeStoreFactory BridgeFactory() const;
  // `sql` with {schema} replaced by the schema's name, run and returned.
  std::vector<std::vector<std::optional<std::string>>> Q(const std::string& sql) const;
  int64_t QInt(const std::string& sql) const;

 private:
  std::string name_;
  std::string dsn_;
};

}  // namespace partq::testing

#endif  // PARTQ_TESTS_TESTING_PG_ENV_H_
