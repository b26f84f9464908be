#!/usr/bin/env bash
# What roles per queue (migration 29, issue 48) cost the SQL API: the same calls against a
# schema at version 28 (the functions ran with the caller's rights) and one at the current
# version (a SECURITY DEFINER wrapper checks the caller, then calls the function it
# replaced), alternated for ROUNDS rounds of SECS seconds each with pgbench: enqueue() of one
# item by the owner and by a role granted the queue (`partq grant producer`), and
# enqueue_many() of 1000 items by the owner. Prints each round's calls/s and the ratio of the
# current schema to version 28. Workers do not call the API: a drain pays nothing.
#   DSN='host=127.0.0.1 port=5432 user=postgres dbname=postgres' bench/sql_api_roles.sh
# Environment: DSN (required; a superuser, to create the role), PARTQ (default
# build/cli/partq), ROUNDS (3), SECS (10), CLIENTS (4), SCHEMA (partq_roles_bench; it and
# ${SCHEMA}_v28 are dropped and recreated), ROLE (partq_roles_bench, a login role made here).
set -euo pipefail
: "${DSN:?set DSN to the server to measure (psql, pgbench and partq must reach it)}"
PARTQ=${PARTQ:-build/cli/partq}
ROUNDS=${ROUNDS:-3} SECS=${SECS:-10} CLIENTS=${CLIENTS:-4}
SCHEMA=${SCHEMA:-partq_roles_bench} ROLE=${ROLE:-partq_roles_bench}
OLD="${SCHEMA}_v28"
work=$(mktemp -d "${TMPDIR:-/tmp}/partq-roles-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

psql "$DSN" -q -v ON_ERROR_STOP=1 <<SQL >/dev/null
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS $SCHEMA CASCADE;
DROP SCHEMA IF EXISTS $OLD CASCADE;
DROP ROLE IF EXISTS $ROLE;
CREATE ROLE $ROLE LOGIN;
SQL
"$PARTQ" migrate --dsn "$DSN" --schema "$OLD" --to 28 >/dev/null
# partq refuses a schema older than itself, so version 28's queue row is made by hand.
psql "$DSN" -q -c "INSERT INTO $OLD.queues (name, parts) VALUES ('q', 16)" >/dev/null
"$PARTQ" migrate --dsn "$DSN" --schema "$SCHEMA" >/dev/null
"$PARTQ" queue create q --parts 16 --dsn "$DSN" --schema "$SCHEMA" >/dev/null
"$PARTQ" grant producer "$ROLE" --queue q --dsn "$DSN" --schema "$SCHEMA" >/dev/null
for s in "$OLD" "$SCHEMA"; do
  echo "SELECT $s.enqueue('q', 'x');" >"$work/$s.one.sql"
  echo "SELECT count(*) FROM $s.enqueue_many('q', ARRAY(SELECT 'x' FROM generate_series(1, 1000)));" \
    >"$work/$s.many.sql"
done

# Calls a second of script $1, as the user of DSN or, with $2, as that role.
rate() {
  local dsn=$DSN
  [[ -n ${2:-} ]] && dsn="$DSN user=$2"
  pgbench -n -M prepared -c "$CLIENTS" -j 2 -T "$SECS" -f "$1" "$dsn" 2>/dev/null |
    sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
for r in $(seq 1 "$ROUNDS"); do
  old_one=$(rate "$work/$OLD.one.sql")
  new_one=$(rate "$work/$SCHEMA.one.sql")
  role_one=$(rate "$work/$SCHEMA.one.sql" "$ROLE")
  old_many=$(rate "$work/$OLD.many.sql")
  new_many=$(rate "$work/$SCHEMA.many.sql")
  awk -v r="$r" -v a="$old_one" -v b="$new_one" -v c="$role_one" -v d="$old_many" -v e="$new_many" \
    'BEGIN { printf "round %d: enqueue() v28 %.0f/s, now %.0f/s (%.2fx), as a granted role %.0f/s (%.2fx); enqueue_many(1000) v28 %.1f/s, now %.1f/s (%.2fx)\n", r, a, b, b / a, c, c / a, d, e, e / d }'
done
psql "$DSN" -q -c "DROP SCHEMA $SCHEMA CASCADE; DROP SCHEMA $OLD CASCADE; DROP ROLE $ROLE" \
  >/dev/null 2>&1 || true
