// The data plane's webhook registry refuses an entry older than the one it holds for that webhook
// (CONTRACT 6.7): an old value put back cannot undo a deletion or a secret rotation.
import { describe, expect, it } from 'vitest';
import { WebhookRegistry } from '../../src/dispatch/registry.ts';
import type { WebhookEntry } from '../../src/domain/webhook-entry.ts';
import type { EventRoute } from '../../src/domain/event-route.ts';
import { allEventsEntry } from '../helpers/webhooks.ts';

const entry = (secret: string | null): WebhookEntry => allEventsEntry('org_1', 'wh_1', 'https://example.com/hook', secret);

describe('WebhookRegistry versions', () => {
  it('applies newer entries, refuses older ones, deletions included', () => {
    const r = new WebhookRegistry();
    expect(r.upsert(entry('old'), 3)).toBe(true);
    expect(r.upsert(entry('new'), 5)).toBe(true); // a rotation
    expect(r.upsert(entry('old'), 3)).toBe(false); // the rotated-out secret put back
    expect(r.get('org_1', 'wh_1')?.entry.secret).toBe('new');
    expect(r.remove('org_1', 'wh_1', 7)).toBe(true); // deleted: a tombstone at 7
    expect(r.upsert(entry('new'), 5)).toBe(false); // the deleted webhook put back
    expect(r.get('org_1', 'wh_1')).toBeUndefined();
    expect(r.remove('org_1', 'wh_1', 6)).toBe(false);
    expect(r.upsert(entry('again'), 8)).toBe(true); // a later change is applied
    expect(r.revision).toBe(8);
  });

  it('takes the same version again (a replay of what it holds changes nothing) and unversioned entries (embedded mode)', () => {
    const r = new WebhookRegistry();
    expect(r.upsert(entry('a'), 2)).toBe(true);
    expect(r.upsert(entry('a'), 2)).toBe(true);
    const e = new WebhookRegistry();
    expect(e.upsert(entry('a'))).toBe(true);
    expect(e.remove('org_1', 'wh_1')).toBe(true);
  });
});

describe('WebhookRegistry match', () => {
  const route = (rev: number): EventRoute => ({
    org: 'org_1',
    type: 'com.svc.workflow.started.v1',
    resource: 'installs',
    op: 'installs.provision',
    event: 'lifecycle.started',
    install: null,
    component: null,
    action: null,
    rev,
  });

  it('leaves out a webhook created after the event was emitted, however late the event is dispatched', () => {
    const r = new WebhookRegistry();
    r.upsert({ ...entry(null), since_rev: 5 }, 5);
    r.upsert({ ...allEventsEntry('org_1', 'wh_old', 'https://example.com/old', null) }, 2);
    expect(r.match(route(4)).map((s) => s.id)).toEqual(['wh_old']);
    expect(
      r
        .match(route(5))
        .map((s) => s.id)
        .sort(),
    ).toEqual(['wh_1', 'wh_old']);
    expect(
      r
        .match(route(0))
        .map((s) => s.id)
        .sort(),
    ).toEqual(['wh_1', 'wh_old']); // names no revision
  });
});
