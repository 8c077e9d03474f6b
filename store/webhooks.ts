import type { Db } from './db.ts';
import { fromJson, nowIso, toJson } from './db.ts';
import { getSetting, REGISTRY_VERSION_SETTING } from './settings.ts';
import type { WebhookTarget } from '../src/domain/webhook-entry.ts';

/** A webhook as stored: its target and secrets (WebhookTarget), interests, match, watchdog. */
export interface WebhookRow extends WebhookTarget {
  interests: unknown | null;
  match: unknown | null;
  match_canonical: string;
  /** CONTRACT 4.1 `disable_after` as given ({failures, duration}), null: never disabled automatically */
  disable_after: { failures: number; duration: string } | null;
  /** CONTRACT 10.2 payload filter as given (a JSON object), null: none */
  filter: Record<string, unknown> | null;
  /** CONTRACT 10.1 `delivery`: {ordering: 'per_key'} serialises its attempts per ordering key; null: no order */
  delivery: WebhookDelivery | null;
  /** the delivery watchdog's state and context (see WatchRow; written by setWatch only) */
  watch_state: 'active' | 'failing' | 'disabled';
  watch_ctx: unknown | null;
  created_at: string;
  updated_at: string;
  /**
   * The webhook registry's version when it was created (the version its create replicates at,
   * src/handoff/registry-replicator.ts): events emitted before it, with an older one, are not its.
   */
  since_rev: number;
}

/** What a create writes: the watchdog starts active; disable_after defaults to null. */
export type NewWebhook = Omit<
  WebhookRow,
  'created_at' | 'updated_at' | 'watch_state' | 'watch_ctx' | 'disable_after' | 'filter' | 'delivery' | 'since_rev'
> &
  Partial<Pick<WebhookRow, 'disable_after' | 'filter' | 'delivery'>>;

/** How a webhook's attempts are made (CONTRACT 10.1). */
export interface WebhookDelivery {
  ordering: 'per_key';
}

/** The delivery watchdog of a webhook (machines/webhook-watchdog.ts): written by the engine only. */
export interface WatchRow {
  webhook_id: string;
  org_id: string;
  url: string;
  disable_after: WebhookRow['disable_after'];
  watch_state: 'active' | 'failing' | 'disabled';
  /** the machine's context (JSON), null before its first transition */
  watch_ctx: unknown | null;
}

interface RawRow extends Omit<WebhookRow, 'interests' | 'match' | 'disable_after' | 'watch_ctx' | 'filter' | 'delivery'> {
  filter: string | null;
  delivery: string | null;
  interests: string | null;
  match: string | null;
  disable_after: string | null;
  watch_ctx: string | null;
}

const INSERT_COLS =
  'webhook_id, org_id, url, secret, previous_secret, previous_secret_expires_at, ' +
  'interests, match, match_canonical, disable_after, delivery, created_at, updated_at';
const COLS = `${INSERT_COLS}, watch_state, watch_ctx, filter, since_rev`;

function decode(r: RawRow): WebhookRow {
  return {
    ...r,
    interests: fromJson(r.interests, null),
    match: fromJson(r.match, null),
    disable_after: fromJson(r.disable_after, null),
    delivery: fromJson(r.delivery, null),
    watch_ctx: fromJson(r.watch_ctx, null),
    filter: fromJson(r.filter, null),
  };
}

export class UniqueViolation extends Error {}

function isUnique(err: unknown): boolean {
  return err instanceof Error && 'code' in err && String((err as { code: unknown }).code).startsWith('SQLITE_CONSTRAINT_UNIQUE');
}

/** Write to the webhooks table; a second webhook of the same org, url and match (webhooks_unique) is a UniqueViolation. */
function writeUnique(write: () => void): void {
  try {
    write();
  } catch (err) {
    if (isUnique(err)) throw new UniqueViolation('a webhook with this url and match already exists');
    throw err;
  }
}

type SecretAndSubscription = Pick<
  WebhookRow,
  'secret' | 'previous_secret' | 'previous_secret_expires_at' | 'interests' | 'match' | 'match_canonical'
>;

/** The values of secret, previous_secret, previous_secret_expires_at, interests, match, match_canonical, in that order. */
function secretAndSubscription(w: SecretAndSubscription): unknown[] {
  return [w.secret, w.previous_secret, w.previous_secret_expires_at, toJson(w.interests), toJson(w.match), w.match_canonical];
}

export function insertWebhook(db: Db, w: NewWebhook): WebhookRow {
  const now = nowIso();
  writeUnique(() =>
    db
      .prepare(`INSERT INTO webhooks (${INSERT_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
      .run(
        w.webhook_id,
        w.org_id,
        w.url,
        ...secretAndSubscription(w),
        toJson(w.disable_after ?? null),
        toJson(w.delivery ?? null),
        now,
        now,
      ),
  );
  // the newest event it was created after: a recovery without backfill starts there (CONTRACT 4.5)
  db.prepare('UPDATE webhooks SET created_seq = (SELECT COALESCE(MAX(seq), 0) FROM events) WHERE webhook_id = ?').run(w.webhook_id);
  if (w.filter) db.prepare('UPDATE webhooks SET filter = ? WHERE webhook_id = ?').run(toJson(w.filter), w.webhook_id);
  // the version its create replicates at: the replicator bumps the one it has once this commits
  const sinceRev = Number(getSetting(db, REGISTRY_VERSION_SETTING) ?? '0') + 1;
  db.prepare('UPDATE webhooks SET since_rev = ? WHERE webhook_id = ?').run(sinceRev, w.webhook_id);
  return {
    ...w,
    disable_after: w.disable_after ?? null,
    filter: w.filter ?? null,
    delivery: w.delivery ?? null,
    watch_state: 'active',
    watch_ctx: null,
    created_at: now,
    updated_at: now,
    since_rev: sinceRev,
  };
}

export function getWebhook(db: Db, orgId: string, id: string): WebhookRow | undefined {
  const r = db.prepare(`SELECT ${COLS} FROM webhooks WHERE org_id = ? AND webhook_id = ?`).get(orgId, id) as RawRow | undefined;
  return r && decode(r);
}

/** Newest first. */
export function listWebhooks(db: Db, orgId: string): WebhookRow[] {
  return (db.prepare(`SELECT ${COLS} FROM webhooks WHERE org_id = ? ORDER BY rowid DESC`).all(orgId) as RawRow[]).map(decode);
}

/** How many webhooks the org has (CONTRACT 8 webhooks per org; counted on the webhooks_org index). */
/** The newest event's seq when the webhook was created (0: none, or unknown). */
export function webhookCreatedSeq(db: Db, webhookId: string): number {
  return (db.prepare('SELECT created_seq AS n FROM webhooks WHERE webhook_id = ?').get(webhookId) as { n: number } | undefined)?.n ?? 0;
}

export function countWebhooks(db: Db, orgId: string): number {
  return (db.prepare('SELECT COUNT(*) AS n FROM webhooks WHERE org_id = ?').get(orgId) as { n: number }).n;
}

export function listAllWebhooks(db: Db): WebhookRow[] {
  return (db.prepare(`SELECT ${COLS} FROM webhooks ORDER BY rowid`).all() as RawRow[]).map(decode);
}

export function updateWebhook(
  db: Db,
  w: Pick<WebhookRow, 'org_id' | 'webhook_id'> &
    SecretAndSubscription &
    /** omitted: unchanged */
    Partial<Pick<WebhookRow, 'disable_after' | 'filter' | 'delivery'>>,
): WebhookRow | undefined {
  writeUnique(() =>
    db
      .prepare(
        `UPDATE webhooks SET secret = ?, previous_secret = ?, previous_secret_expires_at = ?, interests = ?, match = ?, match_canonical = ?,
       disable_after = CASE WHEN ? THEN ? ELSE disable_after END, delivery = CASE WHEN ? THEN ? ELSE delivery END,
       updated_at = ? WHERE org_id = ? AND webhook_id = ?`,
      )
      .run(
        ...secretAndSubscription(w),
        w.disable_after !== undefined ? 1 : 0,
        toJson(w.disable_after ?? null),
        w.delivery !== undefined ? 1 : 0,
        toJson(w.delivery ?? null),
        nowIso(),
        w.org_id,
        w.webhook_id,
      ),
  );
  // after the write that may be refused (a 409 changes nothing)
  if (w.filter !== undefined) {
    db.prepare('UPDATE webhooks SET filter = ? WHERE org_id = ? AND webhook_id = ?').run(toJson(w.filter), w.org_id, w.webhook_id);
  }
  return getWebhook(db, w.org_id, w.webhook_id);
}

export function deleteWebhook(db: Db, orgId: string, id: string): boolean {
  return db.prepare('DELETE FROM webhooks WHERE org_id = ? AND webhook_id = ?').run(orgId, id).changes > 0;
}

/** A webhook's watchdog, by id alone (the outcome path knows no org); undefined when it is gone. */
export function getWatch(db: Db, webhookId: string): WatchRow | undefined {
  const r = db
    .prepare('SELECT webhook_id, org_id, url, disable_after, watch_state, watch_ctx FROM webhooks WHERE webhook_id = ?')
    .get(webhookId) as
    | (Omit<WatchRow, 'disable_after' | 'watch_ctx'> & { disable_after: string | null; watch_ctx: string | null })
    | undefined;
  return r && { ...r, disable_after: fromJson(r.disable_after, null), watch_ctx: fromJson(r.watch_ctx, null) };
}

/** The watchdog's new state (the engine, in the transaction that emits its events). */
export function setWatch(db: Db, webhookId: string, state: WatchRow['watch_state'], ctx: unknown): void {
  db.prepare('UPDATE webhooks SET watch_state = ?, watch_ctx = ? WHERE webhook_id = ?').run(state, toJson(ctx), webhookId);
}
