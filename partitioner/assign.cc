#include "partitioner/assign.h"

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace partq {
namespace {

// Maps member ids to their index in the caller's `members` vector, and lists
// the members in id order. Ownership rows name owners by id, so every
// function here needs this lookup. Sticky needs id order anyway, so a sorted
// vector serves both; with at most a few hundred members it is fast enough
// (bench/assign_benchmark.cc) and needs no hash-container library.
class MemberIndex {
 public:
  explicit MemberIndex(const std::vector<std::string>& members) {
    by_id_.reserve(members.size());
    for (size_t i = 0; i < members.size(); ++i) {
      by_id_.emplace_back(members[i], static_cast<int>(i));
    }
    std::sort(by_id_.begin(), by_id_.end());
    assert(std::adjacent_find(by_id_.begin(), by_id_.end(),
                              [](const auto& a, const auto& b) { return a.first == b.first; }) ==
               by_id_.end() &&
           "member ids must be unique");
  }

  int size() const { return static_cast<int>(by_id_.size()); }

  // The index in `members` of the member with the rank-th smallest id.
  int MemberAtRank(int rank) const { return by_id_[rank].second; }

  // The rank (position in id order) of `id`, or -1 when it is not a member.
  // Ownership comes in runs of equal owners, so the previous answer is tried
  // first; that turns most lookups into one string comparison.
  int RankOf(std::string_view id) {
    if (last_rank_ >= 0 && by_id_[last_rank_].first == id) return last_rank_;
    auto it =
        std::lower_bound(by_id_.begin(), by_id_.end(), id,
                         [](const auto& entry, std::string_view v) { return entry.first < v; });
    if (it == by_id_.end() || it->first != id) return -1;
    last_rank_ = static_cast<int>(it - by_id_.begin());
    return last_rank_;
  }

 private:
  std::vector<std::pair<std::string_view, int>> by_id_;
  int last_rank_ = -1;
};

}  // namespace

Assignment LexicalAssign(const std::vector<std::string>& members, int parts) {
  assert(parts >= 0);
  assert(std::adjacent_find(members.begin(), members.end(), std::greater_equal<>()) ==
             members.end() &&
         "members must be sorted and unique");
  Assignment owner(parts, -1);
  const int64_t s = static_cast<int64_t>(members.size());
  if (s == 0) return owner;
  // 64-bit products: i * P reaches about 4096 * S, past int for large groups.
  for (int64_t i = 0; i < s; ++i) {
    const int64_t begin = i * parts / s;
    const int64_t end = (i + 1) * parts / s;
    std::fill(owner.begin() + begin, owner.begin() + end, static_cast<int>(i));
  }
  return owner;
}

Assignment StickyAssign(const std::vector<std::string>& members,
                        const std::vector<std::optional<std::string>>& current, int parts) {
  assert(parts >= 0);
  assert(current.size() == static_cast<size_t>(parts));
  Assignment owner(parts, -1);
  MemberIndex index(members);
  const int s = index.size();
  if (s == 0) return owner;

  // Everything below works on ranks (positions in id order), not on the
  // caller's member order, so the result does not depend on how the caller
  // happened to order `members`.
  std::vector<int> rank_of_part(parts, -1);
  std::vector<int> held(s, 0);
  for (int p = 0; p < parts; ++p) {
    if (!current[p].has_value()) continue;
    const int rank = index.RankOf(*current[p]);
    rank_of_part[p] = rank;
    if (rank >= 0) ++held[rank];
  }

  // The P % S extra parts go first to members that hold more than P/S: any
  // other choice would make one of them give up a part only for another
  // member to take one more, so this is what makes the movement minimal. The
  // rest, and ties, go by id. Only "more than P/S or not" counts, never the
  // exact holding: while a rebalance is under way members see each other at
  // different moments, filling up towards P/S, and a rule that ranked by
  // holding would hand the extras to whoever happened to fill up first — two
  // views could then both give a member its extra and one would have to move
  // a part back (extra churn, seen with 30+ sessions on PostgreSQL).
  const int floor_quota = parts / s;
  std::vector<int> quota(s, floor_quota);
  const int extra = parts % s;
  if (extra > 0) {
    std::vector<int> by_holding(s);
    for (int r = 0; r < s; ++r) by_holding[r] = r;
    auto over = [&](int r) { return held[r] > floor_quota; };
    std::nth_element(
        by_holding.begin(), by_holding.begin() + (extra - 1), by_holding.end(),
        [&over](int a, int b) { return over(a) != over(b) ? over(a) : a < b; });
    for (int i = 0; i < extra; ++i) ++quota[by_holding[i]];
  }

  // Keep what fits under the quota, lowest parts first; collect the rest.
  std::vector<int> kept(s, 0);
  std::vector<int> pool;
  for (int p = 0; p < parts; ++p) {
    const int rank = rank_of_part[p];
    if (rank >= 0 && kept[rank] < quota[rank]) {
      owner[p] = index.MemberAtRank(rank);
      ++kept[rank];
    } else {
      pool.push_back(p);
    }
  }

  // Hand out the pool in part order, filling members in id order. Quotas sum
  // to P and nobody keeps more than its quota, so the pool is exactly the sum
  // of the shortfalls and every member ends at its quota.
  int rank = 0;
  for (int p : pool) {
    while (kept[rank] == quota[rank]) ++rank;
    owner[p] = index.MemberAtRank(rank);
    ++kept[rank];
  }
  return owner;
}

std::map<std::string, MemberPlan> PlanMoves(const std::vector<std::string>& members,
                                            const std::vector<std::optional<std::string>>& current,
                                            const Assignment& target) {
  assert(current.size() == target.size());
  MemberIndex index(members);
  const int s = index.size();
  std::vector<MemberPlan> plans(s);
  const int parts = static_cast<int>(target.size());
  for (int p = 0; p < parts; ++p) {
    const int to = target[p];
    assert(to >= -1 && to < s);
    int from = -1;
    if (current[p].has_value()) {
      const int rank = index.RankOf(*current[p]);
      if (rank >= 0) from = index.MemberAtRank(rank);
    }
    if (from == to) continue;
    if (from >= 0) plans[from].release.push_back(p);
    if (to >= 0) plans[to].acquire.push_back(p);
  }
  std::map<std::string, MemberPlan> by_member;
  for (int i = 0; i < s; ++i) by_member.emplace(members[i], std::move(plans[i]));
  return by_member;
}

}  // namespace partq
