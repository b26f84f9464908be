# Shared by scripts/test and scripts/demo: install what is missing, then build.
# The demo installs and builds only what `partq demo` needs; the tests, everything.
# shellcheck shell=bash
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${PARTQ_BUILD_DIR:-$ROOT/build}"

# Debian 12 packages of the repository's own checkers (tools/, run by the chart and dashboard
# tests); tools/setup installs just these.
PARTQ_CHECKER_PACKAGES=(
  golang-go golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev # tools/helm-template
  python3-yaml python3-jsonschema # tools/check-values, tests/helm/*.py
  nodejs npm # tools/k8s-validate, tools/check-dashboards (npm ci of tools/package-lock.json)
  prometheus # promtool parses the dashboards' PromQL
  jq         # tests/helm/check_chart.sh reads values.schema.json
  universal-ctags # tools/check-function-lengths
)

# Debian 12 packages that build the `partq` binary (the Dockerfile's build stage installs these
# but Ninja and civetweb, and builds with Make). civetweb serves http in the handler tests and
# the bench's http handler (tests/handlers, bench/); the configure step of a build with them
# looks for it.
PARTQ_BUILD_PACKAGES=(
  build-essential cmake pkg-config ninja-build
  libpqxx-dev libpq-dev librdkafka-dev libabsl-dev prometheus-cpp-dev
  nlohmann-json3-dev libmicrohttpd-dev libcurl4-openssl-dev libcivetweb-dev
)

# What ./scripts/demo installs: the build's packages and the server `partq demo` embeds, Debian's
# PostgreSQL 15 (pg/embedded_postgres.cc runs its initdb and pg_ctl, as the `postgres` user
# the package creates when run as root). Nothing of the tests'.
PARTQ_DEMO_PACKAGES=("${PARTQ_BUILD_PACKAGES[@]}" postgresql-15)

# Debian 12 packages the build and the whole test suite need (./scripts/test).
PARTQ_PACKAGES=(
  "${PARTQ_BUILD_PACKAGES[@]}"
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  postgresql-15 postgresql-contrib
  postgresql-15-pgq3 # partq bench's pgq system (bench/peer_queues.h): PgQ beside partq
  pgbouncer   # tests/pg/pgbouncer_test puts a real PgBouncer (1.18) between partq and the server
  prometheus  # promtool: the metrics page, alert rules and their unit tests are checked in ctest
  kcat        # the Kafka tests put a real client on the wire
  gnuplot-nox # partq bench --plot
  openssl     # the HTTP client tests make their own CA and certificates
  python3     # ... serve https with its ssl module; the exec handler tests run Python children
  python3-psycopg2 # tests/pg/sql_api_test runs examples/sql-api/enqueue.py with Debian's Python
  chromium python3-websocket # tests/console drives the web console in headless Chromium over
                             # the DevTools protocol (tests/console/cdp.py)
  nodejs      # the http handler example (examples/node) in the handler fault tests; Debian's 18
              # will do, and a node already on PATH counts (partq_install_packages)
  "${PARTQ_CHECKER_PACKAGES[@]}"
)

# Debian 12 packages that build and run the container image (scripts/image, the image test):
# podman with runc, mmdebstrap for a Debian base made here instead of pulled from a registry.
PARTQ_IMAGE_PACKAGES=(podman runc mmdebstrap)

# Debian 12 packages of the `ha` tests (tests/ha): a Patroni 3.0 cluster with etcd as its
# store. The tests run their own etcd and Patroni on free ports; on a machine with systemd,
# installing etcd-server also starts Debian's etcd service on 127.0.0.1:2379
# (`systemctl disable --now etcd` stops it; the tests do not need it).
PARTQ_HA_PACKAGES=(patroni python3-etcd etcd-server)

partq_install_deps() {
  partq_install_packages "${PARTQ_PACKAGES[@]}" "$@"
}

# What the demo needs, with the build between: the build's packages first, then partq builds
# while the server installs beside it (the build does not need the server). apt's output for
# the server goes to a file, so the build's own stays readable.
partq_install_demo_deps_and_build() {
  partq_install_packages "${PARTQ_BUILD_PACKAGES[@]}"
  partq_build_binary &
  local build=$! log
  log=$(mktemp /tmp/partq-apt.XXXXXX)
  if ! partq_install_packages postgresql-15 >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    wait "$build" || true
    echo "partq: installing postgresql-15 failed (apt's output above)" >&2
    return 1
  fi
  rm -f "$log"
  wait "$build"
}

# Installs those of the given Debian packages that are missing (apt, as root or with sudo).
partq_install_packages() {
  local missing=() p
  for p in "$@"; do
    # A Node.js installed another way counts: nodesource's nodejs bundles npm (and conflicts
    # with Debian's npm package), so dpkg would call npm missing.
    case $p in
      nodejs) command -v node >/dev/null && continue ;;
      npm) command -v npm >/dev/null && continue ;;
    esac
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "partq: installing missing packages: ${missing[*]}"
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

# Everything: the product, the tests and the benchmarks, whatever the build directory was
# configured with before (the demo configures a new one without tests).
partq_build() {
  cmake -S "$ROOT" -B "$BUILD_DIR" $(partq_generator) -DCMAKE_BUILD_TYPE=Release \
    -DPARTQ_BUILD_TESTS=ON -DPARTQ_BUILD_BENCH=ON >/dev/null
  cmake --build "$BUILD_DIR" --parallel "$(nproc)"
}

# The `partq` binary alone, for the demo. A build directory configured here for the first time
# gets no tests or benchmarks (nothing of theirs is looked for or generated); one that
# ./scripts/test configured keeps them, and only the `partq` target is built either way.
partq_build_binary() {
  local options=()
  [[ -f $BUILD_DIR/CMakeCache.txt ]] || options=(-DPARTQ_BUILD_TESTS=OFF -DPARTQ_BUILD_BENCH=OFF)
  cmake -S "$ROOT" -B "$BUILD_DIR" $(partq_generator) -DCMAKE_BUILD_TYPE=Release "${options[@]}" \
    >/dev/null
  cmake --build "$BUILD_DIR" --parallel "$(nproc)" --target partq
}

# Ninja for a build directory configured here for the first time (it keeps both cores busy
# across targets, where Make finishes a library before starting the next); a directory
# configured before keeps its generator.
partq_generator() {
  [[ -f $BUILD_DIR/CMakeCache.txt ]] || ! command -v ninja >/dev/null || echo "-G Ninja"
}
