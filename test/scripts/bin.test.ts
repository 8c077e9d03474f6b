// bin/svc.mjs runs the compiled dist/ when it is built from the current sources, the sources
// through tsx when dist/ is missing or stale (saying so), and says how to build when it can do
// neither. `svc --version` prints package.json's version.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { distState, STAMP } from '../../scripts/dist-state.mjs';
import { ROOT } from '../helpers/paths.ts';

const VERSION = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version as string;
const tmpRoots: string[] = [];
afterAll(() => {
  for (const d of tmpRoots) fs.rmSync(d, { recursive: true, force: true });
});

const run = (root: string, args: string[]) =>
  spawnSync(process.execPath, [path.join(root, 'bin/svc.mjs'), ...args], { cwd: root, encoding: 'utf8', timeout: 20_000 });

/** Set a file's mtime to `secondsAgo` before now. */
function age(file: string, secondsAgo: number): void {
  const t = new Date(Date.now() - secondsAgo * 1000);
  fs.utimesSync(file, t, t);
}

function write(file: string, text: string): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
  return file;
}

/**
 * A project root with the real bin/ and scripts/dist-state.mjs, a stand-in main in src/ and (when
 * asked) in dist/, each printing where it runs from; node_modules linked from the real one when
 * withNodeModules (so tsx resolves).
 */
function fakeRoot(opts: { dist: boolean; withNodeModules: boolean }): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bin-'));
  tmpRoots.push(root);
  fs.cpSync(path.join(ROOT, 'bin'), path.join(root, 'bin'), { recursive: true });
  fs.cpSync(path.join(ROOT, 'scripts/dist-state.mjs'), path.join(root, 'scripts/dist-state.mjs'));
  write(path.join(root, 'package.json'), JSON.stringify({ name: 'svc', version: '9.8.7', type: 'module' }));
  const fromSource = write(
    path.join(root, 'src/cli/main.ts'),
    "export async function main(argv: string[]): Promise<void> {\n  const from: string = 'source';\n  console.log(`${from} " +
      "${argv.join(' ')}`);\n}\n",
  );
  age(fromSource, 60);
  if (opts.dist) {
    write(path.join(root, 'dist/src/cli/main.js'), "export async function main(argv) { console.log(`dist ${argv.join(' ')}`); }\n");
    write(path.join(root, STAMP), '');
    age(path.join(root, STAMP), 30);
  }
  if (opts.withNodeModules) fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(root, 'node_modules'), 'dir');
  return root;
}

describe('distState', () => {
  it('is missing, fresh, then stale when a source or a tsconfig changes after the build', () => {
    const root = fakeRoot({ dist: false, withNodeModules: false });
    expect(distState(root)).toEqual({ state: 'missing', sources: true });
    write(path.join(root, 'dist/src/cli/main.js'), '');
    expect(distState(root).state).toBe('missing'); // no stamp: never finished a build
    write(path.join(root, STAMP), '');
    age(path.join(root, STAMP), 30);
    expect(distState(root)).toEqual({ state: 'fresh', sources: true });
    const nested = write(path.join(root, 'src/dashboard/pages/x.tsx'), 'export {};\n');
    expect(distState(root)).toEqual({ state: 'stale', sources: true, newer: path.join('src', 'dashboard', 'pages', 'x.tsx') });
    age(nested, 60);
    write(path.join(root, 'store/y.ts'), 'export {};\n');
    expect(distState(root)).toMatchObject({ state: 'stale', newer: path.join('store', 'y.ts') });
    age(path.join(root, 'store/y.ts'), 60);
    write(path.join(root, 'tsconfig.build.json'), '{}');
    expect(distState(root)).toMatchObject({ state: 'stale', newer: 'tsconfig.build.json' });
    age(path.join(root, 'tsconfig.build.json'), 60);
    write(path.join(root, 'src/notes.md'), 'not a source');
    expect(distState(root).state).toBe('fresh');
  });

  it('without src/ (an installed package) a dist/ that is there is used as it is', () => {
    const root = fakeRoot({ dist: true, withNodeModules: false });
    fs.rmSync(path.join(root, 'src'), { recursive: true });
    expect(distState(root)).toEqual({ state: 'fresh', sources: false });
    fs.rmSync(path.join(root, 'dist'), { recursive: true });
    expect(distState(root)).toEqual({ state: 'missing', sources: false });
  });

  it('the repository dist/ is fresh (the test run built it)', () => {
    expect(distState(ROOT)).toEqual({ state: 'fresh', sources: true });
  });
});

describe('bin/svc.mjs', () => {
  it('runs dist/ when it is fresh, with nothing on stderr', () => {
    const root = fakeRoot({ dist: true, withNodeModules: false });
    const r = run(root, ['a', 'b']);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('dist a b\n');
    expect(r.status).toBe(0);
  });

  it('runs the sources through tsx when dist/ is stale or missing, and says so', () => {
    const root = fakeRoot({ dist: true, withNodeModules: true });
    fs.utimesSync(path.join(root, 'src/cli/main.ts'), new Date(), new Date());
    const stale = run(root, ['x']);
    expect(stale.stdout).toBe('source x\n');
    expect(stale.stderr).toMatch(/dist\/ is older than src\/cli\/main\.ts; running the TypeScript sources through tsx/);
    fs.rmSync(path.join(root, 'dist'), { recursive: true });
    const missing = run(root, ['y']);
    expect(missing.stdout).toBe('source y\n');
    expect(missing.stderr).toMatch(/dist\/ is missing; running the TypeScript sources through tsx/);
  });

  it('without dist/ or tsx it says to build, exit 1, no stack trace', () => {
    const root = fakeRoot({ dist: false, withNodeModules: false });
    const r = run(root, ['serve', '--port', '0']);
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`svc: dist/ is missing; run \`npm run build\` in ${root}${path.sep} (after \`npm ci\`)\n`);
  });

  it('--version prints the version from package.json, with or without dist/', () => {
    const root = fakeRoot({ dist: false, withNodeModules: false });
    for (const flag of ['--version', '-V']) {
      const r = run(root, [flag]);
      expect(r).toMatchObject({ status: 0, stdout: '9.8.7\n', stderr: '' });
    }
    expect(run(ROOT, ['--version'])).toMatchObject({ status: 0, stdout: `${VERSION}\n`, stderr: '' });
  });

  it('the real CLI runs from dist/: help lists every command group, version included', () => {
    const r = run(ROOT, ['--help']);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    for (const cmd of ['serve', 'orgs', 'tokens', 'webhooks', 'installs', 'branches', 'workflows', 'listen'])
      expect(r.stdout).toMatch(new RegExp(`^  ${cmd}\\b`, 'm'));
    expect(r.stdout).toMatch(/-V, --version/);
  });
});
