#!/usr/bin/env bash
# partq as a user gets it: installs the current build into a temporary prefix
# (`cmake --install`: no rebuild), builds project/main.cc against that tree
# twice, through find_package(partq) and through `pkg-config --cflags --libs
# partq`, and runs both binaries against the test database, each in a fresh
# schema of its own. Nothing is fetched: the dependencies are the system's.
# Usage: tests/install/check_install.sh CMAKE BUILD_DIR CXX   (PARTQ_TEST_DSN: the database)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cmake=${1:?usage: check_install.sh CMAKE BUILD_DIR CXX}
build=${2:?usage: check_install.sh CMAKE BUILD_DIR CXX}
cxx=${3:?usage: check_install.sh CMAKE BUILD_DIR CXX}
dsn=${PARTQ_TEST_DSN:?check_install: PARTQ_TEST_DSN must name the test database}

work=$(mktemp -d "${TMPDIR:-/tmp}/partq-install.XXXXXX")
schema=install_$$_$RANDOM
trap 'for s in ${schema}_cmake ${schema}_pc; do
        psql -X -q "$dsn" -c "DROP SCHEMA IF EXISTS $s CASCADE" >/dev/null 2>&1
      done
      rm -rf "$work"' EXIT
prefix=$work/prefix

"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log" >&2; echo "check_install: FAIL: cmake --install" >&2; exit 1; }
# Private headers stay private, and every partq header that an installed one
# includes is installed (main.cc below compiles only the umbrella headers).
if find "$prefix/include" -name pg_connection.h -o -name pg_store_internal.h | grep .; then
  echo "check_install: FAIL: private headers were installed" >&2; exit 1
fi
missing=0
while IFS= read -r header; do
  for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$prefix/include/partq/$header"); do
    if [[ -d $prefix/include/partq/${inc%%/*} && ! -f $prefix/include/partq/$inc ]]; then
      echo "check_install: FAIL: $header includes $inc, which is not installed" >&2; missing=1
    fi
  done
done < <(cd "$prefix/include/partq" && find . -name '*.h' | sed 's|^\./||')
((missing == 0)) || exit 1

# find_package(partq CONFIG REQUIRED) and partq::partq.
"$cmake" -S "$here/project" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_COMPILER="$cxx" >"$work/configure.log" ||
  { cat "$work/configure.log" >&2; echo "check_install: FAIL: find_package(partq)" >&2; exit 1; }
"$cmake" --build "$work/build" >"$work/build.log" 2>&1 ||
  { cat "$work/build.log" >&2; echo "check_install: FAIL: building with partq::partq" >&2; exit 1; }

# pkg-config, as a Makefile would use it.
libdir=$(dirname "$(find "$prefix" -name partq.pc)")
if ! flags=$(PKG_CONFIG_PATH=$libdir pkg-config --cflags --libs partq); then
  echo "check_install: FAIL: pkg-config partq" >&2; exit 1
fi
# shellcheck disable=SC2086  # the flags are words
"$cxx" -std=c++17 "$here/project/main.cc" -o "$work/install_project_pc" $flags ||
  { echo "check_install: FAIL: building with pkg-config --cflags --libs partq" >&2; exit 1; }

"$work/build/install_project" "$dsn" "${schema}_cmake"
"$work/install_project_pc" "$dsn" "${schema}_pc"
echo "check_install: OK: find_package and pkg-config builds both ran"
