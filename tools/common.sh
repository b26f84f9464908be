# Sourced by the entry points of tools/: where the installed parts live.
# shellcheck shell=bash
TOOLS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOLS_CACHE=${PARTQ_TOOLS_CACHE:-${XDG_CACHE_HOME:-${HOME:?}/.cache}/partq-tools}

# Each installed part sits in a directory named by a hash of what it is made from, so an edit
# is picked up at once (no timestamps to trust after a clone) and checkouts of different
# versions can share one cache without overwriting each other's parts.
tools_key() { cat "$@" | sha256sum | cut -c1-16; }
# shellcheck disable=SC2034 # used by the scripts that source this file
HELM_TEMPLATE_BIN=$TOOLS_CACHE/helm-template-$(tools_key "$TOOLS_DIR"/src/helm-template/*.go)/helm-template
# tools_npm_dir DIR: where `setup` installs the npm packages pinned by DIR's package.json and
# package-lock.json (node_modules inside it).
tools_npm_dir() { echo "$TOOLS_CACHE/npm-$(tools_key "$1"/package.json "$1"/package-lock.json)"; }
# shellcheck disable=SC2034
NPM_DIR=$(tools_npm_dir "$TOOLS_DIR")

# tools_ensure PATH...: runs tools/setup when one of the paths is missing; exits on failure.
tools_ensure() {
  local p
  for p in "$@"; do
    [[ -e $p ]] && continue
    "$TOOLS_DIR/setup" >&2 || { echo "$(basename "$0"): FAIL: tools/setup could not install what it needs" >&2; exit 1; }
    return
  done
}
