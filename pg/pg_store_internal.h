// Private to pg/pg_store*.cc: the PgStore class and the helpers its
// two source files share. Nothing outside those files includes this header,
// which is why it may include libpqxx (public headers only forward-declare).
#ifndef PARTQ_PG_PG_STORE_INTERNAL_H_
#define PARTQ_PG_PG_STORE_INTERNAL_H_

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "pg/pg_connection.h"
#include "pg/pg_store.h"
#include "store/store.h"

namespace partq {
namespace pg_internal {

// --- errors -------------------------------------------------------------------

// What an exception thrown by libpqxx (or anything else) means for the caller.
struct PgError {
  absl::Status status;
  bool drop_connection = false;  // the connection is unusable: reconnect next time
};
// Maps the exception in flight to a Status (see store.h for the codes).
// `what` prefixes the message ("enqueue into \"q\""); `schema`, when not
// empty, turns "relation ... does not exist" for that schema into the
// FailedPrecondition that tells the user to run `partq migrate`.
PgError ClassifyException(std::exception_ptr error, absl::string_view what,
                          absl::string_view schema);
// Maps a failure to connect (libpq's message) to a Status.
absl::Status ClassifyConnectError(absl::string_view message);
// The server's message without libpq's "ERROR:  " prefix and trailing newlines.
std::string CleanMessage(absl::string_view message);
// " --schema S" for a partq command line, or "" for the default schema.
std::string SchemaFlag(absl::string_view schema);
// NotFound for a queue `schema` does not have, with how to create it there
// (unless suggest_create is false: for a delete or a revoke, making it is no fix).
absl::Status UnknownQueue(absl::string_view name, absl::string_view schema,
                          bool suggest_create = true);
// Whether the connection's role may read `column` of `table` in `schema`: a
// viewer may not read payloads (migration 35), so lists leave them out for it.
bool MayRead(pqxx::transaction_base& tx, absl::string_view schema, absl::string_view table,
             absl::string_view column);

// --- encoding -----------------------------------------------------------------

// Decodes bytea's text output ("\x0a0b..."). Returns false on malformed input.
bool DecodeBytea(absl::string_view text, std::string* out);
// A PostgreSQL array literal for a text[] parameter: {"a","b\"c",NULL}.
std::string TextArray(const std::vector<std::optional<std::string>>& values);
std::string IntArray(const std::vector<int>& values);
std::string IntArray(const std::vector<int64_t>& values);
std::string IntArray(const std::vector<std::optional<int>>& values);  // NULL for nullopt
// The attempts an item's row had when it was claimed (Item::attempts counts
// the claim's), which a Finish expects to find there; nullopt for an Item
// that no claim made (attempts 0), whose row a Finish takes as it is.
std::optional<int> AttemptsBefore(const Item& item);
std::string BoolArray(const std::vector<bool>& values);
// "PART" or "PART:PRIORITY:ID", as enqueue notices name a part and the
// lowest key added there (NotifyParts); false when PART is not a number.
bool ParsePartKey(absl::string_view text, int* part, std::optional<ItemKey>* key);
// Microseconds of `d`, rounded toward zero; infinite durations saturate.
int64_t Micros(absl::Duration d);

// The positive murmur2 of a key, as Kafka's partitioner uses it: the SQL
// computes `hash % parts`, which equals PartForKey(key, parts).
int64_t KeyHash(absl::string_view key);

// --- SQL ----------------------------------------------------------------------

// "SELECT ..." text for one prepared statement; `{schema}` already replaced.
struct Statement {
  const char* name;
  std::string sql;
  // false: run unnamed, planned for its arguments every time. For statements
  // that touch items by id and run rarely (rebalancing, batches with
  // failures): a prepared statement's generic plan is fixed on its sixth run,
  // and if the table was nearly empty then (a worker that started on an idle
  // queue), it scans the whole table by the time a backlog has come, until
  // an ANALYZE invalidates it.
  bool prepared = true;
};
// Every statement PgStore runs by name, for this schema; `confined`: for a
// role that may not delete from the tables itself (a worker role, migration
// 39), whose statements delete through the schema's functions instead.
std::vector<Statement> PreparedStatements(absl::string_view schema, bool confined = false);
// The statements of the pipelined ack (pg/sql/pipelined_ack_claim.sql), run
// through Pipeline on the connection's libpq handle: name -> SQL.
inline constexpr char kPlanGuard[] = "partq_pl_plan_guard";
// kPlanGuard for the keyed forms (pg/sql/plan_guard_keyed.sql).
inline constexpr char kPlanGuardKeyed[] = "partq_pl_plan_guard_keyed";
inline constexpr char kPipelinedAck[] = "partq_pl_ack";
inline constexpr char kPipelinedAckClaim[] = "partq_pl_ack_claim";
// The same, also reading what came due behind the cursor (ClaimPart::behind).
inline constexpr char kPipelinedAckClaimBehind[] = "partq_pl_ack_claim_behind";
// The two forms above for a claim with a key bound (KeyBound > 0: ordered or
// key concurrency); those above take only KeyBound 0.
inline constexpr char kPipelinedAckClaimKeyed[] = "partq_pl_ack_claim_keyed";
inline constexpr char kPipelinedAckClaimBehindKeyed[] = "partq_pl_ack_claim_behind_keyed";
inline constexpr char kPipelinedCommit[] = "partq_pl_commit";
inline constexpr char kPipelinedChain[] = "partq_pl_chain";
// Before a claim that leaves a transaction begun (ClaimRequest::begin_after).
inline constexpr char kPipelinedBegin[] = "partq_pl_begin";
// After kPipelinedChain through a transaction pooler: the new transaction's
// SET LOCAL jit = off (LocalSettings), in the same flight.
inline constexpr char kPipelinedLocalSettings[] = "partq_pl_local_settings";
// The claims that PgStore::Claim and Finish's general path run in a flight
// after kPlanGuard, so that they run a generic plan (planning the custom one
// took longer than running it: 4-6 ms against 1-4 ms a call, BENCHMARKS.md):
// claim.sql and ack_claim.sql in their forms without a key bound, fair, and
// with a key bound (ordered, key concurrency: after kPlanGuardKeyed).
inline constexpr char kPipelinedClaim[] = "partq_pl_claim";
inline constexpr char kPipelinedClaimFair[] = "partq_pl_claim_fair";
inline constexpr char kPipelinedClaimKeyed[] = "partq_pl_claim_keyed";
inline constexpr char kPipelinedLeanAckClaim[] = "partq_pl_lean_ack_claim";
inline constexpr char kPipelinedLeanAckClaimFair[] = "partq_pl_lean_ack_claim_fair";
inline constexpr char kPipelinedLeanAckClaimKeyed[] = "partq_pl_lean_ack_claim_keyed";
// The general Finish (retries, dead items) after kPlanGuard: finish.sql, and
// finish_claim.sql in the three forms.
inline constexpr char kPipelinedFinish[] = "partq_pl_finish";
inline constexpr char kPipelinedFinishClaim[] = "partq_pl_finish_claim";
inline constexpr char kPipelinedFinishClaimFair[] = "partq_pl_finish_claim_fair";
inline constexpr char kPipelinedFinishClaimKeyed[] = "partq_pl_finish_claim_keyed";
std::vector<std::pair<const char*, std::string>> PipelinedStatements(absl::string_view schema,
                                                                     bool confined = false);
// The byte-bounded form of a claiming statement (ClaimRequest::max_bytes): NAME_bytes, for
// the pipelined ones above.
// The unbounded forms are as they were, without the running sum the bound costs.
const char* BoundedName(const char* name);
// The form of a pipelined ack (kPipelinedAck, kPipelinedAckClaim… and their byte-bounded
// forms) that also writes the handler's results: NAME_results.
const char* ResultsName(const char* name);
// The items a claim reads in one part, as a subquery (`{schema}` not yet
// replaced); pg/sql/fragments/ready_items.sql says what each argument is. Declared here for
// the tests that EXPLAIN it.
std::string ReadyItems(absl::string_view queue, absl::string_view part,
                       absl::string_view after_prio, absl::string_view after_id,
                       absl::string_view cursor_prio, absl::string_view cursor_id,
                       absl::string_view skip, absl::string_view bound, absl::string_view limit,
                       absl::string_view behind, absl::string_view released = "",
                       absl::string_view key_floors = "", absl::string_view above = "");
// The files under pg/sql/ (their names without ".sql") read so far to
// build statements: after PreparedStatements and PipelinedStatements, every
// file (tests/pg: no file left that nothing reads).
std::vector<std::string> SqlFilesRead();
// The single-item enqueue of an item of a queue group (never prepared).
std::string EnqueueGroupedSql(absl::string_view schema);
// The single-item enqueue statement (also run unprepared by EnqueueInTx).
std::string EnqueueSql(absl::string_view schema);
// The same for a worker role, through put_items() (migration 41).
std::string PutItemSql(absl::string_view schema);

// Through a transaction pooler (PgOptions::transaction_pooler), what every
// transaction sets for itself, since a session's settings stay behind on
// whichever server connection they were made on: JIT off (OpenConnection
// says why). Run in the same simple query as the BEGIN.
inline constexpr char kLocalSettings[] = "SET LOCAL jit = off";
// "BEGIN", and with `local_settings` "BEGIN; " kLocalSettings.
const char* BeginSql(bool local_settings);

// What a fair claim runs under (PgStore::Claim): a generic plan, as the
// pipelined ack's claim does (kPlanGuard says why, and why no sequential
// scan).
inline constexpr char kGenericPlanSettings[] =
    "SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL enable_seqscan = off";

// pqxx::transaction<L, RW> (pqxx::work by default), whose BEGIN with
// `local_settings` also runs kLocalSettings in the same simple query, so in
// the round trip the BEGIN takes anyway, and so does `more_settings` (SQL,
// if not null). Without either, it is pqxx::transaction.
template <pqxx::isolation_level L = pqxx::read_committed,
          pqxx::readwrite_policy RW = pqxx::read_write>
class PgWork final : public pqxx::internal::basic_transaction {
 public:
  PgWork(pqxx::connection_base& conn, bool local_settings, const char* more_settings = nullptr)
      : pqxx::internal::namedclass("PgWork"),
        pqxx::internal::basic_transaction(conn, pqxx::isolation_traits<L>::name(), RW),
        local_settings_(local_settings),
        more_settings_(more_settings) {
    Begin();
  }
  ~PgWork() noexcept override { End(); }

 private:
  void do_begin() override {
    if (!local_settings_ && more_settings_ == nullptr) return dbtransaction::do_begin();
    std::string sql = "BEGIN";
    if (L != pqxx::read_committed)
      absl::StrAppend(&sql, " ISOLATION LEVEL ", pqxx::isolation_traits<L>::name());
    if (RW == pqxx::read_only) sql += " READ ONLY";
    if (local_settings_) absl::StrAppend(&sql, "; ", kLocalSettings);
    if (more_settings_ != nullptr) absl::StrAppend(&sql, "; ", more_settings_);
    direct_exec(sql.c_str());
  }

  bool local_settings_;
  const char* more_settings_;
};

// Runs statement `name` in `tx`: prepared (by name) unless `unprepared`
// holds its SQL (PgStore::unprepared_), then sent whole with its parameters.
template <typename... Args>
pqxx::result ExecStatement(pqxx::transaction_base& tx,
                           const std::map<std::string, std::string, std::less<>>& unprepared,
                           const char* name, Args&&... args) {
  auto it = unprepared.find(absl::string_view(name));
  if (it != unprepared.end()) return tx.exec_params(it->second, std::forward<Args>(args)...);
  return tx.exec_prepared(name, std::forward<Args>(args)...);
}

// The parameters of one enqueue, checked and encoded.
struct EnqueueArgs {
  std::optional<int64_t> key_hash;
  std::optional<std::string> key;
  std::optional<std::string> dedup_key;
  int priority = 0;
  int64_t delay_us = 0;
};
// Checks an item (ValidateNewItem) and turns it into the enqueue's parameters.
absl::StatusOr<EnqueueArgs> CheckNewItem(const NewItem& item, int64_t max_payload_bytes);
// The shared body of Enqueue and EnqueueInTx: runs the enqueue statement in
// `tx` (prepared when `prepared`, else as a parameterized statement) and looks
// up the live duplicate when the dedup key matched; for a role that writes
// no item row itself (`puts`, PgStore::confined_), through put_items().
// Throws what libpqxx throws.
absl::StatusOr<EnqueueResult> EnqueueIn(pqxx::transaction_base& tx, bool prepared, bool puts,
                                        const std::string& schema, absl::string_view queue,
                                        const NewItem& item, const EnqueueArgs& args);

// --- the store ----------------------------------------------------------------

// The statements handlers run through Tx::Exec, prepared once per connection
// (like pgx's statement cache): a handler usually runs the same few
// statements for every batch, and a prepared one skips the parse and plan.
// Only plain DML is cached (it is what repeats; a utility statement such as
// SAVEPOINT or CREATE is run as it comes), and at most kMaxEntries texts.
// Besides, the statements Tx::Prepare prepared (any statement, CALL
// included): those are prepared and run on the connection's libpq handle,
// because libpqxx 6.4 can neither declare parameter types nor describe a
// statement; libpqxx does not know them.
class HandlerStatements {
 public:
  static constexpr size_t kMaxEntries = 256;
  // `named` false (PgOptions::transaction_pooler): NameFor caches nothing,
  // and Tx::Prepare describes statements through the unnamed statement.
  explicit HandlerStatements(bool named = true) : named_(named) {}
  bool named() const { return named_; }
  // The prepared statement's name for `sql`, preparing it on `conn` first
  // if needed; nullopt when `sql` is not cached.
  std::optional<std::string> NameFor(pqxx::connection_base& conn, absl::string_view sql);

  // A statement Tx::Prepare prepared on the server connection `generation`
  // (PgConnection::generation).
  struct Described {
    std::string name;  // "" when not named(): run by its text with param_oids
    uint64_t generation = 0;
    PreparedStatement info;
    std::vector<uint32_t> param_oids;  // the parameters' types, as described
  };
  // The one for `sql` on that connection, or nullptr.
  const Described* FindDescribed(uint64_t generation, absl::string_view sql) const;
  // A name to prepare the next one under, never handed out before (a
  // statement prepared under it may exist even if it was never added);
  // nullopt when kMaxEntries are kept.
  std::optional<std::string> NewDescribedName();
  void AddDescribed(std::string sql, Described described);

  void Clear() {
    names_.clear();
    described_.clear();
  }

 private:
  std::map<std::string, std::string, std::less<>> names_;
  std::map<std::string, Described, std::less<>> described_;
  size_t described_names_ = 0;  // names handed out so far
  bool named_ = true;
};

// --- a listener on the store's own connection (ListenHere) ---------------------

// What a PgStore shares with the listener that waits on its connection. One
// thread at a time uses the connection, holding `mu`: the store's owner for
// a call, or the listener's for a Wait. A store call counts itself in
// `callers` and writes `wake_fd` first, so a Wait under way returns at once
// and the next one waits until no call is pending: calls go first.
struct SharedConn {
  SharedConn();
  ~SharedConn();
  SharedConn(const SharedConn&) = delete;
  SharedConn& operator=(const SharedConn&) = delete;

  absl::Mutex mu;
  std::atomic<int> callers{0};  // store calls waiting for `mu`
  int wake_fd = -1;             // an eventfd, written by each such call
  // The store's connection; nullptr while it has none (dropped, not yet
  // reconnected). Used only with `mu` held.
  PgConnection* conn ABSL_GUARDED_BY(mu) = nullptr;
  bool gone ABSL_GUARDED_BY(mu) = false;        // the store was destroyed
  bool missed ABSL_GUARDED_BY(mu) = false;      // reconnected: notices may be lost
  bool waiting ABSL_GUARDED_BY(mu) = true;      // false once the listener is gone
  // conn's when it began to listen, or when a store call last saw it; one
  // that changed means libpqxx reconnected underneath.
  uint64_t generation ABSL_GUARDED_BY(mu) = 0;
  // Payloads received on `conn` (by whichever thread held `mu`), for the
  // next Wait.
  std::vector<std::string> inbox ABSL_GUARDED_BY(mu);
};

// Holds a PgStore's connection for one call while a listener shares it
// (nothing when none does). Nested uses by the same call take it once.
class ConnUse {
 public:
  ConnUse(SharedConn* shared, int* depth);
  ~ConnUse();
  ConnUse(const ConnUse&) = delete;
  ConnUse& operator=(const ConnUse&) = delete;

 private:
  SharedConn* const shared_;
  int* const depth_;
};

struct FinishAttempt;  // pg_store_items.cc
struct FinishRows;

class PgStore final : public Store, public BridgeStore {
 public:
  explicit PgStore(PgOptions options);
  ~PgStore() override;

  // Opens the connection (and defines the prepared statements) if it is not
  // open. Returns the connect error otherwise.
  absl::Status EnsureConnected();
  // (Re)defines pipeline_'s statements for confined_.
  void DefinePipeline();

  absl::Status Migrate() override;
  // MigratePg and PgMigrationStatus (pg_store.h).
  absl::Status MigrateTo(int to_version);
  absl::StatusOr<std::vector<AppliedMigration>> MigrationStatus();
  absl::Status CheckSchema() override;
  // PgGrant, PgRevoke and PgListGrants (pg_store.h; pg_store_roles.cc).
  absl::Status Grant(absl::string_view kind, absl::string_view role,
                     const std::vector<std::string>& queues);
  absl::StatusOr<int> Revoke(absl::string_view kind, absl::string_view role,
                             const std::vector<std::string>& queues);
  absl::StatusOr<std::vector<QueueGrant>> ListGrants(const std::optional<std::string>& queue);
  // PgSchemaCreators (pg_store.h; pg_store_roles.cc).
  absl::StatusOr<std::vector<std::string>> SchemaCreators();

  absl::Status CreateQueue(const QueueConfig& config) override;
  absl::StatusOr<QueueConfig> GetQueue(absl::string_view name) override;
  absl::StatusOr<std::vector<QueueConfig>> ListQueues() override;
  absl::StatusOr<DeletedQueue> DeleteQueue(absl::string_view name, QueueContents contents) override;
  absl::Status SetDeadLetterTopic(absl::string_view name,
                                  const std::optional<std::string>& topic) override;

  absl::StatusOr<JoinResult> Join(const JoinRequest& request) override;
  absl::StatusOr<GroupView> HeartbeatSince(absl::string_view queue, const SessionId& session,
                                           int64_t incarnation, int64_t known_generation,
                                           const FinishCounts& finished) override;
  absl::StatusOr<std::vector<GroupView>> HeartbeatMany(
      const std::vector<HeartbeatRequest>& requests) override;
  absl::StatusOr<GroupView> ReadGroupSince(absl::string_view queue,
                                           int64_t known_generation) override;
  absl::StatusOr<std::vector<OwnedPart>> AcquireParts(absl::string_view queue,
                                                      const SessionId& session,
                                                      const std::vector<int>& parts) override;
  absl::Status ReleaseParts(absl::string_view queue, const SessionId& session,
                            const std::vector<OwnedPart>& parts) override;
  absl::Status SetPaused(absl::string_view queue, bool paused) override;
  absl::Status SetRate(absl::string_view queue, std::optional<double> per_second) override;
  absl::StatusOr<int> GrowParts(absl::string_view queue, int parts) override;
  absl::Status SetFairBy(absl::string_view queue, FairBy fair_by) override;
  absl::Status SetKeyConcurrency(absl::string_view queue, int n) override;
  absl::Status SetMaxPayload(absl::string_view queue, int64_t bytes) override;
  absl::Status ReleaseClaims(absl::string_view queue, const SessionId& session,
                             int64_t incarnation) override;
  absl::Status Leave(absl::string_view queue, const SessionId& session,
                     int64_t incarnation) override;
  absl::Status NotifyGroup(absl::string_view queue) override;

  absl::StatusOr<EnqueueResult> Enqueue(absl::string_view queue, const NewItem& item) override;
  absl::StatusOr<int64_t> EnqueueBatch(absl::string_view queue,
                                       const std::vector<NewItem>& items) override;
  absl::StatusOr<std::vector<Item>> Claim(const ClaimRequest& request) override;
  bool Begun() const override { return begun_; }
  absl::StatusOr<FinishResult> Finish(const FinishRequest& request,
                                      const FinishBody& body) override;
  absl::StatusOr<ItemState> GetItemState(absl::string_view queue, int64_t id) override;
  absl::StatusOr<ItemState> GetItemStateByDedupKey(absl::string_view queue,
                                                   absl::string_view dedup_key) override;
  absl::StatusOr<ItemDetail> DescribeItem(absl::string_view queue, int64_t id) override;
  absl::StatusOr<QueueStatus> Status(absl::string_view queue) override;
  absl::StatusOr<QueueOwners> Owners(absl::string_view queue) override;
  absl::StatusOr<std::vector<std::string>> QueuesWithWork(
      const std::vector<std::string>& queues) override;
  absl::StatusOr<std::optional<absl::Duration>> NextDue(absl::string_view queue,
                                                        const std::vector<int>& parts) override;
  absl::StatusOr<SnapshotBounds> CurrentSnapshot() override;

  absl::StatusOr<std::unique_ptr<Listener>> Listen(absl::string_view queue) override;
  absl::StatusOr<std::unique_ptr<Listener>> ListenMany(
      const std::vector<std::string>& queues) override;
  absl::StatusOr<std::unique_ptr<Listener>> ListenHere(absl::string_view queue) override;

  absl::StatusOr<std::vector<CancelOutcome>> CancelItems(absl::string_view queue,
                                                         const std::vector<int64_t>& ids) override;
  absl::StatusOr<CancelOutcome> CancelByDedupKey(absl::string_view queue,
                                                 absl::string_view dedup_key) override;

  absl::StatusOr<std::vector<DeadItem>> ListDead(absl::string_view queue, int limit) override;
  absl::StatusOr<Requeued> RequeueDead(absl::string_view queue,
                                       const std::vector<int64_t>& ids) override;
  absl::StatusOr<DeadDeleted> DeleteDead(absl::string_view queue,
                                         const std::vector<int64_t>& ids) override;
  absl::StatusOr<Pruned> Prune(absl::string_view queue, absl::Duration older_than,
                               bool dead) override;
  absl::StatusOr<std::vector<TableVacuum>> VacuumQueueTables() override;
  // After a vacuum of `table`: rebuilds its indexes many times the size
  // their entries and `churn` need (bloated_indexes.sql).
  absl::StatusOr<std::vector<TableVacuum::Rebuild>> RebuildBloatedIndexes(const std::string& table,
                                                                          int64_t churn);
  // After a vacuum of `table`: vacuums it again with TRUNCATE when it is
  // many times the size its rows and `churn` need (bloated_table.sql).
  absl::StatusOr<std::optional<TableVacuum::Shrink>> ShrinkBloatedTable(const std::string& table,
                                                                        int64_t churn);
  std::optional<int64_t> Churn(const std::string& table, int64_t dead);
  // Drops what interrupted rebuilds left (leftover_rebuilds.sql); false when a drop gave up.
  bool DropUnfinishedRebuilds(pqxx::transaction_base& tx, const std::string& table);

  // Queue groups (pg_store_groups.cc).
  absl::Status CreateGroup(absl::string_view queue, const GroupSpec& spec) override;
  absl::StatusOr<GroupStatus> StartGroup(absl::string_view queue, absl::string_view id) override;
  absl::StatusOr<GroupStatus> GetGroup(absl::string_view queue, absl::string_view id) override;
  absl::StatusOr<std::vector<GroupStatus>> ListGroups(absl::string_view queue, bool include_ended,
                                                      int limit) override;
  absl::StatusOr<GroupStatus> CancelGroup(absl::string_view queue, absl::string_view id,
                                          bool run_end) override;
  // Schedules (pg_store_schedules.cc).
  absl::Status AddSchedule(const ScheduleSpec& spec) override;
  absl::StatusOr<std::vector<Schedule>> ListSchedules(absl::string_view queue) override;
  absl::Status DeleteSchedule(absl::string_view name) override;
  absl::StatusOr<FiredSchedules> FireSchedules(absl::string_view queue) override;

  // Kafka bridge (pg_store_kafka.cc).
  absl::StatusOr<int64_t> IngestKafka(const KafkaIngestRequest& request) override;
  absl::StatusOr<std::vector<KafkaOffset>> ReadKafkaOffsets(absl::string_view queue,
                                                            absl::string_view topic) override;
  absl::StatusOr<int64_t> CountItems(absl::string_view queue, int64_t limit) override;
  absl::StatusOr<std::vector<OutboxRow>> ReadOutbox(int limit) override;
  absl::Status DeleteOutbox(const std::vector<int64_t>& ids) override;

 private:
  // Runs `f` (which uses conn_) after connecting; turns exceptions into
  // Status values and drops a broken connection so the next call reconnects.
  // A transaction begun by the last Finish for the next one
  // (FinishRequest::begin_next) is rolled back first, unless `keep_begun`.
  template <typename F>
  auto Run(absl::string_view what, F&& f, bool keep_begun = false) -> decltype(f()) {
    ConnUse use(shared_.get(), &use_depth_);
    if (absl::Status st = EnsureConnected(); !st.ok()) return st;
    try {
      if (begun_ && !keep_begun) {
        begun_ = false;
        pqxx::nontransaction tx(*conn_);
        tx.exec("ROLLBACK");
      }
      auto result = f();
      if (autocommit_ != nullptr) {
        // What `f` ran committed as it ran (autocommit), whatever it returns.
        autocommit_->commit();
        autocommit_.reset();
      }
      return result;
    } catch (...) {
      autocommit_.reset();  // a PgWork rolls back
      return Fail(what, std::current_exception());
    }
  }
  // The transaction of the statements `f` runs one by one, each committed on
  // its own, for Run to end: a pqxx::nontransaction; through a transaction
  // pooler a PgWork with the local settings (its statements commit together
  // when `f` returns, or none does if it throws).
  pqxx::transaction_base& Autocommit();
  absl::Status Fail(absl::string_view what, std::exception_ptr error);
  // The schema's version, read under the migration lock; FailedPrecondition
  // when it is newer than this binary.
  absl::StatusOr<int> SchemaVersionLocked(pqxx::transaction_base& tx);
  // Closes the connection (the next call reconnects); a listener on it
  // stops receiving until then.
  void DropConnection();
  // LISTENs on conn_ for the listener that shares it (ListenHere).
  void ListenOnConnection();
  // Whether this store's role does not own the item tables (a producer's,
  // a viewer's, an operator's, a worker's), so it goes through the SQL API,
  // which checks its grant, for items' states (item_state_api.sql,
  // owns_items.sql) and schedules. Asked once, then remembered.
  bool ThroughSqlApi(pqxx::transaction_base& tx);
  // NotFound for queue `name`, which `tx` did not find: for a role whose
  // rows row-level security filters, "unknown, or not one of this role's
  // queues" with the grant that shows it, as it may exist; else UnknownQueue.
  absl::Status QueueNotFound(pqxx::transaction_base& tx, absl::string_view name);
  absl::StatusOr<std::vector<Schedule>> ListSchedulesThroughApi(
      pqxx::transaction_base& tx, const std::optional<std::string>& queue);
  std::atomic<int> through_sql_api_{-1};  // -1 not asked yet, else 0 or 1

  // One row of CopyItems.
  struct CopyRow {
    std::optional<std::string> key;       // the key column
    std::optional<std::string> part_key;  // the bytes the part comes from; nullopt: the id
    int priority = 0;
    absl::string_view payload;
    int64_t delay_us = 0;
    const KafkaMessage* origin = nullptr;  // a Kafka message's origin and headers, if any
  };
  // The one COPY path of items (EnqueueBatch, IngestKafka): in `tx`, takes
  // the enqueue lock, reserves ids, writes `rows` grouped by part and
  // notifies their parts (one "any part" notice past kMaxPartNotices).
  // NotFound for an unknown queue. Throws what libpqxx throws.
  absl::StatusOr<int64_t> CopyItems(pqxx::transaction_base& tx, absl::string_view queue,
                                    const std::vector<CopyRow>& rows);
  absl::StatusOr<int64_t> EnqueueBatchCopy(absl::string_view queue,
                                           const std::vector<NewItem>& items,
                                           const std::vector<EnqueueArgs>& args);
  absl::StatusOr<int64_t> EnqueueBatchInsert(absl::string_view queue,
                                             const std::vector<NewItem>& items,
                                             const std::vector<EnqueueArgs>& args);
  // A worker role's batch (confined_), through put_items() (migration 41).
  absl::StatusOr<int64_t> EnqueueBatchPut(absl::string_view queue,
                                          const std::vector<NewItem>& items,
                                          const std::vector<EnqueueArgs>& args);
  // One transaction of Finish: with `lock_first` the fence statement runs
  // before the body; without, the finish statement fences after it and
  // `*again` says a part was lost or an item was gone, in which case nothing
  // was committed and Finish must run again with `lock_first`.
  absl::StatusOr<FinishResult> FinishOnce(const FinishRequest& request, const FinishBody& body,
                                          bool lock_first, bool* again);
  // FinishOnce's steps, in the order they run (pg_store_items.cc): the
  // transaction, begun or taken over; the items still ours; the handler's
  // body; then the pipelined ack where it serves (PipelinedAckServes), else
  // the general statement, its rows and the COMMIT.
  absl::Status FinishInTx(FinishAttempt& f, const FinishBody& body);
  PipelineResult ClaimThenBegin(const char* form, std::vector<std::optional<std::string>> params);
  void KeepFenced(FinishAttempt& f);
  absl::Status RunFinishBody(FinishAttempt& f, const FinishBody& body);
  absl::Status FinishPipelined(FinishAttempt& f);
  absl::Status FinishGeneral(FinishAttempt& f);
  void RunFinishStatement(FinishAttempt& f, FinishRows* rows);
  // Counts the items of queue groups that `out` acked or dead-lettered in
  // their groups, in Finish's transaction `tx` before its COMMIT; the last
  // one of a started group ends it (groups_finished(), migration 12).
  void CountInGroups(pqxx::transaction_base& tx, const std::string& queue,
                     absl::Span<const Item> given, const FinishResult& out);
  // One transaction of FireSchedules: fires (or first computes the next
  // tick of) one due schedule of `queue` that no other caller holds, into
  // `out`. Returns false when none was due.
  absl::StatusOr<bool> FireOneSchedule(absl::string_view queue, FiredSchedules* out);

  // One session's heartbeat in `tx` (HeartbeatSince, HeartbeatMany); throws
  // as the statements do.
  GroupView HeartbeatOn(pqxx::transaction_base& tx, const HeartbeatRequest& h);

  // Runs statement `name` (PreparedStatements) in `tx`: prepared, or planned
  // for these arguments when it is not one to prepare.
  template <typename... Args>
  pqxx::result Exec(pqxx::transaction_base& tx, const char* name, Args&&... args) {
    return ExecStatement(tx, unprepared_, name, std::forward<Args>(args)...);
  }

  PgOptions options_;
  // name -> SQL, of the ones not prepared (all of them through a transaction pooler)
  std::map<std::string, std::string, std::less<>> unprepared_;
  std::string qschema_;  // the schema as a quoted identifier
  std::unique_ptr<PgConnection> conn_;
  HandlerStatements handler_statements_;  // of conn_
  Pipeline pipeline_;                     // on conn_: PipelinedStatements
  // The statements of pipeline_ and unprepared_ are those for a role that
  // may not delete from items itself (migration 39; EnsureConnected).
  bool confined_ = false;
  bool begun_ = false;                    // conn_ is in a transaction begun for the next Finish
  std::unique_ptr<pqxx::transaction_base> autocommit_;  // Autocommit(), while Run runs
  // With a listener on conn_ (ListenHere): what they share, the channel and
  // the receiver registered on conn_ for it. Declared after conn_: the
  // receiver unlistens through it, so it goes first.
  std::shared_ptr<SharedConn> shared_;
  std::string listen_channel_;
  std::unique_ptr<pqxx::notification_receiver> receiver_;
  int use_depth_ = 0;  // ConnUse nesting
  // VacuumQueueTables: per table, the vacuum horizon (its oldest holder's
  // xmin, as text; empty when none but ourselves) seen before our last
  // vacuum of it.
  std::map<std::string, std::string, std::less<>> vacuumed_at_horizon_;
  // ... and the dead rows counted before it (Churn).
  std::map<std::string, int64_t, std::less<>> vacuumed_dead_;
  // ShrinkBloatedTable: per table, when a shrink last gave back little.
  std::map<std::string, absl::Time, std::less<>> shrink_tried_;
};

// Opens a connection with application_name set. Unavailable/InvalidArgument/
// Unauthenticated/... as ClassifyConnectError says.
absl::StatusOr<std::unique_ptr<PgConnection>> OpenConnection(const PgOptions& options);

// Reads a column as text (NULL as nullopt).
inline std::optional<std::string> Text(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return std::string(f.c_str(), f.size());
}

}  // namespace pg_internal
}  // namespace partq

#endif  // PARTQ_PG_PG_STORE_INTERNAL_H_
