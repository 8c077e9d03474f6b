// Webhook subscription validation, match normalisation, canonical match, effective interests
// (spec 2.1-2.4, CONTRACT 4.1).
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import {
  RESOURCE_OPS,
  canonicalMatch,
  createWebhookBodySchema,
  effectiveInterests,
  interestsSchema,
  matchSchema,
  normalizeMatch,
  patchWebhookBodySchema,
  type Match,
} from '../../src/domain/subscription.ts';

const URL_OK = 'http://127.0.0.1:9999/hook';

/** Dotted paths of every issue (unknown keys appended, as the HTTP layer does); [] when valid. */
function issuePaths(schema: z.ZodType, value: unknown): string[] {
  const r = schema.safeParse(value);
  if (r.success) return [];
  const out: string[] = [];
  for (const i of r.error.issues) {
    const base = i.path.map(String);
    if (i.code === 'unrecognized_keys') for (const k of i.keys) out.push([...base, k].join('.'));
    else out.push(base.join('.'));
  }
  return out;
}

const create = (body: Record<string, unknown>) => issuePaths(createWebhookBodySchema, { webhook_url: URL_OK, ...body });
const withInterests = (interests: unknown) => issuePaths(createWebhookBodySchema, { webhook_url: URL_OK, interests });
const withMatch = (match: unknown) => issuePaths(createWebhookBodySchema, { webhook_url: URL_OK, match });

describe('RESOURCE_OPS', () => {
  it('lists the nine resources and their ops (webhooks new in 0.2)', () => {
    expect(RESOURCE_OPS).toEqual({
      installs: ['provision', 'deprovision', 'reprovision'],
      stacks: ['version_active'],
      components: ['deploy', 'teardown'],
      sandboxes: ['provision', 'reprovision', 'deprovision'],
      install_configurations: ['inputs', 'secrets'],
      runners: ['provision', 'reprovision', 'inactive', 'unhealthy'],
      actions: ['run'],
      app_branches: ['run'],
      webhooks: ['delivery'],
    });
  });
});

describe('create body: webhook_url', () => {
  const bad: unknown[] = [
    'ftp://127.0.0.1/hook',
    'example.com/hook',
    '/relative/path',
    'http://',
    'https://',
    'http:',
    'mailto:ops@example.com',
    'file:///etc/passwd',
    'javascript:alert(1)',
    'not a url',
    '',
    '   ',
    'ws://127.0.0.1/hook',
    '//127.0.0.1/hook',
    'http:///x',
    'http:\\\\host/x',
    'http://:80/',
    ' http://127.0.0.1/x',
    'http://127.0.0.1/a b',
    123,
    null,
    true,
    ['http://127.0.0.1/x'],
    { url: 'http://127.0.0.1/x' },
  ];
  it.each(bad.map((u) => [JSON.stringify(u), u]))('rejects %s', (_label, u) => {
    expect(issuePaths(createWebhookBodySchema, { webhook_url: u })).toEqual(['webhook_url']);
  });

  it('is required', () => {
    expect(issuePaths(createWebhookBodySchema, {})).toEqual(['webhook_url']);
    expect(issuePaths(createWebhookBodySchema, { secret: 'abc' })).toEqual(['webhook_url']);
    const r = createWebhookBodySchema.safeParse({});
    expect(r.success ? '' : r.error.issues[0].message).toMatch(/required/);
  });

  it('accepts http and https with host, port, path, query, any case scheme', () => {
    for (const u of ['https://localhost:8443/hooks/in?token=abc', 'http://localhost/hooks', 'HTTPS://Example.com', 'http://[::1]:80/x']) {
      expect(createWebhookBodySchema.parse({ webhook_url: u }).webhook_url).toBe(u);
    }
  });

  it('allows at most 2048 characters', () => {
    const base = 'http://127.0.0.1:9999/h/long-';
    const ok = base + 'a'.repeat(2048 - base.length);
    expect(ok).toHaveLength(2048);
    expect(issuePaths(createWebhookBodySchema, { webhook_url: ok })).toEqual([]);
    expect(issuePaths(createWebhookBodySchema, { webhook_url: `${ok}b` })).toEqual(['webhook_url']);
  });
});

describe('create body: secret and unknown fields', () => {
  it('secret is a string of 1 to 512 characters', () => {
    expect(create({ secret: 'y' })).toEqual([]);
    expect(create({ secret: 'x'.repeat(512) })).toEqual([]);
    for (const s of ['', 'x'.repeat(513), 12345, ['a'], null]) expect(create({ secret: s })).toEqual(['secret']);
  });

  it('unknown top-level fields are named', () => {
    expect(create({ enabled: true })).toEqual(['enabled']);
    expect(create({ url: 'http://127.0.0.1/x', color: 'red' })).toEqual(['url', 'color']);
  });

  it('parses a full body, keeping null match distinct from omitted', () => {
    const body = { webhook_url: URL_OK, secret: 's', interests: { all_events: true }, match: null };
    expect(createWebhookBodySchema.parse(body)).toEqual(body);
    const bare = createWebhookBodySchema.parse({ webhook_url: URL_OK });
    expect('match' in bare).toBe(false);
    expect('interests' in bare).toBe(false);
  });
});

describe('interests validation', () => {
  it('rejects documents that select nothing', () => {
    expect(withInterests({})).toEqual(['interests']);
    expect(withInterests({ all_events: false })).toEqual(['interests.all_events']);
    expect(withInterests({ resources: {} })).toEqual(['interests.resources']);
    expect(withInterests({ all_events: false, resources: {} })).toEqual(['interests.resources']);
  });

  it('rejects all_events true together with resources', () => {
    expect(withInterests({ all_events: true, resources: { installs: {} } })).toEqual(['interests.resources']);
    expect(withInterests({ all_events: true, resources: {} })).toEqual(['interests.resources']);
  });

  it('all_events must be a boolean; interests must be an object', () => {
    expect(withInterests({ all_events: 'yes' })).toEqual(['interests.all_events']);
    expect(withInterests({ all_events: 1 })).toEqual(['interests.all_events']);
    for (const i of [[], 'all', 42, true, null]) expect(withInterests(i)).toEqual(['interests']);
    expect(withInterests({ resources: [] })).toEqual(['interests.resources']);
    expect(withInterests({ everything: true })).toContain('interests.everything');
  });

  it('rejects unknown resources', () => {
    for (const r of ['databases', 'install', 'Installs', 'runner', 'drift', '__proto__x']) {
      expect(withInterests({ resources: { [r]: {} } })).toEqual([`interests.resources.${r}`]);
    }
  });

  it('rejects ops that are unknown or belong to another resource', () => {
    const cases: [string, string[], number][] = [
      ['installs', ['deploy'], 0],
      ['installs', ['provision', 'explode'], 1],
      ['components', ['provision'], 0],
      ['stacks', ['deploy'], 0],
      ['sandboxes', ['teardown'], 0],
      ['install_configurations', ['secret'], 0],
      ['runners', ['deploy'], 0],
      ['actions', ['provision'], 0],
      ['app_branches', ['deploy'], 0],
      ['components', ['drift'], 0],
      ['components', ['health'], 0],
      ['installs', ['health'], 0],
    ];
    for (const [r, ops, bad] of cases) {
      expect(withInterests({ resources: { [r]: { ops } } })).toEqual([`interests.resources.${r}.ops.${bad}`]);
    }
    expect(withInterests({ resources: { installs: { ops: 'provision' } } })).toEqual(['interests.resources.installs.ops']);
    expect(withInterests({ resources: { installs: { ops: [1] } } })).toEqual(['interests.resources.installs.ops.0']);
  });

  it('accepts every op of every resource, and empty ops', () => {
    for (const [r, ops] of Object.entries(RESOURCE_OPS)) {
      expect(withInterests({ resources: { [r]: { ops: [...ops] } } })).toEqual([]);
      expect(withInterests({ resources: { [r]: { ops: [] } } })).toEqual([]);
    }
  });

  it('outcome must be all, completion, failures or none', () => {
    for (const o of ['sometimes', 'ALL', 'success', '', 1, ['all'], null]) {
      expect(withInterests({ resources: { installs: { outcome: o } } })).toEqual(['interests.resources.installs.outcome']);
    }
    for (const o of ['all', 'completion', 'failures', 'none']) {
      expect(withInterests({ resources: { installs: { outcome: o } } })).toEqual([]);
    }
  });

  it('rejects flags set true on a resource they do not apply to, on the flag path', () => {
    const cases: [string, string][] = [
      ['installs', 'drift_detected'],
      ['runners', 'drift_detected'],
      ['stacks', 'drift_detected'],
      ['actions', 'drift_detected'],
      ['app_branches', 'drift_detected'],
      ['install_configurations', 'drift_detected'],
      ['sandboxes', 'component_health'],
      ['installs', 'component_health'],
      ['runners', 'component_health'],
      ['components', 'install_degraded'],
      ['sandboxes', 'install_degraded'],
      ['runners', 'install_degraded'],
    ];
    for (const [r, flag] of cases) {
      expect(withInterests({ resources: { [r]: { [flag]: true } } })).toEqual([`interests.resources.${r}.${flag}`]);
    }
  });

  it('accepts flags set false anywhere and true where they belong', () => {
    const good = [
      { installs: { drift_detected: false, component_health: false } },
      { runners: { install_degraded: false, drift_detected: false, ops: ['unhealthy'] } },
      { sandboxes: { component_health: false, drift_detected: true } },
      { components: { install_degraded: false } },
      { components: { drift_detected: true, component_health: true, outcome: 'none' } },
      { installs: { install_degraded: true, approval_requests: true, approval_responses: true } },
      { app_branches: { ops: ['run'], approval_requests: true } },
      { runners: { ops: ['unhealthy', 'inactive'], outcome: 'failures' } },
      { stacks: { ops: ['version_active'] }, actions: { ops: ['run'] }, install_configurations: { ops: ['inputs', 'secrets'] } },
      { installs: { outcome: 'none' } },
    ];
    for (const resources of good) {
      expect(withInterests({ resources })).toEqual([]);
      // returned exactly as given
      expect(interestsSchema.parse({ resources })).toEqual({ resources });
    }
    const given = { all_events: false, resources: { installs: {} } };
    expect(interestsSchema.parse(given)).toEqual(given);
    expect(interestsSchema.parse({ all_events: true })).toEqual({ all_events: true });
  });

  it('booleans must be booleans; unknown per-resource fields and non-object configs are named', () => {
    expect(withInterests({ resources: { installs: { approval_requests: 'true' } } })).toEqual([
      'interests.resources.installs.approval_requests',
    ]);
    expect(withInterests({ resources: { installs: { approval_responses: 0 } } })).toEqual([
      'interests.resources.installs.approval_responses',
    ]);
    expect(withInterests({ resources: { components: { drift_detected: 1 } } })).toEqual(['interests.resources.components.drift_detected']);
    expect(withInterests({ resources: { installs: { verbose: true } } })).toEqual(['interests.resources.installs.verbose']);
    expect(withInterests({ resources: { installs: [] } })).toEqual(['interests.resources.installs']);
    expect(withInterests({ resources: { installs: null } })).toEqual(['interests.resources.installs']);
  });
});

describe('issues across fields', () => {
  it('reports each invalid field once, without redundant whole-document issues', () => {
    expect(issuePaths(createWebhookBodySchema, { webhook_url: 'x', interests: {}, match: {} })).toEqual([
      'webhook_url',
      'interests',
      'match',
    ]);
    expect(withInterests({ all_events: true, resources: { installs: { ops: ['x'] } } })).toEqual(['interests.resources.installs.ops.0']);
    expect(withMatch({ apps: {} })).toEqual(['match.apps']);
  });
});

describe('match validation', () => {
  it('rejects bad shapes, naming a path under match', () => {
    const bad: [unknown, string][] = [
      [{}, 'match'],
      [{ apps: {} }, 'match.apps'],
      [{ installs: { ids: [''] } }, 'match.installs.ids.0'],
      [{ installs: { ids: 'inst_1' } }, 'match.installs.ids'],
      [{ installs: { ids: [1] } }, 'match.installs.ids.0'],
      [{ installs: { ids: [] } }, 'match.installs.ids'],
      [{ components: { ids: [], selector: { match_labels: { tier: 'web' } } } }, 'match.components.ids'],
      [{ actions: { ids: [] } }, 'match.actions.ids'],
      [{ installs: { selector: {} } }, 'match.installs.selector.match_labels'],
      [{ installs: { selector: { match_labels: {} } } }, 'match.installs.selector.match_labels'],
      [{ components: { selector: { match_labels: { env: 1 } } } }, 'match.components.selector.match_labels.env'],
      [{ installs: { selector: { env: 'prod' } } }, 'match.installs.selector.env'],
      [{ installs: { selector: { match_labels: { env: 'prod' }, extra: 1 } } }, 'match.installs.selector.extra'],
      [{ installs: { selector: { match_labels: [] } } }, 'match.installs.selector.match_labels'],
      [{ installs: { foo: 1 } }, 'match.installs.foo'],
      [{ installs: [] }, 'match.installs'],
      [{ installs: 'inst_1' }, 'match.installs'],
      [{ installs: null }, 'match.installs'],
      ['org', 'match'],
      [[], 'match'],
      [42, 'match'],
    ];
    for (const [m, path] of bad) {
      const paths = withMatch(m);
      expect(paths, JSON.stringify(m)).toContain(path);
    }
  });

  it('accepts valid shapes, including null and {} per kind', () => {
    const good: unknown[] = [
      null,
      { installs: {} },
      { installs: { ids: ['inst_a', 'inst_b'] } },
      { components: { selector: { match_labels: { tier: 'web', team: '*' } } } },
      { actions: { ids: ['act_2', 'act_1'], selector: { match_labels: { kind: 'ops' } } } },
      { installs: { selector: { match_labels: { env: 'prod' } } }, components: {}, actions: { ids: ['act_2'] } },
    ];
    for (const m of good) expect(withMatch(m), JSON.stringify(m)).toEqual([]);
    expect(matchSchema.parse({ components: { ids: ['b', 'a', 'b'] } })).toEqual({ components: { ids: ['b', 'a', 'b'] } });
  });
});

describe('patch body', () => {
  const patch = (b: unknown) => issuePaths(patchWebhookBodySchema, b);

  it('an empty body is 400', () => {
    expect(patch({})).toEqual(['']);
    expect(patchWebhookBodySchema.safeParse({}).success).toBe(false);
  });

  it('naming webhook_url is 400, on the webhook_url path, whatever else is there', () => {
    expect(patch({ webhook_url: URL_OK })).toEqual(['webhook_url']);
    expect(patch({ webhook_url: URL_OK, secret: 'x' })).toEqual(['webhook_url']);
    expect(patch({ webhook_url: null, interests: { all_events: true } })).toEqual(['webhook_url']);
  });

  it('accepts each field alone, null match and null secret', () => {
    expect(patch({ secret: 'rotated' })).toEqual([]);
    expect(patch({ secret: null })).toEqual([]);
    expect(patch({ match: null })).toEqual([]);
    expect(patch({ match: { installs: {} } })).toEqual([]);
    expect(patch({ interests: { resources: { installs: {} } } })).toEqual([]);
    const parsed = patchWebhookBodySchema.parse({ match: null });
    expect(parsed).toEqual({ match: null });
    expect('interests' in parsed).toBe(false);
    expect(patchWebhookBodySchema.parse({ secret: null })).toEqual({ secret: null });
  });

  it('rejects invalid values and unknown keys', () => {
    const bad: [unknown, string][] = [
      [{ interests: {} }, 'interests'],
      [{ interests: { resources: { installs: { ops: ['deploy'] } } } }, 'interests.resources.installs.ops.0'],
      [{ match: {} }, 'match'],
      [{ secret: '' }, 'secret'],
      [{ secret: 'x'.repeat(513) }, 'secret'],
      [{ secret: 5 }, 'secret'],
      [{ interests: { all_events: true }, color: 'red' }, 'color'],
      [{ interests: { resources: { installs: { drift_detected: true } } } }, 'interests.resources.installs.drift_detected'],
      [{ interests: { all_events: false } }, 'interests.all_events'],
      [{ interests: { resources: {} } }, 'interests.resources'],
      [{ match: { installs: { ids: [] } } }, 'match.installs.ids'],
      [{ interests: null }, 'interests'],
    ];
    for (const [b, path] of bad) expect(patch(b), JSON.stringify(b)).toContain(path);
  });
});

describe('normalizeMatch', () => {
  it('null stays null', () => {
    expect(normalizeMatch(null)).toBeNull();
  });

  it('dedups and sorts ids, keeps everything else as given, does not mutate the input', () => {
    const m: Match = {
      installs: { ids: ['inst_c', 'inst_a', 'inst_c', 'inst_b'] },
      components: {},
      actions: { ids: ['act_2', 'act_1'], selector: { match_labels: { z: '1', a: '*' } } },
    };
    const before = structuredClone(m);
    expect(normalizeMatch(m)).toEqual({
      installs: { ids: ['inst_a', 'inst_b', 'inst_c'] },
      components: {},
      actions: { ids: ['act_1', 'act_2'], selector: { match_labels: { z: '1', a: '*' } } },
    });
    expect(m).toEqual(before);
    expect(normalizeMatch({ components: { ids: ['z_1', 'a_1', 'z_1'] } })).toEqual({ components: { ids: ['a_1', 'z_1'] } });
  });
});

describe('canonicalMatch', () => {
  it("is '' for null and non-empty otherwise", () => {
    expect(canonicalMatch(null)).toBe('');
    expect(canonicalMatch({ installs: {} })).not.toBe('');
  });

  it('treats ids as a set and labels / kinds in any order as equal', () => {
    expect(canonicalMatch({ installs: { ids: ['inst_b', 'inst_a'] } })).toBe(
      canonicalMatch({ installs: { ids: ['inst_a', 'inst_b', 'inst_a'] } }),
    );
    expect(canonicalMatch({ components: { selector: { match_labels: { a: '1', b: '2' } } } })).toBe(
      canonicalMatch({ components: { selector: { match_labels: { b: '2', a: '1' } } } }),
    );
    expect(canonicalMatch({ installs: { ids: ['i'] }, components: {} })).toBe(canonicalMatch({ components: {}, installs: { ids: ['i'] } }));
  });

  it('distinguishes different matches', () => {
    const matches: (Match | null)[] = [
      null,
      { installs: {} },
      { installs: { ids: ['inst_1'] } },
      { installs: { ids: ['inst_2'] } },
      { components: { ids: ['inst_1'] } },
      { installs: { selector: { match_labels: { env: 'prod' } } } },
      { installs: { selector: { match_labels: { env: 'dev' } } } },
      { installs: { selector: { match_labels: { env: '*' } } } },
      { installs: { ids: ['inst_1'] }, components: {} },
      { installs: { ids: ['inst_1'], selector: { match_labels: { env: 'prod' } } } },
      { actions: {} },
    ];
    const canon = matches.map(canonicalMatch);
    expect(new Set(canon).size).toBe(matches.length);
  });
});

describe('effectiveInterests', () => {
  it('null, undefined, empty and legacy documents mean all_events', () => {
    for (const v of [null, undefined, '', {}, '{}', 'null', { events: ['deploy'] }, 'not json', { all_events: false }, 42]) {
      expect(effectiveInterests(v), JSON.stringify(v)).toEqual({ all_events: true });
    }
  });

  it('a valid stored document is returned as given (object or JSON text)', () => {
    const doc = { all_events: false, resources: { installs: { ops: ['provision'], outcome: 'completion' } } };
    expect(effectiveInterests(doc)).toEqual(doc);
    expect(effectiveInterests(JSON.stringify(doc))).toEqual(doc);
    expect(effectiveInterests({ all_events: true })).toEqual({ all_events: true });
  });
});
