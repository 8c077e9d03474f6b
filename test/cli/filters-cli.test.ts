// `svc webhooks create|update --filter/--filter-file`, `svc webhooks test-filter` and `svc events
// recipients` (CONTRACT 10.2) against a real svc serve (embedded mode): the filter is set, shown,
// replaced alone and removed; a bad one exits with the server's 400 naming the path; a dry run
// over the kept events and the recipients of one answer what the API answers.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, type CliResult } from '../helpers/cli.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, tmpDir, waitFor, type TestService } from '../helpers/service.ts';
import { rid } from '../helpers/ids.ts';

const both = (r: CliResult) => `stdout: ${r.stdout}\nstderr: ${r.stderr}`;

describe('svc webhooks --filter, test-filter, events recipients', () => {
  let svc: TestService;
  let rx: Receiver;
  let env: Record<string, string>;
  let eventIds: string[];

  beforeAll(async () => {
    rx = await startReceiver();
    svc = await startService({ localRunner: false });
    const org = svc.createOrg(rid('cli-filters'));
    env = { SVC_API_URL: svc.url, SVC_API_TOKEN: org.api_token, SVC_ORG_ID: org.org_id };
    const O = org.org_id;
    const workflow = { id: rid('wfx'), type: 'manual_deploy', owner_id: 'inst_c', owner_type: 'installs' };
    const send = async (msg: unknown) =>
      expect(
        (await svc.server.bus.request(`svc.ingest.${O}.workflows.${workflow.id}`, JSON.stringify(msg), { timeoutMs: 5000 })).json(),
      ).toEqual({
        ok: true,
      });
    await send({ kind: 'workflow', transition: 'started', workflow });
    await send({ kind: 'workflow', transition: 'failed', error: 'boom' });
    await waitFor(async () => (await svc.api(org).get('/v1/events')).body.data.length === 2, 10_000, 'both events kept');
    eventIds = (await svc.api(org).get('/v1/events')).body.data.map((e: { id: string }) => e.id);
  });
  afterAll(async () => {
    await svc?.stop();
    await rx?.close();
  });

  it('create with --filter, update with --filter-file alone, remove with null; a bad filter exits with the path', async () => {
    const c = await runCli(['webhooks', 'create', '--url', rx.hook('f'), '--filter', '{"data":{"transition":"failed"}}', '--json'], env);
    expect(c.code, both(c)).toBe(0);
    expect(c.json.filter).toEqual({ data: { transition: 'failed' } });
    const id = c.json.webhook_id;
    const shown = await runCli(['webhooks', 'update', id, '--filter', '{"type":{"$startsWith":"com.svc.workflow"}}'], env);
    expect(shown.code, both(shown)).toBe(0);
    expect(shown.stdout).toMatch(/filter:\s+\{"type":\{"\$startsWith":"com.svc.workflow"\}\}/);
    const file = path.join(tmpDir(), 'filter.json');
    fs.writeFileSync(file, JSON.stringify({ data: { workflow: { type: { $in: ['manual_deploy'] } } } }));
    const u = await runCli(['webhooks', 'update', id, '--filter-file', file, '--json'], env);
    expect(u.code, both(u)).toBe(0);
    expect(u.json.filter).toEqual({ data: { workflow: { type: { $in: ['manual_deploy'] } } } });
    expect(u.json.interests).toEqual(c.json.interests);
    const off = await runCli(['webhooks', 'update', id, '--filter', 'null', '--json'], env);
    expect(off.json.filter).toBeNull();
    const bad = await runCli(['webhooks', 'update', id, '--filter', '{"data":{"nope":1}}'], env);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/filter\.data\.nope/);
    const usage = await runCli(['webhooks', 'update', id, '--filter', '[1]'], env);
    expect(usage.code).toBe(2);
  });

  it('test-filter over the kept events and events recipients', async () => {
    const r = await runCli(['webhooks', 'test-filter', '--filter', '{"data":{"transition":"failed"}}', '--since', '1h', '--json'], env);
    expect(r.code, both(r)).toBe(0);
    expect(r.json.examined).toBe(2);
    expect(r.json.matched).toBe(1);
    const table = await runCli(['webhooks', 'test-filter', '--filter', '{"data":{"transition":"failed"}}', '--since', '1h', '--all'], env);
    expect(table.stdout).toMatch(/would have received 1 of 2 events/);
    expect(table.stdout).toMatch(/no\s+data\.transition/);
    const w = await runCli(['webhooks', 'create', '--url', rx.hook('r'), '--filter', '{"data":{"transition":"started"}}', '--json'], env);
    const rc = await runCli(['events', 'recipients', eventIds[0], '--json'], env);
    expect(rc.code, both(rc)).toBe(0);
    expect(rc.json.data.find((x: { webhook_id: string }) => x.webhook_id === w.json.webhook_id)).toEqual({
      webhook_id: w.json.webhook_id,
      matched: true,
      decided_by: 'data.transition',
    });
    const none = await runCli(['webhooks', 'test-filter', '--filter', '{}'], env);
    expect(none.code).toBe(2);
  });
});
