#!/usr/bin/env bash
# One worker, many queues (issue 52): what serving several queues from one process costs,
# against a process per queue, and whether a busy queue delays a quiet one beside it.
#
#   drain    QUEUES queues of 16 parts, ITEMS items each (enqueued before the workers start),
#            drained by `partq worker q0 q1 ...` (one process, CONCURRENCY threads per queue)
#            and by one `partq worker qI` per queue (the same threads in all), record
#            handler, modes alternated per round. Rate: all items over the span between the
#            first and the last ack (the server's clock, acked_at), so start-up is not in it.
#            Printed as each round's ratio one process / a process per queue (target: >= 0.9).
#   quiet    BACKLOG no-op items in queue `busy` and one worker `partq worker busy quiet`; while
#            it drains them, SAMPLES items go one at a time into `quiet` (every 10 ms, through
#            the SQL API), each up to when its handler ran (the clock_timestamp() of the record
#            handler's INSERT, ran_at), timed two ways: from its enqueue's commit (its
#            transaction's commit timestamp, track_commit_timestamp: taken before the commit's
#            WAL flush, so the flush counts as waiting) and from the enqueue statement's start. The
#            first is the target's: the item is there from its commit, as the steady workload
#            of `partq bench` times it. p50/p99/max, and the backlog left when the last sample was
#            taken (it must not be 0: the quiet queue must have been measured beside a busy one).
#            Target: p99 <= 10 ms with 1,000,000 items behind. --quiet-apart runs the two
#            queues in two processes instead (the same threads): what the machine itself gives.
#            With --dsn, the server needs track_commit_timestamp = on.
#   idle     IDLE_QUEUES empty queues of 16 parts served by one `partq worker q0 ... qN`: after
#            its sessions joined and IDLE_SETTLE seconds (30) settled, the server's connections
#            of that process (application_name 'partq worker', and 'partq worker/listen'), its
#            transactions a second over IDLE_WINDOW seconds (60; pg_stat_database, flushed
#            lazily, so approximate) and the process's RSS. The smoke test shortens both: it
#            checks that the line is there, not what it says.
#            Target: <= 6 connections and <= 0.5 transactions/s for 50 queues. With --dsn,
#            other `partq worker`s on that server count too.
#
# Usage: bench/many_queues.sh [--dsn DSN] [--partq BIN] [--queues 4] [--items 100000]
#                             [--concurrency 2] [--rounds 3] [--backlog 1000000]
#                             [--samples 1000] [--only drain|quiet|idle] [--quiet-apart]
#                             [--idle-queues 50] [--idle-settle 30] [--idle-window 60]
# Without --dsn it starts a throwaway PostgreSQL 15 (default settings, fsync on) and removes
# it afterwards. Every item of the drain is checked to be recorded exactly once.
set -euo pipefail

dsn="" partq="build/cli/partq" queues=4 items=100000 conc=2 rounds=3 backlog=1000000
samples=1000 only="" apart=0 idle_queues=50 idle_settle=30 idle_window=60
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dsn) dsn="$2"; shift 2 ;;
    --partq) partq="$2"; shift 2 ;;
    --queues) queues="$2"; shift 2 ;;
    --items) items="$2"; shift 2 ;;
    --concurrency) conc="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --backlog) backlog="$2"; shift 2 ;;
    --samples) samples="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --quiet-apart) apart=1; shift ;;
    --idle-queues) idle_queues="$2"; shift 2 ;;
    --idle-settle) idle_settle="$2"; shift 2 ;;
    --idle-window) idle_window="$2"; shift 2 ;;
    *) echo "usage: $0 [--dsn DSN] [--partq BIN] [--queues N] [--items N] [--concurrency N]" \
            "[--rounds N] [--backlog N] [--samples N] [--only drain|quiet|idle] [--quiet-apart]" \
            "[--idle-queues N] [--idle-settle S] [--idle-window S]" >&2
       exit 2 ;;
  esac
done
for v in "$queues" "$items" "$conc" "$rounds" "$backlog" "$samples" "$idle_queues" \
         "$idle_settle" "$idle_window"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "$0: counts must be positive integers, got '$v'" >&2; exit 2; }
done
[[ -z $only || $only == drain || $only == quiet || $only == idle ]] ||
  { echo "$0: --only drain, quiet or idle" >&2; exit 2; }
[[ -x $partq ]] || { echo "$0: no partq binary at $partq (build it, or pass --partq)" >&2; exit 2; }

# shellcheck source=bench/throwaway_pg.sh
source "$(dirname "$0")/throwaway_pg.sh"
work="$(mktemp -d /tmp/partq-many-queues.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  throwaway_pg_stop "$work"
  rm -rf "$work"
}
trap cleanup EXIT
if [[ -z "$dsn" ]]; then
  throwaway_pg_start "$work" max_connections=400 track_commit_timestamp=on
fi
export PARTQ_DSN="$dsn" PARTQ_SCHEMA=partq_many_queues
s=$PARTQ_SCHEMA
psql_q() { psql "$dsn" -X -q -v ON_ERROR_STOP=1 "$@"; }
fresh_schema() {
  psql_q -c "SET client_min_messages = warning; DROP SCHEMA IF EXISTS $s CASCADE" >/dev/null
  "$partq" migrate >/dev/null
}
left() { psql_q -At -c "SELECT count(*) FROM $s.items"; }
stop_workers() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" || { echo "$0: a worker exited with status $?" >&2; exit 1; }; done
  pids=()
}

# One drain round in `mode` (one | each); prints items/s.
drain_round() {
  local mode="$1" total=$((queues * items)) names=() i
  fresh_schema
  for ((i = 0; i < queues; i++)); do
    names+=("q$i")
    "$partq" queue create "q$i" --parts 16 >/dev/null
    seq 1 "$items" | "$partq" enqueue "q$i" --stdin >/dev/null 2>"$work/enqueue.log" ||
      { cat "$work/enqueue.log" >&2; exit 1; }
  done
  psql_q -c "VACUUM ANALYZE" -c "CHECKPOINT" >/dev/null
  local flags=(--handler record:effects --concurrency "$conc" --quiet)
  if [[ $mode == one ]]; then
    "$partq" worker "${names[@]}" "${flags[@]}" &
    pids+=($!)
  else
    for q in "${names[@]}"; do "$partq" worker "$q" "${flags[@]}" & pids+=($!); done
  fi
  local deadline=$((SECONDS + 600))
  while [[ $(left) != 0 ]]; do
    ((SECONDS < deadline)) || { echo "$0: the $mode drain did not finish in 600 s" >&2; exit 1; }
    sleep 0.2
  done
  stop_workers
  local got
  got="$(psql_q -At -c "SELECT count(*) || ' ' || count(DISTINCT item_id) FROM $s.effects")"
  [[ "$got" == "$total $total" ]] || { echo "$0: $mode recorded '$got', not $total once each" >&2; exit 1; }
  psql_q -At -c "SELECT round($total / extract(epoch FROM max(acked_at) - min(acked_at)))
                 FROM $s.effects"
}

quiet_run() {
  fresh_schema
  "$partq" queue create busy --parts 16 >/dev/null
  "$partq" queue create quiet --parts 16 >/dev/null
  psql_q -c "CREATE TABLE $s.sent (id bigint PRIMARY KEY, at timestamptz NOT NULL)" >/dev/null
  # The record handler's table, with the time its INSERT ran: when the handler ran, whether or
  # not its transaction was begun before (a claim's transaction start can come before its
  # items even reach the worker, so acked_at, now(), would flatter it).
  psql_q -c "CREATE TABLE $s.quiet_effects (item_id bigint NOT NULL, session_id uuid NOT NULL,
               acked_at timestamptz NOT NULL DEFAULT now(),
               ran_at timestamptz NOT NULL DEFAULT clock_timestamp())" >/dev/null
  local n=0
  while ((n < backlog)); do
    local k=$((backlog - n < 500000 ? backlog - n : 500000))
    seq 1 "$k" | "$partq" enqueue busy --stdin >/dev/null 2>"$work/enqueue.log" ||
      { cat "$work/enqueue.log" >&2; exit 1; }
    n=$((n + k))
  done
  psql_q -c "VACUUM ANALYZE" -c "CHECKPOINT" >/dev/null
  if ((apart)); then
    "$partq" worker busy --handler noop --concurrency "$conc" --quiet &
    pids+=($!)
    "$partq" worker quiet --handler record:quiet_effects --concurrency "$conc" --quiet &
    pids+=($!)
  else
    "$partq" worker busy quiet --handler noop --concurrency "$conc" --quiet \
      --queue "quiet:handler=record:quiet_effects" &
    pids+=($!)
  fi
  # The samples start once the busy queue is being drained.
  local start
  start=$(left)
  while (($(left) > start - 10000)); do sleep 0.1; done
  for ((i = 0; i < samples; i++)); do
    echo "INSERT INTO $s.sent SELECT $s.enqueue('quiet', 'x'), statement_timestamp();"
    echo "SELECT pg_sleep(0.010);"
  done | psql_q >/dev/null
  local behind
  behind=$(psql_q -At -c "SELECT count(*) FROM $s.items WHERE queue = 'busy'")
  local deadline=$((SECONDS + 60))
  while [[ $(psql_q -At -c "SELECT count(*) FROM $s.items WHERE queue = 'quiet'") != 0 ]]; do
    ((SECONDS < deadline)) || { echo "$0: the quiet queue did not drain in 60 s" >&2; exit 1; }
    sleep 0.2
  done
  stop_workers
  # The enqueue's commit time, where the server keeps it (--dsn: maybe not).
  local committed="pg_xact_commit_timestamp(t.xmin)"
  [[ $(psql_q -At -c "SHOW track_commit_timestamp") == on ]] || committed=NULL::timestamptz
  psql_q -At -F' ' -c "
    SELECT count(*),
           round((percentile_cont(0.5) WITHIN GROUP (ORDER BY w))::numeric, 2),
           round((percentile_cont(0.99) WITHIN GROUP (ORDER BY w))::numeric, 2),
           round(max(w)::numeric, 2),
           round((percentile_cont(0.5) WITHIN GROUP (ORDER BY c))::numeric, 2),
           round((percentile_cont(0.99) WITHIN GROUP (ORDER BY c))::numeric, 2),
           round(max(c)::numeric, 2)
    FROM (SELECT extract(epoch FROM e.ran_at - t.at) * 1000 AS w,
                 extract(epoch FROM e.ran_at - $committed) * 1000 AS c
          FROM $s.sent t JOIN $s.quiet_effects e ON e.item_id = t.id) x" |
    while read -r count p50 p99 max cp50 cp99 cmax; do
      local from_commit="p50 $cp50 ms, p99 $cp99 ms, max $cmax ms"
      [[ $committed == NULL* ]] && from_commit="not timed (the server's track_commit_timestamp is off)"
      echo "quiet queue beside $backlog busy items ($( ((apart)) && echo "two processes" || echo "one process")):" \
           "$count samples, enqueue commit -> handler start $from_commit;" \
           "enqueue statement -> handler start p50 $p50 ms, p99 $p99 ms, max $max ms;" \
           "busy items left after the last sample: $behind"
      [[ $count == "$samples" ]] || { echo "$0: $count of $samples samples ran" >&2; exit 1; }
    done
}

idle_run() {
  fresh_schema
  local names=() i
  for ((i = 0; i < idle_queues; i++)); do
    names+=("q$i")
    "$partq" queue create "q$i" --parts 16 >/dev/null
  done
  # Autovacuum's ANALYZE of the new queues' rows would count in the window.
  psql_q -c "VACUUM ANALYZE" >/dev/null
  "$partq" worker "${names[@]}" --handler noop --concurrency "$conc" --quiet &
  local worker=$!
  pids+=($worker)
  local deadline=$((SECONDS + 120))
  while [[ $(psql_q -At -c "SELECT count(*) FROM $s.sessions") != "$idle_queues" ]]; do
    ((SECONDS < deadline)) || { echo "$0: the idle worker's sessions did not all join" >&2; exit 1; }
    sleep 0.5
  done
  # Settled: the claimers' first claims done and the pool's spare connections closed (their
  # counts reach pg_stat_database when they close, and must not fall in the window).
  sleep "$idle_settle"
  local xacts="SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
  local conns x0 x1 t0 t1 rss
  conns=$(psql_q -At -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'partq worker' OR starts_with(application_name, 'partq worker/')")
  x0=$(psql_q -At -c "$xacts"); t0=$(date +%s.%N)
  sleep "$idle_window"
  x1=$(psql_q -At -c "$xacts"); t1=$(date +%s.%N)
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$worker/status")
  stop_workers
  awk -v n="$idle_queues" -v c="$conns" -v a="$x0" -v b="$x1" -v t0="$t0" -v t1="$t1" -v r="$rss" \
    'BEGIN { printf "idle: one worker of %d empty queues: %d connections, %.1f transactions/s on the server (approximate), RSS %.1f MB\n", n, c, (b - a - 1) / (t1 - t0), r / 1024 }'
}

if [[ -z $only || $only == drain ]]; then
  echo "drain: $queues queues x $items items, $conc threads per queue, record handler"
  printf '%-6s %22s %22s %8s\n' round one_process process_per_queue ratio
  for ((r = 1; r <= rounds; r++)); do
    if ((r % 2)); then a=$(drain_round one); b=$(drain_round each)
    else b=$(drain_round each); a=$(drain_round one); fi
    printf '%-6s %22s %22s %8s\n' "$r" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2fx", a / b }')"
  done
  echo "items/s (first to last ack); ratio: one process / a process per queue"
fi
if [[ -z $only || $only == quiet ]]; then
  quiet_run
fi
if [[ -z $only || $only == idle ]]; then
  idle_run
fi
psql_q -c "SET client_min_messages = warning; DROP SCHEMA IF EXISTS $s CASCADE" >/dev/null
