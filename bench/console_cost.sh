#!/usr/bin/env bash
# What an open web console costs the database (issue 25): a queue of PARTS parts holding ITEMS
# items and no workers, `partq console` on it, TABS clients each reading the part map every
# second as a browser tab does, and for SECS seconds the CPU time of the server processes
# serving the console's connections (found in pg_stat_activity by application_name "partq
# console"; utime + stime from /proc/PID/stat), of the whole server (the postmaster's children,
# those that exited too: a Status read may start parallel workers, which are not the
# console's backends), against the whole server's over SECS seconds before the console
# started (autovacuum, checkpoints: the floor), and of the console process itself.
# Run by hand on the database's machine (it reads the backends' /proc); results go to
# BENCHMARKS.md.
#   DSN='host=127.0.0.1 port=5432 user=postgres dbname=postgres' bench/console_cost.sh
# Environment: DSN (required), PARTQ (default build/cli/partq), PARTS (4096), ITEMS (2000000),
# TABS (3), SECS (60), PORT (18093), SCHEMA (partq_console_bench, dropped and recreated).
set -euo pipefail
: "${DSN:?set DSN to the server to measure (psql and partq must reach it, on this machine)}"
PARTQ=${PARTQ:-build/cli/partq}
PARTS=${PARTS:-4096} ITEMS=${ITEMS:-2000000} TABS=${TABS:-3} SECS=${SECS:-60}
PORT=${PORT:-18093} SCHEMA=${SCHEMA:-partq_console_bench}
export PARTQ_DSN="$DSN" PARTQ_SCHEMA="$SCHEMA"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

psql "$DSN" -q -c "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" 2>/dev/null
"$PARTQ" migrate >/dev/null
"$PARTQ" queue create big --parts "$PARTS" >/dev/null
echo "enqueueing $ITEMS items into $PARTS parts..."
seq 1 "$ITEMS" | "$PARTQ" enqueue big --stdin --chunk 50000 >/dev/null
psql "$DSN" -q -c "VACUUM ANALYZE $SCHEMA.items" >/dev/null

hz=$(getconf CLK_TCK)
ticks() {  # utime + stime of the given pids, in clock ticks
  local sum=0 p f
  for p in "$@"; do
    f=$(cut -d' ' -f14,15 "/proc/$p/stat" 2>/dev/null || echo "0 0")
    sum=$((sum + ${f% *} + ${f#* }))
  done
  echo "$sum"
}
datadir=$(psql "$DSN" -qAt -c "SHOW data_directory")
postmaster=$(head -1 "$datadir/postmaster.pid")
server() {  # the postmaster's children (live ones now, and the exited ones it reaped)
  local own reaped
  own=$(ticks $(pgrep -P "$postmaster"))
  reaped=$(cut -d' ' -f16,17 "/proc/$postmaster/stat")
  echo $((own + ${reaped% *} + ${reaped#* }))
}
s0=$(server) t0=$(date +%s.%N)
sleep "$SECS"
s1=$(server) t1=$(date +%s.%N)
floor=$(awk -v s="$((s1 - s0))" -v hz="$hz" -v t0="$t0" -v t1="$t1" \
        'BEGIN { printf "%.2f", 100 * s / hz / (t1 - t0) }')

"$PARTQ" console --listen "127.0.0.1:$PORT" >/dev/null 2>&1 &
console=$!
pids+=("$console")
until curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null; do sleep 0.2; done
# The tabs: each reads the part map and the queue list every second.
for _ in $(seq 1 "$TABS"); do
  (while true; do
     curl -sf "http://127.0.0.1:$PORT/api/queue?name=big" >/dev/null
     curl -sf "http://127.0.0.1:$PORT/api/queues" >/dev/null
     sleep 1
   done) &
  pids+=("$!")
done
# Let the first status round (the slow one, cold) pass before measuring.
until curl -sf "http://127.0.0.1:$PORT/api/queues" | grep -q '"ready"'; do sleep 0.5; done

backends=$(psql "$DSN" -qAt -c "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity
                                WHERE application_name = 'partq console'")
b0=$(ticks $backends) c0=$(ticks "$console") s0=$(server) t0=$(date +%s.%N)
sleep "$SECS"
b1=$(ticks $backends) c1=$(ticks "$console") s1=$(server) t1=$(date +%s.%N)
took=$(curl -sf "http://127.0.0.1:$PORT/api/queues" |
       grep -o '"status_took_seconds":[0-9.e-]*' | cut -d: -f2)
awk -v b="$((b1 - b0))" -v c="$((c1 - c0))" -v s="$((s1 - s0))" -v floor="$floor" -v hz="$hz" -v t0="$t0" -v t1="$t1" \
    -v took="$took" -v n="$(echo $backends | wc -w)" -v parts="$PARTS" -v items="$ITEMS" \
    -v tabs="$TABS" 'BEGIN {
  secs = t1 - t0
  printf "queue of %d parts, %d items, no workers; %d tabs reading every second; %.0f s\n",
         parts, items, tabs, secs
  printf "console backends (%d): %.2f s CPU = %.2f %% of a core\n", n, b / hz, 100 * b / hz / secs
  printf "whole server:         %.2f s CPU = %.2f %% of a core (%.2f %% before the console)\n",
         s / hz, 100 * s / hz / secs, floor
  printf "console process:      %.2f s CPU = %.2f %% of a core\n", c / hz, 100 * c / hz / secs
  printf "last Status read took %.3f s\n", took
}'
psql "$DSN" -q -c "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" 2>/dev/null
