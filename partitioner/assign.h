// Assignment of a queue's parts to the live sessions of its group, and the
// plan that moves the group from its current ownership to that assignment.
// Pure functions: the same inputs give the same output on every member, which
// is what lets each session compute its own share without talking to others.
#ifndef PARTQ_PARTITIONER_ASSIGN_H_
#define PARTQ_PARTITIONER_ASSIGN_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace partq {

// owner[p] is the index (into the member list the assignment was computed for)
// of the member that owns part p, or -1 when the part is free.
using Assignment = std::vector<int>;

// Lexical assignment: members sorted by id; member i of S owns parts
// [floor(i*P/S), floor((i+1)*P/S)). `members` must be sorted and unique.
// With no members, every part is free.
Assignment LexicalAssign(const std::vector<std::string>& members, int parts);

// Sticky assignment: balanced within +-1 and moving only the minimum from
// `current` (current[p] = id of the part's owner, or nullopt when free; owners
// that are not in `members` count as gone). Deterministic in its inputs.
// `current` has `parts` entries. `members` must be unique; their order does not
// matter: "member order" and ties below are by id, and only the indices in the
// result refer to positions in `members`.
// Quotas: P/S each, and P%S members get one more: first those holding more
// than P/S, then the others, ties by id (exact holdings are not compared, so
// views taken mid-rebalance agree on the quotas). Each member keeps up to its quota of the parts it holds (lowest
// part numbers first); the rest and the free parts go, in part order, to
// members below quota, in member order.
// Consequences: from a balanced state, a joining member takes floor(P/(S+1))
// parts and nobody else gains any; a leaving member's parts are the only ones
// that move. Applying the result and recomputing gives the same result.
Assignment StickyAssign(const std::vector<std::string>& members,
                        const std::vector<std::optional<std::string>>& current, int parts);

// What one member must do to go from `current` to `target`.
struct MemberPlan {
  std::vector<int> release;  // parts it owns now and must give up (ascending)
  std::vector<int> acquire;  // parts it must take once free (ascending)
};

// The plan for every member of `members` (by id) to reach `target`, which
// indexes into the same `members` (as returned by LexicalAssign or
// StickyAssign) and has one entry per entry of `current`. Every member gets an
// entry, empty when it has nothing to do. A part appears in at most one release
// and at most one acquire; an acquired part is either free, held by a gone
// owner, or released by another member.
// Parts owned by ids that are not members appear in no release (they free up
// when those sessions expire); their new owner lists them under acquire.
std::map<std::string, MemberPlan> PlanMoves(const std::vector<std::string>& members,
                                            const std::vector<std::optional<std::string>>& current,
                                            const Assignment& target);

}  // namespace partq

#endif  // PARTQ_PARTITIONER_ASSIGN_H_
