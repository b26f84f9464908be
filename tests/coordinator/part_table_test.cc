// coordinator/part_table.h: one test per valid transition, and invalid ones
// caught (the process aborts, as for a session state).
#include "coordinator/part_table.h"

#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace partq {
namespace {

constexpr Epoch kEpoch{7};

// A table with part 3 in `state`, reached through valid transitions.
PartTable With(PartState state) {
  PartTable t;
  switch (state) {
    case PartState::kUnowned:
      break;
    case PartState::kOwned:
      t.Set(3, PartState::kOwned, kEpoch);
      break;
    case PartState::kRevoking:
      t.Set(3, PartState::kOwned, kEpoch);
      t.Set(3, PartState::kRevoking);
      break;
    case PartState::kReleased:
      t.Set(3, PartState::kOwned, kEpoch);
      t.Set(3, PartState::kRevoking);
      t.Set(3, PartState::kReleased);
      break;
    case PartState::kLost:
      t.Set(3, PartState::kOwned, kEpoch);
      t.Set(3, PartState::kLost);
      break;
  }
  EXPECT_EQ(t.state(3), state);
  return t;
}

TEST(PartTable, AcquiringAnUnownedPartOwnsItAtItsEpoch) {
  PartTable t = With(PartState::kUnowned);
  t.Set(3, PartState::kOwned, Epoch{9});
  EXPECT_EQ(t.state(3), PartState::kOwned);
  EXPECT_EQ(t.EpochOf(3), Epoch{9});
}

TEST(PartTable, AReleasedPartCanBeAcquiredAgainAtANewEpoch) {
  PartTable t = With(PartState::kReleased);
  EXPECT_EQ(t.EpochOf(3), std::nullopt);
  t.Set(3, PartState::kOwned, Epoch{9});
  EXPECT_EQ(t.EpochOf(3), Epoch{9});
}

TEST(PartTable, ALostPartCanBeAdoptedAgainAtANewEpoch) {
  PartTable t = With(PartState::kLost);
  EXPECT_EQ(t.EpochOf(3), std::nullopt);
  t.Set(3, PartState::kOwned, Epoch{9});
  EXPECT_EQ(t.EpochOf(3), Epoch{9});
}

// The release failed after the revoke: the part is ours again, same epoch.
TEST(PartTable, ARevokingPartWhoseReleaseFailedIsOwnedAgain) {
  PartTable t = With(PartState::kRevoking);
  t.Set(3, PartState::kOwned, kEpoch);
  EXPECT_EQ(t.state(3), PartState::kOwned);
  EXPECT_EQ(t.EpochOf(3), kEpoch);
}

// While the listener drains it, the part is still ours.
TEST(PartTable, RevokingAPartKeepsItHeld) {
  PartTable t = With(PartState::kOwned);
  t.Set(3, PartState::kRevoking);
  EXPECT_EQ(t.EpochOf(3), kEpoch);
  EXPECT_EQ(t.Held(), (std::vector<OwnedPart>{{3, kEpoch}}));
}

TEST(PartTable, ReleasingARevokedPartLetsItGo) {
  PartTable t = With(PartState::kRevoking);
  t.Set(3, PartState::kReleased);
  EXPECT_EQ(t.EpochOf(3), std::nullopt);
  EXPECT_TRUE(t.Held().empty());
}

TEST(PartTable, LosingAnOwnedPartLetsItGo) {
  PartTable t = With(PartState::kOwned);
  t.Set(3, PartState::kLost);
  EXPECT_EQ(t.EpochOf(3), std::nullopt);
  EXPECT_TRUE(t.Held().empty());
}

TEST(PartTable, ValidPreviousAllowsExactlyTheDrawnTransitions) {
  using S = PartState;
  const std::set<std::pair<S, S>> valid = {
      {S::kUnowned, S::kOwned},  {S::kReleased, S::kOwned}, {S::kLost, S::kOwned},
      {S::kRevoking, S::kOwned}, {S::kOwned, S::kRevoking}, {S::kRevoking, S::kReleased},
      {S::kOwned, S::kLost},
  };
  const S all[] = {S::kUnowned, S::kOwned, S::kRevoking, S::kReleased, S::kLost};
  for (S from : all) {
    for (S to : all) {
      EXPECT_EQ(PartTable::ValidPrevious(from, to), valid.count({from, to}) > 0)
          << PartStateName(from) << " -> " << PartStateName(to);
    }
  }
}

TEST(PartTable, HeldListsOwnedAndRevokingPartsByPart) {
  PartTable t;
  t.Set({{5, Epoch{1}}, {1, Epoch{2}}, {3, Epoch{3}}, {8, Epoch{4}}}, PartState::kOwned);
  t.Set(3, PartState::kRevoking);
  t.Set(8, PartState::kLost);
  EXPECT_EQ(t.Held(), (std::vector<OwnedPart>{{1, Epoch{2}}, {3, Epoch{3}}, {5, Epoch{1}}}));
  EXPECT_EQ(t.HeldOf({5, 8, 9, 1}), (std::vector<OwnedPart>{{5, Epoch{1}}, {1, Epoch{2}}}));
}

using PartTableDeathTest = ::testing::Test;

// A part we hold is never acquired twice: that would hide a lost epoch.
TEST_F(PartTableDeathTest, AcquiringAPartWeOwnIsABug) {
  PartTable t = With(PartState::kOwned);
  EXPECT_DEATH(t.Set(3, PartState::kOwned, Epoch{9}), "invalid transition owned -> owned");
}

TEST_F(PartTableDeathTest, RevokingAPartWeDoNotOwnIsABug) {
  for (PartState s : {PartState::kUnowned, PartState::kReleased, PartState::kLost}) {
    PartTable t = With(s);
    EXPECT_DEATH(t.Set(3, PartState::kRevoking), "invalid transition") << PartStateName(s);
  }
}

TEST_F(PartTableDeathTest, ReleasingAPartThatWasNotRevokedIsABug) {
  PartTable t = With(PartState::kOwned);
  EXPECT_DEATH(t.Set(3, PartState::kReleased), "invalid transition owned -> released");
}

// A revoke runs to its end before anything can lose the part.
TEST_F(PartTableDeathTest, LosingAPartMidRevokeIsABug) {
  PartTable t = With(PartState::kRevoking);
  EXPECT_DEATH(t.Set(3, PartState::kLost), "invalid transition revoking -> lost");
}

TEST_F(PartTableDeathTest, NothingGoesBackToUnowned) {
  PartTable t = With(PartState::kLost);
  EXPECT_DEATH(t.Set(3, PartState::kUnowned), "invalid transition lost -> unowned");
}

}  // namespace
}  // namespace partq
