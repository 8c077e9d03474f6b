#!/usr/bin/env node
// Every installed package must run on Node 20 (CONTRACT 1: a fresh Node 20 machine): its
// `engines.node`, when it has one, must admit Node 20.20. Walks package-lock.json's `packages` and
// reads each installed package's own package.json; a package the lockfile lists but npm did not
// install (an optional binding for another platform, or a dev dependency under --omit=dev) does
// not count. Run by .ci/run and `npm test`.
//
//   node scripts/check-engines.mjs [--node 20.20.0]     exit 1 and a list when a package does not fit
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import semver from 'semver';

/** The Node version every dependency must admit. */
export const TARGET_NODE = '20.20.0';

/**
 * The installed packages whose `engines.node` does not admit `node`.
 * `packages` is package-lock.json's `packages` map; `manifest(path, entry)` gives the installed
 * package.json of a lockfile entry, or null when it is not installed.
 */
export function engineViolations(packages, { node = TARGET_NODE, manifest }) {
  const out = [];
  for (const [path, entry] of Object.entries(packages ?? {})) {
    if (path === '') continue; // the project itself
    const pkg = manifest(path, entry);
    if (!pkg) continue;
    const range = pkg.engines?.node;
    if (typeof range !== 'string') continue; // none, or the long-ignored array form
    const name = pkg.name ?? path.replace(/^.*node_modules\//, '');
    if (!semver.validRange(range)) out.push({ path, name, version: pkg.version, range, problem: 'not a valid range' });
    else if (!semver.satisfies(node, range, { includePrerelease: true }))
      out.push({ path, name, version: pkg.version, range, problem: `does not admit Node ${node}` });
  }
  return out;
}

/** The package.json of an installed package under root, or null when it is not installed. */
export function installedManifest(root) {
  return (path) => {
    try {
      return JSON.parse(readFileSync(join(root, path, 'package.json'), 'utf8'));
    } catch (err) {
      if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return null;
      throw err;
    }
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  const i = process.argv.indexOf('--node');
  const node = i > 0 ? process.argv[i + 1] : TARGET_NODE;
  if (!semver.valid(node)) {
    process.stderr.write(`check-engines: --node needs a version like 20.20.0, not ${node}\n`);
    process.exit(2);
  }
  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8'));
  const bad = engineViolations(lock.packages, { node, manifest: installedManifest(root) });
  for (const b of bad)
    process.stderr.write(`check-engines: ${b.name}@${b.version} (${b.path}) engines.node ${JSON.stringify(b.range)} ${b.problem}\n`);
  if (bad.length) {
    process.stderr.write(`check-engines: ${bad.length} installed package(s) do not run on Node ${node}; pick versions that do\n`);
    process.exit(1);
  }
}
