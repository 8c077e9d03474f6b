// `svc events list|get`, `svc webhooks attempts|recover|resend` (CONTRACT 7, 4.5) against a real
// svc serve (embedded mode) and a real receiver: the operator's session after an outage.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, type CliResult } from '../helpers/cli.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, waitFor, type TestService } from '../helpers/service.ts';
import { get, post, waitWf } from '../helpers/workflows.ts';

type Json = any;

const both = (r: CliResult) => `stdout: ${r.stdout}\nstderr: ${r.stderr}`;

describe('svc events and webhook recovery commands', () => {
  let svc: TestService;
  let rx: Receiver;
  let env: Record<string, string>;
  let hook: string;
  let missed: string[];
  /** every kept event: the missed ones and the watchdog's `failing` about the webhook (CONTRACT 4.1), never sent to it */
  let kept: string[];

  beforeAll(async () => {
    rx = await startReceiver();
    svc = await startService();
    const org = svc.createOrg('cli-history');
    env = { SVC_API_URL: svc.url, SVC_API_TOKEN: org.api_token, SVC_ORG_ID: org.org_id };
    const api = svc.api(org);
    const c = await runCli(['webhooks', 'create', '--url', rx.hook('shop'), '--json'], env);
    expect(c.code, both(c)).toBe(0);
    hook = c.json.webhook_id;
    // the receiver is down while an install provisions: every event of it is missed
    rx.set('shop', { status: 503 });
    const app = await post(api, '/v1/apps', { name: 'shop' });
    await post(api, `/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api' }] });
    const inst = await post(api, '/v1/installs', { app_id: app.app_id, name: 'eu-1' });
    const wfs = await get(api, `/v1/installs/${inst.install_id}/workflows`);
    await waitWf(api, wfs[0].workflow_id);
    await svc.settled();
    const events = await svc.events(org.org_id);
    kept = events.map((e) => e.id);
    missed = events.filter((e) => e.type !== 'com.svc.webhook.delivery.v1').map((e) => e.id);
    expect(kept.length).toBe(missed.length + 1);
    expect(missed.length).toBeGreaterThan(0);
    rx.set('shop', { status: 200 });
  });
  afterAll(async () => {
    await svc?.stop();
    await rx?.close();
  });

  it('events list and get show the kept events, newest first (--oldest-first turns them, --json too)', async () => {
    const l = await runCli(['events', 'list', '--since', '1h', '--json'], env);
    expect(l.code, both(l)).toBe(0);
    expect(l.json.map((e: Json) => e.id)).toEqual([...kept].reverse());
    const oldest = await runCli(['events', 'list', '--since', '1h', '--json', '--oldest-first'], env);
    expect(oldest.code, both(oldest)).toBe(0);
    expect(oldest.json.map((e: Json) => e.id)).toEqual(kept);
    // the table too: the newest event's line comes first, and last with --oldest-first
    const lineOf = (out: string, id: string) => out.split('\n').findIndex((line) => line.includes(id));
    const newestTable = (await runCli(['events', 'list'], env)).stdout;
    const oldestTable = (await runCli(['events', 'list', '--oldest-first'], env)).stdout;
    expect(lineOf(newestTable, kept[kept.length - 1])).toBeLessThan(lineOf(newestTable, kept[0]));
    expect(lineOf(oldestTable, kept[0])).toBeLessThan(lineOf(oldestTable, kept[kept.length - 1]));
    const table = await runCli(['events', 'list', '--type', l.json[0].type], env);
    expect(table.code, both(table)).toBe(0);
    expect(table.stdout).toContain(l.json[0].id);
    const otherType = l.json.find((e: Json) => e.type !== l.json[0].type);
    expect(table.stdout).not.toContain(otherType.id);
    const g = await runCli(['events', 'get', kept[0]], env);
    expect(g.code, both(g)).toBe(0);
    expect(g.json).toEqual(oldest.json[0]);
    const none = await runCli(['events', 'get', 'nope'], env);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/not found/);
    const bad = await runCli(['events', 'list', '--since', 'yesterday'], env);
    expect(bad.code).toBe(2);
  });

  it('attempts --failed, recover (followed to done), then everything has arrived; resend exits 1 when not delivered', async () => {
    await waitFor(
      async () => (await runCli(['webhooks', 'attempts', hook, '--failed', '--json'], env)).json?.length === missed.length,
      5000,
      'the attempt log',
    );
    const failed = await runCli(['webhooks', 'attempts', hook, '--failed'], env);
    expect(failed.code, both(failed)).toBe(0);
    expect(failed.stdout).toContain('failure');
    expect(failed.stdout).toContain('503');

    const seen = rx.at('shop').length;
    const r = await runCli(['webhooks', 'recover', hook, '--since', '2h'], env);
    expect(r.code, both(r)).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`recovery rcv_\\w+: ${missed.length} events to attempt`));
    expect(r.stdout).toMatch(new RegExp(`${missed.length}/${missed.length} attempted, ${missed.length} succeeded, 0 failed`));
    expect(r.stdout).toMatch(/state:\s+done/);
    await svc.settled();
    const arrived = rx.at('shop').slice(seen);
    expect(arrived.map((x) => x.json.id).sort()).toEqual([...missed].sort());
    expect(new Set(arrived.map((x) => x.headers['x-svc-recovery'])).size).toBe(1);

    // nothing is left to recover
    const again = await runCli(['webhooks', 'recover', hook, '--since', '2h', '--json'], env);
    expect(again.code, both(again)).toBe(0);
    expect(again.json).toMatchObject({ state: 'done', events: 0 });
    // --all: every matching event of the window, delivered or not
    const all = await runCli(['webhooks', 'recover', hook, '--since', '2h', '--all', '--json'], env);
    expect(all.json).toMatchObject({ state: 'done', events: missed.length, succeeded: missed.length });
    expect((await runCli(['webhooks', 'recover', hook], env)).code).toBe(2);

    const ok = await runCli(['webhooks', 'resend', hook, missed[0]], env);
    expect(ok.code, both(ok)).toBe(0);
    expect(ok.stdout).toMatch(/delivered:\s+yes/);
    rx.set('shop', { status: 500 });
    const no = await runCli(['webhooks', 'resend', hook, missed[0], '--json'], env);
    expect(no.code).toBe(1);
    expect(no.json).toMatchObject({ delivered: false, status: 500 });
    rx.set('shop', { status: 200 });

    const attempts = await runCli(['webhooks', 'attempts', hook, '--since', '1h', '--json'], env);
    expect(attempts.json[0]).toMatchObject({ event_id: missed[0], recovery_id: 'resend', outcome: 'failure' });
  });

  it('events list --order-key in sequence order; recover --order-key --after-sequence --until-sequence fills exactly a gap', async () => {
    const events = await svc.events(env.SVC_ORG_ID);
    const key: string = events.find((e) => e.type !== 'com.svc.webhook.delivery.v1').svcorderkey;
    const ofKey = events.filter((e) => e.svcorderkey === key);
    expect(ofKey.length).toBeGreaterThan(4);
    const l = await runCli(['events', 'list', '--order-key', key, '--after-sequence', '1', '--json'], env);
    expect(l.code, both(l)).toBe(0);
    expect(l.json.map((e: Json) => Number(e.sequence))).toEqual(ofKey.slice(1).map((_, i) => i + 2));
    const table = await runCli(['events', 'list', '--order-key', key], env);
    expect(table.stdout.split('\n')[0]).toMatch(/^SEQUENCE\s+TIME/);
    expect((await runCli(['events', 'list', '--after-sequence', '1'], env)).code).toBe(2);

    const seen = rx.at('shop').length;
    const r = await runCli(
      ['webhooks', 'recover', hook, '--order-key', key, '--after-sequence', '2', '--until-sequence', '4', '--all'],
      env,
    );
    expect(r.code, both(r)).toBe(0);
    expect(r.stdout).toMatch(/2\/2 attempted, 2 succeeded, 0 failed/);
    await svc.settled();
    const arrived = rx.at('shop').slice(seen);
    expect(arrived.map((x) => [x.json.svcorderkey, Number(x.json.sequence)]).sort()).toEqual([
      [key, 3],
      [key, 4],
    ]);
    for (const bad of [
      ['--order-key', key],
      ['--order-key', key, '--after-sequence', 'x'],
      ['--order-key', key, '--after-sequence', '2', '--since', '1h'],
      ['--after-sequence', '2'],
    ]) {
      expect((await runCli(['webhooks', 'recover', hook, ...bad], env)).code, bad.join(' ')).toBe(2);
    }
  });
});
