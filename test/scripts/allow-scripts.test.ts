// package.json `allowScripts` (issue 56): `npm ci` (npm 11) warns "install-scripts … not yet covered
// by allowScripts" for every package of the lockfile with an install script that allowScripts does
// not name, allowed (true) or not (false). A newcomer cannot act on that warning, so every such
// package is named. (Checked by hand on 2026-12-07: `npm ci --ignore-scripts=false` in a scratch
// copy of package.json and package-lock.json printed 4 install-scripts lines before, 0 after.)
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/paths.ts';

const read = (f: string) => JSON.parse(fs.readFileSync(path.join(ROOT, f), 'utf8'));

describe('allowScripts', () => {
  it('names every package of the lockfile that has an install script, so that npm ci prints no install-scripts warning', () => {
    const allow: Record<string, boolean> = read('package.json').allowScripts ?? {};
    const lock = read('package-lock.json') as { packages: Record<string, { hasInstallScript?: boolean }> };
    const withScripts = Object.entries(lock.packages)
      .filter(([p, e]) => p !== '' && e.hasInstallScript)
      .map(([p]) => p.slice(p.lastIndexOf('node_modules/') + 'node_modules/'.length));
    expect(withScripts.length).toBeGreaterThan(0);
    expect(withScripts.filter((name) => typeof allow[name] !== 'boolean')).toEqual([]);
    // the native modules svc builds on are allowed; msgpackr-extract is not needed (its prebuilt
    // binary comes as an optional platform package, and msgpackr runs without it)
    expect(allow).toMatchObject({ 'better-sqlite3': true, esbuild: true, 'msgpackr-extract': false });
  });
});
