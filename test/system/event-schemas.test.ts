// Every event svc delivers validates against the JSON Schema its `dataschema` names (CONTRACT 10.3,
// issue 54): a representative run end to end through a real svc, on the in-process bus and on a
// real nats-server: an install provisioned (workflow and step events), a branch run with an
// approval and a verification URL, a drift scan whose plan has changes, health verdicts, a runner
// inactive then unhealthy (the engine's clock advanced by the test), a ping, a receiver failing
// until the delivery watchdog speaks of it, and an example of every type. Each body a receiver got
// is validated with ajv (draft 2020-12, strict) against the schema fetched from its own
// `dataschema` URL, and with the catalog's zod schema (the same source).
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ValidateFunction } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.ts';
import { FakeRunner, autoAnswer } from '../helpers/fake-runner.ts';
import { rid } from '../helpers/ids.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, waitFor, type TestService } from '../helpers/service.ts';
import { appWithThreeConfigs, healthVerdict, installWith, post, waitStep, waitWf } from '../helpers/workflows.ts';
import { EVENT_TYPES } from '../../src/events/catalog.ts';

type Json = any;

const HOOKS = '/v1/orgs/current/webhooks';
const HEALTH_EVERY_MS = 60_000;
const cfg = (image: string) => ({ sandbox: { size: 'small' }, components: [{ name: 'api', values: { image } }, { name: 'worker' }] });
const modes = ['memory', 'nats'] as const;
const haveNats = findNatsServer() !== null;

describe.each(modes)('every delivered event validates against the schema at its dataschema (%s bus)', (mode) => {
  const skip = mode === 'nats' && !haveNats;
  const clock = new ManualClock(Date.now());
  let nats: NatsServerHandle | null = null;
  let svc: TestService;
  let rx: Receiver;
  let runner: FakeRunner;

  beforeAll(async () => {
    if (skip) return;
    if (mode === 'nats') nats = await startNatsServer();
    svc = await startService({ natsUrl: nats?.url ?? null, localRunner: false, runnerHealthIntervalMs: HEALTH_EVERY_MS }, { clock });
    expect(svc.server.bus.kind).toBe(mode);
    rx = await startReceiver();
    runner = new FakeRunner(svc.server.bus);
  }, 30_000);
  afterAll(async () => {
    if (skip) return;
    runner?.stop();
    await svc?.stop();
    await rx?.close();
    await nats?.stop();
  });

  it.skipIf(skip)(
    'workflows, steps, approval, drift, health, runners, ping, watchdog, verification request, examples',
    { timeout: 90_000 },
    async () => {
      const org = svc.createOrg(rid('org'));
      const O = org.org_id;
      const api = svc.api(org);
      await post(api, HOOKS, { webhook_url: rx.hook(`${O}-all`), interests: { all_events: true } });
      rx.set(`${O}-down`, { status: 503 });
      const down = await post(api, HOOKS, { webhook_url: rx.hook(`${O}-down`), interests: { resources: { installs: {} } } });
      rx.set(`${O}-verify`, { answer: () => ({ status: 200, body: '{"verdict":"pass"}' }) });

      // an install (provision: workflow and step events), then a branch run: approval, deploy, verification
      const { app, v1, v2 } = await appWithThreeConfigs(api, rid('shop'), cfg);
      const install = await installWith(api, rid('inst'), app.app_id, v1.app_config_id, { ring: 'g1' });
      const branch = await post(api, `/v1/apps/${app.app_id}/branches`, {
        name: 'main',
        install_groups: [{ name: 'g1', install_ids: [install.install_id] }],
      });
      const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
        app_config_id: v2.app_config_id,
        skip_builds: true,
        verification: [{ url: rx.hook(`${O}-verify`) }],
      });
      const { step } = await waitStep(api, run.workflow_id, 'plan install group: g1', 'awaiting_approval');
      await post(api, `/v1/workflows/${run.workflow_id}/steps/${step.step_id}/approval`, { response: 'approved', note: 'ship it' }, 200);
      expect((await waitWf(api, run.workflow_id, 30_000)).status).toBe('succeeded');

      // a drift scan whose plan of the api has a change
      const apiComp = install.components.find((c: Json) => c.name === 'api').component_id;
      runner.policy = (job) =>
        job.operation === 'component.plan' && job.component_id === apiComp
          ? [{ status: 'started' }, { status: 'succeeded', plan: { changes: [{ address: 'helm_release.api', action: 'update' }] } }]
          : autoAnswer(job);
      const scan = await post(api, `/v1/installs/${install.install_id}/drift-scans`, {});
      expect((await waitWf(api, scan.workflow_id)).status).toBe('succeeded');
      runner.policy = autoAnswer;

      // health: the api degraded (component unhealthy, install degraded), then healthy (both recovered)
      await healthVerdict(svc, O, install, 'api', 'degraded', 'p99 high');
      await healthVerdict(svc, O, install, 'api', 'healthy');

      // the install's runner: inactive, then a heart-beat, then a check without one (unhealthy)
      const R: string = install.runner_id;
      const say = async (body: unknown) =>
        expect((await svc.server.bus.request(`svc.ingest.${O}.runners.${R}`, JSON.stringify(body), { timeoutMs: 5000 })).json()).toEqual({
          ok: true,
        });
      await say({ type: 'inactive', reason: 'scaled to zero' });
      await say({ type: 'heartbeat', process: 'running' });
      clock.advance(HEALTH_EVERY_MS);
      clock.advance(HEALTH_EVERY_MS);

      // a ping; a receiver that fails 5 times in a row (pings count): the watchdog's `failing` to the others
      const all = (await api.get(HOOKS)).body.find((w: Json) => w.webhook_url === rx.hook(`${O}-all`)).webhook_id;
      expect((await api.post(`${HOOKS}/${all}/ping`)).body.delivered).toBe(true);
      for (let i = 0; i < 5; i++) expect((await api.post(`${HOOKS}/${down.webhook_id}/ping`)).body.delivered).toBe(false);

      // an example of every type
      for (const type of EVENT_TYPES.keys()) expect((await api.post(`${HOOKS}/${all}/examples`, { type })).body.delivered).toBe(true);

      const live = () => rx.at(`${O}-all`).filter((r) => !r.json.svcexample);
      const want = [...EVENT_TYPES.keys()].filter((t) => t !== 'com.svc.rollout.verification.v1');
      await waitFor(
        () => want.every((t) => live().some((r) => r.json.type === t)),
        20_000,
        () => `every type delivered live (missing ${want.filter((t) => !live().some((r) => r.json.type === t)).join(', ')})`,
      );
      await svc.settled();

      const bodies = [...rx.at(`${O}-all`), ...rx.at(`${O}-verify`)].map((r) => r.json);
      expect(bodies.filter((b) => b.type === 'com.svc.rollout.verification.v1' && !b.svcexample).length).toBeGreaterThan(0);
      expect(bodies.filter((b) => b.svcexample)).toHaveLength(EVENT_TYPES.size);
      const ajv = new Ajv2020({ strict: true, allErrors: true });
      const validators = new Map<string, ValidateFunction>();
      const invalid: string[] = [];
      for (const b of bodies) {
        expect(b.dataschema, b.type).toBe(`${svc.url}/v1/event-types/${b.type}/schema`);
        let v = validators.get(b.dataschema);
        if (!v) {
          const res = await fetch(b.dataschema); // no token: the schema is public
          expect(res.status).toBe(200);
          v = ajv.compile(await res.json());
          validators.set(b.dataschema, v);
        }
        if (!v(b)) invalid.push(`${b.type} ${b.subject}: ${ajv.errorsText(v.errors)}`);
        const z = EVENT_TYPES.get(b.type)!.schema.safeParse(b);
        if (!z.success) invalid.push(`${b.type} ${b.subject} (zod): ${z.error.message}`);
      }
      expect(invalid).toEqual([]);
      // what was validated: every type, and the transitions this run made
      const seen = new Set(bodies.filter((b) => !b.svcexample).map((b) => `${b.svckind}/${b.svctransition}`));
      for (const k of [
        'workflow/started',
        'workflow/succeeded',
        'workflow_step/started',
        'workflow_step/succeeded',
        'workflow_step_approval/requested',
        'workflow_step_approval/approved',
        'drift_detected/detected',
        'component_health/unhealthy',
        'component_health/recovered',
        'install_health/degraded',
        'install_health/recovered',
        'runner_inactive/inactive',
        'runner_unhealthy/unhealthy',
        'webhook_ping/ping',
        'webhook_delivery/failing',
        'rollout_verification/requested',
      ])
        expect(seen, k).toContain(k);
      expect(bodies.length).toBeGreaterThan(40);
    },
  );
});
