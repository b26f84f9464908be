#!/usr/bin/env bash
# The image (ctest label `image`; issue 29): localhost/partq:<version>, built by scripts/image
# (./scripts/test builds it before ctest), run as the Helm chart runs it: uid 10001, a
# read-only root filesystem. `partq version` runs; a worker in it drains N items exactly once
# against the suite's PostgreSQL (host network); /metrics and /readyz answer; SIGTERM stops it
# within its drain timeout, exit status 0. Fails with the reason when podman cannot run
# containers here; it never passes without running them.
#   check_image.sh PARTQ_BINARY   (PARTQ_TEST_DSN: the suite's server)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PARTQ=$1
: "${PARTQ_TEST_DSN:?the image test needs the PostgreSQL of the suite in PARTQ_TEST_DSN}"
DSN=$PARTQ_TEST_DSN
fail() { echo "image test: FAIL: $*" >&2; exit 1; }
command -v podman >/dev/null || fail "podman is not installed (scripts/image installs it)"
version=$(sed -n 's/^project(partq VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
image=localhost/partq:$version
podman=(podman --runtime runc)
limits=(--ulimit nofile=20000:20000 --ulimit nproc=32768:32768)
run=("${podman[@]}" run --rm --read-only "${limits[@]}")
"${podman[@]}" image exists "$image" || fail "no image $image: run scripts/image"

out=$("${run[@]}" --network none --entrypoint id "$image" -u 2>&1) ||
  fail "podman cannot run a container here: $out"
[[ $out == 10001 ]] || fail "the image runs as uid '$out', not 10001"
out=$("${run[@]}" --network none "$image" version 2>&1) || fail "partq version in the image: $out"
[[ $out == "partq $version" ]] || fail "partq version in the image says '$out', not 'partq $version'"
echo "image test: uid 10001, read-only root, $out"

schema=image_$$_$RANDOM
name=partq-image-test-$$
# A port free now (the kernel picks it), not a random one: the suite's other tests hold
# ephemeral ports, and a clash left the worker unable to serve /metrics.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
n=20000
cleanup() {
  "${podman[@]}" rm -f "$name" >/dev/null 2>&1 || true
  psql "$DSN" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
}
trap cleanup EXIT
"$PARTQ" migrate --dsn "$DSN" --schema "$schema" >/dev/null
"$PARTQ" queue create q --parts 8 --dsn "$DSN" --schema "$schema" >/dev/null
seq 1 "$n" | "$PARTQ" enqueue q --stdin --dsn "$DSN" --schema "$schema" >/dev/null 2>&1
# The DSN and schema as the chart passes them: in the environment.
"${podman[@]}" run -d --name "$name" --read-only "${limits[@]}" --network host \
  -e PARTQ_DSN="$DSN" -e PARTQ_SCHEMA="$schema" "$image" \
  worker q --handler "record:$schema.effects" --concurrency 4 --metrics-addr "127.0.0.1:$port" \
  --drain-timeout 10s >/dev/null || fail "the worker container did not start"
left=$n
for _ in $(seq 1 600); do
  left=$(psql "$DSN" -Atc "SELECT count(*) FROM $schema.items")
  [[ $left == 0 ]] && break
  # A worker that exited (a bad flag, a port it cannot bind) is reported now, not in 60 s.
  [[ $("${podman[@]}" inspect -f '{{.State.Running}}' "$name" 2>/dev/null) == true ]] ||
    fail "the worker container stopped with $left of $n items left; it said: $("${podman[@]}" logs "$name" 2>&1 | tail -5)"
  sleep 0.1
done
[[ $left == 0 ]] || fail "$left of $n items left after 60 s; the worker said: $("${podman[@]}" logs "$name" 2>&1 | tail -5)"
read -r rows distinct < <(psql "$DSN" -AtF' ' -c "SELECT count(*), count(DISTINCT item_id) FROM $schema.effects")
[[ $rows == "$n" && $distinct == "$n" ]] || fail "the worker recorded $rows effects ($distinct distinct), expected $n once each"
echo "image test: a worker in the image drained $n items, each recorded once"

code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz") || true
[[ $code == 200 ]] || fail "/readyz answered '$code', not 200"
metrics=$(curl -sf "http://127.0.0.1:$port/metrics") || fail "/metrics did not answer"
grep -q '^partq_items_acked_total' <<<"$metrics" || fail "/metrics has no partq_items_acked_total"
echo "image test: /readyz 200, /metrics served"

start=$(date +%s%N)
"${podman[@]}" kill --signal TERM "$name" >/dev/null
status=$("${podman[@]}" wait "$name")
now=$(date +%s%N)
ms=$(( (now - start) / 1000000 ))
((ms < 12000)) || fail "SIGTERM took ${ms} ms to stop the worker (drain timeout 10s)"
[[ $status == 0 ]] || fail "the worker exited $status on SIGTERM: $("${podman[@]}" logs "$name" 2>&1 | tail -5)"
echo "image test: SIGTERM stopped the worker in ${ms} ms, exit status 0"
