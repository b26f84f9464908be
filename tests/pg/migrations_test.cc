// The migrations as .sql files (pg/migrations/, embedded at build time) on a
// real PostgreSQL: they make, byte for byte in pg_dump's words, the schema the
// code that assembled them in C++ made; every older version upgrades to the
// same schema a fresh one gets; `partq migrate --print` is a script psql runs
// to that schema; `partq migrate --status` and `--to` say and do what they
// claim.
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "pg/migrations.h"
#include "pg/pg_store.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"

namespace partq {
namespace {

using testing::Partq;
using testing::PartqResult;
using testing::QueryInt;
using testing::TestDsn;

// Debian's PostgreSQL 15 client programs (the suite's server is 15 too).
const std::string kBin = "/usr/lib/postgresql/15/bin/";

// An unmigrated schema name of this test's own, dropped at the end.
class Schemas {
 public:
  ~Schemas() {
    for (const std::string& s : names_) {
      testing::Query(TestDsn(), absl::StrCat("DROP SCHEMA IF EXISTS ", s, " CASCADE"));
    }
  }
  std::string New() {
    names_.push_back(absl::StrCat("mig_", absl::Uniform<uint64_t>(gen_)));
    return names_.back();
  }

 private:
  absl::BitGen gen_;
  std::vector<std::string> names_;
};

PgOptions Options(const std::string& schema) {
  PgOptions o;
  o.dsn = TestDsn();
  o.schema = schema;
  return o;
}

// pg_dump --schema-only of `schema`, without what differs between runs and
// servers (the dump's versions, its \restrict key) and with the schema's name
// as {schema}, as tests/pg/golden/ keeps it.
std::string Dump(const std::string& schema) {
  std::string out;
  EXPECT_EQ(testing::RunCommand({kBin + "pg_dump", "--dbname", TestDsn(), "--schema-only", "--no-owner",
                                 "--no-privileges", "--schema", schema},
                                &out),
            0);
  std::vector<absl::string_view> kept;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::StartsWith(line, "\\restrict") || absl::StartsWith(line, "\\unrestrict") ||
        absl::StartsWith(line, "-- Dumped from") || absl::StartsWith(line, "-- Dumped by")) {
      continue;
    }
    kept.push_back(line);
  }
  return absl::StrReplaceAll(absl::StrJoin(kept, "\n"), {{schema, "{schema}"}});
}

// The first line where two dumps differ, for a readable failure.
std::string FirstDifference(const std::string& a, const std::string& b) {
  std::vector<std::string> la = absl::StrSplit(a, '\n'), lb = absl::StrSplit(b, '\n');
  for (size_t i = 0; i < std::max(la.size(), lb.size()); ++i) {
    const std::string x = i < la.size() ? la[i] : "<end>", y = i < lb.size() ? lb[i] : "<end>";
    if (x != y) return absl::StrCat("line ", i + 1, ":\n  ", x, "\n  ", y);
  }
  return "none";
}

TEST(MigrationsTest, TheFilesMakeTheSchemaTheAssembledCodeMadeAtVersion26) {
  // schema_v26.sql is pg_dump's output of a schema migrated by the binary of
  // 0f7f01f, whose migrations were C++ strings assembled at run time.
  const std::string golden =
      testing::ReadFile(absl::StrCat(PARTQ_SOURCE_DIR, "/tests/pg/golden/schema_v26.sql"));
  ASSERT_FALSE(golden.empty());
  Schemas schemas;
  const std::string s = schemas.New();
  ASSERT_TRUE(MigratePg(Options(s), 26).ok());
  const std::string dump = Dump(s);
  EXPECT_TRUE(dump == golden) << FirstDifference(dump, golden);
}

TEST(MigrationsTest, EveryOlderVersionUpgradesToTheSchemaAFreshOneGets) {
  Schemas schemas;
  const std::string fresh = schemas.New();
  ASSERT_TRUE(MigratePg(Options(fresh), kSchemaVersion).ok());
  const std::string want = Dump(fresh);
  for (const Migration& m : Migrations()) {
    if (m.version == kSchemaVersion) break;
    SCOPED_TRACE(absl::StrCat("from version ", m.version));
    const std::string s = schemas.New();
    ASSERT_TRUE(MigratePg(Options(s), m.version).ok());
    EXPECT_EQ(QueryInt(TestDsn(), absl::StrCat("SELECT max(version) FROM ", s,
                                               ".schema_migrations")),
              m.version);
    ASSERT_TRUE(MigratePg(Options(s), kSchemaVersion).ok());
    const std::string got = Dump(s);
    EXPECT_TRUE(got == want) << FirstDifference(got, want);
  }
}

TEST(MigrationsTest, ThePrintedScriptIsWhatPsqlRunsToTheSameSchemaAndVersions) {
  Schemas schemas;
  const std::string fresh = schemas.New();
  ASSERT_TRUE(MigratePg(Options(fresh), kSchemaVersion).ok());
  const std::string s = schemas.New();
  // Half by partq, the rest by psql from the printed SQL: a DBA who takes
  // over a schema partq began.
  ASSERT_TRUE(MigratePg(Options(s), 10).ok());
  const PartqResult printed =
      Partq({"migrate", "--print", "--schema", s, "--from", "10"});
  ASSERT_EQ(printed.code, 0) << printed.err;
  std::string out;
  ASSERT_EQ(testing::RunCommand({kBin + "psql", "--dbname", TestDsn(), "-v", "ON_ERROR_STOP=1", "-q",
                                 "-f", "-"},
                                &out, {}, printed.out),
            0);
  const std::string got = Dump(s), want = Dump(fresh);
  EXPECT_TRUE(got == want) << FirstDifference(got, want);
  EXPECT_EQ(QueryInt(TestDsn(), absl::StrCat("SELECT count(*) FROM ", s,
                                             ".schema_migrations")),
            static_cast<int64_t>(Migrations().size()));
  // partq takes it from there: nothing left to do, and it says so.
  const PartqResult status = Partq({"migrate", "--status", "--dsn", TestDsn(), "--schema", s});
  ASSERT_EQ(status.code, 0) << status.err;
  EXPECT_TRUE(absl::StrContains(status.out, absl::StrCat(Migrations().size(), " of ",
                                                         Migrations().size(), " applied")))
      << status.out;
}

TEST(MigrationsTest, StatusListsAppliedAndPendingAndToStopsThere) {
  Schemas schemas;
  const std::string s = schemas.New();
  PartqResult r = Partq({"migrate", "--dsn", TestDsn(), "--schema", s, "--to", "12"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, absl::StrCat("schema \"", s, "\" is at version 12\n"));
  // A lower --to changes nothing, and says where the schema is.
  r = Partq({"migrate", "--dsn", TestDsn(), "--schema", s, "--to", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            absl::StrCat("schema \"", s, "\" is at version 12 (--to 3: migrations only go up)\n"));
  // --print takes the schema from PARTQ_SCHEMA, as every command does.
  std::string script;
  ASSERT_EQ(testing::RunCommand(
                {testing::PartqBinary(), "migrate", "--print", "--from", "12", "--to", "13"},
                &script, {{"PARTQ_SCHEMA", s}}),
            0)
      << script;
  EXPECT_TRUE(absl::StartsWith(script, absl::StrCat("-- partq schema \"", s, "\"")))
      << script.substr(0, 200);
  // Nothing pending: a comment, exit 0, so a script that prints what is
  // pending need not check first; a --from past --to is refused.
  r = Partq({"migrate", "--print", "--schema", s, "--from", "12", "--to", "12"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            absl::StrCat("-- partq schema \"", s, "\": at version 12, nothing to migrate.\n"));
  r = Partq({"migrate", "--print", "--schema", s, "--from", "13", "--to", "12"});
  EXPECT_EQ(r.code, 2) << r.out;
  r = Partq({"migrate", "--status", "--dsn", TestDsn(), "--schema", s});
  ASSERT_EQ(r.code, 0) << r.err;
  size_t applied = 0, pending = 0;
  for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
    if (absl::StrContains(line, " UTC  ")) ++applied;
    if (absl::StrContains(line, " pending ")) ++pending;
  }
  EXPECT_EQ(applied, 12u) << r.out;
  EXPECT_EQ(pending, Migrations().size() - 12) << r.out;
  // A store of this binary refuses the older schema and says what to do.
  auto store = ConnectPg(Options(s));
  ASSERT_TRUE(store.ok());
  const absl::Status st = (*store)->CheckSchema();
  EXPECT_TRUE(absl::StrContains(st.message(), "older than this partq")) << st;
  // --to that is not a version, --from without --print: clear errors.
  r = Partq({"migrate", "--dsn", TestDsn(), "--schema", s, "--to", "999"});
  EXPECT_EQ(r.code, 2) << r.err;
  r = Partq({"migrate", "--dsn", TestDsn(), "--schema", s, "--from", "3"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "--from goes with --print only")) << r.err;
}

TEST(MigrationsTest, EachFileNamesItsVersionAndSaysWhatItDoes) {
  int last = 0;
  for (const Migration& m : Migrations()) {
    EXPECT_GT(m.version, last);
    last = m.version;
    EXPECT_TRUE(absl::StartsWith(m.file, absl::StrCat("migrations/", m.version < 1000 ? "0" : "",
                                                      m.version < 100 ? "0" : "",
                                                      m.version < 10 ? "0" : "", m.version, "_")))
        << m.file;
    EXPECT_FALSE(m.description.empty());
    // Nothing but the schema is substituted: no other placeholder may hide in a file.
    const std::string rest = absl::StrReplaceAll(m.sql, {{"{schema}", ""}, {"{schema_name}", ""}});
    EXPECT_FALSE(absl::StrContains(rest, "{schema")) << m.file;
  }
  EXPECT_EQ(last, kSchemaVersion);
}

}  // namespace
}  // namespace partq
