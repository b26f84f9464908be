// The pure steps of a session's rebalance round (no I/O, no clock, no
// threads), so they are tested as functions. A round is
//   1. reconcile: what the session holds against what the database says it
//      owns (Reconcile);
//   2. plan: where the group should go from the view, and this member's
//      moves towards it (PlanRound; partitioner/assign.h does the assigning);
//   3. apply: revoke and release, acquire, tell the listener (Session).
#ifndef PARTQ_COORDINATOR_REBALANCE_H_
#define PARTQ_COORDINATOR_REBALANCE_H_

#include <vector>

#include "store/types.h"

namespace partq {

struct Reconciled {
  // Held by us, but not at that epoch in the view: another member expired
  // us, or a static re-join fenced us. Ascending by part.
  std::vector<OwnedPart> lost;
  // Ours in the view but not held (a static re-join that kept them, a round
  // that failed after acquiring). Ascending by part.
  std::vector<OwnedPart> adopted;
};
// `held`: the parts the session holds, by part. Owners outside [0, parts)
// are ignored.
Reconciled Reconcile(const SessionId& me, const std::vector<OwnedPart>& held, const GroupView& view,
                     int parts);

struct RoundPlan {
  // Parts the view says we own and the target gives to another member:
  // revoke, then release. Ascending.
  std::vector<int> release;
  // Parts the target gives us that we do not own yet. Ascending.
  std::vector<int> wanted;
  // Of `wanted`, those no one owns in the view: acquire them now. The rest
  // wait for their owner to release them (or to expire).
  std::vector<int> acquire;
  bool pending() const { return acquire.size() < wanted.size(); }
};
// The target assignment (`kind`) for the view's members, `me` included (a
// group read can miss our own row while it races our heartbeat; we are alive),
// and our moves from the view's owners towards it. The same view gives every
// member the same target, which is what lets each plan alone.
RoundPlan PlanRound(const SessionId& me, const GroupView& view, int parts, AssignmentKind kind);

}  // namespace partq

#endif  // PARTQ_COORDINATOR_REBALANCE_H_
