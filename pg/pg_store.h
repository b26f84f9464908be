// The PostgreSQL implementation of Store and BridgeStore (libpqxx 6.4). The only code in partq
// that includes <pqxx/pqxx>; everything here returns absl::Status instead of
// throwing (see store.h for the meaning of each code).
//
// A PgStore owns one connection. If the connection breaks, the failing call
// returns kUnavailable and the next call reconnects.
#ifndef PARTQ_PG_PG_STORE_H_
#define PARTQ_PG_PG_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "store/bridge_store.h"
#include "store/store.h"
#include "store/validate.h"

namespace partq {

struct PgOptions {
  // libpq connection string or URI; empty: libpq's defaults and PG* variables.
  std::string dsn;
  // Schema holding partq's tables; validated by ValidateSchemaName.
  std::string schema = "partq";
  // Payloads larger than this are refused with kInvalidArgument.
  int64_t max_payload_bytes = kDefaultMaxPayloadBytes;
  // application_name reported to the server.
  std::string application_name = "partq";
  // The connection goes through a pooler that hands each transaction to any
  // server connection (PgBouncer's pool_mode = transaction): nothing may
  // outlive a transaction on the server. Then no statement is prepared under
  // a name (each is sent whole, unnamed, in the same round trip as before),
  // application_name travels in the startup packet, `jit = off` is set per
  // transaction (SET LOCAL, in the flight that begins it; a statement run on
  // its own becomes BEGIN and SET LOCAL, the statement, COMMIT: two more
  // round trips) and Listen is refused (FailedPrecondition): a Consumer on
  // such a store needs ConsumerOptions::poll_only. Off: a direct connection,
  // or a pooler in session mode, where all of that works as on the server.
  bool transaction_pooler = false;
};

// The schema version this binary writes and understands.
inline constexpr int kSchemaVersion = 48;

// Connects (and checks the connection). InvalidArgument for a malformed DSN,
// Unavailable when the server cannot be reached, PermissionDenied/Unauthenticated
// for rejected credentials.
absl::StatusOr<std::unique_ptr<Store>> ConnectPg(const PgOptions& options);
StoreFactory PgStoreFactory(PgOptions options);

// Migrates options.schema up to version `to_version` (1..kSchemaVersion;
// Store::Migrate goes to kSchemaVersion), each migration in a transaction of
// its own; a schema already there or past it is left as it is.
absl::Status MigratePg(const PgOptions& options, int to_version);
// One migration as the schema has it.
struct AppliedMigration {
  int version = 0;
  std::string description;
  std::optional<absl::Time> applied_at;  // nullopt: not applied (pending)
  bool known = true;  // false: applied by a newer partq, unknown to this one
};
// Every migration this binary knows, applied or pending, then any the
// schema has that it does not know. A schema that does not exist has every
// migration pending.
absl::StatusOr<std::vector<AppliedMigration>> PgMigrationStatus(const PgOptions& options);
// Roles per queue (migration 29; docs/guide/operations-and-roles.md, "Roles per queue"). The SQL
// API runs as the schema's owner and asks first whether the caller (its
// session_user) may use the queue: the owner and its members may, and the
// roles granted here. A producer enqueues, reads the state of, cancels and
// groups items; an operator does that and keeps schedules and prunes; a
// viewer reads states and schedules; a worker runs `partq worker`, confined
// to its queues' rows by row-level security (migration 30).
struct QueueGrant {
  std::string queue;  // empty for a publish grant
  std::string role;
  std::string kind;   // producer, operator, viewer, worker, or publish (a Kafka topic)
  std::string topic;  // publish: the topic a confined worker may write outbox rows for
  absl::Time granted_at;
  bool role_exists = true;  // false: the role was dropped since (its rows count for no one)
};
// Grants `role` the right `kind` on each of `queues`, and USAGE on the
// schema, in one transaction; granting again changes nothing. Kind
// "publish" takes Kafka topics instead of queues: the topics a confined
// worker may write outbox rows for (migration 34).
// InvalidArgument for a bad kind or queue name, NotFound for an unknown
// queue or role, PermissionDenied for a caller that does not own the schema.
absl::Status PgGrant(const PgOptions& options, absl::string_view kind, absl::string_view role,
                     const std::vector<std::string>& queues);
// Takes them back; how many of them there were. USAGE on the schema stays
// (other grants may need it; it lets the role call the functions, which
// then refuse it).
absl::StatusOr<int> PgRevoke(const PgOptions& options, absl::string_view kind,
                             absl::string_view role, const std::vector<std::string>& queues);
// Every grant, or `queue`'s, by queue, role and kind.
absl::StatusOr<std::vector<QueueGrant>> PgListGrants(const PgOptions& options,
                                                     const std::optional<std::string>& queue);
// The roles other than the schema's owner (its members and superusers aside)
// that may create objects in the schema, or just "PUBLIC" when every role
// may: while there is one, no role is confined to its queues (a function it
// made in the schema could run in place of partq's own, as the owner).
// PgGrant refuses then; `partq migrate` and a starting worker warn.
absl::StatusOr<std::vector<std::string>> PgSchemaCreators(const PgOptions& options);
// What to say of them: who they are, why it matters, and the REVOKE to run.
std::string SchemaCreatorsProblem(absl::string_view schema, const std::vector<std::string>& roles);
// The same for the Kafka bridge's operations (store/bridge_store.h).
absl::StatusOr<std::unique_ptr<BridgeStore>> ConnectPgBridge(const PgOptions& options);
BridgeStoreFactory PgBridgeStoreFactory(PgOptions options);

// Enqueues inside the caller's libpqxx transaction: the item exists exactly
// when that transaction commits. The NOTIFY goes out on commit too. A role
// that may not insert into items itself (a worker role, migration 41) goes
// through put_items(): one statement more, which asks.
absl::StatusOr<EnqueueResult> EnqueueInTx(pqxx::transaction_base& tx, const PgOptions& options,
                                          absl::string_view queue, const NewItem& item);

// What a `record:TABLE` handler wrote: rows, and distinct item ids among them.
// TABLE is in options.schema unless qualified; validated like the handler's.
struct RecordProof {
  int64_t rows = 0;
  int64_t distinct_items = 0;
};
absl::StatusOr<RecordProof> ReadRecordProof(const PgOptions& options, absl::string_view table);
// The rows of such a table: how many items were acknowledged so far, cheaper
// than counting what is left in a queue whose rows are being deleted.
absl::StatusOr<int64_t> CountRecords(const PgOptions& options, absl::string_view table);
absl::Status DropRecordTable(const PgOptions& options, absl::string_view table);

// The LISTEN/NOTIFY channel of a queue (an identifier of at most 63 bytes).
std::string ChannelFor(absl::string_view schema, absl::string_view queue);

}  // namespace partq

#endif  // PARTQ_PG_PG_STORE_H_
