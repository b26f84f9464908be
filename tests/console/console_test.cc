// The console's pages and endpoints (console/console.h) driven through
// Console::Handle, over a MemStore (console_test, label unit) or a PgStore on
// a fresh schema (console_pg_test, label pg; PARTQ_CONSOLE_PG): what the
// poller reads, what the JSON says, and who may act.
#include "console/console.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "base/clock.h"
#include "coordinator/queue_collector.h"
#include "gtest/gtest.h"
#include "store/mem_store.h"
#include "tests/store/store_test_util.h"
#ifdef PARTQ_CONSOLE_PG
#include <unistd.h>

#include "absl/cleanup/cleanup.h"
#include "pg/pg_store.h"
#include "tests/testing/pg_env.h"
#include "tests/testing/process.h"
#endif

namespace partq::console {
namespace {

using nlohmann::json;
using store_testing::JoinWith;
using store_testing::MakeQueue;
using store_testing::Member;
using store_testing::Payload;

constexpr char kToken[] = "0123456789abcdef-token";
constexpr char kHost[] = "127.0.0.1:8080";

class ConsoleTest : public ::testing::Test {
 protected:
  ConsoleTest() {
#ifdef PARTQ_CONSOLE_PG
    factory_ = schema_.Factory();
#else
    db_ = std::make_unique<MemDatabase>(&clock_);
    factory_ = db_->Factory();
#endif
    store_ = *factory_();
  }

  std::unique_ptr<Console> Make(bool read_only = false, bool with_token = true) {
    ConsoleOptions o;
    o.read_only = read_only;
    if (with_token) o.token = kToken;
    o.poller.clock = &clock_;
    o.dead_cache = absl::ZeroDuration();
    return std::make_unique<Console>(factory_, o);
  }

  static HttpRequest Get(const std::string& target) {
    HttpRequest r;
    r.method = "GET";
    const size_t q = target.find('?');
    r.path = target.substr(0, q);
    if (q != std::string::npos) r.query = target.substr(q + 1);
    r.headers["host"] = kHost;
    r.headers["authorization"] = absl::StrCat("Bearer ", kToken);
    return r;
  }
  // A POST as the console's own page sends it: token, CSRF token, same origin.
  static HttpRequest Post(const Console& c, const std::string& path, const json& body) {
    HttpRequest r;
    r.method = "POST";
    r.path = path;
    r.body = body.dump();
    r.headers["host"] = kHost;
    r.headers["origin"] = absl::StrCat("http://", kHost);
    r.headers["sec-fetch-site"] = "same-origin";
    r.headers["content-type"] = "application/json";
    r.headers["x-csrf-token"] = c.csrf_token();
    r.headers["authorization"] = absl::StrCat("Bearer ", kToken);
    return r;
  }
  static json Body(const HttpResponse& r) { return json::parse(r.body); }
  // The session cookie ("partq_console=...") the login form sets.
  static std::string LoginCookie(Console& c) {
    HttpRequest login;
    login.method = "POST";
    login.path = "/login";
    login.headers["host"] = kHost;
    login.headers["origin"] = absl::StrCat("http://", kHost);
    login.body = absl::StrCat("token=", kToken, "&csrf=", c.csrf_token());
    for (const auto& [name, value] : c.Handle(login).headers) {
      if (name == "Set-Cookie") return value.substr(0, value.find(';'));
    }
    ADD_FAILURE() << "no cookie";
    return "";
  }
  // A POST as the console's page sends it: the cookie, not the bearer token.
  static HttpRequest PagePost(Console& c, const std::string& path, const json& body) {
    HttpRequest r = Post(c, path, body);
    r.headers.erase("authorization");
    r.headers["cookie"] = LoginCookie(c);
    return r;
  }

  // Items of `queue` dead-lettered with these payloads (the queue has one part).
  std::vector<int64_t> Kill(const std::string& queue, const std::vector<std::string>& payloads) {
    for (const std::string& p : payloads) EXPECT_TRUE(store_->Enqueue(queue, Payload(p)).ok());
    Member m = JoinWith(*store_, queue, store_testing::kAllParts);
    auto claimed = store_->Claim(store_testing::ClaimAll(queue, m));
    EXPECT_TRUE(claimed.ok());
    std::vector<int64_t> ids;
    for (const Item& i : *claimed) ids.push_back(i.id);
    FinishRequest req = store_testing::FinishOf(queue, m, *claimed);
    EXPECT_TRUE(store_
                    ->Finish(req,
                             [](Tx&, absl::Span<const Item> owned) {
                               std::vector<Outcome> out;
                               for (const Item& i : owned) {
                                 Outcome o;
                                 o.id = i.id;
                                 o.part = i.part;
                                 o.kind = Outcome::Kind::kDead;
                                 o.error = "boom\n<b>bad</b>";
                                 out.push_back(o);
                               }
                               return absl::StatusOr<std::vector<Outcome>>(out);
                             })
                    .ok());
    EXPECT_TRUE(store_->Leave(queue, m.join.id, m.join.incarnation).ok());
    return ids;
  }

  ManualClock clock_;
#ifdef PARTQ_CONSOLE_PG
  testing::TestSchema schema_;
#else
  std::unique_ptr<MemDatabase> db_;
#endif
  StoreFactory factory_;
  std::unique_ptr<Store> store_;
};

// A worker of several queues has a session in each: the sessions tab says
// which other queues each session's process serves (issue 52).
TEST_F(ConsoleTest, SessionsNameTheOtherQueuesTheirProcessServes) {
  MakeQueue(*store_, "q", 2);
  MakeQueue(*store_, "r", 2);
  auto console = Make();
  JoinWith(*store_, "q", store_testing::kAllParts);
  JoinWith(*store_, "r", store_testing::kAllParts);  // the same host and pid
  ASSERT_TRUE(console->poller().PollOwnersOnce().ok());
  ASSERT_TRUE(console->poller().PollStatusOnce().ok());
  json j = Body(console->Handle(Get("/api/queue?name=q")));
  ASSERT_EQ(j["sessions"].size(), 1u) << j.dump();
  EXPECT_EQ(j["sessions"][0]["also_serves"], json({"r"})) << j.dump();
}

TEST_F(ConsoleTest, PartMapShowsOwnersAndTheHandOffsTheConsoleSaw) {
  MakeQueue(*store_, "q", 4);
  auto console = Make();
  Member a = JoinWith(*store_, "q", store_testing::kAllParts);
  ASSERT_TRUE(console->poller().PollOwnersOnce().ok());
  json j = Body(console->Handle(Get("/api/queue?name=q")));
  ASSERT_EQ(j["sessions"].size(), 1u);
  EXPECT_EQ(j["sessions"][0]["id"], a.join.id.value);
  EXPECT_EQ(j["sessions"][0]["parts"], 4);
  EXPECT_EQ(j["owner"], json({0, 0, 0, 0}));
  EXPECT_TRUE(j["handoffs"].empty()) << "the first read sees no move";

  // a leaves, b takes every part: one hand-off of four parts, a -> b.
  ASSERT_TRUE(store_->Leave("q", a.join.id, a.join.incarnation).ok());
  Member b = JoinWith(*store_, "q", store_testing::kAllParts);
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(console->poller().PollOwnersOnce().ok());
  clock_.Advance(absl::Seconds(5));
  j = Body(console->Handle(Get("/api/queue?name=q")));
  ASSERT_EQ(j["handoffs"].size(), 1u) << j.dump();
  const json& h = j["handoffs"][0];
  EXPECT_EQ(h["count"], 4);
  EXPECT_EQ(h["parts"], "0-3");
  EXPECT_TRUE(absl::StrContains(h["from"].get<std::string>(), ":"))
      << "host:pid of the gone session";
  EXPECT_EQ(h["seconds_ago"], 5.0);
  ASSERT_EQ(j["sessions"].size(), 1u);
  EXPECT_EQ(j["sessions"][0]["id"], b.join.id.value);

  // Hand-offs are kept an hour.
  clock_.Advance(absl::Hours(1));
  ASSERT_TRUE(console->poller().PollOwnersOnce().ok());
  EXPECT_TRUE(Body(console->Handle(Get("/api/queue?name=q")))["handoffs"].empty());
}

// A worker that dies keeps its session row (and its parts, and the items it
// had claimed) until a live member's heartbeat deletes it: past its TTL the
// console counts it as `partq status` does (SumUp), even when its last read
// is older than the expiry.
TEST_F(ConsoleTest, ASessionPastItsTtlShowsAsExpiredAndItsPartsWithoutALiveOwner) {
  MakeQueue(*store_, "q", 4, absl::Seconds(10));
  auto console = Make();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store_->Enqueue("q", Payload("x")).ok());
  Member a = JoinWith(*store_, "q", store_testing::kAllParts);
  ASSERT_OK_AND_ASSIGN(std::vector<Item> claimed, store_->Claim(store_testing::ClaimAll("q", a)));
  ASSERT_EQ(claimed.size(), 3u);
  ASSERT_TRUE(console->poller().PollOwnersOnce().ok());
  ASSERT_TRUE(console->poller().PollStatusOnce().ok());
  json q = Body(console->Handle(Get("/api/queues")))["queues"][0];
  EXPECT_EQ(q["sessions"], 1);
  EXPECT_EQ(q["expired_sessions"], 0);
  EXPECT_EQ(q["unowned_parts"], 0);
  EXPECT_EQ(q["in_flight"], 3);
  EXPECT_EQ(q["in_flight_unowned"], 0);

  // The worker dies: nothing heartbeats. (Over PostgreSQL its clock does not
  // move: the reads above are what says it expired since.)
  clock_.Advance(absl::Seconds(11));
  q = Body(console->Handle(Get("/api/queues")))["queues"][0];
  EXPECT_EQ(q["sessions"], 0);
  EXPECT_EQ(q["expired_sessions"], 1);
  EXPECT_EQ(q["unowned_parts"], 4);
  EXPECT_EQ(q["in_flight"], 3) << "the database still has them claimed";
  EXPECT_EQ(q["in_flight_unowned"], 3);
  json p = Body(console->Handle(Get("/api/queue?name=q")));
  ASSERT_EQ(p["sessions"].size(), 1u);
  EXPECT_EQ(p["sessions"][0]["id"], a.join.id.value);
  EXPECT_EQ(p["sessions"][0]["expired"], true);
  EXPECT_LT(p["sessions"][0]["expires_in_seconds"].get<double>(), 0);
  EXPECT_EQ(p["live_sessions"], 0);
  EXPECT_EQ(p["unowned_parts"], 4);
  EXPECT_EQ(p["totals"]["in_flight_unowned"], 3);
#ifndef PARTQ_CONSOLE_PG
  // Read again, the store says the same, and so does `partq status`'s sum.
  ASSERT_TRUE(console->poller().PollOwnersOnce().ok());
  ASSERT_TRUE(console->poller().PollStatusOnce().ok());
  q = Body(console->Handle(Get("/api/queues")))["queues"][0];
  ASSERT_OK_AND_ASSIGN(QueueStatus st, store_->Status("q"));
  const QueueTotals t = SumUp(st);
  EXPECT_EQ(q["sessions"], t.live_sessions);
  EXPECT_EQ(q["expired_sessions"], t.expired_sessions);
  EXPECT_EQ(q["unowned_parts"], t.unowned_parts);
  EXPECT_EQ(q["in_flight"], t.in_flight);
  EXPECT_EQ(q["in_flight_unowned"], t.in_flight_unowned);
  EXPECT_EQ(t.unowned_parts, 4);
#endif
}

TEST_F(ConsoleTest, QueuesShowCountsFromTheStatusReadAndTheBacklogRate) {
  MakeQueue(*store_, "q", 2);
  auto console = Make();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store_->Enqueue("q", Payload("x")).ok());
  ASSERT_TRUE(console->poller().PollOwnersOnce().ok());
  ASSERT_TRUE(console->poller().PollStatusOnce().ok());
  json j = Body(console->Handle(Get("/api/queues")));
  ASSERT_EQ(j["queues"].size(), 1u);
  EXPECT_EQ(j["queues"][0]["ready"], 3);
  EXPECT_EQ(j["queues"][0]["unowned_parts"], 2);
  EXPECT_TRUE(j["queues"][0]["backlog_per_second_1m"].is_null()) << "one sample is no rate";
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(store_->Enqueue("q", Payload("x")).ok());
  clock_.Advance(absl::Seconds(30));
  ASSERT_TRUE(console->poller().PollStatusOnce().ok());
  j = Body(console->Handle(Get("/api/queues")));
  EXPECT_EQ(j["queues"][0]["ready"], 9);
  EXPECT_DOUBLE_EQ(j["queues"][0]["backlog_per_second_1m"].get<double>(), 6.0 / 30);
  // The per-part counts reach the part map.
  json q = Body(console->Handle(Get("/api/queue?name=q")));
  EXPECT_EQ(q["ready"][0].get<int>() + q["ready"][1].get<int>(), 9);
  EXPECT_EQ(q["totals"]["ready"], 9);
}

// Acks are counted nowhere in the database but in what the workers'
// heartbeats report (Store::Heartbeat's `finished`): the queues page shows
// their rates, the queue page their minutes.
TEST_F(ConsoleTest, QueuesShowTheThroughputTheHeartbeatsReported) {
  MakeQueue(*store_, "q", 2);
  auto console = Make();
  Member a = JoinWith(*store_, "q", store_testing::kAllParts);
  const FinishCounts finished{120, 6, 3};
  clock_.Advance(absl::Seconds(20));  // its first heartbeat, a third of the TTL after the join
  ASSERT_OK(store_->Heartbeat("q", a.join.id, a.join.incarnation, finished));
  ASSERT_TRUE(console->poller().PollOwnersOnce().ok());
  ASSERT_TRUE(console->poller().PollStatusOnce().ok());
  const json q = Body(console->Handle(Get("/api/queues")))["queues"][0];
  // Over the interval the heartbeat covered (over PostgreSQL, whose clock
  // hardly moved, the interval all the same: a first heartbeat covers one).
  EXPECT_DOUBLE_EQ(q["acked_per_second_1m"].get<double>(), 120 / 20.0);
  EXPECT_DOUBLE_EQ(q["failed_per_second_1m"].get<double>(), 6 / 20.0);
  EXPECT_DOUBLE_EQ(q["dead_lettered_per_second_1m"].get<double>(), 3 / 20.0);
  const json t = Body(console->Handle(Get("/api/queue?name=q")))["throughput"];
  ASSERT_EQ(t["minutes"].size(), 30u);
  FinishCounts sum;
  for (const json& m : t["minutes"]) {
    sum = sum + FinishCounts{m["acked"].get<int64_t>(), m["retried"].get<int64_t>(),
                             m["dead"].get<int64_t>()};
  }
  EXPECT_EQ(sum, finished);
  EXPECT_EQ(t["acked_per_second"], q["acked_per_second_1m"]);
}

#ifndef PARTQ_CONSOLE_PG
// Issue 49: "acked/s over the last minute" said 46.5/s at a real 167/s, and
// 134.5/s 36 s after the queue had emptied. A worker heartbeating every 7 s
// (a 21 s TTL), each heartbeat carrying what it finished at 167 items a
// second: the queues page says 167/s within 10 % wherever the minutes fall
// and whenever it reads; after the work stops it falls, to 0 within two
// minutes and a heartbeat.
TEST_F(ConsoleTest, AckedPerSecondIsTheRateTheWorkersFinishAt) {
  MakeQueue(*store_, "q", 2, absl::Seconds(21));
  auto console = Make();
  clock_.Advance(absl::Seconds(5));
  Member a = JoinWith(*store_, "q", store_testing::kAllParts);
  double done = 0;
  int64_t sent = 0;
  // The next heartbeat, 7 s after the last, reporting `rate` a second.
  auto beat = [&](double rate, absl::Duration already = absl::ZeroDuration()) {
    clock_.Advance(absl::Seconds(7) - already);
    done += rate * 7;
    const int64_t now = static_cast<int64_t>(done);
    ASSERT_OK(store_->Heartbeat("q", a.join.id, a.join.incarnation, FinishCounts{now - sent, 0, 0}));
    sent = now;
  };
  auto acked = [&] {
    EXPECT_TRUE(console->poller().PollOwnersOnce().ok());
    EXPECT_TRUE(console->poller().PollStatusOnce().ok());
    return Body(console->Handle(Get("/api/queues")))["queues"][0]["acked_per_second_1m"]
        .get<double>();
  };
  for (int i = 0; i < 9; ++i) beat(167);  // its first minute
  for (int i = 0; i < 30; ++i) {
    beat(167, i == 0 ? absl::ZeroDuration() : absl::Seconds(3));
    EXPECT_NEAR(acked(), 167, 16.7) << "at a heartbeat, " << i;
    clock_.Advance(absl::Seconds(3));
    EXPECT_NEAR(acked(), 167, 16.7) << "3 s after one, " << i;
  }
  // The work stops: what is left of it in the minute, then nothing.
  beat(0, absl::Seconds(3));
  const absl::Time stopped = clock_.Now() - absl::Seconds(7);
  double before = acked();
  while (clock_.Now() - stopped < absl::Minutes(2) + absl::Seconds(7)) {
    beat(0);
    const double now = acked();
    EXPECT_LE(now, before * 1.001);
    before = now;
  }
  EXPECT_EQ(acked(), 0);
  const json t = Body(console->Handle(Get("/api/queue?name=q")))["throughput"];
  EXPECT_EQ(t["acked_per_second"], 0);
  // A worker that left counts nothing, even within its minute.
  for (int i = 0; i < 9; ++i) beat(167);
  ASSERT_GT(acked(), 0);
  ASSERT_OK(store_->Leave("q", a.join.id, a.join.incarnation));
  EXPECT_EQ(acked(), 0);
}
#endif

TEST_F(ConsoleTest, SchedulesAreListedEscapedAndDeletedByAnAction) {
  MakeQueue(*store_, "q", 1);
  MakeQueue(*store_, "other", 1);
  ScheduleSpec s;
  s.name = "tick";
  s.queue = "q";
  s.every = absl::Minutes(1);
  s.payload = "<b>\x01";
  ASSERT_OK(store_->AddSchedule(s));
  s.name = "nightly";
  s.every = absl::ZeroDuration();
  s.cron = "0 3 * * *";
  s.time_zone = "Europe/Berlin";
  s.queue = "other";
  ASSERT_OK(store_->AddSchedule(s));
  auto console = Make();
  HttpResponse r = console->Handle(Get("/api/schedules?name=q"));
  ASSERT_EQ(r.code, 200) << r.body;
  json j = Body(r);
  ASSERT_EQ(j["schedules"].size(), 1u) << j.dump();
  const json& tick = j["schedules"][0];
  EXPECT_EQ(tick["name"], "tick");
  EXPECT_EQ(tick["cadence"], "every 1m");
  EXPECT_EQ(tick["time_zone"], "UTC");
  EXPECT_FALSE(tick["next_tick"].is_null());
  EXPECT_TRUE(tick["last_tick"].is_null());
  EXPECT_EQ(tick["fired"], 0);
  EXPECT_EQ(tick["payload"], "<b>\\x01");
  j = Body(console->Handle(Get("/api/schedules?name=other")));
  EXPECT_EQ(j["schedules"][0]["cadence"], "cron 0 3 * * *");
  EXPECT_EQ(j["schedules"][0]["time_zone"], "Europe/Berlin");

  // Another queue's schedule is not deleted through this queue's page.
  r = console->Handle(
      Post(*console, "/api/schedule/delete", {{"queue", "q"}, {"schedule", "nightly"}}));
  EXPECT_EQ(r.code, 404) << r.body;
  EXPECT_EQ(console->Handle(Post(*console, "/api/schedule/delete", {{"queue", "q"}})).code, 400);
  r = console->Handle(
      Post(*console, "/api/schedule/delete", {{"queue", "q"}, {"schedule", "tick"}}));
  ASSERT_EQ(r.code, 200) << r.body;
  ASSERT_OK_AND_ASSIGN(std::vector<Schedule> left, store_->ListSchedules(""));
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].spec.name, "nightly");
  EXPECT_EQ(Body(console->Handle(Get("/api/schedules?name=q")))["schedules"].size(), 0u);
  EXPECT_EQ(console->Handle(Get("/api/schedules?name=bad%20name")).code, 400);
}

#ifdef PARTQ_CONSOLE_PG
TEST_F(ConsoleTest, GroupsAreListed) {
  MakeQueue(*store_, "q", 1);
  NewItem item = Payload("x");
  item.group = "batch-7";
  ASSERT_OK(store_->Enqueue("q", item));
  auto console = Make();
  HttpResponse r = console->Handle(Get("/api/groups?name=q"));
  ASSERT_EQ(r.code, 200) << r.body;
  const json j = Body(r);
  ASSERT_EQ(j["groups"].size(), 1u) << j.dump();
  EXPECT_EQ(j["groups"][0]["id"], "batch-7");
  EXPECT_EQ(j["groups"][0]["pending"], 1);
  EXPECT_TRUE(j["groups"][0]["started_at"].is_null());
}

// Issue 48: the console may log in as a role granted `viewer` on some
// queues (migration 35). It shows their counts, owners, dead items,
// schedules and groups, no other queue, and no payload until the schema's
// owner grants that column.
TEST_F(ConsoleTest, AsAViewerRoleItShowsItsQueuesAndNoPayloadOrOtherQueue) {
  MakeQueue(*store_, "v", 1, absl::Seconds(60), false, /*max_attempts=*/1);
  MakeQueue(*store_, "hidden", 1, absl::Seconds(60), false, /*max_attempts=*/1);
  Kill("v", {"v's secret"});
  Kill("hidden", {"hidden's secret"});
  ScheduleSpec s;
  s.name = "tick";
  s.queue = "v";
  s.every = absl::Hours(1);
  s.payload = "tick's secret";
  ASSERT_OK(store_->AddSchedule(s));
  const std::string role = absl::StrCat("partq_console_viewer_", getpid());
  schema_.Q(absl::StrCat("CREATE ROLE ", role, " LOGIN"));
  absl::Cleanup drop = [&] {
    schema_.Q(absl::StrCat("DROP OWNED BY ", role));
    schema_.Q(absl::StrCat("DROP ROLE ", role));
  };
  const testing::PartqResult granted =
      testing::Partq({"grant", "viewer", role, "--queue", "v", "--dsn", schema_.dsn(), "--schema",
                      schema_.name()});
  ASSERT_EQ(granted.code, 0) << granted.err;
  PgOptions as_viewer = schema_.options();
  as_viewer.dsn = absl::StrCat(as_viewer.dsn, " user=", role);
  ConsoleOptions o;
  o.read_only = true;
  o.token = kToken;
  o.poller.clock = &clock_;
  o.dead_cache = absl::ZeroDuration();
  Console console([as_viewer] { return ConnectPg(as_viewer); }, o);
  ASSERT_OK(console.poller().PollOwnersOnce());
  ASSERT_OK(console.poller().PollStatusOnce());
  const json queues = Body(console.Handle(Get("/api/queues")))["queues"];
  ASSERT_EQ(queues.size(), 1u) << queues.dump();
  EXPECT_EQ(queues[0]["name"], "v");
  EXPECT_EQ(queues[0]["dead"], 1);
  HttpResponse r = console.Handle(Get("/api/dead?name=v"));
  ASSERT_EQ(r.code, 200) << r.body;
  json dead = Body(r)["items"];
  ASSERT_EQ(dead.size(), 1u) << r.body;
  EXPECT_EQ(dead[0]["error"], "boom\\x0a<b>bad</b>");
  EXPECT_TRUE(dead[0]["payload"].is_null()) << r.body;
  EXPECT_EQ(dead[0]["payload_runs"],
            json::parse(R"j([["m", "(hidden: this console's role may not read payloads)"]])j"));
  EXPECT_FALSE(absl::StrContains(r.body, "secret")) << r.body;
  r = console.Handle(Get("/api/schedules?name=v"));
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(Body(r)["schedules"].size(), 1u) << r.body;
  EXPECT_FALSE(absl::StrContains(r.body, "secret")) << r.body;
  EXPECT_EQ(console.Handle(Get("/api/groups?name=v")).code, 200);
  r = console.Handle(Get("/api/dead?name=hidden"));
  EXPECT_EQ(r.code, 404) << r.body << ": the other queue does not exist for the viewer";
  EXPECT_FALSE(absl::StrContains(r.body, "secret")) << r.body;
  // Its groups are refused by the SQL API (list_groups(), migration 46):
  // an answer, not a broken connection; the next request is served.
  r = console.Handle(Get("/api/groups?name=hidden"));
  EXPECT_EQ(r.code, 403) << r.body;
  EXPECT_EQ(console.Handle(Get("/api/groups?name=v")).code, 200);
  // The owner lets it read dead items' payloads (of its queues' rows only).
  schema_.Q(absl::StrCat("GRANT SELECT (payload) ON {schema}.dead_items TO ", role));
  dead = Body(console.Handle(Get("/api/dead?name=v")))["items"];
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0]["payload"], "v's secret");
}
#else
TEST_F(ConsoleTest, TheGroupsPageSaysWhenTheStoreKeepsNone) {
  MakeQueue(*store_, "q", 1);
  auto console = Make();
  HttpResponse r = console->Handle(Get("/api/groups?name=q"));
  EXPECT_EQ(r.code, 501);
  EXPECT_TRUE(absl::StrContains(Body(r)["error"].get<std::string>(), "groups")) << r.body;
}
#endif

TEST_F(ConsoleTest, DeadItemsShowEscapedAndAreRequeuedAndDeletedByActions) {
  MakeQueue(*store_, "d", 1, absl::Seconds(60), false, /*max_attempts=*/1);
  auto console = Make();
  const std::string evil = std::string("\x00<script>alert(1)</script>\xff\\", 28);
  std::vector<int64_t> ids = Kill("d", {evil, "plain", "third"});
  ASSERT_EQ(ids.size(), 3u);
  HttpResponse r = console->Handle(Get("/api/dead?name=d"));
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  json j = Body(r);
  ASSERT_EQ(j["items"].size(), 3u);
  std::map<int64_t, json> by_id;
  for (const json& d : j["items"]) by_id[d["id"].get<int64_t>()] = d;
  // Bytes that are not printable text are escaped, a backslash too; the
  // markup stays text for the page to set as text.
  EXPECT_EQ(by_id[ids[0]]["payload"], "\\x00<script>alert(1)</script>\\xff\\\\");
  // The page shows the runs: the text as it is (one backslash is one), the
  // escaped bytes apart.
  EXPECT_EQ(by_id[ids[0]]["payload_runs"],
            json::parse(R"([["x", "\\x00"], ["t", "<script>alert(1)</script>"], ["x", "\\xff"],
                            ["t", "\\"]])"));
  EXPECT_EQ(by_id[ids[0]]["error"], "boom\\x0a<b>bad</b>");
  // The queue list's dead/s is the database's count of the last minute.
  ASSERT_TRUE(console->poller().PollOwnersOnce().ok());
  ASSERT_TRUE(console->poller().PollStatusOnce().ok());
  EXPECT_DOUBLE_EQ(Body(console->Handle(Get("/api/queues")))["queues"][0]["dead_per_second_1m"],
                   3 / 60.0);

  r = console->Handle(Post(*console, "/api/dead/requeue", {{"queue", "d"}, {"ids", {ids[1]}}}));
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(Body(r)["requeued"], 1);
  ASSERT_OK_AND_ASSIGN(ItemState st, store_->GetItemState("d", ids[1]));
  EXPECT_EQ(st.kind, ItemState::Kind::kPending);

  r = console->Handle(Post(*console, "/api/dead/delete", {{"queue", "d"}, {"ids", {ids[2]}}}));
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(Body(r)["deleted"], 1);
  ASSERT_OK_AND_ASSIGN(std::vector<DeadItem> dead, store_->ListDead("d", 10));
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].id, ids[0]);

  // "All" must be said: no ids and no "all" is refused.
  r = console->Handle(Post(*console, "/api/dead/delete", {{"queue", "d"}}));
  EXPECT_EQ(r.code, 400);
  r = console->Handle(Post(*console, "/api/dead/delete", {{"queue", "d"}, {"all", true}}));
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(Body(r)["deleted"], 1);
  EXPECT_EQ(
      console->Handle(Post(*console, "/api/dead/delete", {{"queue", "nope"}, {"all", true}})).code,
      404);
}

TEST_F(ConsoleTest, PauseAndResumeAreActions) {
  MakeQueue(*store_, "q", 1);
  auto console = Make();
  ASSERT_EQ(console->Handle(Post(*console, "/api/pause", {{"queue", "q"}})).code, 200);
  ASSERT_OK_AND_ASSIGN(QueueConfig q, store_->GetQueue("q"));
  EXPECT_TRUE(q.paused);
  ASSERT_EQ(console->Handle(Post(*console, "/api/resume", {{"queue", "q"}})).code, 200);
  ASSERT_OK_AND_ASSIGN(q, store_->GetQueue("q"));
  EXPECT_FALSE(q.paused);
}

// --- who may do what ----------------------------------------------------------------

TEST_F(ConsoleTest, AnActionWithoutTheTokenIsRefused) {
  MakeQueue(*store_, "q", 1);
  auto console = Make();
  HttpRequest r = Post(*console, "/api/pause", {{"queue", "q"}});
  r.headers.erase("authorization");
  EXPECT_EQ(console->Handle(r).code, 401);
  r.headers["authorization"] = "Bearer wrong-token-0123456";
  EXPECT_EQ(console->Handle(r).code, 401);
  r.headers["cookie"] = "partq_console=made-up";
  EXPECT_EQ(console->Handle(r).code, 401);
  ASSERT_OK_AND_ASSIGN(QueueConfig q, store_->GetQueue("q"));
  EXPECT_FALSE(q.paused);
}

TEST_F(ConsoleTest, AnActionWithoutTheCsrfTokenOrFromAnotherSiteIsRefused) {
  MakeQueue(*store_, "q", 1);
  auto console = Make();
  // The cookie goes with any site's request: it needs the page's CSRF token.
  HttpRequest r = PagePost(*console, "/api/pause", {{"queue", "q"}});
  r.headers.erase("x-csrf-token");
  EXPECT_EQ(console->Handle(r).code, 403);
  r = PagePost(*console, "/api/pause", {{"queue", "q"}});
  r.headers["x-csrf-token"] = std::string(64, '0');
  EXPECT_EQ(console->Handle(r).code, 403);
  for (bool bearer : {false, true}) {
    r = bearer ? Post(*console, "/api/pause", {{"queue", "q"}})
               : PagePost(*console, "/api/pause", {{"queue", "q"}});
    r.headers["origin"] = "http://evil.example";
    EXPECT_EQ(console->Handle(r).code, 403) << bearer;
    r = bearer ? Post(*console, "/api/pause", {{"queue", "q"}})
               : PagePost(*console, "/api/pause", {{"queue", "q"}});
    r.headers["sec-fetch-site"] = "cross-site";
    EXPECT_EQ(console->Handle(r).code, 403) << bearer;
  }
  r = Post(*console, "/api/pause", {{"queue", "q"}});
  r.headers["content-type"] = "application/x-www-form-urlencoded";
  EXPECT_EQ(console->Handle(r).code, 415);
  r = Post(*console, "/api/pause", {{"queue", "q"}});
  r.method = "GET";
  EXPECT_EQ(console->Handle(r).code, 404) << "actions are POSTs only";
  ASSERT_OK_AND_ASSIGN(QueueConfig q, store_->GetQueue("q"));
  EXPECT_FALSE(q.paused);
}

// A script sends the token as `Authorization: Bearer`: no other site's page
// can make a browser send that header, so it needs no CSRF token (issue 49:
// it did, and nothing said where to get one).
TEST_F(ConsoleTest, AScriptWithTheBearerTokenNeedsNoCsrfToken) {
  MakeQueue(*store_, "q", 1);
  auto console = Make();
  HttpRequest r;
  r.method = "POST";
  r.path = "/api/pause";
  r.body = R"({"queue": "q"})";
  r.headers["host"] = kHost;
  r.headers["content-type"] = "application/json";
  r.headers["authorization"] = "Bearer wrong-token-0123456";
  EXPECT_EQ(console->Handle(r).code, 401);
  r.headers["authorization"] = absl::StrCat("Bearer ", kToken);
  const HttpResponse ok = console->Handle(r);
  EXPECT_EQ(ok.code, 200) << ok.body;
  ASSERT_OK_AND_ASSIGN(QueueConfig q, store_->GetQueue("q"));
  EXPECT_TRUE(q.paused);
}

TEST_F(ConsoleTest, ReadOnlyAndTokenlessConsolesRefuseEveryAction) {
  MakeQueue(*store_, "q", 1);
  for (bool read_only : {true, false}) {
    auto console = Make(read_only, /*with_token=*/read_only);
    EXPECT_FALSE(console->actions());
    for (const char* path :
         {"/api/pause", "/api/resume", "/api/dead/requeue", "/api/dead/delete"}) {
      HttpResponse r = console->Handle(Post(*console, path, {{"queue", "q"}, {"all", true}}));
      EXPECT_EQ(r.code, 403) << path << " " << r.body;
    }
    ASSERT_TRUE(console->poller().PollOwnersOnce().ok());
    EXPECT_EQ(console->Handle(Get("/api/queues")).code, 200) << "reading is allowed";
    EXPECT_TRUE(absl::StrContains(console->Handle(Get("/")).body,
                                  read_only ? "\"read-only\"" : "\"no-token\""));
  }
  ASSERT_OK_AND_ASSIGN(QueueConfig q, store_->GetQueue("q"));
  EXPECT_FALSE(q.paused);
}

TEST_F(ConsoleTest, WithATokenPagesNeedTheLoginAndTheLoginNeedsTheCsrfToken) {
  MakeQueue(*store_, "q", 1);
  auto console = Make();
  HttpRequest get = Get("/api/queues");
  get.headers.erase("authorization");
  EXPECT_EQ(console->Handle(get).code, 401);
  get.path = "/";
  HttpResponse page = console->Handle(get);
  EXPECT_TRUE(absl::StrContains(page.body, "name=\"token\"")) << "the login form";
  EXPECT_FALSE(absl::StrContains(page.body, "partq-mode")) << "not the console";
  // Static files need no login and hold no secret.
  get.path = "/app.js";
  EXPECT_EQ(console->Handle(get).code, 200);

  HttpRequest login;
  login.method = "POST";
  login.path = "/login";
  login.headers["host"] = kHost;
  login.headers["origin"] = absl::StrCat("http://", kHost);
  login.body = absl::StrCat("token=wrong-token-0123456&csrf=", console->csrf_token());
  EXPECT_EQ(console->Handle(login).code, 401);
  login.body = absl::StrCat("token=", kToken);  // no CSRF token
  EXPECT_EQ(console->Handle(login).code, 403);
  login.body = absl::StrCat("token=", kToken, "&csrf=", console->csrf_token());
  HttpResponse r = console->Handle(login);
  ASSERT_EQ(r.code, 303);
  std::string set_cookie;
  for (const auto& [name, value] : r.headers) {
    if (name == "Set-Cookie") set_cookie = value;
  }
  const std::string cookie = set_cookie.substr(0, set_cookie.find(';'));
  ASSERT_TRUE(absl::StartsWith(cookie, "partq_console=")) << set_cookie;
  EXPECT_TRUE(absl::StrContains(set_cookie, "HttpOnly")) << "no script reads it";
  EXPECT_TRUE(absl::StrContains(set_cookie, "SameSite=Strict")) << "no other site sends it";
  get.path = "/api/queues";
  get.headers["cookie"] = absl::StrCat("other=1; ", cookie);
  ASSERT_TRUE(console->poller().PollOwnersOnce().ok());
  EXPECT_EQ(console->Handle(get).code, 200);
  // The cookie and the page's CSRF token make an action.
  HttpRequest act = Post(*console, "/api/pause", {{"queue", "q"}});
  act.headers.erase("authorization");
  act.headers["cookie"] = cookie;
  EXPECT_EQ(console->Handle(act).code, 200);
}

// DNS rebinding (issue 48): a page of another site points its name at the
// console's address; the browser then sends that name as Host. A console
// without a token answers only its own names.
TEST_F(ConsoleTest, WithoutATokenOnlyItsOwnNamesAreAnswered) {
  MakeQueue(*store_, "q", 1);
  auto make = [&](bool token, std::string listen, std::vector<std::string> allowed) {
    ConsoleOptions o;
    if (token) o.token = kToken;
    o.listen_host = std::move(listen);
    o.allowed_hosts = std::move(allowed);
    o.poller.clock = &clock_;
    return std::make_unique<Console>(factory_, o);
  };
  auto code = [](Console& c, const std::string& host) {
    HttpRequest r = Get("/api/dead?name=q");
    r.headers["host"] = host;
    return c.Handle(r).code;
  };
  auto loopback = make(false, "127.0.0.1", {});
  for (const char* ok : {"127.0.0.1:8080", "localhost:8080", "LOCALHOST", "localhost.", "[::1]:8080",
                         "127.0.0.2:8080"}) {
    EXPECT_EQ(code(*loopback, ok), 200) << ok;
  }
  for (const char* bad : {"rebind.example:8080", "127.0.0.1.nip.io:8080", "localhost.evil.com",
                          "10.0.0.5:8080", "evil.localhost:8080", ""}) {
    EXPECT_EQ(code(*loopback, bad), 421) << bad;
  }
  HttpRequest r = Get("/");
  r.headers["host"] = "rebind.example:8080";
  const HttpResponse refused = loopback->Handle(r);
  EXPECT_EQ(refused.code, 421);
  EXPECT_TRUE(absl::StrContains(refused.body, "--allowed-host")) << refused.body;
  EXPECT_FALSE(absl::StrContains(refused.body, "partq-csrf")) << "nothing of the page";
  bool csp = false;
  for (const auto& [name, value] : refused.headers) csp = csp || name == "Content-Security-Policy";
  EXPECT_TRUE(csp);
  // Names the operator gives are answered.
  auto named = make(false, "localhost", {"partq.internal", "console.example.com"});
  EXPECT_EQ(code(*named, "console.example.com:8080"), 200);
  EXPECT_EQ(code(*named, "Partq.Internal"), 200);
  EXPECT_EQ(code(*named, "localhost:8080"), 200);
  EXPECT_EQ(code(*named, "rebind.example"), 421);
  // With a token any name is answered (a rebinding page has no token), unless
  // names are given; on every interface any address is one of its names.
  EXPECT_EQ(code(*make(true, "0.0.0.0", {}), "rebind.example"), 200);
  auto strict = make(true, "0.0.0.0", {"partq.internal"});
  EXPECT_EQ(code(*strict, "rebind.example"), 421);
  EXPECT_EQ(code(*strict, "10.1.2.3:8080"), 200);
  EXPECT_EQ(code(*strict, "[fd00::5]:8080"), 200);
  EXPECT_EQ(code(*strict, "partq.internal:443"), 200);
}

// Issue 48: 23,173 wrong guesses in 5 s, each a warning line. Past a few
// wrong tokens an address waits, twice as long after each (429, even with
// the right token, which is not compared then), other addresses do not;
// a wrong bearer token counts as one; a warning line a minute at most.
TEST_F(ConsoleTest, WrongTokensAreThrottledPerAddressAndLoggedOnceAMinute) {
  MakeQueue(*store_, "q", 1);
  auto console = Make();
  auto login = [&](const std::string& addr, const std::string& token) {
    HttpRequest r;
    r.method = "POST";
    r.path = "/login";
    r.remote_addr = addr;
    r.headers["host"] = kHost;
    r.headers["origin"] = absl::StrCat("http://", kHost);
    r.body = absl::StrCat("token=", token, "&csrf=", console->csrf_token());
    return console->Handle(r);
  };
  auto retry_after = [](const HttpResponse& r) {
    for (const auto& [name, value] : r.headers) {
      if (name == "Retry-After") return value;
    }
    return std::string();
  };
  const std::string wrong = "wrong-token-0123456";
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(login("10.0.0.1", wrong).code, 401) << i;
  HttpResponse r = login("10.0.0.1", wrong);
  EXPECT_EQ(r.code, 429);
  EXPECT_EQ(retry_after(r), "1");
  EXPECT_TRUE(absl::StrContains(r.body, "try again in 1 s")) << r.body;
  EXPECT_EQ(login("10.0.0.1", kToken).code, 429) << "not even compared while it waits";
  EXPECT_EQ(login("10.0.0.2", kToken).code, 303) << "another address logs in";
  clock_.Advance(absl::Seconds(1));
  r = login("10.0.0.1", wrong);
  EXPECT_EQ(r.code, 429);
  EXPECT_EQ(retry_after(r), "2") << "twice as long";
  // A wrong bearer token is a guess too.
  clock_.Advance(absl::Seconds(2));
  HttpRequest api = Get("/api/queues");
  api.remote_addr = "10.0.0.1";
  api.headers["authorization"] = absl::StrCat("Bearer ", wrong);
  r = console->Handle(api);
  EXPECT_EQ(r.code, 429);
  EXPECT_EQ(retry_after(r), "4");
  api.headers["authorization"] = absl::StrCat("Bearer ", kToken);
  EXPECT_EQ(console->Handle(api).code, 429) << "the right one waits too";
  clock_.Advance(absl::Seconds(4));
  EXPECT_EQ(login("10.0.0.1", kToken).code, 303);
  EXPECT_EQ(login("10.0.0.1", wrong).code, 401) << "a login starts the count again";
  // The waits stop growing at login_max_wait.
  for (int i = 0; i < 40; ++i) {
    clock_.Advance(absl::Hours(1) - absl::Seconds(1));
    r = login("10.0.0.3", wrong);
  }
  EXPECT_EQ(retry_after(r), "900");
  const std::string log = ::testing::internal::GetCapturedStderr();
  const int64_t lines = std::count(log.begin(), log.end(), '\n');
  EXPECT_GE(lines, 2) << log;
  EXPECT_LE(lines, 43) << "a line a minute at most, not one per guess: " << log;
  EXPECT_TRUE(absl::StrContains(log, "with a wrong token refused")) << log;
}

// Guesses sent at once from one address are heard one at a time: only the
// free ones are compared, however many threads the server runs them on
// (checking the wait and counting the guess were two steps, and a burst
// passed the check together).
TEST_F(ConsoleTest, GuessesSentAtOnceAreCountedOneAtATime) {
  MakeQueue(*store_, "q", 1);
  auto console = Make();
  constexpr int kThreads = 32;
  std::atomic<int> refused{0}, heard{0};
  absl::Notification go;
  std::vector<std::thread> threads;
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      HttpRequest api = Get("/api/queues");
      api.remote_addr = "10.0.0.9";
      api.headers["authorization"] = "Bearer wrong-token-0123456";
      go.WaitForNotification();
      const int code = console->Handle(api).code;
      (code == 429 ? refused : heard)++;
    });
  }
  go.Notify();
  for (auto& t : threads) t.join();
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(heard.load(), 5) << "the free guesses (login_free_failures), no more";
  EXPECT_EQ(refused.load(), kThreads - 5);
}

TEST_F(ConsoleTest, ManyGuessesMakeFewLogLines) {
  MakeQueue(*store_, "q", 1);
  auto console = Make();
  HttpRequest api = Get("/api/queues");
  api.headers["authorization"] = "Bearer wrong-token-0123456";
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 2000; ++i) {
    api.remote_addr = absl::StrCat("10.1.", i / 250, ".", i % 250);  // many addresses
    EXPECT_EQ(console->Handle(api).code, 401);
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
}

// A login's cookie expires on the server: after session_idle without a
// request, and session_max after the login however busy.
TEST_F(ConsoleTest, ALoginExpiresWhenIdleAndAtItsAbsoluteEnd) {
  MakeQueue(*store_, "q", 1);
  auto console = Make();
  ASSERT_TRUE(console->poller().PollOwnersOnce().ok());
  auto get = [&](const std::string& cookie) {
    HttpRequest r = Get("/api/queues");
    r.headers.erase("authorization");
    r.headers["cookie"] = cookie;
    return console->Handle(r).code;
  };
  const std::string idle = LoginCookie(*console);
  EXPECT_EQ(get(idle), 200);
  clock_.Advance(absl::Minutes(29));
  EXPECT_EQ(get(idle), 200) << "used 29 minutes on";
  clock_.Advance(absl::Minutes(31));
  EXPECT_EQ(get(idle), 401) << "31 minutes unused";
  const std::string busy = LoginCookie(*console);
  for (int i = 0; i < 12 * 6 - 1; ++i) {
    clock_.Advance(absl::Minutes(10));
    ASSERT_EQ(get(busy), 200) << i;
  }
  clock_.Advance(absl::Minutes(10));
  EXPECT_EQ(get(busy), 401) << "12 hours after the login";
}

// The cookie is Secure when the request came over TLS, or a proxy in front
// says so; it says how long it lives.
TEST_F(ConsoleTest, TheCookieIsSecureOverTls) {
  auto console = Make();
  auto set_cookie = [&](bool tls, const char* header, const char* value) {
    HttpRequest r;
    r.method = "POST";
    r.path = "/login";
    r.tls = tls;
    r.headers["host"] = kHost;
    if (header) r.headers[header] = value;
    r.body = absl::StrCat("token=", kToken, "&csrf=", console->csrf_token());
    for (const auto& [name, v] : console->Handle(r).headers) {
      if (name == "Set-Cookie") return v;
    }
    return std::string();
  };
  EXPECT_FALSE(absl::StrContains(set_cookie(false, nullptr, nullptr), "Secure"));
  EXPECT_TRUE(absl::StrContains(set_cookie(false, nullptr, nullptr), "Max-Age=43200"));
  EXPECT_TRUE(absl::StrContains(set_cookie(true, nullptr, nullptr), "; Secure"));
  EXPECT_TRUE(absl::StrContains(set_cookie(false, "x-forwarded-proto", "https"), "; Secure"));
  EXPECT_TRUE(absl::StrContains(set_cookie(false, "x-forwarded-proto", "HTTPS, http"), "; Secure"));
  EXPECT_TRUE(
      absl::StrContains(set_cookie(false, "forwarded", "for=1.2.3.4;proto=https"), "; Secure"));
  EXPECT_FALSE(absl::StrContains(set_cookie(false, "x-forwarded-proto", "http"), "Secure"));
}

TEST_F(ConsoleTest, EveryResponseCarriesTheContentSecurityPolicy) {
  auto console = Make();
  for (const char* path : {"/", "/app.js", "/api/queues", "/nope"}) {
    HttpResponse r = console->Handle(Get(path));
    bool csp = false, nosniff = false;
    for (const auto& [name, value] : r.headers) {
      csp = csp ||
            (name == "Content-Security-Policy" && absl::StrContains(value, "script-src 'self'"));
      nosniff = nosniff || (name == "X-Content-Type-Options" && value == "nosniff");
    }
    EXPECT_TRUE(csp && nosniff) << path;
  }
  // Its errors too, for methods it does not take.
  HttpRequest put = Get("/api/queues");
  put.method = "PUT";
  const HttpResponse r = console->Handle(put);
  EXPECT_EQ(r.code, 405);
  EXPECT_EQ(r.headers, SecurityHeaders());
}

}  // namespace
}  // namespace partq::console
