// The Store contract on PgStore, each case on a fresh schema of the test
// server (tests/testing/pg_env.h).
#include <map>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "pg/pg_store.h"
#include "tests/store/store_conformance.h"
#include "tests/testing/pg_env.h"

namespace partq::conformance {
namespace {

class PgHarness : public StoreHarness {
 public:
  PgHarness() : bridge_(schema_.NewBridgeStore()) {}

  std::unique_ptr<Store> Connect(int64_t max_payload_bytes) override {
    PgOptions o = schema_.options();
    o.max_payload_bytes = max_payload_bytes;
    absl::StatusOr<std::unique_ptr<Store>> store = ConnectPg(o);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  absl::Time Now() override {
    return absl::FromUnixMicros(
        schema_.QInt("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint"));
  }

  // The server's clock cannot be moved, so what it is compared with is:
  // every timestamp column of the schema moves back by `d`, in one
  // transaction. partq's SQL only ever compares a stored time with now() or
  // measures the distance between them, so this is the same as now() moving
  // `d` ahead for everything stored so far.
  void Advance(absl::Duration d) override {
    pqxx::connection conn(schema_.dsn());
    pqxx::work tx(conn);
    // Time passing is no change of the group: the triggers that move its
    // generation (migration 19) stay out of it, as they would if the
    // server's clock had moved (replica mode skips ordinary triggers).
    tx.exec("SET LOCAL session_replication_role = replica");
    const pqxx::result cols = tx.exec_params(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = $1 AND data_type = 'timestamp with time zone' "
        "ORDER BY table_name, column_name",
        schema_.name());
    std::map<std::string, std::vector<std::string>> sets;
    for (const pqxx::row& r : cols) {
      const std::string col = tx.quote_name(r[1].as<std::string>());
      sets[r[0].as<std::string>()].push_back(
          absl::StrCat(col, " = ", col, " - $1 * interval '1 microsecond'"));
    }
    for (const auto& [table, set] : sets) {
      tx.exec_params(absl::StrCat("UPDATE ", tx.quote_name(schema_.name()), ".",
                                  tx.quote_name(table), " SET ", absl::StrJoin(set, ", ")),
                     absl::ToInt64Microseconds(d));
    }
    tx.commit();
  }

  std::vector<OutboxEvent> Outbox() override {
    std::vector<OutboxEvent> out;
    absl::StatusOr<std::vector<OutboxRow>> rows = bridge_->ReadOutbox(100000);
    EXPECT_TRUE(rows.ok()) << rows.status();
    if (!rows.ok()) return out;
    for (OutboxRow& r : *rows) {
      out.push_back(
          {std::move(r.topic), std::move(r.key), std::move(r.payload), std::move(r.headers_json)});
    }
    return out;
  }

 private:
  testing::TestSchema schema_;
  std::unique_ptr<BridgeStore> bridge_;
};

PARTQ_INSTANTIATE_STORE_CONFORMANCE(Pg, (StoreKind{"PgStore",
                                                   [] { return std::make_unique<PgHarness>(); }}));

}  // namespace
}  // namespace partq::conformance
