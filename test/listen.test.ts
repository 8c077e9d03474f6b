// `svc listen`: the local receiver, through startListener() and through the real CLI.
import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { formatEventLine, startListener, type Listener } from '../src/cli/listen.ts';
import { Deliverer } from '../src/delivery/client.ts';
import { WebhookSubscriber } from '../src/dispatch/subscriber.ts';
import { makeSigner } from '../src/dataplane/signer.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function sink() {
  const lines: string[] = [];
  let buf = '';
  return {
    lines,
    write(chunk: string) {
      buf += chunk;
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        lines.push(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
      return true;
    },
  };
}

const EVENT = {
  specversion: '1.0',
  id: 'evt_1',
  type: 'com.svc.workflow.lifecycle.v1',
  source: '//127.0.0.1:8080/ctl-api',
  time: '2025-01-02T03:04:05.678Z',
  subject: 'org_1/workflow/wf_1/succeeded',
  datacontenttype: 'application/json',
  interests: ['resource:installs', 'op:installs.provision', 'event:lifecycle.succeeded', 'outcome:completion'],
  data: { kind: 'workflow', transition: 'succeeded', note: 'ünïcødé ✓' },
};
const BODY = JSON.stringify(EVENT);
const hmacHex = (secret: string, raw: string) => createHmac('sha256', secret).update(raw).digest('hex');

const listeners: Listener[] = [];
const deliverers: Deliverer[] = [];
afterEach(async () => {
  await Promise.all(deliverers.splice(0).map((d) => d.close(0)));
  await Promise.all(listeners.splice(0).map((l) => l.close()));
});

async function listen(opts: Parameters<typeof startListener>[0]) {
  const l = await startListener(opts);
  listeners.push(l);
  return l;
}
const signer = makeSigner();
function deliverer() {
  const d = new Deliverer({ timeoutMs: 2000, allowPrivateTargets: true });
  deliverers.push(d);
  return {
    /** one signed attempt, as the pipeline makes it */
    deliver(target: { url: string; secret: string | null }, body: string) {
      const buf = Buffer.from(body, 'utf8');
      const sub = new WebhookSubscriber({ webhook_id: 'wh_l', org_id: 'org_l', url: target.url, secret: target.secret, previous_secret: null, previous_secret_expires_at: null, interests: { all_events: true }, match: null });
      return d.attempt(target.url, signer(sub, 'ev_l', buf, Date.now()), buf);
    },
  };
}
const post = (url: string, body: string, headers: Record<string, string> = {}) =>
  fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/cloudevents+json; charset=utf-8', ...headers } });

describe('startListener', () => {
  it('prints the listening line, then one line per event: time, type, subject, slugs; answers 204', async () => {
    const out = sink();
    const l = await listen({ port: 0, out, err: sink() });
    expect(l.url).toBe(`http://127.0.0.1:${l.port}`);
    expect(out.lines[0]).toBe(`listening on ${l.url}`);
    const r = await deliverer().deliver({ url: `${l.url}/hooks/x`, secret: null }, BODY);
    expect(r).toMatchObject({ delivered: true, status: 204 });
    expect(out.lines[1]).toBe(
      '2025-01-02T03:04:05.678Z  com.svc.workflow.lifecycle.v1  org_1/workflow/wf_1/succeeded  [resource:installs op:installs.provision event:lifecycle.succeeded outcome:completion]',
    );
    expect(l.received).toHaveLength(1);
    expect(l.received[0]).toMatchObject({ signature: 'unchecked', status: 204 });
  });

  it('with a secret: accepts a valid signature from the Deliverer, rejects a wrong or missing one with 401', async () => {
    const out = sink();
    const l = await listen({ port: 0, secret: 'whsec_listen', out, err: sink() });
    expect(out.lines[0]).toContain(`listening on ${l.url}`);
    const d = deliverer();
    expect(await d.deliver({ url: l.url, secret: 'whsec_listen' }, BODY)).toMatchObject({ delivered: true, status: 204 });
    expect(await d.deliver({ url: l.url, secret: 'wrong' }, BODY)).toMatchObject({ delivered: false, status: 401, error: 'HTTP 401' });
    expect(await d.deliver({ url: l.url, secret: null }, BODY)).toMatchObject({ delivered: false, status: 401 });
    // a correct signature over different bytes is still wrong
    const tampered = await post(l.url, BODY.replace('succeeded', 'failed'), { 'x-svc-signature': hmacHex('whsec_listen', BODY) });
    expect(tampered.status).toBe(401);
    // uppercase hex of the right digest is accepted
    expect((await post(l.url, BODY, { 'x-svc-signature': hmacHex('whsec_listen', BODY).toUpperCase() })).status).toBe(204);

    expect(out.lines[1]).toMatch(/^2025-01-02T03:04:05.678Z {2}com\.svc\.workflow\.lifecycle\.v1/);
    expect(out.lines[2]).toMatch(/^BAD SIGNATURE {2}2025-01-02T03:04:05.678Z {2}com\.svc\.workflow\.lifecycle\.v1 {2}org_1\/workflow\/wf_1\/succeeded/);
    expect(out.lines[3]).toMatch(/^BAD SIGNATURE \(missing\) {2}/);
    expect(out.lines[4]).toMatch(/^BAD SIGNATURE {2}/);
    expect(l.received.map((r) => r.signature)).toEqual(['valid', 'invalid', 'missing', 'invalid', 'valid']);
    expect(out.lines.join('\n')).not.toContain('whsec_listen');
  });

  it('--json prints each event as one JSON line (and the listening line on stderr)', async () => {
    const out = sink();
    const err = sink();
    const l = await listen({ port: 0, json: true, out, err });
    expect(err.lines[0]).toBe(`listening on ${l.url}`);
    await deliverer().deliver({ url: l.url, secret: null }, BODY);
    await deliverer().deliver({ url: l.url, secret: null }, JSON.stringify({ ...EVENT, id: 'evt_2' }));
    expect(out.lines).toHaveLength(2);
    expect(JSON.parse(out.lines[0])).toEqual(EVENT);
    expect(JSON.parse(out.lines[1]).id).toBe('evt_2');
  });

  it('answers 405 to other methods and 400 to a body that is not a JSON object', async () => {
    const out = sink();
    const l = await listen({ port: 0, out, err: sink() });
    const g = await fetch(l.url);
    expect(g.status).toBe(405);
    expect(g.headers.get('allow')).toBe('POST');
    expect((await post(l.url, 'not json')).status).toBe(400);
    expect((await post(l.url, '[1,2]')).status).toBe(400);
    expect(out.lines).toHaveLength(1);
  });

  it('formats events with missing fields', () => {
    expect(formatEventLine({ time: 't', type: 'x' })).toBe('t  x  -');
    expect(formatEventLine({ time: 't', type: 'x', subject: 's', interests: ['event:webhook.ping'] }, 'BAD SIGNATURE')).toBe(
      'BAD SIGNATURE  t  x  s  [event:webhook.ping]',
    );
  });
});

describe('svc listen (CLI)', () => {
  function run(args: string[]) {
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/svc.mjs'), ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on('exit', (code, signal) => resolve({ code, signal })),
    );
    const waitOut = async (pred: (s: string) => boolean, ms = 20000) => {
      const deadline = Date.now() + ms;
      while (!pred(stdout)) {
        if (Date.now() > deadline) throw new Error(`timed out; stdout=${stdout} stderr=${stderr}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    };
    return { child, exited, waitOut, out: () => stdout, err: () => stderr };
  }

  it('listens on --port 0, verifies --secret, prints events, exits 0 on SIGINT', async () => {
    const p = run(['listen', '--port', '0', '--secret', 'cli-secret']);
    try {
      await p.waitOut((s) => /listening on http:\/\/127\.0\.0\.1:\d+/.test(s));
      const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(p.out())![1];
      const d = deliverer();
      expect(await d.deliver({ url, secret: 'cli-secret' }, BODY)).toMatchObject({ delivered: true, status: 204 });
      expect(await d.deliver({ url, secret: 'nope' }, BODY)).toMatchObject({ delivered: false, status: 401 });
      await p.waitOut((s) => s.includes('BAD SIGNATURE'));
      const lines = p.out().trim().split('\n');
      expect(lines[1]).toContain('com.svc.workflow.lifecycle.v1  org_1/workflow/wf_1/succeeded  [resource:installs');
      expect(lines[2]).toMatch(/^BAD SIGNATURE/);
      p.child.kill('SIGINT');
      expect(await p.exited).toEqual({ code: 0, signal: null });
    } finally {
      p.child.kill('SIGKILL');
    }
  });

  it('--json prints JSON lines; SIGTERM exits 0', async () => {
    const p = run(['listen', '--port', '0', '--json']);
    try {
      await p.waitOut(() => /listening on/.test(p.err()));
      const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(p.err())![1];
      await deliverer().deliver({ url, secret: null }, BODY);
      await p.waitOut((s) => s.includes('\n'));
      expect(JSON.parse(p.out().trim())).toEqual(EVENT);
      p.child.kill('SIGTERM');
      expect(await p.exited).toEqual({ code: 0, signal: null });
    } finally {
      p.child.kill('SIGKILL');
    }
  });

  it('a bad --port is a usage error (exit 2)', async () => {
    const p = run(['listen', '--port', 'abc']);
    expect((await p.exited).code).toBe(2);
    const q = run(['listen']);
    expect((await q.exited).code).toBe(2);
  });
});
