// `svc listen`: the local receiver, through startListener() and through the real CLI: signature
// checks (X-Svc-Signature, and webhook-signature built with the stock standardwebhooks library),
// the replay window (an injected clock, no sleeping), and --forward-to a real receiver.
import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { forwardableHeaders, startListener, type Listener } from '../../src/cli/listen.ts';
import { clockTime, cutMiddle, deliveryLine, MAX_LINE, shortType } from '../../src/cli/listen-line.ts';
import { testDeliverer, type TestDeliverer } from '../helpers/deliverer.ts';
import { ManualClock } from '../helpers/clock.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { BIN, ROOT } from '../helpers/paths.ts';
import { waitFor } from '../helpers/wait.ts';

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
/** The start of a delivery's line: its time (HH:MM:SS) and the path it arrived on. */
const AT = (p = '/') => new RegExp(`^\\d\\d:\\d\\d:\\d\\d  ${p.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}  `);
/** EVENT's line after its time and path. */
const EVENT_LINE = 'workflow.lifecycle  org_1/workflow/wf_1/succeeded';
const hmacHex = (secret: string, raw: string) => createHmac('sha256', secret).update(raw).digest('hex');

const listeners: Listener[] = [];
const deliverers: TestDeliverer[] = [];
afterEach(async () => {
  await Promise.all(deliverers.splice(0).map((d) => d.close(0)));
  await Promise.all(listeners.splice(0).map((l) => l.close()));
});

async function listen(opts: Parameters<typeof startListener>[0]) {
  const l = await startListener(opts);
  listeners.push(l);
  return l;
}
function deliverer() {
  const d = testDeliverer({ timeoutMs: 2000, allowPrivateTargets: true });
  deliverers.push(d);
  return d;
}
/** A POST through node:http, headers exactly as given. */
function rawPost(url: string, body: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers, agent: false }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const post = (url: string, body: string, headers: Record<string, string> = {}) =>
  fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/cloudevents+json; charset=utf-8', ...headers } });

/** Standard Webhooks headers made by the stock library (its sign()), for `secret` at `at`. */
function stockHeaders(secret: string, at: Date, body = BODY, id = EVENT.id): Record<string, string> {
  const wh = secret.startsWith('whsec_') ? new Webhook(secret) : new Webhook(secret, { format: 'raw' });
  return { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': wh.sign(id, at, body) };
}
const WHSEC = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const WHSEC_OTHER = 'whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD';

let rx: Receiver;
beforeAll(async () => {
  rx = await startReceiver();
});
afterAll(async () => {
  await rx.close();
});

describe('startListener', () => {
  it('prints the listening line, then one line per event: time, path, short type, subject; answers 204', async () => {
    const out = sink();
    const l = await listen({ port: 0, out, err: sink() });
    expect(l.url).toBe(`http://127.0.0.1:${l.port}`);
    expect(out.lines[0]).toBe(`listening on ${l.url}`);
    const r = await deliverer().deliver({ url: `${l.url}/hooks/x`, secret: null }, BODY);
    expect(r).toMatchObject({ delivered: true, status: 204 });
    expect(out.lines[1]).toMatch(AT('/hooks/x'));
    expect(out.lines[1].slice(10)).toBe(`/hooks/x  ${EVENT_LINE}`);
    expect(l.received).toHaveLength(1);
    expect(l.received[0]).toMatchObject({ signature: 'unchecked', status: 204 });
  });

  it('with a secret: accepts a delivery from the Deliverer (both signatures verify), rejects a wrong or missing one with 401', async () => {
    const out = sink();
    const l = await listen({ port: 0, secret: 'whsec_listen', out, err: sink() });
    expect(out.lines[0]).toBe(`listening on ${l.url} (verifying X-Svc-Signature and webhook-signature)`);
    const d = deliverer();
    expect(await d.deliver({ url: l.url, secret: 'whsec_listen' }, BODY, { eventId: EVENT.id })).toMatchObject({
      delivered: true,
      status: 204,
    });
    expect(await d.deliver({ url: l.url, secret: 'wrong' }, BODY)).toMatchObject({ delivered: false, status: 401, error: 'HTTP 401' });
    expect(await d.deliver({ url: l.url, secret: null }, BODY)).toMatchObject({ delivered: false, status: 401 });
    // a correct signature over different bytes is still wrong
    const tampered = await post(l.url, BODY.replace('succeeded', 'failed'), { 'x-svc-signature': hmacHex('whsec_listen', BODY) });
    expect(tampered.status).toBe(401);
    // X-Svc-Signature alone, right (uppercase hex of the right digest) but signing no time: refused
    const unprotected = await post(l.url, BODY, { 'x-svc-signature': hmacHex('whsec_listen', BODY).toUpperCase() });
    expect(unprotected.status).toBe(401);
    expect(((await unprotected.json()) as { message: string }).message).toMatch(/X-Svc-Signature alone signs no time/);

    expect(out.lines[1].slice(10)).toBe(`/  ${EVENT_LINE}`); // both verified, the first signature: nothing more to say
    expect(out.lines[2].slice(10)).toBe(`/  BAD SIGNATURE (X-Svc-Signature: invalid, webhook-signature: invalid)  ${EVENT_LINE}`);
    expect(out.lines[3].slice(10)).toMatch(/^\/ {2}BAD SIGNATURE \(missing\) {2}/);
    expect(out.lines[4].slice(10)).toMatch(/^\/ {2}BAD SIGNATURE \(X-Svc-Signature: invalid, webhook-signature: missing\) {2}/);
    expect(out.lines[5].slice(10)).toMatch(/^\/ {2}NO REPLAY PROTECTION \(X-Svc-Signature only\) {2}/);
    expect(l.received.map((r) => r.signature)).toEqual(['valid', 'invalid', 'missing', 'invalid', 'unprotected']);
    expect(l.received.map((r) => r.status)).toEqual([204, 401, 401, 401, 401]);
    expect(out.lines.join('\n')).not.toContain('whsec_listen');
  });

  it(
    'verifies webhook-signature made by the stock standardwebhooks library, for a whsec_ and a plain secret; any listed v1 ' +
      'signature may match',
    async () => {
      for (const secret of [WHSEC, 'a plain secret']) {
        const out = sink();
        const l = await listen({ port: 0, secret, out, err: sink() });
        const now = new Date();
        const good = stockHeaders(secret, now);
        const r = await post(l.url, BODY, good);
        expect(r.status, secret).toBe(204);
        expect(out.lines[1].slice(10)).toBe(`/  ${EVENT_LINE}  verified: webhook-signature`);
        // a rotation's overlap as the sender lists it: another secret's first, this one's second
        const other = stockHeaders(WHSEC_OTHER, now)['webhook-signature'];
        expect((await post(l.url, BODY, { ...good, 'webhook-signature': `${other} ${good['webhook-signature']}` })).status).toBe(204);
        expect(out.lines[2].slice(10)).toBe(`/  ${EVENT_LINE}  verified: webhook-signature (2nd of 2)`);
        // only other secrets' signatures, an unknown version, a different id or body: 401
        expect((await post(l.url, BODY, { ...good, 'webhook-signature': other })).status).toBe(401);
        expect((await post(l.url, BODY, { ...good, 'webhook-signature': good['webhook-signature'].replace('v1,', 'v2,') })).status).toBe(
          401,
        );
        expect((await post(l.url, BODY, { ...good, 'webhook-id': 'evt_other' })).status).toBe(401);
        expect((await post(l.url, BODY.replace('wf_1', 'wf_2'), good)).status).toBe(401);
        expect(l.received.map((x) => x.signature)).toEqual(['valid', 'valid', 'invalid', 'invalid', 'invalid', 'invalid']);
        expect(out.lines[3].slice(10)).toMatch(/^\/ {2}BAD SIGNATURE \(X-Svc-Signature: missing, webhook-signature: invalid\)/);
      }
    },
  );

  it('refuses (401) a webhook-timestamp more than 5 minutes from its clock: a replay, even with a good signature', async () => {
    const clock = new ManualClock(Date.now());
    const out = sink();
    const l = await listen({ port: 0, secret: WHSEC, out, err: sink(), clock });
    const signedAt = new Date(clock.now());
    const headers = { ...stockHeaders(WHSEC, signedAt), 'x-svc-signature': hmacHex(WHSEC, BODY) };
    expect((await post(l.url, BODY, headers)).status).toBe(204);
    clock.advance(5 * 60_000); // exactly 5 minutes later: still inside the window
    expect((await post(l.url, BODY, headers)).status).toBe(204);
    clock.advance(2000); // 302 s after the signed second
    const replay = await post(l.url, BODY, headers);
    expect(replay.status).toBe(401);
    expect(await replay.json()).toMatchObject({ error: 'unauthorized', message: expect.stringMatching(/5 minutes/) });
    expect(out.lines[3]).toBe(`${clockTime(clock.now())}  /  BAD TIMESTAMP (302 s old)  ${EVENT_LINE}`);
    // from the future too
    const future = new Date(clock.now() + 6 * 60_000);
    const early = await post(l.url, BODY, stockHeaders(WHSEC, future));
    expect(early.status).toBe(401);
    expect(out.lines[4].slice(10)).toMatch(/^\/ {2}BAD TIMESTAMP \(\d+ s in the future\)/);
    expect(l.received.map((x) => [x.signature, x.status])).toEqual([
      ['valid', 204],
      ['valid', 204],
      ['stale', 401],
      ['stale', 401],
    ]);
    expect(l.received[2].verified).toEqual(['X-Svc-Signature', 'webhook-signature']);
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
    // with a secret: stdout stays JSON lines; what verified goes to stderr
    const out2 = sink();
    const err2 = sink();
    const l2 = await listen({ port: 0, json: true, secret: WHSEC, out: out2, err: err2 });
    await deliverer().deliver({ url: l2.url, secret: WHSEC }, BODY, { eventId: EVENT.id });
    expect(out2.lines.map((x) => JSON.parse(x))).toEqual([EVENT]);
    expect(err2.lines[1]).toBe('evt_1  verified: X-Svc-Signature, webhook-signature');
  });

  it(
    '--verdict answers a verification request (signed, checked as any delivery) with 200 {verdict}, names its group and attempt; ' +
      'other events as before',
    async () => {
      const out = sink();
      const l = await listen({ port: 0, out, err: sink(), secret: WHSEC, verdict: 'pending' });
      expect(out.lines[0]).toBe(
        `listening on ${l.url} (verifying X-Svc-Signature and webhook-signature; answering verification requests: pending)`,
      );
      const request = JSON.stringify({
        ...EVENT,
        id: 'evt_v1',
        type: 'com.svc.rollout.verification.v1',
        subject: 'org_1/rollout_verification/wf_1/stp_1/requested',
        data: { rollout: { run_id: 'wf_1', group: 'canary', attempt: 2, installs: [] } },
        interests: undefined,
      });
      const asked = await post(`${l.url}/verify`, request, stockHeaders(WHSEC, new Date(), request, 'evt_v1'));
      expect(asked.status).toBe(200);
      await expect(asked.json()).resolves.toEqual({ verdict: 'pending' });
      // 160 characters at most: the request's group cut short here, behind the subject
      expect(out.lines[1].slice(10)).toBe(
        '/verify  rollout.verification  org_1/rollout_verification/wf_1/stp_1/requested  verification of group…  verified: ' +
          'webhook-signature  answered: pending',
      );
      expect([...out.lines[1]]).toHaveLength(160);
      // unsigned: refused like any delivery, no verdict
      const unsigned = await post(`${l.url}/verify`, request);
      expect(unsigned.status).toBe(401);
      // another event: 204, no verdict
      const other = await post(`${l.url}/hooks`, BODY, stockHeaders(WHSEC, new Date()));
      expect(other.status).toBe(204);
      expect(l.received.map((r) => r.status)).toEqual([200, 401, 204]);
    },
  );

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

  it('names the step, install and component, a failure, a health verdict (CONTRACT 6.2 data), as far as 160 characters go', () => {
    const at = Date.parse('2025-01-02T03:04:05Z');
    const t = clockTime(at);
    const line = (event: Record<string, unknown>, more: Partial<Parameters<typeof deliveryLine>[0]> = {}) =>
      deliveryLine({ at, path: '/h', event, ...more });
    const step = {
      type: 'com.svc.workflow_step.lifecycle.v1',
      subject: 'org_1/workflow_step/wf_1/st_1/failed',
      data: {
        workflow: { id: 'wf_1', type: 'app_rollback', owner_id: 'app_1', owner_type: 'apps' },
        step: { id: 'st_1', name: 'bake install group: canary', component_id: null },
        outcome: { status: 'failed', error: 'health gate: install eu-1 is unhealthy' },
        rollout: { install_id: 'inst_1', component_id: 'cmp_1' },
      },
    };
    expect(line(step)).toBe(
      `${t}  /h  workflow_step.lifecycle  org_1/workflow_step/wf_1/st_1/failed  step: "bake install group: canary"  error: "health ` +
        `gate: install eu-1 is unhealthy"`,
    );
    // with room for it, the install too
    expect(line({ ...step, subject: 's' })).toBe(
      `${t}  /h  workflow_step.lifecycle  s  step: "bake install group: canary"  error: "health gate: install eu-1 is unhealthy"  ` +
        `install: inst_1`,
    );
    const deploy = {
      type: 'x',
      subject: 's',
      data: {
        workflow: { type: 'provision', owner_id: 'inst_2', owner_type: 'installs' },
        step: { name: 'deploy api', component_id: 'cmp_2' },
      },
    };
    expect(line(deploy)).toBe(`${t}  /h  x  s  step: "deploy api"  install: inst_2  component: cmp_2`);
    const approval = {
      type: 'com.svc.workflow_step.approval.v1',
      subject: 'org_1/workflow_step_approval/wf_1/st_2/requested',
      interests: ['event:approval.requested'],
      data: {
        workflow: { type: 'app_branch_run', owner_id: 'app_1', owner_type: 'apps' },
        step: { name: 'plan install group: canary' },
        approval: { status: 'requested', url: 'http://127.0.0.1:8080/dashboard/orgs/org_1/workflows/wf_1#step-st_2' },
      },
    };
    expect(line(approval)).toBe(
      `${t}  /h  workflow_step.approval  org_1/workflow_step_approval/wf_1/st_2/requested  step: "plan install group: canary"`,
    );
    const health = {
      type: 'com.svc.component.health.v1',
      subject: 's',
      data: { install_id: 'inst_1', component_id: 'cmp_1', health: { verdict: 'unhealthy', reason: 'p99 2s' } },
    };
    expect(line(health)).toBe(`${t}  /h  component.health  s  verdict: unhealthy (p99 2s)  install: inst_1  component: cmp_1`);
    const wf = {
      type: 'com.svc.workflow.lifecycle.v1',
      subject: 's',
      sequence: '00000000000000000042',
      data: { workflow: { type: 'provision', owner_id: 'inst_1', owner_type: 'installs' } },
    };
    expect(line(wf, { mark: '[resend]', trailer: ['verified'] })).toBe(
      `${t}  /h  workflow.lifecycle  s  seq 42  [resend]  workflow: provision  install: inst_1  verified`,
    );
    const watchdog = {
      type: 'com.svc.webhook.delivery.v1',
      subject: 'org_1/webhook_delivery/wh_1/failing',
      data: { webhook: { id: 'wh_1', url_host: 'example.com:8443' }, delivery: { consecutive_failures: 5, last_error: 'HTTP 500' } },
    };
    expect(line(watchdog)).toBe(
      `${t}  /h  webhook.delivery  org_1/webhook_delivery/wh_1/failing  failures: 5 in a row  host: example.com:8443  last error: ` +
        `"HTTP 500"`,
    );
    // a verification request as svc sends it: its group before its step's name (which says the same, longer)
    const verification = {
      type: 'com.svc.rollout.verification.v1',
      subject: 'org_386j6kuh0syz6w2trtw5/rollout_verification/wf_dxhoqn041kezb9hyaciy/st_1ae6ukc10u7zoed5919c/requested',
      data: {
        step: { name: 'verify install group: canary' },
        rollout: { run_id: 'wf_dxhoqn041kezb9hyaciy', group: 'canary', attempt: 1, installs: [] },
      },
    };
    expect(deliveryLine({ at, path: '/verify', event: verification, trailer: ['', 'answered: pass'] })).toMatch(
      /\/requested {2}verification of group canary, attempt 1 {2}(step: "verify install group: canary" {2})?answered: pass$/,
    );
    // missing fields
    expect(line({ type: 'x' })).toBe(`${t}  /h  x  -`);
    expect(deliveryLine({ at, path: '/', event: undefined, refusal: 'BAD SIGNATURE (missing)' })).toBe(
      `${t}  /  BAD SIGNATURE (missing)  -  -`,
    );
  });

  it(
    'a line is at most 160 characters whatever the event holds: the subject cut in the middle, free text at its end, ids left ' +
      'out, no line breaks',
    () => {
      const long = (c: string, n: number) => c.repeat(n);
      const id = (p: string) => `${p}_${long('a', 20)}`;
      const subject = `${id('org')}/workflow_step/${id('wf')}/${id('stp')}/failed`;
      const ev = {
        type: `com.svc.${long('t', 100)}.v1`,
        subject,
        sequence: '00000000000000000007',
        data: {
          workflow: { type: long('w', 100), owner_id: id('inst'), owner_type: 'installs' },
          step: { name: `${long('s', 150)}\n✓😀`, component_id: id('cmp') },
          outcome: { error: long('e', 4000) },
        },
      };
      for (const mark of [undefined, '[resend]', '[recovery]', '[example]']) {
        // an event as svc makes them, its step name and error as long as a producer may send
        const real = { ...ev, type: 'com.svc.workflow_step.lifecycle.v1' };
        const l = deliveryLine({ at: 0, path: '/hooks/listen', event: real, mark, trailer: ['verified', 'answered: pass'] });
        expect([...l].length, l).toBe(MAX_LINE);
        expect(l.startsWith(clockTime(0))).toBe(true);
        // the subject's end kept: its entity and transition
        expect(l.slice(8)).toMatch(/^ {2}\/hooks\/listen {2}workflow_step\.lifecycle {2}org_a+…[a-z_/]*\/failed {2}seq 7 {2}/);
        if (mark) expect(l).toContain(`  ${mark}  `);
        expect(l).toMatch(/ {2}verified {2}answered: pass$/);
        if (!mark) expect(l).toMatch(/ {2}seq 7 {2}step: "s+… {2}verified/);
        // anything at all: still one line of at most 160
        for (const path of ['/', `/${long('p', 300)}`]) {
          const odd = deliveryLine({
            at: 0,
            path,
            event: ev,
            mark,
            trailer: ['verified: X-Svc-Signature, webhook-signature (2nd of 2)', 'answered: pass'],
          });
          expect([...odd].length, odd).toBeLessThanOrEqual(MAX_LINE);
          expect(odd).not.toMatch(/[\n\r]/);
        }
      }
      // a short line is left whole
      const short = { type: 'com.svc.webhook.ping.v1', subject };
      expect(deliveryLine({ at: 0, path: '/h', event: short })).toContain(`  webhook.ping  ${subject}`);
      expect(cutMiddle('abcdefghijklmnopqrstuvwxyz', 10)).toBe('abc…uvwxyz');
      expect(cutMiddle(`${long('o', 40)}${long('x', 100)}`, 50)).toBe(`${long('o', 12)}…${long('x', 37)}`);
      expect(shortType('com.svc.workflow_step.approval.v1')).toBe('workflow_step.approval');
      expect(shortType('com.other.thing.v2')).toBe('com.other.thing');
    },
  );

  it('marks a resend, a recovery (X-Svc-Recovery) and an example (svcexample) delivered to the listener', async () => {
    const out = sink();
    const l = await listen({ port: 0, out, err: sink() });
    await post(`${l.url}/r`, BODY, { 'x-svc-recovery': 'resend' });
    await post(`${l.url}/r`, BODY, { 'x-svc-recovery': 'rcv_0123456789abcdefghij' });
    await post(`${l.url}/r`, JSON.stringify({ ...EVENT, svcexample: true }));
    expect(out.lines.slice(1).map((x) => x.slice(10))).toEqual([
      `/r  ${EVENT_LINE}  [resend]`,
      `/r  ${EVENT_LINE}  [recovery]`,
      `/r  ${EVENT_LINE}  [example]`,
    ]);
  });

  it("says what an ordering key's sequence skipped once it is still not seen 6 s after a later one (a late one fills it)", async () => {
    const out = sink();
    const clock = new ManualClock(Date.now());
    const l = await listen({ port: 0, out, err: sink(), clock, webhookId: 'wh_1' });
    const ev = (seq: number, key = 'inst_1', org = 'org_1') =>
      JSON.stringify({ ...EVENT, svcorgid: org, svcorderkey: key, sequence: String(seq).padStart(20, '0') });
    const notices = () => out.lines.filter((x) => x.startsWith('not seen') || x.startsWith('  recover with:'));
    await post(l.url, ev(1));
    await post(l.url, ev(2));
    await post(l.url, ev(5)); // 3 and 4 skipped
    await post(l.url, ev(3), { 'x-svc-recovery': 'rcv_1' }); // a recovery fills 3
    await post(l.url, ev(4)); // 4 arrives late (an unordered webhook's attempts run in parallel): no gap
    await post(l.url, ev(5)); // a repeat
    await post(l.url, ev(9, 'inst_2')); // a key's first seen
    await post(l.url, ev(1, 'inst_1', 'org_2')); // another org's key of the same name
    await post(l.url, ev(7)); // 6 skipped
    clock.advance(5000);
    await post(l.url, ev(10)); // 8 and 9 skipped, 5 s after 6 was
    expect(notices()).toEqual([]); // nothing has waited 6 s yet
    clock.advance(1000);
    expect(notices()).toEqual([
      'not seen 1 event of inst_1 (sequence 6) within 6 s of a later one',
      '  recover with: svc webhooks recover wh_1 --order-key inst_1 --after-sequence 5 --until-sequence 6',
    ]);
    await post(l.url, ev(8)); // 8 comes; 9 does not
    clock.advance(5000);
    expect(notices().slice(2)).toEqual([
      'not seen 1 event of inst_1 (sequence 9) within 6 s of a later one',
      '  recover with: svc webhooks recover wh_1 --order-key inst_1 --after-sequence 8 --until-sequence 9',
    ]);
    clock.advance(60_000);
    expect(notices()).toHaveLength(4); // each said once
  });

  it(
    '--verbose prints the request headers after the line, signatures cut to their first 8 characters; --json keeps stdout JSON ' +
      'and puts them on stderr',
    async () => {
      for (const json of [false, true]) {
        const out = sink();
        const err = sink();
        const l = await listen({ port: 0, secret: WHSEC, verbose: true, json, out, err });
        const headers: Record<string, string> = {
          ...stockHeaders(WHSEC, new Date()),
          'x-svc-signature': hmacHex(WHSEC, BODY),
          'x-long': 'v'.repeat(500),
        };
        expect((await post(`${l.url}/v`, BODY, headers)).status).toBe(204);
        const text = (json ? err : out).lines;
        if (json) expect(out.lines.map((x) => JSON.parse(x))).toEqual([EVENT]);
        else expect(text[1].slice(10)).toBe(`/v  ${EVENT_LINE}`);
        const shown = text.filter((x) => x.startsWith('    '));
        expect(shown).toContain(`    webhook-signature: ${headers['webhook-signature'].slice(0, 8)}…`);
        expect(shown).toContain(`    x-svc-signature: ${headers['x-svc-signature'].slice(0, 8)}…`);
        expect(shown).toContain(`    webhook-id: ${EVENT.id}`);
        expect(shown).toContain('    content-type: application/cloudevents+json; charset=utf-8');
        for (const x of [...(json ? [] : out.lines), ...err.lines]) expect([...x].length).toBeLessThanOrEqual(MAX_LINE);
        const all = [...out.lines, ...err.lines].join('\n');
        expect(all).not.toContain(headers['webhook-signature'].slice(3, 20));
        expect(all).not.toContain(headers['x-svc-signature'].slice(0, 20));
        // a refused delivery's headers too
        await post(`${l.url}/v`, BODY, { 'webhook-signature': 'v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' });
        expect((json ? err : out).lines.filter((x) => x.startsWith('    webhook-signature:')).at(-1)).toBe(
          '    webhook-signature: v1,AAAAA…',
        );
      }
    },
  );
});

describe('startListener --forward-to', () => {
  /** Headers as a receiver compares them: hop-by-hop ones (set per connection) left out. */
  const endToEnd = (h: http.IncomingHttpHeaders) =>
    Object.fromEntries(Object.entries(h).filter(([k]) => !['host', 'connection'].includes(k)));

  it(
    "forwards a verified delivery to a real receiver with the exact body and headers; the answer's status goes back to the sender " +
      'and is printed',
    async () => {
      const out = sink();
      rx.set('fwd', { status: 202 });
      const l = await listen({ port: 0, secret: WHSEC, forwardTo: rx.hook('fwd'), out, err: sink() });
      expect(out.lines[0]).toBe(`listening on ${l.url} (verifying X-Svc-Signature and webhook-signature; forwarding to ${rx.hook('fwd')})`);
      // as svc sends it (the Deliverer), plus a header of the sender's own
      const r = await deliverer().deliver({ url: `${l.url}/any/path`, secret: WHSEC }, BODY, { eventId: EVENT.id });
      expect(r).toMatchObject({ delivered: true, status: 202 });
      // node:http sends a Connection header as given (undici would rewrite it)
      const res = await rawPost(l.url, BODY, {
        'content-type': 'application/cloudevents+json; charset=utf-8',
        'X-Trace': 'abc',
        ...stockHeaders(WHSEC, new Date()),
        connection: 'keep-alive, x-hop',
        'x-hop': 'drop me',
      });
      expect(res.status).toBe(202);
      expect(res.body).toBe('ok'); // the receiver's answer, passed back
      expect(l.received[1].headers['x-hop']).toBe('drop me');

      const got = rx.at('fwd');
      expect(got).toHaveLength(2);
      for (const [i, g] of got.entries()) {
        const sent = l.received[i];
        expect(g.raw.equals(sent.raw)).toBe(true);
        expect(g.raw.toString('utf8')).toBe(BODY);
        const { 'x-hop': _hop, ...expected } = endToEnd(sent.headers);
        expect(endToEnd(g.headers)).toEqual(expected);
        expect(g.headers.host).toBe(new URL(rx.url).host);
        // the forwarded request still verifies at the final receiver with the stock library
        expect(new Webhook(WHSEC).verify(g.raw, g.headers as Record<string, string>)).toEqual(EVENT);
      }
      expect(got[0].headers['x-svc-signature']).toBe(hmacHex(WHSEC, BODY));
      expect(got[1].headers['x-trace']).toBe('abc');
      expect(got[1].headers['x-hop']).toBeUndefined(); // named by Connection: hop-by-hop
      expect(l.received.map((x) => [x.status, x.forwarded?.status])).toEqual([
        [202, 202],
        [202, 202],
      ]);
      expect(out.lines[2]).toMatch(new RegExp(`^  -> ${rx.hook('fwd').replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: 202 \\(\\d+ ms\\)$`));
    },
  );

  it('a delivery that does not verify is answered 401 and not forwarded; a replay neither', async () => {
    const clock = new ManualClock(Date.now());
    const l = await listen({ port: 0, secret: WHSEC, forwardTo: rx.hook('fwd-no'), out: sink(), err: sink(), clock });
    expect((await post(l.url, BODY, stockHeaders(WHSEC_OTHER, new Date(clock.now())))).status).toBe(401);
    expect((await post(l.url, BODY)).status).toBe(401);
    expect((await post(l.url, BODY, { 'x-svc-signature': hmacHex('nope', BODY) })).status).toBe(401);
    const old = stockHeaders(WHSEC, new Date(clock.now() - 10 * 60_000));
    expect((await post(l.url, BODY, old)).status).toBe(401);
    expect(rx.at('fwd-no')).toHaveLength(0);
    expect(l.received.every((x) => x.forwarded === undefined)).toBe(true);
    // and the same listener forwards a good one
    expect((await post(l.url, BODY, stockHeaders(WHSEC, new Date(clock.now())))).status).toBe(200);
    expect(rx.at('fwd-no')).toHaveLength(1);
  });

  it('without --secret forwards every delivery; a failing or unreachable forward target is reported and answered', async () => {
    const out = sink();
    rx.set('fwd-500', { status: 500 });
    const l = await listen({ port: 0, forwardTo: rx.hook('fwd-500'), out, err: sink() });
    const r = await deliverer().deliver({ url: l.url, secret: null }, BODY);
    expect(r).toMatchObject({ delivered: false, status: 500 });
    expect(rx.at('fwd-500')).toHaveLength(1);
    expect(out.lines[1].slice(10)).toBe(`/  ${EVENT_LINE}`);
    expect(out.lines[2]).toMatch(/^ {2}-> .*: 500 \(\d+ ms\)$/);

    const closed = http.createServer();
    await new Promise<void>((ok) => closed.listen(0, '127.0.0.1', ok));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((ok) => closed.close(() => ok()));
    const out2 = sink();
    const l2 = await listen({ port: 0, forwardTo: `http://127.0.0.1:${port}/x`, out: out2, err: sink() });
    const bad = await post(l2.url, BODY);
    expect(bad.status).toBe(502);
    expect(await bad.json()).toMatchObject({ error: 'bad_gateway', message: 'forwarding failed: connection refused' });
    expect(out2.lines[2]).toMatch(/-> http:\/\/127\.0\.0\.1:\d+\/x: failed, connection refused \(answered 502\)/);

    rx.set('fwd-hang', { hang: true });
    const l3 = await listen({ port: 0, forwardTo: rx.hook('fwd-hang'), forwardTimeoutMs: 200, out: sink(), err: sink() });
    const slow = await post(l3.url, BODY);
    expect(slow.status).toBe(504);
    expect(l3.received[0].forwarded?.error).toBe('timeout after 200 ms');
  });

  it('forwardableHeaders drops hop-by-hop headers (and those Connection names), keeps the rest in order with their spelling', () => {
    expect(
      forwardableHeaders([
        'Host',
        'a:1',
        'Connection',
        'keep-alive, X-Hop',
        'Content-Length',
        '3',
        'X-Hop',
        'h',
        'Webhook-Id',
        'evt_1',
        'Transfer-Encoding',
        'chunked',
        'X-Svc-Signature',
        'ab',
        'Keep-Alive',
        'timeout=5',
        'x-a',
        '1',
        'x-a',
        '2',
        'TE',
        'trailers',
      ]),
    ).toEqual(['Webhook-Id', 'evt_1', 'X-Svc-Signature', 'ab', 'x-a', '1', 'x-a', '2']);
  });
});

describe('svc listen (CLI)', () => {
  function run(args: string[]) {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on('exit', (code, signal) => resolve({ code, signal })),
    );
    const waitOut = async (pred: (s: string) => boolean, ms = 20000) => {
      await waitFor(
        () => pred(stdout),
        ms,
        () => `stdout=${stdout} stderr=${stderr}`,
      );
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
      expect(lines[1]).toMatch(AT('/'));
      expect(lines[1].slice(10)).toBe(`/  ${EVENT_LINE}`);
      expect(lines[2].slice(10)).toMatch(/^\/ {2}BAD SIGNATURE/);
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

  it(
    "--forward-to: a verified delivery reaches the receiver with its answer's status printed; an unverified one is 401 and not " +
      'forwarded',
    async () => {
      rx.set('cli-fwd', { status: 201 });
      const p = run(['listen', '--port', '0', '--secret', WHSEC, '--forward-to', rx.hook('cli-fwd')]);
      try {
        await p.waitOut((s) => /listening on http:\/\/127\.0\.0\.1:\d+/.test(s));
        expect(p.out()).toContain(`forwarding to ${rx.hook('cli-fwd')}`);
        const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(p.out())![1];
        const d = deliverer();
        expect(await d.deliver({ url, secret: WHSEC }, BODY)).toMatchObject({ delivered: true, status: 201 });
        expect(await d.deliver({ url, secret: WHSEC_OTHER }, BODY)).toMatchObject({ delivered: false, status: 401 });
        await p.waitOut((s) => s.includes('BAD SIGNATURE'));
        expect(rx.at('cli-fwd')).toHaveLength(1);
        expect(rx.at('cli-fwd')[0].raw.toString('utf8')).toBe(BODY);
        expect(new Webhook(WHSEC).verify(rx.at('cli-fwd')[0].raw, rx.at('cli-fwd')[0].headers as Record<string, string>)).toEqual(EVENT);
        const lines = p.out().trim().split('\n');
        expect(lines[1].slice(10)).toBe(`/  ${EVENT_LINE}`);
        expect(lines[2]).toMatch(new RegExp(`^  -> ${rx.hook('cli-fwd').replace(/[.]/g, '\\.')}: 201 \\(\\d+ ms\\)$`));
        expect(lines[3].slice(10)).toMatch(/^\/ {2}BAD SIGNATURE/);
        p.child.kill('SIGINT');
        expect(await p.exited).toEqual({ code: 0, signal: null });
      } finally {
        p.child.kill('SIGKILL');
      }
    },
  );

  it('--secret-file: the secret read from a file; X-Svc-Signature alone (no timestamp) is refused and not forwarded', async () => {
    rx.set('cli-fwd-file', { status: 204 });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-listen-secret-'));
    const file = path.join(dir, 'secret');
    fs.writeFileSync(file, `${WHSEC}\n`, { mode: 0o600 });
    const p = run(['listen', '--port', '0', '--secret-file', file, '--forward-to', rx.hook('cli-fwd-file')]);
    try {
      await p.waitOut((s) => /listening on http:\/\/127\.0\.0\.1:\d+/.test(s));
      const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(p.out())![1];
      expect(await deliverer().deliver({ url, secret: WHSEC }, BODY)).toMatchObject({ delivered: true, status: 204 });
      const svcOnly = await post(url, BODY, { 'x-svc-signature': hmacHex(WHSEC, BODY) });
      expect(svcOnly.status).toBe(401);
      await p.waitOut((s) => s.includes('NO REPLAY PROTECTION'));
      expect(rx.at('cli-fwd-file')).toHaveLength(1);
      expect(p.out() + p.err()).not.toContain(WHSEC);
      p.child.kill('SIGINT');
      expect(await p.exited).toEqual({ code: 0, signal: null });
    } finally {
      p.child.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    }
    const both = run(['listen', '--port', '0', '--secret', 'x', '--secret-file', file]);
    expect((await both.exited).code).toBe(2);
    expect(both.err()).toMatch(/--secret and --secret-file are mutually exclusive/);
  });

  it('a bad --port, --forward-to or --verdict is a usage error (exit 2)', async () => {
    for (const args of [
      ['--port', 'abc'],
      ['--port', '70000'],
      ['--port', '0', '--forward-to', 'not a url'],
      ['--port', '0', '--forward-to', 'ftp://127.0.0.1/x'],
      ['--port', '0', '--verdict', 'maybe'],
    ]) {
      const p = run(['listen', ...args]);
      expect((await p.exited).code, args.join(' ')).toBe(2);
      if (args.includes('--forward-to')) expect(p.err()).toMatch(/--forward-to/);
    }
  });
});
