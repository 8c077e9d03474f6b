// Poison items (CONTRACT 8): an event or a registry entry that the bus cannot carry whatever the
// limits (a bug, or data stored before them) is set aside — kept as a dead letter with its reason
// (store/dead-letters.ts), counted svc_events_dropped_total{reason="unpublishable"}, logged once
// with its id — and never blocks what is behind it. "Cannot be carried" is an event over 256 KiB
// (checked before publishing) or an error of NATS or JetStream that names a size; anything else
// (NATS away, no answer, a full stream) is waited out and retried as before.
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import { setAsideEvent, setAsideRegistryEntry } from '../../store/dead-letters.ts';
import type { OutboxRow } from '../../store/outbox.ts';
import type { WebhookEntry } from '../domain/webhook-entry.ts';
import type { Metrics } from '../metrics.ts';

/** One event at most (CONTRACT 8): its body and its route. */
export const MAX_EVENT_BYTES = 256 * 1024;

export const UNPUBLISHABLE = 'unpublishable';

/** What an event weighs on the bus: body and route (the route travels as a header). */
export function eventBytes(row: Pick<OutboxRow, 'body' | 'route'>): number {
  return Buffer.byteLength(row.body, 'utf8') + Buffer.byteLength(row.route, 'utf8');
}

/** Why an event cannot be carried before it is even tried, or null when it may be. */
export function oversized(row: Pick<OutboxRow, 'body' | 'route'>): string | null {
  if ((row.body.length + row.route.length) * 3 <= MAX_EVENT_BYTES) return null; // at most 3 bytes a UTF-16 unit: no need to count
  const n = eventBytes(row);
  return n > MAX_EVENT_BYTES ? `event of ${n} bytes is over the ${MAX_EVENT_BYTES}-byte limit` : null;
}

// The client's own check ("'payload' max_payload size exceeded"), JetStream's answers ("header size
// exceeds maximum allowed of 64k", "message size exceeds maximum allowed") and the server's
// ("Maximum Payload Violation"). Not "maximum messages/bytes exceeded": that is a full stream.
const SIZE_ERROR = /max_payload|maximum payload|header size exceeds|message size exceeds|payload too large/i;

/** Whether an error of a publish says the message cannot be carried (its size), not that NATS is away. */
export function isUnpublishable(err: unknown): boolean {
  const text = err instanceof Error ? `${err.message} ${String((err as { cause?: unknown }).cause ?? '')}` : String(err);
  return SIZE_ERROR.test(text);
}

/** A registry entry as kept in a dead letter: no secrets. */
export function entryWithoutSecrets(entry: WebhookEntry): Omit<WebhookEntry, 'secret' | 'previous_secret'> {
  const { secret: _s, previous_secret: _p, ...rest } = entry;
  return rest;
}

/** The dead letter id of a registry entry: the webhook and a digest of what was set aside. */
export function registryDeadLetterId(entry: WebhookEntry): string {
  const digest = createHash('sha256')
    .update(JSON.stringify(entryWithoutSecrets(entry)))
    .digest('hex')
    .slice(0, 16);
  return `${entry.webhook_id}@${digest}`;
}

/** Sets poison items aside: dead letter, counter, one log line. */
export class SetAside {
  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
    private readonly metrics: Metrics | null,
  ) {}

  /**
   * An outbox row: kept as a dead letter and taken out of the outbox (`inOutbox` false: a queued
   * history row, which stays). True when it is set aside now (false: it was before), for a caller
   * that counts it elsewhere (a delivery thread has no metrics).
   */
  event(row: OutboxRow, reason: string, inOutbox = true): boolean {
    if (!setAsideEvent(this.db, row, reason, inOutbox)) return false;
    this.metrics?.eventsDropped.inc({ reason: UNPUBLISHABLE });
    this.logger.error(
      { event_id: row.event_id, org_id: row.org_id, type: row.type, bytes: eventBytes(row), reason },
      'event set aside: the bus cannot carry it (kept in dead_letters)',
    );
    return true;
  }

  /** A registry entry (kept without its secrets). */
  registry(entry: WebhookEntry, reason: string): void {
    const data = JSON.stringify(entryWithoutSecrets(entry));
    if (!setAsideRegistryEntry(this.db, registryDeadLetterId(entry), entry.org_id, entry.webhook_id, reason, data)) return;
    this.metrics?.eventsDropped.inc({ reason: UNPUBLISHABLE });
    this.logger.error(
      { webhook_id: entry.webhook_id, org_id: entry.org_id, bytes: Buffer.byteLength(data), reason },
      'webhook registry entry set aside: the bus cannot carry it; the data plane holds no entry for this webhook until it changes ' +
        '(kept in dead_letters, without secrets)',
    );
  }
}
