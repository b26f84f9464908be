// Value types shared by the coordinator, the consumer and the producer.
#ifndef PARTQ_STORE_TYPES_H_
#define PARTQ_STORE_TYPES_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/time/time.h"

namespace partq {

// A session's id: a UUID in its canonical text form. Sessions sort by it
// (lexical assignment), so it is compared as text, like PostgreSQL's uuid.
struct SessionId {
  std::string value;
  friend bool operator==(const SessionId& a, const SessionId& b) { return a.value == b.value; }
  friend bool operator!=(const SessionId& a, const SessionId& b) { return a.value != b.value; }
  friend bool operator<(const SessionId& a, const SessionId& b) { return a.value < b.value; }
  friend std::ostream& operator<<(std::ostream& os, const SessionId& s) { return os << s.value; }
  template <typename H>
  friend H AbslHashValue(H h, const SessionId& s) {
    return H::combine(std::move(h), s.value);
  }
};

// A fencing number on a part's ownership row. Every new owner (and every
// static re-join) gets a fresh, larger epoch from a database sequence, so an
// epoch names one tenure of one session on one part.
struct Epoch {
  int64_t value = 0;
  friend bool operator==(Epoch a, Epoch b) { return a.value == b.value; }
  friend bool operator!=(Epoch a, Epoch b) { return a.value != b.value; }
  friend bool operator<(Epoch a, Epoch b) { return a.value < b.value; }
  friend std::ostream& operator<<(std::ostream& os, Epoch e) { return os << e.value; }
};

enum class AssignmentKind { kLexical, kSticky };

// What a queue's parts are shared fairly by (QueueConfig::fair_by). kNone:
// items go in (priority, id) order within a part. kKey: each part's owner
// serves the keys it holds in turn, so one key's backlog cannot hold back
// another key's items (store.h, ClaimRequest::fair).
enum class FairBy { kNone, kKey };

struct QueueConfig {
  std::string name;
  int parts = 16;
  AssignmentKind assignment = AssignmentKind::kLexical;
  absl::Duration session_ttl = absl::Seconds(10);
  int max_attempts = 25;
  bool ordered = false;
  // A Kafka topic for this queue's dead-lettered items: the Finish that
  // dead-letters an item also writes it to the outbox for this topic, with
  // Kafka Connect-style context headers (store.h, "Dead-letter topic").
  // nullopt: no dead-letter topic. Validated by ValidateTopicName.
  std::optional<std::string> dlq_topic;
  // Paused (Store::SetPaused): its workers claim nothing and finish what they
  // have; they keep their parts and heartbeats. Not a creation setting.
  bool paused = false;
  // A fleet-wide limit: items claimed a second from the whole queue, kept by
  // each part's owner for its part's share (ClaimScheduler::SetRate).
  // nullopt: none. Validated by ValidateRate.
  std::optional<double> rate;
  // The part counts the queue had before each grow (Store::GrowParts), oldest
  // first; empty for a queue that never grew. Not a creation setting. Each
  // count divides the next and `parts`, so the key of an item in part p once
  // lived in part p % c for each earlier count c: an ordered queue's claim
  // there waits for those parts' older items of the key.
  std::vector<int> grown_from;
  // Fair share across keys (Store::SetFairBy). Sessions read it when they
  // start: a change reaches workers started after it.
  FairBy fair_by = FairBy::kNone;
  // At most this many items of one key in flight at once, across the fleet
  // (Store::SetKeyConcurrency); 0: no bound. An ordered queue is bounded to
  // 1 whatever this says. Sessions read it when they start, as fair_by.
  int key_concurrency = 0;
  // The largest payload the SQL API takes into this queue (its enqueue
  // functions, add_schedule; Store::SetMaxPayload): the queue's, so a
  // producer cannot raise it. C++ producers keep their own limit
  // (PgOptions::max_payload_bytes, --max-payload), as they did. Validated by
  // ValidateMaxPayload.
  int64_t max_payload_bytes = 1 << 20;  // kDefaultMaxPayloadBytes (validate.h)
};

// A part this session owns, and the epoch of that ownership.
struct OwnedPart {
  int part = 0;
  Epoch epoch;
  friend bool operator==(const OwnedPart& a, const OwnedPart& b) {
    return a.part == b.part && a.epoch == b.epoch;
  }
};

// One row of session_parts.
struct PartOwner {
  int part = 0;
  SessionId session;
  Epoch epoch;
};

// A group generation no view had: asks for the whole group.
inline constexpr int64_t kNoGeneration = -1;
// How many generations back a group read can still return only what changed
// (GroupView::delta): a caller whose generation is older reads the whole
// group. PgStore keeps the changes of that many generations (migration 22).
inline constexpr int64_t kGroupChangesKept = 1024;

// The live members of a queue's group and who owns what, read in one snapshot.
struct GroupView {
  bool alive = true;               // heartbeat only: false when our row is gone
  std::vector<SessionId> members;  // sessions not yet expired, sorted by id
  std::vector<PartOwner> owners;   // session_parts rows, sorted by part
  int64_t expired = 0;             // sessions this call deleted as expired
  bool paused = false;             // the queue is paused (Store::SetPaused)
  std::optional<double> rate;      // the queue's rate limit (Store::SetRate)
  // The queue's part count in the same snapshot as `owners` (it grows with
  // Store::GrowParts); 0 when the store did not say.
  int parts = 0;
  // The group's generation in this snapshot: every change of the queue's
  // members or owners moves it (Store::HeartbeatSince).
  int64_t generation = 0;
  // Nothing changed since the generation the caller knew: members and owners
  // are left empty, and the view the caller read at that generation is still
  // the group. Never true for a caller that passed kNoGeneration.
  bool unchanged = false;
  // Owners changed since the generation the caller knew: `owners` lists only
  // the parts whose owner row was written since (at their epochs now), and
  // `unowned` the parts whose owner row went since and was not written again,
  // both sorted by part; every other part is as in the caller's view at that
  // generation. `members` is whole. Never true with `unchanged`, nor for a
  // caller that passed kNoGeneration or a generation more than
  // kGroupChangesKept behind, nor for a heartbeat that expired a session.
  bool delta = false;
  std::vector<int> unowned;
};

// Items a session's consumer finished, by outcome: counted in memory and
// carried to the database by the session's heartbeats (Store::Heartbeat),
// which is how `partq status` and the console know the queue's throughput
// without a write on the ack path.
struct FinishCounts {
  int64_t acked = 0;
  int64_t retried = 0;  // failed attempts that will be retried
  int64_t dead = 0;     // dead-lettered
  bool empty() const { return acked == 0 && retried == 0 && dead == 0; }
  friend FinishCounts operator-(const FinishCounts& a, const FinishCounts& b) {
    return {a.acked - b.acked, a.retried - b.retried, a.dead - b.dead};
  }
  friend FinishCounts operator+(const FinishCounts& a, const FinishCounts& b) {
    return {a.acked + b.acked, a.retried + b.retried, a.dead + b.dead};
  }
  friend bool operator==(const FinishCounts& a, const FinishCounts& b) {
    return a.acked == b.acked && a.retried == b.retried && a.dead == b.dead;
  }
};

// One session's heartbeat (Store::HeartbeatMany; the arguments of
// Store::HeartbeatSince).
struct HeartbeatRequest {
  std::string queue;
  SessionId session;
  int64_t incarnation = 0;
  int64_t known_generation = kNoGeneration;
  FinishCounts finished;
};

// What a queue's sessions reported finishing in one minute of the database
// clock (the minute of the heartbeat that carried the counts).
struct ThroughputMinute {
  absl::Time minute;  // its start
  FinishCounts counts;
};

struct SessionInfo {
  SessionId id;
  std::string instance_id;  // empty for dynamic members
  std::string host;
  int pid = 0;
  absl::Duration since_heartbeat;  // database time since the last heartbeat
  absl::Duration expires_in;       // negative when already expired
  int parts_owned = 0;
  absl::Duration since_start;  // database time since it joined
  // The other queues a live session of the same process (host and pid) serves, by name: a
  // worker of several queues (`partq worker A B`) has a session in each. Empty for pid 0.
  std::vector<std::string> also_serves;
  // Its `throughput` rows (QueueStatus::throughput, this session's alone) of
  // the minutes RecentRates needs: those that may cover the minute before
  // its last heartbeat. Oldest first; empty in a store that keeps none.
  std::vector<ThroughputMinute> throughput;
};

// Whether a session is live: its TTL had not run out when a read said it
// expires in `expires_in`, `since_read` ago. An expired session keeps its row
// (and its parts) until a live member's heartbeat deletes it, so its parts
// have no live owner all the same. The one rule `partq status`, the queue
// collector and the console count live sessions and owned parts by.
inline bool SessionLive(absl::Duration expires_in,
                        absl::Duration since_read = absl::ZeroDuration()) {
  return expires_in - since_read > absl::ZeroDuration();
}

// An item as a consumer sees it.
struct Item {
  int64_t id = 0;
  int part = 0;
  std::optional<std::string> key;
  std::optional<std::string> dedup_key;
  int priority = 0;
  int attempts = 0;  // attempts so far, including this one
  std::string payload;
  absl::Time enqueued_at;
  absl::Time run_at;
  Epoch claim_epoch;  // the epoch of the part's ownership this item was claimed under
  // The claim record that lists this item (PgStore: part_claims.seq; 0 when
  // the store keeps no such rows). The session passes it back as
  // ClaimPart::record, so its next claim there replaces exactly that row.
  int64_t claim_record = 0;
  bool suspect = false;  // a previous attempt was abandoned (its owner died mid-item)
  // Where the store found the row, so the ack can go straight to it (PgStore:
  // the row's ctid, block << 16 | offset); 0 when unknown. Only a hint: the
  // ack falls back to the id.
  uint64_t locator = 0;
  // The queue group the item belongs to (NewItem::group); its ack or death
  // counts in the group (store.h, "Queue groups").
  std::optional<std::string> group;
};

// An item's place in its part's claim order.
struct ItemKey {
  int priority = 0;
  int64_t id = 0;
  friend bool operator<(const ItemKey& a, const ItemKey& b) {
    return std::tie(a.priority, a.id) < std::tie(b.priority, b.id);
  }
  friend bool operator==(const ItemKey& a, const ItemKey& b) {
    return std::tie(a.priority, a.id) == std::tie(b.priority, b.id);
  }
};

// What an item to enqueue carries.
struct NewItem {
  std::string payload;
  std::optional<std::string> key;
  std::optional<std::string> dedup_key;
  int priority = 0;  // lower runs first
  absl::Duration delay = absl::ZeroDuration();
  // A queue group (store.h, "Queue groups"): the item is held until the
  // group starts, and the group ends when its last item finishes. Created
  // when missing; an ended group takes no items. No delay with a group.
  std::optional<std::string> group;
};

struct EnqueueResult {
  int64_t id = 0;
  int part = 0;
  bool duplicate = false;  // dedup key matched a live item; id is that item
};

// A schedule: an item for `queue` at every tick, fired by the queue's
// workers exactly once per tick (Store::FireSchedules, docs/architecture.md).
struct ScheduleSpec {
  // Unique in the schema (not per queue): `partq schedule delete NAME`
  // needs no queue, and the name reads the same in metrics and dedup keys
  // whichever queue it feeds. Validated as a queue name is.
  std::string name;
  std::string queue;
  // Exactly one of the two (schedule/timing.h): an interval of whole
  // seconds (ticks on multiples of it since the Unix epoch), or a cron
  // expression read in `time_zone` (an IANA name; empty: UTC).
  absl::Duration every = absl::ZeroDuration();
  std::string cron;
  std::string time_zone;
  // What each tick enqueues. Its dedup key is schedule:NAME:TICK (TICK as
  // FormatTick, RFC 3339 UTC), a second guard against a tick firing twice.
  std::string payload;
  std::optional<std::string> key;
  int priority = 0;
  // How old a due tick may be and still fire, late (schedule/timing.h,
  // PlanCatchUp): ticks its firer missed by dying or stalling are fired by
  // the next one, each once. nullopt: long enough for a failover
  // (CatchUpOf, store/validate.h); zero: only the latest due tick fires.
  // 0 to 366 days.
  std::optional<absl::Duration> catch_up;
};

// A schedule as stored, with what its workers did with it.
struct Schedule {
  ScheduleSpec spec;
  absl::Time created_at;
  // The next tick to fire; nullopt when none was computed yet (one added
  // through the SQL API, whose first worker computes it) or the expression
  // never fires.
  std::optional<absl::Time> next_tick;
  std::optional<absl::Time> last_tick;  // the last tick fired
  int64_t fired = 0;                    // ticks fired (items enqueued)
  int64_t missed = 0;                   // due ticks older than the catch-up window, not fired
  // Why workers cannot fire it (an expression written through the SQL API
  // that the C++ parser refuses); empty when fine.
  std::string error;
  // The role may not read payloads (a viewer's, migration 35): spec.payload
  // is empty.
  bool payload_hidden = false;
};

// One tick fired by Store::FireSchedules.
struct ScheduleFiring {
  std::string name;
  absl::Time tick;
  int64_t missed = 0;  // due ticks before `tick` skipped in the same firing
  absl::Duration late;  // how long after `tick` it fired (a catch-up: a firer died)
  EnqueueResult item;  // duplicate: the dedup key said the tick had fired
};
struct FiredSchedules {
  std::vector<ScheduleFiring> fired;
  absl::Time db_now;  // the database clock when the schedules were read
  // The earliest next tick among the queue's schedules after these
  // firings; nullopt when it has none.
  std::optional<absl::Time> next_due;
};

// A message for Kafka, published through the outbox (Tx::Publish) by `partq
// bridge publish`.
struct OutboxEvent {
  std::string topic;
  std::optional<std::string> key;  // raw bytes; nullopt: no key
  std::string payload;
  std::optional<std::string> headers_json;  // a JSON array of {"key","value"}
};

}  // namespace partq

#endif  // PARTQ_STORE_TYPES_H_
