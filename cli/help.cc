#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "cli/common.h"

namespace partq::cli {
namespace {

// One entry per command: its usage lines as `partq help` lists them.
struct CommandUsage {
  const char* command;
  const char* usage;
};

constexpr CommandUsage kCommands[] = {
    {"migrate",
     "  migrate [--to N]                         create/upgrade the schema (idempotent), each\n"
     "                                           migration in a transaction of its own; --to\n"
     "                                           stops at version N\n"
     "  migrate --status                         each migration: applied (when) or pending\n"
     "  migrate --print [--from N] [--to M]      the SQL of migrations N+1..M (default: all)\n"
     "                                           for a DBA's own tools; needs no database\n"},
    {"queue",
     "  queue create NAME --parts N [--assignment lexical|sticky] [--ordered]\n"
     "               [--max-attempts N] [--session-ttl 10s] [--dlq-topic TOPIC]\n"
     "               [--rate N/s] [--fair-by key] [--key-concurrency N]\n"
     "               [--max-payload BYTES]    (the last four: as queue set below)\n"
     "  queue set NAME --parts N                 grow to N parts, a multiple of the count (16 ->\n"
     "                                           64), while workers run; keys keep their order;\n"
     "                                           a queue does not shrink\n"
     "  queue set NAME --dlq-topic TOPIC|''      dead-lettered items go to TOPIC ('' for none)\n"
     "  queue set NAME --rate N/s|N/min|N/h|none the whole fleet claims at most that (also\n"
     "                                           queue create --rate); each part's owner\n"
     "                                           keeps its part's share. N may have a\n"
     "                                           fraction; N alone is per second, N/m is\n"
     "                                           N/min (200, 10/m, 0.5/s)\n"
     "  queue set NAME --fair-by key|none        each part's owner serves its keys in turn,\n"
     "                                           so one key's backlog holds no other key back\n"
     "                                           (also queue create --fair-by; workers\n"
     "                                           started after the change follow it)\n"
     "  queue set NAME --key-concurrency N|none  at most N items of a key in flight at once,\n"
     "                                           fleet-wide (N >= 1; --ordered is N = 1 and\n"
     "                                           also keeps the key's order, and takes none);\n"
     "                                           also queue create --key-concurrency; workers\n"
     "                                           started after the change follow it\n"
     "  queue set NAME --max-payload BYTES       the largest payload the SQL API takes into\n"
     "                                           the queue (1 MiB unless set; also queue\n"
     "                                           create --max-payload); callers cannot raise\n"
     "                                           it. C++ producers keep their own --max-payload\n"
     "  queue pause NAME | queue resume NAME     its workers stop claiming (what they hold\n"
     "                                           finishes; parts and sessions stay) / go on\n"
     "  queue list [--json]\n"
     "  queue delete NAME [--force]              refused while it holds items or dead items;\n"
     "                                           --force deletes them with it\n"},
    {"enqueue",
     "  enqueue QUEUE [--key K] [--priority N] [--delay 10s] [--dedup-key K] [--group ID]\n"
     "                [PAYLOAD]\n"
     "  enqueue QUEUE --stdin [--chunk N] [--key K] [--priority N] [--delay 10s]\n"
     "                [--group ID]               one payload per line, via COPY (a worker\n"
     "                                           role's through put_items()); --key,\n"
     "                                           --priority, --delay and --group go with\n"
     "                                           every line; prints the count\n"
     "      --group ID: the item belongs to queue group ID (created if new) and is held\n"
     "      until `partq group start`; no --delay with it\n"},
    {"group",
     "  group create QUEUE ID [--end-queue Q [--end-payload JSON]]\n"
     "      when the started group's last item is acked or dead, one item goes into Q\n"
     "      (payload {queue, group, done, dead, cancelled, payload: JSON}), exactly once\n"
     "  group start QUEUE ID [--create]          its held items run; an unknown ID is refused\n"
     "      (--create starts it: empty, it ends at once and takes no items after)\n"
     "  group status QUEUE ID [--json]           pending (held, in flight), done, dead\n"
     "  group cancel QUEUE ID [--no-end]         no more items; its waiting items cancelled,\n"
     "      those in flight finish; it ends then, with its end item unless --no-end\n"
     "  group list QUEUE [--all] [--limit 50] [--json]   open groups (--all: ended too)\n"},
    {"wait",
     "  wait QUEUE ITEM|--dedup-key K [--timeout 30s] [--json]\n"
     "      prints the item's result when it is done (by --dedup-key it first waits for the\n"
     "      item to be enqueued, if it is not yet); exit 0 done, 3 not finished within\n"
     "      --timeout, 4 dead-lettered (its error on stderr), 5 cancelled, 1 no such item\n"
     "      or an error; --json: one object, {id, state (done, dead or cancelled), result\n"
     "      and result_encoding (utf8 or base64; both null when the item has none),\n"
     "      attempts and error (dead)}, the exit status as without it; on a timeout or\n"
     "      an error nothing on stdout, the message on stderr\n"},
    {"item",
     "  item QUEUE ID [--json]                   one item's state now, without waiting: ready,\n"
     "                                           delayed, retrying, held (its group), in flight,\n"
     "                                           done (its result), dead (its error) or\n"
     "                                           cancelled; a pending one's part, key, priority,\n"
     "                                           attempts, due time (by the server's clock)\n"
     "                                           and payload; exit 0, 1 no such item (or an\n"
     "                                           error), 2 bad input\n"},
    {"cancel",
     "  cancel QUEUE ID...|--dedup-key K         remove ready or delayed items before they run\n"
     "      one line per item: cancelled, already cancelled, in flight (a worker has it: it\n"
     "      runs, its ack wins), done, dead or unknown; exit 0 all cancelled, 3 some too late\n"
     "      (in flight, done or dead), 4 some unknown, 1 an error such as an unknown queue,\n"
     "      2 bad input such as an id that is not a number (then nothing is cancelled)\n"},
    {"worker",
     "  worker QUEUE [QUEUE...] [--concurrency 4] [--batch 100] [--handler SPEC]\n"
     "               [--claim-bytes N] [--queue NAME:SETTINGS]... [--queues-file FILE]\n"
     "               [--instance-id ID]\n"
     "               [--leave-on-stop] [--metrics-addr HOST:PORT] [--poll-only]\n"
     "               [--drain-timeout 10s] [--vacuum-interval 10s]\n"
     "               [--handler-timeout 5m] [--poll-interval 1s] [--idle-poll-interval 60s]\n"
     "               [--retry-base 1s] [--retry-max 10m] [--handler-ca FILE]\n"
     "               [--handler-auth-file FILE]\n"
     "               [--handler-env NAME[,NAME...]] [--handler-env-all]\n"
     "               [--log-level warning] [--quiet]\n"
     "               [--console-listen HOST:PORT [--console-token-file F] [--console-read-only]\n"
     "                [--console-allowed-host NAME,...]]\n"
     "      several queues: a session, threads and a handler per queue, with the same\n"
     "      flags; one metrics endpoint (ready when every session is) and one console\n"
     "      --queue NAME:KEY=VALUE,... (repeatable): that queue's own concurrency=N,\n"
     "      batch=N, handler-timeout=DURATION and handler=SPEC (last: it takes the rest);\n"
     "      a queue named only there is served too\n"
     "      --handler: without one a worker acknowledges items without running anything\n"
     "      (noop), and says so when it starts\n"
     "      --queues-file FILE: the same entries, one a line (NAME or NAME:SETTINGS; blank\n"
     "      lines and lines starting with # skipped), for a worker of many queues\n"
     "      --console-listen serves the web console (as `partq console`) from this process\n"
     "      --claim-bytes: a claim stops once its payloads reach this many bytes (the item\n"
     "      that reaches it is its last), so a worker holds about --concurrency x 2 x this\n"
     "      much of payloads at most (1024 to 1 GiB; 0, the default: claims count items only)\n"
     "      --idle-poll-interval: with nothing to do, the worker waits for a notice, the\n"
     "      first retry or delayed item of its parts coming due, or this long\n"
     "      --handler-auth-file: its first line is sent as an http: handler's Authorization\n"
     "      header (or $PARTQ_HANDLER_AUTH), so no password need be in the URL, where it is\n"
     "      x'd out of the process list only once partq has started\n"
     "      exec: children get this environment without PG* and PARTQ_* variables (the\n"
     "      database's password, PARTQ_DSN); --handler-env names those they get all the\n"
     "      same, --handler-env-all passes everything\n"},
    {"status",
     "  status QUEUE [--parts] [--json]          sessions, depth, age, dead-lettered/s; a line\n"
     "                                           per part up to 64 parts, past that a summary\n"
     "                                           by owner (--parts: every part; --json: all)\n"},
    {"console",
     "  console [--listen 127.0.0.1:8080] [--read-only] [--token-file FILE]\n"
     "          [--allowed-host NAME,...] [--log-level warning]\n"
     "      the web console: queues, part maps, sessions, dead items. Actions (pause,\n"
     "      resume, requeue, delete) need the token in FILE (log in with it; or\n"
     "      Authorization: Bearer); without --token-file it is read-only, and it will\n"
     "      not listen beyond loopback. One poller per process reads for every tab.\n"
     "      Without a token it answers only to its own names (localhost, its address;\n"
     "      --allowed-host adds names): a page of another site cannot rebind to it.\n"},
    {"dead",
     "  dead list QUEUE [--limit 20] [--json]    dead-lettered items, newest first, with errors\n"
     "      (--json: with the first 256 bytes of each payload, as payload and payload_encoding)\n"
     "  dead requeue QUEUE ID...|--all           back to ready, same ids, attempts 0\n"
     "      exit 3 when some stay dead (a live item holds their dedup key: it names them),\n"
     "      1 when some ids are not dead items of QUEUE (it names them; the rest are\n"
     "      requeued; 1 wins over 3)\n"
     "  dead delete QUEUE ID...|--all            delete them for good\n"},
    {"prune",
     "  prune QUEUE --older-than AGE [--dead] [--json]\n"
     "      retention: deletes results, cancelled records and ended groups that finished\n"
     "      more than AGE ago (7d, 24h, 30m); --dead: dead items too. Live items, open\n"
     "      groups and schedules stay. Run it from cron or a Kubernetes CronJob\n"},
    {"grant",
     "  grant producer|operator|viewer|worker ROLE --queue Q[,Q...]\n"
     "      lets ROLE (who logs in as it, or a member) call the SQL API on those queues,\n"
     "      and nothing else: a producer enqueues, cancels, groups and reads the state of\n"
     "      items; an operator does that and adds schedules and prunes; a viewer reads\n"
     "      states, groups and schedules, and runs `partq console --read-only` on them\n"
     "      (it reads their rows, no payloads). Run as the schema's owner; the role needs\n"
     "      no table privileges (docs/guide/operations-and-roles.md). A worker runs `partq\n"
     "      worker` on them: it gets a worker's table privileges, and row-level security\n"
     "      keeps it to those queues' rows\n"
     "  grant publish ROLE --topic T[,T...]\n"
     "      lets ROLE, as a worker, publish to those Kafka topics (outbox rows for `partq\n"
     "      bridge publish`); a role with a worker grant publishes to no other topic\n"},
    {"revoke",
     "  revoke producer|operator|viewer|worker ROLE --queue Q[,Q...]   takes a grant back\n"
     "  revoke publish ROLE --topic T[,T...]\n"},
    {"grants",
     "  grants [--queue Q] [--json]              who may use which queue, and how (and,\n"
     "                                           without --queue, the publish grants)\n"},
    {"schedule",
     "  schedule add NAME QUEUE (--every 30s | --cron 'MIN HOUR DOM MON DOW' [--tz ZONE])\n"
     "               [--key K] [--priority N] [--catch-up 30s] PAYLOAD\n"
     "                                           an item into QUEUE at every tick, once\n"
     "                                           (fired by the worker owning part 0). Due ticks\n"
     "                                           at most --catch-up old fire late, each once\n"
     "                                           (default: the session TTL and a third, plus a\n"
     "                                           period: a failover); of older ones only the\n"
     "                                           latest fires (0s: only the latest, always)\n"
     "  schedule list [QUEUE] [--json]           next and last tick, fired, missed\n"
     "  schedule delete NAME                     names are unique per schema\n"},
    {"bench", "  bench [--json] [...]                     throughput/latency with baselines\n"},
    {"demo",
     "  demo [--keep] [--items N] [--workers N] [--plain]\n"
     "                                           the whole story on an embedded database:\n"
     "                                           --workers (3) drain --items (500000) while\n"
     "                                           one joins, one stops and one is killed.\n"
     "      --plain prints a line per update instead of redrawing (as when stdout is not a\n"
     "      terminal); --keep leaves the database directory and the workers' log behind;\n"
     "      with --dsn it runs on that database (migrating it, replacing its queue \"demo\")\n"},
    {"bridge",
     "  bridge ingest --brokers B --topic T --queue Q [--group G] [--instance-id ID]\n"
     "                [--batch N] [--batch-wait 50ms] [--high-water N] [--low-water N]\n"
     "                [--kafka-config k=v,...] [--kafka-config-file FILE]\n"
     "                [--metrics-addr HOST:PORT] [--log-level warning] [--quiet]\n"
     "                                           Kafka -> queue, exactly once; a transaction\n"
     "                                           per --batch messages or --batch-wait\n"
     "  bridge publish --brokers B [--batch N] [--drain-timeout 10s] [--kafka-config k=v,...]\n"
     "                 [--kafka-config-file FILE] [--metrics-addr HOST:PORT]\n"
     "                 [--log-level warning] [--quiet]\n"
     "                                           the outbox -> Kafka (idempotent producer)\n"
     "    B is HOST:PORT[,HOST:PORT...]. /readyz is 503 while no broker is reachable.\n"
     "    Secrets out of the command line: --kafka-config-file FILE (key=value lines,\n"
     "    # comments) and $PARTQ_KAFKA_SASL_PASSWORD (sasl.password); a key in one place.\n"
     "    On SIGTERM publish waits for deliveries at most --drain-timeout, then exits 1\n"
     "    naming the rows left in the outbox (sent on the next start, maybe twice).\n"},
};

constexpr char kFooter[] =
    "Connection: --dsn or $PARTQ_DSN, else libpq's PGHOST/PGPORT/PGUSER/... variables;\n"
    "connecting gives up after 10 s ($PGCONNECT_TIMEOUT, or connect_timeout in the DSN).\n"
    "Schema: --schema or $PARTQ_SCHEMA (default \"partq\"). Payload limit: --max-payload BYTES.\n"
    "Through PgBouncer in transaction pooling mode: --pool-mode transaction or\n"
    "$PARTQ_POOL_MODE=transaction (no prepared statements or session settings; a worker\n"
    "then polls, as with --poll-only). none (default) and session need nothing.\n";
constexpr char kHandlers[] =
    "Handlers: your code in any language, speaking docs/handler-protocol.md:\n"
    "  exec:COMMAND   a child process per worker thread (JSON Lines on stdin/stdout)\n"
    "  http:URL       each batch POSTed to URL (a sidecar); --handler-ca for a private CA\n"
    "Built-in (chain with commas): noop, sleep:MS, fail:RATE, record:TABLE, crash:PAYLOAD,\n"
    "  publish:TOPIC, and last in a chain sql:STATEMENT (one SQL statement per item, in the\n"
    "  ack transaction: $1 id, $2 payload, $3 key, $4 attempt, $5 queue, $6 dedup key,\n"
    "  $7 part, $8 priority, $9 enqueued at; e.g. --handler 'sql:CALL app.handle($1, $2)').\n";

}  // namespace

const char* BenchUsage() {
  return R"(usage: partq bench [--sessions 1,2,4,8,16] [--batch 1,10,100] [--items N]
                   [--rounds N] [--parts N] [--full] [--sweep-sessions N]
                   [--only drain,steady,pickup,enqueue,idle,memory]
                   [--systems floor,log_floor,partq,skip_locked_batch,skip_locked_one,
                              naive_update,partq_result,partq_exec,partq_http,
                              partq_exec_python,partq_http_node,
                              pgq,graphile_worker,graphile_worker_default,
                              pg_boss,pg_boss_default] [--examples DIR]
                   [--steady-rate 5000] [--steady-seconds 3] [--steady-sessions 4]
                   [--steady-p99-limit MS] [--idle-sessions 100] [--idle-seconds 10] [--pickup-samples 100]
                   [--only scale [--scale-sessions 200] [--scale-parts 4096]
                    [--scale-warmup 0]]
                   [--only soak --soak-out FILE [--soak-rate 20000] [--soak-seconds 1800]
                    [--soak-sessions 4] [--soak-churn 60] [--soak-sample 10]
                    [--soak-restart-at S --soak-restart 'COMMAND'] [--soak-hold AT:FOR,...]]
                   [--json] [--out FILE] [--plot FILE.svg|FILE.png] [--quiet]
                   [--dsn DSN] [--schema NAME] [--pool-mode MODE] [--max-payload BYTES]
                   [--keep] [--diagnose] [--vacuum-interval 10]
The harness is a binary of its own, partq-bench, which partq runs from its own
directory (./scripts/test builds it; ./scripts/demo builds partq alone).
Without --dsn or $PARTQ_DSN, runs against an embedded PostgreSQL (default
settings, max_connections raised for the idle workload; with --dsn, idle needs
about 2 free connections a session or is skipped). The bench uses its own
schema (default partq_bench), dropped and recreated. partq_result,
partq_exec and partq_http answer each item with a result, in process, through
an exec child and through an HTTP server (partq's own peers); the example
handlers (partq_exec_python: DIR/python/handler.py, partq_http_node:
DIR/node/server.mjs; DIR defaults to the source tree's examples/) run only
when --systems names them. So do the other queues (bench/README.md): PgQ
(Debian's postgresql-15-pgq3 on the server) with one consumer, and Graphile
Worker and pg-boss at their best settings and their defaults (Node.js; their
pinned npm packages installed into ~/.cache/partq-tools on first use); with
steady and pickup, those two are measured at the steady rate and idle too;
partq's own steady rounds run unless --systems leaves partq out.
The soak (issue 27; bench/soak.sh runs and plots
it) runs only when --only names it: producers at --soak-rate, the record
handler, a session joining or leaving every --soak-churn seconds, optionally a
server restart (a shell command) and snapshots held for FOR seconds from AT;
one row every --soak-sample seconds to --soak-out. The scale workload (issue
26) runs only when --only names it: --scale-sessions coordinator sessions on a
--scale-parts sticky queue; it counts heartbeat intervals to full ownership,
store calls and owner rows per idle session, parts moved on a join, a leave
and a SIGKILL against the lower bound, and checks from the database that no
part is ever owned twice. --scale-warmup N lets each session heartbeat N
more times before the idle window (6: past PostgreSQL's first five plans of
a prepared statement, the steady state of a long-idle fleet); its idle
window lasts --idle-seconds.
The steady workload reports its latency whole and in two halves (enqueue
commit -> claimed, claimed -> ack commit); --steady-p99-limit MS makes the run
exit 1 when the whole p99 (median over rounds) is above MS.
--vacuum-interval S: how often the consumers' table keeper looks (seconds, as
`partq worker --vacuum-interval`); 0 leaves the tables to autovacuum alone.)";
}

std::string MainHelp() {
  std::string out =
      "partq — a partitioned work queue on PostgreSQL\n\n"
      "Usage: partq COMMAND [ARGS] [--dsn DSN] [--schema NAME]\n"
      "       partq COMMAND --help         one command's usage (also: partq help COMMAND)\n"
      "       partq version\n\nCommands:\n";
  for (const CommandUsage& c : kCommands) out += c.usage;
  return absl::StrCat(out, "\n", kFooter, kHandlers);
}

std::optional<std::string> CommandHelp(const std::string& command) {
  if (command == "bench") return absl::StrCat(BenchUsage(), "\n");
  for (const CommandUsage& c : kCommands) {
    if (command != c.command) continue;
    // The lines as `partq help` has them, each command line with "partq "
    // in front (and its continuation lines shifted to match).
    std::string out = "Usage:\n";
    for (absl::string_view line : absl::StrSplit(c.usage, '\n', absl::SkipEmpty())) {
      const bool first = absl::StartsWith(line, absl::StrCat("  ", command, " "));
      absl::StrAppend(&out, first ? "  partq " : "        ", line.substr(2), "\n");
    }
    return absl::StrCat(out, "\n", kFooter, command == "worker" ? kHandlers : "");
  }
  return std::nullopt;
}

bool WantsHelp(const std::vector<std::string>& argv) {
  for (const std::string& a : argv) {
    if (a == "--") return false;  // what follows is positional (a payload)
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

}  // namespace partq::cli
