#include "partitioner/assign.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace partq {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using Ownership = std::vector<std::optional<std::string>>;

const std::vector<int> kPartCounts = {1, 2, 3, 7, 8, 64, 100, 1000, 1024, 4095, 4096};
const std::vector<int> kSessionCounts = {1, 2, 3, 5, 7, 13, 50, 64, 99, 250, 500};

// A uuid-like id; collisions are vanishingly unlikely but are filtered anyway.
std::string RandomId(std::mt19937& rng) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(32, '0');
  for (char& c : id) c = kHex[rng() % 16];
  return id;
}

std::vector<std::string> SortedIds(int n, std::mt19937& rng) {
  std::set<std::string> ids;
  while (static_cast<int>(ids.size()) < n) ids.insert(RandomId(rng));
  return {ids.begin(), ids.end()};
}

std::vector<int> Counts(const Assignment& owner, int sessions) {
  std::vector<int> counts(sessions, 0);
  for (int o : owner) {
    if (o >= 0) ++counts[o];
  }
  return counts;
}

// Every part has an owner in [0, S) and counts are within +-1 (I6).
void ExpectBalanced(const Assignment& owner, int sessions, int parts) {
  ASSERT_EQ(static_cast<int>(owner.size()), parts);
  for (int p = 0; p < parts; ++p) {
    ASSERT_GE(owner[p], 0) << "part " << p << " is free";
    ASSERT_LT(owner[p], sessions) << "part " << p;
  }
  const std::vector<int> counts = Counts(owner, sessions);
  const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
  EXPECT_EQ(*lo, parts / sessions) << "P=" << parts << " S=" << sessions;
  EXPECT_LE(*hi - *lo, 1) << "P=" << parts << " S=" << sessions;
  EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), 0), parts);
}

Ownership ToIds(const std::vector<std::string>& members, const Assignment& owner) {
  Ownership ids(owner.size());
  for (size_t p = 0; p < owner.size(); ++p) {
    if (owner[p] >= 0) ids[p] = members[owner[p]];
  }
  return ids;
}

// A messy ownership: members' parts, free parts and parts of gone sessions.
Ownership RandomOwnership(const std::vector<std::string>& members, int parts, std::mt19937& rng) {
  const std::vector<std::string> gone = {"gone-1", "gone-2"};
  Ownership current(parts);
  for (auto& owner : current) {
    const unsigned roll = rng() % 10;
    if (roll < 2) continue;  // free
    if (roll < 3) {
      owner = gone[rng() % gone.size()];
    } else if (!members.empty()) {
      // Skewed, so that some members hold far more than their share.
      const size_t m = std::min(rng() % members.size(), rng() % members.size());
      owner = members[m];
    }
  }
  return current;
}

// Membership test for ids in ownership rows (a set: the tests call it a lot).
class Members {
 public:
  explicit Members(const std::vector<std::string>& members)
      : ids_(members.begin(), members.end()) {}
  bool Contains(const std::optional<std::string>& id) const {
    return id.has_value() && ids_.count(*id) > 0;
  }

 private:
  std::set<std::string> ids_;
};

int TotalReleases(const std::map<std::string, MemberPlan>& plans) {
  int n = 0;
  for (const auto& [id, plan] : plans) n += static_cast<int>(plan.release.size());
  return n;
}

int TotalAcquires(const std::map<std::string, MemberPlan>& plans) {
  int n = 0;
  for (const auto& [id, plan] : plans) n += static_cast<int>(plan.acquire.size());
  return n;
}

bool PlanIsEmpty(const std::map<std::string, MemberPlan>& plans) {
  return TotalReleases(plans) == 0 && TotalAcquires(plans) == 0;
}

// Releases first (they free the parts), then acquires.
void ApplyPlan(const std::map<std::string, MemberPlan>& plans, Ownership& current) {
  for (const auto& [id, plan] : plans) {
    for (int p : plan.release) current[p].reset();
  }
  for (const auto& [id, plan] : plans) {
    for (int p : plan.acquire) current[p] = id;
  }
}

// ---------------------------------------------------------------- lexical

TEST(LexicalAssign, TwoSessionsSplitEightPartsInHalves) {
  EXPECT_THAT(LexicalAssign({"session-a", "session-c"}, 8), ElementsAre(0, 0, 0, 0, 1, 1, 1, 1));
}

TEST(LexicalAssign, ThirdSessionTakesMiddleRange) {
  // I8: "session-b" sorts between the two existing sessions.
  EXPECT_THAT(LexicalAssign({"session-a", "session-b", "session-c"}, 8),
              ElementsAre(0, 0, 1, 1, 1, 2, 2, 2));
}

TEST(LexicalAssign, NoMembersLeavesEveryPartFree) {
  EXPECT_THAT(LexicalAssign({}, 4), ElementsAre(-1, -1, -1, -1));
}

TEST(LexicalAssign, ExtraSessionsBeyondPartsOwnNothing) {
  EXPECT_THAT(LexicalAssign({"a", "b", "c", "d", "e"}, 3), ElementsAre(1, 3, 4));
}

TEST(LexicalAssign, MemberOwnsItsFloorRange) {
  std::mt19937 rng(1);
  for (int parts : kPartCounts) {
    for (int sessions : kSessionCounts) {
      const std::vector<std::string> members = SortedIds(sessions, rng);
      const Assignment owner = LexicalAssign(members, parts);
      ASSERT_EQ(static_cast<int>(owner.size()), parts);
      for (int i = 0; i < sessions; ++i) {
        const int64_t begin = int64_t{i} * parts / sessions;
        const int64_t end = int64_t{i + 1} * parts / sessions;
        for (int64_t p = begin; p < end; ++p) ASSERT_EQ(owner[p], i) << "P=" << parts;
      }
      ExpectBalanced(owner, sessions, parts);
    }
  }
}

TEST(LexicalAssign, IsBalancedForEverySessionCountUpTo500) {
  std::mt19937 rng(2);
  for (int parts : {1, 7, 64, 1024, 4096}) {
    const std::vector<std::string> members = SortedIds(500, rng);
    for (int sessions = 1; sessions <= 500; ++sessions) {
      const std::vector<std::string> some(members.begin(), members.begin() + sessions);
      ExpectBalanced(LexicalAssign(some, parts), sessions, parts);
      if (HasFailure()) return;
    }
  }
}

TEST(LexicalAssign, IsDeterministic) {
  std::mt19937 rng(3);
  const std::vector<std::string> members = SortedIds(37, rng);
  const Assignment first = LexicalAssign(members, 1000);
  for (int i = 0; i < 5; ++i) {
    const std::vector<std::string> copy = members;
    EXPECT_EQ(LexicalAssign(copy, 1000), first);
  }
}

// ---------------------------------------------------------------- sticky

TEST(StickyAssign, FromNothingFillsMembersInIdOrder) {
  EXPECT_THAT(StickyAssign({"a", "b", "c"}, Ownership(8), 8), ElementsAre(0, 0, 0, 1, 1, 1, 2, 2));
}

TEST(StickyAssign, NoMembersLeavesEveryPartFree) {
  EXPECT_THAT(StickyAssign({}, Ownership{"a", std::nullopt, "b"}, 3), ElementsAre(-1, -1, -1));
}

TEST(StickyAssign, ThirdSessionTakesOnlyItsShare) {
  // The seed's example in sticky mode: the two holders keep three parts each
  // (the extras go to the largest holders) and the newcomer gets the rest.
  const std::vector<std::string> members = {"session-a", "session-b", "session-c"};
  const Ownership current = {"session-a", "session-a", "session-a", "session-a",
                             "session-c", "session-c", "session-c", "session-c"};
  EXPECT_THAT(StickyAssign(members, current, 8), ElementsAre(0, 0, 0, 1, 2, 2, 2, 1));
}

TEST(StickyAssign, LeaverPartsGoToTheOthers) {
  const std::vector<std::string> members = {"a", "c"};
  const Ownership current = {"a", "a", "a", "b", "b", "c", "c", "c"};
  EXPECT_THAT(StickyAssign(members, current, 8), ElementsAre(0, 0, 0, 0, 1, 1, 1, 1));
}

TEST(StickyAssign, ExtraPartGoesToTheLargestHolderThenSmallestId) {
  // P=7, S=3: quotas 2, 2, 2 plus one extra. "c" holds the most.
  EXPECT_THAT(StickyAssign({"a", "b", "c"}, Ownership{"c", "c", "c", "c", "a", "b", {}}, 7),
              ElementsAre(2, 2, 2, 0, 0, 1, 1));
  // Equal holdings: the extra goes to the smallest id.
  EXPECT_THAT(StickyAssign({"a", "b", "c"}, Ownership(7), 7), ElementsAre(0, 0, 0, 1, 1, 2, 2));
}

TEST(StickyAssign, KeepsLowestPartsWhenOverQuota) {
  EXPECT_THAT(StickyAssign({"a", "b"}, Ownership{{}, "a", {}, "a", "a", "a"}, 6),
              ElementsAre(1, 0, 1, 0, 0, 1));
}

TEST(StickyAssign, ExtraSessionsBeyondPartsOwnAtMostOne) {
  std::mt19937 rng(4);
  for (int parts : {1, 3, 7, 64}) {
    for (int sessions : {parts + 1, parts * 2, 500}) {
      const std::vector<std::string> members = SortedIds(sessions, rng);
      const Assignment owner = StickyAssign(members, RandomOwnership(members, parts, rng), parts);
      ExpectBalanced(owner, sessions, parts);
      for (int count : Counts(owner, sessions)) EXPECT_LE(count, 1);
    }
  }
}

TEST(StickyAssign, IsBalancedFromArbitraryOwnership) {
  std::mt19937 rng(5);
  for (int parts : kPartCounts) {
    for (int sessions : kSessionCounts) {
      const std::vector<std::string> members = SortedIds(sessions, rng);
      ExpectBalanced(StickyAssign(members, RandomOwnership(members, parts, rng), parts), sessions,
                     parts);
      if (HasFailure()) return;
    }
  }
}

// Releases are the parts members give up; no balanced target can need fewer
// than sum(max(0, held - quota)) with the extras on the largest holders.
TEST(StickyAssign, ReleasesOnlyWhatBalanceForces) {
  std::mt19937 rng(6);
  for (int parts : kPartCounts) {
    for (int sessions : kSessionCounts) {
      const std::vector<std::string> members = SortedIds(sessions, rng);
      const Ownership current = RandomOwnership(members, parts, rng);
      std::vector<int> held(sessions, 0);
      for (const auto& id : current) {
        auto it = id ? std::find(members.begin(), members.end(), *id) : members.end();
        if (it != members.end()) ++held[it - members.begin()];
      }
      std::sort(held.begin(), held.end(), std::greater<>());
      int forced = 0;
      for (int i = 0; i < sessions; ++i) {
        forced += std::max(0, held[i] - (parts / sessions + (i < parts % sessions ? 1 : 0)));
      }
      const Assignment target = StickyAssign(members, current, parts);
      EXPECT_EQ(TotalReleases(PlanMoves(members, current, target)), forced)
          << "P=" << parts << " S=" << sessions;
      // And a member that gives up parts keeps exactly its final count of
      // its own parts, acquiring nothing.
      const std::vector<int> counts = Counts(target, sessions);
      std::vector<int> kept(sessions, 0);
      std::vector<bool> released(sessions, false);
      for (int p = 0; p < parts; ++p) {
        if (!current[p]) continue;
        const auto it = std::find(members.begin(), members.end(), *current[p]);
        if (it == members.end()) continue;
        const int was = static_cast<int>(it - members.begin());
        if (target[p] == was) {
          ++kept[was];
        } else {
          released[was] = true;
        }
      }
      for (int m = 0; m < sessions; ++m) {
        if (released[m]) {
          EXPECT_EQ(kept[m], counts[m]) << "member " << m;
        }
      }
    }
  }
}

TEST(StickyAssign, IsDeterministicAndIgnoresHowInputsWereBuilt) {
  std::mt19937 rng(7);
  for (int parts : {7, 1024, 4096}) {
    std::vector<std::string> members = SortedIds(50, rng);
    const Ownership current = RandomOwnership(members, parts, rng);
    const Ownership expected = ToIds(members, StickyAssign(members, current, parts));
    for (int round = 0; round < 5; ++round) {
      // Same ownership, filled in a shuffled part order with fresh strings.
      std::vector<int> order(parts);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      Ownership rebuilt(parts);
      for (int p : order) {
        if (current[p]) rebuilt[p] = std::string(current[p]->begin(), current[p]->end());
      }
      // The member order does not matter either: results are by id.
      std::vector<std::string> shuffled = members;
      std::shuffle(shuffled.begin(), shuffled.end(), rng);
      EXPECT_EQ(ToIds(members, StickyAssign(members, rebuilt, parts)), expected);
      EXPECT_EQ(ToIds(shuffled, StickyAssign(shuffled, rebuilt, parts)), expected);
    }
  }
}

TEST(StickyAssign, BalancedOwnershipIsAFixedPoint) {
  std::mt19937 rng(8);
  for (int parts : kPartCounts) {
    for (int sessions : kSessionCounts) {
      const std::vector<std::string> members = SortedIds(sessions, rng);
      const Assignment lexical = LexicalAssign(members, parts);
      EXPECT_EQ(StickyAssign(members, ToIds(members, lexical), parts), lexical);
      const Assignment sticky = StickyAssign(members, RandomOwnership(members, parts, rng), parts);
      EXPECT_EQ(StickyAssign(members, ToIds(members, sticky), parts), sticky);
    }
  }
}

// Random joins and leaves over P=1024 with up to 50 members, each step
// starting from the previous (fully applied, balanced) assignment.
TEST(StickyAssign, MovesTheMinimumUnderMembershipChurn) {
  constexpr int kParts = 1024;
  constexpr int kMaxMembers = 50;
  std::mt19937 rng(20240611);
  std::vector<std::string> members;
  Ownership current(kParts);
  int joins = 0;
  int leaves = 0;
  for (int step = 0; step < 3000; ++step) {
    const int before = static_cast<int>(members.size());
    const bool join = before == 0 || (before < kMaxMembers && rng() % 2 == 0);
    int leaver_parts = 0;
    if (join) {
      std::string id;
      do {
        id = RandomId(rng);
      } while (std::find(members.begin(), members.end(), id) != members.end());
      members.insert(std::lower_bound(members.begin(), members.end(), id), id);
      ++joins;
    } else {
      const auto it = members.begin() + rng() % members.size();
      leaver_parts = static_cast<int>(std::count(current.begin(), current.end(), *it));
      members.erase(it);
      ++leaves;
    }
    const int sessions = static_cast<int>(members.size());
    const Members live(members);

    const Assignment target = StickyAssign(members, current, kParts);
    if (sessions > 0) {
      ExpectBalanced(target, sessions, kParts);
    } else {
      EXPECT_EQ(target, Assignment(kParts, -1));
    }
    const auto plans = PlanMoves(members, current, target);
    const Ownership next = ToIds(members, target);

    int moved = 0;               // parts that change owner
    int moved_from_members = 0;  // ... taken from a live member
    for (int p = 0; p < kParts; ++p) {
      if (current[p] == next[p]) continue;
      ++moved;
      if (live.Contains(current[p])) ++moved_from_members;
    }
    ASSERT_EQ(moved_from_members, TotalReleases(plans)) << "step " << step;
    if (sessions > 0) {
      ASSERT_EQ(moved, TotalAcquires(plans)) << "step " << step;
    }
    if (join) {
      ASSERT_EQ(moved, kParts / sessions) << "step " << step << " join to S=" << sessions;
    } else {
      ASSERT_EQ(moved, leaver_parts) << "step " << step;
      ASSERT_EQ(TotalReleases(plans), 0) << "step " << step;
    }

    // The leaver's parts stay with it until it expires; model that at once.
    for (auto& owner : current) {
      if (owner && !live.Contains(owner)) owner.reset();
    }
    ApplyPlan(plans, current);
    ASSERT_EQ(current, next) << "step " << step;
    ASSERT_TRUE(PlanIsEmpty(PlanMoves(members, current, StickyAssign(members, current, kParts))))
        << "step " << step;
  }
  EXPECT_GT(joins, 1000);
  EXPECT_GT(leaves, 1000);
}

// ---------------------------------------------------------------- plans

TEST(PlanMoves, ListsReleasesAndAcquiresPerMember) {
  const std::vector<std::string> members = {"a", "b", "c"};
  const Ownership current = {"a", "a", "a", "gone", {}, "c", "c", "c"};
  const auto plans = PlanMoves(members, current, Assignment{0, 0, 1, 1, 1, 2, 2, 1});
  ASSERT_EQ(plans.size(), 3u);
  EXPECT_THAT(plans.at("a").release, ElementsAre(2));
  EXPECT_THAT(plans.at("a").acquire, IsEmpty());
  EXPECT_THAT(plans.at("b").release, IsEmpty());
  EXPECT_THAT(plans.at("b").acquire, ElementsAre(2, 3, 4, 7));
  EXPECT_THAT(plans.at("c").release, ElementsAre(7));
  EXPECT_THAT(plans.at("c").acquire, IsEmpty());
}

TEST(PlanMoves, GoneOwnersAreNeverReleased) {
  const auto plans = PlanMoves({"a"}, Ownership{"gone", "a"}, Assignment{-1, -1});
  EXPECT_THAT(plans.at("a").release, ElementsAre(1));
  EXPECT_THAT(plans.at("a").acquire, IsEmpty());
  EXPECT_EQ(plans.count("gone"), 0u);
}

TEST(PlanMoves, IsEmptyWhenCurrentIsTarget) {
  const std::vector<std::string> members = {"a", "b"};
  const auto plans = PlanMoves(members, Ownership{"a", "b", "b"}, Assignment{0, 1, 1});
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_TRUE(PlanIsEmpty(plans));
}

TEST(PlanMoves, ApplyingThePlanReachesTheTarget) {
  std::mt19937 rng(9);
  for (int parts : kPartCounts) {
    for (int sessions : {0, 1, 2, 7, 50, 500}) {
      const std::vector<std::string> members = SortedIds(sessions, rng);
      const Ownership current = RandomOwnership(members, parts, rng);
      Assignment random_target(parts);
      for (int& o : random_target) o = static_cast<int>(rng() % (sessions + 1)) - 1;
      for (const Assignment& target :
           {StickyAssign(members, current, parts), LexicalAssign(members, parts), random_target}) {
        const auto plans = PlanMoves(members, current, target);
        ASSERT_EQ(static_cast<int>(plans.size()), sessions);
        const Members live(members);
        Ownership applied = current;
        ApplyPlan(plans, applied);
        for (int p = 0; p < parts; ++p) {
          const bool gone_and_unwanted = target[p] < 0 && current[p] && !live.Contains(current[p]);
          const std::optional<std::string> expected =
              gone_and_unwanted ? current[p]
                                : (target[p] >= 0 ? std::optional<std::string>(members[target[p]])
                                                  : std::nullopt);
          ASSERT_EQ(applied[p], expected) << "P=" << parts << " S=" << sessions << " part " << p;
        }
      }
    }
  }
}

TEST(PlanMoves, EveryAcquireIsAReleaseOrAFreePart) {
  std::mt19937 rng(10);
  for (int parts : kPartCounts) {
    for (int sessions : {1, 2, 7, 50, 500}) {
      const std::vector<std::string> members = SortedIds(sessions, rng);
      const Ownership current = RandomOwnership(members, parts, rng);
      const auto plans = PlanMoves(members, current, StickyAssign(members, current, parts));
      const Members live(members);
      std::map<int, std::string> released_by;
      for (const auto& [id, plan] : plans) {
        EXPECT_TRUE(std::is_sorted(plan.release.begin(), plan.release.end()));
        EXPECT_TRUE(std::is_sorted(plan.acquire.begin(), plan.acquire.end()));
        for (int p : plan.release) {
          EXPECT_EQ(current[p], id) << "released a part it does not own";
          EXPECT_TRUE(released_by.emplace(p, id).second) << "part " << p << " released twice";
        }
      }
      std::set<int> acquired;
      for (const auto& [id, plan] : plans) {
        for (int p : plan.acquire) {
          EXPECT_TRUE(acquired.insert(p).second) << "part " << p << " acquired twice";
          EXPECT_NE(current[p], id);
          const bool released = released_by.count(p) > 0 && released_by[p] != id;
          const bool free_or_gone = !live.Contains(current[p]);
          EXPECT_TRUE(released || free_or_gone) << "part " << p;
        }
      }
    }
  }
}

// ---------------------------------------------------------------- protocol

// Simulates rebalancing rounds the way sessions run them: everyone computes
// the sticky target from the same snapshot, then only some releases finish
// (drains take time), gone sessions expire at random, and a part can only be
// acquired once it is free. Whatever the starting state, the group must reach
// a state whose plan is empty.
TEST(StickyProtocol, ConvergesFromArbitraryIntermediateStates) {
  std::mt19937 rng(11);
  std::bernoulli_distribution coin(0.5);
  for (int trial = 0; trial < 300; ++trial) {
    const int parts = kPartCounts[rng() % kPartCounts.size()];
    const int sessions = 1 + static_cast<int>(rng() % 60);
    const std::vector<std::string> members = SortedIds(sessions, rng);
    const Members live(members);
    Ownership current = RandomOwnership(members, parts, rng);
    int rounds = 0;
    for (;; ++rounds) {
      ASSERT_LT(rounds, 200) << "no convergence: P=" << parts << " S=" << sessions;
      const Assignment target = StickyAssign(members, current, parts);
      ExpectBalanced(target, sessions, parts);
      const auto plans = PlanMoves(members, current, target);
      const bool any_gone = std::any_of(current.begin(), current.end(), [&](const auto& id) {
        return id.has_value() && !live.Contains(id);
      });
      if (PlanIsEmpty(plans) && !any_gone) break;
      for (const auto& [id, plan] : plans) {
        for (int p : plan.release) {
          if (coin(rng)) current[p].reset();
        }
      }
      for (auto& owner : current) {
        if (owner && !live.Contains(owner) && coin(rng)) owner.reset();
      }
      for (const auto& [id, plan] : plans) {
        for (int p : plan.acquire) {
          if (!current[p] && coin(rng)) current[p] = id;
        }
      }
    }
    // The fixed point is balanced and recomputing changes nothing.
    const Assignment final_target = StickyAssign(members, current, parts);
    EXPECT_EQ(ToIds(members, final_target), current);
  }
}

}  // namespace
}  // namespace partq
