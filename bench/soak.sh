#!/usr/bin/env bash
# The soak (issue 27): `partq bench --only soak` against the server at $DSN
# for $SECS seconds at $RATE items/s, a session joining or leaving every
# $CHURN seconds, the server restarted once by $RESTART (a shell command) at
# $RESTART_AT, snapshots held as $HOLD says; then its samples plotted with
# gnuplot into $OUT/soak.png. Run by hand (half an hour and more); results go
# to BENCHMARKS.md.
#   DSN='host=... dbname=...' RESTART='pg_ctl -D DIR restart -m fast' bench/soak.sh
# Environment: DSN (required), PARTQ (default build/cli/partq), RATE (75000),
# SECS (1800), SESSIONS (4), CHURN (60), RESTART (none), RESTART_AT (SECS/2),
# HOLD (none; AT:FOR,... in seconds), SAMPLE (10), OUT (/tmp/partq-soak),
# VACUUM_INTERVAL (10: the consumers' table keeper; 0: autovacuum alone), PLOT_ONLY.
set -euo pipefail
: "${DSN:?set DSN to the server to measure (partq must reach it)}"
PARTQ=${PARTQ:-build/cli/partq}
RATE=${RATE:-75000} SECS=${SECS:-1800} SESSIONS=${SESSIONS:-4} CHURN=${CHURN:-60}
SAMPLE=${SAMPLE:-10} OUT=${OUT:-/tmp/partq-soak}
mkdir -p "$OUT"
args=(bench --dsn "$DSN" --only soak --soak-rate "$RATE" --soak-seconds "$SECS"
      --soak-sessions "$SESSIONS" --soak-churn "$CHURN" --soak-sample "$SAMPLE"
      --soak-out "$OUT/samples.tsv" --out "$OUT/report.json")
if [[ -n "${RESTART:-}" ]]; then
  # Its output to a file of its own: a server that `pg_ctl restart` starts without -l keeps
  # writing its log to the stdout it inherited, the pipe to tee below, which then never ends
  # (nor the script, nor its plot).
  args+=(--soak-restart-at "${RESTART_AT:-$((SECS / 2))}"
         --soak-restart "{ $RESTART; } >>'$OUT/restart.log' 2>&1")
fi
[[ -n "${HOLD:-}" ]] && args+=(--soak-hold "$HOLD")
[[ -n "${VACUUM_INTERVAL:-}" ]] && args+=(--vacuum-interval "$VACUUM_INTERVAL")
# PLOT_ONLY=1: plot $OUT/samples.tsv of an earlier run again.
[[ -n "${PLOT_ONLY:-}" ]] || "$PARTQ" "${args[@]}" 2>&1 | tee "$OUT/bench.txt"
command -v gnuplot >/dev/null || { echo "soak.sh: no gnuplot, no plot" >&2; exit 0; }
gnuplot <<GP
set terminal pngcairo size 1100,1300 font ',10' noenhanced
set output '$OUT/soak.png'
set datafile separator '\t'
set key autotitle columnhead left top
set multiplot layout 4,1 title "partq soak: $RATE items/s, $SESSIONS(+1) sessions, churn every ${CHURN}s"
set xlabel 'seconds'
set grid
set ylabel 'items/s'
set y2label 'sessions'
set y2range [0:*]
set y2tics
plot '$OUT/samples.tsv' using 1:3 with lines title 'enqueued/s', \
     '' using 1:4 with lines title 'acked/s', \
     '' using 1:2 axes x1y2 with steps title 'sessions'
unset y2label
unset y2tics
set ylabel 'enqueue commit -> ack commit, ms'
set logscale y
plot '$OUT/samples.tsv' using 1:(\$6 > 0 ? \$6 : NaN) with lines title 'p50', \
     '' using 1:(\$7 > 0 ? \$7 : NaN) with lines title 'p99'
unset logscale y
set ylabel 'MB'
set y2label 'part_claims kB'
set y2tics
plot '$OUT/samples.tsv' using 1:(\$8 >= 0 ? \$8 : NaN) with lines title 'items table', \
     '' using 1:(\$9 >= 0 ? \$9 : NaN) with lines title 'items indexes', \
     '' using 1:(\$13 >= 0 ? \$13 : NaN) axes x1y2 with lines title 'part_claims (total)'
set ylabel 'rows'
set y2label 'vacuums of items (autovacuum and keeper)'
plot '$OUT/samples.tsv' using 1:(\$10 >= 0 ? \$10 : NaN) with lines title 'items dead tuples', \
     '' using 1:(\$5) with lines title 'backlog', \
     '' using 1:(\$15 >= 0 ? \$15 : NaN) with lines title 'horizon age (xids)', \
     '' using 1:(\$12 >= 0 ? \$12 : NaN) axes x1y2 with steps title 'vacuums'
unset multiplot
GP
echo "plot: $OUT/soak.png"
