// Checks Grafana dashboard JSON files offline (tools/check-dashboards runs it):
//  1. types: each file is type-checked, with TypeScript, against Grafana's Dashboard type
//     (dashboard-json.ts), so a misspelled field or a wrong type fails, reported at its line;
//  2. conventions: a stable uid, a numeric schemaVersion, a datasource variable that every
//     datasource reference goes through (no hard-coded datasource uid), unique panel ids;
//  3. PromQL: every expr parses (promtool check rules), Grafana's variables substituted.
// Usage: node check-dashboards.mjs NPM_DIR FILE.json...  (NPM_DIR holds node_modules)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const [npmDir, ...files] = process.argv.slice(2);
const ts = createRequire(path.join(npmDir, 'package.json'))('typescript');
const here = path.dirname(fileURLToPath(import.meta.url));
const problems = new Map(files.map((f) => [f, []]));
const report = (file, msg) => problems.get(file).push(msg);

// --- 1. types -------------------------------------------------------------------------------
// Each dashboard becomes a virtual module beside node_modules: `const d: DashboardJson = {...}`
// with the JSON starting on line 1, so TypeScript's line numbers are the file's.
function typeCheck() {
  const virtual = new Map();
  const prelude = path.join(npmDir, 'dashboard-json.ts');
  virtual.set(prelude, fs.readFileSync(path.join(here, 'dashboard-json.ts'), 'utf8'));
  const owner = new Map();
  files.forEach((file, i) => {
    const name = path.join(npmDir, `dashboard-${i}.ts`);
    const head = "import type { DashboardJson } from './dashboard-json'; export const dashboard: DashboardJson = ";
    virtual.set(name, head + fs.readFileSync(file, 'utf8') + ';\n');
    owner.set(name, { file, column0: head.length });
  });
  const options = {
    strict: true, noEmit: true, skipLibCheck: true, types: [],
    target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
  };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.fileExists = (f) => virtual.has(f) || fileExists.call(host, f);
  host.readFile = (f) => virtual.get(f) ?? readFile.call(host, f);
  host.getSourceFile = (f, lang, ...rest) =>
    virtual.has(f) ? ts.createSourceFile(f, virtual.get(f), lang, true) : getSourceFile.call(host, f, lang, ...rest);
  const program = ts.createProgram([...owner.keys()], options, host);
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const text = ts.flattenDiagnosticMessageText(d.messageText, '\n  ');
    const o = d.file && owner.get(d.file.fileName);
    if (!o) { // the prelude or the SDK itself: every file is suspect
      files.forEach((f) => report(f, `types: ${d.file?.fileName ?? ''} ${text}`));
      continue;
    }
    const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
    const at = line > 0 ? `line ${line + 1}:${character + 1}` : character >= o.column0 ? `line 1:${character - o.column0 + 1}` : 'the dashboard';
    report(o.file, `types: ${at}: ${text}`);
  }
}

// --- 2. conventions -------------------------------------------------------------------------
const special = new Set(['-- Grafana --', '-- Mixed --', '-- Dashboard --', 'grafana']);
const isVariable = (s) => /^\$\{?[A-Za-z_]\w*\}?$/.test(s);

const title = (p) => (typeof p.title === 'string' ? `"${p.title}"` : '(untitled)');

function* allPanels(panels = []) {
  for (const p of panels) {
    yield p;
    yield* allPanels(p.panels); // a collapsed row holds its panels
  }
}

function* objects(v) {
  if (Array.isArray(v)) for (const x of v) yield* objects(x);
  else if (v && typeof v === 'object') {
    yield v;
    for (const x of Object.values(v)) yield* objects(x);
  }
}

function conventions(file, d) {
  if (typeof d.uid !== 'string' || !/^[A-Za-z0-9_-]{1,40}$/.test(d.uid)) {
    report(file, `conventions: uid ${JSON.stringify(d.uid)} must be set (1-40 of A-Z a-z 0-9 _ -): links and provisioning rely on it`);
  }
  if (typeof d.schemaVersion !== 'number') report(file, 'conventions: schemaVersion must be a number');
  const vars = d.templating?.list ?? [];
  const dsVars = vars.filter((v) => v.type === 'datasource').map((v) => v.name);
  if (!dsVars.length) report(file, 'conventions: no datasource variable (templating.list[].type "datasource")');
  for (const o of objects(d)) {
    if (!('datasource' in o)) continue;
    const ds = o.datasource;
    const uid = typeof ds === 'string' ? ds : ds?.uid;
    if (uid == null || special.has(uid)) continue;
    const name = isVariable(uid) ? uid.replace(/[${}]/g, '') : null;
    if (!name || !dsVars.includes(name)) {
      report(file, `conventions: datasource ${JSON.stringify(uid)}${o.title ? ` (panel ${title(o)})` : ''} is hard-coded: use the datasource variable (\${${dsVars[0] ?? 'datasource'}})`);
    }
  }
  const seen = new Map();
  for (const p of allPanels(d.panels)) {
    if (p.id === undefined) continue;
    if (seen.has(p.id)) report(file, `conventions: panel id ${p.id} used by ${seen.get(p.id)} and ${title(p)}`);
    seen.set(p.id, title(p));
  }
}

// --- 3. PromQL ------------------------------------------------------------------------------
// Grafana substitutes its variables before Prometheus sees a query; substitute what parses
// in their place: durations for the interval variables, a name for the others.
const builtins = { __rate_interval: '5m', __interval: '1m', __range: '1h', __interval_ms: '60000', __range_ms: '3600000', __range_s: '3600' };
function substitute(expr) {
  return expr
    .replace(/\[\[(\w+)(?::\w+)?\]\]|\$\{(\w+)(?::[^}]*)?\}|\$(\w+)/g, (_, a, b, c) => {
      const name = a ?? b ?? c;
      return builtins[name] ?? `var_${name.replace(/^_+/, '')}`;
    })
    .replace(/\[var_\w+(:var_\w+)?\]/g, '[5m]'); // a custom variable used as a range
}

function promql(file, d, work, index) {
  const rules = [];
  const where = [];
  for (const p of allPanels(d.panels)) {
    for (const t of p.targets ?? []) {
      if (typeof t.expr !== 'string' || !t.expr.trim()) continue;
      where.push(`panel ${p.id} ${title(p)} ${t.refId ?? ''}`.trim());
      rules.push({ record: `dashboard:expr_${rules.length}`, expr: substitute(t.expr) });
    }
  }
  for (const a of d.annotations?.list ?? []) {
    if (typeof a.expr !== 'string' || !a.expr.trim()) continue;
    where.push(`annotation "${a.name}"`);
    rules.push({ record: `dashboard:expr_${rules.length}`, expr: substitute(a.expr) });
  }
  if (!rules.length) return 0;
  // JSON is YAML: no YAML library needed to write the rule file.
  const ruleFile = path.join(work, `dashboard-${index}.rules.json`);
  fs.writeFileSync(ruleFile, JSON.stringify({ groups: [{ name: 'dashboard', rules }] }));
  const r = spawnSync('promtool', ['check', 'rules', ruleFile], { encoding: 'utf8' });
  if (r.error) throw new Error(`promtool: ${r.error.message} (Debian package prometheus)`);
  if (r.status !== 0) {
    // promtool names a failing rule by its 1-based position in the group ("rule 3").
    const out = (r.stderr + r.stdout)
      .replaceAll(ruleFile, path.basename(file))
      .replace(/rule (\d+)/g, (m, n) => `${m} (${where[n - 1] ?? '?'})`);
    const lines = out.trim().split('\n').filter((l) => l.trim() && !/^(Checking |FAILED:$)/.test(l));
    report(file, `promql: ${lines.join('\n  ')}`);
  }
  return rules.length;
}

typeCheck();
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'check-dashboards-'));
let failed = 0;
try {
  files.forEach((file, i) => {
    let d;
    try {
      d = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (e) {
      report(file, `not JSON: ${e.message}`);
    }
    const exprs = d ? (conventions(file, d), promql(file, d, work, i)) : 0;
    const msgs = problems.get(file);
    if (msgs.length) {
      failed++;
      console.log(`FAIL ${file}\n  ${msgs.join('\n  ')}`);
    } else {
      console.log(`ok   ${file} (${exprs} PromQL expressions)`);
    }
  });
} finally {
  fs.rmSync(work, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
