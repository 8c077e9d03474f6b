// Event size at the door (CONTRACT 8): a producer fact whose event would be over 256 KiB is refused
// at ingest (`{ok: false, error: "event_too_large"}`) and nothing of it is stored (no step change,
// no history, no outbox row, no dead letter); the other org's facts in the same moment go through;
// a set-aside event is never resent (409); dead letters go with --event-retention on the engine's
// clock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.ts';
import { setAsideEvent } from '../../store/dead-letters.ts';
import { insertEvent } from '../../store/history.ts';
import { autoAnswer, FakeRunner, type Answer } from '../helpers/fake-runner.ts';
import { rid } from '../helpers/ids.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { post, waitStep, waitWf } from '../helpers/workflows.ts';

type Json = any;

const CONFIG = { sandbox: { size: 'small' }, components: [{ name: 'api', values: { image: 'api:1' } }] };
const RETENTION_MS = 3_600_000;

describe('an oversized producer fact', () => {
  const clock = new ManualClock(Date.now());
  let svc: TestService;
  let rcv: Receiver;
  let runner: FakeRunner;
  let a: OrgCreds;
  let b: OrgCreds;
  let apiA: ApiClient;
  let apiB: ApiClient;

  const count = (sql: string, ...args: unknown[]) => (svc.server.ctx.db.prepare(sql).get(...args) as { n: number }).n;

  async function provisionedInstall(api: ApiClient): Promise<Json> {
    const app = await post(api, '/v1/apps', { name: rid('app') });
    await post(api, `/v1/apps/${app.app_id}/configs`, CONFIG);
    const install = await post(api, '/v1/installs', { app_id: app.app_id, name: rid('inst') });
    const wfs = await api.get(`/v1/installs/${install.install_id}/workflows`);
    expect((await waitWf(api, wfs.body[0].workflow_id)).status).toBe('succeeded');
    return (await api.get(`/v1/installs/${install.install_id}`)).body;
  }

  beforeAll(async () => {
    svc = await startService({ localRunner: false, eventRetentionMs: RETENTION_MS }, { clock });
    rcv = await startReceiver();
    a = svc.createOrg('size-a');
    b = svc.createOrg('size-b');
    apiA = svc.api(a);
    apiB = svc.api(b);
    runner = new FakeRunner(svc.server.bus);
    await post(apiA, '/v1/orgs/current/webhooks', { webhook_url: rcv.hook('a') });
    await post(apiB, '/v1/orgs/current/webhooks', { webhook_url: rcv.hook('b') });
  });
  afterAll(async () => {
    runner?.stop();
    await svc?.stop();
    await rcv?.close();
  });

  it('a component.plan of ~940 KB of changes is refused with event_too_large; nothing of it is kept; the other org ' +
    'is answered', async () => {
    const installA = await provisionedInstall(apiA);
    const installB = await provisionedInstall(apiB);
    // ~940 KB of changes: 10,000 addresses of ~80 characters
    const changes = Array.from({ length: 10_000 }, (_, i) => ({
      address: `module.very_long_module_name.kubernetes_deployment.resource_number_${String(i).padStart(8, '0')}`,
      action: 'update',
    }));
    expect(Buffer.byteLength(JSON.stringify({ changes }))).toBeGreaterThan(900_000);
    runner.holdWhen((job) => job.operation === 'component.plan');

    const eventsBefore = count('SELECT COUNT(*) AS n FROM events WHERE org_id = ?', a.org_id);
    const lettersBefore = count('SELECT COUNT(*) AS n FROM dead_letters');
    const scanA = await post(apiA, `/v1/installs/${installA.install_id}/drift-scans`, {});
    const scanB = await post(apiB, `/v1/installs/${installB.install_id}/drift-scans`, {});
    const jobA = await waitFor(() => runner.held.find((j) => j.workflow_id === scanA.workflow_id), 5000, 'A plan job');
    const jobB = await waitFor(() => runner.held.find((j) => j.workflow_id === scanB.workflow_id), 5000, 'B plan job');
    expect(await runner.send(jobA, [{ status: 'started' }])).toEqual([{ ok: true }]);
    await waitStep(apiA, scanA.workflow_id, 'plan api', 'started');
    const historyAfterStart = count('SELECT COUNT(*) AS n FROM events WHERE org_id = ?', a.org_id);
    const outboxBefore = count('SELECT COUNT(*) AS n FROM outbox WHERE org_id = ?', a.org_id);

    // the big one and B's drift in the same moment (one group commit, if they meet)
    const big: Answer = [{ status: 'succeeded', plan: { changes } }];
    const small: Answer = [
      { status: 'started' },
      { status: 'succeeded', plan: { changes: [{ address: 'kubernetes_deployment.api', action: 'update' }] } },
    ];
    const [repliesA, repliesB] = await Promise.all([runner.send(jobA, big), runner.send(jobB, small)]);
    expect(repliesA).toHaveLength(1);
    expect(repliesA[0]).toMatchObject({ ok: false, error: 'event_too_large' });
    expect((repliesA[0] as Json).message).toMatch(/over the 262144-byte limit/);
    expect(repliesB).toEqual([{ ok: true }, { ok: true }]);

    // nothing of A's fact: the step is still started, no event kept, nothing queued, no dead letter
    const wfA = (await apiA.get(`/v1/workflows/${scanA.workflow_id}`)).body;
    expect(wfA.steps.find((s: Json) => s.name === 'plan api')).toMatchObject({ status: 'started' });
    expect(wfA.steps.find((s: Json) => s.name === 'plan api').plan ?? null).toBeNull();
    expect(count('SELECT COUNT(*) AS n FROM events WHERE org_id = ?', a.org_id)).toBe(historyAfterStart);
    expect(count('SELECT COUNT(*) AS n FROM outbox WHERE org_id = ?', a.org_id)).toBeLessThanOrEqual(outboxBefore);
    expect(count('SELECT COUNT(*) AS n FROM dead_letters')).toBe(lettersBefore);
    const listed = (await apiA.get('/v1/events?limit=500')).body.data as Json[];
    expect(listed.filter((e) => e.type === 'com.svc.drift.detected.v1')).toEqual([]);
    expect(historyAfterStart).toBeGreaterThanOrEqual(eventsBefore);
    // the history never holds an event over 256 KiB
    expect(count('SELECT COUNT(*) AS n FROM events WHERE length(CAST(body AS BLOB)) + length(CAST(route AS BLOB)) > 262144')).toBe(0);

    // B's drift is kept and delivered
    const wfB = await waitWf(apiB, scanB.workflow_id);
    expect(wfB.status).toBe('succeeded');
    const driftB = (await apiB.get('/v1/events?type=com.svc.drift.detected.v1')).body.data as Json[];
    expect(driftB).toHaveLength(1);
    await waitFor(() => rcv.at('b').some((r) => r.json?.type === 'com.svc.drift.detected.v1'), 5000, "B's drift delivery");

    // A's runner sends a plan within the limit: the step ends, one drift event
    expect(await runner.send(jobA, [{ status: 'succeeded', plan: { changes: changes.slice(0, 100) } }])).toEqual([{ ok: true }]);
    expect((await waitWf(apiA, scanA.workflow_id)).status).toBe('succeeded');
    expect((await apiA.get('/v1/events?type=com.svc.drift.detected.v1')).body.data as Json[]).toHaveLength(1);
    runner.policy = autoAnswer;
  }, 60_000);

  it('a set-aside event is not resent (409 conflict); dead letters past the retention are pruned on the engine clock', async () => {
    const db = svc.server.ctx.db;
    const hook = (await apiA.get('/v1/orgs/current/webhooks')).body[0].webhook_id;
    // an event kept from before the limits, and set aside by the relay as unpublishable
    const id = rid('evt');
    const body = JSON.stringify({
      specversion: '1.0',
      id,
      source: '//x/ctl-api',
      type: 'com.svc.workflow.lifecycle.v1',
      subject: `${a.org_id}/workflow/wf_x/started`,
      data: {},
    });
    insertEvent(db, {
      event_id: id,
      org_id: a.org_id,
      type: 'com.svc.workflow.lifecycle.v1',
      subject: `${a.org_id}/workflow/wf_x/started`,
      body,
      route: '{}',
      created_ms: clock.now(),
    });
    setAsideEvent(
      db,
      {
        seq: -1,
        event_id: id,
        org_id: a.org_id,
        subject: 'svc.events.x',
        type: 'com.svc.workflow.lifecycle.v1',
        body,
        route: '{}',
        batch: null,
        progress: [],
      },
      'event over the limit',
    );
    const resend = await apiA.post(`/v1/orgs/current/webhooks/${hook}/resend`, { event_id: id });
    expect(resend.status, resend.text).toBe(409);
    expect(resend.body).toMatchObject({ error: 'conflict' });
    expect(resend.body.message).toMatch(/set aside/);
    expect(rcv.at('a').some((r) => r.json?.id === id)).toBe(false);
    // a kept event that was not set aside is resent as before
    const other = ((await apiA.get('/v1/events?limit=1')).body.data as Json[])[0];
    expect((await apiA.post(`/v1/orgs/current/webhooks/${hook}/resend`, { event_id: other.id })).status).toBe(200);

    expect(count('SELECT COUNT(*) AS n FROM dead_letters WHERE id = ?', id)).toBe(1);
    clock.advance(RETENTION_MS - 60_000);
    expect(count('SELECT COUNT(*) AS n FROM dead_letters WHERE id = ?', id)).toBe(1); // not yet
    clock.advance(5 * 60_000);
    await waitFor(() => count('SELECT COUNT(*) AS n FROM dead_letters') === 0, 5000, 'the dead letters to be pruned');
  }, 30_000);
});
