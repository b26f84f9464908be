// Validates rendered Kubernetes manifests (multi-document YAML) against the JSON schemas that
// kubernetes-models ships for Kubernetes itself, KEDA and the prometheus-operator
// (tools/k8s-validate runs it). A document whose apiVersion/kind none of them knows is
// "skipped" and reported: callers decide whether that is acceptable.
// Usage: node k8s-validate.mjs NPM_DIR FILE.yaml...  (NPM_DIR holds node_modules)
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const [npmDir, ...files] = process.argv.slice(2);
const load = createRequire(path.join(npmDir, 'package.json'));
const YAML = load('yaml');

// Each package exports one module per API group/version: "<package>/<group>/<version>",
// and the core group as "kubernetes-models/v1".
const packages = ['kubernetes-models', '@kubernetes-models/keda', '@kubernetes-models/prometheus-operator'];
const modules = new Map(); // apiVersion -> [module, ...]
function modelFor(apiVersion, kind) {
  if (!modules.has(apiVersion)) {
    const found = [];
    for (const p of packages) {
      try {
        found.push(load(`${p}/${apiVersion}`));
      } catch (e) {
        if (e.code !== 'ERR_PACKAGE_PATH_NOT_EXPORTED' && e.code !== 'MODULE_NOT_FOUND') throw e;
      }
    }
    modules.set(apiVersion, found);
  }
  const m = modules.get(apiVersion).find((mod) => typeof mod[kind] === 'function');
  return m?.[kind];
}

let passed = 0, failed = 0, skipped = 0;
for (const file of files) {
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'));
  docs.forEach((doc, i) => {
    const where = `${path.basename(file)}#${i + 1}`;
    if (doc.errors.length) {
      failed++;
      console.log(`FAIL ${where}: not YAML: ${doc.errors[0].message}`);
      return;
    }
    const obj = doc.toJS();
    if (obj == null) return; // an empty document ("---" alone)
    const id = `${obj.apiVersion} ${obj.kind} ${obj.metadata?.name}`;
    if (typeof obj.apiVersion !== 'string' || typeof obj.kind !== 'string' || !(obj.metadata?.name || obj.metadata?.generateName)) {
      failed++;
      console.log(`FAIL ${where}: every object needs apiVersion, kind and metadata.name (or generateName) (${id})`);
      return;
    }
    const Model = modelFor(obj.apiVersion, obj.kind);
    if (!Model) {
      skipped++;
      console.log(`SKIP ${where} ${id}: no schema for ${obj.apiVersion} ${obj.kind}`);
      return;
    }
    try {
      new Model(obj).validate();
      passed++;
      console.log(`ok   ${where} ${id}`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${where} ${id}: ${e.message}`);
    }
  });
}
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed ? 1 : 0);
