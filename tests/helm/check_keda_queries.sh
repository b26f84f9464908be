#!/usr/bin/env bash
# The KEDA ScaledObject carries SQL that KEDA's operator, not partq, runs against partq's
# schema: a rename in a migration would only show in a cluster. This renders both KEDA
# metrics for a fresh schema, for a worker of two queues (jobs, and thumbs in
# worker.moreQueues), migrates that schema with the partq binary, enqueues a few items (and
# one into a queue the worker does not serve) and runs each rendered query with psql: it
# must work and count what is due in the worker's queues.
# Usage: tests/helm/check_keda_queries.sh PARTQ_BINARY   (PARTQ_TEST_DSN: the database)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
TOOLS=$ROOT/tools
partq=${1:?usage: check_keda_queries.sh PARTQ_BINARY}
dsn=${PARTQ_TEST_DSN:?check_keda_queries: PARTQ_TEST_DSN must name the test database}
# tools/setup installs the chart renderer on first use; failing that fails the test.
"$TOOLS/setup" || { echo "check_keda_queries: FAIL: tools/setup could not install the chart renderer" >&2; exit 1; }

schema=keda_$$_$RANDOM
work=$(mktemp -d)
trap 'psql -X -q "$dsn" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1; rm -rf "$work"' EXIT
failures=0
# Both queries are rendered (and taken out) before the items exist. The oldest item is
# made 100 s old by hand, so oldestReadyAgeSeconds must say at least 100 and at most 100
# plus the seconds the script took from the first enqueue to the answer (a loaded machine
# may take several).
declare -A queries
cat >"$work/queues.yaml" <<'VALUES'
queues:
  - {name: jobs, parts: 16}
  - {name: thumbs, parts: 4}
worker:
  queue: jobs
  moreQueues: [{name: thumbs}]
VALUES
for metric in readyItems oldestReadyAgeSeconds; do
  "$TOOLS/helm-template" --strict --name partq --namespace queues \
    -f "$here/values/keda.yaml" -f "$work/queues.yaml" --set "database.schema=$schema" \
    --set "autoscaling.keda.metric=$metric" "$ROOT/helm/partq" >"$work/$metric.yaml"
  queries[$metric]=$(python3 - "$work/$metric.yaml" <<'PY'
import json, re, sys
for line in open(sys.argv[1]):
    m = re.match(r'\s*query: (".*")\s*$', line)
    if m:
        print(json.loads(m.group(1)))
PY
)
done

export PARTQ_DSN=$dsn PARTQ_SCHEMA=$schema
"$partq" migrate >/dev/null
"$partq" queue create jobs --parts 4 >/dev/null
"$partq" queue create thumbs --parts 4 >/dev/null
"$partq" queue create other --parts 4 >/dev/null
t0=$(date +%s)
for i in 1 2 3; do "$partq" enqueue jobs "p$i" >/dev/null; done
for i in 1 2; do "$partq" enqueue thumbs "t$i" >/dev/null; done
"$partq" enqueue other "o1" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 "$dsn" \
  -c "UPDATE $schema.items SET enqueued_at = enqueued_at - interval '500 s' WHERE payload = 'o1'::bytea" >/dev/null
"$partq" enqueue jobs --delay 1h later >/dev/null
psql -X -q -v ON_ERROR_STOP=1 "$dsn" \
  -c "UPDATE $schema.items SET enqueued_at = enqueued_at - interval '100 s' WHERE payload = 'p1'::bytea" >/dev/null

for metric in readyItems oldestReadyAgeSeconds; do
  query=${queries[$metric]}
  if [[ -z $query ]]; then
    echo "FAIL: $metric: no query in the rendered ScaledObject" >&2; failures=$((failures + 1)); continue
  fi
  if ! got=$(psql -X -At -v ON_ERROR_STOP=1 "$dsn" -c "$query" 2>"$work/err"); then
    echo "FAIL: $metric: the rendered query fails on the current schema: $(cat "$work/err")" >&2
    echo "  $query" >&2
    failures=$((failures + 1)); continue
  fi
  case $metric in
    readyItems) low=5 high=5 ;;          # jobs' 3 and thumbs' 2; not the delayed item, nor other's
    oldestReadyAgeSeconds) low=100 high=$((100 + $(date +%s) - t0 + 1)) ;;  # p1, made 100 s old (o1's 500 s is not the worker's)
  esac
  if ! [[ $got =~ ^[0-9]+$ ]] || ((got < low || got > high)); then
    echo "FAIL: $metric: the query returned '$got', expected $low..$high" >&2; failures=$((failures + 1))
  else
    echo "check_keda_queries: $metric ok ($got)"
  fi
done
exit $((failures > 0))
