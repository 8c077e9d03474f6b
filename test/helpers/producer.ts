// A producer's NATS request on an ingest subject, as CONTRACT 5.2 asks: the reply comes to the
// org's own inbox prefix `_INBOX_<org>` (the engine answers nothing else), one reply subject per
// request, whatever inbox prefix the connection has.
import { randomBytes } from 'node:crypto';
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import { parseIngestSubject, producerInboxPrefix } from '../../src/bus/subjects.ts';
import { rid } from './ids.ts';
import { pause } from './wait.ts';

export function ingestRequest(nc: NatsConnection, subject: string, data: string | Uint8Array, o: { timeout: number }): Promise<Msg> {
  const org = parseIngestSubject(subject)?.orgId;
  if (!org) return nc.request(subject, data, o);
  return nc.request(subject, data, {
    timeout: o.timeout,
    noMux: true,
    reply: `${producerInboxPrefix(org)}.${randomBytes(9).toString('hex')}`,
  });
}

/**
 * An external workflow's `started` (CONTRACT 5.2): one fact, one event. A distinct workflow per
 * fact, so that each fact's event is known by its CloudEvents subject.
 */
export function startedFact(orgId: string) {
  const W = rid('wfx');
  return {
    natsSubject: `svc.ingest.${orgId}.workflows.${W}`,
    body: {
      kind: 'workflow',
      transition: 'started',
      workflow: { id: W, type: 'manual_deploy', owner_id: 'inst_ext', owner_type: 'installs' },
    },
    subject: `${orgId}/workflow/${W}/started`,
  };
}

/**
 * A producer that sends again until it gets {ok: true} (CONTRACT 5.2: no answer, or "not recorded,
 * try again", means send the same message again). Resolves once acknowledged.
 */
export async function sendReliably(nc: NatsConnection, subject: string, body: unknown): Promise<void> {
  for (let attempt = 0; attempt < 1200; attempt++) {
    try {
      const m = await ingestRequest(nc, subject, JSON.stringify(body), { timeout: 1000 });
      const r = m.json<{ ok: boolean; error?: string }>();
      if (r.ok === true) return;
      if (!/try again/.test(r.error ?? '')) throw new Error(`refused: ${r.error}`); // invalid is a test bug: fail loudly
    } catch (err) {
      if (String(err).includes('refused:')) throw err;
    }
    await pause(50, "svc down or restarting: the producer's back-off before it sends the same fact again");
  }
  throw new Error(`never acknowledged: ${subject}`);
}
