# Shared by scripts/test and scripts/demo: install what is missing, then build.
# shellcheck shell=bash
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${PARTQ_BUILD_DIR:-$ROOT/build}"

# Debian 12 packages the build, the tests and the demo need.
PARTQ_PACKAGES=(
  build-essential cmake pkg-config
  libpqxx-dev libpq-dev librdkafka-dev libabsl-dev prometheus-cpp-dev
  nlohmann-json3-dev libcivetweb-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  postgresql-15 postgresql-contrib
  prometheus  # promtool: the metrics page, alert rules and their unit tests are checked in ctest
  kcat        # the Kafka tests put a real client on the wire
  gnuplot-nox # partq bench --plot
  python3     # the exec handler tests run Python children (tests/handlers, examples/python)
)

partq_install_deps() {
  local missing=()
  for p in "${PARTQ_PACKAGES[@]}" "$@"; do
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

partq_build() {
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" --parallel "$(nproc)"
}
