// What a consumer claims, from where, and what it then holds (consumer.h
// explains the mechanisms). Per owned part it keeps a cursor (the last key
// claimed there: a claim reads on from it), where to read from behind the
// cursor instead ("floor": a notice named an item that sorts there, or the
// last read stopped short of the cursor), and whether the part is due a read
// from its head ("rescan"), may have ready items ("hungry") or stopped its
// last read at the limit ("full"); parts take turns at the front of a claim
// ("rotation"). It also holds what is in flight: the claimed ids, the
// batches claimed but not started (the queue workers take from), the items
// being processed per part, and the one suspect (an item whose previous
// attempt was abandoned) allowed in flight at a time.
//
// Pure logic: no store, no clock (callers pass the time), no threads.
//
// Locking contract: not thread-safe, and deliberately without a mutex of its
// own. The Consumer keeps its scheduler ABSL_GUARDED_BY(its mutex) and calls
// every method with that mutex held, because its waits (workers for a batch,
// the claimer for room, a revoke for the drain) are conditions on this state
// under that same mutex. Nothing here blocks or does I/O, so the mutex is
// held for the computation only; the claim itself runs unlocked between
// BeginClaim and AcceptClaim (or FailClaim).
#ifndef PARTQ_CONSUMER_CLAIM_SCHEDULER_H_
#define PARTQ_CONSUMER_CLAIM_SCHEDULER_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "consumer/batch.h"
#include "store/store.h"
#include "store/types.h"

namespace partq {

struct ClaimSchedulerOptions {
  std::string queue;
  int batch = 100;  // items per batch; a claim for n batches reads up to n * batch
  // More than 0: a claim takes at most this many payload bytes (ClaimRequest::max_bytes: the
  // item that reaches it is the last), whatever its batches; one that reached it counts as
  // full, so its last part is read on by the next claim.
  int64_t max_claim_bytes = 0;
  // Without notices (see `notices`): every part is read from its head this
  // often. With them, a busy part's claims look behind its cursor (for
  // retries and delayed items come due) this often.
  absl::Duration rescan_interval = absl::Seconds(1);
  // Ordered queue: a finished item's key is released (ClaimPart::key_cursors):
  // the next claim reads that key's next item, which the read that passed
  // it held back, wherever it sorts, and the part on from its cursor (a
  // window of rows: ReadyItems); a part is read from its head (a window of
  // rows and each key's head: pg/sql/fragments/ready_keyed.sql) when
  // acquired, when more than kMaxReleased keys wait, and every
  // kOrderedHeadReads rescan_intervals; each key's first item is read from
  // the cursor (ClaimPart::key_heads) every kOrderedRescans rescan_intervals
  // between those (what the window or a release missed:
  // a key's item past a window all held back, a late commit of a free key
  // past what a read from a noticed floor had room for (an ordered read
  // drops the floor once it read on from it: NoteRead), an item held back
  // by a key's item in an earlier part of a grown queue, which another
  // session may finish). Every claim sends the id claimed last of each key in the
  // part (ClaimPart::key_floors), where its probes and its heads stop.
  // Never the head on every claim, nor every few: its acked rows, which a
  // held snapshot keeps, and the backlog would be walked each time.
  bool ordered = false;
  // At most this many items of a key in flight (ClaimRequest::key_concurrency;
  // 0: no bound): every claim reads from the parts' heads, where a key's
  // held-back items are, and a finished item's part is read from its head
  // at once (the key's next item may run now).
  int key_concurrency = 0;
  // Fair share across keys (FairBy::kKey): claims are fair
  // (ClaimRequest::fair). Each part's turns go on after the key served last
  // there (ClaimPart::key_after), and each key is read on from the last item
  // claimed of it (ClaimPart::key_cursors): from the heads when a part is
  // acquired and when a poll or a notice without a place says so. A read
  // looks behind (at least every rescan_interval, and again while what it
  // found there filled it) for retried and delayed items come due behind a
  // key's cursor, and keeps the cursors (a key served only from there keeps
  // its own). A notice's place lowers the part's key cursors to it. A
  // finished item wakes its part (a fair read may stop short of the limit
  // while its keys have more).
  bool fair = false;
  // Enqueue notices arrive (LISTEN) and say where their items are
  // (Notice::from): a part is then read from its head only when it is
  // acquired and on a notice that does not say (an older producer, a
  // listener that reconnected). Without notices, every part is read from its
  // head every rescan_interval (or from its poll floor: "poll-only floors"
  // below): an item that committed late, behind the cursor, has nothing
  // else to tell of it. Items that come due behind the
  // cursor (retries, delays) need neither: every claim finds them
  // (ClaimPart::after).
  bool notices = true;
};

class ClaimScheduler {
 public:
  explicit ClaimScheduler(ClaimSchedulerOptions options = {}) : options_(std::move(options)) {}

  // --- ownership ----------------------------------------------------------------
  // Parts acquired at these epochs: claimable, read from their heads first.
  // Suspects are probed for (a dead owner's items were marked abandoned when
  // they were acquired). What an earlier tenure of these parts still has in
  // flight is noted (PartState::earlier).
  void Assign(const std::vector<OwnedPart>& parts);
  // Parts revoked or lost: never claimed from again, and their queued
  // (unstarted) items dropped: they stay ready in the store for the next
  // owner. Items being processed stay counted until Release.
  void Remove(const std::vector<int>& parts);
  // Drops the queued items of `parts` again: a claim under way when they were
  // removed may have queued more.
  void DropQueued(const std::vector<int>& parts);
  // No claim is under way and no item of `parts` is being processed.
  bool Drained(const std::vector<int>& parts) const;
  // Whether the part of any of `items` is still held at the epoch the item
  // was claimed under (a batch whose parts are all gone is the new owner's).
  bool HoldsAny(const std::vector<Item>& items) const;

  // --- wake-ups -----------------------------------------------------------------
  // Items may have come to `part` (-1: to any part), the lowest at key
  // `from`: read the part from below that key if it sorts behind the cursor,
  // on from the cursor if not. Without `from`, read the part from its head.
  void Notice(int part, std::optional<ItemKey> from = std::nullopt);
  // The poll: parts that went quiet may have items that came without a
  // notice (retries and delayed items coming due; anything at all without
  // notices, which then reads them from their heads).
  void Poll();

  // --- poll-only floors -----------------------------------------------------------
  // Without notices, a part of a plain queue (not ordered, fair or bounded
  // per key) is read from its head only every kPollHeadReads
  // rescan_intervals, and in between from its *poll floor*: an id of
  // priority 0 up to which every item of the part was read, and past which
  // an item that commits late must sort. What says no item at or below an
  // id can commit any more is two snapshots (Store::CurrentSnapshot):
  // every id at or below the highest one this consumer had claimed when it
  // asked for the first was taken (nextval, which hands ids out in time
  // order: items_id_seq has no CACHE; with one, PollFloors() turns false)
  // before then, by a transaction that
  // took its xid within SnapshotSpacing (an enqueue takes both in a
  // statement or two; reserve_ids.sql and enqueue.sql take the xid first),
  // so below the xid the next snapshot's statement takes (next_xid); once a
  // snapshot's xmin passes that, all of them have ended. A read from the floor also reads the
  // part's items of a priority below 0 (which run first) from the head (ClaimPart::above). An item
  // whose transaction took its id and then waited longer than that for its xid is found by the next
  // read from the head.
  //
  // Whether the consumer should ask the store for a snapshot now: once per
  // rescan_interval (at least a second apart) while an id it claimed is not
  // final yet (an idle one asks for none); never with notices, nor once the
  // store said it cannot (Unimplemented, or an id_cache above 1).
  bool WantsSnapshot(absl::Time now) const;
  // The consumer asks for one now (then calls NoteSnapshot with the answer).
  void SnapshotAsked(absl::Time now);
  // What Store::CurrentSnapshot answered.
  void NoteSnapshot(const absl::StatusOr<SnapshotBounds>& snapshot);
  // No item at or below this id can commit any more (0: none known yet).
  int64_t final_id() const { return final_id_; }
  // The part's poll floor (nullopt: none, or not owned).
  std::optional<int64_t> poll_floor(int part) const {
    auto it = parts_.find(part);
    return it == parts_.end() ? std::nullopt : it->second.poll_floor;
  }

  // --- pause ----------------------------------------------------------------------
  // A paused queue (Store::SetPaused): no claim at all, not even ahead in an
  // ack; what is claimed already is still processed. Resuming polls every
  // part (notices that came meanwhile are kept).
  void SetPaused(bool paused);
  bool paused() const { return paused_; }

  // --- rate -----------------------------------------------------------------------
  // A fleet-wide limit of `per_second` items claimed a second from a queue of
  // `queue_parts` parts (Store::SetRate; nullopt: none). Each part's owner
  // claims at most per_second / queue_parts items a second there, from a
  // budget that starts empty when the part is acquired and keeps at most
  // kRateBurst of that rate (at least one item): no counter shared between
  // sessions, and a part handed off cannot have its budget spent twice (the
  // new owner starts from nothing). A part with items may spend, beyond its
  // own budget, what this session's idle parts (read to their ends) have
  // saved, so a session claims its parts' shares together wherever its
  // items are (keyless items come in runs of 32 to one part, kKeylessRun).
  // A suspect probe is not counted. A new limit, or the same over a grown
  // part count, starts every budget again from nothing.
  static constexpr absl::Duration kRateBurst = absl::Milliseconds(200);
  void SetRate(std::optional<double> per_second, int queue_parts);
  std::optional<double> rate() const { return rate_; }
  // When some part that may have items next has the budget for one (`now`
  // or earlier: it has); InfiniteFuture without a limit or such a part.
  absl::Time RateReadyAt(absl::Time now) const;

  // --- claims -------------------------------------------------------------------
  // Some part may have ready items (never while paused) and, under a rate
  // limit, the budget at `now` to claim one; without `now`, the budget is
  // not looked at. Or a suspect probe is due: the last probe found one and
  // none is in flight (a claim begun while one was could not probe, and
  // the ack of the one in flight cannot claim while that claim is under
  // way).
  bool WantClaim(absl::Time now = absl::InfiniteFuture()) const;
  // The parts it claims from, in order.
  std::vector<int> PartNumbers() const;
  // A claim is under way (between BeginClaim and AcceptClaim or FailClaim).
  bool claiming() const { return claiming_; }
  // A claim for `batches` batches (0: only the suspect probe), or nullopt
  // when there is nothing worth reading; `finishing` are the items being
  // finished by the call that carries the claim (not in flight any more, and
  // a finishing suspect frees the suspect slot). With a request, a claim is
  // under way until AcceptClaim or FailClaim. Must not be called while one
  // is.
  std::optional<ClaimRequest> BeginClaim(const SessionId& session, int batches,
                                         const std::vector<Item>& finishing, absl::Time now);
  // The claim ahead in the ack of `finishing` (FinishRequest::next): the
  // `batches` to BeginClaim it with, or nullopt when none is due. One is due
  // for as many batches as the queued ones lack to feed `idle_workers` and
  // the finishing worker; or, for 0 batches (the suspect probe only), when
  // `finishing` is the suspect in flight and more are pending, even with the
  // queue full. Never while a claim is under way.
  // Under a rate limit, as WantClaim(now) says.
  std::optional<int> ClaimAheadBatches(int idle_workers, const std::vector<Item>& finishing,
                                       absl::Time now = absl::InfiniteFuture()) const;
  // Takes the items the claim `req` (started at `started`) returned and ends
  // it: moves the cursors, sets what each part read says of it, records the
  // items in flight and queues them as batches (a suspect alone, at the
  // front). With `keep`, the first batch goes there instead, counted as
  // being processed. Items of parts lost meanwhile are ignored. Returns how
  // many items it took.
  int64_t AcceptClaim(const ClaimRequest& req, std::vector<Item> items, absl::Time started,
                      Batch* keep = nullptr);
  // The claim under way failed: nothing was claimed (its budget is given back).
  void FailClaim();

  // --- batches ------------------------------------------------------------------
  // Batches claimed and not started.
  size_t queued() const { return queue_.size(); }
  // Moves the oldest queued batch to `*batch`, counted as being processed;
  // false when none is queued.
  bool TakeQueued(Batch* batch);
  // Forgets the queued batches without releasing anything (a crash, for
  // Consumer::Abandon).
  void ClearQueued() { queue_.clear(); }
  // `items` are finished or given up: no longer processed nor in flight. One
  // an earlier tenure of its part claimed has its part read from the head
  // and suspects probed for again (it may have been fenced).
  void Release(const std::vector<Item>& items);
  // Items queued or being processed.
  int64_t held() const;

 private:
  // What the consumer knows of a part it owns.
  struct PartState {
    Epoch epoch;
    std::optional<ItemKey> cursor;  // the last key claimed in this tenure
    // Ids an earlier tenure of the part claimed that are still in flight
    // (Assign): while any is, claims check every item read against the
    // in-flight list (ClaimPart::cursor unset), and its release reads the
    // part from its head again.
    absl::flat_hash_set<int64_t> earlier;
    bool rescan = true;             // the next claim reads from the head
    // The next claim reads from after this key, behind the cursor.
    std::optional<ItemKey> floor;
    // A notice lowered the floor: merged into it when the next claim begins
    // (a claim under way does not overwrite it).
    std::optional<ItemKey> noticed_floor;
    bool hungry = true;             // may have ready items: claims include it
    // Its last read stopped at the claim's limit: it likely has a batch's
    // worth more, so a claim that starts here need not list other parts.
    bool full = false;
    absl::Time last_rescan = absl::InfinitePast();
    int64_t record = 0;          // the claim record our last claim here wrote (0: unknown)
    // Whether the next claim looks behind the cursor for what came due
    // there (ClaimPart::behind): after a poll, after such items filled a
    // read, and at least every rescan_interval.
    bool look_behind = true;
    absl::Time last_behind = absl::InfinitePast();
    int64_t noticed = 0;         // notice_gen_ at the last notice or poll for it
    int64_t noticed_head = 0;    // ... at the last one that wants a read from the head
    // Under a rate limit: items it may claim (SetRate), as of budget_at
    // (InfinitePast: not counted yet; it starts from nothing then).
    double budget = 0;
    absl::Time budget_at = absl::InfinitePast();
    // Fair: the key whose turn came last here (ClaimPart::key_after).
    std::optional<std::string> key_after;
    // Fair: per key, the last id claimed of it since the part's last read
    // from the heads (ClaimPart::key_cursors); at most kMaxKeyCursors.
    std::map<std::string, int64_t> key_cursors;
    // Ordered: keys released since a claim last read their next items, with
    // the (lowest) id of the item finished (ClaimPart::key_cursors) and the
    // release_gen_ of the key's last release; at most kMaxReleased.
    struct Released {
      int64_t id = 0;
      uint64_t gen = 0;
    };
    std::map<std::string, Released> released;
    uint64_t released_sent = 0;  // release_gen_ when a claim last sent them
    // Ordered (not fair): per key, the id of its item claimed last here in
    // this tenure (ClaimPart::key_floors); at most kMaxKeyFloors.
    std::map<std::string, int64_t> key_floors;
    // When the part was last read from its head (ClaimPart::after unset).
    absl::Time last_head = absl::InfinitePast();
    // Ordered: the next claim reads the keys' heads from the cursor
    // (ClaimPart::key_heads).
    bool key_heads = false;
    // Poll-only (PollFloors): every item of priority 0 up to this id was
    // read in this tenure; the next claim reads from it (`floor_read`)
    // instead of from the head when a rescan is due.
    std::optional<int64_t> poll_floor;
    bool floor_read = false;
  };
  // Without notices, parts of a plain queue are read from their poll floors
  // (see "poll-only floors" above), until the store says it has no
  // snapshots or that its ids are not in time order (NoteSnapshot): then
  // every poll reads the heads again, and the floors set before are left.
  bool PollFloors() const {
    return snapshots_ && !options_.notices && !options_.ordered && !options_.fair &&
           options_.key_concurrency == 0;
  }
  // A poll-only part with a floor is read from its head every this many
  // rescan_intervals (what waited too long between its id and its xid).
  static constexpr int kPollHeadReads = 60;
  // Snapshots come at least this far apart (and a rescan_interval): the time
  // a transaction may take between an id and its xid.
  static constexpr absl::Duration kMinSnapshotSpacing = absl::Seconds(1);
  absl::Duration SnapshotSpacing() const {
    return std::max(options_.rescan_interval, kMinSnapshotSpacing);
  }
  // The snapshots' (next_xid, highest id claimed before the one before) whose
  // next_xid no snapshot's xmin has passed yet; at most kMaxPendingSnapshots
  // (past that, newer ones are not kept: the floors move on later).
  static constexpr size_t kMaxPendingSnapshots = 120;
  // After a read from the head or the floor of `st`'s part that took `n`
  // items, the last at `got_last`, and read to the end or not.
  void MovePollFloor(int n, const ItemKey& got_last, bool to_the_end, PartState& st) const;
  // Key-bounded queues (and fair ordered ones) hold items back behind a
  // part's cursor (a key's next item), so every claim reads their parts from
  // the heads and a finished item has its part read from its head again.
  bool ReadsFromHeads() const {
    return (options_.ordered || options_.key_concurrency > 0) && !ReleasesKeys();
  }
  // An ordered queue (not fair) reads a finished item's key's next item
  // instead (ClaimSchedulerOptions::ordered).
  bool ReleasesKeys() const { return options_.ordered && !options_.fair; }
  static constexpr size_t kMaxReleased = 256;
  // An ordered part's keys' heads are read every this many
  // rescan_intervals (ClaimSchedulerOptions::ordered, ClaimPart::key_heads):
  // such a read visits every key of the part, and a backlog makes that a
  // walk.
  static constexpr int kOrderedRescans = 10;
  // ... and read from its head every this many (a read of the keys' heads
  // visits at most 8 times its limit keys, in key order, so in a part with
  // more keys than that an item whose key sorts late and that no release
  // names waits for this read).
  static constexpr int kOrderedHeadReads = 60;
  // After the claim `req` read `cp` and took `items`: forgets the released
  // keys it sent for `st`'s part whose next items it surely read
  // (`evaluated`: the read of keys behind its start was not cut short), and
  // those it took an item of; a key released again since they were sent
  // stays, whatever its id.
  static void ForgetReleased(const ClaimPart& cp, const std::vector<Item>& items, bool evaluated,
                             PartState& st);
  // The key cursors a part keeps (each claim sends them all).
  static constexpr size_t kMaxKeyCursors = 64;
  // The key floors a part keeps (each claim of it sends them all); past
  // that, the keys claimed longest ago are forgotten until a quarter fewer
  // remain (their items are then probed without a floor once more).
  static constexpr size_t kMaxKeyFloors = 512;
  // Ordered: the key floors of `part` after a claim took `items`.
  static void UpdateKeyFloors(int part, const std::vector<Item>& items, PartState& st);
  // Fair: how many of `items` the read of `cp`'s part found behind its key
  // cursors (what came due there).
  static int FairBehind(const ClaimPart& cp, const std::vector<Item>& items);
  // Fair: the key cursors after a read of `st`'s part took `items`.
  static void UpdateKeyCursors(PartState& st, const std::vector<const Item*>& items);
  // Fair: the key a read from `from` served last, of the keys of `items`
  // (the part's, from one claim): the last one, in the order of the turns,
  // of those that had the most turns. nullopt when none has a key.
  static std::optional<std::string> LastTurn(const std::optional<std::string>& from,
                                             const std::vector<const Item*>& items);
  // BeginClaim's first step: moves each part's noticed floor into its floor
  // (fair: into its key cursors) and, for a claim of `batches` > 0, lists
  // the hungry parts, marking those due a read from the head at `now`.
  std::vector<int> HungryParts(int batches, absl::Time now);
  // Under a rate limit: how many items each part of *hungry may be read for
  // at `now` (the whole items its budget holds, then what it may borrow from
  // the idle parts' budgets, at most `limit` in all), by part; the parts with
  // less than one leave *hungry. A part not counted yet starts counting now,
  // from nothing. What each part borrows, and from which, is in borrowed_
  // until BeginClaim spends it.
  std::map<int, int> RateAllowed(int limit, absl::Time now, std::vector<int>* hungry);
  // Spends `n` items of budget for `part`: its own, then what RateAllowed
  // lent it (borrowed_; the loans are kept in lent_ until the claim ends).
  void SpendBudget(int part, int n);
  // Gives `n` items of budget the claim under way took for `part` and did
  // not use back: to its lenders first (each at most what it lent), then to
  // the part; no budget above the burst, so a session keeps at most its
  // parts' bursts.
  void GiveBack(int part, double n);
  // The budget the idle (not hungry) parts hold at `now`, which hungry ones
  // may borrow.
  double IdleBudgetAt(absl::Time now) const;
  // What the claim `req`'s read of `cp` (started at `started`) says of its
  // part, `st`: it took `n` of `items` there, the last at key `got_last`
  // (when n > 0), and read to the end of what it could see (`to_the_end`)
  // or not.
  void NoteRead(const ClaimRequest& req, const ClaimPart& cp, const std::vector<Item>& items, int n,
                const ItemKey& got_last, bool to_the_end, absl::Time started, PartState& st);
  // AcceptClaim's last step: `items` of parts still held go in flight and are
  // queued as batches (a suspect alone, at the front), the first to `keep`
  // if given. Returns how many it took.
  int64_t QueueClaimed(std::vector<Item> items, Batch* keep);
  // A part's budget at `now` (at most the burst).
  double BudgetAt(const PartState& st, absl::Time now) const;
  // The part may have items no claim has seen: read it from its head.
  void Mark(PartState& st);
  // The part may have items after `floor` (nullopt: after its cursor).
  void Wake(PartState& st, std::optional<ItemKey> floor);

  ClaimSchedulerOptions options_;
  std::map<int, PartState> parts_;               // claimable parts
  absl::flat_hash_map<int64_t, int> in_flight_;  // claimed id -> part
  std::deque<Batch> queue_;                      // claimed, not yet started
  std::map<int, int> busy_parts_;                // part -> items being processed
  int64_t suspect_id_ = 0;                       // the suspect in flight; 0: none
  // The last probe found a suspect (or parts came that may hold some): the
  // ack of a suspect probes for the next one, and with none in flight a
  // claim is wanted for the probe (WantClaim).
  bool suspects_pending_ = true;
  size_t rotation_ = 0;    // first part of the next claim, if not all fit
  bool claiming_ = false;  // a claim is under way
  bool paused_ = false;    // SetPaused
  std::optional<double> rate_;  // SetRate: items a second, the whole queue
  double part_rate_ = 0;        // ... per part
  double burst_ = 0;            // the most budget a part keeps
  std::map<int, int> reserved_;  // budget the claim under way took, per part
  // RateAllowed's loans: borrowing part -> (lending part, items); once
  // spent, the claim under way's, in lent_.
  std::map<int, std::vector<std::pair<int, double>>> borrowed_;
  std::map<int, std::vector<std::pair<int, double>>> lent_;
  // Counts notices and polls; a claim started at claim_gen_ does not clear a
  // part's hunger (or rescan) if the part was noticed after that.
  int64_t notice_gen_ = 0;
  int64_t claim_gen_ = 0;
  uint64_t release_gen_ = 0;  // counts ordered releases (PartState::released)
  // Poll-only floors: the highest id claimed so far, and when the last
  // snapshot was asked for; the highest one when the one before was; the snapshots waiting; what
  // can no longer commit; that as of the claim under way; whether the store
  // has snapshots at all.
  int64_t claimed_max_ = 0;
  absl::Time last_snapshot_ = absl::InfinitePast();
  int64_t asked_claimed_max_ = 0;  // claimed_max_ when the last one was asked for
  int64_t claimed_max_at_snapshot_ = 0;
  std::deque<std::pair<int64_t, int64_t>> pending_snapshots_;
  int64_t final_id_ = 0;
  int64_t claim_final_ = 0;
  bool snapshots_ = true;
};

}  // namespace partq

#endif  // PARTQ_CONSUMER_CLAIM_SCHEDULER_H_
