// `svc listen` as a child process receiving real deliveries from a real svc (CONTRACT 7, new in
// 0.3): one line per delivery of at most 160 characters for every event type svc sends here
// (workflow, step, approval, health, runner, watchdog, ping), the marks of a resend and a
// recovery, --json (each whole event), --verbose (headers, signatures cut to 8 characters); the
// default port 9000 and a taken port (exit 1 naming it and --port).
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { get, post, waitStep, waitWf } from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';
import { BIN, ROOT } from '../helpers/paths.ts';

type Json = any;

const SECRET = 'whsec_bGlzdGVuLXN2Yy10ZXN0LXNlY3JldA==';
const MAX = 160;
const HOOKS = '/v1/orgs/current/webhooks';

interface ListenChild {
  child: ChildProcess;
  url: string;
  out: () => string;
  err: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}
const running = new Set<ChildProcess>();

/** `svc listen ARGS` with TZ=UTC; resolves with its URL once it prints `listening on` (stdout, or stderr with --json). */
function spawnListen(args: string[]): {
  p: Promise<ListenChild>;
  child: ChildProcess;
  exited: ListenChild['exited'];
  out: () => string;
  err: () => string;
} {
  const env: NodeJS.ProcessEnv = { ...process.env, TZ: 'UTC' };
  for (const k of Object.keys(env)) if (k.startsWith('SVC_')) delete env[k];
  const child = spawn(process.execPath, [BIN, 'listen', ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d));
  child.stderr!.on('data', (d: Buffer) => (stderr += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => {
      running.delete(child);
      resolve({ code, signal });
    }),
  );
  const out = () => stdout;
  const err = () => stderr;
  const p = (async () => {
    const url = await waitFor(
      () => /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout + stderr)?.[1] ?? null,
      20_000,
      `svc listen ${args.join(' ')} to listen (${stderr})`,
    );
    return { child, url, out, err, exited };
  })();
  return { p, child, exited, out, err };
}

const lines = (s: string) => s.split('\n').filter((l) => l.length > 0);
const cps = (s: string) => [...s].length;

describe('svc listen with a real svc', () => {
  let svc: TestService;
  let org: OrgCreds;
  let api: ApiClient;
  let rx: Receiver;
  let plain: ListenChild;
  let json: ListenChild;
  let verbose: ListenChild;
  const hooks: Record<string, string> = {};
  let badHost = '';

  beforeAll(async () => {
    rx = await startReceiver();
    svc = await startService();
    org = svc.createOrg('listen');
    api = svc.api(org);
    [plain, json, verbose] = await Promise.all([
      spawnListen(['--port', '0', '--secret', SECRET]).p,
      spawnListen(['--port', '0', '--json']).p,
      spawnListen(['--port', '0', '--secret', SECRET, '--verbose']).p,
    ]);
    for (const [name, l] of [
      ['plain', plain],
      ['json', json],
      ['verbose', verbose],
    ] as const) {
      hooks[name] = (
        await post(api, HOOKS, { webhook_url: `${l.url}/hooks/${name}`, secret: SECRET, interests: { all_events: true } })
      ).webhook_id;
    }
    rx.set('bad', { status: 500 });
    hooks.bad = (await post(api, HOOKS, { webhook_url: rx.hook('bad') })).webhook_id;
    badHost = new URL(rx.url).host;
  }, 60_000);

  afterAll(async () => {
    for (const c of running) c.kill('SIGINT');
    await svc?.stop();
    await rx?.close();
  });

  /** A producer's fact through the server's bus (CONTRACT 5.2); expects {ok: true}. */
  async function fact(family: string, id: string, body: unknown): Promise<void> {
    const m = await svc.server.bus.request(`svc.ingest.${org.org_id}.${family}.${id}`, JSON.stringify(body), { timeoutMs: 10_000 });
    expect(m.json()).toMatchObject({ ok: true });
  }

  it('prints one line of at most 160 characters per delivery of every type, with the marks of a resend and a recovery; --json the ' +
    'whole events; --verbose the headers, signatures cut', async () => {
    // workflow and step events: an install's provision (the local runner)
    const app = await post(api, '/v1/apps', { name: rid('app') });
    const cfg = (image: string) => ({ components: [{ name: 'api', labels: { tier: 'web' }, values: { image } }] });
    const v1 = await post(api, `/v1/apps/${app.app_id}/configs`, cfg('api:1'));
    const v2 = await post(api, `/v1/apps/${app.app_id}/configs`, cfg('api:2'));
    const install = await post(api, '/v1/installs', {
      app_id: app.app_id,
      name: 'eu-1',
      app_config_id: v2.app_config_id,
      labels: { ring: 'canary' },
    });
    const [prov] = await get(api, `/v1/installs/${install.install_id}/workflows`);
    expect((await waitWf(api, prov.workflow_id)).status).toBe('succeeded');
    const inst = await get(api, `/v1/installs/${install.install_id}`);

    // approval events: a branch run's group plan, requested and approved
    const branch = await post(api, `/v1/apps/${app.app_id}/branches`, {
      name: 'main',
      install_groups: [{ name: 'canary', selector: { match_labels: { ring: 'canary' } } }],
    });
    const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: v1.app_config_id,
      skip_builds: true,
    });
    const { step } = await waitStep(api, run.workflow_id, 'plan install group: canary', 'awaiting_approval');
    await post(api, `/v1/workflows/${run.workflow_id}/steps/${step.step_id}/approval`, { response: 'approved', note: 'ok' }, 200);
    await waitWf(api, run.workflow_id, 30_000);

    // health and runner events, and a producer's step with a name and an error as long as they may be
    await fact('health', inst.install_id, {
      component_id: inst.components[0].component_id,
      verdict: 'unhealthy',
      reason: `p99 latency 2s ${'r'.repeat(900)}`,
    });
    await fact('runners', inst.runner_id, { type: 'inactive', reason: `rotated\n${'x'.repeat(900)}` });
    const W = rid('wfx');
    await fact('workflows', W, {
      kind: 'workflow',
      transition: 'started',
      workflow: { id: W, type: 'manual_deploy', owner_id: inst.install_id, owner_type: 'installs' },
    });
    await fact('workflows', W, {
      kind: 'workflow_step',
      transition: 'failed',
      workflow: { id: W, type: 'manual_deploy', owner_id: inst.install_id, owner_type: 'installs' },
      step: {
        id: rid('stp'),
        name: `deploy ${'ü'.repeat(150)}\n😀 ${'n'.repeat(40)}`,
        idx: 0,
        component_id: inst.components[0].component_id,
      },
      error: `boom\n${'e'.repeat(3990)}`,
    });

    // the watchdog: the failing webhook's 5th failure in a row (each fact is an event to it too)
    for (let i = 0; i < 5; i++) {
      const w = rid('wfx');
      await fact('workflows', w, {
        kind: 'workflow',
        transition: 'started',
        workflow: { id: w, type: 'manual_deploy', owner_id: 'inst_ext', owner_type: 'installs' },
      });
    }
    await waitFor(() => plain.out().includes('webhook.delivery'), 20_000, 'the watchdog event at the listener');

    // a ping, a resend and a recovery to the plain listener
    expect((await api.post(`${HOOKS}/${hooks.plain}/ping`)).body).toMatchObject({ delivered: true });
    const events = (await get(api, '/v1/events?limit=500')).data as Json[];
    const provisioned = events.find((e) => e.subject === `${org.org_id}/workflow/${prov.workflow_id}/succeeded`);
    expect(provisioned).toBeDefined();
    expect((await api.post(`${HOOKS}/${hooks.plain}/resend`, { event_id: provisioned.id })).body).toMatchObject({ delivered: true });
    expect((await api.post(`${HOOKS}/${hooks.verbose}/resend`, { event_id: provisioned.id })).body).toMatchObject({ delivered: true });
    const recovery = (await post(api, `${HOOKS}/${hooks.plain}/recover`, { since: '1h', only_failed: false }, 202)) as {
      recovery_id: string;
      events: number;
    };
    expect(recovery.events).toBeGreaterThan(10);
    await waitFor(
      async () => (await get(api, `${HOOKS}/${hooks.plain}/recoveries/${recovery.recovery_id}`)).state === 'done',
      30_000,
      'the recovery',
    );
    await svc.settled(20_000);

    // ---- the plain listener: every line at most 160 characters; each delivery one line
    const out = lines(plain.out());
    expect(out[0]).toMatch(/^listening on http:\/\/127\.0\.0\.1:\d+ \(verifying/);
    for (const l of out) expect(cps(l), l).toBeLessThanOrEqual(MAX);
    // every event but a ping and an example has its sequence (CONTRACT 10.1), `seq N` after the subject:
    // the patterns below read the lines without it
    expect(out.filter((l) => / {2}seq [1-9]\d*( {2}|$)/.test(l)).length).toBeGreaterThan(10);
    // an unordered webhook's events may arrive out of sequence: listen then says what it has not seen yet,
    // two lines each (a notice and the recovery that fills the gap), which are not deliveries
    const notices = out.filter((l) => l.startsWith('not seen '));
    expect(out.filter((l) => l.startsWith('  recover with: svc webhooks recover '))).toHaveLength(notices.length);
    const deliveries = out
      .slice(1)
      .filter((l) => !l.startsWith('not seen ') && !l.startsWith('  recover with: '))
      .map((l) => l.replace(/ {2}seq [1-9]\d*(?= {2}|$)/, ''));
    for (const l of deliveries) expect(l, l).toMatch(/^\d\d:\d\d:\d\d {2}\/hooks\/plain {2}[a-z_.]+ {2}\S/);
    const typeOf = (l: string) => l.split('  ')[2];
    const types = new Set(deliveries.map(typeOf));
    for (const t of [
      'workflow.lifecycle',
      'workflow_step.lifecycle',
      'workflow_step.approval',
      'component.health',
      'runner.inactive',
      'webhook.delivery',
      'webhook.ping',
    ])
      expect(types, t).toContain(t);
    for (const l of deliveries) expect(typeOf(l)).not.toMatch(/^com\.svc\.|\.v\d+$/);
    // a line's time is the time it arrived (TZ=UTC here)
    const [h, m, sec] = deliveries.at(-1)!.slice(0, 8).split(':').map(Number);
    const now = new Date();
    const ago = (now.getUTCHours() * 3600 + now.getUTCMinutes() * 60 + now.getUTCSeconds() - (h * 3600 + m * 60 + sec) + 86_400) % 86_400;
    expect(ago).toBeLessThan(120);
    // the watchdog event: the failure streak and the host, never the path, query or secret
    const watchdog = deliveries.find((l) => typeOf(l) === 'webhook.delivery' && !l.includes('[recovery'))!;
    expect(watchdog).toMatch(
      new RegExp(
        `  webhook\\.delivery  org_\\w+…[a-z0-9_/]*${hooks.bad}/failing  failures: 5 in a row  host: ${badHost.replace(/\./g, '\\.')}(  |$)`,
      ),
    );
    expect(watchdog).not.toContain('/h/bad');
    // the approval request names its step
    expect(deliveries.find((l) => l.includes('/requested') && typeOf(l) === 'workflow_step.approval')).toContain(
      'step: "plan install group: canary"',
    );
    // the producer's long step: cut to fit, on one line
    const longStep = deliveries.filter(
      (l) => typeOf(l) === 'workflow_step.lifecycle' && l.includes('/failed  step: "deploy üü') && !l.includes('[recovery'),
    );
    expect(longStep).toHaveLength(1);
    expect(longStep[0]).toMatch(/step: "deploy ü+…/);
    // the marks: the resend once, the recovery on each event it sent, nothing else marked
    const resent = deliveries.filter((l) => l.includes('  [resend]'));
    expect(resent).toHaveLength(1);
    expect(resent[0]).toContain(`${prov.workflow_id}/succeeded  [resend]  workflow: provision`);
    const recovered = deliveries.filter((l) => l.includes('  [recovery]  '));
    expect(recovered.length).toBe(recovery.events);
    expect(recovered.find((l) => l.includes(`${prov.workflow_id}/succeeded`))).toMatch(/ {2}\[recovery\] {2}workflow: provision( {2}|$)/);
    expect(deliveries.filter((l) => /\[(resend|recovery|example)/.test(l))).toHaveLength(1 + recovery.events);
    for (const l of deliveries) expect(l).not.toMatch(/verified|BAD SIGNATURE/); // every one verified (both signatures): nothing to add
    expect(plain.out() + plain.err()).not.toContain(SECRET);

    // ---- --json: stdout is each whole event, one JSON line each, as svc keeps it
    const jsonLines = lines(json.out());
    const parsed = jsonLines.map((l) => JSON.parse(l));
    expect(parsed.length).toBeGreaterThan(20);
    // the same events reached every listener: the plain one had a ping, a resend and the recovery more, each one line
    expect(deliveries).toHaveLength(parsed.length + 2 + recovery.events);
    const byId = new Map(events.map((e) => [e.id, e]));
    for (const e of parsed) if (byId.has(e.id)) expect(e).toEqual(byId.get(e.id));
    expect(parsed.some((e) => e.type === 'com.svc.webhook.delivery.v1' && e.data.delivery.consecutive_failures === 5)).toBe(true);
    expect(json.err()).toMatch(/^listening on /);

    // ---- --verbose: each line followed by its headers, signatures cut to their first 8 characters
    const vout = lines(verbose.out());
    for (const l of vout) expect(cps(l), l).toBeLessThanOrEqual(MAX);
    const sigs = vout.filter((l) => l.startsWith('    webhook-signature: '));
    const svcSigs = vout.filter((l) => /^ {4}x-svc-signature: /i.test(l));
    expect(sigs.length).toBeGreaterThan(20);
    expect(sigs.length).toBe(vout.filter((l) => /^\d\d:\d\d:\d\d {2}\/hooks\/verbose/.test(l)).length);
    for (const l of sigs) expect(l).toMatch(/^ {4}webhook-signature: v1,[A-Za-z0-9+/]{5}…$/);
    for (const l of svcSigs) expect(l).toMatch(/^ {4}x-svc-signature: [0-9a-f]{8}…$/i);
    expect(vout.some((l) => /^ {4}webhook-id: \S+$/.test(l))).toBe(true);
    // the resend: marked on its line, and X-Svc-Recovery among its headers
    const at = vout.findIndex((l) => l.includes('  [resend]  '));
    expect(vout[at]).toMatch(new RegExp(`${prov.workflow_id}/succeeded {2}(seq \\d+ {2})?\\[resend\\]`));
    expect(vout.slice(at + 1, at + 12)).toContain('    x-svc-recovery: resend');
    expect(vout.some((l) => /^ {4}content-type: application\/cloudevents\+json/.test(l))).toBe(true);
    expect(verbose.out()).not.toContain(SECRET);
  }, 120_000);
});

describe('svc listen --port', () => {
  it('defaults to 9000 (its help says so); binds 9000 when it is free, else exits 1 naming it and --port', async () => {
    const help = spawnListen(['--help']);
    expect((await help.exited).code).toBe(0);
    expect(help.out()).toMatch(/--port <port>\s+port to listen on \(0 picks a free one\) \(default: 9000\)/);
    expect(help.out()).toMatch(/--verbose/);

    const free = await new Promise<boolean>((resolve) => {
      const s = http.createServer();
      s.once('error', () => resolve(false));
      s.listen(9000, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    const l = spawnListen([]);
    if (free) {
      const { url } = await l.p;
      expect(url).toBe('http://127.0.0.1:9000');
      l.child.kill('SIGINT');
      expect(await l.exited).toEqual({ code: 0, signal: null });
    } else {
      expect((await l.exited).code).toBe(1);
      expect(l.err()).toBe('error: port 9000 is in use; pick another with --port\n');
    }
  });

  it('on a taken port: exit 1 with one line naming the port and --port', async () => {
    const taken = http.createServer();
    await new Promise<void>((ok) => taken.listen(0, '127.0.0.1', ok));
    const port = (taken.address() as AddressInfo).port;
    try {
      for (const extra of [[], ['--json'], ['--secret', SECRET, '--verbose']]) {
        const l = spawnListen(['--port', String(port), ...extra]);
        expect((await l.exited).code).toBe(1);
        expect(l.err()).toBe(`error: port ${port} is in use; pick another with --port\n`);
        expect(l.out()).toBe('');
      }
    } finally {
      await new Promise<void>((ok) => taken.close(() => ok()));
    }
  });
});
