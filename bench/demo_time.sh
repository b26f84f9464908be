#!/usr/bin/env bash
# How long ./scripts/demo makes a new user wait on a bare Debian 12: a clean clone of this
# repository's HEAD (or of the commit given) runs ./scripts/demo as root in a container of the
# Debian 12 base scripts/image bootstraps (localhost/debian:bookworm: apt and nothing else of a
# build), and every line it prints gets its seconds since the start. The figure is the time of
# the first line of `partq demo` itself ("partq demo: starting an embedded PostgreSQL").
#   bench/demo_time.sh [COMMIT]     # needs podman and the base (run scripts/image once)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
commit=${1:-HEAD}
base=localhost/debian:bookworm
podman=(podman --runtime runc)
"${podman[@]}" image exists "$base" || { echo "demo_time: no $base (run scripts/image once)" >&2; exit 2; }
clone=$(mktemp -d /tmp/partq-demo-time.XXXXXX)
trap 'rm -rf "$clone"' EXIT
git clone -q "$root" "$clone/partq"
git -C "$clone/partq" checkout -q "$(git -C "$root" rev-parse "$commit")"
log="$clone/demo.log"
"${podman[@]}" run --rm --network host --ulimit nofile=20000:20000 --ulimit nproc=32768:32768 \
  -v "$clone/partq:/src:ro" "$base" bash -c '
cp -a /src /partq && cd /partq
start=$EPOCHREALTIME
./scripts/demo 2>&1 | while IFS= read -r line; do
  now=$EPOCHREALTIME
  printf "%8.1f %s\n" "$(( (${now/./} - ${start/./}) / 100000 ))e-1" "$line"
done' | tee "$log"
first() { grep -m1 -E "$1" "$log" | awk '{print $1}'; }
echo "demo_time: $(git -C "$root" rev-parse --short "$commit"): build began at $(first '\[ *[0-9]+/[0-9]+\]|\[ *[0-9]+%\]') s," \
     "partq demo's output at $(first 'partq demo: starting') s"
