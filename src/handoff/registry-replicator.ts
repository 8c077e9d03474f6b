// The webhook registry, replicated from the store to the data plane (RegistryReplicator; the data
// plane's side is src/dispatch/registry.ts): every create, update or
// delete of a webhook bumps a version (persisted, so it only grows) and publishes the webhook's
// entry at that version — to NATS KV (encrypted), or straight into the in-process registry in
// embedded mode. Events carry the version current when they were emitted (Route.rev), so a data
// plane never matches an event against an older registry than the one the API had answered with.
//
// Nothing here holds up the engine (CONTRACT 8): the sync at start runs behind `listening` (start()
// waits a few seconds at most for it to read the replica and pick its version), and an entry the
// bus cannot carry (over NATS max_payload: data from before the limits) is set aside — a dead
// letter without its secrets, counted, logged — and replaced on the data plane by a tombstone at
// its version: that webhook gets no deliveries until it changes, and every other entry goes on.
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import { getWebhook, listAllWebhooks, type WebhookRow } from '../../store/webhooks.ts';
import { getSetting, REGISTRY_VERSION_SETTING, setSetting } from '../../store/settings.ts';
import type { WebhookEntry } from '../domain/webhook-entry.ts';
import { errorText } from '../domain/errors.ts';
import { sleep, systemClock, within, type Clock } from '../domain/clock.ts';
import { storedInterests, type Match } from '../domain/subscription.ts';
import { jsonEqual } from '../../machines/advance.ts';
import { hasDeadLetter } from '../../store/dead-letters.ts';
import type { Metrics } from '../metrics.ts';
import { isUnpublishable, registryDeadLetterId, SetAside } from './set-aside.ts';

/** Where entries go: KV, or the in-process registry. */
export interface RegistryPublisher {
  /** Replicate one webhook at version v (entry null: deleted). Rejects when it could not. */
  publish(orgId: string, webhookId: string, v: number, entry: WebhookEntry | null): Promise<void>;
  /** What is replicated now, by `<org>.<webhook>`: each entry (null: a tombstone), to publish only what differs. */
  replicated(): Promise<Map<string, WebhookEntry | null>>;
}

export function entryOf(row: WebhookRow): WebhookEntry {
  const { interests, chosen } = storedInterests(row.interests);
  return {
    webhook_id: row.webhook_id,
    org_id: row.org_id,
    url: row.url,
    secret: row.secret,
    previous_secret: row.previous_secret,
    previous_secret_expires_at: row.previous_secret_expires_at,
    interests,
    ...(chosen ? {} : { implicit_interests: true as const }),
    match: (row.match as Match | null) ?? null,
    // only when there is one (CONTRACT 10.2), so that entries without read as before 0.3
    ...(row.filter ? { filter: row.filter } : {}),
    // only when disabled, so that the entries of webhooks that never were read as before 0.2
    ...(row.watch_state === 'disabled' ? { disabled: true as const } : {}),
    ...(row.delivery?.ordering === 'per_key' ? { ordering: 'per_key' as const } : {}),
    // only when it has one, so that entries of webhooks from before read as before
    ...(row.since_rev ? { since_rev: row.since_rev } : {}),
  };
}

const VERSION_KEY = REGISTRY_VERSION_SETTING;
const RETRY_MS = 1000;
/** How long start() waits for the sync before going on (the sync goes on behind). */
const START_WAIT_MS = 3000;
/** How long stop() waits for changes still being replicated. */
const STOP_WAIT_MS = 2000;

export class RegistryReplicator {
  private v: number;
  private readonly pending = new Set<Promise<void>>();
  /** the newest version of each webhook's change: an older one still retrying is dropped */
  private readonly newest = new Map<string, number>();
  private closed = false;
  private readonly aside: SetAside;

  constructor(
    private readonly db: Db,
    private readonly publisher: RegistryPublisher,
    private readonly logger: Logger,
    metrics: Metrics | null = null,
    /** the waits between tries and at start and stop */
    private readonly clock: Clock = systemClock,
  ) {
    this.v = Number(getSetting(db, VERSION_KEY) ?? '0');
    this.aside = new SetAside(db, logger, metrics);
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

  /** A webhook was created, changed or deleted: replicate it (retrying until it works or the replicator closes). */
  changed(orgId: string, webhookId: string): void {
    const v = this.bump();
    this.track(this.publishRetrying(orgId, webhookId, v));
  }

  /**
   * At start, without holding it up: syncAll(), tried again while the replica cannot be read.
   * Resolves once the sync is done (at once in embedded mode; in NATS mode as soon as the replica
   * is read and what differs is published, or set aside), or after a few seconds whatever it is
   * still doing: it goes on behind the caller.
   */
  async start(waitMs = START_WAIT_MS): Promise<void> {
    const run = async () => {
      for (let attempt = 1; !this.closed; attempt++) {
        try {
          await this.syncAll();
          return;
        } catch (err) {
          if (attempt === 1) this.logger.warn({ err: String(err) }, 'could not read the replicated webhook registry; retrying');
          await sleep(this.clock, RETRY_MS);
        }
      }
    };
    const done = run();
    this.track(done);
    await within(this.clock, done, waitMs);
  }

  /**
   * At start: publish, at a new version, every webhook the replica lacks or holds otherwise than the
   * store (a change whose publication a crash cut short), and a tombstone for any the store lost.
   * When the replica already agrees, nothing is published and the version stays. An entry set
   * aside before (the replica holds its tombstone) agrees.
   */
  async syncAll(): Promise<void> {
    const replica = await this.publisher.replicated();
    const rows = listAllWebhooks(this.db);
    const stale: Array<{ orgId: string; webhookId: string }> = [];
    const keep = new Set<string>();
    for (const r of rows) {
      const key = `${r.org_id}.${r.webhook_id}`;
      keep.add(key);
      const have = replica.get(key);
      if (have === null && hasDeadLetter(this.db, registryDeadLetterId(entryOf(r)))) continue;
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

  /** At shutdown: wait a little for the changes still being replicated, then give up on the rest (the next start syncs them). */
  async stop(waitMs = STOP_WAIT_MS): Promise<void> {
    await within(this.clock, this.settled(), waitMs);
    this.close();
  }

  private track(p: Promise<void>): void {
    this.pending.add(p);
    void p
      .catch((err: unknown) => this.logger.warn({ err: String(err) }, 'webhook registry replication stopped'))
      .finally(() => this.pending.delete(p));
  }

  /**
   * Publish the webhook as the store has it now, at version v, until it works, a newer change
   * supersedes it, or close. An entry the bus cannot carry is set aside and a tombstone published
   * in its place.
   */
  private async publishRetrying(orgId: string, webhookId: string, v: number): Promise<void> {
    const key = `${orgId}.${webhookId}`;
    this.newest.set(key, v);
    let setAside = false;
    let warned = false;
    while (!this.closed && this.newest.get(key) === v) {
      let entry: WebhookEntry | null = null;
      try {
        const row = setAside ? undefined : getWebhook(this.db, orgId, webhookId);
        entry = row ? entryOf(row) : null;
        await this.publisher.publish(orgId, webhookId, v, entry);
        if (this.newest.get(key) === v) this.newest.delete(key);
        return;
      } catch (err) {
        if (this.closed) return;
        if (entry && isUnpublishable(err)) {
          this.aside.registry(entry, errorText(err));
          setAside = true;
          continue; // the tombstone, at once
        }
        if (!warned) this.logger.warn({ webhook_id: webhookId, err: String(err) }, 'could not replicate a webhook change; retrying');
        warned = true;
        await sleep(this.clock, RETRY_MS);
      }
    }
  }
}
