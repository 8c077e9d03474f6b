#!/usr/bin/env node
// `npm run build` (and `prepare`, which `npm ci` runs): compile src/, machines/ and store/ to
// dist/ with tsc (tsconfig.build.json, incremental), then stamp dist/.built with the build's start
// time, which bin/svc.mjs compares with the sources' mtimes (scripts/dist-state.mjs).
//
//   node scripts/build.mjs               build; exit 1 on a type error (the output is still written)
//   node scripts/build.mjs --if-stale    do nothing when dist/ is fresh (a few ms)
//
// The test run builds through ensureDist() (vitest globalSetup), so every test that spawns
// bin/svc.mjs runs the current sources.
import { spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, utimesSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { distState, STAMP } from './dist-state.mjs';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Run tsc -p tsconfig.build.json. Returns tsc's exit status: 0 built, 2 built with type errors
 * (diagnostics printed; the JavaScript is written anyway), anything else failed. The stamp is
 * written whenever output was written.
 */
export function build({ root = ROOT, stdio = 'inherit' } = {}) {
  const started = new Date();
  const tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { cwd: root, stdio, encoding: 'utf8' });
  const status = r.status ?? 1;
  if (status === 0 || status === 2) {
    const stamp = join(root, STAMP);
    mkdirSync(dirname(stamp), { recursive: true });
    closeSync(openSync(stamp, 'w'));
    utimesSync(stamp, started, started);
  }
  return { status, output: `${r.stdout ?? ''}${r.stderr ?? ''}`, error: r.error };
}

/**
 * Build dist/ unless it is fresh. Type errors do not stop the tests (typecheck reports them);
 * a build that wrote nothing throws.
 */
export function ensureDist({ root = ROOT } = {}) {
  const before = distState(root);
  if (before.state === 'fresh' || !before.sources) return before;
  const r = build({ root, stdio: 'pipe' });
  if (r.status === 2) process.stderr.write(`build: dist/ written, with type errors (npm run typecheck):\n${r.output}`);
  else if (r.status !== 0) throw new Error(`build of dist/ failed (exit ${r.status}): ${r.error?.message ?? r.output}`);
  return before;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (process.argv.includes('--if-stale')) {
    try {
      ensureDist();
    } catch (err) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
  } else {
    const r = build();
    process.exit(r.status === 0 ? 0 : 1);
  }
}

/** vitest globalSetup (vitest.config.ts): build dist/ before the tests when the sources changed. */
export function setup() {
  ensureDist();
}
