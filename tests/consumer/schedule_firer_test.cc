// The schedule firer on MemStore and a ManualClock: it asks the store once
// per due tick (and per poll interval), fires nothing while this worker is
// not the firer, fires the ticks of its catch-up window once when it becomes
// one, and counts what it did in its metrics.
#include "consumer/schedule_firer.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "consumer/metrics.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "store/fault_store.h"
#include "store/mem_store.h"
#include "tests/testing/wait.h"

namespace partq {
namespace {

using testing::WaitUntil;

// The value of counter `name` with labels queue="q" and, if given, schedule.
std::optional<double> CounterValue(const prometheus::Registry& r, const std::string& name,
                                   const std::string& schedule = "") {
  for (const auto& family : r.Collect()) {
    if (family.name != name) continue;
    for (const auto& metric : family.metric) {
      bool match = true;
      for (const auto& label : metric.label) {
        if (label.name == "schedule" && label.value != schedule) match = false;
        if (label.name == "queue" && label.value != "q") match = false;
      }
      if (match) return metric.counter.value;
    }
  }
  return std::nullopt;
}

class ScheduleFirerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QueueConfig q;
    q.name = "q";
    q.parts = 4;
    ASSERT_TRUE(store_->CreateQueue(q).ok());
    ScheduleSpec s;
    s.name = "every10s";
    s.queue = "q";
    s.every = absl::Seconds(10);
    s.payload = "tick";
    ASSERT_TRUE(store_->AddSchedule(s).ok());
  }

  std::unique_ptr<ScheduleFirer> NewFirer() {
    ScheduleFirerOptions o;
    o.queue = "q";
    o.poll_interval = absl::Minutes(1);
    o.retry_backoff = absl::Seconds(1);
    o.clock = &clock_;
    return std::make_unique<ScheduleFirer>(
        faults_.Wrap(db_.Factory()), o, [this] { return is_firer_.load(); }, &metrics_);
  }

  absl::Time NextTick() {
    auto all = store_->ListSchedules("q");
    EXPECT_TRUE(all.ok() && all->size() == 1);
    return *(*all)[0].next_tick;
  }
  int64_t Items() {
    auto st = store_->Status("q");
    EXPECT_TRUE(st.ok());
    int64_t n = 0;
    for (const auto& p : st->parts) n += p.ready + p.delayed + p.in_flight;
    return n;
  }

  // Starts at a multiple of 10 s: the schedule's first tick is 10 s away.
  ManualClock clock_{absl::FromUnixSeconds(1'700'000'000)};
  MemDatabase db_{&clock_};
  FaultInjector faults_{&clock_};
  std::unique_ptr<Store> store_ = db_.Connect();
  std::atomic<bool> is_firer_{true};
  prometheus::Registry registry_;
  ConsumerMetrics metrics_{registry_, "q"};
};

TEST_F(ScheduleFirerTest, FiresEachTickOnceAskingTheStoreOnlyWhenATickIsDue) {
  auto firer = NewFirer();
  firer->Start();
  ASSERT_TRUE(clock_.AwaitWaiters(1));  // its first round found nothing due
  EXPECT_EQ(faults_.Calls("FireSchedules"), 1);
  EXPECT_EQ(NextTick(), clock_.Now() + absl::Seconds(10));
  for (int tick = 1; tick <= 5; ++tick) {
    clock_.Advance(NextTick() - clock_.Now());
    ASSERT_TRUE(clock_.AwaitWaiters(1));  // woken at the tick, fired, waiting again
    EXPECT_EQ(firer->fired(), tick);
    EXPECT_EQ(Items(), tick);
    // One question per tick: none between ticks, none extra after one.
    EXPECT_EQ(faults_.Calls("FireSchedules"), 1 + tick);
  }
  EXPECT_EQ(firer->missed(), 0);
  firer->Stop();
  EXPECT_EQ(CounterValue(registry_, "partq_schedule_fired_total", "every10s"), 5);
  EXPECT_EQ(CounterValue(registry_, "partq_schedule_missed_total", "every10s"), 0);
  EXPECT_EQ(CounterValue(registry_, "partq_schedule_fire_errors_total"), 0);
}

TEST_F(ScheduleFirerTest, ANonFirerAsksNothingAndOnBecomingOneCatchesUpTheWindowsTicksOnce) {
  is_firer_ = false;
  auto firer = NewFirer();
  firer->Start();
  ASSERT_TRUE(clock_.AwaitWaiters(1));
  // Three ticks pass (at +10, +20, +30 s) while no worker owns part 0.
  clock_.Advance(absl::Seconds(35));
  EXPECT_EQ(faults_.Calls("FireSchedules"), 0);
  EXPECT_EQ(Items(), 0);
  // Part 0 comes to this worker: it looks at once. The catch-up window (the
  // default: a 10 s TTL, a heartbeat of 10/3 s and a 10 s period) reaches
  // back to +11.7 s: +20 and +30 fire, late, once each; +10 is missed.
  is_firer_ = true;
  firer->Poke();
  ASSERT_TRUE(WaitUntil([&] { return firer->fired() == 2; }));
  EXPECT_EQ(firer->missed(), 1);
  EXPECT_EQ(Items(), 2);
  auto all = store_->ListSchedules("q");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)[0].last_tick, absl::FromUnixSeconds(1'700'000'030));
  EXPECT_EQ((*all)[0].next_tick, absl::FromUnixSeconds(1'700'000'040));
  firer->Stop();
  EXPECT_EQ(CounterValue(registry_, "partq_schedule_fired_total", "every10s"), 2);
  EXPECT_EQ(CounterValue(registry_, "partq_schedule_missed_total", "every10s"), 1);
}

TEST_F(ScheduleFirerTest, AFailedRoundIsCountedAndRetriedAfterTheBackoff) {
  auto firer = NewFirer();
  clock_.Advance(absl::Seconds(10));
  faults_.FailNext(1);
  EXPECT_EQ(firer->RunOnce(), clock_.Now() + absl::Seconds(1));
  EXPECT_EQ(CounterValue(registry_, "partq_schedule_fire_errors_total"), 1);
  EXPECT_EQ(Items(), 0);
  EXPECT_EQ(firer->RunOnce(), absl::FromUnixSeconds(1'700'000'020));
  EXPECT_EQ(Items(), 1);
}

// A deleted queue is the session's to report (it stops the worker): the
// firer says so once and asks again at its poll interval, not every backoff.
TEST_F(ScheduleFirerTest, AGoneQueueIsReportedOnceAndAskedAgainAtThePollInterval) {
  auto firer = NewFirer();
  ASSERT_TRUE(store_->DeleteQueue("q", QueueContents::kDelete).ok());
  ::testing::internal::CaptureStderr();
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(firer->RunOnce(), clock_.Now() + absl::Minutes(1)) << round;
  }
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_TRUE(absl::StrContains(err, "unknown queue")) << err;
  EXPECT_EQ(CounterValue(registry_, "partq_schedule_fire_errors_total"), 3);
  // Any other answer in between, and the loss is reported again: after a
  // failure, and after a queue of the name was created and deleted again.
  ::testing::internal::CaptureStderr();
  faults_.FailNext(1);
  EXPECT_EQ(firer->RunOnce(), clock_.Now() + absl::Seconds(1));
  EXPECT_EQ(firer->RunOnce(), clock_.Now() + absl::Minutes(1));
  QueueConfig q;
  q.name = "q";
  q.parts = 4;
  ASSERT_TRUE(store_->CreateQueue(q).ok());
  EXPECT_EQ(firer->RunOnce(), clock_.Now() + absl::Minutes(1));  // no schedule: the poll
  ASSERT_TRUE(store_->DeleteQueue("q", QueueContents::kDelete).ok());
  EXPECT_EQ(firer->RunOnce(), clock_.Now() + absl::Minutes(1));
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 3) << err;  // failure, gone, gone
  EXPECT_EQ(CounterValue(registry_, "partq_schedule_fire_errors_total"), 6);
}

TEST_F(ScheduleFirerTest, AStoreWithoutSchedulesEndsTheRounds) {
  auto firer = NewFirer();
  faults_.FailNext(1, absl::UnimplementedError("schedules need PostgreSQL"));
  EXPECT_EQ(firer->RunOnce(), absl::InfiniteFuture());
}

}  // namespace
}  // namespace partq
