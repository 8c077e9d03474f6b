// One verification request (src/delivery/verify-request.ts) against a real HTTP receiver: the
// answer's status and body come back; a hanging URL times out; a private target is refused unless
// allowed; a redirect is not followed; at most 64 KiB of the answer is read.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { postVerification } from '../../src/delivery/verify-request.ts';

let rcv: Receiver;
beforeAll(async () => {
  rcv = await startReceiver();
});
afterAll(async () => {
  await rcv?.close();
});

const body = Buffer.from('{"specversion":"1.0"}');
const opts = { timeoutMs: 1000, allowPrivateTargets: true };

describe('postVerification', () => {
  it('POSTs the body with its headers and returns the answer', async () => {
    rcv.set('ok', { answer: () => ({ status: 200, body: '{"verdict":"pass"}' }) });
    const r = await postVerification(`${rcv.hook('ok')}?q=1`, { 'webhook-id': 'evt_1' }, body, opts);
    expect(r).toEqual({ status: 200, body: '{"verdict":"pass"}' });
    const got = rcv.at('ok')[0];
    expect(got.raw.equals(body)).toBe(true);
    expect(got.headers['webhook-id']).toBe('evt_1');
    expect(got.headers['content-type']).toBe('application/cloudevents+json; charset=utf-8');
  });

  it('a hanging URL times out (the whole exchange); a redirect is not followed; a long answer is cut at 64 KiB', async () => {
    rcv.set('hang', { hang: true });
    const t0 = Date.now();
    expect(await postVerification(rcv.hook('hang'), {}, body, opts)).toEqual({ error: 'timeout after 1000 ms' });
    expect(Date.now() - t0).toBeLessThan(3000);
    rcv.set('moved', { redirect: rcv.hook('ok') });
    expect((await postVerification(rcv.hook('moved'), {}, body, opts)).status).toBe(302);
    rcv.set('long', { answer: () => ({ status: 200, body: 'x'.repeat(200 * 1024) }) });
    expect((await postVerification(rcv.hook('long'), {}, body, opts)).body).toHaveLength(64 * 1024);
  });

  it('a private target is refused unless allowed, and nothing is sent; a refused connection is an error', async () => {
    const before = rcv.at('private').length;
    expect(await postVerification(rcv.hook('private'), {}, body, { ...opts, allowPrivateTargets: false })).toEqual({
      error: 'target refused: loopback address',
    });
    expect(rcv.at('private')).toHaveLength(before);
    expect(await postVerification('http://127.0.0.1:1/x', {}, body, opts)).toEqual({ error: 'connection refused' });
  });
});
