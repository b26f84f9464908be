// The one seam between partq and its database.
//
// Every database operation partq performs is an intent-named method here.
// PgStore (pg_store.h) is the only implementation that talks to PostgreSQL
// and the only code that includes libpqxx; MemStore (mem_store.h) serves unit
// tests of pure logic.
//
// Errors are values (absl::Status):
//   kUnavailable         the connection broke or the server is gone; the store
//                        reconnects on the next call, so retrying is right.
//                        When it broke during a COMMIT, OutcomeUnknown(status)
//                        is true: the writes may or may not have committed (a
//                        failover can keep them), so a retry may do them twice.
//   kAborted             serialization failure or deadlock: retry the operation.
//   kNotFound            unknown queue / item.
//   kAlreadyExists       queue exists.
//   kInvalidArgument     bad input (names, ranges, payload size).
//   kFailedPrecondition  schema missing or newer than this binary, or a queue
//                        to delete still holds work: don't retry.
//   kInternal            anything else the server rejected.
//
// Thread-safety: a Store is one connection; use it from one thread at a time.
// Make one per thread with a StoreFactory.
#ifndef PARTQ_STORE_STORE_H_
#define PARTQ_STORE_STORE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "store/types.h"

namespace pqxx {
class transaction_base;
}

namespace partq {

// The mark of a kUnavailable status whose transaction may have committed (the
// connection broke during its COMMIT); PgStore sets it, callers that report
// what was written (enqueue --stdin) read it.
absl::Status MarkOutcomeUnknown(absl::Status status);
bool OutcomeUnknown(const absl::Status& status);

// A row of a query result, NULL as nullopt.
using Row = std::vector<std::optional<std::string>>;

// What the server made of a statement prepared with Tx::Prepare. Types are
// PostgreSQL's names of the base type (a domain's is its base type's):
// "bigint", "bytea", "jsonb", "text", "timestamp with time zone".
struct PreparedStatement {
  // $1..$n: n is the highest parameter the statement uses.
  std::vector<std::string> param_types;
  // The columns of its rows; empty for a statement that returns none (a
  // CALL returns one row of its procedure's OUT and INOUT parameters).
  std::vector<std::string> column_types;
  // PostgreSQL parses it as a query, INSERT, UPDATE, DELETE, MERGE, VALUES or CALL: a statement
  // that runs inside the transaction and cannot end it (not COMMIT, ROLLBACK, SAVEPOINT, ...).
  bool keeps_transaction = false;
};

// The transaction a handler's own writes go into; it commits exactly when the
// items it processes are acknowledged, or not at all. Everything a handler
// asks partq to do with an item — its SQL, follow-up items, messages for
// Kafka — goes through this one object, so it is done exactly once.
//
// A statement that fails leaves the transaction unusable until a rollback
// to a savepoint taken before it (PostgreSQL's rule; MemStore follows it for
// its own operations). Input refused before any statement runs (a malformed
// item or topic, an unknown queue) leaves the transaction as it was.
class Tx {
 public:
  virtual ~Tx() = default;
  // Runs `sql` with $1..$n bound to `params` (NULL as nullopt); returns rows.
  // Unimplemented when the store runs no SQL (MemStore).
  virtual absl::StatusOr<std::vector<Row>> Exec(
      absl::string_view sql, const std::vector<std::optional<std::string>>& params = {}) = 0;
  // Runs `sql`, one or more statements separated by semicolons and without
  // parameters, in one round trip (PostgreSQL's simple query protocol); their
  // rows are dropped. For strings of utility statements (a list of SET
  // LOCAL). The default runs `sql` as one Exec.
  virtual absl::Status ExecScript(absl::string_view sql) { return Exec(sql).status(); }
  // Prepares `sql` on this transaction's connection (once per connection:
  // later calls with the same text answer from memory) and describes it;
  // Exec of the same text then runs the prepared statement, so a handler
  // that calls Prepare before each Exec parses and plans it once per
  // connection. A parameter whose type the statement leaves open (one it
  // does not use, below the highest it uses, or one used where any type
  // fits, as in `$2 IS NULL`) is declared fallback_types[i] for $i+1 (a
  // type name; text past the end of the list). Returns the server's error when `sql`
  // does not parse or names something missing; the transaction stays usable
  // either way. Unimplemented when the store runs no SQL (MemStore).
  virtual absl::StatusOr<PreparedStatement> Prepare(
      absl::string_view sql, const std::vector<std::string>& fallback_types = {}) {
    return absl::UnimplementedError("this store prepares no SQL");
  }

  // --- savepoints ---------------------------------------------------------------
  // `name` is a lowercase identifier ([a-z_][a-z0-9_]*) chosen by the caller,
  // never user input. Rolling back to a savepoint undoes everything done in
  // the transaction since it was taken (SQL, enqueues, publishes) and keeps
  // it, clean; releasing one keeps the work and forgets the savepoint.
  virtual absl::Status Savepoint(absl::string_view name) = 0;
  virtual absl::Status ReleaseSavepoint(absl::string_view name) = 0;
  virtual absl::Status RollbackToSavepoint(absl::string_view name) = 0;
  // ReleaseSavepoint(name) then Savepoint(name), in one round trip.
  virtual absl::Status RenewSavepoint(absl::string_view name) = 0;

  // --- effects ------------------------------------------------------------------
  // Enqueues `item` into `queue` in this transaction: it exists exactly when
  // the transaction commits (the wake-up goes out on commit too). Same
  // rules, parts and dedup as Store::Enqueue.
  virtual absl::StatusOr<EnqueueResult> Enqueue(absl::string_view queue, const NewItem& item) = 0;
  // Writes `event` to the outbox in this transaction: `partq bridge publish`
  // sends it to Kafka once the transaction has committed. InvalidArgument for
  // a malformed topic (refused before the write) or headers that are not JSON
  // (a failed statement).
  virtual absl::Status Publish(const OutboxEvent& event) = 0;

  // The libpqxx transaction object, for handlers that want the full API;
  // nullptr when the store is not PostgreSQL. It is a pqxx::nontransaction
  // on which partq has sent BEGIN (Finish drives the transaction with plain
  // statements, so it can send COMMIT and the next BEGIN together): run
  // statements on it, but do not commit or abort it, and use the savepoint
  // methods above rather than pqxx::subtransaction (which needs a
  // pqxx::dbtransaction).
  virtual pqxx::transaction_base* pqxx() = 0;
  // The schema partq's tables live in (already validated).
  virtual const std::string& schema() const = 0;
};

// How one processed item ends.
struct Outcome {
  // kLeave: not finished by this call; the item stays claimed (in flight)
  // and the caller finishes it in a later Finish.
  enum class Kind { kAck, kRetry, kDead, kLeave };
  int64_t id = 0;
  int part = 0;
  Kind kind = Kind::kAck;
  absl::Duration retry_delay;         // kRetry: run again after this
  std::string error;                  // kRetry/kDead: the handler's error, kept
  std::optional<std::string> result;  // kAck: optional result for `partq wait`
  // Give the attempt back. kRetry: it does not count (an unstarted item
  // handed off, a throttled one) and cannot dead-letter the item; kDead: the
  // dead item's attempts leave it out (dead-lettered without running).
  bool refund_attempt = false;
};

// Claims live in memory. Only a part's owner reads its items, so a claim is a
// read: it writes nothing on the item rows. What stays in the database is one
// record per part (part_claims): the ids its owner had in flight at its last
// claim. A graceful release or leave deletes the record; a new owner that
// finds a record left by an owner that died (AcquireParts, or a static
// re-join) counts one attempt for each of those items and marks them
// abandoned, so they come back as suspects, one at a time, and an item that
// kills every worker that takes it is dead-lettered after max_attempts
// ("crash loop").

// Store::CurrentSnapshot: PostgreSQL's pg_snapshot_xmin of a snapshot, an xid above every xid
// handed out before the call (not the snapshot's xmax, which is only the last xid to end plus
// one: a transaction that took its xid earlier and is still open may be at or above it), and
// the CACHE of the items' id sequence: above 1, each connection takes a run of ids ahead
// and spends it later, so ids are not handed out in time order and poll floors are off.
struct SnapshotBounds {
  int64_t xmin = 0;
  int64_t next_xid = 0;
  int64_t id_cache = 1;
};

// Where a claim reads in one part.
struct ClaimPart {
  int part = 0;
  Epoch epoch;  // claim only while the part is ours at this epoch
  // Read only items that sort after this key (the last one this session
  // claimed in the part, or lower: see below): the part's head, where the
  // items acked a moment ago still sit in the index until vacuum (and for as
  // long as a snapshot holds the vacuum horizon back), is not walked again.
  // nullopt: read from the head ("rescan").
  // Behind `after` the claim still returns the items that can come due
  // there: those retried, enqueued with a delay or requeued from the dead
  // items (their run_at is later than their enqueued_at), once due. A new
  // item that sorts behind `after` (a higher priority, or an earlier id that
  // committed late) is not returned: its enqueue notice carries its key
  // (Notice::from), and the caller reads from below that key.
  std::optional<ItemKey> after;
  int limit = 100;  // at most this many items from this part
  // The last key this session claimed in the part in this tenure: no item
  // past it can be in flight, so only items at or before it are checked
  // against `in_flight`. nullopt: every item is checked.
  std::optional<ItemKey> cursor;
  // The claim record this session wrote last for the part
  // (Item::claim_record of its last items there): the claim replaces exactly
  // that one. 0, or a record that is no longer there: the part's latest
  // record, which the store must look for.
  int64_t record = 0;
  // Also read what came due behind `after` (see above). It costs a probe of
  // its own on every claim, so a caller reading on from its cursor may look
  // behind it less often: a later claim that looks finds what came due
  // meanwhile.
  bool behind = true;
  // Fair claims (ClaimRequest::fair): the key whose turn came last in this
  // part; the turns go on with the next key after it (in byte order, then
  // around from the first). nullopt: from the first key.
  std::optional<std::string> key_after;
  // Fair claims: per key, the last id of it this session read in the part
  // since its last read from the heads. The key is read on from there, so
  // the items in flight and the acked rows not yet vacuumed at its head are
  // not walked again (an ordinary read's `cursor` does the same for a part).
  // No item of the key at or before its id is returned, but for what came
  // due there when `behind` is set (retried, delayed or requeued: run_at
  // later than enqueued_at), which comes first, in run_at order. An enqueue
  // that committed late there is not: its notice lowers the cursor, or the
  // caller sends none (reads from the heads), as ClaimScheduler does. A key
  // listed is visited (takes its turns) whether or not it still has items.
  // Keys not listed, and keyless items, are read from their heads.
  // Ordered claims (ClaimRequest::ordered, not fair): per key, the id of
  // an item of it this session finished in the part since it sent the key
  // last. The key's next item (the first of it after that id, ready or
  // not) is read even when it sorts at or before `after`: a read that
  // passed it held it back while its key was busy. Other items behind
  // `after` are returned as above.
  std::vector<std::pair<std::string, int64_t>> key_cursors;
  // Ordered claims (ClaimRequest::ordered, not fair): per key, the id of
  // its item this session claimed last in the part since it gained the
  // part. When that item was claimed no older item of its key was live, so
  // an item of the key past it is probed for an older live one only down to
  // it (the item itself included: a retried one is still live). An item
  // put below it afterwards and not claimed since (a dead one requeued, an
  // enqueue that committed late) does not hold the key's later items back,
  // as for key_cursors. Keys not listed are probed all the way down.
  std::vector<std::pair<std::string, int64_t>> key_floors;
  // Ordered claims reading on from `after`: also read each key's first
  // item, as a read from the head does (so an item held back behind the
  // cursor whose key no release names is found: its key's earlier item was
  // cancelled, or finished in an earlier part of a grown queue), each key
  // from its floor and the keys with floors without a descent to their
  // heads, where a held snapshot keeps every acked entry: the part is not
  // read from its head. Nothing behind `after` is read besides (`behind`
  // and key_cursors are not used).
  bool key_heads = false;
  // With `after` at priority 0 or later (a floor instead of the head): also
  // read the part's items of a priority below 0 (lower runs first, so they
  // sort before `after`) from the head, as a read from the head would. A caller
  // that knows every item of priority 0 up to some id was read (a poll-only
  // consumer's floor, ClaimScheduler) so reads from there instead of
  // walking the acked entries before it.
  bool above = false;
};

// Claim: ready items (run_at <= now()) of `parts`, read in the order given:
// up to parts[i].limit from each, in (priority, id) order within the part,
// until `limit` are taken in all; parts after that are not read at all. So a
// caller that rotates the order gets a batch mostly from one part, which
// keeps an ack's fence and claim record to one part and its rows on a few
// pages. Items the caller has in flight are skipped. The items come in
// (priority, id) order, whatever their parts. Each item comes with the
// epoch of its part and `attempts` = the attempts already used + 1 (this
// one). The claim then records, per part it took items from, the ids of
// `in_flight` in that part plus the new ones (part_claims; only while the
// part is still ours at that epoch, so a session that lost a part cannot
// overwrite the new owner's record).
struct ClaimRequest {
  std::string queue;
  SessionId session;  // for the suspect probe, which looks in all its parts
  std::vector<ClaimPart> parts;
  int limit = 100;       // in all
  bool ordered = false;  // per key: only the oldest live item
  // Per key, when not ordered and more than 0: only an item with fewer than
  // this many older live items of its key (ready, delayed or in flight, in
  // its part or its earlier parts, as `ordered` looks), so at most this many
  // of a key are in flight at once (QueueConfig::key_concurrency).
  int key_concurrency = 0;
  // Fair share across keys (FairBy::kKey): each part's keys are read from
  // their heads or ClaimPart::key_cursors (`after` and `cursor` are not
  // used) and take turns,
  // one item each per turn, in id order within a key, starting after
  // ClaimPart::key_after and going around; a read visits at most
  // its limit times two keys (a key's items go in id order, whatever their
  // priority). Keyless items take one turn after the keys, from the part's
  // first ready items in (priority, id) order.
  bool fair = false;
  // Also claim at most one suspect (an item whose previous attempt was
  // abandoned); it is returned with suspect=true, to run on its own, and
  // does not count against `limit`.
  bool include_suspect = true;
  // What this session has in flight (claimed, not finished), as (part, id).
  std::vector<std::pair<int, int64_t>> in_flight;
  // More than 0: the claim stops once the payloads it took reach this many bytes (the item
  // that reaches it is its last; the first is always taken), in the order it reads, so a
  // worker's memory is bounded by bytes as well as by `limit`. A claim that took this many
  // bytes may have stopped before the end of what it read (ClaimScheduler reads on).
  int64_t max_bytes = 0;
  // Leave a transaction begun on the store's connection once the claim has
  // committed, when it returned items: the next Finish there continues it
  // instead of sending BEGIN, as after FinishRequest::begin_next (one round
  // trip less between an idle worker's claim and its handler). Stores that
  // cannot, or claims of some forms, ignore it: Store::Begun() says.
  bool begin_after = false;
};
// How many older live items of its key an item of the claim's queue may
// have (ClaimRequest::ordered is 1, then key_concurrency); 0: no bound.
inline int KeyBound(const ClaimRequest& r) { return r.ordered ? 1 : r.key_concurrency; }

// Finish: one transaction that
//   1. runs `body` with the transaction and the items; body returns one
//      Outcome per item it was given;
//   2. locks this session's session_parts rows for `parts` FOR SHARE and
//      keeps only those still at the given epochs (so no other session can
//      take them until this transaction ends);
//   3. deletes acked items, reschedules retried ones (their attempt counted
//      unless refunded), moves dead ones to dead_items, records results;
//   4. calls `next` (if set) once the body has run, and claims what it
//      returns (Claim, in the same statement and transaction; the items
//      being finished are not claimed again). `next` is asked again, on the
//      same thread, if the transaction has to run a second time;
//   5. commits.
// If some items' parts are no longer held at their epochs (step 2), or an
// item is no longer there with the attempts it was claimed with (Item::attempts
// less this one; an Item with attempts 0, which no claim made, is taken as
// it is), nothing of that transaction commits; Finish runs again with the
// items that are still ours (locking first, so body never sees the others)
// and reports the rest as fenced: nothing of theirs committed. So the same
// Finish sent again after a COMMIT whose answer was lost finds what it
// acked, retried (counting an attempt) or dead-lettered gone, and writes
// none of it twice.
// Returns the ids acked/retried/dead-lettered/fenced, and the items `next`
// claimed (only if the transaction committed).
// If `body` returns an error the transaction rolls back and that error is
// returned.
//
// Dead-letter topic: when the queue has a dlq_topic (QueueConfig), step 3 also
// writes one outbox row per dead-lettered item, so the row commits exactly
// when the item moves to dead_items; `partq bridge publish` sends it. The
// message is the item as it came in: key (an item ingested from Kafka gets its
// original key bytes back), payload, and the original Kafka headers, followed
// by context headers named as Kafka Connect's dead-letter queue names them
// (values are UTF-8 text; the origin ones only for items ingested from Kafka):
//   __connect.errors.topic, __connect.errors.partition, __connect.errors.offset
//   __connect.errors.exception.message   the last error
//   partq.errors.attempts                attempts made, as a number
//   partq.errors.queue                   the queue the item died in
//   partq.errors.item.id                 the item's id (also dead_items.id)
// The context headers come last, so a consumer's "last header of this name"
// (Java's Headers.lastHeader) is this failure's even when the original
// message already carried such headers (a replayed dead letter).
struct FinishRequest {
  std::string queue;
  SessionId session;
  std::vector<OwnedPart> parts;  // the fence: part and epoch claimed under
  std::vector<Item> items;       // claimed items to finish
  int max_attempts = 25;
  // Claim ahead in the same transaction: asked right before the ack
  // statement, so the caller decides with what it knows then; nullopt: no.
  std::function<std::optional<ClaimRequest>()> next;
  // When `next` claims items: begin the caller's next transaction with this
  // one's COMMIT (one round trip fewer); FinishResult::next_begun says it
  // did, and the caller must then call Finish next on this store (any other
  // call rolls the begun transaction back first).
  bool begin_next = false;
};
struct FinishResult {
  std::vector<int64_t> acked;
  std::vector<int64_t> retried;
  std::vector<int64_t> dead;
  std::vector<int64_t> fenced;
  std::vector<Item> next;   // what `next` claimed (only if the transaction committed)
  bool next_begun = false;  // see FinishRequest::begin_next
};
using FinishBody =
    std::function<absl::StatusOr<std::vector<Outcome>>(Tx&, absl::Span<const Item> owned_items)>;

struct JoinRequest {
  std::string queue;
  std::string instance_id;  // non-empty: static member (stable id, keeps parts)
  std::string host;
  int pid = 0;
};
struct JoinResult {
  SessionId id;
  int64_t incarnation = 0;
  // Static re-join within the TTL: the parts the previous incarnation owned,
  // now at fresh epochs (fencing the previous incarnation's acks). What the
  // previous incarnation had in flight there is marked abandoned.
  std::vector<OwnedPart> kept;
  // The queue is paused (Store::SetPaused): known before any part is used.
  bool paused = false;
  std::optional<double> rate;  // its rate limit (Store::SetRate)
};

// Per-part and per-session state for `partq status` and the metrics.
struct PartStatus {
  int part = 0;
  std::optional<SessionId> owner;
  Epoch epoch;
  int64_t ready = 0;
  int64_t delayed = 0;
  // Items the owner had in flight at its last claim and has not finished
  // (its claim record), or that a dead owner had in flight and no one has
  // taken since.
  int64_t in_flight = 0;
  int64_t dead = 0;
  // Items of queue groups not started yet (not counted as delayed).
  int64_t held = 0;
  int64_t cancelled = 0;  // records of cancelled items (Store::CancelItems)
  // Of `dead`, those dead-lettered in the last minute (database clock): the
  // failure rate `partq status` shows. Items requeued or deleted since are
  // not counted.
  int64_t dead_last_minute = 0;
  absl::Duration oldest_ready_age;  // zero when none is ready
};
// What holds the database's vacuum horizon back: the oldest snapshot (a
// transaction, a prepared transaction) or replication slot still needing
// rows that are dead for everyone else. While it is held, vacuum can remove
// no acked item's row, and the items table and its index grow with them.
struct VacuumHorizon {
  // "transaction", "prepared transaction" or "replication slot".
  std::string holder;
  // Which one, for an operator: "pid 4711 (psql, idle in transaction)",
  // "gid tx1", "slot standby1".
  std::string who;
  // How long the holder's transaction has been open (zero for a slot, whose
  // age is in transactions only).
  absl::Duration age;
  // Transactions begun since the horizon: how much may have died behind it.
  int64_t xid_age = 0;
};
struct QueueStatus {
  QueueConfig config;
  absl::Time db_now;
  std::vector<SessionInfo> sessions;
  std::vector<PartStatus> parts;  // one per part, 0..P-1
  // The oldest holder of the database's vacuum horizon other than this
  // query, as far as the store's role may see (pg_monitor sees all);
  // nullopt when none holds it, or the store has no such thing (MemStore).
  std::optional<VacuumHorizon> horizon;
  // The queue's groups (store.h, "Queue groups"): how many are held (not
  // started), started and ended (kept until the queue is deleted), and the
  // items pending in those not ended. Zero in a store without groups.
  struct GroupCounts {
    int64_t held = 0;
    int64_t started = 0;
    int64_t ended = 0;
    int64_t pending = 0;
  };
  GroupCounts groups;
  // What the queue's sessions finished per minute over the last hour
  // (database clock), oldest first, minutes without a report left out.
  // Heartbeats carry the counts (Store::Heartbeat), so the newest minute is
  // up to a heartbeat interval behind; a session that dies takes what it
  // counted since its last heartbeat with it. Empty in a store that keeps
  // none. The rates (store/throughput.h) come from each session's own rows
  // (SessionInfo::throughput).
  std::vector<ThroughputMinute> throughput;
};
// Who owns each part, and whether any item is left, without counting items
// (Store::Owners).
struct QueueOwners {
  struct Session {
    SessionId id;
    std::string host;
    int pid = 0;
    absl::Duration since_heartbeat;  // as SessionInfo's
    absl::Duration expires_in;       // as SessionInfo's: SessionLive says what it means
  };
  std::vector<Session> sessions;                 // as QueueStatus::sessions, by id
  std::vector<std::optional<SessionId>> owners;  // one per part, 0..P-1
  bool has_items = false;                        // any item in the queue, ready or not
};

// What Store::DeleteQueue does with a queue that still holds work.
enum class QueueContents {
  kRefuse,  // delete only an empty queue (no items, no dead items)
  kDelete,  // delete the items and dead items with the queue
};
// What Store::DeleteQueue deleted with the queue.
struct DeletedQueue {
  int64_t items = 0;  // ready, delayed or in flight
  int64_t dead_items = 0;
  int64_t schedules = 0;  // its schedules, which go with it
};

// What Store::Prune deleted: records of finished work older than its cutoff.
struct Pruned {
  int64_t results = 0;    // acked items' results and dedup records (`partq wait`'s answer)
  int64_t cancelled = 0;  // records of cancelled items
  int64_t groups = 0;     // ended queue groups
  int64_t dead = 0;       // dead items, only when asked for
};

// One table of a queue schema that Store::VacuumQueueTables found past its
// vacuum threshold, and what became of it.
struct TableVacuum {
  enum class Outcome {
    kVacuumed,     // vacuumed by this call
    kBusy,         // another vacuum held the table (autovacuum, another keeper)
    kHorizonHeld,  // the horizon has not moved since this store's last vacuum of it
    kDenied,       // this role may not vacuum it (not its owner's, nor the database's)
  };
  std::string table;      // "items" or "part_claims"
  int64_t dead_rows = 0;  // dead rows the statistics counted before
  Outcome outcome = Outcome::kVacuumed;
  absl::Duration took;  // the VACUUM's time; zero unless it ran
  // After a vacuum: the table's indexes found many times the size their
  // entries need (a held snapshot let them grow; a btree never gives pages
  // back) and rebuilt online (REINDEX CONCURRENTLY), with their sizes.
  struct Rebuild {
    std::string index;
    int64_t bytes_before = 0;
    int64_t bytes_after = 0;
    absl::Duration took;
  };
  std::vector<Rebuild> rebuilt;
  absl::Status rebuild_error;  // a rebuild that failed (not one that gave up on a timeout)
  // After a vacuum: the table found many times the size its rows need (a held
  // snapshot or a drained backlog grew it, and migration 23 keeps vacuum from
  // truncating as it goes), vacuumed again to hand its empty last pages back,
  // with its sizes (equal when none at its end were empty, or the lock that
  // truncating needs was not to be had; none when another vacuum had the
  // table, or a shrink that gave little back was tried within a minute; and
  // none judged at the store's first vacuum of the table, or by a role that
  // may not read the queue tables).
  struct Shrink {
    int64_t bytes_before = 0;
    int64_t bytes_after = 0;
    absl::Duration took;
  };
  std::optional<Shrink> shrunk;
  absl::Status shrink_error;  // a shrink that failed
};

// The state of one item, for `partq wait`.
struct ItemState {
  // kCancelled: removed before it ran (Store::CancelItems).
  enum class Kind { kPending, kDone, kDead, kCancelled, kUnknown };
  Kind kind = Kind::kUnknown;
  int64_t id = 0;
  std::optional<std::string> result;  // kDone: the handler's result, if any
  std::string error;                  // kDead: the last error
  int attempts = 0;
};

// One item as `partq item` shows it (Store::DescribeItem): its state and,
// while it is pending, where it is and when it runs.
struct ItemDetail {
  ItemState state;
  int part = 0;
  std::optional<std::string> key;
  std::optional<std::string> group;
  int priority = 0;
  absl::Time enqueued_at;
  std::optional<absl::Time> run_at;  // nullopt: held until its group starts
  bool in_flight = false;            // its part's owner has claimed it: a worker runs it
  // The database's clock when the item was read: how long it has been ready,
  // or is due in, is told by it (`partq item`), not by the caller's clock.
  absl::Time db_now;
  // Its payload's size and first kItemPayloadHead bytes (all of it when
  // shorter), raw.
  int64_t payload_bytes = 0;
  std::string payload_head;
  // The caller's role does not own the item tables (a producer's, a
  // viewer's, a worker's): only `state` is known, none of the fields above.
  bool where_hidden = false;
};
inline constexpr int kItemPayloadHead = 4096;

// What Store::CancelItems did with one asked-for item.
struct CancelOutcome {
  enum class Kind {
    kCancelled,         // it was ready or delayed: removed now, and recorded
    kAlreadyCancelled,  // an earlier cancel removed it
    kInFlight,          // claimed by an owner (or being claimed): left alone, its ack wins
    kDone,              // acknowledged already
    kDead,              // dead-lettered already (see RequeueDead)
    kUnknown,           // not an item of this queue
  };
  int64_t id = 0;  // 0 when a dedup key named no item
  Kind kind = Kind::kUnknown;
};

// A dead-lettered item, as `partq dead list` shows it.
struct DeadItem {
  int64_t id = 0;
  int part = 0;
  std::optional<std::string> key;
  std::optional<std::string> dedup_key;
  int attempts = 0;
  absl::Time enqueued_at;
  absl::Time failed_at;
  std::string last_error;
  int64_t payload_bytes = 0;
  // The payload's first kDeadPayloadHead bytes (all of it when shorter), raw
  // bytes: what a list shows of it without reading whole payloads.
  std::string payload_head;
  // The role may not read payloads (a viewer's, migration 35): payload_bytes
  // and payload_head say nothing.
  bool payload_hidden = false;
};
inline constexpr int kDeadPayloadHead = 256;
// What Store::DeleteDead did.
struct DeadDeleted {
  int64_t deleted = 0;
  // Of the ids asked for, those that were not dead items of the queue, in
  // order (none when all were asked for).
  std::vector<int64_t> missing_ids;
};

// What Store::RequeueDead did.
struct Requeued {
  int64_t requeued = 0;
  // Asked for but left dead: a live item holds their dedup key.
  int64_t kept = 0;
  // The ids of each, in order: a caller can name the ids asked for that
  // were neither (not dead items of the queue).
  std::vector<int64_t> requeued_ids, kept_ids;
};

// Queue groups (rsqueue's, built on partq's acks). An item may belong to a
// group (NewItem::group); the group is created by its first item or by
// CreateGroup, which also sets its end work: an item to enqueue into
// `end_queue` when the group is over. A group's items are held (not
// claimed) until StartGroup, so a producer can add items over time and
// start the group once it is complete; items added after the start run as
// they come. A started group ends when its last pending item is acked,
// dead-lettered or cancelled: in that same transaction (whichever session
// finishes it) the group is marked ended and its end item enqueued, exactly
// once. The end item's payload is JSON:
//   {"queue": Q, "group": ID, "done": N, "dead": N, "cancelled": N,
//    "payload": <the end payload given to CreateGroup, JSON, or null>}
// with the dedup key "partq.group:Q:ID". An ended group takes no more items
// (FailedPrecondition). Dead items requeued later leave their group (it
// counted them dead). The counts live in the group's row, which every
// writer of them holds until it commits, so concurrent finishers of a
// group's last items serialize there and exactly one sees nothing pending.
struct GroupSpec {
  std::string id;
  std::optional<std::string> end_queue;
  // JSON text, carried in the end item under "payload"; needs end_queue.
  std::optional<std::string> end_payload;
};
struct GroupStatus {
  std::string id;
  // Items enqueued and not yet acked, dead-lettered or cancelled; `held`
  // (waiting for the start) and `in_flight` (claimed, listed in their part's
  // claim record) are among them.
  int64_t pending = 0;
  int64_t held = 0;
  int64_t in_flight = 0;
  int64_t done = 0;
  int64_t dead = 0;
  int64_t cancelled = 0;
  absl::Time created_at;
  std::optional<absl::Time> started_at;
  std::optional<absl::Time> cancelled_at;
  std::optional<absl::Time> ended_at;
  std::optional<std::string> end_queue;
  std::optional<std::string> end_payload;  // JSON text
  std::optional<int64_t> end_item;         // the end item's id, once enqueued
  // Why the group ended without an end item though it had end work (its
  // end queue was deleted).
  std::optional<std::string> end_error;
};

// A wake-up from LISTEN.
// kGroup: the members changed (a join, leave or expiry) or a queue setting
// did: every member reads the group. kReleased: a member released parts to
// hand them off; only members waiting for parts need to read the group (a
// member holding its target is not concerned by who else holds what, and its
// heartbeat reads the changes anyway). kSchedules: a schedule of the queue
// was added or its timing changed (migration 32): the queue's schedule firer
// looks at once.
struct Notice {
  enum class Kind { kItems, kGroup, kReleased, kSchedules };
  Kind kind = Kind::kItems;
  int part = -1;  // kItems: the part that got items, -1 when unknown
  // kItems: the lowest key the notifying transaction added there (in all
  // parts when part is -1); nullopt when the notifier did not say (an older
  // producer), and then anything may have come anywhere in the part.
  std::optional<ItemKey> from;
  std::string queue;  // Store::ListenMany: the queue it is of (else empty)
};

// A dedicated LISTEN connection for one queue.
class Listener {
 public:
  virtual ~Listener() = default;
  // Waits up to `timeout` for notices; returns those that arrived (maybe none).
  virtual absl::StatusOr<std::vector<Notice>> Wait(absl::Duration timeout) = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  // --- schema ---------------------------------------------------------------
  // Creates or upgrades the schema; idempotent; serialized across processes by
  // an advisory lock, so a fleet may run it at once.
  virtual absl::Status Migrate() = 0;
  // The applied schema version; FailedPrecondition if the schema is missing or
  // newer than this binary knows.
  virtual absl::Status CheckSchema() = 0;

  // --- queues ---------------------------------------------------------------
  virtual absl::Status CreateQueue(const QueueConfig& config) = 0;
  virtual absl::StatusOr<QueueConfig> GetQueue(absl::string_view name) = 0;
  virtual absl::StatusOr<std::vector<QueueConfig>> ListQueues() = 0;
  // Deletes the queue with its sessions, parts, claim records, results,
  // records of cancelled items, groups and schedules, in one transaction. With
  // QueueContents::kRefuse a queue that still holds work (items ready,
  // delayed or in flight, or dead items) is not deleted:
  // FailedPrecondition, with the counts in the message, and nothing changes.
  // With kDelete its items and dead items go with it. Returns what was
  // deleted; a store with listeners (Listen) sends them a group notice, so
  // the queue's sessions read the group, find no queue and stop. NotFound
  // for an unknown queue. Enqueues into the queue wait while this runs, so
  // none can add an item between the check and the delete, nor after it
  // (PgStore says how).
  virtual absl::StatusOr<DeletedQueue> DeleteQueue(absl::string_view name,
                                                   QueueContents contents) = 0;
  // Sets (or with nullopt clears) the queue's dead-letter topic; items that
  // die from then on go there. InvalidArgument for a malformed topic name,
  // NotFound for an unknown queue.
  virtual absl::Status SetDeadLetterTopic(absl::string_view queue,
                                          const std::optional<std::string>& topic) = 0;
  // Pauses or resumes a queue: its sessions see `paused` in their next group
  // view (a group notice wakes them at once) and stop or resume claiming;
  // nothing else changes (parts, heartbeats, items in flight). NotFound for
  // an unknown queue. Idempotent.
  virtual absl::Status SetPaused(absl::string_view queue, bool paused) = 0;
  // Sets (or with nullopt removes) the queue's rate limit, items claimed a
  // second by the whole fleet (QueueConfig::rate): its sessions see it in
  // their next group view (a group notice wakes them at once), each part's
  // owner keeps its part's share. InvalidArgument outside (0, 1e6];
  // NotFound for an unknown queue.
  virtual absl::Status SetRate(absl::string_view queue, std::optional<double> per_second) {
    return absl::UnimplementedError("rate limits need PostgreSQL");
  }
  // Grows the queue to `parts` parts while its workers run: `parts` must be
  // a multiple of the current count (16 -> 64) and at most 4096, so each old
  // part p splits into p, p + P, ..., p + (k-1)P (a key's murmur2 mod the
  // new count is its old part mod the old count) and no other part moves.
  // Items stay in the part they were enqueued into; enqueues from the commit
  // on use the new count. The old count is appended to
  // QueueConfig::grown_from, and an ordered queue's claim in a part does not
  // take a key's item while one of that part's earlier parts (p % c for
  // each count c in grown_from) still holds an older item of that key
  // (ready, delayed or in flight): a key keeps its order across the grow.
  // Sessions see the new count in their next group view (a group notice
  // wakes them at once) and rebalance onto the new parts. Returns the count
  // before the call; the current count again does nothing. InvalidArgument
  // for fewer parts (a queue does not shrink), a count that is not a
  // multiple of the current one, or more than 4096; NotFound for an unknown
  // queue.
  virtual absl::StatusOr<int> GrowParts(absl::string_view queue, int parts) {
    return absl::UnimplementedError("growing a queue's parts is not supported by this store");
  }
  // Sets what the queue's parts are shared fairly by (QueueConfig::fair_by).
  // Workers read it when they start. NotFound for an unknown queue.
  virtual absl::Status SetFairBy(absl::string_view queue, FairBy fair_by) = 0;
  // Sets the queue's bound on a key's items in flight at once
  // (QueueConfig::key_concurrency; 0: none). Workers read it when they
  // start. InvalidArgument outside 0..kMaxKeyConcurrency; NotFound for an
  // unknown queue.
  virtual absl::Status SetKeyConcurrency(absl::string_view queue, int n) = 0;
  // Sets the queue's payload limit (QueueConfig::max_payload_bytes), which
  // the SQL API applies from its next call. InvalidArgument outside
  // ValidateMaxPayload's range; NotFound for an unknown queue.
  virtual absl::Status SetMaxPayload(absl::string_view queue, int64_t bytes) = 0;

  // --- sessions (docs/architecture.md: join, heartbeat, rebalance, leave) --
  virtual absl::StatusOr<JoinResult> Join(const JoinRequest& request) = 0;
  // Moves our expires_at (now() + the queue's TTL, database time), deletes
  // expired sessions of the queue (cascading their parts) and returns the group.
  // alive=false when our row (this incarnation) is gone: the session is dead.
  // `finished`: what the session's consumer finished since its last
  // heartbeat that succeeded, added to the queue's throughput of the current
  // minute (QueueStatus::throughput) in the same statement; dropped when
  // alive=false.
  //
  // The group generation (issue 26): a heartbeat that read every owner row
  // costs O(parts) per member and interval, O(parts x members) for the fleet.
  // Every change of the queue's members or owners (a join, a leave, an
  // expiry, an acquisition, a release, a static re-join's kept parts, an
  // expired session's own heartbeat) moves the generation in the changing
  // transaction, so a caller that passes the generation of the last full
  // view it read (`known_generation`) gets unchanged=true and no members or
  // owners when that view is still the group: the generation is where it
  // was, this call expired nobody, and no session of the queue is past its
  // TTL (membership also changes with time alone). paused, rate and parts
  // are always read. kNoGeneration: always the whole group. When the group
  // did change, a caller at most kGroupChangesKept generations behind gets
  // the members and only the owner rows changed since (GroupView::delta:
  // O(changes), not O(parts), per member in a rebalance), unless this call
  // expired a session (then the whole group).
  virtual absl::StatusOr<GroupView> HeartbeatSince(absl::string_view queue,
                                                   const SessionId& session, int64_t incarnation,
                                                   int64_t known_generation,
                                                   const FinishCounts& finished) = 0;
  // The heartbeats of several sessions (of different queues: one process's,
  // issue 52) as one transaction: each as HeartbeatSince would do it, and a
  // view per request in their order. An error fails them all (none renews).
  // The requests' rows are written in the order of their queues, so two
  // such batches cannot deadlock. This default calls HeartbeatSince for each.
  virtual absl::StatusOr<std::vector<GroupView>> HeartbeatMany(
      const std::vector<HeartbeatRequest>& requests) {
    std::vector<GroupView> out;
    for (const HeartbeatRequest& r : requests) {
      auto v = HeartbeatSince(r.queue, r.session, r.incarnation, r.known_generation, r.finished);
      if (!v.ok()) return v.status();
      out.push_back(*std::move(v));
    }
    return out;
  }
  // The whole group, reporting `finished` (nothing by default).
  absl::StatusOr<GroupView> Heartbeat(absl::string_view queue, const SessionId& session,
                                      int64_t incarnation,
                                      const FinishCounts& finished = FinishCounts{}) {
    return HeartbeatSince(queue, session, incarnation, kNoGeneration, finished);
  }
  // The group as it stands: the members not yet expired (by the database
  // clock) and every ownership row, those of expired members included until
  // a heartbeat deletes them; deletes nothing. NotFound for an unknown queue.
  // `known_generation` as for HeartbeatSince.
  virtual absl::StatusOr<GroupView> ReadGroupSince(absl::string_view queue,
                                                   int64_t known_generation) = 0;
  absl::StatusOr<GroupView> ReadGroup(absl::string_view queue) {
    return ReadGroupSince(queue, kNoGeneration);
  }
  // Inserts ownership rows for those of `parts` that are free, at fresh
  // epochs; returns the ones acquired, in part order. Parts owned by anyone
  // stay as they are; parts the queue does not have are skipped, a negative
  // one is InvalidArgument. FailedPrecondition when the session is gone.
  // A claim record left in an acquired part by an owner that died is turned
  // into abandoned items (one attempt counted each; see "Claims" above).
  virtual absl::StatusOr<std::vector<OwnedPart>> AcquireParts(absl::string_view queue,
                                                              const SessionId& session,
                                                              const std::vector<int>& parts) = 0;
  // Deletes our ownership rows for `parts` (only at the given epochs) and
  // their claim records: whatever was still in flight there is simply ready
  // again for the next owner (a graceful hand-off is not a failed attempt).
  virtual absl::Status ReleaseParts(absl::string_view queue, const SessionId& session,
                                    const std::vector<OwnedPart>& parts) = 0;
  // Deletes the session (its parts cascade) and the claim records of its
  // parts, like ReleaseParts.
  virtual absl::Status Leave(absl::string_view queue, const SessionId& session,
                             int64_t incarnation) = 0;
  // A static member stopping to be restarted (KIP-345): empties the claim
  // records of this incarnation's parts, so what it claimed and did not
  // finish (unstarted batches; a handler still running past the drain
  // timeout too) is ready again with no attempt counted, and keeps the session and
  // its ownership rows. The parts stay reserved until the session expires;
  // the same instance id joining before then takes them back at once (Join's
  // `kept`), and nobody else's parts move. Does nothing for another
  // incarnation or a session that is gone.
  virtual absl::Status ReleaseClaims(absl::string_view queue, const SessionId& session,
                                     int64_t incarnation) = 0;
  // Tells the queue's listeners the group changed (join/leave/release).
  virtual absl::Status NotifyGroup(absl::string_view queue) = 0;

  // --- items ----------------------------------------------------------------
  virtual absl::StatusOr<EnqueueResult> Enqueue(absl::string_view queue, const NewItem& item) = 0;
  // Bulk enqueue via COPY; returns the number of items written. All or none.
  virtual absl::StatusOr<int64_t> EnqueueBatch(absl::string_view queue,
                                               const std::vector<NewItem>& items) = 0;
  // See ClaimRequest. Writes only the claim records, never an item row.
  virtual absl::StatusOr<std::vector<Item>> Claim(const ClaimRequest& request) = 0;
  // A transaction is open on this store's connection for its next Finish
  // (ClaimRequest::begin_after); any other call rolls it back first.
  virtual bool Begun() const { return false; }
  virtual absl::StatusOr<FinishResult> Finish(const FinishRequest& request,
                                              const FinishBody& body) = 0;
  // How long until the first retried, delayed or requeued item of these
  // parts comes due (zero: it is due already; never a held group item), by
  // the store's clock; nullopt when there is none. An idle consumer sleeps until then, or until a notice, instead of
  // polling (Consumer, ClaimLoop). Unimplemented: it polls as before.
  virtual absl::StatusOr<std::optional<absl::Duration>> NextDue(absl::string_view queue,
                                                            const std::vector<int>& parts) {
    return absl::UnimplementedError("NextDue");
  }
  // The transactions a snapshot taken now sees as running: every one with an id below `xmin`
  // has ended, and every one that took its id (PostgreSQL's xid) before this call has one below
  // `next_xid`. A poll-only consumer learns from two of them when no item at or below an id
  // can still commit, and then reads its parts from there instead of from their heads
  // (ClaimScheduler::NoteSnapshot). Unimplemented, or an `id_cache` above 1: it reads from the
  // heads.
  virtual absl::StatusOr<SnapshotBounds> CurrentSnapshot() {
    return absl::UnimplementedError("CurrentSnapshot");
  }
  // Of `queues`, those that hold any item (ready, delayed or held) or a schedule that is due,
  // in one read: a Worker of several queues asks this once a minute for all of them instead of
  // each idle queue polling on its own (consumer/worker.h). Unimplemented: the Worker wakes
  // every queue instead.
  virtual absl::StatusOr<std::vector<std::string>> QueuesWithWork(
      const std::vector<std::string>& queues) {
    (void)queues;
    return absl::UnimplementedError("QueuesWithWork");
  }
  virtual absl::StatusOr<ItemState> GetItemState(absl::string_view queue, int64_t id) = 0;
  // GetItemState with, for a pending item, where it is and when it runs
  // (ItemDetail). A read for an operator: it also reads the part's owner
  // and claim record. NotFound for an unknown queue.
  virtual absl::StatusOr<ItemDetail> DescribeItem(absl::string_view queue, int64_t id) {
    (void)queue;
    (void)id;
    return absl::UnimplementedError("DescribeItem");
  }
  virtual absl::StatusOr<ItemState> GetItemStateByDedupKey(absl::string_view queue,
                                                           absl::string_view dedup_key) = 0;
  virtual absl::StatusOr<QueueStatus> Status(absl::string_view queue) = 0;
  // What Status says of the group, in one read that costs O(parts): Status
  // counts every item, seconds on a backlog of millions that workers drain,
  // so a caller that polls ownership while work flows uses this. Reads only,
  // and lists every session of the queue, those past their TTL too (which
  // ReadGroup leaves out of its members and Heartbeat deletes). NotFound for
  // an unknown queue.
  virtual absl::StatusOr<QueueOwners> Owners(absl::string_view queue) = 0;

  // A new LISTEN connection for `queue` (PgStore); Unimplemented elsewhere.
  virtual absl::StatusOr<std::unique_ptr<Listener>> Listen(absl::string_view queue) = 0;
  // One new LISTEN connection for all of `queues` (a process that serves
  // several, coordinator/notice_hub.h): each notice names its queue
  // (Notice::queue). Unimplemented where the store cannot.
  virtual absl::StatusOr<std::unique_ptr<Listener>> ListenMany(
      const std::vector<std::string>& queues) {
    return absl::UnimplementedError("this store cannot listen for several queues at once");
  }
  // LISTEN for `queue` on this store's own connection, so one connection
  // serves both (a session's heartbeats and its wake-ups). One thread may
  // Wait on the listener while one other uses the store: each store call
  // interrupts the Wait and has the connection for its duration (a call is
  // never held up by a Wait), and the notices that arrived meanwhile come
  // with the next Wait. When the store reconnects underneath it listens
  // again, and the next Wait returns a group notice and an item notice for
  // every part (anything may have been missed). Once the store is destroyed
  // Wait returns Unavailable. One listener per store. Unimplemented where
  // the store cannot (then Listen gives a connection of its own);
  // FailedPrecondition through a transaction pooler, as Listen.
  virtual absl::StatusOr<std::unique_ptr<Listener>> ListenHere(absl::string_view queue) {
    return absl::UnimplementedError("this store cannot listen on its own connection");
  }

  // --- cancel ---------------------------------------------------------------
  // Cancels items of `queue`: each ready or delayed one is removed and leaves
  // a record (GetItemState then says kCancelled, for good); the others are
  // left as they are and reported (CancelOutcome). One outcome per distinct
  // id, in the order asked. An item its part's owner has claimed, or is
  // claiming at that moment, is never removed: its owner runs it and its
  // ack wins (kInFlight). Items a dead owner had claimed (no session holds
  // the part at that claim's epoch any more) are not running and are
  // cancelled. Not all or none across parts: each part's items are
  // cancelled in a transaction of their own (PgStore says why), so an error
  // part way may leave earlier parts' items cancelled. NotFound for an
  // unknown queue, InvalidArgument for a malformed name or an id < 1.
  virtual absl::StatusOr<std::vector<CancelOutcome>> CancelItems(
      absl::string_view queue, const std::vector<int64_t>& ids) = 0;
  // Cancels the live item holding `dedup_key` in `queue`, as CancelItems;
  // with none, reports the newest finished one's state (done, dead or
  // cancelled), else kUnknown with id 0.
  virtual absl::StatusOr<CancelOutcome> CancelByDedupKey(absl::string_view queue,
                                                         absl::string_view dedup_key) = 0;

  // --- dead items (Unimplemented in a store that keeps none) -------------------
  // The most recently dead-lettered items of `queue`, newest first, at most
  // `limit`. NotFound for an unknown queue.
  virtual absl::StatusOr<std::vector<DeadItem>> ListDead(absl::string_view queue, int limit) {
    return absl::UnimplementedError("dead items need PostgreSQL");
  }
  // Moves dead items of `queue` back to ready, as new items would be (attempts
  // 0, run now, same id, part, key, priority, payload and origin): those in
  // `ids`, or all of them when `ids` is empty; ids that are not dead items of
  // the queue are ignored. One transaction; an item whose dedup key a live
  // item holds stays dead (counted in `kept`). NotFound for an unknown queue.
  virtual absl::StatusOr<Requeued> RequeueDead(absl::string_view queue,
                                               const std::vector<int64_t>& ids) {
    return absl::UnimplementedError("dead items need PostgreSQL");
  }
  // Deletes dead items of `queue` for good: those in `ids`, or all of them
  // when `ids` is empty; ids that are not dead items of the queue are
  // ignored (and named in the answer). One transaction. NotFound for an
  // unknown queue.
  virtual absl::StatusOr<DeadDeleted> DeleteDead(absl::string_view queue,
                                                 const std::vector<int64_t>& ids) {
    return absl::UnimplementedError("dead items need PostgreSQL");
  }
  // Retention: deletes what `queue`'s finished work left behind more than
  // `older_than` ago (by the database's clock): results (acked at), records
  // of cancelled items (cancelled at), ended groups (ended at) and, when
  // `dead` is true, dead items (failed at). Live items, open groups and
  // schedules are never touched. One transaction. After it, `partq wait`
  // answers "done" without the result for an id whose record went, and
  // "unknown" for its dedup key; an ended group's id can be used again.
  // NotFound for an unknown queue; InvalidArgument for a negative age.
  virtual absl::StatusOr<Pruned> Prune(absl::string_view queue, absl::Duration older_than,
                                       bool dead) = 0;

  // Vacuums the schema's queue tables (items, part_claims) that the
  // statistics say have passed their own autovacuum threshold (the
  // reloptions migration 10 sets: 10,000 dead rows for items, 1,000 for
  // part_claims), each by one `VACUUM (SKIP_LOCKED)` outside a transaction,
  // so partq need not wait for autovacuum's launcher, which visits a
  // database once per autovacuum_naptime (1 min by default) whatever the
  // tables' settings say. A table whose vacuum horizon has not moved since
  // this store last vacuumed it is skipped (a held snapshot: vacuum could
  // remove nothing more), as is one another vacuum holds, or that this role
  // may not vacuum. After a vacuum it rebuilds the table's bloated indexes
  // and, when the table is many times the size its rows need, vacuums it
  // again with TRUNCATE (TableVacuum::rebuilt, shrunk). Returns the tables
  // past their threshold, none when nothing is due. Meant for one worker of
  // a queue (consumer/table_keeper.h).
  // Unimplemented in a store without tables.
  virtual absl::StatusOr<std::vector<TableVacuum>> VacuumQueueTables() {
    return absl::UnimplementedError("this store keeps no tables to vacuum");
  }

  // --- queue groups (see "Queue groups"; Unimplemented in a store without) -----
  // Creates the group (not started) with its end work, or sets the end work
  // of a group its items created. The same call again does nothing.
  // AlreadyExists when the group has other end work; FailedPrecondition
  // when it has ended; NotFound for an unknown queue or end queue;
  // InvalidArgument for a malformed id or end payload (not JSON), or an end
  // payload without an end queue.
  virtual absl::Status CreateGroup(absl::string_view queue, const GroupSpec& spec) {
    return absl::UnimplementedError("queue groups need PostgreSQL");
  }
  // Starts the group (creating it if no item has): its held items become
  // due, and a group with nothing pending ends at once. Idempotent until the
  // group ends; FailedPrecondition after. Returns the group as it then is.
  virtual absl::StatusOr<GroupStatus> StartGroup(absl::string_view queue, absl::string_view id) {
    return absl::UnimplementedError("queue groups need PostgreSQL");
  }
  // NotFound for an unknown queue or group.
  virtual absl::StatusOr<GroupStatus> GetGroup(absl::string_view queue, absl::string_view id) {
    return absl::UnimplementedError("queue groups need PostgreSQL");
  }
  // The queue's groups, newest first, at most `limit`; ended ones only with
  // `include_ended`. Counts from the groups' rows only: `held` and
  // `in_flight` are 0 here (GetGroup counts them).
  virtual absl::StatusOr<std::vector<GroupStatus>> ListGroups(absl::string_view queue,
                                                              bool include_ended, int limit) {
    return absl::UnimplementedError("queue groups need PostgreSQL");
  }
  // Cancels a group: it takes no more items; its ready, delayed and held
  // items are cancelled (as CancelItems cancels them: recorded, counted in
  // the group's `cancelled`); those in flight finish, and the group ends
  // when nothing is pending, with its end item (its counts say what was
  // cancelled) unless `run_end` is false. Returns the group as it then is.
  // NotFound for an unknown queue or group, FailedPrecondition for one that
  // ended.
  virtual absl::StatusOr<GroupStatus> CancelGroup(absl::string_view queue, absl::string_view id,
                                                  bool run_end) {
    return absl::UnimplementedError("queue groups need PostgreSQL");
  }

  // --- schedules (Unimplemented in a store that keeps none) -------------------
  // Adds a schedule (ScheduleSpec); its first tick is the first after now
  // (the database clock). InvalidArgument for a malformed name, interval,
  // cron expression or time zone, neither or both of `every` and `cron`, or
  // an item the queue would refuse (ValidateSchedule); NotFound for an
  // unknown queue; AlreadyExists for a name the schema has. Nothing is
  // written on error.
  virtual absl::Status AddSchedule(const ScheduleSpec& spec) {
    return absl::UnimplementedError("schedules need PostgreSQL");
  }
  // The schedules of `queue` (all queues' when empty), by name. NotFound for
  // an unknown queue.
  virtual absl::StatusOr<std::vector<Schedule>> ListSchedules(absl::string_view queue) {
    return absl::UnimplementedError("schedules need PostgreSQL");
  }
  // NotFound for a name the schema does not have. A tick being fired at the
  // moment still enqueues its item (the delete waits for it).
  virtual absl::Status DeleteSchedule(absl::string_view name) {
    return absl::UnimplementedError("schedules need PostgreSQL");
  }
  // Fires every due tick of `queue`'s schedules (the database clock), each
  // in one transaction that locks its schedule's row (schedules another
  // caller is firing are skipped, not waited for), enqueues one item through
  // the same path as Enqueue (parts, notices, dedup) and moves the next tick
  // on by compare-and-set, so a tick fires once however many callers race.
  // Late ticks: each inside the schedule's catch-up window fires, oldest
  // first; older ones are missed (PlanCatchUp, schedule/timing.h). A schedule whose stored
  // timing does not parse gets Schedule::error and no next tick (it stops
  // firing until it is added again). Meant for the workers of the queue
  // (consumer/schedule_firer.h). NotFound for an unknown queue.
  virtual absl::StatusOr<FiredSchedules> FireSchedules(absl::string_view queue) {
    return absl::UnimplementedError("schedules need PostgreSQL");
  }
};

// Makes a new Store (a new connection). Thread-safe.
using StoreFactory = std::function<absl::StatusOr<std::unique_ptr<Store>>()>;

}  // namespace partq

#endif  // PARTQ_STORE_STORE_H_
