# A PostgreSQL 15 of a bench script's own, for the scripts that measure on one when given no
# --dsn (ceiling.sh, ceiling_log.sh, many_queues.sh; rls_cost.sh always): default settings,
# fsync on, as `partq bench`'s embedded server; and scripts/test's server for the suite
# (max_connections=400 fsync=off). Sourced, not run.
#   throwaway_pg_start DIR [SETTING=VALUE...]  initdb and start a server in DIR/data (as
#       postgres when run as root) on a random port, listening on 127.0.0.1 and a socket in
#       DIR, with the settings given; sets `dsn` to it.
#   throwaway_pg_stop DIR                      stops it, if it runs (from the EXIT trap).
throwaway_pg_bin=/usr/lib/postgresql/15/bin
throwaway_pg_as=()

throwaway_pg_start() {
  local dir="$1" setting
  shift
  if [[ $(id -u) -eq 0 ]]; then
    chown postgres "$dir"
    throwaway_pg_as=(runuser -u postgres --)
  fi
  # --no-sync: the server's files are thrown away with it (fsync stays as the settings say).
  "${throwaway_pg_as[@]}" "$throwaway_pg_bin/initdb" -D "$dir/data" -U postgres --auth=trust \
    --no-sync -E UTF8 --locale=C >"$dir/initdb.log" 2>&1
  # A random port below the kernel's ephemeral range (32768 and up), where no client connection
  # and no embedded server (which takes a port the kernel picks) can hold it; another server may,
  # so a start that fails tries another port (the ctest suite runs several at once: one try
  # failed there once, 2026-12-06).
  local port attempt options
  for attempt in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 12768))
    options="-p $port -k $dir -c listen_addresses=127.0.0.1"
    for setting in "$@"; do options+=" -c $setting"; done
    if "${throwaway_pg_as[@]}" "$throwaway_pg_bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" \
      -w -t 60 -o "$options" start >/dev/null; then
      dsn="host=127.0.0.1 port=$port user=postgres dbname=postgres"
      return 0
    fi
  done
  echo "throwaway_pg: the server did not start in $attempt tries; its log:" >&2
  tail -20 "$dir/server.log" >&2
  return 1
}

throwaway_pg_stop() {
  if [[ -f "$1/data/postmaster.pid" ]]; then
    "${throwaway_pg_as[@]}" "$throwaway_pg_bin/pg_ctl" -D "$1/data" -m immediate stop \
      >/dev/null 2>&1 || true
  fi
}
