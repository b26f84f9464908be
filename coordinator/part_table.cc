#include "coordinator/part_table.h"

#include <cstdlib>

#include "base/log.h"

namespace partq {

const char* PartStateName(PartState s) {
  switch (s) {
    case PartState::kUnowned:
      return "unowned";
    case PartState::kOwned:
      return "owned";
    case PartState::kRevoking:
      return "revoking";
    case PartState::kReleased:
      return "released";
    case PartState::kLost:
      return "lost";
  }
  return "?";
}

bool PartTable::ValidPrevious(PartState prev, PartState next) {
  switch (next) {
    // A part we hold is never acquired again: a second OnAssign for it would
    // hide a lost epoch.
    case PartState::kOwned:
      return prev == PartState::kUnowned || prev == PartState::kReleased ||
             prev == PartState::kLost || prev == PartState::kRevoking;
    case PartState::kRevoking:
      return prev == PartState::kOwned;
    case PartState::kReleased:
      return prev == PartState::kRevoking;
    // A revoke runs to its end on the session thread before anything can
    // lose the part, so only an owned part is lost.
    case PartState::kLost:
      return prev == PartState::kOwned;
    case PartState::kUnowned:
      return false;
  }
  return false;
}

PartState PartTable::state(int part) const {
  auto it = parts_.find(part);
  return it == parts_.end() ? PartState::kUnowned : it->second.state;
}

void PartTable::Set(int part, PartState next, Epoch epoch) {
  Entry& e = parts_[part];
  if (!ValidPrevious(e.state, next)) {
    PARTQ_LOG(Error) << who_ << ": part " << part << ": invalid transition "
                     << PartStateName(e.state) << " -> " << PartStateName(next);
    abort();
  }
  PARTQ_LOG(Debug) << who_ << ": part " << part << ": " << PartStateName(e.state) << " -> "
                   << PartStateName(next);
  e.state = next;
  if (next == PartState::kOwned) e.epoch = epoch;
}

void PartTable::Set(const std::vector<OwnedPart>& parts, PartState next) {
  for (const OwnedPart& p : parts) Set(p.part, next, p.epoch);
}

std::vector<OwnedPart> PartTable::Held() const {
  std::vector<OwnedPart> out;
  for (const auto& [part, e] : parts_) {
    if (IsHeld(e.state)) out.push_back({part, e.epoch});
  }
  return out;
}

std::optional<Epoch> PartTable::EpochOf(int part) const {
  auto it = parts_.find(part);
  if (it == parts_.end() || !IsHeld(it->second.state)) return std::nullopt;
  return it->second.epoch;
}

std::vector<OwnedPart> PartTable::HeldOf(const std::vector<int>& parts) const {
  std::vector<OwnedPart> out;
  for (int part : parts) {
    if (std::optional<Epoch> epoch = EpochOf(part)) out.push_back({part, *epoch});
  }
  return out;
}

}  // namespace partq
