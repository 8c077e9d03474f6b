// The webhook registry on NATS KV (bucket svc_webhooks): key `<org>.<webhook>`, value the entry at
// a version, encrypted and authenticated with the data plane key (a value that does not open is
// refused: nobody without the key can add a webhook or read a secret), tombstones for deletions.
import type { KV } from '@nats-io/kv';
import type { WebhookEntry } from '../../domain/webhook-entry.ts';
import type { Seal } from '../seal.ts';

interface Wire {
  v: number;
  entry: WebhookEntry | null;
}

const keyOf = (orgId: string, webhookId: string) => `${orgId}.${webhookId}`;

function splitKey(key: string): { orgId: string; webhookId: string } | null {
  const dot = key.indexOf('.');
  if (dot <= 0 || dot === key.length - 1) return null;
  return { orgId: key.slice(0, dot), webhookId: key.slice(dot + 1) };
}

/** The control plane's side: publishes entries (a RegistryPublisher of src/handoff/registry-replicator.ts). */
export class KvRegistryPublisher {
  constructor(
    private readonly kv: KV,
    private readonly seal: Seal,
  ) {}

  async publish(orgId: string, webhookId: string, v: number, entry: WebhookEntry | null): Promise<void> {
    const key = keyOf(orgId, webhookId);
    const wire: Wire = { v, entry };
    await this.kv.put(key, this.seal.encrypt(JSON.stringify(wire), key));
  }

  /** Every entry replicated now (null for a tombstone), by key; a value that does not open counts as missing. */
  async replicated(): Promise<Map<string, WebhookEntry | null>> {
    const out = new Map<string, WebhookEntry | null>();
    const last = (await this.kv.status()).streamInfo.state.last_seq;
    if (last === 0) return out;
    const it = await this.kv.watch({ key: '>' });
    for await (const e of it) {
      if (e.operation === 'PUT') {
        const wire = openWire(this.seal, e.key, e.string());
        if (wire) out.set(e.key, wire.entry);
      }
      if (e.revision >= last || e.delta === 0) break;
    }
    it.stop();
    return out;
  }
}

/** The entry in a replicated value, or null when it does not open with the key or is not an entry. */
function openWire(seal: Seal, key: string, value: string): Wire | null {
  const k = splitKey(key);
  const text = k ? seal.decrypt(value, key) : null;
  let wire: Wire | null = null;
  try {
    wire = text ? (JSON.parse(text) as Wire) : null;
  } catch {
    return null;
  }
  if (!k || !wire || typeof wire.v !== 'number' || (wire.entry !== null && wire.entry.webhook_id !== k.webhookId)) return null;
  return wire;
}

export interface RegistryWatchHandlers {
  /** an entry at version v (null: the webhook is gone) */
  apply(orgId: string, webhookId: string, v: number, entry: WebhookEntry | null): void;
  /** a value that does not open with the key, or is not an entry */
  refused(key: string): void;
}

/**
 * The data plane's side: every entry now, then every change. `ready` resolves once the entries
 * present at the start have been applied.
 */
export async function watchRegistry(kv: KV, seal: Seal, h: RegistryWatchHandlers): Promise<{ ready: Promise<void>; stop(): void }> {
  const last = (await kv.status()).streamInfo.state.last_seq;
  let markReady!: () => void;
  const ready = new Promise<void>((r) => (markReady = r));
  if (last === 0) markReady();
  const it = await kv.watch({ key: '>' });
  void (async () => {
    for await (const e of it) {
      if (e.operation === 'PUT') {
        const k = splitKey(e.key);
        const wire = openWire(seal, e.key, e.string());
        if (k && wire) h.apply(k.orgId, k.webhookId, wire.v, wire.entry);
        else h.refused(e.key);
      }
      if (e.revision >= last) markReady();
    }
  })().catch(() => undefined);
  return { ready, stop: () => it.stop() };
}
