// `svc serve --max-events-per-org` end to end (CONTRACT 8): a real svc process on a database where
// org A keeps 25,000 events and org B 3,000 prunes A's oldest 15,000 at start, counts them in
// svc_events_pruned_total{reason="quota"}, and leaves B's alone; its API then lists A's newest.
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openDb } from '../../store/db.ts';
import { insertEvent } from '../../store/history.ts';
import { createOrg } from '../../store/orgs.ts';
import { children, sigterm, spawnService } from '../helpers/child-service.ts';
import { tmpDir, waitFor } from '../helpers/service.ts';

afterEach(() => {
  for (const c of children) c.kill('SIGKILL');
});

const quotaPruned = async (url: string): Promise<number> => {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/^svc_events_pruned_total\{reason="quota"\} (\d+)/m.exec(text)?.[1] ?? NaN);
};

describe('svc serve --max-events-per-org', () => {
  it("prunes A's oldest events past 10,000, never B's, and counts them", async () => {
    const db = `${tmpDir('svc-quota-e2e-')}/svc.db`;
    const h = openDb(db);
    const a = createOrg(h, 'a');
    const b = createOrg(h, 'b');
    const now = Date.now();
    h.transaction(() => {
      let nb = 0;
      for (let i = 0; i < 25_000; i++) {
        insertEvent(h, { event_id: `evt_a_${i}`, org_id: a.org.org_id, type: 't', subject: 's', body: '{}', route: '{}', created_ms: now });
        if (i % 8 === 0 && nb < 3_000)
          insertEvent(h, {
            event_id: `evt_b_${nb++}`,
            org_id: b.org.org_id,
            type: 't',
            subject: 's',
            body: '{}',
            route: '{}',
            created_ms: now,
          });
      }
      while (nb < 3_000)
        insertEvent(h, {
          event_id: `evt_b_${nb++}`,
          org_id: b.org.org_id,
          type: 't',
          subject: 's',
          body: '{}',
          route: '{}',
          created_ms: now,
        });
    })();
    h.close();

    const svc = await spawnService(db, ['--max-events-per-org', '10000']);
    let seen = NaN;
    await waitFor(
      async () => (seen = await quotaPruned(svc.url)) === 15_000,
      20_000,
      () => `15,000 quota prunes counted (${seen} so far)`,
    );
    expect((await sigterm(svc)).code).toBe(0);

    const r = new Database(db, { readonly: true });
    try {
      const ids = (org: string) =>
        (r.prepare('SELECT event_id FROM events WHERE org_id = ? ORDER BY seq').all(org) as Array<{ event_id: string }>).map(
          (e) => e.event_id,
        );
      expect(ids(a.org.org_id)).toEqual(Array.from({ length: 10_000 }, (_, i) => `evt_a_${15_000 + i}`));
      expect(ids(b.org.org_id)).toEqual(Array.from({ length: 3_000 }, (_, i) => `evt_b_${i}`));
    } finally {
      r.close();
    }
  });
});
