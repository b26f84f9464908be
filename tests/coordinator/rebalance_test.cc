// coordinator/rebalance.h: the reconcile and plan steps of a round as pure
// functions, without a store, a clock or a thread.
#include "coordinator/rebalance.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace partq {
namespace {

const SessionId kMe{"b"};

GroupView View(std::vector<std::string> members, std::vector<PartOwner> owners) {
  GroupView v;
  for (auto& m : members) v.members.push_back(SessionId{m});
  v.owners = std::move(owners);
  return v;
}

PartOwner Owner(int part, const std::string& session, int64_t epoch = 1) {
  return {part, SessionId{session}, Epoch{epoch}};
}

TEST(Reconcile, PartsHeldAtTheViewsEpochAreKept) {
  const auto r =
      Reconcile(kMe, {{1, Epoch{4}}, {2, Epoch{5}}},
                View({"a", "b"}, {Owner(1, "b", 4), Owner(2, "b", 5), Owner(3, "a")}), 4);
  EXPECT_TRUE(r.lost.empty());
  EXPECT_TRUE(r.adopted.empty());
}

// Another member expired us and took the part, or no one owns it now.
TEST(Reconcile, PartsTheViewGivesToNoneOrOthersAreLost) {
  const auto r =
      Reconcile(kMe, {{1, Epoch{4}}, {2, Epoch{5}}}, View({"a", "b"}, {Owner(1, "a", 9)}), 4);
  EXPECT_EQ(r.lost, (std::vector<OwnedPart>{{1, Epoch{4}}, {2, Epoch{5}}}));
  EXPECT_TRUE(r.adopted.empty());
}

// A static re-join fenced the old epoch: the part is lost at the old epoch
// and adopted at the new one, so the listener's acks under the old one stop.
TEST(Reconcile, APartHeldAtAnotherEpochIsLostAndAdoptedAgain) {
  const auto r = Reconcile(kMe, {{1, Epoch{4}}}, View({"b"}, {Owner(1, "b", 6)}), 4);
  EXPECT_EQ(r.lost, (std::vector<OwnedPart>{{1, Epoch{4}}}));
  EXPECT_EQ(r.adopted, (std::vector<OwnedPart>{{1, Epoch{6}}}));
}

TEST(Reconcile, PartsOursInTheViewButNotHeldAreAdopted) {
  const auto r = Reconcile(kMe, {}, View({"b"}, {Owner(0, "b", 3), Owner(2, "b", 2)}), 4);
  EXPECT_TRUE(r.lost.empty());
  EXPECT_EQ(r.adopted, (std::vector<OwnedPart>{{0, Epoch{3}}, {2, Epoch{2}}}));
}

TEST(Reconcile, OwnersOutsideTheQueuesPartsAreIgnored) {
  const auto r = Reconcile(kMe, {}, View({"b"}, {Owner(-1, "b"), Owner(4, "b")}), 4);
  EXPECT_TRUE(r.adopted.empty());
}

TEST(PlanRound, ALoneMemberAcquiresEveryFreePart) {
  const auto plan = PlanRound(kMe, View({"b"}, {}), 4, AssignmentKind::kLexical);
  EXPECT_TRUE(plan.release.empty());
  EXPECT_EQ(plan.wanted, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(plan.acquire, plan.wanted);
  EXPECT_FALSE(plan.pending());
}

// A group read can race our own heartbeat and miss our row: we are alive,
// so we plan as a member.
TEST(PlanRound, AMemberMissingFromTheViewPlansAsOne) {
  const auto plan = PlanRound(kMe, View({"a", "c"}, {}), 6, AssignmentKind::kLexical);
  EXPECT_EQ(plan.wanted, (std::vector<int>{2, 3}));
}

// The seed example: a and c hold 0-3 and 4-7, b joins between them.
TEST(PlanRound, AJoiningMemberWaitsForPartsOthersMustReleaseFirst) {
  std::vector<PartOwner> owners;
  for (int p = 0; p < 8; ++p) owners.push_back(Owner(p, p < 4 ? "a" : "c"));
  const GroupView view = View({"a", "b", "c"}, owners);
  const auto b = PlanRound(kMe, view, 8, AssignmentKind::kLexical);
  EXPECT_TRUE(b.release.empty());
  EXPECT_EQ(b.wanted, (std::vector<int>{2, 3, 4}));
  EXPECT_TRUE(b.acquire.empty());
  EXPECT_TRUE(b.pending());
  const auto a = PlanRound(SessionId{"a"}, view, 8, AssignmentKind::kLexical);
  EXPECT_EQ(a.release, (std::vector<int>{2, 3}));
  EXPECT_TRUE(a.wanted.empty());
  const auto c = PlanRound(SessionId{"c"}, view, 8, AssignmentKind::kLexical);
  EXPECT_EQ(c.release, (std::vector<int>{4}));
}

// Once a released them, b acquires what is free and still waits for c.
TEST(PlanRound, FreePartsAreAcquiredAndTheRestStayPending) {
  std::vector<PartOwner> owners;
  for (int p : {0, 1}) owners.push_back(Owner(p, "a"));
  for (int p : {4, 5, 6, 7}) owners.push_back(Owner(p, "c"));
  const auto b = PlanRound(kMe, View({"a", "b", "c"}, owners), 8, AssignmentKind::kLexical);
  EXPECT_EQ(b.wanted, (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(b.acquire, (std::vector<int>{2, 3}));
  EXPECT_TRUE(b.pending());
}

// A member that is gone (no longer in the view's members) releases nothing;
// its parts are wanted but taken only once its row expires with them.
TEST(PlanRound, PartsOfAGoneMemberWaitForItsExpiry) {
  const auto b =
      PlanRound(kMe, View({"b"}, {Owner(0, "x"), Owner(1, "x")}), 2, AssignmentKind::kLexical);
  EXPECT_EQ(b.wanted, (std::vector<int>{0, 1}));
  EXPECT_TRUE(b.acquire.empty());
  EXPECT_TRUE(b.pending());
}

TEST(PlanRound, StickyJoinTakesOnlyItsShareAndNobodyElseMoves) {
  std::vector<PartOwner> owners;
  for (int p = 0; p < 12; ++p) owners.push_back(Owner(p, p < 6 ? "a" : "c"));
  const GroupView view = View({"a", "b", "c"}, owners);
  const auto b = PlanRound(kMe, view, 12, AssignmentKind::kSticky);
  EXPECT_EQ(b.wanted.size(), 4u);
  const auto a = PlanRound(SessionId{"a"}, view, 12, AssignmentKind::kSticky);
  const auto c = PlanRound(SessionId{"c"}, view, 12, AssignmentKind::kSticky);
  EXPECT_EQ(a.release.size() + c.release.size(), 4u);
  EXPECT_TRUE(a.wanted.empty());
  EXPECT_TRUE(c.wanted.empty());
}

}  // namespace
}  // namespace partq
