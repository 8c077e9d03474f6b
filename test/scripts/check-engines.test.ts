// scripts/check-engines.mjs: every installed package admits Node 20.20; uninstalled optional
// platform bindings do not count.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { engineViolations, installedManifest, type LockEntry } from '../../scripts/check-engines.mjs';
import { ROOT } from '../helpers/paths.ts';

/** A lockfile's `packages`; entries with `installed: false` are listed but not on disk. */
const fakeLock: Record<string, LockEntry & { installed?: boolean }> = {
  '': { version: '0.1.0', engines: { node: '>=20.19' } },
  'node_modules/ok-plain': { version: '1.0.0' },
  'node_modules/ok-range': { version: '1.0.0', engines: { node: '^20.19.0 || >=22.12.0' } },
  'node_modules/ok-old-array': { version: '0.1.0', engines: ['node >= 0.4'] },
  // what @nats-io/nuid 3.0.0 declared (the reason @nats-io/* stays on 3.3.0)
  'node_modules/@nats-io/nuid': { version: '3.0.0', engines: { node: '>= 22.x' } },
  'node_modules/a/node_modules/nested-too-new': { version: '2.0.0', engines: { node: '>=21' } },
  'node_modules/bad-range': { version: '1.0.0', engines: { node: 'twenty or later' } },
  // a binding for another platform: listed, optional, not installed
  'node_modules/@rolldown/binding-darwin-arm64': { version: '1.0.0', optional: true, installed: false, engines: { node: '>=22' } },
  // a dev dependency under --omit=dev
  'node_modules/dev-only': { version: '1.0.0', dev: true, installed: false, engines: { node: '>=24' } },
};
const fromFake = (p: string) => {
  const e = fakeLock[p];
  return e && e.installed !== false ? { name: p.replace(/^.*node_modules\//, ''), version: e.version, engines: e.engines } : null;
};

describe('engineViolations', () => {
  it('names each installed package whose engines.node does not admit Node 20.20', () => {
    const bad = engineViolations(fakeLock, { manifest: fromFake });
    expect(bad.map((b) => [b.name, b.problem])).toEqual([
      ['@nats-io/nuid', 'does not admit Node 20.20.0'],
      ['nested-too-new', 'does not admit Node 20.20.0'],
      ['bad-range', 'not a valid range'],
    ]);
    expect(bad[0]).toMatchObject({ path: 'node_modules/@nats-io/nuid', version: '3.0.0', range: '>= 22.x' });
  });

  it('checks against the version it is given', () => {
    const onlyNuidAndBad = {
      '': fakeLock[''],
      'node_modules/@nats-io/nuid': fakeLock['node_modules/@nats-io/nuid'],
      'node_modules/bad-range': fakeLock['node_modules/bad-range'],
    };
    expect(engineViolations(onlyNuidAndBad, { node: '22.12.0', manifest: fromFake }).map((b) => b.name)).toEqual(['bad-range']);
    expect(
      engineViolations({ 'node_modules/ok-range': fakeLock['node_modules/ok-range'] }, { node: '20.18.0', manifest: fromFake }),
    ).toHaveLength(1);
  });

  it('reads installed packages from node_modules; one that is not there is null (skipped)', () => {
    const manifest = installedManifest(ROOT);
    expect(manifest('node_modules/semver')).toMatchObject({ name: 'semver' });
    expect(manifest('node_modules/@rolldown/binding-darwin-arm64-not-installed')).toBeNull();
  });

  it('the installed tree passes (the script exits 0)', () => {
    expect(() =>
      execFileSync(process.execPath, [path.join(ROOT, 'scripts/check-engines.mjs')], { cwd: ROOT, stdio: 'pipe' }),
    ).not.toThrow();
  });
});
