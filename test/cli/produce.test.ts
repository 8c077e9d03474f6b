// `svc produce health|workflow` (CONTRACT 7, 5.2): the real binary sends a producer fact to a real
// svc on a real nats-server and prints the engine's answer; the fact's events are what a NATS
// producer's would be. Exit 0 on {"ok": true}, 1 on a refused fact or no answer, 2 on bad usage.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCliProcess, type CliResult } from '../helpers/cli.ts';
import { startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startService, waitFor, type OrgCreds, type TestService } from '../helpers/service.ts';

const both = (r: CliResult) => `${r.stdout}\n${r.stderr}`;

describe('svc produce against svc on NATS', () => {
  let nats: NatsServerHandle;
  let svc: TestService;
  let org: OrgCreds;
  let env: Record<string, string>;
  let installId: string;
  let componentId: string;

  beforeAll(async () => {
    nats = await startNatsServer();
    svc = await startService({ natsUrl: nats.url });
    org = svc.createOrg('produce');
    env = { SVC_ORG_ID: org.org_id, SVC_NATS_URL: nats.url };
    const api = svc.api(org);
    const app = (await api.post('/v1/apps', { name: 'shop' })).body;
    await api.post(`/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api', values: { image: 'api:1' } }] });
    const inst = (await api.post('/v1/installs', { app_id: app.app_id, name: 'eu-1' })).body;
    installId = inst.install_id;
    componentId = inst.components[0].component_id;
    await waitFor(
      async () => (await svc.events(org.org_id)).some((e) => e.svckind === 'workflow' && e.svctransition === 'succeeded'),
      20_000,
      'the provision',
    );
  }, 40_000);
  afterAll(async () => {
    await svc?.stop();
    await nats?.stop();
  });

  it('health: prints {"ok":true}, exit 0, and the verdict becomes the component unhealthy event', async () => {
    const r = await runCliProcess(
      ['produce', 'health', installId, '--component', componentId, '--verdict', 'unhealthy', '--reason', 'p99 latency 2s', '--json'],
      env,
    );
    expect(r.code, both(r)).toBe(0);
    expect(r.json).toEqual({ ok: true });
    const ev = await waitFor(
      async () => (await svc.events(org.org_id)).find((e) => e.type === 'com.svc.component.health.v1' && e.svctransition === 'unhealthy'),
      10_000,
      'the unhealthy event',
    );
    expect(JSON.stringify(ev.data)).toContain('p99 latency 2s');
    // the human form names the subject it sent on
    const again = await runCliProcess(
      ['produce', 'health', installId, '--component', componentId, '--verdict', 'healthy', '--nats', nats.url, '--org', org.org_id],
      {},
    );
    expect(again.code, both(again)).toBe(0);
    expect(again.stdout.trim()).toBe(`svc.ingest.${org.org_id}.health.${installId}: {"ok":true}`);
  });

  it('a fact the engine refuses: the answer printed, exit 1', async () => {
    const r = await runCliProcess(['produce', 'health', installId, '--component', 'cmp_nope', '--verdict', 'degraded', '--json'], env);
    expect(r.code, both(r)).toBe(1);
    expect(r.json.ok).toBe(false);
    expect(typeof r.json.error).toBe('string');
    const unknownOrg = await runCliProcess(
      ['produce', 'health', installId, '--component', componentId, '--verdict', 'degraded', '--json'],
      { ...env, SVC_ORG_ID: 'org_nope' },
    );
    expect(unknownOrg.code).toBe(1);
    expect(unknownOrg.json).toMatchObject({ ok: false, error: 'unknown org' });
  });

  it('workflow: a transition of a workflow svc did not start, from --data or stdin', async () => {
    const wf = { id: 'wf_external_1', type: 'manual_deploy', owner_id: installId, owner_type: 'installs' };
    const started = await runCliProcess(
      ['produce', 'workflow', wf.id, '--data', JSON.stringify({ kind: 'workflow', transition: 'started', workflow: wf }), '--json'],
      env,
    );
    expect(started.code, both(started)).toBe(0);
    expect(started.json).toEqual({ ok: true });
    const step = JSON.stringify({
      kind: 'workflow_step',
      transition: 'started',
      workflow: wf,
      step: { id: 'st_external_1', name: 'deploy api', idx: 0 },
    });
    const viaStdin = await runCliProcess(['produce', 'workflow', wf.id, '--data', '-', '--json'], env, step);
    expect(viaStdin.code, both(viaStdin)).toBe(0);
    const events = await waitFor(
      async () => {
        const evs = (await svc.events(org.org_id)).filter((e) => JSON.stringify(e.data).includes(wf.id));
        return evs.length >= 2 ? evs : undefined;
      },
      10_000,
      'the external workflow events',
    ).catch(async (err) => {
      throw new Error(`${err.message}: ${JSON.stringify((await svc.events(org.org_id)).map((e) => [e.type, e.subject]))}`);
    });
    expect(events.map((e) => [e.type, e.svctransition])).toEqual([
      ['com.svc.workflow.lifecycle.v1', 'started'],
      ['com.svc.workflow_step.lifecycle.v1', 'started'],
    ]);
  });

  it('a workflow of a type svc does not classify: stored, {"ok":true,"warning":…} naming the known types, exit 0, counted unclassified (NATS)', async () => {
    const wf = { id: 'wf_external_deploy', type: 'deploy', owner_id: installId, owner_type: 'installs' };
    const r = await runCliProcess(
      ['produce', 'workflow', wf.id, '--data', JSON.stringify({ kind: 'workflow', transition: 'started', workflow: wf }), '--json'],
      env,
    );
    expect(r.code, both(r)).toBe(0);
    expect(r.json).toEqual({
      ok: true,
      warning: expect.stringMatching(/^unknown workflow type deploy; known types: provision, .*deploy_components/),
    });
    const metrics = await (await fetch(`${svc.url}/metrics`)).text();
    expect(metrics).toMatch(/^svc_ingest_messages_total\{result="unclassified"\} 1$/m);
    expect((await svc.api(org).get(`/v1/workflows/${wf.id}`)).body).toMatchObject({ type: 'deploy', status: 'started' });
    expect((await svc.events(org.org_id)).filter((e) => JSON.stringify(e.data).includes(wf.id))).toEqual([]);
  });

  it('usage errors exit 2 before sending; no server is a clear error, exit 1', async () => {
    const noNats = await runCliProcess(['produce', 'health', installId, '--component', componentId, '--verdict', 'healthy'], {
      SVC_ORG_ID: org.org_id,
    });
    expect(noNats.code).toBe(2);
    expect(noNats.stderr).toMatch(/needs --nats/);
    const badVerdict = await runCliProcess(['produce', 'health', installId, '--component', componentId, '--verdict', 'sick'], env);
    expect(badVerdict.code).toBe(2);
    const notJson = await runCliProcess(['produce', 'workflow', 'wf_x', '--data', '{nope'], env);
    expect(notJson.code).toBe(2);
    const down = await runCliProcess(
      ['produce', 'health', installId, '--component', componentId, '--verdict', 'healthy', '--nats', 'nats://127.0.0.1:1'],
      { SVC_ORG_ID: org.org_id },
    );
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/cannot reach NATS at nats:\/\/127\.0\.0\.1:1/);
  });
});
