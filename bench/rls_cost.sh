#!/usr/bin/env bash
# What row-level security costs a worker (issue 48: at most 3 %), by the server's CPU per item.
#
# One `partq worker q --handler noop --concurrency CONC --batch 100 --vacuum-interval 0` drains
# ITEMS items enqueued before it starts, in turn (the order rotated per round) as:
# - owner: the schema's owner (no row-level security);
# - confined: a role granted `worker` on q (`partq grant worker`: its restrictive policies, and
#   since schema version 39 its deletes through a rule and functions, as it holds no DELETE);
# - policies: a role granted `worker` and DELETE on the tables a worker deletes from, and
#   UPDATE on items (since schema version 40 a worker holds none), so it deletes and updates
#   inline under the same policies: what the policies alone cost.
# Measured over each drain, from the worker's start to its exit after the queue emptied: the
# server's CPU (the postmaster's and its children's user + system time, from /proc, reaped
# children included) per item, and items/s. Every mode leaves vacuum to autovacuum (a role that
# may not vacuum never runs the table keeper; the owner's would, and its VACUUM would count),
# and autovacuum is off for items and part_claims, which are vacuumed before each drain
# instead. Printed per round: each mode's µs per item and items/s, and the ratios confined /
# owner and policies / owner of the µs; at the end, their medians (target: <= 1.03).
#
# Usage: bench/rls_cost.sh [--partq BIN] [--items 300000] [--rounds 5] [--concurrency 4]
# It starts a throwaway PostgreSQL 15 of its own (default settings, fsync on): the CPU is read
# from its processes, so the server must be on this host and nothing else may use it.
set -euo pipefail

partq="$(dirname "$0")/../build/cli/partq"
items=300000
rounds=5
conc=4
while (($#)); do
  case "$1" in
    --partq) partq="$2"; shift 2 ;;
    --items) items="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --concurrency) conc="$2"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "$0: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for n in "$items" "$rounds" "$conc"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "$0: '$n' is not a positive number" >&2; exit 2; }
done
[[ -x $partq ]] || { echo "$0: no partq binary at $partq (build it, or pass --partq)" >&2; exit 2; }

# shellcheck source=bench/throwaway_pg.sh
source "$(dirname "$0")/throwaway_pg.sh"
work="$(mktemp -d /tmp/partq-rls-cost.XXXXXX)"
worker_pid=""
cleanup() {
  [[ -n $worker_pid ]] && kill -9 "$worker_pid" 2>/dev/null || true
  throwaway_pg_stop "$work"
  rm -rf "$work"
}
trap cleanup EXIT
throwaway_pg_start "$work"
owner_dsn="$dsn"
role=partq_rls_worker
confined_dsn="${dsn/user=postgres/user=$role}"
role_del=partq_rls_worker_deleting
policies_dsn="${dsn/user=postgres/user=$role_del}"
export PARTQ_SCHEMA=partq_rls_cost
s=$PARTQ_SCHEMA
psql_q() { psql "$owner_dsn" -X -q -v ON_ERROR_STOP=1 "$@"; }
postmaster=$(head -1 "$work/data/postmaster.pid")

# The server's CPU so far, in clock ticks: the postmaster's own and its reaped children's
# (fields 14-17 of /proc/PID/stat), and its live children's own.
# After the ") " that ends the command name: state is f[0], ppid f[1], utime f[11] ...
server_ticks() {
  local total=0 stat f
  read -r -a f < <(sed 's/^.*) //' "/proc/$postmaster/stat")
  total=$((f[11] + f[12] + f[13] + f[14]))
  for stat in /proc/[0-9]*/stat; do
    read -r -a f < <(sed 's/^.*) //' "$stat" 2>/dev/null) || continue
    ((${#f[@]} > 12)) && [[ ${f[1]} == "$postmaster" ]] && total=$((total + f[11] + f[12]))
  done
  echo "$total"
}

PARTQ_DSN="$owner_dsn" "$partq" migrate >/dev/null
PARTQ_DSN="$owner_dsn" "$partq" queue create q --parts 16 >/dev/null
psql_q -c "CREATE ROLE $role LOGIN" -c "CREATE ROLE $role_del LOGIN" >/dev/null
# Vacuum outside the measured window only: autovacuum's run after a drain's deletes is the same
# work in both modes and would land in one drain or the next at random.
psql_q -c "ALTER TABLE $s.items SET (autovacuum_enabled = false)" \
  -c "ALTER TABLE $s.part_claims SET (autovacuum_enabled = false)" >/dev/null
PARTQ_DSN="$owner_dsn" "$partq" grant worker "$role" --queue q >/dev/null
PARTQ_DSN="$owner_dsn" "$partq" grant worker "$role_del" --queue q >/dev/null
psql_q -c "GRANT DELETE ON $s.items, $s.part_claims, $s.session_parts, $s.sessions,
           $s.throughput TO $role_del" -c "GRANT UPDATE ON $s.items TO $role_del" >/dev/null

# One drain as `mode` (owner | confined | policies): prints "µs_per_item items_per_s".
drain() {
  local mode="$1" wdsn="$owner_dsn"
  [[ $mode == confined ]] && wdsn="$confined_dsn"
  [[ $mode == policies ]] && wdsn="$policies_dsn"
  seq 1 "$items" | PARTQ_DSN="$owner_dsn" "$partq" enqueue q --stdin >/dev/null 2>"$work/enqueue.log" ||
    { cat "$work/enqueue.log" >&2; exit 1; }
  psql_q -c "VACUUM ANALYZE" -c "CHECKPOINT" >/dev/null
  local t0 t1 c0 c1
  # A backend reaped between the reads of the postmaster and of its children would count in
  # neither: none may be exiting when the CPU is read (the psql sessions above, the worker's).
  sleep 1
  c0=$(server_ticks); t0=$(date +%s.%N)
  PARTQ_DSN="$wdsn" "$partq" worker q --handler noop --concurrency "$conc" --batch 100 \
    --vacuum-interval 0 --quiet &
  worker_pid=$!
  local deadline=$((SECONDS + 600))
  while [[ $(psql_q -At -c "SELECT count(*) FROM $s.items") != 0 ]]; do
    ((SECONDS < deadline)) || { echo "$0: the $mode drain did not finish in 600 s" >&2; exit 1; }
    sleep 0.5
  done
  kill -TERM "$worker_pid"
  wait "$worker_pid" || { echo "$0: the $mode worker exited with status $?" >&2; exit 1; }
  worker_pid=""
  t1=$(date +%s.%N)
  sleep 1
  c1=$(server_ticks)
  local dead
  dead=$(psql_q -At -c "SELECT count(*) FROM $s.dead_items")
  [[ $dead == 0 ]] || { echo "$0: $dead items of the $mode drain went dead" >&2; exit 1; }
  awk -v c="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" -v n="$items" -v t0="$t0" -v t1="$t1" \
    'BEGIN { printf "%.2f %.0f\n", c / hz * 1e6 / n, n / (t1 - t0) }'
}

echo "rls cost: $items items a drain, one worker at concurrency $conc, batch 100, noop handler"
printf '%-6s %24s %22s %22s %9s %9s\n' round "owner µs/item (items/s)" confined policies \
  conf/own pol/own
ratios=()
policies_ratios=()
orders=("owner confined policies" "confined policies owner" "policies owner confined")
for ((r = 1; r <= rounds; r++)); do
  for mode in ${orders[$(((r - 1) % 3))]}; do
    case $mode in
      owner) read -r ou oi < <(drain owner) ;;
      confined) read -r cu ci < <(drain confined) ;;
      policies) read -r pu pi < <(drain policies) ;;
    esac
  done
  ratio=$(awk -v a="$cu" -v b="$ou" 'BEGIN { printf "%.3f", a / b }')
  pratio=$(awk -v a="$pu" -v b="$ou" 'BEGIN { printf "%.3f", a / b }')
  ratios+=("$ratio")
  policies_ratios+=("$pratio")
  printf '%-6s %24s %22s %22s %8sx %8sx\n' "$r" "$ou ($oi)" "$cu ($ci)" "$pu ($pi)" "$ratio" \
    "$pratio"
done
median() {
  sort -n | awk '{ v[NR] = $1 } END {
    printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
echo "median ratio of the server CPU per item, confined / owner: $(printf '%s\n' "${ratios[@]}" |
  median)x (target <= 1.03x); the policies alone / owner: $(printf '%s\n' \
  "${policies_ratios[@]}" | median)x"
