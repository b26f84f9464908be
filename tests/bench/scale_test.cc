// A small instance of the scale workload (bench/scale.h; issue 26) against a
// real PostgreSQL: it asserts counts, never times. Label `scale`.
#include "bench/scale.h"

#include <cmath>
#include <iostream>

#include "coordinator/heartbeat.h"
#include "gtest/gtest.h"
#include "tests/testing/pg_env.h"

namespace partq::bench {
namespace {

TEST(ScaleTest, ThirtySessionsOnFiveHundredTwelveParts) {
  testing::TestSchema schema;
  ScaleOptions o;
  o.sessions = 30;
  o.parts = 512;
  // Longer than a heartbeat interval, so each session heartbeats in it (a
  // 3 s window held none at times once the interval became 3.33 s).
  o.idle = 1.5 * DefaultHeartbeatInterval(o.session_ttl);
  absl::StatusOr<ScaleReport> r = RunScale(o, schema.Factory(), schema.dsn(), schema.name());
  ASSERT_TRUE(r.ok()) << r.status();
  // RunScale fails unless every part came to be owned and balanced, after
  // the joins and after each change.
  EXPECT_GE(r->balanced_intervals, 0);
  EXPECT_GT(r->owner_samples, 0);
  std::cout << FormatScale(*r);
  for (const ScaleMoves* m : {&r->join, &r->leave, &r->kill}) {
    EXPECT_GT(m->lower_bound, 0);
    EXPECT_GE(m->moved, m->lower_bound);
  }
  EXPECT_EQ(r->join.lower_bound, 512 / 31);
  // An idle group reads no owner row: every heartbeat finds the generation
  // it knew (unless the group did change meanwhile, e.g. a session of a
  // starved process expired; then whole reads are right).
  EXPECT_GE(r->idle_generation_moves, 0);
  EXPECT_GT(r->idle_calls_per_s.count("heartbeat"), 0u);
  if (r->idle_generation_moves == 0) EXPECT_EQ(r->idle_owner_rows, 0);
  // A rebalance reads the owner rows that changed, not every one: each join
  // reads the whole group once (its first read), the rest are changes
  // (GroupView::delta). Reading every owner row after each notice, as
  // before, came to hundreds of whole groups per join.
  const int64_t owner_rows =
      r->run_calls["heartbeat_owner_rows"] + r->run_calls["read_group_owner_rows"];
  EXPECT_LE(owner_rows, 4 * r->run_calls["join"] * o.parts) << owner_rows << " owner rows read";
  // A session whose heartbeats did not reach the database within the TTL (a
  // starved machine) was expired: its parts moved beyond the plan. It counted
  // them lost at the TTL after its last answered heartbeat was sent (Session,
  // "The lease"), but a lease thread the machine runs late can still be
  // sampled believing one. Only a run without that says what the protocol
  // does.
  if (r->rejoins > 0) {
    std::cout << "a lease lapsed (" << r->rejoins << " re-joins): no claim on moves or beliefs\n";
    return;
  }
  // Never a part believed by two live sessions, or at an epoch the database
  // did not hold, in any sample.
  EXPECT_EQ(r->double_owned, 0);
  EXPECT_EQ(r->stale_beliefs, 0);
  // Sticky moves: the lower bound, within 5 %.
  for (const ScaleMoves* m : {&r->join, &r->leave, &r->kill}) {
    EXPECT_LE(m->moved, static_cast<int64_t>(std::ceil(m->lower_bound * 1.05)));
  }
}

}  // namespace
}  // namespace partq::bench
