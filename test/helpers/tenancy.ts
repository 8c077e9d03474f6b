// Two orgs sharing one svc (CONTRACT 8, issue 27): producers that commit facts over either bus, and
// the delays of an org's deliveries (a fact's commit → its receiver getting the event).
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { expect } from 'vitest';
import type { Bus } from '../../src/bus/bus.ts';
import { rid } from './ids.ts';
import { ingestRequest } from './producer.ts';
import type { Receiver } from './receiver.ts';

export interface FactProducer {
  /**
   * Commit one fact of the org (an external workflow started: one event) and resolve its workflow
   * id once svc has answered {ok: true} (the fact is committed).
   */
  fact(orgId: string): Promise<string>;
  close(): Promise<void>;
}

const started = (orgId: string) => {
  const workflow = { id: rid('wfx'), type: 'manual_deploy', owner_id: 'inst_not_known', owner_type: 'installs' };
  return {
    subject: `svc.ingest.${orgId}.workflows.${workflow.id}`,
    body: JSON.stringify({ kind: 'workflow', transition: 'started', workflow }),
    id: workflow.id,
  };
};

/** Facts over a NATS connection of their own (NATS mode), or the server's in-process bus (embedded). */
export async function factProducer(o: { natsUrl: string | null; bus: Bus }): Promise<FactProducer> {
  let nc: NatsConnection | null = null;
  if (o.natsUrl) nc = await connect({ servers: o.natsUrl, name: 'tenancy-producer' });
  return {
    async fact(orgId) {
      const f = started(orgId);
      const answer = nc
        ? (await ingestRequest(nc, f.subject, f.body, { timeout: 30_000 })).json()
        : (await o.bus.request(f.subject, f.body, { timeoutMs: 30_000 })).json();
      expect(answer).toEqual({ ok: true });
      return f.id;
    },
    async close() {
      await nc?.drain();
    },
  };
}

/** The time the receiver got the event of each workflow (its `started` event), by workflow id. */
export function receivedAt(rx: Receiver, hook: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const r of rx.at(hook)) {
    const id = r.json?.data?.workflow?.id;
    if (typeof id === 'string' && !out.has(id)) out.set(id, r.at);
  }
  return out;
}

export const p50 = (xs: number[]): number => xs[Math.floor((xs.length - 1) / 2)];
export const max = (xs: number[]): number => xs[xs.length - 1];
