#!/usr/bin/env bash
# The drain of an ordered queue's backlog: ITEMS keyed items (KEYS keys) enqueued into an
# ordered queue of PARTS parts before WORKERS `partq worker --handler record:effects` start;
# the time until every item is recorded. Each binary of PARTQS in turn, ROUNDS times, each
# round in a database of its own on the server at DSN (a superuser connection, no dbname).
# Run by hand (minutes); results go to BENCHMARKS.md.
#   DSN='host=127.0.0.1 port=5499 user=postgres' PARTQS='/tmp/old/partq build/cli/partq' \
#     bench/ordered_drain.sh
# Environment: DSN (required), PARTQS (build/cli/partq), ROUNDS (2), ITEMS (200000),
# KEYS (997), PARTS (16), WORKERS (2), QUEUE_FLAGS (--ordered; '--fair-by key' for a fair
# queue's drain).
set -euo pipefail
: "${DSN:?set DSN to a superuser connection of the server to measure (no dbname)}"
PARTQS=${PARTQS:-build/cli/partq} ROUNDS=${ROUNDS:-2} ITEMS=${ITEMS:-200000}
KEYS=${KEYS:-997} PARTS=${PARTS:-16} WORKERS=${WORKERS:-2} QUEUE_FLAGS=${QUEUE_FLAGS---ordered}
DB=partq_ordered_drain
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT
echo "round binary items seconds items_per_s"
for ((r = 1; r <= ROUNDS; r++)); do
  for partq in $PARTQS; do
    psql "$DSN dbname=postgres" -q -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
    dsn="$DSN dbname=$DB"
    "$partq" migrate --dsn "$dsn" >/dev/null
    # shellcheck disable=SC2086 # the flags are words
    "$partq" queue create oq --parts "$PARTS" $QUEUE_FLAGS --dsn "$dsn" >/dev/null
    # ITEMS / 1000 calls of 1000 (the `0 * b` makes each call draw keys of its own).
    psql "$dsn" -q -c "SELECT count(*) FROM generate_series(1, $ITEMS / 1000) b,
      LATERAL partq.enqueue_many('oq', array_fill('x'::text, ARRAY[1000]),
        (SELECT array_agg('k' || floor(random() * $KEYS)::int) FROM generate_series(1, 1000 + 0 * b)))" >/dev/null
    t0=$(date +%s.%N)
    pids=()
    for ((w = 0; w < WORKERS; w++)); do
      "$partq" worker oq --handler record:effects --dsn "$dsn" >/dev/null 2>&1 &
      pids+=($!)
    done
    while (($(psql "$dsn" -qAt -c "SELECT count(*) FROM partq.items WHERE queue = 'oq'") > 0)); do
      sleep 0.5
    done
    t1=$(date +%s.%N)
    cleanup
    done_=$(psql "$dsn" -qAt -c "SELECT count(*) FROM partq.effects")
    awk -v r="$r" -v b="$partq" -v n="$done_" -v a="$t0" -v z="$t1" \
      'BEGIN { printf "%d %s %d %.1f %.0f\n", r, b, n, z - a, n / (z - a) }'
  done
done
