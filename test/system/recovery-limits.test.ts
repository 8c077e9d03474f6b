// The bounds of a recovery (CONTRACT 4.5 "Bounds (new in 0.2)"): one running per webhook (409
// conflict naming it, checked first), 4 running per org (409 limit_exceeded), `until` before
// `since` is 400 and starts nothing; only events emitted after the webhook was created unless
// `backfill`; events set aside as unpublishable are never recovered; deleting the webhook stops
// its recovery (state done, its place in the org's 4 freed); a webhook that does not answer has at
// most 16 items of its recovery out at once. A receiver that never answers keeps
// each recovery running while the test looks at it.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeRoute, type EventRoute } from '../../src/domain/event-route.ts';
import { openDb } from '../../store/db.ts';
import { insertEvent } from '../../store/history.ts';
import { dashboardSession } from '../helpers/dashboard.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';

const HOOKS = '/v1/orgs/current/webhooks';

describe('recovery bounds (CONTRACT 4.5)', () => {
  let svc: TestService;
  let rx: Receiver;
  let org: OrgCreds;
  let api: ApiClient;

  /** `n` kept events of the org, emitted a minute ago (as the engine keeps them); their ids. */
  function seed(n: number, tag: string): string[] {
    const h = openDb(svc.db);
    const ids: string[] = [];
    const at = Date.now() - 60_000;
    try {
      h.transaction(() => {
        for (let i = 0; i < n; i++) {
          const id = randomUUID();
          const subject = `${org.org_id}/install/inst_${tag}_${i}/started`;
          const type = 'com.svc.install.provision.started.v1';
          const body = JSON.stringify({
            specversion: '1.0',
            id,
            source: '//127.0.0.1/ctl-api',
            type,
            subject,
            time: new Date(at).toISOString(),
            svcorgid: org.org_id,
            data: {},
          });
          const route: EventRoute = {
            org: org.org_id,
            type,
            resource: 'installs',
            op: 'provision',
            event: 'lifecycle.started',
            install: { id: `inst_${tag}_${i}`, labels: {} },
            component: null,
            action: null,
            rev: 0,
          };
          insertEvent(h, { event_id: id, org_id: org.org_id, type, subject, body, route: encodeRoute(route), created_ms: at });
          ids.push(id);
        }
      })();
    } finally {
      h.close();
    }
    return ids;
  }

  const hook = async (name: string): Promise<string> => {
    const r = await api.post(HOOKS, { webhook_url: rx.hook(name) });
    expect(r.status, r.text).toBe(201);
    return r.body.webhook_id;
  };

  beforeAll(async () => {
    rx = await startReceiver();
    svc = await startService({ localRunner: false, deliveryTimeoutMs: 5000 });
    org = svc.createOrg('bounds');
    api = svc.api(org);
  });

  afterAll(async () => {
    await svc?.stop();
    await rx?.close();
  });

  it('events from before the webhook was created only with backfill; set-aside events never', async () => {
    const before = seed(5, 'old');
    const w = await hook('late');
    rx.set('late', { status: 200 });
    const after = seed(3, 'new');
    // one of them was set aside as unpublishable: never recovered
    const h = openDb(svc.db);
    try {
      h.prepare(
        "INSERT INTO dead_letters (id, kind, org_id, item_id, reason, data, created_at) VALUES (?, 'event', ?, ?, 'too_large', '{}', ?)",
      ).run(after[2], org.org_id, after[2], new Date().toISOString());
    } finally {
      h.close();
    }
    const plain = await api.post(`${HOOKS}/${w}/recover`, { since: '1h' });
    expect(plain.status, plain.text).toBe(202);
    expect(plain.body.events).toBe(2);
    await waitFor(
      async () => (await api.get(`${HOOKS}/${w}/recoveries/${plain.body.recovery_id}`)).body.state === 'done',
      10_000,
      'the first recovery to end',
    );
    expect(
      rx
        .at('late')
        .map((x) => x.json.id)
        .sort(),
    ).toEqual(after.slice(0, 2).sort());

    const all = await api.post(`${HOOKS}/${w}/recover`, { since: '1h', backfill: true, only_failed: false });
    expect(all.status, all.text).toBe(202);
    expect(all.body.events).toBe(7);
    await waitFor(
      async () => (await api.get(`${HOOKS}/${w}/recoveries/${all.body.recovery_id}`)).body.state === 'done',
      10_000,
      'the backfill to end',
    );
    expect(
      rx
        .at('late')
        .slice(2)
        .map((x) => x.json.id)
        .sort(),
    ).toEqual([...before, ...after.slice(0, 2)].sort());
  });

  it('until before since is 400 and starts nothing', async () => {
    const w = await hook('window');
    const r = await api.post(`${HOOKS}/${w}/recover`, { since: '1h', until: '2h', backfill: true });
    expect(r.status, r.text).toBe(400);
    expect(r.body.error).toBe('invalid_request');
    expect(r.body.details).toEqual([{ path: 'until', message: 'before since' }]);
    // nothing was started: a recovery of the same webhook is not refused as a conflict
    const ok = await api.post(`${HOOKS}/${w}/recover`, { since: '1h', until: '30m' });
    expect(ok.status, ok.text).toBe(202);
  });

  it(
    'one running recovery per webhook (409 conflict naming it, checked first), 4 per org (409 limit_exceeded); a deleted webhook ' +
      'stops its own',
    async () => {
      await waitFor(
        async () => {
          const h = openDb(svc.db);
          try {
            return (h.prepare('SELECT COUNT(*) AS n FROM recoveries WHERE finished_ms IS NULL').get() as { n: number }).n === 0;
          } finally {
            h.close();
          }
        },
        10_000,
        'the earlier recoveries to end',
      );
      seed(200, 'bounds');
      const hooks: string[] = [];
      for (let i = 0; i < 5; i++) {
        hooks.push(await hook(`hang${i}`));
        rx.set(`hang${i}`, { hang: true });
      }
      const ids: string[] = [];
      for (const w of hooks.slice(0, 4)) {
        const r = await api.post(`${HOOKS}/${w}/recover`, { since: '1h', backfill: true });
        expect(r.status, r.text).toBe(202);
        ids.push(r.body.recovery_id);
      }
      // the same webhook again: conflict, naming the running one (before the org's limit is looked at)
      const again = await api.post(`${HOOKS}/${hooks[0]}/recover`, { since: '1h', backfill: true });
      expect(again.status, again.text).toBe(409);
      expect(again.body.error).toBe('conflict');
      expect(again.body.message).toContain(ids[0]);
      // the dashboard's "Recover since…" form says the same, on the form (409), not as an error page
      const dash = await dashboardSession(`${svc.url}/dashboard`, org);
      const page = `/${org.org_id}/webhooks/${hooks[0]}`;
      const form = await dash.submit(page, `${page}/recover`, { since: '1h', only_failed: '1' });
      expect(form.status).toBe(409);
      const html = await form.text();
      expect(html).toContain(ids[0]);
      expect(html).toContain('Recover');
      // a fifth webhook of the org: over the limit
      const fifth = await api.post(`${HOOKS}/${hooks[4]}/recover`, { since: '1h', backfill: true });
      expect(fifth.status, fifth.text).toBe(409);
      expect(fifth.body.error).toBe('limit_exceeded');
      expect((await api.get(`${HOOKS}/${hooks[0]}/recoveries/${ids[0]}`)).body.state).toBe('running');

      // deleting a webhook stops its recovery: done, and its place in the org is free again
      expect((await api.del(`${HOOKS}/${hooks[1]}`)).status).toBe(204);
      await waitFor(
        async () => {
          const h = openDb(svc.db);
          try {
            return (
              (h.prepare('SELECT finished_ms FROM recoveries WHERE recovery_id = ?').get(ids[1]) as { finished_ms: number | null })
                .finished_ms !== null
            );
          } finally {
            h.close();
          }
        },
        5000,
        "the deleted webhook's recovery to stop",
      );
      const now = await api.post(`${HOOKS}/${hooks[4]}/recover`, { since: '1h', backfill: true });
      expect(now.status, now.text).toBe(202);
      // every kept event of the org with backfill (7 of the first test, 200 here)
      expect(now.body.events).toBe(207);
      // a recovery whose webhook does not answer has at most 16 items out (queued or in an attempt): the rest wait behind its cursor
      await waitFor(() => rx.at('hang4').length >= 8, 5000, 'the hanging webhook to get its 8 attempts');
      const h = openDb(svc.db);
      try {
        const r = h.prepare('SELECT fed, events FROM recoveries WHERE recovery_id = ?').get(now.body.recovery_id) as {
          fed: number;
          events: number;
        };
        expect(r).toEqual({ fed: 16, events: 207 });
        expect(
          (h.prepare("SELECT COUNT(*) AS n FROM outbox WHERE event_id LIKE '%.' || ?").get(now.body.recovery_id) as { n: number }).n,
        ).toBe(16);
      } finally {
        h.close();
      }
    },
  );
});
