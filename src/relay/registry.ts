// The webhook registry, replicated from the store to the data plane: every create, update or
// delete of a webhook bumps a version (persisted, so it only grows) and publishes the webhook's
// entry at that version — to NATS KV (encrypted), or straight into the in-process registry in
// embedded mode. Events carry the version current when they were emitted (Route.rev), so a data
// plane never matches an event against an older registry than the one the API had answered with.
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import { getWebhook, listAllWebhooks, type WebhookRow } from '../../store/webhooks.ts';
import { getSetting, setSetting } from '../../store/settings.ts';
import type { WebhookEntry } from '../domain/webhook-entry.ts';
import { effectiveInterests, type Match } from '../domain/subscription.ts';
import { jsonEqual } from '../../machines/advance.ts';

/** Where entries go: KV, or the in-process registry. */
export interface RegistryPublisher {
  /** Replicate one webhook at version v (entry null: deleted). Rejects when it could not. */
  publish(orgId: string, webhookId: string, v: number, entry: WebhookEntry | null): Promise<void>;
  /** What is replicated now, by `<org>.<webhook>`: each entry (null: a tombstone), to publish only what differs. */
  replicated(): Promise<Map<string, WebhookEntry | null>>;
}

export function entryOf(row: WebhookRow): WebhookEntry {
  return {
    webhook_id: row.webhook_id,
    org_id: row.org_id,
    url: row.url,
    secret: row.secret,
    previous_secret: row.previous_secret,
    previous_secret_expires_at: row.previous_secret_expires_at,
    interests: effectiveInterests(row.interests),
    match: (row.match as Match | null) ?? null,
  };
}

const VERSION_KEY = 'registry_version';
const RETRY_MS = 1000;

export class RegistryRelay {
  private v: number;
  private readonly pending = new Set<Promise<void>>();
  /** the newest version of each webhook's change: an older one still retrying is dropped */
  private readonly newest = new Map<string, number>();
  private closed = false;

  constructor(
    private readonly db: Db,
    private readonly publisher: RegistryPublisher,
    private readonly logger: Logger,
  ) {
    this.v = Number(getSetting(db, VERSION_KEY) ?? '0');
  }

  /** The version of the newest change (what events emitted now carry). */
  get version(): number {
    return this.v;
  }

  private bump(): number {
    this.v++;
    setSetting(this.db, VERSION_KEY, String(this.v));
    return this.v;
  }

  /** A webhook was created, changed or deleted: replicate it (retrying until it works or the relay closes). */
  changed(orgId: string, webhookId: string): void {
    const v = this.bump();
    this.track(this.publishRetrying(orgId, webhookId, v));
  }

  /**
   * At start: publish, at a new version, every webhook the replica lacks or holds otherwise than the
   * store (a change whose publication a crash cut short), and a tombstone for any the store lost.
   * When the replica already agrees, nothing is published and the version stays.
   */
  async syncAll(): Promise<void> {
    const rows = listAllWebhooks(this.db);
    const replica = await this.publisher.replicated();
    const stale: Array<{ orgId: string; webhookId: string }> = [];
    const keep = new Set<string>();
    for (const r of rows) {
      const key = `${r.org_id}.${r.webhook_id}`;
      keep.add(key);
      const have = replica.get(key);
      if (!have || !jsonEqual(have, entryOf(r))) stale.push({ orgId: r.org_id, webhookId: r.webhook_id });
    }
    for (const [key, entry] of replica) {
      if (keep.has(key) || entry === null) continue;
      const dot = key.indexOf('.');
      stale.push({ orgId: key.slice(0, dot), webhookId: key.slice(dot + 1) });
    }
    if (!stale.length) return;
    const v = this.bump();
    await Promise.all(stale.map((k) => this.publishRetrying(k.orgId, k.webhookId, v)));
  }

  /** Resolves when every change so far is replicated (or given up at close). */
  async settled(): Promise<void> {
    while (this.pending.size) await Promise.allSettled([...this.pending]);
  }

  close(): void {
    this.closed = true;
  }

  private track(p: Promise<void>): void {
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
  }

  /** Publish the webhook as the store has it now, at version v, until it works, a newer change supersedes it, or close. */
  private async publishRetrying(orgId: string, webhookId: string, v: number): Promise<void> {
    const key = `${orgId}.${webhookId}`;
    this.newest.set(key, v);
    for (let attempt = 1; !this.closed && this.newest.get(key) === v; attempt++) {
      try {
        const row = getWebhook(this.db, orgId, webhookId);
        await this.publisher.publish(orgId, webhookId, v, row ? entryOf(row) : null);
        if (this.newest.get(key) === v) this.newest.delete(key);
        return;
      } catch (err) {
        if (attempt === 1) this.logger.warn({ webhook_id: webhookId, err: String(err) }, 'could not replicate a webhook change; retrying');
        await new Promise((r) => setTimeout(r, RETRY_MS));
      }
    }
  }
}
