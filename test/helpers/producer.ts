// A producer's NATS request on an ingest subject, as CONTRACT 5.2 asks: the reply comes to the
// org's own inbox prefix `_INBOX_<org>` (the engine answers nothing else), one reply subject per
// request, whatever inbox prefix the connection has.
import { randomBytes } from 'node:crypto';
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import { parseIngestSubject, producerInboxPrefix } from '../../src/bus/subjects.ts';

export function ingestRequest(nc: NatsConnection, subject: string, data: string | Uint8Array, o: { timeout: number }): Promise<Msg> {
  const org = parseIngestSubject(subject)?.orgId;
  if (!org) return nc.request(subject, data, o);
  return nc.request(subject, data, { timeout: o.timeout, noMux: true, reply: `${producerInboxPrefix(org)}.${randomBytes(9).toString('hex')}` });
}
