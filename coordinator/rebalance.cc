#include "coordinator/rebalance.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "partitioner/assign.h"

namespace partq {

Reconciled Reconcile(const SessionId& me, const std::vector<OwnedPart>& held, const GroupView& view,
                     int parts) {
  std::map<int, Epoch> mine;  // ours in the view
  for (const PartOwner& o : view.owners) {
    if (o.part >= 0 && o.part < parts && o.session == me) mine[o.part] = o.epoch;
  }
  Reconciled out;
  for (const OwnedPart& p : held) {
    auto it = mine.find(p.part);
    if (it != mine.end() && it->second == p.epoch) {
      mine.erase(it);  // kept: neither lost nor adopted
    } else {
      out.lost.push_back(p);
    }
  }
  // What is left is ours in the view and not held at that epoch: a part we
  // held at an older one is lost above and adopted here.
  for (const auto& [part, epoch] : mine) out.adopted.push_back({part, epoch});
  return out;
}

RoundPlan PlanRound(const SessionId& me, const GroupView& view, int parts, AssignmentKind kind) {
  std::vector<std::string> members;
  members.reserve(view.members.size() + 1);
  for (const SessionId& m : view.members) members.push_back(m.value);
  if (std::find(members.begin(), members.end(), me.value) == members.end()) {
    members.insert(std::upper_bound(members.begin(), members.end(), me.value), me.value);
  }
  std::vector<std::optional<std::string>> current(parts);
  for (const PartOwner& o : view.owners) {
    if (o.part >= 0 && o.part < parts) current[o.part] = o.session.value;
  }
  const Assignment target = kind == AssignmentKind::kSticky ? StickyAssign(members, current, parts)
                                                            : LexicalAssign(members, parts);
  const auto moves = PlanMoves(members, current, target);
  RoundPlan plan;
  if (auto it = moves.find(me.value); it != moves.end()) {
    plan.release = it->second.release;
    plan.wanted = it->second.acquire;
  }
  for (int part : plan.wanted) {
    if (!current[part].has_value()) plan.acquire.push_back(part);
  }
  return plan;
}

}  // namespace partq
