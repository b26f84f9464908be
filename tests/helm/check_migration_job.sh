#!/usr/bin/env bash
# The migration Job's shell script runs `partq migrate` and `partq queue create` for each
# queue of values and decides which failures are fatal; only a cluster would run it. This
# renders the Job, takes its script and runs it (with the partq binary on PATH) against a
# fresh schema, four times:
#   1. a fresh schema: the queues are created;
#   2. the same values again (every helm upgrade): success, queues unchanged;
#   3. values with another part count: the Job fails (the chart sizes replicas by it), with
#      partq's table of existing and requested settings and a message in the log, queue
#      unchanged; another max attempts: success, the queue left as it is;
#   4. with a partq from before idempotent creates as the migration image (stood in for by
#      a wrapper that fails `queue create` of an existing queue as it did): success;
#   5. with database.worker.role: the role is granted the worker's queue (`partq grants`), the
#      worker pods' env logs in as it, and a second run changes nothing; a role that does not
#      exist fails the Job with a message that names it;
# and once against a schema newer than the binary: the Job must fail.
# Usage: tests/helm/check_migration_job.sh PARTQ_BINARY   (PARTQ_TEST_DSN: the database)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
TOOLS=$ROOT/tools
partq=${1:?usage: check_migration_job.sh PARTQ_BINARY}
dsn=${PARTQ_TEST_DSN:?check_migration_job: PARTQ_TEST_DSN must name the test database}
# tools/setup installs the chart renderer on first use; failing that fails the test.
"$TOOLS/setup" || { echo "check_migration_job: FAIL: tools/setup could not install the chart renderer" >&2; exit 1; }

schema=job_$$_$RANDOM
work=$(mktemp -d)
trap 'psql -X -q "$dsn" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1; rm -rf "$work"' EXIT
mkdir "$work/bin"
ln -s "$(realpath "$partq")" "$work/bin/partq"
export PARTQ_DSN=$dsn PARTQ_SCHEMA=$schema

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# The migrate container's script for `jobs` with $1 parts and ${2:-3} max attempts (and a
# second queue that gives fewer settings: partq's defaults for the rest).
script() {
  cat >"$work/values.yaml" <<VALUES
queues:
  - {name: jobs, parts: $1, maxAttempts: ${2:-3}, sessionTtl: 10s, assignment: lexical}
  - {name: orders, parts: 2, ordered: true}
worker:
  queue: jobs
VALUES
  if [[ -n ${ROLE:-} ]]; then
    cat >>"$work/values.yaml" <<VALUES
database:
  worker: {role: $ROLE, dsnKey: worker-dsn, publishTopics: [events]}
VALUES
  fi
  "$TOOLS/helm-template" --strict --name partq --namespace queues -f "$work/values.yaml" \
    "$ROOT/helm/partq" >"$work/chart.yaml"
  python3 - "$work/chart.yaml" <<'PY'
import sys, yaml
for doc in yaml.safe_load_all(open(sys.argv[1])):
    if doc and doc.get("kind") == "Job" and doc["metadata"]["name"].endswith("-migrate"):
        (c,) = [c for c in doc["spec"]["template"]["spec"]["containers"] if c["name"] == "migrate"]
        assert c["command"] == ["/bin/sh", "-ec"], c["command"]
        print(c["args"][0])
PY
}
# Runs the script as the Job's container would; its output in $work/out.
run() { PATH="$work/bin:$PATH" /bin/sh -ec "$1" >"$work/out" 2>&1; }
queues() { psql -X -At "$dsn" -c "SELECT name, parts, max_attempts, ordered FROM $schema.queues ORDER BY name" | tr '\n' ' '; }
want="jobs|4|3|f orders|2|25|t "

s4=$(script 4)
[[ -n $s4 ]] || { echo "check_migration_job: FAIL: no migration Job rendered" >&2; exit 1; }
run "$s4" || fail "first run failed: $(cat "$work/out")"
[[ $(queues) == "$want" ]] || fail "first run: queues are '$(queues)', expected '$want'"

run "$s4" || fail "second run with the same values failed: $(cat "$work/out")"
grep -q 'queue "jobs" already exists with these settings' "$work/out" || fail "second run: $(cat "$work/out")"
[[ $(queues) == "$want" ]] || fail "second run changed the queues: '$(queues)'"

if run "$(script 8)"; then fail "a run with another part count succeeded: $(cat "$work/out")"; fi
grep -q 'queue "jobs" already exists with other settings' "$work/out" && grep -qE '^ +parts +4 +8 +<- differs$' "$work/out" &&
  grep -q 'queues\[\].parts differs from the queue.s part count' "$work/out" || fail "another part count: $(cat "$work/out")"
[[ $(queues) == "$want" ]] || fail "another part count changed the queues: '$(queues)'"

run "$(script 4 5)" || fail "a run with another max attempts failed: $(cat "$work/out")"
grep -qE '^ +max attempts +3 +5 +<- differs$' "$work/out" && grep -q 'queue "jobs" left as it is' "$work/out" ||
  fail "another max attempts: $(cat "$work/out")"
[[ $(queues) == "$want" ]] || fail "another max attempts changed the queues: '$(queues)'"

mkdir "$work/old"
cat >"$work/old/partq" <<OLD
#!/bin/sh
if [ "\$1 \$2" = "queue create" ]; then
  echo "partq: error: queue \"\$3\" already exists" >&2
  exit 1
fi
exec "$work/bin/partq" "\$@"
OLD
chmod +x "$work/old/partq"
PATH="$work/old:$PATH" /bin/sh -ec "$s4" >"$work/out" 2>&1 || fail "an older partq failed the Job: $(cat "$work/out")"
grep -q 'queue "orders" left as it is' "$work/out" || fail "an older partq: $(cat "$work/out")"

role=job_worker_$$_$RANDOM
trap 'psql -X -q "$dsn" -c "DROP SCHEMA IF EXISTS $schema CASCADE" -c "DROP ROLE IF EXISTS $role" >/dev/null 2>&1; rm -rf "$work"' EXIT
psql -X -q "$dsn" -c "CREATE ROLE $role LOGIN"
sr=$(ROLE=$role script 4)
grep -q "partq grant worker '$role' --queue 'jobs'" <<<"$sr" || fail "no grant in the Job's script: $sr"
grep -A1 "name: PGUSER" "$work/chart.yaml" | grep -qF "value: \"$role\"" || fail "the worker pods do not log in as the role"
run "$sr" || fail "a run with database.worker.role failed: $(cat "$work/out")"
grants() { "$work/bin/partq" grants 2>&1 | grep -E "^ *jobs +\"?$role\"? +worker" || true; }
[[ -n $(grants) ]] || fail "the worker role has no worker grant on jobs: $("$work/bin/partq" grants 2>&1)"
"$work/bin/partq" grants 2>&1 | grep -qE "^ *topic:events +\"?$role\"? +publish" ||
  fail "the worker role may not publish to events: $("$work/bin/partq" grants 2>&1)"
run "$sr" || fail "a second run with database.worker.role failed: $(cat "$work/out")"
[[ $(grants | wc -l) == 1 ]] || fail "a second run: $("$work/bin/partq" grants 2>&1)"
if run "$(ROLE=${role}_missing script 4)"; then fail "the Job granted a role that does not exist: $(cat "$work/out")"; fi
grep -q "${role}_missing" "$work/out" || fail "a missing role: the Job's failure does not name it: $(cat "$work/out")"

psql -X -q "$dsn" -c "INSERT INTO $schema.schema_migrations (version, description) VALUES (999, 'future')"
if run "$s4"; then fail "the Job succeeded on a schema newer than partq: $(cat "$work/out")"; fi
# ... and failed for that reason, not another.
grep -q 'newer than this partq' "$work/out" || fail "the Job failed, but not on the newer schema: $(cat "$work/out")"

if ((failures == 0)); then echo "check_migration_job: ok"; fi
exit $((failures > 0))
