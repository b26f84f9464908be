#!/usr/bin/env bash
# Offline checks of the Helm chart helm/partq (no helm binary or cluster exists here; the
# repository's own checkers in tools/ stand in for them, see tools/README.md):
#   1. the chart's copies of dashboards/*.json and of the project's alert rule file are
#      identical to the originals (SYNC_FILES=1 copies them), and the rules parse (promtool);
#   2. values.schema.json closes every object (additionalProperties: false), the values of
#      every case pass it (check-values), and README.md's values table is up to date;
#   3. every case renders with `helm-template --strict`, passes `k8s-validate` (which must
#      still reject tests/helm/fixtures/invalid-manifests.yaml), and equals its golden
#      rendering under tests/helm/golden/ (UPDATE_GOLDEN=1 rewrites them);
#   4. bad values fail: a misspelled key (schema), HPA and KEDA together, replicas or
#      maxReplicas above the part count, no connection, a bridge without brokers, extraArgs
#      that set a flag the chart derives the grace period, probes or handler from, handler
#      kinds together or incomplete (an image without a tag, a CA for a plain-http URL...),
#      native sidecars on Kubernetes < 1.29.
# Usage: tests/helm/check_chart.sh          (UPDATE_GOLDEN=1 / SYNC_FILES=1 to regenerate)
set -euo pipefail
start=$SECONDS
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
CHART=$ROOT/helm/partq
TOOLS=$ROOT/tools
GOLDEN=$here/golden
UPDATE=${UPDATE_GOLDEN:-0}
SYNC=${SYNC_FILES:-0}

# The first run installs what the checkers need (Debian packages, npm ci, the renderer's
# build: minutes); later runs take well under a second. A checker that cannot be installed
# fails the test, never skips it: a missing checker must not pass for a passing chart.
if ! "$TOOLS/setup"; then
  echo "check_chart: FAIL: tools/setup could not install the checkers (see above)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
note() { echo "check_chart: $*"; }
shopt -s nullglob

# --- 1. packaged copies of the project's dashboards and alert rules -----------------------
src_dash=$ROOT/dashboards
chart_dash=$CHART/files/dashboards
for src in "$src_dash"/*.json; do
  copy=$chart_dash/$(basename "$src")
  if ! cmp -s "$src" "$copy"; then
    if [[ $SYNC == 1 ]]; then
      cp "$src" "$copy" && note "synced $copy"
    else
      fail "${copy#"$ROOT"/} is missing or differs from ${src#"$ROOT"/}: the chart packages copies of dashboards/*.json (helm cannot read files outside the chart). Run: SYNC_FILES=1 UPDATE_GOLDEN=1 tests/helm/check_chart.sh"
    fi
  fi
done
for copy in "$chart_dash"/*.json; do
  if [[ ! -f $src_dash/$(basename "$copy") ]]; then
    if [[ $SYNC == 1 ]]; then
      rm "$copy" && note "removed stale $copy"
    else
      fail "${copy#"$ROOT"/} has no original in dashboards/: remove it, or run SYNC_FILES=1 tests/helm/check_chart.sh"
    fi
  fi
done
chart_rules=$CHART/files/prometheus-rules.yaml
mapfile -t rule_files < <([[ -d $src_dash ]] && grep -rlE '^groups:' "$src_dash" --include='*.yml' --include='*.yaml' | sort)
if ((${#rule_files[@]} > 1)); then
  fail "several Prometheus rule files in dashboards/ (${rule_files[*]#"$ROOT"/}); the chart packages one (files/prometheus-rules.yaml): merge them, or teach tests/helm/check_chart.sh and templates/prometheusrule.yaml"
elif ((${#rule_files[@]} == 1)); then
  if ! cmp -s "${rule_files[0]}" "$chart_rules"; then
    if [[ $SYNC == 1 ]]; then
      cp "${rule_files[0]}" "$chart_rules" && note "synced $chart_rules"
    else
      fail "${chart_rules#"$ROOT"/} differs from ${rule_files[0]#"$ROOT"/}: the PrometheusRule must carry the project's alert rules. Run: SYNC_FILES=1 UPDATE_GOLDEN=1 tests/helm/check_chart.sh"
    fi
  fi
else
  note "dashboards/ has no Prometheus rule file yet: the chart's own ${chart_rules#"$ROOT"/} is used"
fi
promtool check rules "$chart_rules" >"$work/promtool.out" 2>&1 || { cat "$work/promtool.out" >&2; fail "promtool check rules ${chart_rules#"$ROOT"/}"; }

# --- 2. schema, values and the README's values table --------------------------------------
open=$(jq -c '[paths(objects) as $p | select(getpath($p) | type == "object" and has("properties") and .additionalProperties != false) | $p | map(tostring) | join(".")]' "$CHART/values.schema.json")
[[ $open == "[]" ]] || fail "values.schema.json: objects without additionalProperties: false: $open"
"$TOOLS/check-values" "$CHART" >/dev/null || fail "check-values: values.yaml does not match values.schema.json"
# Each case's values over values.yaml, in one run (Python starts once, not per file). A file
# passes only on its "FILE: ok" line, so a checker that crashes fails every case.
"$TOOLS/check-values" --each "$CHART" "$here"/values/*.yaml >"$work/cv.out" 2>&1 || true
for v in "$here"/values/*.yaml; do
  grep -qxF -- "$v: ok" "$work/cv.out" ||
    fail "check-values rejects ${v#"$ROOT"/}: $(grep -F -- "$v: " "$work/cv.out" || cat "$work/cv.out")"
done
python3 "$here/values_table.py" "$CHART" >"$work/table.md" || fail "values_table.py: values.yaml has undocumented keys"
readme=$CHART/README.md
python3 - "$readme" "$work/table.md" "$UPDATE" <<'PY' || fail "README.md's values table is out of date with values.yaml: run UPDATE_GOLDEN=1 tests/helm/check_chart.sh"
import sys
readme, table, update = sys.argv[1], open(sys.argv[2]).read(), sys.argv[3] == "1"
start, end = "<!-- values-table:start -->", "<!-- values-table:end -->"
text = open(readme).read()
a, b = text.index(start) + len(start), text.index(end)
want = text[:a] + "\n" + table + text[b:]
if want != text:
    if update:
        open(readme, "w").write(want)
        print(f"check_chart: rewrote the values table of {readme}")
    else:
        sys.exit(1)
PY

# The README's image recipe for an exec handler (your runtime + the partq binary) installs the
# runtime libraries of the partq image: the packages of the Dockerfile's last apt-get install.
python3 - "$ROOT/Dockerfile" "$readme" <<'PY' || fail "helm/partq/README.md's exec image recipe misses runtime packages of the Dockerfile's last stage (add them to its apt-get install)"
import re, sys
dockerfile, readme = open(sys.argv[1]).read(), open(sys.argv[2]).read()
last_stage = dockerfile[dockerfile.rindex("\nFROM "):]
words = last_stage[last_stage.index("apt-get install"):].replace("\\\n", " ").split()
runtime = []
for w in words[2:]:
    if w == "&&":
        break
    if not w.startswith("-"):
        runtime.append(w)
recipe = re.search(r"```dockerfile\n(.*?)```", readme, re.S)
missing = [p for p in runtime if not recipe or p not in recipe.group(1).split()]
if not runtime or missing:
    sys.exit(f"check_chart: Dockerfile runtime packages {runtime}, missing from the recipe: {missing}")
PY

# --- 3. renderings: golden files and schema validation ------------------------------------
# name | values file (relative to tests/helm/values, or -) | extra helm-template flags
cases=(
  "default|-|"
  "hpa|hpa.yaml|"
  "keda|keda.yaml|"
  "keda-age|keda-age.yaml|"
  "statefulset|statefulset.yaml|"
  "servicemonitor|servicemonitor.yaml|-a monitoring.coreos.com/v1"
  "prometheusrule|prometheusrule.yaml|-a monitoring.coreos.com/v1"
  "dashboards|dashboards.yaml|"
  "bridge|bridge.yaml|-a monitoring.coreos.com/v1"
  "custom-image|custom-image.yaml|"
  "handler-exec|handler-exec.yaml|"
  "handler-http|handler-http.yaml|"
  "handler-http-native|handler-http-native.yaml|"
  "handler-http-remote|handler-http-remote.yaml|"
  "ha|ha.yaml|"
  "pgbouncer|pgbouncer.yaml|"
  "console|console.yaml|"
  "console-loopback|console-loopback.yaml|"
  "prune|prune.yaml|"
  "networkpolicy|networkpolicy.yaml|"
  "worker-role|worker-role.yaml|"
  "several-queues|several-queues.yaml|"
)
dash_chart=$CHART
packaged=("$chart_dash"/*.json)
if ((${#packaged[@]} == 0)); then
  # No dashboard is packaged yet: the real chart must refuse the switch, and the template is
  # exercised on a copy of the chart holding a fixture dashboard.
  if "$TOOLS/helm-template" --strict -f "$here/values/dashboards.yaml" "$CHART" >/dev/null 2>"$work/err"; then
    fail "grafanaDashboard.enabled without any packaged dashboard should fail to render"
  elif ! grep -q "packages no dashboard" "$work/err"; then
    fail "grafanaDashboard.enabled without dashboards failed with an unexpected error: $(cat "$work/err")"
  fi
  dash_chart=$work/chart-with-fixture/partq
  mkdir -p "$(dirname "$dash_chart")" && cp -r "$CHART" "$dash_chart"
  cp "$here/fixtures/dashboard.json" "$dash_chart/files/dashboards/partq-fixture.json"
fi
mkdir -p "$work/out"
rendered=()
for c in "${cases[@]}"; do
  IFS='|' read -r name vfile flags <<<"$c"
  args=(--strict --notes --name partq --namespace queues)
  [[ $vfile != - ]] && args+=(-f "$here/values/$vfile")
  # shellcheck disable=SC2206
  [[ -n $flags ]] && args+=($flags)
  chart=$CHART
  [[ $name == dashboards ]] && chart=$dash_chart
  out=$work/out/$name.yaml
  if ! "$TOOLS/helm-template" "${args[@]}" "$chart" >"$out" 2>"$work/out/$name.stderr"; then
    cat "$work/out/$name.stderr" >&2
    fail "case $name does not render"
    continue
  fi
  # NOTES.txt goes to stderr after a "NOTES:" line.
  sed -n '/^NOTES:$/,$p' "$work/out/$name.stderr" | tail -n +2 >"$work/out/$name.notes.txt"
  rendered+=("$out")
  for kind in yaml notes.txt; do
    got=$work/out/$name.$kind want=$GOLDEN/$name.$kind
    if [[ $UPDATE == 1 ]]; then
      cmp -s "$got" "$want" || { cp "$got" "$want"; note "updated ${want#"$ROOT"/}"; }
    elif ! diff -u "$want" "$got" >"$work/diff" 2>&1; then
      head -80 "$work/diff" >&2
      fail "case $name: the rendering differs from ${want#"$ROOT"/} (review the diff; if intended, UPDATE_GOLDEN=1 tests/helm/check_chart.sh)"
    fi
  done
done
for want in "$GOLDEN"/*; do
  base=$(basename "$want"); base=${base%.notes.txt}; base=${base%.yaml}
  if [[ ! -f $work/out/$base.yaml ]]; then
    if [[ $UPDATE == 1 ]]; then rm "$want" && note "removed stale ${want#"$ROOT"/}"
    else fail "stale golden file ${want#"$ROOT"/} (no such case): UPDATE_GOLDEN=1 removes it"; fi
  fi
done
if ((${#rendered[@]})); then
  if "$TOOLS/k8s-validate" "${rendered[@]}" >"$work/validate.out" 2>&1; then
    note "k8s-validate: $(tail -1 "$work/validate.out") (${#rendered[@]} renderings)"
    grep -q ", 0 skipped$" "$work/validate.out" || { grep '^SKIP' "$work/validate.out" >&2; fail "k8s-validate skipped objects it has no schema for"; }
  else
    grep -v '^ok ' "$work/validate.out" >&2
    fail "k8s-validate rejects a rendering"
  fi
fi
# ... and it still rejects what is wrong and counts what it cannot check (a checker that
# passed everything would otherwise go unnoticed).
"$TOOLS/k8s-validate" "$here/fixtures/invalid-manifests.yaml" >"$work/canary.out" 2>&1 || true
grep -qx "0 passed, 1 failed, 1 skipped" "$work/canary.out" ||
  fail "k8s-validate on tests/helm/fixtures/invalid-manifests.yaml: expected 1 failed, 1 skipped: $(cat "$work/canary.out")"

# What each switch must (not) produce, beyond the golden files' exact text.
has() { grep -qE -e "$2" "$work/out/$1.yaml" 2>/dev/null; }
expect() { has "$1" "$2" || fail "case $1: no match for /$2/"; }
expect_not() { ! has "$1" "$2" || fail "case $1: unexpected match for /$2/"; }
expect default '^kind: Deployment$'
expect default 'helm.sh/hook: pre-install,pre-upgrade'
expect default 'terminationGracePeriodSeconds: 17$'
expect default 'path: /readyz'
expect default 'readOnlyRootFilesystem: true'
expect_not default '^kind: (HorizontalPodAutoscaler|ScaledObject|ServiceMonitor|PrometheusRule|StatefulSet)$'
expect hpa '^kind: HorizontalPodAutoscaler$'
expect hpa '^  maxReplicas: 16$'
expect_not hpa '^  replicas:'
expect keda '^kind: ScaledObject$'
expect keda '^  maxReplicaCount: 8$'
expect keda 'LIMIT 4001\)'
expect keda-age 'kind: StatefulSet$'
expect keda-age 'parameter: password'
expect statefulset '^kind: StatefulSet$'
# A highly available PostgreSQL by fields: libpq's host and port lists, read-write only.
expect ha 'value: "pg-0.pg.db.svc.cluster.local,pg-1.pg.db.svc.cluster.local"'
expect ha 'value: "5432,5432"'
expect ha 'name: PGTARGETSESSIONATTRS'
expect ha 'value: "read-write"'
expect_not default 'PGTARGETSESSIONATTRS'
expect pgbouncer 'name: PARTQ_POOL_MODE'
expect pgbouncer 'value: "transaction"'
expect_not default 'PARTQ_POOL_MODE'
expect statefulset 'instance-id=\$\(POD_NAME\)'
expect statefulset '^            - "--vacuum-interval=0s"$'
expect default '^            - "--vacuum-interval=10s"$'
expect statefulset "create 'emails.outbound' --parts=4 --assignment=sticky --max-attempts=5 --session-ttl=30s --ordered"
expect servicemonitor '^kind: ServiceMonitor$'
expect prometheusrule '^kind: PrometheusRule$'
expect prometheusrule 'alert: PartqWorkersDown'
expect dashboards '^kind: ConfigMap$'
expect bridge 'partq-bridge-ingest$'
expect bridge '"--topic=orders"'
expect bridge '^kind: PodMonitor$'
expect bridge '^          - bridge-publish$'
expect bridge '"--metrics-addr=0.0.0.0:9090"'
# Kafka secrets from Secrets: the properties file mounted, the SASL password in the environment.
expect bridge '^            - "--kafka-config-file=/etc/partq/kafka/kafka.properties"$'
expect bridge '^            secretName: kafka-client$'
expect bridge '^            - name: PARTQ_KAFKA_SASL_PASSWORD$'
expect_not bridge 'sasl.password='
expect_not default 'kafka-config'

# Grace: ingest's bounded stop (10 s) and publish's drain (45 s here) + 3 s, + the 5 s margin.
expect bridge '^      terminationGracePeriodSeconds: 15$'
expect bridge '^      terminationGracePeriodSeconds: 53$'
expect bridge '^            - "--drain-timeout=45s"$'
expect_not default '^kind: PodMonitor$'
expect_not servicemonitor '^kind: PodMonitor$'
expect custom-image 'image: "registry.example.com/acme/order-worker:2024.06.1"'
expect custom-image 'image: "registry.example.com/partq@sha256:0+"'
expect default '^            - "--handler=noop"$'
expect prune '^kind: CronJob$'
expect prune "^                  partq prune 'emails' --older-than=14d --dead$"
expect_not default '^kind: CronJob$'
# Your own code (docs/guide/handlers.md). exec: the command, with `$` escaped from
# Kubernetes' $(VAR) expansion, in the user's image; the migration keeps the partq image.
expect handler-exec '^            - "--handler=exec:exec python3 /app/handler.py --log-prefix \\"\$\$POD_NAME\\""$'
expect handler-exec '^          image: "registry.example.com/acme/squares-worker:1.4.0"$'
expect handler-exec '^          image: "partq:0.1.0"$'
expect handler-exec '^      terminationGracePeriodSeconds: 37$'
expect_not handler-exec 'name: handler$'
# http with a sidecar: a second container, first, on its port; the worker's URL follows the
# port; the sidecar stops only after the worker's preStop pause and drain (2 + 10 s).
expect handler-http '^        - name: handler$'
expect handler-http '^            - "--handler=http:http://127.0.0.1:8081/"$'
expect handler-http '^              containerPort: 8081$'
expect handler-http '^              path: /healthz$'
expect handler-http '^                command: \["sleep", "12"\]$'
expect handler-http '^      terminationGracePeriodSeconds: 17$'
expect handler-http 'kubectl.kubernetes.io/default-container: worker$'
expect_not handler-http '^      initContainers:$'
grep -A1 -E '^      containers:$' "$work/out/handler-http.yaml" | grep -qxF '        # Listed first, so that it starts before the worker. On pod termination its preStop' ||
  fail "case handler-http: the sidecar is not the first container"
# Native: an init container that Kubernetes stops after the worker, so no preStop sleep.
expect handler-http-native '^      initContainers:$'
expect handler-http-native '^          restartPolicy: Always$'
expect handler-http-native '^            - "--handler=http:http://127.0.0.1:8080/batches"$'
expect handler-http-native '^      terminationGracePeriodSeconds: 27$'
expect_not handler-http-native '"sleep", "2[0-9]"'
expect_not handler-http-native 'default-container'
expect handler-http-remote '^            - "--handler=http:https://squares.handlers.svc.cluster.local:8443/partq"$'
expect handler-http-remote '^            - "--handler-ca=/etc/partq/handler-ca/ca.pem"$'
expect handler-http-remote '^              mountPath: /etc/partq/handler-ca$'
expect_not handler-http-remote 'name: handler$'
# The console from the worker pods: with a token on every address, the token file from the
# Secret, actions on; without one on the loopback only (kubectl port-forward), read-only.
expect console '^            - "--console-listen=0.0.0.0:8088"$'
expect console '^            - "--console-token-file=/etc/partq/console/console-token"$'
expect console '^              containerPort: 8088$'
expect console '^            secretName: partq-console$'
expect console '^              mountPath: /etc/partq/console$'
expect_not console '--console-read-only'
expect console-loopback '^            - "--console-listen=127.0.0.1:8080"$'
expect console-loopback '^            - --console-read-only$'
expect_not console-loopback 'console-token'
expect_not console-loopback 'name: console$'
expect_not default '--console'
# A NetworkPolicy on request only: ingress to the metrics port from Prometheus's namespace,
# to the console's from the ingress controller's; every pod of the release (bridges too).
expect networkpolicy '^kind: NetworkPolicy$'
expect networkpolicy '^        - port: metrics$'
expect networkpolicy '^        - port: console$'
expect networkpolicy 'kubernetes.io/metadata.name: monitoring$'
expect_not default '^kind: NetworkPolicy$'
expect_not console '^kind: NetworkPolicy$'
for f in "${rendered[@]}"; do
  # Credentials only ever come from Secrets.
  if grep -A1 -E 'name: (PGPASSWORD|PARTQ_DSN)$' "$f" | grep -qE '^\s+value:'; then
    fail "$(basename "$f"): a credential is set as a literal value"
  fi
done
# The monitoring objects need the prometheus-operator API: without it they are not rendered.
"$TOOLS/helm-template" --strict --notes -f "$here/values/prometheusrule.yaml" -f "$here/values/servicemonitor.yaml" -f "$here/values/bridge.yaml" "$CHART" >"$work/noapi.yaml" 2>"$work/noapi.notes"
! grep -qE '^kind: (ServiceMonitor|PodMonitor|PrometheusRule)$' "$work/noapi.yaml" ||
  fail "ServiceMonitor/PodMonitor/PrometheusRule rendered although monitoring.coreos.com/v1 is absent"
grep -q 'of the worker and bridge pods another way' "$work/noapi.notes" ||
  fail "without monitoring.coreos.com/v1 the notes do not say to scrape the bridge pods another way"

# --- 4. bad values fail, with the message that explains them ------------------------------
# Native sidecars need Kubernetes 1.29 (where they are on by default and stopped after the
# worker); the bad/ files render for the default version, so this one is checked here.
if "$TOOLS/helm-template" --strict --kube-version v1.28.9 -f "$here/values/handler-http-native.yaml" "$CHART" >/dev/null 2>"$work/native.err"; then
  fail "handler.http.sidecar.native rendered for Kubernetes 1.28"
elif ! grep -qF "handler.http.sidecar.native needs Kubernetes 1.29 or later" "$work/native.err"; then
  fail "handler.http.sidecar.native on Kubernetes 1.28 failed with an unexpected error: $(cat "$work/native.err")"
fi
"$TOOLS/helm-template" --strict --kube-version v1.28.9 -f "$here/values/handler-http.yaml" "$CHART" >/dev/null 2>"$work/sidecar.err" ||
  fail "the (non-native) sidecar does not render for Kubernetes 1.28: $(cat "$work/sidecar.err")"
# The schema verdicts of all bad files in one run, as for the cases above ("FILE: ..." lines).
"$TOOLS/check-values" --each "$CHART" "$here"/bad/*.yaml >"$work/bad-values.out" 2>&1 || true
for bad in "$here"/bad/*.yaml; do
  rel=${bad#"$ROOT"/}
  header=$(head -1 "$bad")
  case $header in
    "# expect-values-error: "*)
      want=${header#"# expect-values-error: "}
      grep -F -- "$bad: " "$work/bad-values.out" >"$work/bad.out" || cp "$work/bad-values.out" "$work/bad.out"
      if grep -qxF -- "$bad: ok" "$work/bad.out"; then
        fail "$rel: check-values accepted it"
      elif ! grep -qF -- "$want" "$work/bad.out"; then
        fail "$rel: check-values failed without \"$want\": $(tail -2 "$work/bad.out")"
      fi ;;
    "# expect-render-error: "*)
      want=${header#"# expect-render-error: "}
      grep -qxF -- "$bad: ok" "$work/bad-values.out" || fail "$rel: should pass the schema and fail only at render time"
      if "$TOOLS/helm-template" --strict -f "$bad" "$CHART" >/dev/null 2>"$work/bad.out"; then
        fail "$rel: rendered although it must fail"
      elif ! grep -qF -- "$want" "$work/bad.out"; then
        fail "$rel: failed without \"$want\": $(cat "$work/bad.out")"
      fi ;;
    *) fail "$rel: its first line must be '# expect-values-error: ...' or '# expect-render-error: ...'" ;;
  esac
done

elapsed=$((SECONDS - start))
if ((failures)); then
  echo "check_chart: $failures check(s) failed (${elapsed}s)" >&2
  exit 1
fi
bads=("$here"/bad/*.yaml)
note "all chart checks passed: ${#rendered[@]} renderings, ${#bads[@]} bad values files rejected (${elapsed}s)"
