// Event history, the attempt log and recoveries (CONTRACT 4.5), kept for --event-retention.
// Events are written in one transaction with the facts that caused them, queued in their history
// row (NATS mode, insertQueuedEvent) or with an outbox row;
// attempts in batches beside the delivery status (never a write per attempt); everything older
// than the retention is pruned by age, and reads never return it even before a prune.
import type { Db } from './db.ts';
import { pruneDeadLetters } from './dead-letters.ts';

export interface StoredEvent {
  seq: number;
  event_id: string;
  org_id: string;
  type: string;
  subject: string;
  body: string;
  route: string;
  created_ms: number;
  /** its ordering key and sequence (CONTRACT 10.1); null for events kept before 0.3 */
  order_key?: string | null;
  sequence?: number | null;
}

export function insertEvent(db: Db, e: Omit<StoredEvent, 'seq'>): void {
  db.prepare(
    'INSERT OR IGNORE INTO events (event_id, org_id, type, subject, body, route, created_ms, order_key, sequence) ' +
      'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
  ).run(e.event_id, e.org_id, e.type, e.subject, e.body, e.route, e.created_ms, e.order_key ?? null, e.sequence ?? null);
}

/**
 * NATS mode: an emitted event's history row, which is its queue row too (migration 17), in hop
 * batch `batch`. Its seq, or null when an event of that id is kept already (then it is not queued).
 */
export function insertQueuedEvent(db: Db, e: Omit<StoredEvent, 'seq'>, batch: string): number | null {
  const r = db
    .prepare(
      'INSERT OR IGNORE INTO events (event_id, org_id, type, subject, body, route, created_ms, batch, order_key, sequence) ' +
        'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    )
    .run(e.event_id, e.org_id, e.type, e.subject, e.body, e.route, e.created_ms, batch, e.order_key ?? null, e.sequence ?? null);
  return r.changes > 0 ? Number(r.lastInsertRowid) : null;
}

export interface QueuedEvent extends StoredEvent {
  batch: string;
}

/** Queued history rows after a seq, oldest first (a range of the key; rows not queued are passed over). */
export function readQueuedEvents(db: Db, afterSeq: number, limit: number): QueuedEvent[] {
  return db
    .prepare(
      'SELECT seq, event_id, org_id, type, subject, body, route, created_ms, batch FROM events ' +
        'WHERE seq > ? AND batch IS NOT NULL ORDER BY seq LIMIT ?',
    )
    .all(afterSeq, limit) as QueuedEvent[];
}

/** The last seq of events JetStream has stored (every queued row up to it is published). */
export function relayCursor(db: Db): number {
  return (db.prepare('SELECT events_seq FROM relay_cursor WHERE id = 1').get() as { events_seq: number } | undefined)?.events_seq ?? 0;
}

/** Move the cursor on to `seq` (never back). */
export function saveRelayCursor(db: Db, seq: number): void {
  db.prepare('UPDATE relay_cursor SET events_seq = ? WHERE id = 1 AND events_seq < ?').run(seq, seq);
}

export interface EventQuery {
  orgId: string;
  /** kept: created at or after this (ms); also the retention cut-off */
  sinceMs: number;
  untilMs: number | null;
  type: string | null;
  subjectPrefix: string | null;
  afterSeq: number;
  limit: number;
  /** newest first (the dashboard; the API is oldest first): `afterSeq` is then the seq the page goes down from (0: the newest) */
  newestFirst?: boolean;
}

/**
 * How far an event's time may be out of step with its seq and still be found by a window of time:
 * events' times are the engine's clock as they are appended, so they grow with seq, unless the clock
 * is stepped back (then by the size of the step).
 */
export const CLOCK_STEP_SLACK_MS = 10 * 60_000;

/**
 * The seqs an event created in [sinceMs, untilMs) can have: after `after`, up to `upTo`. Found by
 * bisection on seq (the history has no index on its time: issue 33, an index that every event paid
 * a page write for), with CLOCK_STEP_SLACK_MS to spare on each side; the caller still filters by time.
 */
export function eventSeqsBetween(db: Db, sinceMs: number, untilMs: number | null): { after: number; upTo: number } {
  return {
    after: lastSeqBefore(db, 'events', 'created_ms', sinceMs - CLOCK_STEP_SLACK_MS),
    upTo: untilMs === null ? Number.MAX_SAFE_INTEGER : lastSeqBefore(db, 'events', 'created_ms', untilMs + CLOCK_STEP_SLACK_MS),
  };
}

/** An org's kept events in a window, oldest first (by seq, after a cursor), or newest first (below a cursor). */
export function listEvents(db: Db, q: EventQuery): StoredEvent[] {
  const seqs = eventSeqsBetween(db, q.sinceMs, q.untilMs);
  const where = ['org_id = ?', 'seq > ?', 'seq <= ?', 'created_ms >= ?'];
  const args: unknown[] = q.newestFirst
    ? [q.orgId, seqs.after, q.afterSeq > 0 ? Math.min(q.afterSeq - 1, seqs.upTo) : seqs.upTo, q.sinceMs]
    : [q.orgId, Math.max(q.afterSeq, seqs.after), seqs.upTo, q.sinceMs];
  if (q.untilMs !== null) {
    where.push('created_ms < ?');
    args.push(q.untilMs);
  }
  if (q.type !== null) {
    where.push('type = ?');
    args.push(q.type);
  }
  if (q.subjectPrefix !== null) {
    // a prefix match without LIKE's wildcards
    where.push('substr(subject, 1, ?) = ?');
    args.push(q.subjectPrefix.length, q.subjectPrefix);
  }
  args.push(q.limit);
  return db
    .prepare(`SELECT * FROM events WHERE ${where.join(' AND ')} ORDER BY seq${q.newestFirst ? ' DESC' : ''} LIMIT ?`)
    .all(...args) as StoredEvent[];
}

/** The newest event's seq (0 when none). */
export function lastEventSeq(db: Db): number {
  return (db.prepare('SELECT COALESCE(MAX(seq), 0) AS n FROM events').get() as { n: number }).n;
}

/** One kept event of an org (created at or after keptSinceMs), or undefined. */
export function getEvent(db: Db, orgId: string, eventId: string, keptSinceMs: number): StoredEvent | undefined {
  return db.prepare('SELECT * FROM events WHERE event_id = ? AND org_id = ? AND created_ms >= ?').get(eventId, orgId, keptSinceMs) as
    | StoredEvent
    | undefined;
}

// ---------------------------------------------------------------- attempts

export interface AttemptRow {
  webhook_id: string;
  org_id: string;
  event_id: string;
  type: string;
  attempted_ms: number;
  ok: boolean;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
  recovery_id: string | null;
  kept_ms: number;
  /** the kept request and response, JSON (src/delivery/exchange-record.ts); null: none (attempts before 0.3 too) */
  exchange?: string | null;
}

export interface StoredAttempt extends Omit<AttemptRow, 'ok'> {
  seq: number;
  ok: number;
  subject: string | null;
}

/**
 * Append attempts and count the recoveries' ones, in one transaction. Rows arrive in the order the
 * attempts ended; they are stored in the order they started, so that the log (newest first by seq)
 * reads in attempt time.
 */
export function saveAttempts(db: Db, given: readonly AttemptRow[]): void {
  if (!given.length) return;
  const rows = [...given].sort((a, b) => a.attempted_ms - b.attempted_ms);
  const ins = db.prepare(
    `INSERT INTO delivery_attempts
       (webhook_id, org_id, event_id, type, attempted_ms, ok, status_code, error, duration_ms, recovery_id, kept_ms, exchange)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const counts = new Map<string, { ok: number; failed: number }>();
  for (const r of rows) {
    if (!r.recovery_id) continue;
    const c = counts.get(r.recovery_id) ?? { ok: 0, failed: 0 };
    if (r.ok) c.ok++;
    else c.failed++;
    counts.set(r.recovery_id, c);
  }
  const upd = db.prepare(
    'UPDATE recoveries SET attempted = attempted + ?, succeeded = succeeded + ?, failed = failed + ? WHERE recovery_id = ?',
  );
  db.transaction(() => {
    for (const r of rows) {
      ins.run(
        r.webhook_id,
        r.org_id,
        r.event_id,
        r.type,
        r.attempted_ms,
        r.ok ? 1 : 0,
        r.status_code,
        r.error,
        Math.round(r.duration_ms),
        r.recovery_id,
        r.kept_ms,
        r.exchange ?? null,
      );
    }
    for (const [id, c] of counts) upd.run(c.ok + c.failed, c.ok, c.failed, id);
  })();
}

export interface AttemptQuery {
  webhookId: string;
  keptSinceMs: number;
  sinceMs: number | null;
  untilMs: number | null;
  ok: boolean | null;
  eventId: string | null;
  /** 0 = from the newest */
  beforeSeq: number;
  limit: number;
  /** read each attempt's kept exchange too (else `exchange` is null: it is up to about 13 KiB a row) */
  withExchange?: boolean;
}

/** A webhook's kept attempts, newest first (by seq, before a cursor), with each event's subject. */
export function listAttempts(db: Db, q: AttemptQuery): StoredAttempt[] {
  const where = ['a.webhook_id = ?', 'a.kept_ms >= ?'];
  const args: unknown[] = [q.webhookId, q.keptSinceMs];
  if (q.beforeSeq > 0) {
    where.push('a.seq < ?');
    args.push(q.beforeSeq);
  }
  if (q.sinceMs !== null) {
    where.push('a.attempted_ms >= ?');
    args.push(q.sinceMs);
  }
  if (q.untilMs !== null) {
    where.push('a.attempted_ms < ?');
    args.push(q.untilMs);
  }
  if (q.ok !== null) {
    where.push('a.ok = ?');
    args.push(q.ok ? 1 : 0);
  }
  if (q.eventId !== null) {
    where.push('a.event_id = ?');
    args.push(q.eventId);
  }
  args.push(q.limit);
  return db
    .prepare(
      `SELECT a.seq, a.webhook_id, a.org_id, a.event_id, a.type, a.attempted_ms, a.ok, a.status_code, a.error, a.duration_ms,
       a.recovery_id, a.kept_ms, ${q.withExchange ? 'a.exchange' : 'NULL AS exchange'}, e.subject AS subject
       FROM delivery_attempts a LEFT JOIN events e ON e.event_id = a.event_id WHERE ${where.join(' AND ')} ORDER BY a.seq DESC LIMIT ?`,
    )
    .all(...args) as StoredAttempt[];
}

/**
 * A webhook's kept attempts that started at or after sinceMs, counted per hour and outcome (hour =
 * floor((attempted_ms - sinceMs) / 1 h)): read newest first on the (webhook_id, seq) index, the seq
 * following the start time, stopping at the first older attempt or after `cap` rows.
 */
export function attemptsPerHour(
  db: Db,
  webhookId: string,
  sinceMs: number,
  keptSinceMs: number,
  cap: number,
): Array<{ hour: number; ok: boolean; n: number }> {
  const counts = new Map<string, number>();
  let read = 0;
  const rows = db
    .prepare('SELECT attempted_ms, ok FROM delivery_attempts WHERE webhook_id = ? AND kept_ms >= ? ORDER BY seq DESC')
    .iterate(webhookId, keptSinceMs) as IterableIterator<{ attempted_ms: number; ok: number }>;
  for (const r of rows) {
    if (r.attempted_ms < sinceMs || ++read > cap) break;
    const key = `${Math.floor((r.attempted_ms - sinceMs) / 3_600_000)}:${r.ok ? 1 : 0}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].map(([k, n]) => {
    const [hour, ok] = k.split(':');
    return { hour: Number(hour), ok: ok === '1', n };
  });
}

/**
 * One event's kept attempts at each of the org's webhooks, newest first per webhook: one lookup on
 * the event index, each attempt's webhook by its key.
 */
export function listEventAttempts(
  db: Db,
  orgId: string,
  eventId: string,
  keptSinceMs: number,
): Array<StoredAttempt & { webhook_url: string }> {
  return db
    .prepare(
      `SELECT a.*, w.url AS webhook_url, NULL AS subject
       FROM webhooks w JOIN delivery_attempts a ON a.webhook_id = w.webhook_id AND a.event_id = ?
       WHERE w.org_id = ? AND a.org_id = ? AND a.kept_ms >= ? ORDER BY w.url, w.webhook_id, a.seq DESC`,
    )
    .all(eventId, orgId, orgId, keptSinceMs) as Array<StoredAttempt & { webhook_url: string }>;
}

/** Which of these events got through to this webhook at least once. */
export function deliveredEventIds(db: Db, webhookId: string, eventIds: readonly string[]): Set<string> {
  if (!eventIds.length) return new Set();
  // one statement whatever the number of ids (the connection caches statements by their text); a
  // lookup per id on the event index (`+webhook_id` keeps SQLite off the webhook's, which would read
  // every attempt the webhook has kept)
  const rows = db
    .prepare(
      'SELECT DISTINCT event_id FROM delivery_attempts WHERE +webhook_id = ? AND ok = 1 AND event_id IN (SELECT value FROM json_each(?))',
    )
    .all(webhookId, JSON.stringify(eventIds)) as Array<{ event_id: string }>;
  return new Set(rows.map((r) => r.event_id));
}

// ---------------------------------------------------------------- recoveries

export interface RecoveryRow {
  recovery_id: string;
  org_id: string;
  webhook_id: string;
  /** items found so far (final once prepared) */
  events: number;
  attempted: number;
  succeeded: number;
  failed: number;
  /** 1 once the whole window has been looked at (events is final) */
  prepared: number;
  created_ms: number;
  since_ms: number;
  until_ms: number | null;
  /** a recovery of one ordering key's gap (CONTRACT 10.1): its events with a sequence in (after_sequence, until_sequence] */
  order_key: string | null;
  after_sequence: number | null;
  until_sequence: number | null;
  only_failed: number;
  backfill: number;
  /** events with a seq in (from_seq, to_seq] are in the window */
  from_seq: number;
  to_seq: number;
  rev: number;
  /** JSON {interests, match} as they were when it was asked for */
  subscription: string | null;
  /** the cursor: events up to it have been looked at */
  scanned_seq: number;
  /** items queued in the outbox so far */
  fed: number;
  finished_ms: number | null;
}

export type NewRecovery = Pick<
  RecoveryRow,
  | 'recovery_id'
  | 'org_id'
  | 'webhook_id'
  | 'created_ms'
  | 'since_ms'
  | 'until_ms'
  | 'order_key'
  | 'after_sequence'
  | 'until_sequence'
  | 'only_failed'
  | 'backfill'
  | 'from_seq'
  | 'to_seq'
  | 'rev'
  | 'subscription'
>;

/** A recovery that has found nothing yet. */
export function insertRecovery(db: Db, r: NewRecovery): void {
  db.prepare(
    `INSERT INTO recoveries (recovery_id, org_id, webhook_id, events, created_ms, since_ms, until_ms, order_key, after_sequence,
       until_sequence, only_failed, backfill, from_seq, to_seq, rev, subscription, scanned_seq)
     VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    r.recovery_id,
    r.org_id,
    r.webhook_id,
    r.created_ms,
    r.since_ms,
    r.until_ms,
    r.order_key,
    r.after_sequence,
    r.until_sequence,
    r.only_failed,
    r.backfill,
    r.from_seq,
    r.to_seq,
    r.rev,
    r.subscription,
    r.from_seq,
  );
}

export function getRecovery(db: Db, orgId: string, webhookId: string, recoveryId: string): RecoveryRow | undefined {
  return db.prepare('SELECT * FROM recoveries WHERE recovery_id = ? AND org_id = ? AND webhook_id = ?').get(recoveryId, orgId, webhookId) as
    | RecoveryRow
    | undefined;
}

/** The org's running recoveries (oldest first). */
export function runningRecoveries(db: Db, orgId: string): Array<Pick<RecoveryRow, 'recovery_id' | 'webhook_id'>> {
  return db
    .prepare('SELECT recovery_id, webhook_id FROM recoveries WHERE org_id = ? AND finished_ms IS NULL ORDER BY created_ms, recovery_id')
    .all(orgId) as Array<Pick<RecoveryRow, 'recovery_id' | 'webhook_id'>>;
}

/** Every running recovery (oldest first): what the engine feeds. */
export function allRunningRecoveries(db: Db): RecoveryRow[] {
  return db.prepare('SELECT * FROM recoveries WHERE finished_ms IS NULL ORDER BY created_ms, recovery_id').all() as RecoveryRow[];
}

export function recoveryById(db: Db, recoveryId: string): RecoveryRow | undefined {
  return db.prepare('SELECT * FROM recoveries WHERE recovery_id = ?').get(recoveryId) as RecoveryRow | undefined;
}

/**
 * The next events of a recovery's window after its cursor (the org's, not set aside as
 * unpublishable), without their bodies unless `withBody` (a filtered webhook's recovery reads them).
 */
export function recoveryCandidates(
  db: Db,
  r: RecoveryRow,
  limit: number,
  withBody = false,
): Array<Pick<StoredEvent, 'seq' | 'event_id' | 'route'> & { body?: string }> {
  if (r.order_key !== null) return keyRecoveryCandidates(db, r, limit, withBody);
  const until = r.until_ms === null ? '' : ' AND e.created_ms < ?';
  const seqs = eventSeqsBetween(db, r.since_ms, r.until_ms);
  const args: unknown[] = [
    r.org_id,
    Math.max(r.scanned_seq, seqs.after),
    Math.min(r.to_seq, seqs.upTo),
    r.since_ms,
    ...(r.until_ms === null ? [] : [r.until_ms]),
    limit,
  ];
  return db
    .prepare(
      `SELECT e.seq, e.event_id, e.route${withBody ? ', e.body' : ''} FROM events e
       WHERE e.org_id = ? AND e.seq > ? AND e.seq <= ? AND e.created_ms >= ?${until}
         AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.id = e.event_id)
       ORDER BY e.seq LIMIT ?`,
    )
    .all(...args) as Array<Pick<StoredEvent, 'seq' | 'event_id' | 'route'> & { body?: string }>;
}

/**
 * The next events of a recovery of one key's gap after its cursor, through the (org, key, sequence)
 * index: a key's sequences grow with seq (both follow commit order), so the cursor is still a seq.
 */
function keyRecoveryCandidates(
  db: Db,
  r: RecoveryRow,
  limit: number,
  withBody: boolean,
): Array<Pick<StoredEvent, 'seq' | 'event_id' | 'route'> & { body?: string }> {
  return db
    .prepare(
      `SELECT e.seq, e.event_id, e.route${withBody ? ', e.body' : ''} FROM events e
       WHERE e.org_id = ? AND e.order_key = ? AND e.sequence > ? AND e.sequence <= ? AND e.seq > ? AND e.seq <= ? AND e.created_ms >= ?
         AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.id = e.event_id)
       ORDER BY e.sequence LIMIT ?`,
    )
    .all(
      r.org_id,
      r.order_key,
      r.after_sequence ?? 0,
      r.until_sequence ?? Number.MAX_SAFE_INTEGER,
      r.scanned_seq,
      r.to_seq,
      r.since_ms,
      limit,
    ) as Array<Pick<StoredEvent, 'seq' | 'event_id' | 'route'> & { body?: string }>;
}

/** The kept events of one ordering key (CONTRACT 10.1), in sequence order: above `afterSequence`, after the cursor `afterSeq`. */
export function listKeyEvents(
  db: Db,
  q: { orgId: string; orderKey: string; afterSequence: number; afterSeq: number; keptSinceMs: number; limit: number },
): StoredEvent[] {
  return db
    .prepare(
      `SELECT * FROM events WHERE org_id = ? AND order_key = ? AND sequence > ? AND seq > ? AND created_ms >= ?
       ORDER BY sequence LIMIT ?`,
    )
    .all(q.orgId, q.orderKey, q.afterSequence, q.afterSeq, q.keptSinceMs, q.limit) as StoredEvent[];
}

/** The kept events of a key just before and after a sequence (CONTRACT 10.1): their ids, or null when not kept. */
export function keyNeighbours(
  db: Db,
  orgId: string,
  orderKey: string,
  sequence: number,
  keptSinceMs: number,
): { previous: string | null; next: string | null } {
  const at = (n: number) =>
    (
      db
        .prepare('SELECT event_id FROM events WHERE org_id = ? AND order_key = ? AND sequence = ? AND created_ms >= ?')
        .get(orgId, orderKey, n, keptSinceMs) as { event_id: string } | undefined
    )?.event_id ?? null;
  return { previous: sequence > 1 ? at(sequence - 1) : null, next: at(sequence + 1) };
}

/** Items found by a step of the cursor (in the caller's transaction): kept, counted, the cursor moved; `last`: the window is done. */
export function recoveryFound(db: Db, recoveryId: string, eventSeqs: readonly number[], scannedSeq: number, last: boolean): void {
  if (eventSeqs.length) {
    db.prepare('INSERT OR IGNORE INTO recovery_items (recovery_id, event_seq) SELECT ?, value FROM json_each(?)').run(
      recoveryId,
      JSON.stringify(eventSeqs),
    );
  }
  db.prepare('UPDATE recoveries SET events = events + ?, scanned_seq = ?, prepared = MAX(prepared, ?) WHERE recovery_id = ?').run(
    eventSeqs.length,
    scannedSeq,
    last ? 1 : 0,
    recoveryId,
  );
}

/** A recovery's next items to queue, oldest first, with their events (null: the event is gone, past retention). */
export function nextRecoveryItems(db: Db, recoveryId: string, limit: number): Array<{ event_seq: number; event: StoredEvent | null }> {
  const rows = db
    .prepare(
      `SELECT i.event_seq, e.seq, e.event_id, e.org_id, e.type, e.subject, e.body, e.route, e.created_ms
       FROM recovery_items i LEFT JOIN events e ON e.seq = i.event_seq WHERE i.recovery_id = ? ORDER BY i.event_seq LIMIT ?`,
    )
    .all(recoveryId, limit) as Array<{ event_seq: number } & { [K in keyof StoredEvent]: StoredEvent[K] | null }>;
  return rows.map((r) => ({ event_seq: r.event_seq, event: r.seq === null ? null : (r as unknown as StoredEvent) }));
}

/** Items queued (in the transaction that queued them): no longer waiting, counted fed; `gone` items are no longer counted at all. */
export function recoveryFed(db: Db, recoveryId: string, eventSeqs: readonly number[], gone: number): void {
  db.prepare('DELETE FROM recovery_items WHERE recovery_id = ? AND event_seq IN (SELECT value FROM json_each(?))').run(
    recoveryId,
    JSON.stringify(eventSeqs),
  );
  db.prepare('UPDATE recoveries SET fed = fed + ?, events = events - ? WHERE recovery_id = ?').run(
    eventSeqs.length - gone,
    gone,
    recoveryId,
  );
}

/** A recovery ends (everything fed and answered, or its webhook deleted: what was not fed is dropped). */
export function finishRecovery(db: Db, recoveryId: string, atMs: number): void {
  db.prepare('DELETE FROM recovery_items WHERE recovery_id = ?').run(recoveryId);
  db.prepare('UPDATE recoveries SET finished_ms = ?, prepared = 1, events = fed WHERE recovery_id = ? AND finished_ms IS NULL').run(
    atMs,
    recoveryId,
  );
}

// ---------------------------------------------------------------- retention

/**
 * The last seq of an append-only log whose time column is written from the engine's clock as rows
 * are appended (so it grows with seq) that is before the cut-off; 0 when none is. Found by bisection
 * on seq, a rowid lookup a step (about 30 for a billion rows), so that the log needs no index on its
 * time for retention alone: an index there cost every appended row a page write (issue 33). Should
 * the clock step back, rows appended just after the step may go with those just before it: a prune
 * early by the size of the step, and reads filter by the cut-off anyway.
 */
function lastSeqBefore(db: Db, log: 'events' | 'delivery_attempts', timeColumn: 'created_ms' | 'kept_ms', cutoffMs: number): number {
  const span = db.prepare(`SELECT MIN(seq) AS lo, MAX(seq) AS hi FROM ${log}`).get() as { lo: number | null; hi: number | null };
  if (span.lo === null || span.hi === null) return 0;
  const firstFrom = db.prepare(`SELECT seq, ${timeColumn} AS t FROM ${log} WHERE seq >= ? ORDER BY seq LIMIT 1`);
  let lo = span.lo;
  let hi = span.hi;
  let found = 0;
  while (lo <= hi) {
    const mid = lo + Math.floor((hi - lo) / 2);
    const row = firstFrom.get(mid) as { seq: number; t: number } | undefined;
    if (!row || row.seq > hi || row.t >= cutoffMs) {
      hi = mid - 1;
    } else {
      found = row.seq;
      lo = row.seq + 1;
    }
  }
  return found;
}

/**
 * Delete what is older than the cut-off (ms, the engine's clock), dead letters included; how many
 * rows went. Events from `queuedFrom` on (the first seq the relay has not seen stored, NATS mode)
 * stay, however old: they are the queue.
 */
export function pruneHistory(db: Db, cutoffMs: number, queuedFrom = Number.POSITIVE_INFINITY): number {
  return db.transaction(() => {
    const lastEvent = Math.min(lastSeqBefore(db, 'events', 'created_ms', cutoffMs), queuedFrom - 1);
    let n = db.prepare('DELETE FROM events WHERE seq <= ?').run(lastEvent).changes;
    n += db
      .prepare('DELETE FROM delivery_attempts WHERE seq <= ?')
      .run(lastSeqBefore(db, 'delivery_attempts', 'kept_ms', cutoffMs)).changes;
    n += db.prepare('DELETE FROM recoveries WHERE created_ms < ?').run(cutoffMs).changes;
    n += pruneDeadLetters(db, cutoffMs);
    db.prepare('DELETE FROM recovery_items WHERE recovery_id NOT IN (SELECT recovery_id FROM recoveries)').run();
    return n;
  })();
}

// ---------------------------------------------------------------- quota (--max-events-per-org)
// An org's oldest events past its quota are pruned (CONTRACT 8), in small steps: every read here
// walks a bounded range of the (org_id, seq) index or of the key, never an org's whole history
// (an OFFSET of 2,000,000 on the index takes about 55 ms).

/** The orgs that have events, after `afterOrg` in order, at most `limit`: a skip-scan of the (org_id, seq) index, a lookup each. */
export function orgsWithEvents(db: Db, afterOrg: string, limit: number): string[] {
  const next = db.prepare('SELECT org_id FROM events WHERE org_id > ? ORDER BY org_id LIMIT 1');
  const orgs: string[] = [];
  let after = afterOrg;
  while (orgs.length < limit) {
    const row = next.get(after) as { org_id: string } | undefined;
    if (!row) break;
    orgs.push(row.org_id);
    after = row.org_id;
  }
  return orgs;
}

/** An org's events in (afterSeq, upToSeq], at most `limit` of them counted (on the index): how many, and the last counted one's seq. */
export function countOrgEvents(
  db: Db,
  orgId: string,
  afterSeq: number,
  upToSeq: number,
  limit: number,
): { n: number; last: number | null } {
  return db
    .prepare(
      'SELECT COUNT(*) AS n, MAX(seq) AS last FROM (SELECT seq FROM events WHERE org_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?)',
    )
    .get(orgId, afterSeq, upToSeq, limit) as { n: number; last: number | null };
}

/** The events with a seq in (afterSeq, upToSeq] (a range of the key), counted per org, with each org's first seq there. */
export function eventsPerOrgBetween(db: Db, afterSeq: number, upToSeq: number): Array<{ org_id: string; n: number; first: number }> {
  return db
    .prepare('SELECT org_id, COUNT(*) AS n, MIN(seq) AS first FROM events WHERE seq > ? AND seq <= ? GROUP BY org_id')
    .all(afterSeq, upToSeq) as Array<{
    org_id: string;
    n: number;
    first: number;
  }>;
}

/** An org's oldest event's seq, or null when it has none. */
export function oldestOrgEvent(db: Db, orgId: string): number | null {
  return (
    (db.prepare('SELECT seq FROM events WHERE org_id = ? ORDER BY seq LIMIT 1').get(orgId) as { seq: number } | undefined)?.seq ?? null
  );
}

/**
 * Delete an org's `limit` oldest events and their attempts, in one transaction; no other org's rows,
 * and no event from `queuedFrom` on (NATS mode: the relay's queue, as pruneHistory). How many events
 * and attempts went, and the org's oldest event left (null: none).
 */
export function pruneOrgOldest(
  db: Db,
  orgId: string,
  limit: number,
  queuedFrom = Number.POSITIVE_INFINITY,
): { events: number; attempts: number; oldest: number | null } {
  if (limit <= 0) return { events: 0, attempts: 0, oldest: oldestOrgEvent(db, orgId) };
  return db.transaction(() => {
    const nth = db.prepare('SELECT seq FROM events WHERE org_id = ? ORDER BY seq LIMIT 1 OFFSET ?').get(orgId, limit - 1) as
      | { seq: number }
      | undefined;
    const last =
      nth?.seq ?? (db.prepare('SELECT MAX(seq) AS seq FROM events WHERE org_id = ?').get(orgId) as { seq: number | null }).seq ?? 0;
    const cut = Math.min(last, queuedFrom - 1);
    const attempts = db
      .prepare('DELETE FROM delivery_attempts WHERE org_id = ? AND event_id IN (SELECT event_id FROM events WHERE org_id = ? AND seq <= ?)')
      .run(orgId, orgId, cut).changes;
    const events = db.prepare('DELETE FROM events WHERE org_id = ? AND seq <= ?').run(orgId, cut).changes;
    return { events, attempts, oldest: oldestOrgEvent(db, orgId) };
  })();
}
