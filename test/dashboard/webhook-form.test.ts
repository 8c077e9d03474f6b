// The dashboard's webhook form (src/dashboard/webhook-form.ts) and its `next` paths
// (src/dashboard/paths.ts), without a browser: form state ↔ API bodies, validated by the API's schemas.
import { describe, expect, it } from 'vitest';
import { BASELINE, createBodyOf, formStateOf, interestsOf, patchBodyOf } from '../../src/dashboard/webhook-form.ts';
import { safeNext } from '../../src/dashboard/paths.ts';

describe('webhook form', () => {
  const form = (f: Record<string, string | string[]>) => f;

  it('starts from the spec baseline under the toggle, and all_events wins when on', () => {
    const s = formStateOf({ interests: { all_events: true } });
    expect(s.all_events).toBe(true);
    expect(interestsOf({ ...s, all_events: false })).toEqual(BASELINE);
    expect(interestsOf(s)).toEqual({ all_events: true });
  });

  it('round-trips a per-resource subscription and its match', () => {
    const interests = {
      resources: {
        runners: { ops: ['unhealthy'], outcome: 'failures' as const },
        components: { outcome: 'none' as const, component_health: true },
      },
    };
    const match = { components: { ids: ['cmp_1'] } };
    const s = formStateOf({ interests, match });
    expect(interestsOf(s)).toEqual(interests);
    expect(JSON.parse(s.match_text)).toEqual(match);
  });

  it('the webhooks resource (CONTRACT 4.1): its delivery flags only, round-tripped and valid', async () => {
    const { flagsOf } = await import('../../src/dashboard/webhook-form.ts');
    expect(flagsOf('webhooks')).toEqual(['delivery_failing', 'delivery_recovered', 'delivery_disabled']);
    expect(flagsOf('installs')).not.toContain('delivery_failing');
    const body = createBodyOf(
      form({
        webhook_url: 'https://x.example/h',
        res_webhooks_enabled: '1',
        res_webhooks_outcome: 'all',
        res_webhooks_delivery_failing: '1',
        res_webhooks_delivery_disabled: '1',
      }),
    );
    expect(body.ok && body.value.interests).toEqual({
      resources: { webhooks: { outcome: 'all', delivery_failing: true, delivery_disabled: true } },
    });
    const interests = { resources: { webhooks: { ops: ['delivery' as const], delivery_recovered: true } } };
    expect(interestsOf(formStateOf({ interests }))).toEqual({
      resources: { webhooks: { ops: ['delivery'], outcome: 'all', delivery_recovered: true } },
    });
  });

  it('validates with the API schemas', () => {
    expect(createBodyOf(form({ webhook_url: 'ftp://x' })).ok).toBe(false);
    const none = createBodyOf(form({ webhook_url: 'https://x.example/h' }));
    expect(none.ok ? none.value : none.errors).toEqual([
      { path: 'interests.resources', message: 'resources must name at least one resource' },
    ]);
    const bad = patchBodyOf(form({ all_events: '1', match: '{oops' }));
    expect(bad.ok).toBe(false);
    const rotate = patchBodyOf(form({ all_events: '1', secret_action: 'rotate', new_secret: 's3' }));
    expect(rotate.ok && rotate.value).toEqual({ interests: { all_events: true }, match: null, secret: 's3' });
    const hardCut = patchBodyOf(form({ all_events: '1', secret_action: 'rotate', new_secret: 's3', previous_secret_ttl: '0' }));
    expect(hardCut.ok && hardCut.value).toEqual({ interests: { all_events: true }, match: null, secret: 's3' });
    const overlap = patchBodyOf(form({ all_events: '1', secret_action: 'rotate', new_secret: 's3', previous_secret_ttl: '3600' }));
    expect(overlap.ok && overlap.value).toEqual({
      interests: { all_events: true },
      match: null,
      secret: 's3',
      previous_secret_ttl_s: 3600,
    });
    // the overlap choice is ignored unless the secret is rotated (the API refuses it alone)
    const kept = patchBodyOf(form({ all_events: '1', secret_action: 'keep', previous_secret_ttl: '86400' }));
    expect(kept.ok && kept.value).toEqual({ interests: { all_events: true }, match: null });
    for (const bad of ['-1', 'abc', '604801']) {
      const r = patchBodyOf(form({ all_events: '1', secret_action: 'rotate', new_secret: 's3', previous_secret_ttl: bad }));
      expect(r.ok ? r.value : r.errors.map((e) => e.path), bad).toEqual(['previous_secret_ttl_s']);
    }
    const keep = patchBodyOf(form({ all_events: '1', match: '{"installs": {}}' }));
    expect(keep.ok && keep.value).toEqual({ interests: { all_events: true }, match: { installs: {} } });
    const remove = patchBodyOf(form({ all_events: '1', secret_action: 'remove' }));
    expect(remove.ok && remove.value).toMatchObject({ secret: null });
    const flagged = createBodyOf(form({ webhook_url: 'https://x.example/h', res_stacks_enabled: '1', res_stacks_drift_detected: '1' }));
    expect(flagged.ok && flagged.value.interests).toEqual({ resources: { stacks: { outcome: 'all' } } });
  });

  it('answers a subscription over the limits of CONTRACT 8 with errors naming the path', () => {
    const ids = (n: number) => Array.from({ length: n }, (_, i) => `i${i}`);
    const over = createBodyOf(
      form({ webhook_url: 'https://x.example/h', all_events: '1', match: JSON.stringify({ installs: { ids: ids(1001) } }) }),
    );
    expect(over.ok ? over.value : over.errors.map((e) => e.path)).toEqual(['match.installs.ids']);
    const labels = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v']));
    const tooMany = patchBodyOf(form({ all_events: '1', match: JSON.stringify({ components: { selector: { match_labels: labels } } }) }));
    expect(tooMany.ok ? tooMany.value : tooMany.errors.map((e) => e.path)).toEqual(['match.components.selector.match_labels']);
    const big = createBodyOf(
      form({ webhook_url: 'https://x.example/h', all_events: '1', match: JSON.stringify({ installs: { ids: ['x'.repeat(17_000)] } }) }),
    );
    expect(big.ok ? big.value : big.errors.map((e) => e.path)).toEqual(['match']);
  });

  it('rotates the secret of a webhook stored over the limits without resending its unchanged subscription', () => {
    const current = { interests: { all_events: true }, match: { installs: { ids: Array.from({ length: 1500 }, (_, i) => `i${i}`) } } };
    const shown = formStateOf(current);
    const submitted = form({ all_events: '1', match: shown.match_text, secret_action: 'rotate', new_secret: 's4' });
    const rotate = patchBodyOf(submitted, current);
    expect(rotate.ok && rotate.value).toEqual({ secret: 's4' });
    // without a secret change the form saves the subscription, which is then held to the limits
    const save = patchBodyOf(form({ all_events: '1', match: shown.match_text }), current);
    expect(save.ok ? save.value : save.errors.map((e) => e.path)).toEqual(['match.installs.ids']);
    // a changed subscription is sent (and checked) with the new secret
    const changed = patchBodyOf(form({ all_events: '1', match: '{"installs": {}}', secret_action: 'rotate', new_secret: 's4' }), current);
    expect(changed.ok && changed.value).toEqual({ interests: { all_events: true }, match: { installs: {} }, secret: 's4' });
  });

  it('takes a filter (CONTRACT 10.2): shown as JSON, sent when set or changed, empty = none, bad JSON or shape named', () => {
    const filter = { data: { transition: { $in: ['failed'] } } };
    const shown = formStateOf({ interests: { all_events: true }, filter });
    expect(JSON.parse(shown.filter_text)).toEqual(filter);
    const created = createBodyOf(form({ webhook_url: 'https://x.example/h', all_events: '1', filter: shown.filter_text }));
    expect(created.ok && created.value.filter).toEqual(filter);
    const none = createBodyOf(form({ webhook_url: 'https://x.example/h', all_events: '1', filter: '  ' }));
    expect(none.ok && 'filter' in none.value).toBe(false);
    const current = { interests: { all_events: true }, match: null, filter };
    const same = patchBodyOf(form({ all_events: '1', filter: shown.filter_text }), current);
    expect(same.ok && same.value).toEqual({ interests: { all_events: true }, match: null });
    const cleared = patchBodyOf(form({ all_events: '1', filter: '' }), current);
    expect(cleared.ok && cleared.value).toEqual({ interests: { all_events: true }, match: null, filter: null });
    const badJson = patchBodyOf(form({ all_events: '1', filter: '{oops' }), current);
    expect(badJson.ok ? badJson.value : badJson.errors).toEqual([{ path: 'filter', message: 'is not valid JSON' }]);
    const badOp = createBodyOf(form({ webhook_url: 'https://x.example/h', all_events: '1', filter: '{"data": {"$regex": "x"}}' }));
    expect(badOp.ok ? badOp.value : badOp.errors.map((e) => e.path)).toEqual(['filter.data.$regex']);
  });

  it('accepts only local next paths under the dashboard', () => {
    expect(safeNext('/dashboard/org_1/webhooks?x=1', '/dashboard')).toBe('/dashboard/org_1/webhooks?x=1');
    for (const bad of ['//evil', '/\\evil', 'https://evil/', '/v1/x', '/dashboardx', '/dashboard/login', undefined, '']) {
      expect(safeNext(bad, '/dashboard'), String(bad)).toBeUndefined();
    }
    expect(safeNext('/org_1', '')).toBe('/org_1');
  });
});
