// The consumer's claim decisions alone: no store, no threads, the time passed
// in. Claims are "answered" by hand with the items a store would return.
#include "consumer/claim_scheduler.h"

#include <memory>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace partq {
namespace {

const SessionId kMe{"me"};
const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

Item MakeItem(int64_t id, int part, int64_t epoch, bool suspect = false) {
  Item i;
  i.id = id;
  i.part = part;
  i.claim_epoch = Epoch{epoch};
  i.suspect = suspect;
  return i;
}

// The consumer's snapshot at `now` (ClaimScheduler::SnapshotAsked, then NoteSnapshot).
void Snapshot(ClaimScheduler& s, const absl::StatusOr<SnapshotBounds>& answer, absl::Time now) {
  s.SnapshotAsked(now);
  s.NoteSnapshot(answer);
}

std::vector<int> PartsOf(const ClaimRequest& req) {
  std::vector<int> out;
  for (const auto& p : req.parts) out.push_back(p.part);
  return out;
}

ClaimSchedulerOptions Options(bool ordered = false, bool notices = true) {
  ClaimSchedulerOptions o;
  o.queue = "q";
  o.batch = 2;
  o.rescan_interval = absl::Seconds(1);
  o.ordered = ordered;
  o.notices = notices;
  return o;
}

class ClaimSchedulerTest : public ::testing::Test {
 protected:
  // Batches of 2 items; every part of `parts` owned at epoch 1.
  explicit ClaimSchedulerTest(std::vector<int> parts = {0}, bool ordered = false,
                              bool notices = true)
      : s_(Options(ordered, notices)) {
    std::vector<OwnedPart> owned;
    for (int p : parts) owned.push_back({p, Epoch{1}});
    s_.Assign(owned);
  }

  // Claims one batch at `now` and answers it with `items`.
  ClaimRequest ClaimAndAccept(absl::Time now, std::vector<Item> items) {
    std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, now);
    EXPECT_TRUE(req.has_value());
    if (!req) return {};
    s_.AcceptClaim(*req, std::move(items), now);
    return *req;
  }

  // Part 0 (at epoch 1) claims `ids` as one batch, which starts running;
  // then the part is lost and comes back at `epoch`. Returns the batch.
  Batch RunningWhenPartZeroCameBack(const std::vector<int64_t>& ids, Epoch epoch) {
    std::vector<Item> items;
    for (int64_t id : ids) items.push_back(MakeItem(id, 0, 1));
    ClaimAndAccept(kT0, items);
    Batch running;
    EXPECT_TRUE(s_.TakeQueued(&running));
    s_.Remove({0});
    s_.Assign({{0, epoch}});
    return running;
  }

  ClaimScheduler s_;
};

TEST_F(ClaimSchedulerTest, AFirstClaimReadsFromTheHeadThenOnFromTheCursor) {
  std::optional<ClaimRequest> first = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(s_.claiming());
  ASSERT_EQ(PartsOf(*first), std::vector<int>{0});
  EXPECT_FALSE(first->parts[0].after.has_value()) << "a new part is read from its head";
  EXPECT_EQ(first->parts[0].epoch, Epoch{1});
  EXPECT_EQ(first->limit, 2);
  EXPECT_TRUE(first->include_suspect) << "a new part may hold a dead owner's items";
  // A full batch: the part has more, and the next claim reads on from the
  // last key taken.
  EXPECT_EQ(s_.AcceptClaim(*first, {MakeItem(5, 0, 1), MakeItem(9, 0, 1)}, kT0), 2);
  EXPECT_FALSE(s_.claiming());
  EXPECT_EQ(s_.queued(), 1u);
  EXPECT_EQ(s_.held(), 2);
  std::optional<ClaimRequest> second = s_.BeginClaim(kMe, 1, {}, kT0 + absl::Milliseconds(100));
  ASSERT_TRUE(second.has_value());
  ASSERT_EQ(PartsOf(*second), std::vector<int>{0});
  ASSERT_TRUE(second->parts[0].after.has_value());
  EXPECT_EQ(*second->parts[0].after, (ItemKey{0, 9}));
  EXPECT_FALSE(second->include_suspect) << "no suspect found, and no read from the head";
  // What is in flight is listed, so a read from the head skips it.
  EXPECT_EQ(second->in_flight.size(), 2u);
}

TEST_F(ClaimSchedulerTest, APartReadToItsEndIsNotClaimedAgainUntilANoticeOrAPoll) {
  ClaimAndAccept(kT0, {MakeItem(1, 0, 1)});  // one item, fewer than the limit
  EXPECT_FALSE(s_.WantClaim());
  EXPECT_FALSE(s_.BeginClaim(kMe, 1, {}, kT0).has_value());
  s_.Poll();
  EXPECT_TRUE(s_.WantClaim());
  ClaimAndAccept(kT0, {});
  EXPECT_FALSE(s_.WantClaim());
  s_.Notice(0);
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_FALSE(req->parts[0].after.has_value())
      << "a notice that does not say where reads the part from its head";
}

TEST_F(ClaimSchedulerTest, APausedQueueClaimsNothingNotEvenAheadAndResumesWithARead) {
  ClaimAndAccept(kT0, {MakeItem(1, 0, 1), MakeItem(2, 0, 1)});  // a full batch: more to read
  ASSERT_TRUE(s_.WantClaim());
  s_.SetPaused(true);
  EXPECT_TRUE(s_.paused());
  EXPECT_FALSE(s_.WantClaim());
  EXPECT_FALSE(s_.BeginClaim(kMe, 1, {}, kT0).has_value());
  EXPECT_FALSE(s_.ClaimAheadBatches(2, {MakeItem(1, 0, 1)}).has_value())
      << "no claim ahead in an ack while paused";
  s_.Notice(0);  // items keep coming; they wait
  s_.Poll();
  EXPECT_FALSE(s_.WantClaim());
  EXPECT_EQ(s_.queued(), 1u) << "what was claimed before the pause is still processed";
  s_.SetPaused(false);
  EXPECT_TRUE(s_.WantClaim());
  EXPECT_TRUE(s_.BeginClaim(kMe, 1, {}, kT0).has_value());
}

TEST(ClaimScheduler, WithoutNoticesAPollReadsQuietPartsFromTheHeadAndLeavesBusyOnesAtTheirCursor) {
  ClaimScheduler s(Options(/*ordered=*/false, /*notices=*/false));
  s.Assign({{0, Epoch{1}}, {1, Epoch{1}}});
  std::optional<ClaimRequest> req = s.BeginClaim(kMe, 2, {}, kT0);
  ASSERT_TRUE(req.has_value());
  s.AcceptClaim(*req, {MakeItem(1, 0, 1), MakeItem(2, 1, 1)}, kT0);  // both read to the end
  EXPECT_FALSE(s.WantClaim());
  s.Notice(0);
  req = s.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  ASSERT_EQ(PartsOf(*req), std::vector<int>{0}) << "a notice names one part";
  s.AcceptClaim(*req, {MakeItem(5, 0, 1), MakeItem(6, 0, 1)}, kT0);  // a backlog
  s.Poll();
  req = s.BeginClaim(kMe, 2, {}, kT0 + absl::Milliseconds(10));
  ASSERT_TRUE(req.has_value());
  ASSERT_EQ(req->parts.size(), 2u);
  for (const ClaimPart& cp : req->parts) {
    if (cp.part == 0) {
      ASSERT_TRUE(cp.after.has_value());
      EXPECT_EQ(*cp.after, (ItemKey{0, 6}));
    } else {
      EXPECT_FALSE(cp.after.has_value()) << "the quiet part";
    }
  }
}

class PollOnlyClaimSchedulerTest : public ClaimSchedulerTest {
 protected:
  PollOnlyClaimSchedulerTest() : ClaimSchedulerTest({0}, /*ordered=*/false, /*notices=*/false) {}
};

TEST_F(PollOnlyClaimSchedulerTest, WithoutNoticesEveryPartIsReadFromItsHeadEveryRescanInterval) {
  ClaimAndAccept(kT0, {MakeItem(1, 0, 1), MakeItem(2, 0, 1)});  // full: hungry
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0 + absl::Milliseconds(999));
  ASSERT_TRUE(req.has_value());
  EXPECT_TRUE(req->parts[0].after.has_value());
  s_.AcceptClaim(*req, {MakeItem(3, 0, 1), MakeItem(4, 0, 1)}, kT0 + absl::Milliseconds(999));
  req = s_.BeginClaim(kMe, 1, {}, kT0 + absl::Seconds(1));
  ASSERT_TRUE(req.has_value());
  EXPECT_FALSE(req->parts[0].after.has_value()) << "a late commit behind the cursor tells nobody";
  EXPECT_TRUE(req->include_suspect) << "every read from the head probes for suspects";
}

TEST_F(PollOnlyClaimSchedulerTest, APartIsReadFromItsPollFloorOnceSnapshotsSayNothingBelowCommits) {
  EXPECT_FALSE(s_.WantsSnapshot(kT0)) << "nothing claimed yet";
  ClaimAndAccept(kT0, {MakeItem(1, 0, 1), MakeItem(2, 0, 1)});  // from the head; full
  EXPECT_TRUE(s_.WantsSnapshot(kT0));
  // Ids up to 2 were taken before this snapshot's successor: below its xmax...
  Snapshot(s_, SnapshotBounds{100, 105}, kT0);
  EXPECT_FALSE(s_.WantsSnapshot(kT0 + absl::Milliseconds(999))) << "one a rescan_interval";
  ClaimAndAccept(kT0 + absl::Milliseconds(500), {MakeItem(3, 0, 1), MakeItem(4, 0, 1)});
  Snapshot(s_, SnapshotBounds{103, 110}, kT0 + absl::Seconds(1));
  EXPECT_EQ(s_.final_id(), 0) << "xid 103 (below 105) may still commit an id up to 4";
  // ... and once a snapshot's xmin passes 110, every id up to 2 committed or never will.
  Snapshot(s_, SnapshotBounds{110, 112}, kT0 + absl::Seconds(2));
  EXPECT_EQ(s_.final_id(), 2);
  // The rescan due is still a read from the head (no floor yet), which sets one.
  ClaimRequest req = ClaimAndAccept(kT0 + absl::Seconds(2), {MakeItem(5, 0, 1), MakeItem(6, 0, 1)});
  EXPECT_FALSE(req.parts[0].after.has_value());
  // The next one reads from the floor, and the higher priorities from the head.
  req = ClaimAndAccept(kT0 + absl::Seconds(3), {MakeItem(7, 0, 1)});  // read to the end
  ASSERT_TRUE(req.parts[0].after.has_value());
  EXPECT_EQ(*req.parts[0].after, (ItemKey{0, 2}));
  EXPECT_TRUE(req.parts[0].above);
  EXPECT_TRUE(req.parts[0].behind) << "what came due behind the floor";
  EXPECT_TRUE(req.include_suspect);
  // Read to the end with the final id still 2: the floor stays; a later final id moves it.
  Snapshot(s_, SnapshotBounds{112, 120}, kT0 + absl::Seconds(3));
  Snapshot(s_, SnapshotBounds{121, 121}, kT0 + absl::Seconds(4));  // nothing running
  EXPECT_EQ(s_.final_id(), 7);
  s_.Poll();
  ClaimAndAccept(kT0 + absl::Seconds(4), {MakeItem(8, 0, 1)});
  s_.Poll();
  req = ClaimAndAccept(kT0 + absl::Seconds(5), {});
  ASSERT_TRUE(req.parts[0].after.has_value());
  EXPECT_EQ(*req.parts[0].after, (ItemKey{0, 7}));
  // Every kPollHeadReads rescan_intervals, the head again.
  s_.Poll();
  req = ClaimAndAccept(kT0 + absl::Seconds(2 + 60), {});
  EXPECT_FALSE(req.parts[0].after.has_value());
}

// A snapshot that says the ids are not handed out in time order (a CACHE on
// the id sequence, which an operator may add while workers run) turns the
// floors off: every poll reads the head again, and no snapshot is asked for.
TEST_F(PollOnlyClaimSchedulerTest, AnIdCacheTurnsTheFloorsOffAndEveryPollReadsTheHeadAgain) {
  ClaimAndAccept(kT0, {MakeItem(10, 0, 1), MakeItem(11, 0, 1)});
  Snapshot(s_, SnapshotBounds{1, 2}, kT0);
  Snapshot(s_, SnapshotBounds{3, 3}, kT0 + absl::Seconds(1));
  ASSERT_EQ(s_.final_id(), 11);
  ClaimAndAccept(kT0 + absl::Seconds(1), {MakeItem(12, 0, 1)});  // from the head, to the end
  ASSERT_EQ(s_.poll_floor(0), 11);
  s_.Poll();
  ClaimRequest req = ClaimAndAccept(kT0 + absl::Seconds(2), {MakeItem(13, 0, 1)});
  ASSERT_TRUE(req.parts[0].after.has_value()) << "from the floor";
  Snapshot(s_, SnapshotBounds{4, 4, /*id_cache=*/20}, kT0 + absl::Seconds(2));
  EXPECT_FALSE(s_.WantsSnapshot(kT0 + absl::Seconds(9)));
  s_.Poll();
  req = ClaimAndAccept(kT0 + absl::Seconds(3), {});
  EXPECT_FALSE(req.parts[0].after.has_value()) << "the head, as without floors";
}

TEST_F(PollOnlyClaimSchedulerTest, AReadThatFillsItsBatchMovesTheFloorToItsLastItemAtMost) {
  ClaimAndAccept(kT0, {MakeItem(10, 0, 1), MakeItem(11, 0, 1)});
  Snapshot(s_, SnapshotBounds{1, 2}, kT0);
  Snapshot(s_, SnapshotBounds{3, 3}, kT0 + absl::Seconds(1));
  ASSERT_EQ(s_.final_id(), 11);
  EXPECT_FALSE(s_.poll_floor(0).has_value()) << "no read began after the snapshots yet";
  // From the head, full, at item 5 (a late commit): 5, not 11.
  ClaimAndAccept(kT0 + absl::Seconds(1), {MakeItem(4, 0, 1), MakeItem(5, 0, 1)});
  EXPECT_EQ(s_.poll_floor(0), 5);
  // On from there, full again: the floor goes to its last item, 7.
  ClaimRequest req = ClaimAndAccept(kT0 + absl::Seconds(2), {MakeItem(6, 0, 1), MakeItem(7, 0, 1)});
  ASSERT_TRUE(req.parts[0].after.has_value());
  EXPECT_EQ(*req.parts[0].after, (ItemKey{0, 5}));
  EXPECT_EQ(s_.poll_floor(0), 7);
  // A read cut among the items that run first (read from the head) moves
  // nothing, and the next claim reads from the floor and the head again.
  Item high = MakeItem(20, 0, 1), higher = MakeItem(21, 0, 1);
  high.priority = higher.priority = -1;
  s_.Poll();
  req = ClaimAndAccept(kT0 + absl::Seconds(3), {high, higher});
  EXPECT_TRUE(req.parts[0].above);
  EXPECT_EQ(s_.poll_floor(0), 7);
  req = ClaimAndAccept(kT0 + absl::Seconds(3) + absl::Milliseconds(10), {MakeItem(12, 0, 1)});
  EXPECT_TRUE(req.parts[0].above) << "a backlog of them is read on at once, not a second later";
  EXPECT_EQ(s_.poll_floor(0), 11) << "read to the end: the final id";
}

TEST(ClaimScheduler, OnlyAPollOnlyPlainQueueAsksForSnapshotsAndOnlyTillWhatItClaimedIsFinal) {
  auto claimed = [](bool ordered, bool notices) {
    auto s = std::make_unique<ClaimScheduler>(Options(ordered, notices));
    s->Assign({{0, Epoch{1}}});
    std::optional<ClaimRequest> req = s->BeginClaim(kMe, 1, {}, kT0);
    EXPECT_TRUE(req.has_value());
    if (req) s->AcceptClaim(*req, {MakeItem(7, 0, 1)}, kT0);
    return s;
  };
  EXPECT_FALSE(claimed(/*ordered=*/false, /*notices=*/true)->WantsSnapshot(kT0));
  EXPECT_FALSE(claimed(/*ordered=*/true, /*notices=*/false)->WantsSnapshot(kT0));
  std::unique_ptr<ClaimScheduler> idle = claimed(/*ordered=*/false, /*notices=*/false);
  ASSERT_TRUE(idle->WantsSnapshot(kT0));
  Snapshot(*idle, SnapshotBounds{5, 6}, kT0);  // 7 claimed before the next one...
  Snapshot(*idle, SnapshotBounds{6, 6}, kT0 + absl::Seconds(1));  // ... whose xmin passed
  ASSERT_EQ(idle->final_id(), 7);
  EXPECT_FALSE(idle->WantsSnapshot(kT0 + absl::Seconds(9))) << "idle: every id claimed is final";
  std::unique_ptr<ClaimScheduler> s = claimed(/*ordered=*/false, /*notices=*/false);
  Snapshot(*s, absl::UnavailableError("down"), kT0);
  EXPECT_FALSE(s->WantsSnapshot(kT0 + absl::Milliseconds(999)));
  EXPECT_TRUE(s->WantsSnapshot(kT0 + absl::Seconds(1))) << "asked again a rescan_interval later";
  Snapshot(*s, absl::UnimplementedError("no snapshots"), kT0 + absl::Seconds(1));
  EXPECT_FALSE(s->WantsSnapshot(kT0 + absl::Seconds(9))) << "a store without them: the heads";
  std::unique_ptr<ClaimScheduler> cached = claimed(/*ordered=*/false, /*notices=*/false);
  Snapshot(*cached, SnapshotBounds{5, 6, /*id_cache=*/20}, kT0);
  EXPECT_FALSE(cached->WantsSnapshot(kT0 + absl::Seconds(9)))
      << "ids out of time order: no floors, the heads";
}

TEST_F(ClaimSchedulerTest, WithNoticesABusyPartStaysAtItsCursorHoweverLongItRuns) {
  absl::Time now = kT0;
  ClaimAndAccept(now, {MakeItem(1, 0, 1), MakeItem(2, 0, 1)});  // full: hungry
  for (int64_t id = 3; id < 40; id += 2) {
    now += absl::Seconds(5);
    s_.Poll();
    s_.Notice(0, ItemKey{0, id + 100});  // new items past the cursor
    std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, now);
    ASSERT_TRUE(req.has_value());
    ASSERT_TRUE(req->parts[0].after.has_value()) << "no read from the head, at " << id;
    EXPECT_EQ(*req->parts[0].after, (ItemKey{0, id - 1}));
    ASSERT_TRUE(req->parts[0].cursor.has_value());
    EXPECT_EQ(*req->parts[0].cursor, (ItemKey{0, id - 1}));
    s_.AcceptClaim(*req, {MakeItem(id, 0, 1), MakeItem(id + 1, 0, 1)}, now);
  }
}

TEST_F(ClaimSchedulerTest, ANoticeOfAnItemBehindTheCursorReadsFromJustBeforeIt) {
  ClaimAndAccept(kT0, {MakeItem(10, 0, 1)});  // read to the end: not hungry
  ASSERT_FALSE(s_.WantClaim());
  s_.Notice(0, ItemKey{0, 7});  // an id that committed late
  ASSERT_TRUE(s_.WantClaim());
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  ASSERT_TRUE(req->parts[0].after.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 6}));
  EXPECT_EQ(*req->parts[0].cursor, (ItemKey{0, 10})) << "up to here, in-flight items are skipped";
  EXPECT_FALSE(req->include_suspect) << "not a read from the head";
  s_.AcceptClaim(*req, {MakeItem(7, 0, 1)}, kT0);  // read to the end
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  EXPECT_FALSE(req.has_value()) << "nothing more to read";
  // A higher priority sorts before every key of priority 0.
  s_.Notice(0, ItemKey{-5, 50});
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{-5, 49}));
  s_.AcceptClaim(*req, {}, kT0);
  // A notice of items past the cursor only wakes the part.
  s_.Notice(0, ItemKey{0, 11});
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 10}));
}

TEST_F(ClaimSchedulerTest, ANoticeWhileAClaimIsUnderWayIsReadByTheNextClaim) {
  ClaimAndAccept(kT0, {MakeItem(10, 0, 1), MakeItem(11, 0, 1)});
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  s_.Notice(0, ItemKey{0, 4});                      // committed while the claim read
  s_.AcceptClaim(*req, {MakeItem(12, 0, 1)}, kT0);  // read to the end
  EXPECT_TRUE(s_.WantClaim());
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  ASSERT_TRUE(req->parts[0].after.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 3}));
  // A claim that fails leaves the floor for the next one.
  s_.FailClaim();
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 3}));
}

// A read from a floor behind the cursor (a notice's) that fills its batch
// before the cursor goes on from its last item: more may wait between.
TEST_F(ClaimSchedulerTest, AReadFromANoticedFloorThatFillsItsBatchGoesOnFromItsLastItem) {
  ClaimAndAccept(kT0, {MakeItem(10, 0, 1), MakeItem(11, 0, 1)});
  s_.Notice(0, ItemKey{0, 4});  // committed late, behind the cursor
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 3}));
  s_.AcceptClaim(*req, {MakeItem(5, 0, 1), MakeItem(6, 0, 1)}, kT0);
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 6}));
  EXPECT_EQ(*req->parts[0].cursor, (ItemKey{0, 11}));
}

// The claim under way began before the item committed and reads past it
// without seeing it; the notice came while the cursor was still before it.
TEST_F(ClaimSchedulerTest, ANoticeOfAnItemThatAClaimUnderWayPassesIsReadFromBeforeIt) {
  ClaimAndAccept(kT0, {MakeItem(10, 0, 1), MakeItem(11, 0, 1)});
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 11}));
  s_.Notice(0, ItemKey{0, 13});  // past the cursor of now, and committed late
  s_.AcceptClaim(*req, {MakeItem(12, 0, 1), MakeItem(14, 0, 1)}, kT0);
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  ASSERT_TRUE(req->parts[0].after.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 12})) << "item 13 is behind the cursor now";
  EXPECT_EQ(*req->parts[0].cursor, (ItemKey{0, 14}));
}

// Looking behind the cursor costs a probe per claim: a busy part's claims
// look at least every rescan_interval, and the first claim after a poll.
TEST_F(ClaimSchedulerTest, ABusyPartLooksBehindItsCursorEveryRescanIntervalAndAfterAPoll) {
  ClaimAndAccept(kT0, {MakeItem(1, 0, 1), MakeItem(2, 0, 1)});  // from the head: full
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0 + absl::Milliseconds(10));
  ASSERT_TRUE(req.has_value());
  EXPECT_FALSE(req->parts[0].behind) << "the read from the head just now saw everything";
  s_.AcceptClaim(*req, {MakeItem(3, 0, 1), MakeItem(4, 0, 1)}, kT0 + absl::Milliseconds(10));
  req = s_.BeginClaim(kMe, 1, {}, kT0 + absl::Seconds(1));
  ASSERT_TRUE(req.has_value());
  EXPECT_TRUE(req->parts[0].behind) << "a second since";
  s_.AcceptClaim(*req, {MakeItem(5, 0, 1), MakeItem(6, 0, 1)}, kT0 + absl::Seconds(1));
  req = s_.BeginClaim(kMe, 1, {}, kT0 + absl::Milliseconds(1100));
  ASSERT_TRUE(req.has_value());
  EXPECT_FALSE(req->parts[0].behind);
  s_.AcceptClaim(*req, {MakeItem(7, 0, 1)}, kT0 + absl::Milliseconds(1100));  // to the end
  s_.Poll();
  req = s_.BeginClaim(kMe, 1, {}, kT0 + absl::Milliseconds(1200));
  ASSERT_TRUE(req.has_value());
  EXPECT_TRUE(req->parts[0].behind) << "a poll: a retry may have come due";
}

TEST_F(ClaimSchedulerTest, AClaimNamesTheRecordTheLastClaimThereWrote) {
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(req->parts[0].record, 0) << "a new tenure knows none";
  Item a = MakeItem(1, 0, 1), b = MakeItem(2, 0, 1);
  a.claim_record = b.claim_record = 7;
  s_.AcceptClaim(*req, {a, b}, kT0);
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(req->parts[0].record, 7);
  s_.AcceptClaim(*req, {}, kT0);  // took nothing: the record stays
  s_.Notice(0, ItemKey{0, 9});
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(req->parts[0].record, 7);
}

TEST_F(ClaimSchedulerTest, ItemsThatCameDueBehindTheStartAndFilledTheReadAreReadFromThereAgain) {
  ClaimAndAccept(kT0, {MakeItem(10, 0, 1), MakeItem(11, 0, 1)});
  s_.Notice(0, ItemKey{0, 8});
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  ASSERT_EQ(*req->parts[0].after, (ItemKey{0, 7}));
  // Two retries due behind the start (ids 2 and 3) filled the batch.
  s_.AcceptClaim(*req, {MakeItem(2, 0, 1), MakeItem(3, 0, 1)}, kT0);
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  ASSERT_TRUE(req->parts[0].after.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 7})) << "item 8 is still to be read";
}

TEST_F(ClaimSchedulerTest,
       ANoticeThatDoesNotSayWhereWhileAClaimIsUnderWayKeepsThePartDueForARescan) {
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  s_.Notice(0);  // an enqueue committed while the claim read
  s_.AcceptClaim(*req, {MakeItem(1, 0, 1)}, kT0);
  EXPECT_TRUE(s_.WantClaim());
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_FALSE(req->parts[0].after.has_value());
}

TEST_F(ClaimSchedulerTest, AReadFromTheHeadThatStopsBeforeTheCursorGoesOnFromItsLastItem) {
  ClaimAndAccept(kT0, {MakeItem(10, 0, 1), MakeItem(11, 0, 1)});
  s_.Notice(0);  // e.g. a higher priority item came
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  ASSERT_FALSE(req->parts[0].after.has_value());
  Item urgent = MakeItem(12, 0, 1);
  urgent.priority = -1;
  Item early = MakeItem(3, 0, 1);  // an id that committed late
  s_.AcceptClaim(*req, {urgent, early}, kT0);
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  ASSERT_TRUE(req->parts[0].after.has_value()) << "more may wait between there and the cursor";
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 3})) << "not the head again";
  // This read gets past the cursor: the next one reads on from there.
  s_.AcceptClaim(*req, {MakeItem(6, 0, 1), MakeItem(13, 0, 1)}, kT0);
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  ASSERT_TRUE(req->parts[0].after.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 13}));
}

class OrderedClaimSchedulerTest : public ClaimSchedulerTest {
 protected:
  OrderedClaimSchedulerTest() : ClaimSchedulerTest({0}, /*ordered=*/true) {}
};

Item Keyed(int64_t id, const std::string& key) {
  Item i = MakeItem(id, 0, 1);
  i.key = key;
  return i;
}

// Ordered: the claims read on from the cursor, never the head on every
// claim (a held snapshot keeps its acked rows), and a finished item's key is
// released: the next claim names it, so the key's next item is read behind
// the cursor; once read, the key is not sent again.
TEST_F(OrderedClaimSchedulerTest, AFinishedItemsKeyIsReleasedAndTheClaimsReadOnFromTheCursor) {
  ClaimAndAccept(kT0, {Keyed(1, "a"), Keyed(2, "b"), Keyed(5, "a"), Keyed(7, "c")});
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_TRUE(req->ordered);
  ASSERT_TRUE(req->parts[0].after.has_value()) << "not the head again";
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 7}));
  EXPECT_TRUE(req->parts[0].key_cursors.empty());
  s_.AcceptClaim(*req, {}, kT0);
  EXPECT_FALSE(s_.WantClaim());
  Batch b, later;
  ASSERT_TRUE(s_.TakeQueued(&b));
  ASSERT_TRUE(s_.TakeQueued(&later));
  s_.Release(b.items);  // the keys' next items may be claimable now
  EXPECT_TRUE(s_.WantClaim());
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  ASSERT_TRUE(req->parts[0].after.has_value());
  using Released = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(req->parts[0].key_cursors, (Released{{"a", 1}, {"b", 2}}));
  // Released while the claim is under way: kept, a key sent already too
  // (its lowest id stays: what lies between may be held back).
  s_.Release(later.items);
  s_.AcceptClaim(*req, {Keyed(3, "a")}, kT0);
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(req->parts[0].key_cursors, (Released{{"a", 1}, {"c", 7}}));
  // Every ten rescan_intervals a claim reads the keys' heads from the cursor
  // (not the part from its head), and such a read does not send the
  // released keys nor look behind (it reads every key's first item
  // anyway); they wait for the next read on from it.
  s_.AcceptClaim(*req, {}, kT0);
  s_.Poll();
  req = s_.BeginClaim(kMe, 1, {}, kT0 + absl::Seconds(2));
  ASSERT_TRUE(req.has_value());
  EXPECT_TRUE(req->parts[0].after.has_value()) << "2 s: not yet";
  s_.AcceptClaim(*req, {}, kT0 + absl::Seconds(2));
  s_.Poll();
  EXPECT_FALSE(req->parts[0].key_heads);
  s_.AcceptClaim(*req, {}, kT0 + absl::Seconds(2));
  s_.Poll();
  req = s_.BeginClaim(kMe, 1, {}, kT0 + absl::Seconds(11));
  ASSERT_TRUE(req.has_value());
  EXPECT_TRUE(req->parts[0].after.has_value()) << "on from the cursor";
  EXPECT_TRUE(req->parts[0].key_heads);
  EXPECT_FALSE(req->parts[0].behind);
  EXPECT_TRUE(req->parts[0].key_cursors.empty());
  s_.AcceptClaim(*req, {}, kT0 + absl::Seconds(11));
  s_.Poll();
  req = s_.BeginClaim(kMe, 1, {}, kT0 + absl::Seconds(12));
  ASSERT_TRUE(req.has_value());
  EXPECT_FALSE(req->parts[0].key_heads) << "once in ten rescan_intervals";
  EXPECT_EQ(req->parts[0].key_cursors, (Released{{"a", 1}, {"c", 7}}));
  // Once the released keys' next items were read (a read that took
  // something, to its end), they are not sent again.
  s_.AcceptClaim(*req, {MakeItem(9, 0, 1)}, kT0 + absl::Seconds(12));
  s_.Poll();
  req = s_.BeginClaim(kMe, 1, {}, kT0 + absl::Seconds(12));
  ASSERT_TRUE(req.has_value());
  EXPECT_TRUE(req->parts[0].key_cursors.empty());
}

// Not so an ordered read: one from a noticed floor that read on past its
// start drops the floor, even when it filled its batch. In a part with a
// backlog the released keys fill most of each batch and the read on gets
// the rest, so the floor crept up by a few items a claim while every read on
// from it walked each item acked between it and the cursor (all of them
// behind a held snapshot). What lies between is held back (the keys'
// releases bring it) or found by the read of the keys' heads.
TEST_F(OrderedClaimSchedulerTest, AReadOnFromANoticedFloorDropsItEvenWhenItFillsItsBatch) {
  ClaimAndAccept(kT0, {Keyed(10, "a"), Keyed(11, "b")});
  s_.Notice(0, ItemKey{0, 4});  // committed late, behind the cursor
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 3}));
  s_.AcceptClaim(*req, {Keyed(5, "c"), Keyed(6, "d")}, kT0);
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 11})) << "on from the cursor, not from 6";
  // A batch filled by what lay behind the start (the read on may not have
  // run) keeps the floor.
  s_.Notice(0, ItemKey{0, 8});
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 7}));
  s_.AcceptClaim(*req, {Keyed(2, "e"), Keyed(3, "f")}, kT0);
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 7}));
}

// A key released before a read from a floor below the cursor is sent again
// with the next read: the read of the released keys' next items stops at
// the read's start, and a's next item (15) lies between the floor and the
// cursor, where the read on stopped short of it (its batch was full).
TEST_F(OrderedClaimSchedulerTest, AKeyReleasedBeforeAReadFromAFloorIsSentAgainWithTheNext) {
  ClaimAndAccept(kT0, {Keyed(10, "a"), Keyed(20, "b")});  // 15 of a passed, held back
  Batch b;
  ASSERT_TRUE(s_.TakeQueued(&b));
  s_.Release(b.items);
  s_.Notice(0, ItemKey{0, 4});  // committed late, behind the cursor
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 3}));
  using Released = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(req->parts[0].key_cursors, (Released{{"a", 10}, {"b", 20}}));
  s_.AcceptClaim(*req, {Keyed(5, "c"), Keyed(6, "d")}, kT0);
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 20}));
  EXPECT_EQ(req->parts[0].key_cursors, (Released{{"a", 10}, {"b", 20}}));
  // Read from the cursor, the keys are done with.
  s_.AcceptClaim(*req, {Keyed(15, "a")}, kT0);
  s_.Notice(0, ItemKey{0, 30});
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_TRUE(req->parts[0].key_cursors.empty());
}

// Ordered: every claim of a part sends, per key, the id of its item
// claimed last there in this tenure (ClaimPart::key_floors), from the head
// too: an item of the key past it is probed only down to it. An item below
// it claimed later (a retried one, a late commit) lowers it: while in
// flight it holds the key's later items back. A suspect (run without the
// probe) sets none, and a part gained again starts without.
TEST_F(OrderedClaimSchedulerTest, EveryClaimSendsTheLastIdClaimedOfEachKeyInThePart) {
  using Floors = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_TRUE(ClaimAndAccept(kT0, {Keyed(1, "a"), Keyed(2, "b"), MakeItem(3, 0, 1)})
                  .parts[0]
                  .key_floors.empty());
  Item suspect = Keyed(0, "c");
  suspect.suspect = true;
  s_.Poll();
  EXPECT_EQ(ClaimAndAccept(kT0, {Keyed(5, "a"), suspect}).parts[0].key_floors,
            (Floors{{"a", 1}, {"b", 2}}));
  Item behind = Keyed(4, "a");  // a late commit, read behind the cursor
  s_.Poll();
  EXPECT_EQ(ClaimAndAccept(kT0, {behind}).parts[0].key_floors, (Floors{{"a", 5}, {"b", 2}}));
  s_.Poll();
  std::optional<ClaimRequest> heads = s_.BeginClaim(kMe, 1, {}, kT0 + absl::Seconds(11));
  ASSERT_TRUE(heads.has_value());
  EXPECT_TRUE(heads->parts[0].key_heads);
  EXPECT_EQ(heads->parts[0].key_floors, (Floors{{"a", 4}, {"b", 2}}));
  s_.AcceptClaim(*heads, {}, kT0 + absl::Seconds(11));
  s_.Remove({0});
  s_.Assign({{0, Epoch{2}}});
  std::optional<ClaimRequest> gained = s_.BeginClaim(kMe, 1, {}, kT0 + absl::Seconds(12));
  ASSERT_TRUE(gained.has_value());
  EXPECT_TRUE(gained->parts[0].key_floors.empty());
}

// Key concurrency: as ordered, every claim reads from the head (a key's
// held-back item sorts before the cursor) and carries the bound, and a
// finished item wakes its part.
TEST(KeyConcurrencyClaimScheduler, EveryClaimReadsFromTheHeadAndAFinishedItemWakesItsPart) {
  ClaimSchedulerOptions o = Options();
  o.key_concurrency = 3;
  ClaimScheduler s(o);
  s.Assign({{0, Epoch{1}}});
  std::optional<ClaimRequest> req = s.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  s.AcceptClaim(*req, {MakeItem(1, 0, 1), MakeItem(2, 0, 1)}, kT0);
  req = s.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_FALSE(req->ordered);
  EXPECT_EQ(req->key_concurrency, 3);
  EXPECT_EQ(KeyBound(*req), 3);
  EXPECT_FALSE(req->parts[0].after.has_value()) << "read from the head, not the cursor";
  s.AcceptClaim(*req, {}, kT0);
  EXPECT_FALSE(s.WantClaim());
  Batch b;
  ASSERT_TRUE(s.TakeQueued(&b));
  s.Release(b.items);  // the keys' next items may be claimable now
  EXPECT_TRUE(s.WantClaim());
}

// Batches of 4 items, fair.
ClaimSchedulerOptions FairOptions() {
  ClaimSchedulerOptions o = Options();
  o.batch = 4;
  o.fair = true;
  return o;
}

// An item of part 0 at epoch 1 with `key`.
Item Keyed(int64_t id, const char* key) {
  Item i = MakeItem(id, 0, 1);
  i.key = key;
  return i;
}

// Fair: every claim is fair; the keys' turns go on after the key the last
// read served last (the cut: the last key, in the order of the turns, with
// the most turns), and a finished item wakes its part.
TEST(FairClaimScheduler, TurnsGoOnAfterTheKeyServedLastAndAFinishedItemWakesItsPart) {
  ClaimScheduler s(FairOptions());
  s.Assign({{0, Epoch{1}}});
  std::optional<ClaimRequest> req = s.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_TRUE(req->fair);
  EXPECT_FALSE(req->parts[0].after.has_value());
  EXPECT_FALSE(req->parts[0].key_after.has_value()) << "the first turns start at the first key";
  // Turns a, b, big, a: the read was cut after a's second turn.
  s.AcceptClaim(*req, {Keyed(1, "a"), Keyed(2, "b"), Keyed(3, "big"), Keyed(4, "a")}, kT0);
  req = s.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(req->parts[0].key_after, std::optional<std::string>("a"));
  // Turns b, big, big, big (a had none ready): cut after big.
  s.AcceptClaim(*req, {Keyed(5, "b"), Keyed(6, "big"), Keyed(7, "big"), Keyed(8, "big")}, kT0);
  req = s.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(req->parts[0].key_after, std::optional<std::string>("big"));
  // After big: c, then around to a; one turn each, so a (around) was last.
  // The read stopped short of the limit: the part waits for a wake-up.
  s.AcceptClaim(*req, {Keyed(9, "c"), Keyed(10, "a")}, kT0);
  EXPECT_FALSE(s.WantClaim());
  Batch b;
  ASSERT_TRUE(s.TakeQueued(&b));
  s.Release(b.items);
  EXPECT_TRUE(s.WantClaim()) << "its keys may have more than the read's share took";
  req = s.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(req->parts[0].key_after, std::optional<std::string>("a"));
  // Keyless items only: the turns stay where they were.
  s.AcceptClaim(*req, {MakeItem(11, 0, 1)}, kT0);
  s.Notice(0);
  req = s.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(req->parts[0].key_after, std::optional<std::string>("a"));
}

// Fair: each key is read on from the last item claimed of it; a notice's
// place lowers the cursors to it; every rescan_interval a read looks behind
// the cursors (a retried item may have come due there) and keeps them; a
// notice that does not say where and a hand-off read from the heads again.
TEST(FairClaimScheduler, KeysReadOnFromTheirCursorsUntilAReadFromTheHeadsIsDue) {
  ClaimScheduler s(FairOptions());
  s.Assign({{0, Epoch{1}}});
  auto bigs = [&](int64_t from) {
    std::vector<Item> items;
    for (int64_t id = from; id < from + 4; ++id) items.push_back(Keyed(id, "big"));
    return items;
  };
  using Cursors = std::vector<std::pair<std::string, int64_t>>;
  bool behind = false;  // whether the last claim looked behind
  // Claims at `now` what the scheduler asks for and answers with `items`
  // (a full batch: the part stays hungry); returns the cursors it sent.
  auto claim = [&](absl::Time now, std::vector<Item> items) {
    std::optional<ClaimRequest> req = s.BeginClaim(kMe, 1, {}, now);
    EXPECT_TRUE(req.has_value());
    if (!req) return Cursors{{"no claim", 0}};
    Cursors sent = req->parts[0].key_cursors;
    behind = req->parts[0].behind;
    EXPECT_EQ(req->parts[0].after.has_value(), !sent.empty());
    s.AcceptClaim(*req, std::move(items), now);
    return sent;
  };
  EXPECT_EQ(claim(kT0, {Keyed(1, "a"), Keyed(2, "big"), Keyed(3, "a"), Keyed(4, "big")}), Cursors{})
      << "a part just acquired is read from its heads";
  EXPECT_FALSE(behind) << "a read from the heads has nothing behind it";
  EXPECT_EQ(claim(kT0, bigs(5)), (Cursors{{"a", 3}, {"big", 4}}));
  EXPECT_FALSE(behind);
  s.Notice(0, ItemKey{0, 6});  // an item of the part that committed late
  // "a" got nothing: it may be done, and keeps no cursor.
  EXPECT_EQ(claim(kT0, bigs(20)), (Cursors{{"big", 5}})) << "the notice lowered big's";
  EXPECT_EQ(claim(kT0 + absl::Seconds(1), bigs(24)), (Cursors{{"big", 23}}));
  EXPECT_TRUE(behind) << "a read looks behind every rescan_interval";
  EXPECT_EQ(claim(kT0 + absl::Seconds(1), bigs(28)), (Cursors{{"big", 27}}));
  EXPECT_FALSE(behind) << "nothing came from behind: the next look is a rescan_interval away";
  // What came due behind big's cursor (a retried item, 10-13) filled the
  // read: the next one looks again, and the cursor stays where it was.
  EXPECT_EQ(claim(kT0 + absl::Seconds(2), bigs(10)), (Cursors{{"big", 31}}));
  EXPECT_TRUE(behind);
  EXPECT_EQ(claim(kT0 + absl::Seconds(2), bigs(32)), (Cursors{{"big", 31}}));
  EXPECT_TRUE(behind) << "the look behind filled the read: it looks again";
  EXPECT_EQ(claim(kT0 + absl::Seconds(2), bigs(36)), (Cursors{{"big", 35}}));
  EXPECT_FALSE(behind);
  s.Notice(0);  // a notice that does not say where
  EXPECT_EQ(claim(kT0 + absl::Seconds(2), bigs(40)), Cursors{});
  s.Remove({0});
  s.Assign({{0, Epoch{2}}});
  std::optional<ClaimRequest> req = s.BeginClaim(kMe, 1, {}, kT0 + absl::Seconds(2));
  ASSERT_TRUE(req.has_value());
  EXPECT_TRUE(req->parts[0].key_cursors.empty()) << "a hand-off reads from the heads";
}

TEST(ClaimScheduler, PartsTakeTurnsAtTheFrontOfAClaim) {
  ClaimScheduler s(Options());
  s.Assign({{0, Epoch{1}}, {1, Epoch{1}}, {2, Epoch{1}}});
  std::vector<std::vector<int>> orders;
  for (int i = 0; i < 4; ++i) {
    std::optional<ClaimRequest> req = s.BeginClaim(kMe, 1, {}, kT0);
    ASSERT_TRUE(req.has_value());
    orders.push_back(PartsOf(*req));
    s.FailClaim();
  }
  EXPECT_EQ(orders, (std::vector<std::vector<int>>{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 1, 2}}));
}

// A part whose last read stopped at the limit (a backlog) is claimed from
// alone when it comes first, for one batch; parts after the last one a full
// claim took from were not read and keep their state.
TEST(ClaimScheduler, AFullPartAtTheFrontIsClaimedFromAlone) {
  ClaimScheduler s(Options());
  s.Assign({{0, Epoch{1}}, {1, Epoch{1}}});
  std::optional<ClaimRequest> req = s.BeginClaim(kMe, 1, {}, kT0);  // [0, 1]
  ASSERT_TRUE(req.has_value());
  ASSERT_EQ(PartsOf(*req), (std::vector<int>{0, 1}));
  s.AcceptClaim(*req, {MakeItem(1, 0, 1), MakeItem(2, 0, 1)}, kT0);
  req = s.BeginClaim(kMe, 1, {}, kT0);  // [1, 0]: part 1 is not full
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(PartsOf(*req), (std::vector<int>{1, 0}));
  EXPECT_FALSE(req->parts[0].after.has_value()) << "part 1 was never read";
  s.FailClaim();
  req = s.BeginClaim(kMe, 1, {}, kT0);  // [0, ...]: part 0 is full
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(PartsOf(*req), std::vector<int>{0});
  s.FailClaim();
  req = s.BeginClaim(kMe, 2, {}, kT0);  // two batches: more than a full part promises
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(req->parts.size(), 2u);
  EXPECT_EQ(req->limit, 4);
}

TEST_F(ClaimSchedulerTest, ItemsAreQueuedInBatchesAndTheClaimersOwnGoesToKeep) {
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 3, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(req->limit, 6);
  Batch keep;
  EXPECT_EQ(s_.AcceptClaim(*req,
                           {MakeItem(1, 0, 1), MakeItem(2, 0, 1), MakeItem(3, 0, 1),
                            MakeItem(4, 0, 1), MakeItem(5, 0, 1)},
                           kT0, &keep),
            5);
  ASSERT_EQ(keep.items.size(), 2u);
  EXPECT_EQ(keep.items[0].id, 1);
  EXPECT_EQ(s_.queued(), 2u);  // {3, 4}, {5}
  EXPECT_EQ(s_.held(), 5) << "the kept batch counts as being processed";
  EXPECT_FALSE(s_.Drained({0}));
  s_.Release(keep.items);
  Batch b;
  ASSERT_TRUE(s_.TakeQueued(&b));
  EXPECT_EQ(b.items.size(), 2u);
  EXPECT_EQ(b.items[0].id, 3);
  EXPECT_FALSE(s_.Drained({0}));
  s_.Release(b.items);
  EXPECT_TRUE(s_.Drained({0})) << "queued items are not being processed";
  EXPECT_EQ(s_.held(), 1);
}

// A claim ahead tops the queue up to the idle workers plus the finishing
// one, and the finishing items are no longer in flight.
TEST_F(ClaimSchedulerTest, AClaimAheadFeedsTheIdleWorkersAndTheFinishingOne) {
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 2, {}, kT0);
  ASSERT_TRUE(req.has_value());
  s_.AcceptClaim(*req, {MakeItem(1, 0, 1), MakeItem(2, 0, 1), MakeItem(3, 0, 1), MakeItem(4, 0, 1)},
                 kT0);
  Batch mine;
  ASSERT_TRUE(s_.TakeQueued(&mine));  // one batch left queued
  EXPECT_FALSE(s_.ClaimAheadBatches(0, mine.items).has_value())
      << "the queued batch is the finishing worker's next";
  ASSERT_EQ(s_.ClaimAheadBatches(2, mine.items), 2) << "2 idle + 1 finishing - 1 queued";
  std::optional<ClaimRequest> ahead = s_.BeginClaim(kMe, 2, mine.items, kT0);
  ASSERT_TRUE(ahead.has_value());
  EXPECT_EQ(ahead->limit, 4);
  EXPECT_EQ(ahead->in_flight.size(), 2u) << "3 and 4; not the finishing 1 and 2";
  EXPECT_FALSE(s_.ClaimAheadBatches(2, mine.items).has_value()) << "one claim at a time";
}

TEST_F(ClaimSchedulerTest, SuspectsRunAloneOneAtATime) {
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  ASSERT_TRUE(req->include_suspect);
  const Item suspect = MakeItem(7, 0, 1, /*suspect=*/true);
  s_.AcceptClaim(*req, {MakeItem(1, 0, 1), suspect}, kT0);
  ASSERT_EQ(s_.queued(), 2u);
  Batch first;
  ASSERT_TRUE(s_.TakeQueued(&first));
  ASSERT_EQ(first.items.size(), 1u);
  EXPECT_EQ(first.items[0].id, 7) << "the suspect goes first, alone";
  EXPECT_TRUE(first.isolate);
  // While it is in flight no claim probes for another...
  s_.Notice(0);
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_FALSE(req->include_suspect);
  s_.FailClaim();
  // ...but its own ack looks for the next one, even with the queue full.
  ASSERT_EQ(s_.ClaimAheadBatches(0, first.items), 0) << "the suspect probe only";
  std::optional<ClaimRequest> ahead = s_.BeginClaim(kMe, 0, first.items, kT0);
  ASSERT_TRUE(ahead.has_value());
  EXPECT_TRUE(ahead->parts.empty());
  EXPECT_TRUE(ahead->include_suspect);
  s_.AcceptClaim(*ahead, {}, kT0);  // none left
  s_.Release(first.items);
  // No suspect pending and none in flight: a claim that reads on from the
  // cursor does not probe.
  ClaimAndAccept(kT0, {MakeItem(2, 0, 1), MakeItem(3, 0, 1)});
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_TRUE(req->parts[0].after.has_value());
  EXPECT_FALSE(req->include_suspect);
}

// A batch in flight when its part was lost and taken back at a new epoch (a
// lapse, a re-join of the same consumer): the new tenure's read from the
// head and its suspect probe skip the batch's items, which are in flight;
// the batch's Finish is then fenced, and the takeover had marked them
// abandoned. Their release must bring a read from the head and a probe, or
// they wait for good while the part has a live owner
// (HandlerFault.ExecWorkersAndTheirChildrenSigkilledMidBatch once left 10
// of 3,000 so for 3 minutes).
TEST_F(ClaimSchedulerTest, AnEarlierTenuresBatchReleasedBringsAReadFromTheHeadAndAProbe) {
  const Batch old = RunningWhenPartZeroCameBack({1, 2}, Epoch{2});
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_TRUE(req->include_suspect);
  EXPECT_EQ(req->in_flight.size(), 2u) << "the old batch is still being processed";
  s_.AcceptClaim(*req, {}, kT0);  // nothing found: both skipped
  EXPECT_FALSE(s_.WantClaim(kT0)) << "read to its end, no suspect found";
  s_.Release(old.items);  // its Finish was fenced
  EXPECT_TRUE(s_.WantClaim(kT0));
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  ASSERT_EQ(PartsOf(*req), std::vector<int>{0});
  EXPECT_FALSE(req->parts[0].after.has_value()) << "from the head";
  EXPECT_TRUE(req->include_suspect);
  EXPECT_TRUE(req->in_flight.empty());
}

// A part re-adopted at the same epoch after a lapse, with a batch of the
// earlier tenure still running: its items are not abandoned, so a read finds
// them ready. The new tenure's cursor says nothing of them: until they are
// released every item read is checked against what is in flight, or one
// could run twice at once.
TEST_F(ClaimSchedulerTest, AnEarlierTenuresItemsInFlightAreSkippedPastTheNewCursorToo) {
  const Batch old = RunningWhenPartZeroCameBack({5, 9}, Epoch{1});
  // The head read takes items behind the running ones (retries come due).
  ClaimRequest first = ClaimAndAccept(kT0, {MakeItem(1, 0, 1), MakeItem(2, 0, 1)});
  EXPECT_FALSE(first.parts[0].cursor.has_value());
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  ASSERT_TRUE(req->parts[0].after.has_value());
  EXPECT_EQ(*req->parts[0].after, (ItemKey{0, 2})) << "on from the new cursor";
  EXPECT_FALSE(req->parts[0].cursor.has_value()) << "5 and 9 are past it and in flight";
  EXPECT_EQ(req->in_flight.size(), 4u);
  s_.AcceptClaim(*req, {}, kT0);
  s_.Release(old.items);
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_FALSE(req->parts[0].after.has_value()) << "released: the part is read from its head";
  s_.AcceptClaim(*req, {MakeItem(12, 0, 1)}, kT0);
  Batch b;
  while (s_.TakeQueued(&b)) s_.Release(b.items);
  s_.Notice(0, ItemKey{0, 20});
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  ASSERT_TRUE(req->parts[0].cursor.has_value()) << "nothing of the earlier tenure in flight";
  EXPECT_EQ(*req->parts[0].cursor, (ItemKey{0, 12}));
}

// The claimer's claim began while a suspect was in flight, so it could not
// probe; the suspect finished during it, so its ack could not claim ahead.
// The next probe must still come: from WantClaim, not from a notice or a poll
// (after a poll that finds nothing the claimer waits for what comes due, and
// abandoned items come due at no time it waits for).
TEST_F(ClaimSchedulerTest, ASuspectFinishedDuringAClaimThatCouldNotProbeIsFollowedByAProbe) {
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  s_.AcceptClaim(*req, {MakeItem(7, 0, 1, /*suspect=*/true)}, kT0);
  Batch suspect;
  ASSERT_TRUE(s_.TakeQueued(&suspect));
  EXPECT_FALSE(s_.WantClaim(kT0)) << "one suspect at a time, and the part was read to its end";
  s_.Notice(0);
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_FALSE(req->include_suspect) << "the suspect's slot is taken";
  EXPECT_FALSE(s_.ClaimAheadBatches(0, suspect.items).has_value()) << "a claim is under way";
  s_.Release(suspect.items);
  s_.AcceptClaim(*req, {}, kT0);
  ASSERT_TRUE(s_.WantClaim(kT0)) << "the next suspect is due a probe";
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_TRUE(req->include_suspect);
  s_.AcceptClaim(*req, {}, kT0);
  EXPECT_FALSE(s_.WantClaim(kT0)) << "the probe found none: nothing more is due";
}

TEST_F(ClaimSchedulerTest, ADroppedSuspectFreesTheSlot) {
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  s_.AcceptClaim(*req, {MakeItem(7, 0, 1, /*suspect=*/true)}, kT0);
  s_.Remove({0});
  EXPECT_EQ(s_.queued(), 0u);
  EXPECT_EQ(s_.held(), 0);
  s_.Assign({{0, Epoch{2}}});
  req = s_.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_TRUE(req->include_suspect);
  EXPECT_TRUE(req->in_flight.empty());
}

TEST(ClaimScheduler, APartRevokedWhileAClaimIsUnderWayGetsNoneOfItsItems) {
  ClaimSchedulerOptions o = Options();
  o.batch = 10;
  ClaimScheduler s(o);
  s.Assign({{0, Epoch{1}}, {1, Epoch{1}}, {2, Epoch{1}}});
  std::optional<ClaimRequest> req = s.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  s.Remove({1});
  EXPECT_FALSE(s.Drained({1})) << "the claim under way may still bring part 1's items";
  s.Remove({2});
  s.Assign({{2, Epoch{5}}});  // taken back at once, at a new epoch
  EXPECT_EQ(s.AcceptClaim(*req, {MakeItem(1, 0, 1), MakeItem(2, 1, 1), MakeItem(3, 2, 1)}, kT0), 1);
  EXPECT_TRUE(s.Drained({1}));
  EXPECT_EQ(s.held(), 1);
  Batch b;
  ASSERT_TRUE(s.TakeQueued(&b));
  ASSERT_EQ(b.items.size(), 1u);
  EXPECT_EQ(b.items[0].id, 1);
  EXPECT_TRUE(s.HoldsAny(b.items));
  EXPECT_FALSE(s.HoldsAny({MakeItem(3, 2, 1)})) << "claimed under the old epoch";
  // Part 2's new tenure starts from its head, with nothing in flight there.
  req = s.BeginClaim(kMe, 1, b.items, kT0);
  ASSERT_TRUE(req.has_value());
  for (const ClaimPart& cp : req->parts) {
    if (cp.part == 2) {
      EXPECT_EQ(cp.epoch, Epoch{5});
      EXPECT_FALSE(cp.after.has_value());
    }
  }
  EXPECT_TRUE(req->in_flight.empty());
}

TEST_F(ClaimSchedulerTest, ARemovedPartsQueuedItemsAreDroppedButItsBusyOnesDrainFirst) {
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 2, {}, kT0);
  ASSERT_TRUE(req.has_value());
  s_.AcceptClaim(*req, {MakeItem(1, 0, 1), MakeItem(2, 0, 1), MakeItem(3, 0, 1)}, kT0);
  Batch busy;
  ASSERT_TRUE(s_.TakeQueued(&busy));
  s_.Remove({0});
  EXPECT_EQ(s_.queued(), 0u);
  EXPECT_EQ(s_.held(), 2) << "being processed";
  EXPECT_FALSE(s_.Drained({0}));
  EXPECT_FALSE(s_.HoldsAny(busy.items));
  EXPECT_FALSE(s_.WantClaim());
  s_.Release(busy.items);
  EXPECT_TRUE(s_.Drained({0}));
  EXPECT_EQ(s_.held(), 0);
}

}  // namespace
}  // namespace partq

namespace partq {
namespace {

// Rate limits (SetRate): 160 items/s over a 16-part queue is 10 a second per
// part; a part keeps at most 200 ms of that (2 items).
class RateTest : public ClaimSchedulerTest {
 protected:
  RateTest() : ClaimSchedulerTest({0, 1}) { s_.SetRate(160, 16); }

  // The first claim at `t`: it reads no part (their budgets start counting
  // now), only probes for suspects, which finds none.
  void StartBudgets(absl::Time t) {
    std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 50, {}, t);
    ASSERT_TRUE(req.has_value());
    EXPECT_TRUE(req->parts.empty());
    EXPECT_TRUE(req->include_suspect);
    s_.AcceptClaim(*req, {}, t);
  }

  // Claims from kT0 on, every 7 ms for 10 s, as fast as it is allowed; the
  // parts in `full` always have items, the others none. Returns the items
  // claimed.
  int64_t ClaimForTenSeconds(const std::set<int>& full) {
    int64_t next_id = 1, claimed = 0;
    for (absl::Time t = kT0; t <= kT0 + absl::Seconds(10); t += absl::Milliseconds(7)) {
      if (!s_.WantClaim(t)) continue;
      std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 50, {}, t);
      EXPECT_TRUE(req.has_value());
      if (!req) return claimed;
      std::vector<Item> got;
      for (const ClaimPart& p : req->parts) {
        if (full.count(p.part) == 0) continue;
        std::vector<Item> items = Items(p.part, next_id, p.limit);
        next_id += p.limit;
        got.insert(got.end(), items.begin(), items.end());
      }
      claimed += static_cast<int64_t>(got.size());
      s_.AcceptClaim(*req, got, t);
      Batch b;
      while (s_.TakeQueued(&b)) s_.Release(b.items);
    }
    return claimed;
  }

  // Items ids from..from+n-1 of `part` (epoch 1).
  static std::vector<Item> Items(int part, int64_t from, int n) {
    std::vector<Item> out;
    for (int i = 0; i < n; ++i) out.push_back(MakeItem(from + i, part, 1));
    return out;
  }
};

TEST_F(RateTest, APartsBudgetStartsEmptyAndGrowsAtItsShareUpToTheBurst) {
  // The first look only starts the budgets: nothing to read with.
  EXPECT_TRUE(s_.WantClaim(kT0));
  StartBudgets(kT0);
  EXPECT_FALSE(s_.WantClaim(kT0));
  EXPECT_FALSE(s_.BeginClaim(kMe, 50, {}, kT0).has_value());
  EXPECT_EQ(s_.RateReadyAt(kT0), kT0 + absl::Milliseconds(100));  // one item at 10/s
  EXPECT_FALSE(s_.WantClaim(kT0 + absl::Milliseconds(99)));
  EXPECT_TRUE(s_.WantClaim(kT0 + absl::Milliseconds(100)));
  // A second later each part may take only its burst (2), however long it waited.
  const absl::Time t1 = kT0 + absl::Seconds(1);
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 50, {}, t1);
  ASSERT_TRUE(req.has_value());
  ASSERT_EQ(req->parts.size(), 2u);
  for (const ClaimPart& p : req->parts) EXPECT_EQ(p.limit, 2);
  s_.AcceptClaim(*req, {}, t1);  // neither had items: the budget goes back
  EXPECT_EQ(s_.RateReadyAt(t1), absl::InfiniteFuture()) << "read to their ends: nothing wanted";
  s_.Notice(-1);
  req = s_.BeginClaim(kMe, 50, {}, t1);
  ASSERT_TRUE(req.has_value());
  for (const ClaimPart& p : req->parts) EXPECT_EQ(p.limit, 2) << "the unused budget was kept";
}

TEST_F(RateTest, OverTenSecondsAPartClaimsItsShareAndNoMore) {
  // Claims as fast as they are allowed, each part always full of items.
  StartBudgets(kT0);
  const int64_t claimed = ClaimForTenSeconds({0, 1});
  // 2 parts at 10/s for 10 s, give or take the last step.
  EXPECT_GE(claimed, 198);
  EXPECT_LE(claimed, 200);
}

// A part with items spends what the session's idle parts saved: keyless
// items come in runs of 32 to one part (kKeylessRun), and a session's share
// is its parts' together.
TEST_F(RateTest, AHungryPartSpendsWhatItsIdleSiblingsSaved) {
  StartBudgets(kT0);
  const absl::Time t1 = kT0 + absl::Seconds(1);
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 50, {}, t1);
  ASSERT_TRUE(req.has_value());
  ASSERT_EQ(PartsOf(*req), (std::vector<int>{0, 1}));
  for (const ClaimPart& p : req->parts) ASSERT_EQ(p.limit, 2);
  // Part 0 fills its limit (more to read); part 1 has nothing: it is idle.
  s_.AcceptClaim(*req, Items(0, 1, 2), t1);
  Batch b;
  while (s_.TakeQueued(&b)) s_.Release(b.items);
  const absl::Time t2 = t1 + absl::Seconds(1);
  EXPECT_TRUE(s_.WantClaim(t2));
  req = s_.BeginClaim(kMe, 50, {}, t2);
  ASSERT_TRUE(req.has_value());
  ASSERT_EQ(PartsOf(*req), std::vector<int>{0});
  EXPECT_EQ(req->parts[0].limit, 4) << "its burst and part 1's";
  // It took 3 of the 4: the one it did not use stays the session's.
  s_.AcceptClaim(*req, Items(0, 3, 3), t2);
  while (s_.TakeQueued(&b)) s_.Release(b.items);
  s_.Notice(0);
  req = s_.BeginClaim(kMe, 50, {}, t2);
  ASSERT_TRUE(req.has_value());
  ASSERT_EQ(PartsOf(*req), std::vector<int>{0});
  EXPECT_EQ(req->parts[0].limit, 1) << "what the last claim gave back";
  s_.AcceptClaim(*req, {}, t2);
  EXPECT_FALSE(s_.WantClaim(t2)) << "read to its end: nothing wanted";
  EXPECT_EQ(s_.RateReadyAt(t2), absl::InfiniteFuture());
}

// A loan a read did not use goes back to its lenders, and no part keeps more
// than its burst: a session never saves more than its parts' bursts.
TEST_F(RateTest, UnusedLoansGoBackAndNoPartKeepsMoreThanItsBurst) {
  StartBudgets(kT0);
  absl::Time t = kT0;
  for (int i = 0; i < 50; ++i) {  // part 0 noticed every 200 ms, never with an item
    t += absl::Milliseconds(200);
    s_.Notice(0);
    std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 50, {}, t);
    ASSERT_TRUE(req.has_value());
    s_.AcceptClaim(*req, {}, t);
  }
  s_.Notice(-1);
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 50, {}, t);
  ASSERT_TRUE(req.has_value());
  ASSERT_EQ(req->parts.size(), 2u);
  for (const ClaimPart& p : req->parts) EXPECT_EQ(p.limit, 2) << "part " << p.part;
}

TEST_F(RateTest, OverTenSecondsOnePartWithItemsClaimsTheSessionsShare) {
  StartBudgets(kT0);
  const int64_t claimed = ClaimForTenSeconds({0});  // part 1 never has an item
  // Both parts' 10/s for 10 s, less what part 1 saved past its burst at the
  // start, and no more than that with both bursts.
  EXPECT_GE(claimed, 190);
  EXPECT_LE(claimed, 204);
}

// A grow (Store::GrowParts) spreads the same limit over more parts: each
// part's share shrinks, and budgets start again from nothing, so what a part
// saved at the old share is not spent at the new one.
TEST_F(RateTest, TheSameLimitOverAGrownPartCountIsASmallerShareFromNothing) {
  StartBudgets(kT0);
  ASSERT_EQ(s_.RateReadyAt(kT0), kT0 + absl::Milliseconds(100));  // 160/s over 16 parts
  s_.SetRate(160, 64);
  EXPECT_EQ(s_.rate(), 160);
  EXPECT_TRUE(s_.WantClaim(kT0)) << "budgets not counted again yet";
  EXPECT_FALSE(s_.BeginClaim(kMe, 50, {}, kT0).has_value()) << "the look only starts them";
  EXPECT_EQ(s_.RateReadyAt(kT0), kT0 + absl::Milliseconds(400)) << "2.5/s a part";
}

TEST_F(RateTest, APartHandedOffAndBackStartsFromNothing) {
  StartBudgets(kT0);
  const absl::Time t1 = kT0 + absl::Seconds(1);
  ASSERT_TRUE(s_.WantClaim(t1));
  s_.Remove({0});
  s_.Assign({{0, Epoch{2}}});
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 50, {}, t1);
  ASSERT_TRUE(req.has_value());
  ASSERT_EQ(PartsOf(*req), std::vector<int>{1}) << "part 0's new tenure has no budget yet";
}

TEST_F(RateTest, AFailedClaimGivesItsBudgetBackAndNoLimitMeansNone) {
  StartBudgets(kT0);
  const absl::Time t1 = kT0 + absl::Seconds(1);
  std::optional<ClaimRequest> req = s_.BeginClaim(kMe, 50, {}, t1);
  ASSERT_TRUE(req.has_value());
  s_.FailClaim();
  req = s_.BeginClaim(kMe, 50, {}, t1);
  ASSERT_TRUE(req.has_value());
  for (const ClaimPart& p : req->parts) EXPECT_EQ(p.limit, 2);
  s_.FailClaim();
  s_.SetRate(std::nullopt, 16);
  req = s_.BeginClaim(kMe, 50, {}, t1);
  ASSERT_TRUE(req.has_value());
  for (const ClaimPart& p : req->parts) EXPECT_EQ(p.limit, 100);
  EXPECT_EQ(s_.RateReadyAt(t1), absl::InfiniteFuture());
}

// A claim bounded by bytes (issue 48) that came back at its bound stopped there, so its part
// is read on; one that came back under it read the part to its end.
TEST(ClaimSchedulerBytes, AClaimThatReachedItsByteBoundLeavesItsPartToBeReadOn) {
  ClaimSchedulerOptions o = Options();
  o.batch = 100;
  o.max_claim_bytes = 2000;
  ClaimScheduler s(o);
  s.Assign({{0, Epoch{1}}});
  auto sized = [](int64_t id, size_t bytes) {
    Item i = MakeItem(id, 0, 1);
    i.payload.assign(bytes, 'x');
    return i;
  };
  std::optional<ClaimRequest> req = s.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(req->max_bytes, 2000);
  s.AcceptClaim(*req, {sized(1, 1500), sized(2, 1500)}, kT0);
  EXPECT_TRUE(s.WantClaim(kT0)) << "two items of 100 wanted, but the claim reached its bytes";
  req = s.BeginClaim(kMe, 1, {}, kT0);
  ASSERT_TRUE(req.has_value());
  ASSERT_TRUE(req->parts[0].after.has_value());
  EXPECT_EQ(req->parts[0].after->id, 2) << "read on from the last item taken";
  s.AcceptClaim(*req, {sized(3, 10)}, kT0);
  EXPECT_FALSE(s.WantClaim(kT0)) << "under the bound and the count: the part was read to its end";
}

}  // namespace
}  // namespace partq
