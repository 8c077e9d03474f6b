// `svc trigger TYPE --webhook ID` (CONTRACT 10.3, issue 54): an example of every type svc sends
// arrives at `svc listen --secret` (a child process, which answers 401 to a delivery whose
// signature does not verify), verified and marked as an example, and is absent from the history.
// Without TYPE it lists the types; an unknown type exits 1 naming the known ones; no --webhook is a
// usage error (exit 2) that contacts nothing.
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.ts';
import { BIN, ROOT } from '../helpers/paths.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { EVENT_TYPES } from '../../src/events/catalog.ts';

type Json = any;
const SECRET = 'whsec_dHJpZ2dlci10ZXN0LXNlY3JldC1ieXRlcw==';
const TYPES = [...EVENT_TYPES.keys()];

let svc: TestService;
let org: OrgCreds;
let api: ApiClient;
let listen: ChildProcess;
let out = '';
let err = '';
let hookId = '';
let env: Record<string, string>;

beforeAll(async () => {
  svc = await startService();
  org = svc.createOrg('trigger');
  api = svc.api(org);
  const childEnv: NodeJS.ProcessEnv = { ...process.env, TZ: 'UTC' };
  for (const k of Object.keys(childEnv)) if (k.startsWith('SVC_')) delete childEnv[k];
  listen = spawn(process.execPath, [BIN, 'listen', '--port', '0', '--secret', SECRET, '--json'], {
    cwd: ROOT,
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  listen.stdout!.on('data', (d: Buffer) => (out += d));
  listen.stderr!.on('data', (d: Buffer) => (err += d));
  const url = await waitFor(() => /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out + err)?.[1] ?? null, 20_000, 'svc listen to listen');
  // a subscription that admits none of these types: an example goes whatever the subscription
  const created = await api.post('/v1/orgs/current/webhooks', {
    webhook_url: `${url}/hooks/examples`,
    secret: SECRET,
    interests: { resources: { installs: { ops: ['provision'], outcome: 'none' } } },
  });
  expect(created.status, created.text).toBe(201);
  hookId = created.body.webhook_id;
  env = { SVC_API_URL: svc.url, SVC_API_TOKEN: org.api_token, SVC_ORG_ID: org.org_id };
}, 60_000);

afterAll(async () => {
  listen?.kill('SIGINT');
  await svc?.stop();
});

describe('svc trigger', () => {
  it('every type arrives at svc listen --secret, verified, marked svcexample, and is absent from the history', async () => {
    for (const type of TYPES) {
      const r = await runCli(['trigger', type, '--webhook', hookId], env);
      expect(r.code, `${type}: ${r.stdout}${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(/delivered:\s+yes/);
    }
    const events = (): Json[] =>
      out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l));
    await waitFor(() => events().length >= TYPES.length, 10_000, 'every example printed by svc listen');
    const got = events();
    expect(got.map((e) => e.type)).toEqual(TYPES);
    for (const e of got) {
      expect(e.svcexample).toBe(true);
      expect(e.svcorgid).toBe(org.org_id);
      expect(e).not.toHaveProperty('sequence');
      // svc listen says on stderr which signatures verified (it refused with 401 any that did not)
      expect(err).toContain(`${e.id}  verified: X-Svc-Signature, webhook-signature`);
      expect((await api.get(`/v1/events/${e.id}`)).status).toBe(404);
    }
    const kept = (await api.get('/v1/events')).body.data as Json[];
    expect(kept.filter((e) => e.svcexample)).toEqual([]);
  });

  it('--json prints the answer; without TYPE it lists the types', async () => {
    const r = await runCli(['trigger', 'com.svc.webhook.ping.v1', '--webhook', hookId, '--json'], env);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ delivered: true, status: 204 });
    const list = await runCli(['trigger'], env);
    expect(list.code, list.stderr).toBe(0);
    for (const t of TYPES) expect(list.stdout).toContain(t);
    expect(list.stdout).toContain('<org>/workflow/<workflow>/<transition>');
    const json = await runCli(['trigger', '--list', '--json'], env);
    expect(JSON.parse(json.stdout).map((t: Json) => t.type)).toEqual(TYPES);
  });

  it('an unknown type exits 1 naming the known ones; without --webhook exit 2, nothing sent', async () => {
    const before = out.length;
    const bad = await runCli(['trigger', 'com.svc.deploy.v1', '--webhook', hookId], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('unknown event type com.svc.deploy.v1; known types: com.svc.workflow.lifecycle.v1');
    const usage = await runCli(['trigger', 'com.svc.webhook.ping.v1'], env);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--webhook');
    expect(out.length).toBe(before);
  });
});
