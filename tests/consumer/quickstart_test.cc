// The C++ example of docs/guide/cpp.md runs end to end against a real PostgreSQL.
#include "gtest/gtest.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"

namespace partq {
namespace {

TEST(Quickstart, ReadmeExampleRunsAndAcksEveryItem) {
  testing::Query(testing::TestDsn(), "DROP SCHEMA IF EXISTS partq CASCADE");
  testing::Query(testing::TestDsn(), "DROP TABLE IF EXISTS shipments");
  std::string out;
  const int rc = testing::RunCommand({QUICKSTART_BINARY, testing::TestDsn()}, &out);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out, "acked 101 items\n");
  EXPECT_EQ(testing::QueryInt(testing::TestDsn(), "SELECT count(*) FROM shipments"), 101);
}

}  // namespace
}  // namespace partq
