#include "consumer/claim_scheduler.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/container/flat_hash_set.h"

namespace partq {

void ClaimScheduler::Assign(const std::vector<OwnedPart>& parts) {
  for (const auto& p : parts) {
    PartState st;
    st.epoch = p.epoch;
    parts_[p.part] = std::move(st);
  }
  // An earlier tenure's items still in flight there (a part came back to
  // this consumer after a lapse or a re-join, with a batch still running).
  if (!in_flight_.empty()) {
    absl::flat_hash_set<int> assigned;
    for (const auto& p : parts) assigned.insert(p.part);
    for (const auto& [id, part] : in_flight_) {
      if (assigned.count(part)) parts_[part].earlier.insert(id);
    }
  }
  suspects_pending_ = true;  // a dead owner's items were marked when we took them
}

void ClaimScheduler::Remove(const std::vector<int>& parts) {
  for (int p : parts) parts_.erase(p);
  DropQueued(parts);
}

void ClaimScheduler::DropQueued(const std::vector<int>& parts) {
  const std::set<int> gone(parts.begin(), parts.end());
  for (auto& b : queue_) {
    b.items.erase(std::remove_if(b.items.begin(), b.items.end(),
                                 [&](const Item& i) {
                                   if (gone.count(i.part) == 0) return false;
                                   // A dropped suspect never reaches a worker,
                                   // which is what would clear the slot.
                                   if (i.id == suspect_id_) suspect_id_ = 0;
                                   in_flight_.erase(i.id);
                                   return true;
                                 }),
                  b.items.end());
  }
  queue_.erase(
      std::remove_if(queue_.begin(), queue_.end(), [](const Batch& b) { return b.items.empty(); }),
      queue_.end());
}

bool ClaimScheduler::Drained(const std::vector<int>& parts) const {
  if (claiming_) return false;
  for (int p : parts) {
    auto it = busy_parts_.find(p);
    if (it != busy_parts_.end() && it->second > 0) return false;
  }
  return true;
}

bool ClaimScheduler::HoldsAny(const std::vector<Item>& items) const {
  return std::any_of(items.begin(), items.end(), [this](const Item& i) {
    auto it = parts_.find(i.part);
    return it != parts_.end() && it->second.epoch == i.claim_epoch;
  });
}

void ClaimScheduler::Mark(PartState& st) {
  st.rescan = true;
  st.hungry = true;
  st.noticed = st.noticed_head = notice_gen_;
}

void ClaimScheduler::Wake(PartState& st, std::optional<ItemKey> floor) {
  st.hungry = true;
  st.noticed = notice_gen_;
  if (floor && (!st.noticed_floor || *floor < *st.noticed_floor)) st.noticed_floor = floor;
}

void ClaimScheduler::Notice(int part, std::optional<ItemKey> from) {
  ++notice_gen_;
  for (auto& [p, st] : parts_) {
    if (part >= 0 && p != part) continue;
    if (!from || !st.cursor) {
      Mark(st);
    } else {
      // The next claim reads from just before `from` ((priority, id - 1)
      // sorts right before it) if that is behind the cursor then: a late
      // commit, a higher priority, or an item past the cursor now that a
      // claim under way passes without seeing it (it began before the item
      // committed, and moves the cursor when it ends).
      Wake(st, ItemKey{from->priority, from->id - 1});
    }
  }
}

void ClaimScheduler::Poll() {
  ++notice_gen_;
  for (auto& [p, st] : parts_) {
    if (st.hungry) continue;
    if (options_.notices) {
      Wake(st, std::nullopt);
      st.look_behind = true;
    } else if (PollFloors() && st.poll_floor) {
      Wake(st, std::nullopt);  // HungryParts: from the floor or the head, when due
    } else {
      Mark(st);
    }
  }
}

bool ClaimScheduler::WantsSnapshot(absl::Time now) const {
  // (Idle, once every id claimed is final, it asks for none.)
  return PollFloors() && snapshots_ && claimed_max_ > final_id_ &&
         now - last_snapshot_ >= SnapshotSpacing();
}

void ClaimScheduler::SnapshotAsked(absl::Time now) {
  last_snapshot_ = now;  // a failed one is asked for again a spacing later
  asked_claimed_max_ = claimed_max_;
}

void ClaimScheduler::NoteSnapshot(const absl::StatusOr<SnapshotBounds>& snapshot) {
  if (!snapshot.ok()) {
    if (absl::IsUnimplemented(snapshot.status())) snapshots_ = false;
    return;
  }
  if (snapshot->id_cache > 1) {  // ids out of time order: no floors, the heads at every poll
    snapshots_ = false;
    return;
  }
  // Every id up to the highest claimed when the last snapshot was asked for
  // was taken before then, at least SnapshotSpacing before this snapshot:
  // by transactions whose xids are below this one's next_xid.
  if (pending_snapshots_.size() < kMaxPendingSnapshots) {
    pending_snapshots_.emplace_back(snapshot->next_xid, claimed_max_at_snapshot_);
  }
  claimed_max_at_snapshot_ = asked_claimed_max_;
  while (!pending_snapshots_.empty() && pending_snapshots_.front().first <= snapshot->xmin) {
    final_id_ = std::max(final_id_, pending_snapshots_.front().second);
    pending_snapshots_.pop_front();
  }
}

void ClaimScheduler::SetPaused(bool paused) {
  if (paused_ && !paused) Poll();
  paused_ = paused;
}

void ClaimScheduler::SetRate(std::optional<double> per_second, int queue_parts) {
  if (per_second && (*per_second <= 0 || queue_parts <= 0)) per_second.reset();
  // The same limit over more parts (a grow) is a new share per part.
  if (per_second == rate_ && (!rate_ || part_rate_ == *rate_ / queue_parts)) return;
  rate_ = per_second;
  part_rate_ = rate_ ? *rate_ / queue_parts : 0;
  burst_ = std::max(1.0, part_rate_ * absl::ToDoubleSeconds(kRateBurst));
  // Budgets start again from nothing under the new rate.
  for (auto& [part, st] : parts_) {
    st.budget = 0;
    st.budget_at = absl::InfinitePast();
  }
}

double ClaimScheduler::BudgetAt(const PartState& st, absl::Time now) const {
  if (st.budget_at == absl::InfinitePast()) return 0;
  if (now == absl::InfiniteFuture()) return burst_;
  return std::min(burst_,
                  st.budget + std::max(0.0, absl::ToDoubleSeconds(now - st.budget_at)) * part_rate_);
}

double ClaimScheduler::IdleBudgetAt(absl::Time now) const {
  double idle = 0;
  for (const auto& [part, st] : parts_) {
    if (!st.hungry) idle += BudgetAt(st, now);
  }
  return idle;
}

absl::Time ClaimScheduler::RateReadyAt(absl::Time now) const {
  if (!rate_ || paused_) return absl::InfiniteFuture();
  absl::Time at = absl::InfiniteFuture();
  const double idle = IdleBudgetAt(now);
  int saving = 1;  // the hungry part, and the idle parts still saving
  for (const auto& [part, st] : parts_) {
    if (!st.hungry && st.budget_at != absl::InfinitePast() && BudgetAt(st, now) < burst_) {
      ++saving;
    }
  }
  for (const auto& [part, st] : parts_) {
    if (!st.hungry) continue;
    // A part not counted yet starts counting at its first claim: due now.
    if (st.budget_at == absl::InfinitePast()) return now;
    const double have = BudgetAt(st, now) + idle;
    if (have >= 1) return now;
    // (An idle part that reaches its burst meanwhile stops saving: then later.)
    at = std::min(at, now + absl::Seconds((1 - have) / (part_rate_ * saving)));
  }
  return at;
}

void ClaimScheduler::FailClaim() {
  claiming_ = false;
  for (const auto& [part, n] : reserved_) GiveBack(part, n);
  reserved_.clear();
  lent_.clear();
}

bool ClaimScheduler::WantClaim(absl::Time now) const {
  if (paused_) return false;
  if (suspect_id_ == 0 && suspects_pending_) return true;  // the probe for the next suspect
  const double idle = rate_ ? IdleBudgetAt(now) : 0;
  return std::any_of(parts_.begin(), parts_.end(), [&](const auto& p) {
    // A part not counted yet has nothing, but is due its first look (where
    // its budget starts counting).
    return p.second.hungry && (!rate_ || p.second.budget_at == absl::InfinitePast() ||
                               BudgetAt(p.second, now) + idle >= 1);
  });
}

std::optional<int> ClaimScheduler::ClaimAheadBatches(int idle_workers,
                                                     const std::vector<Item>& finishing,
                                                     absl::Time now) const {
  if (claiming_ || paused_) return std::nullopt;
  const int short_by = idle_workers + 1 - static_cast<int>(queue_.size());
  const bool want = WantClaim(now);
  if (short_by > 0 && want) return short_by;
  // The ack of a suspect looks for the next one even when the queue is full.
  const bool next_suspect = suspect_id_ != 0 && finishing.size() == 1 &&
                            finishing[0].id == suspect_id_ && suspects_pending_;
  if (next_suspect) return want ? short_by : 0;
  return std::nullopt;
}

std::optional<ClaimRequest> ClaimScheduler::BeginClaim(const SessionId& session, int batches,
                                                       const std::vector<Item>& finishing,
                                                       absl::Time now) {
  if (paused_) return std::nullopt;
  // One suspect in flight at a time; the ack of the one in flight may claim
  // the next.
  const bool slot_free =
      suspect_id_ == 0 || std::any_of(finishing.begin(), finishing.end(),
                                      [&](const Item& i) { return i.id == suspect_id_; });
  std::vector<int> hungry = HungryParts(batches, now);
  const int limit = options_.batch * std::max(1, batches);
  // Under a rate limit a part is read for at most the whole items its
  // budget holds, taken now (what the read does not use goes back in
  // AcceptClaim); a part with less than one item's budget is not read.
  std::map<int, int> allowed;
  if (rate_) allowed = RateAllowed(limit, now, &hungry);
  if (hungry.empty() && !(slot_free && suspects_pending_)) return std::nullopt;
  // Parts take turns: each claim starts one part further on and reads parts
  // only until it has `limit` items, so a batch mostly comes from one part
  // (its ack then locks one session_parts row and rewrites one claim record,
  // and its rows sit together). A part is read from its cursor, from its
  // floor behind the cursor, or from its head when due.
  if (!hungry.empty()) {
    std::rotate(hungry.begin(), hungry.begin() + rotation_++ % hungry.size(), hungry.end());
  }
  ClaimRequest req;
  req.queue = options_.queue;
  req.session = session;
  req.limit = limit;
  req.max_bytes = options_.max_claim_bytes;
  req.ordered = options_.ordered;
  req.key_concurrency = options_.key_concurrency;
  req.fair = options_.fair;
  for (int part : hungry) {
    const PartState& st = parts_.at(part);
    ClaimPart cp;
    cp.part = part;
    cp.epoch = st.epoch;
    if (!st.rescan) cp.after = st.floor && *st.floor < *st.cursor ? st.floor : st.cursor;
    if (cp.after && st.floor_read) {
      cp.after = std::min(*cp.after, ItemKey{0, *st.poll_floor});
      cp.above = cp.after->priority >= 0;
    }
    // Past the cursor nothing of this tenure is in flight, but an earlier
    // tenure's items may be (a re-adoption at the same epoch leaves them
    // ready, not abandoned): until they are released, every item read is
    // checked against what is in flight, or one could run twice at once.
    cp.cursor = st.earlier.empty() ? st.cursor : std::nullopt;
    cp.record = st.record;
    cp.key_after = st.key_after;
    if (cp.after) cp.key_cursors.assign(st.key_cursors.begin(), st.key_cursors.end());
    if (ReleasesKeys()) cp.key_floors.assign(st.key_floors.begin(), st.key_floors.end());
    cp.key_heads = st.key_heads && cp.after.has_value();
    // (A read from the head, or of the keys' heads, reads them anyway; they
    // are kept for the next.)
    if (ReleasesKeys() && cp.after && !cp.key_heads) {
      for (const auto& [key, r] : st.released) cp.key_cursors.emplace_back(key, r.id);
      parts_.at(part).released_sent = release_gen_;
    }
    cp.behind =
        cp.after.has_value() && !cp.key_heads &&
        (st.look_behind || st.floor_read || now - st.last_behind >= options_.rescan_interval);
    cp.limit = limit;
    if (rate_) {
      cp.limit = allowed.at(part);
      SpendBudget(part, cp.limit);
      reserved_[part] = cp.limit;
    }
    req.parts.push_back(cp);
    // A backlog: this part fills a batch by itself. A one-part claim is
    // also the one the store can pipeline with the ack (PgStore, Finish).
    if (req.parts.size() == 1 && st.full && limit == options_.batch) break;
  }
  // Suspects appear when parts are assigned (a dead owner's claims are
  // marked then), so the probe runs while the last one found some, and with
  // every read from a part's head as a safety net.
  req.include_suspect =
      slot_free &&
      (suspects_pending_ || std::any_of(req.parts.begin(), req.parts.end(),
                                        [](const ClaimPart& p) { return !p.after || p.above; }));
  absl::flat_hash_set<int64_t> done;
  done.reserve(finishing.size());
  for (const Item& item : finishing) done.insert(item.id);
  for (const auto& [id, part] : in_flight_) {
    if (done.count(id) == 0) req.in_flight.emplace_back(part, id);
  }
  claim_gen_ = notice_gen_;
  claim_final_ = final_id_;
  claiming_ = true;
  return req;
}

std::vector<int> ClaimScheduler::HungryParts(int batches, absl::Time now) {
  std::vector<int> hungry;
  for (auto& [part, st] : parts_) {
    if (st.noticed_floor) {
      if (!st.floor || *st.noticed_floor < *st.floor) st.floor = st.noticed_floor;
      st.noticed_floor.reset();
    }
    if (options_.fair && st.floor) {
      // A fair read goes by its keys' cursors (the part's cursor is not an
      // order its reads follow): an item noticed behind one is read from.
      for (auto& [key, id] : st.key_cursors) id = std::min(id, st.floor->id);
      st.floor.reset();
    }
    if (batches <= 0 || !st.hungry) continue;
    // (Fair: a retried or delayed item that came due behind a key's cursor
    // is read by the look behind, fragments/fair_items.sql.)
    if (ReadsFromHeads() || !st.cursor) {
      st.rescan = true;
    } else if (!options_.notices && now - st.last_rescan >= options_.rescan_interval) {
      // (A cursor at a priority below 0 sorts before every floor: read from the head.)
      st.floor_read = PollFloors() && st.poll_floor && st.cursor->priority >= 0 &&
                      now - st.last_head < kPollHeadReads * options_.rescan_interval;
      st.rescan = st.rescan || !st.floor_read;
    } else if (ReleasesKeys() &&
               now - st.last_head >= kOrderedHeadReads * options_.rescan_interval) {
      st.rescan = true;
    } else if (ReleasesKeys() &&
               now - st.last_rescan >= kOrderedRescans * options_.rescan_interval) {
      st.key_heads = true;
    }
    hungry.push_back(part);
  }
  return hungry;
}

std::map<int, int> ClaimScheduler::RateAllowed(int limit, absl::Time now,
                                               std::vector<int>* hungry) {
  // The idle parts' budgets, as of now, that hungry parts may borrow.
  std::vector<std::pair<int, double>> lenders;
  double idle = 0;
  for (auto& [part, st] : parts_) {
    if (st.hungry || st.budget_at == absl::InfinitePast()) continue;
    st.budget = BudgetAt(st, now);
    st.budget_at = now;
    if (st.budget > 0) lenders.emplace_back(part, st.budget);
    idle += std::max(0.0, st.budget);
  }
  borrowed_.clear();
  std::map<int, int> allowed;
  std::vector<int> funded;
  for (int part : *hungry) {
    PartState& st = parts_.at(part);
    if (st.budget_at == absl::InfinitePast()) {
      st.budget_at = now;  // its budget starts from nothing, now
      continue;
    }
    st.budget = BudgetAt(st, now);
    st.budget_at = now;
    const double own = std::max(0.0, st.budget);
    const int n = std::min(limit, static_cast<int>(own + idle));
    if (n < 1) continue;
    // Borrowed: what its own budget does not cover, from the lenders in turn.
    for (double want = n - own; want > 0 && !lenders.empty();) {
      auto& [lender, has] = lenders.back();
      const double take = std::min(want, has);
      borrowed_[part].emplace_back(lender, take);
      want -= take;
      idle -= take;
      if ((has -= take) <= 0) lenders.pop_back();
    }
    allowed[part] = n;
    funded.push_back(part);
  }
  *hungry = std::move(funded);
  return allowed;
}

void ClaimScheduler::SpendBudget(int part, int n) {
  // The loans move into the part's own budget, which then pays for all n.
  if (auto it = borrowed_.find(part); it != borrowed_.end()) {
    for (const auto& [lender, take] : it->second) {
      parts_.at(lender).budget -= take;
      parts_.at(part).budget += take;
    }
    lent_[part] = std::move(it->second);
    borrowed_.erase(it);
  }
  parts_.at(part).budget -= n;
}

void ClaimScheduler::GiveBack(int part, double n) {
  // The lenders' first, the last loan first, each at most what it lent.
  if (auto loans = lent_.find(part); loans != lent_.end()) {
    for (auto l = loans->second.rbegin(); l != loans->second.rend() && n > 0; ++l) {
      const double back = std::min(n, l->second);
      n -= back;
      if (auto it = parts_.find(l->first); it != parts_.end()) {
        it->second.budget = std::min(burst_, it->second.budget + back);
      }
    }
    lent_.erase(loans);
  }
  if (auto it = parts_.find(part); it != parts_.end() && n > 0) {
    it->second.budget = std::min(burst_, it->second.budget + n);
  }
}

std::optional<std::string> ClaimScheduler::LastTurn(const std::optional<std::string>& from,
                                                    const std::vector<const Item*>& items) {
  // A fair read serves the keys in turns of one item each, in the order
  // after `from` and around, and stops at its limit: the keys before the
  // cut had one turn more than those after it, so the cut is after the
  // last key (in that order) with the most turns.
  const std::string after = from.value_or("");
  std::map<std::pair<bool, std::string>, int> turns;  // (came around, key) -> turns
  for (const Item* item : items) {
    if (item->key) ++turns[{!(*item->key > after), *item->key}];
  }
  std::optional<std::string> last;
  int most = 0;
  for (const auto& [place, n] : turns) {
    if (n >= most) {
      most = n;
      last = place.second;
    }
  }
  return last;
}

int ClaimScheduler::FairBehind(const ClaimPart& cp, const std::vector<Item>& items) {
  const std::map<std::string, int64_t> cursors(cp.key_cursors.begin(), cp.key_cursors.end());
  int n = 0;
  for (const Item& item : items) {
    if (item.suspect || item.part != cp.part || !item.key) continue;
    auto c = cursors.find(*item.key);
    if (c != cursors.end() && item.id <= c->second) ++n;
  }
  return n;
}

void ClaimScheduler::UpdateKeyCursors(PartState& st, const std::vector<const Item*>& items) {
  // Only the keys this read served keep a cursor: a key it visited and got
  // nothing from may be done, and a key with a cursor takes its turns
  // whether or not it has items left (ClaimPart::key_cursors), which would
  // shrink the others' shares. A key without one is read from its head.
  // A key served only what came due behind its cursor keeps the cursor
  // where it was (what lies between was claimed before).
  std::map<std::string, int64_t> before = std::move(st.key_cursors);
  st.key_cursors.clear();
  std::map<std::string, int> served;
  for (const Item* item : items) {
    if (!item->key) continue;
    auto b = before.find(*item->key);
    const int64_t at = b == before.end() ? item->id : std::max(b->second, item->id);
    auto [it, added] = st.key_cursors.emplace(*item->key, at);
    if (!added) it->second = std::max(it->second, at);
    ++served[*item->key];
  }
  if (st.key_cursors.size() <= kMaxKeyCursors) return;
  // Every claim sends them: keep the keys this read served most (a key with
  // a backlog, whose head is long; a key served once has a short one).
  std::vector<std::pair<int, std::string>> by_count;
  for (auto& [key, n] : served) by_count.emplace_back(-n, key);
  std::sort(by_count.begin(), by_count.end());
  if (by_count.size() > kMaxKeyCursors) by_count.resize(kMaxKeyCursors);
  std::map<std::string, int64_t> kept;
  for (const auto& [n, key] : by_count) kept.emplace(key, st.key_cursors.at(key));
  st.key_cursors = std::move(kept);
}

int64_t ClaimScheduler::AcceptClaim(const ClaimRequest& req, std::vector<Item> items,
                                    absl::Time started, Batch* keep) {
  claiming_ = false;
  // Budget reserved for parts this loop does not reach (not read, or gone)
  // is given back below or with the part.
  std::map<int, int> reserved = std::move(reserved_);
  reserved_.clear();
  // Per part: items taken (not counting a suspect) and the last key.
  std::map<int, std::pair<int, ItemKey>> got;
  int taken_normal = 0;
  int64_t bytes = 0;
  for (const Item& item : items) {
    if (item.suspect) continue;
    auto& g = got[item.part];
    const ItemKey key{item.priority, item.id};
    g.second = g.first == 0 ? key : std::max(g.second, key);
    ++g.first;
    ++taken_normal;
    claimed_max_ = std::max(claimed_max_, item.id);
    if (req.max_bytes > 0) bytes += static_cast<int64_t>(item.payload.size());
  }
  // The claim read its parts in order until it had req.limit items (or
  // req.max_bytes of payloads): if it got fewer, it read every part to its
  // end; if not, every part before the last one it took from, while the
  // last may have more and the ones after it were not read at all.
  const bool by_bytes = req.max_bytes > 0 && bytes >= req.max_bytes;
  const bool full = taken_normal >= req.limit || by_bytes;
  int last = -1;
  for (size_t i = 0; i < req.parts.size(); ++i) {
    if (got.count(req.parts[i].part)) last = static_cast<int>(i);
  }
  int before = 0;  // taken from the parts read before this one
  for (size_t i = 0; i < req.parts.size(); ++i) {
    const ClaimPart& cp = req.parts[i];
    if (full && static_cast<int>(i) > last) break;  // not read
    auto g = got.find(cp.part);
    const int n = g == got.end() ? 0 : g->second.first;
    const int taken_before = before;
    before += n;
    auto it = parts_.find(cp.part);
    if (it == parts_.end() || it->second.epoch != cp.epoch) continue;  // revoked meanwhile
    PartState& st = it->second;
    // A read that stopped at its own part's limit (a rate limit's budget)
    // did not reach the end either.
    const bool to_the_end = (!full || static_cast<int>(i) < last) && n < cp.limit;
    if (auto r = reserved.find(cp.part); r != reserved.end()) {
      GiveBack(cp.part, std::max(0, r->second - n));  // what the read did not use
      reserved.erase(r);
    }
    NoteRead(req, cp, items, n, n > 0 ? g->second.second : ItemKey{}, to_the_end, started, st);
    if (!cp.key_cursors.empty() && ReleasesKeys() && n > 0) {
      // The keys' next items come after what came due behind the start and
      // before the read on from it: both were read whole if fewer rows than
      // the part's limit (and what the parts before it left) came from there.
      // A read that took nothing there may not have read at all (a cancel
      // replaced the part's claim record: pg/sql/fragments/claimed_rows.sql): the keys are kept.
      int behind = 0;
      for (const Item& item : items) {
        if (!item.suspect && item.part == cp.part && cp.after &&
            !(*cp.after < ItemKey{item.priority, item.id})) {
          ++behind;
        }
      }
      // The read of the keys' next items stops at the start: from a floor
      // below the cursor, a key's next item between the two is left to the
      // read on, which may stop short of it (and the floor is not kept:
      // NoteRead), so those keys are sent again with the next read.
      const bool from_cursor = !(cp.after && cp.cursor && *cp.after < *cp.cursor);
      ForgetReleased(
          cp, items,
          from_cursor &&
              (to_the_end || (!by_bytes && behind < std::min(cp.limit, req.limit - taken_before))),
          st);
    }
    // Stopped by its bytes in this part: a backlog there, as a part that filled the count.
    if (by_bytes && static_cast<int>(i) == last) st.full = true;
  }
  for (const ClaimPart& cp : req.parts) {  // parts the claim did not read
    auto r = reserved.find(cp.part);
    auto it = parts_.find(cp.part);
    if (r != reserved.end() && it != parts_.end() && it->second.epoch == cp.epoch) {
      GiveBack(cp.part, r->second);
    }
  }
  lent_.clear();  // (the loans of what was used stay spent)
  if (req.include_suspect) {
    suspects_pending_ =
        std::any_of(items.begin(), items.end(), [](const Item& i) { return i.suspect; });
  }
  return QueueClaimed(std::move(items), keep);
}

void ClaimScheduler::NoteRead(const ClaimRequest& req, const ClaimPart& cp,
                              const std::vector<Item>& items, int n, const ItemKey& got_last,
                              bool to_the_end, absl::Time started, PartState& st) {
  const std::optional<ItemKey> before = st.cursor;
  if (n > 0) st.cursor = before ? std::max(*before, got_last) : got_last;
  if (req.fair) {
    std::vector<const Item*> mine;
    for (const Item& item : items) {
      if (!item.suspect && item.part == cp.part) mine.push_back(&item);
    }
    if (auto turn = LastTurn(cp.key_after, mine)) st.key_after = std::move(turn);
    UpdateKeyCursors(st, mine);
  }
  if (ReleasesKeys()) UpdateKeyFloors(cp.part, items, st);
  st.full = !to_the_end && n >= std::min(cp.limit, req.limit);
  if (PollFloors() && (!cp.after || st.floor_read)) MovePollFloor(n, got_last, to_the_end, st);
  if (!cp.after || cp.key_heads || st.floor_read) {
    st.last_rescan = started;
    st.rescan = st.key_heads = st.floor_read = false;
  }
  // A read from the floor that stopped among the items that run first
  // (read from the head) reads from the floor again: they are a backlog.
  if (cp.above && !to_the_end && n > 0 && got_last.priority < 0) st.floor_read = true;
  if (!cp.after) st.last_head = started;
  if (!cp.after || cp.behind) {  // a read from the head has nothing behind it
    st.last_behind = started;
    st.look_behind = false;
  }
  // Fair: what came due behind the keys' cursors is read first; a read it
  // filled looks behind again.
  if (req.fair && cp.behind && FairBehind(cp, items) >= std::min(cp.limit, req.limit)) {
    st.look_behind = true;
  }
  // Where the next read starts behind the cursor. A read that stopped
  // early, before where the cursor was, goes on from its last item (more
  // may wait between); if the items that came due behind its start filled
  // it, from the same start again (those taken are in flight now, and the
  // rest come next).
  // Not for an ordered read that read on from its start (ReleasesKeys): in a
  // part with a backlog its items come mostly from the released keys, the
  // read on gets the room they leave (a dozen items), so a floor crept up by
  // that much a claim while each read on from it walked every item acked
  // between it and the cursor (behind a held snapshot, 1.4M dead entries of
  // items_ready in 10 s: bench/held_snapshot_ordered.sh). Between its last
  // item and the cursor an ordered part holds items held back, which their
  // keys' releases bring (ready_released.sql reads behind the start), and
  // ready ones of free keys (a late commit past the room), which the read of
  // the keys' heads finds (ClaimPart::key_heads, every kOrderedRescans; past
  // its keys, the read from the head). A key released before this read is
  // sent again with the next one (AcceptClaim), whose read of the released
  // keys reaches the cursor.
  st.floor.reset();
  // (Not for a fair read: its items are in key order, not the part's.)
  if (!req.fair && !to_the_end && n > 0 && before) {
    if (cp.after && !(*cp.after < got_last)) {
      if (*cp.after < *before) st.floor = cp.after;
      st.look_behind = true;
    } else if (got_last < *before && !ReleasesKeys()) {
      st.floor = got_last;
    }
  }
  st.hungry = !to_the_end || st.rescan;
  if (st.noticed > claim_gen_) st.hungry = true;  // noticed while this claim was under way
  if (st.noticed_head > claim_gen_) st.rescan = true;
}

void ClaimScheduler::MovePollFloor(int n, const ItemKey& got_last, bool to_the_end,
                                   PartState& st) const {
  // (A read that took nothing may not have read at all, should a cancel have
  // replaced the part's claim record meanwhile (pg/sql/fragments/claimed_rows.sql): what it
  // missed waits for the read from the head.)
  if (claim_final_ == 0) return;
  // The read began after the snapshots that made claim_final_ final, so it
  // saw every item up to it that will ever be there; one that stopped at
  // its limit saw them up to its last item (every one of priority 0 if it
  // stopped at a priority past 0, none if before).
  int64_t to = claim_final_;
  if (!to_the_end && got_last.priority <= 0) {
    if (got_last.priority < 0) return;
    to = std::min(to, got_last.id);
  }
  if (!st.poll_floor || *st.poll_floor < to) st.poll_floor = to;
}

void ClaimScheduler::UpdateKeyFloors(int part, const std::vector<Item>& items, PartState& st) {
  // A suspect ran without the probe (ClaimRequest::include_suspect): older
  // items of its key may be live, so it sets no floor. The item claimed
  // last is the floor, even below the one before (a late commit, a retried
  // item: in flight, it holds the key's later items back); one claim takes
  // at most one item of a key, but should it take more, the highest.
  std::map<std::string, int64_t> claimed;
  for (const Item& item : items) {
    if (item.suspect || item.part != part || !item.key) continue;
    auto [it, added] = claimed.emplace(*item.key, item.id);
    if (!added) it->second = std::max(it->second, item.id);
  }
  for (const auto& [key, id] : claimed) st.key_floors[key] = id;
  if (st.key_floors.size() <= kMaxKeyFloors) return;
  std::vector<int64_t> ids;
  ids.reserve(st.key_floors.size());
  for (const auto& [key, id] : st.key_floors) ids.push_back(id);
  const size_t forget = st.key_floors.size() - kMaxKeyFloors * 3 / 4;
  std::nth_element(ids.begin(), ids.begin() + forget, ids.end());
  const int64_t keep_from = ids[forget];
  for (auto it = st.key_floors.begin(); it != st.key_floors.end();) {
    it = it->second < keep_from ? st.key_floors.erase(it) : std::next(it);
  }
}

void ClaimScheduler::ForgetReleased(const ClaimPart& cp, const std::vector<Item>& items,
                                    bool evaluated, PartState& st) {
  absl::flat_hash_set<std::string> taken;
  for (const Item& item : items) {
    if (item.part == cp.part && item.key) taken.insert(*item.key);
  }
  for (const auto& [key, id] : cp.key_cursors) {
    auto it = st.released.find(key);
    if (it != st.released.end() && it->second.gen <= st.released_sent &&
        (evaluated || taken.count(key) > 0)) {
      st.released.erase(it);
    }
  }
}

int64_t ClaimScheduler::QueueClaimed(std::vector<Item> items, Batch* keep) {
  int64_t taken = 0;
  std::optional<Batch> suspect;
  std::vector<Batch> normal;
  for (auto& item : items) {
    auto it = parts_.find(item.part);
    if (it == parts_.end() || it->second.epoch != item.claim_epoch) continue;  // revoked meanwhile
    if (item.claim_record != 0) it->second.record = item.claim_record;
    in_flight_[item.id] = item.part;
    ++taken;
    if (item.suspect) {
      suspect_id_ = item.id;
      suspect.emplace();
      suspect->isolate = true;
      suspect->items.push_back(std::move(item));
      continue;
    }
    if (normal.empty() || static_cast<int>(normal.back().items.size()) >= options_.batch) {
      normal.emplace_back();
    }
    normal.back().items.push_back(std::move(item));
  }
  // The claimer's own next batch first (it began its transaction already),
  // then a suspect, alone, at the front of the queue (abandoned items are
  // old ones, and the next suspect is claimed only when this one is
  // finished), then the rest in order.
  auto next = normal.begin();
  if (keep != nullptr) {
    if (suspect) {
      *keep = *std::move(suspect);
      suspect.reset();
    } else if (next != normal.end()) {
      *keep = std::move(*next++);
    }
    for (const auto& i : keep->items) ++busy_parts_[i.part];
  }
  if (suspect) queue_.push_front(*std::move(suspect));
  for (; next != normal.end(); ++next) queue_.push_back(std::move(*next));
  return taken;
}

bool ClaimScheduler::TakeQueued(Batch* batch) {
  if (queue_.empty()) return false;
  *batch = std::move(queue_.front());
  queue_.pop_front();
  for (const auto& i : batch->items) ++busy_parts_[i.part];
  return true;
}

void ClaimScheduler::Release(const std::vector<Item>& items) {
  for (const auto& i : items) {
    if (--busy_parts_[i.part] == 0) busy_parts_.erase(i.part);
    if (i.id == suspect_id_) suspect_id_ = 0;
    in_flight_.erase(i.id);
    // Claimed in an earlier tenure of a part held again now (a lapse, a
    // re-join of this same consumer): the reads and the suspect probe of the
    // new tenure passed over it while it was in flight, and its Finish may
    // have been fenced (a new epoch: the takeover marked it abandoned, or,
    // had its claim record committed after the takeover read the records,
    // it is ready behind the cursor) or given up. Look for it again, from the
    // head and by the probe (one read for nothing if it was acked).
    if (auto it = parts_.find(i.part); it != parts_.end() && it->second.earlier.erase(i.id) > 0) {
      Notice(i.part);
      suspects_pending_ = true;
    }
    // Ordered: the key's next item may be claimed now, and it may sort
    // before the cursor. No notice says so; the next claim reads it
    // (ClaimSchedulerOptions::ordered).
    // Key concurrency: likewise, the key's next item held back; its part is
    // read from its head at once.
    if (ReleasesKeys()) {
      auto it = parts_.find(i.part);
      if (!i.key || it == parts_.end() || it->second.epoch != i.claim_epoch) continue;
      PartState& st = it->second;
      // The lowest: a late commit's item of the key, finished after a later
      // one was released, may hold back items between the two.
      auto [r, added] = st.released.emplace(*i.key, PartState::Released{i.id, ++release_gen_});
      if (!added) r->second = {std::min(r->second.id, i.id), release_gen_};
      ++notice_gen_;
      if (st.released.size() > kMaxReleased) {
        // A read from the head finds them all (a read of the keys' heads
        // visits at most 8 times its limit keys).
        st.released.clear();
        Mark(st);
      } else {
        Wake(st, std::nullopt);
      }
    } else if (ReadsFromHeads()) {
      Notice(i.part);
    } else if (options_.fair) {
      // Fair: the read that took it may have stopped short of keys with
      // more (each key is read for its share). They are after their
      // cursors: no read from the head is needed.
      ++notice_gen_;
      if (auto it = parts_.find(i.part); it != parts_.end()) Wake(it->second, std::nullopt);
    }
  }
}

std::vector<int> ClaimScheduler::PartNumbers() const {
  std::vector<int> out;
  out.reserve(parts_.size());
  for (const auto& [part, st] : parts_) out.push_back(part);
  return out;
}

int64_t ClaimScheduler::held() const {
  int64_t n = 0;
  for (const auto& b : queue_) n += b.items.size();
  for (const auto& [part, count] : busy_parts_) n += count;
  return n;
}

}  // namespace partq
