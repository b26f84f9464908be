// The parts a session knows, each in one state, changed by one checked
// transition (architecture.md, Conventions; redpanda's group.h: valid_previous_state() and a
// checked, logged set_state()).
//
//   unowned --acquire/adopt/join--> owned --revoke--> revoking --release--> released
//                                     |   <--release failed--'                 |
//                                     '--lose--> lost                           |
//   released, lost --acquire/adopt/join--> owned  <-----------------------------'
//
// owned     ours at `epoch`; the listener was told (OnAssign).
// revoking  the listener is draining it (OnRevoke); still ours until the
//           release commits, and handed back (owned) if the release fails.
// released  given up gracefully (released, or the session left).
// lost      taken from us without a revoke (OnLost): the session expired,
//           was fenced, the database no longer lists it as ours, or the
//           queue is gone.
// A part never seen is unowned. Any other transition is a bug: it is logged
// and the process aborts, as Session::SetState does.
//
// Not thread-safe: the session guards it with its mutex.
#ifndef PARTQ_COORDINATOR_PART_TABLE_H_
#define PARTQ_COORDINATOR_PART_TABLE_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "store/types.h"

namespace partq {

enum class PartState { kUnowned, kOwned, kRevoking, kReleased, kLost };
const char* PartStateName(PartState s);

class PartTable {
 public:
  // Whether a part may go from `prev` to `next`.
  static bool ValidPrevious(PartState prev, PartState next);

  // `who` names the table's session in its log lines.
  void set_who(std::string who) { who_ = std::move(who); }

  PartState state(int part) const;
  // The one transition: `part` goes to `next`; for kOwned at `epoch` (the
  // other states keep the part's last epoch). Aborts if not ValidPrevious.
  void Set(int part, PartState next, Epoch epoch = Epoch{});
  // Set for each of `parts`, at its epoch.
  void Set(const std::vector<OwnedPart>& parts, PartState next);

  // The parts that are ours (owned or revoking), by part: what the session
  // reports as owned.
  std::vector<OwnedPart> Held() const;
  // The epoch of `part` if it is ours.
  std::optional<Epoch> EpochOf(int part) const;
  // Of `parts`, those that are ours, at their epochs.
  std::vector<OwnedPart> HeldOf(const std::vector<int>& parts) const;

 private:
  struct Entry {
    PartState state = PartState::kUnowned;
    Epoch epoch;
  };
  static bool IsHeld(PartState s) { return s == PartState::kOwned || s == PartState::kRevoking; }

  std::string who_ = "session";
  std::map<int, Entry> parts_;  // every part ever seen, by part
};

}  // namespace partq

#endif  // PARTQ_COORDINATOR_PART_TABLE_H_
