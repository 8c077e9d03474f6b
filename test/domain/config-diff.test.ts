import { describe, expect, it } from 'vitest';
import { deepEqual, diffConfigs } from '../../src/domain/config-diff.ts';
import type { AppConfigBody } from '../../src/domain/app-config.ts';

const cfg = (image: string, extra: Partial<AppConfigBody> = {}): AppConfigBody => ({
  sandbox: { terraform: 'sandbox:1' },
  components: [
    { name: 'worker', type: 'helm', values: { image: 'worker:1' } },
    { name: 'api', type: 'helm', labels: { tier: 'web' }, values: { image, replicas: 2 } },
    { name: 'db', type: 'terraform', values: { size: 'small' } },
  ],
  inputs: { region: 'eu' },
  ...extra,
});

describe('deepEqual', () => {
  it('compares JSON-like values structurally', () => {
    expect(deepEqual({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 })).toBe(true);
    expect(deepEqual({ a: 1 }, { a: 1, b: undefined })).toBe(true);
    expect(deepEqual([1, 2], [2, 1])).toBe(false);
    expect(deepEqual({ a: 1 }, { a: '1' })).toBe(false);
    expect(deepEqual(null, {})).toBe(false);
    expect(deepEqual([], {})).toBe(false);
    expect(deepEqual(NaN, NaN)).toBe(true);
  });
});

describe('diffConfigs', () => {
  it('identical configs: nothing changed, every component unchanged', () => {
    const d = diffConfigs(cfg('api:1'), cfg('api:1'));
    expect(d.changed).toBe(false);
    expect(d.components.added).toEqual([]);
    expect(d.components.removed).toEqual([]);
    expect(d.components.changed).toEqual([]);
    expect(d.components.unchanged).toEqual([{ name: 'api' }, { name: 'db' }, { name: 'worker' }]);
    expect(d.sandbox_changed).toBe(false);
    expect(d.inputs_changed).toBe(false);
  });

  it('reports only the changed field of a changed component, with a dotted path', () => {
    const d = diffConfigs(cfg('api:1'), cfg('api:2'));
    expect(d.changed).toBe(true);
    expect(d.components.changed).toEqual([{ name: 'api', changes: [{ path: 'values.image', op: 'replace', old: 'api:1', new: 'api:2' }] }]);
    expect(d.components.unchanged.map((c) => c.name)).toEqual(['db', 'worker']);
    expect(JSON.stringify(d)).not.toContain('replicas');
  });

  it('added and removed components, sorted by name', () => {
    const from: AppConfigBody = { components: [{ name: 'b' }, { name: 'gone' }, { name: 'a' }] };
    const to: AppConfigBody = { components: [{ name: 'zeta' }, { name: 'a' }, { name: 'new' }, { name: 'b' }] };
    const d = diffConfigs(from, to);
    expect(d.components.added).toEqual([{ name: 'new' }, { name: 'zeta' }]);
    expect(d.components.removed).toEqual([{ name: 'gone' }]);
    expect(d.components.unchanged).toEqual([{ name: 'a' }, { name: 'b' }]);
    expect(d.changed).toBe(true);
  });

  it('from null: every component is added', () => {
    const d = diffConfigs(null, cfg('api:1'));
    expect(d.components.added).toEqual([{ name: 'api' }, { name: 'db' }, { name: 'worker' }]);
    expect(d.components.removed).toEqual([]);
    expect(d.components.changed).toEqual([]);
    expect(d.components.unchanged).toEqual([]);
    expect(d.changed).toBe(true);
    expect(d.sandbox_changed).toBe(true);
    expect(d.inputs_changed).toBe(true);
  });

  it('nested values: walks objects, compares arrays whole, reports adds and removes', () => {
    const from: AppConfigBody = {
      components: [{ name: 'api', values: { image: 'a', resources: { cpu: '1', memory: '1Gi' }, ports: [80, 443], old: true } }],
    };
    const to: AppConfigBody = {
      components: [{ name: 'api', values: { image: 'a', resources: { cpu: '2', memory: '1Gi', gpu: 1 }, ports: [80], env: { A: '1' } } }],
    };
    const d = diffConfigs(from, to);
    expect(d.components.changed).toHaveLength(1);
    const changes = d.components.changed[0].changes;
    expect(changes).toEqual([
      { path: 'values.env', op: 'add', new: { A: '1' } },
      { path: 'values.old', op: 'remove', old: true },
      { path: 'values.ports', op: 'replace', old: [80, 443], new: [80] },
      { path: 'values.resources.cpu', op: 'replace', old: '1', new: '2' },
      { path: 'values.resources.gpu', op: 'add', new: 1 },
    ]);
    expect(changes.some((c) => c.path.includes('memory') || c.path === 'values.image')).toBe(false);
  });

  it('a value changing shape (object to scalar) is one replace', () => {
    const d = diffConfigs(
      { components: [{ name: 'api', values: { db: { host: 'x' } } }] },
      { components: [{ name: 'api', values: { db: 'postgres://x' } }] },
    );
    expect(d.components.changed[0].changes).toEqual([{ path: 'values.db', op: 'replace', old: { host: 'x' }, new: 'postgres://x' }]);
  });

  it('labels and type: per-key label changes; absent labels are the same as none', () => {
    const d = diffConfigs(
      { components: [{ name: 'api', type: 'helm', labels: { tier: 'web', team: 'a' } }, { name: 'db' }, { name: 'q', labels: {} }] },
      {
        components: [
          { name: 'api', type: 'kustomize', labels: { tier: 'edge', ring: 'canary' } },
          { name: 'db', labels: { tier: 'data' } },
          { name: 'q' },
        ],
      },
    );
    const byName = Object.fromEntries(d.components.changed.map((c) => [c.name, c.changes]));
    expect(byName.api).toEqual([
      { path: 'labels.ring', op: 'add', new: 'canary' },
      { path: 'labels.team', op: 'remove', old: 'a' },
      { path: 'labels.tier', op: 'replace', old: 'web', new: 'edge' },
      { path: 'type', op: 'replace', old: 'helm', new: 'kustomize' },
    ]);
    expect(byName.db).toEqual([{ path: 'labels.tier', op: 'add', new: 'data' }]);
    expect(d.components.unchanged).toEqual([{ name: 'q' }]);
  });

  it('type added or removed', () => {
    const d = diffConfigs(
      { components: [{ name: 'a' }, { name: 'b', type: 'helm' }] },
      { components: [{ name: 'a', type: 'helm' }, { name: 'b' }] },
    );
    expect(d.components.changed).toEqual([
      { name: 'a', changes: [{ path: 'type', op: 'add', new: 'helm' }] },
      { name: 'b', changes: [{ path: 'type', op: 'remove', old: 'helm' }] },
    ]);
  });

  it('sandbox and inputs flags', () => {
    const base = cfg('api:1');
    const sb = diffConfigs(base, { ...base, sandbox: { terraform: 'sandbox:2' } });
    expect(sb.sandbox_changed).toBe(true);
    expect(sb.inputs_changed).toBe(false);
    expect(sb.changed).toBe(true);
    expect(sb.components.changed).toEqual([]);

    const inp = diffConfigs(base, { ...base, inputs: { region: 'us' } });
    expect(inp.inputs_changed).toBe(true);
    expect(inp.sandbox_changed).toBe(false);
    expect(inp.changed).toBe(true);

    // absent and empty are the same
    const a = diffConfigs({ components: [] }, { components: [], sandbox: {}, inputs: {} });
    expect(a).toEqual({
      changed: false,
      components: { added: [], removed: [], changed: [], unchanged: [] },
      sandbox_changed: false,
      inputs_changed: false,
    });
    // key order does not matter
    const k = diffConfigs(
      { components: [], sandbox: { a: 1, b: { c: 2, d: 3 } } },
      { components: [], sandbox: { b: { d: 3, c: 2 }, a: 1 } },
    );
    expect(k.sandbox_changed).toBe(false);
  });

  it('actions alone do not make components change', () => {
    const base = cfg('api:1');
    const d = diffConfigs(base, { ...base, actions: [{ name: 'migrate' }] });
    expect(d.components.changed).toEqual([]);
  });
});
