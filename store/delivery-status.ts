// Delivery status per webhook (CONTRACT 4.1 `delivery_status`): written in batches from delivery
// outcomes, read by the API, the CLI and the dashboard.
import type { Db } from './db.ts';

export interface DeliveryStatus {
  last_attempt_at: string | null;
  last_outcome: 'success' | 'failure' | null;
  last_status_code: number | null;
  last_error: string | null;
  consecutive_failures: number;
  attempts_total: number;
  failures_total: number;
  /** the streak (CONTRACT 4.1 watchdog): its first failed attempt, the time of its earliest failed event */
  failing_since: string | null;
  recover_since: string | null;
  /** events (not pings) that failed in the streak */
  failed_events: number;
}

export const NO_DELIVERIES: Readonly<DeliveryStatus> = Object.freeze({
  last_attempt_at: null,
  last_outcome: null,
  last_status_code: null,
  last_error: null,
  consecutive_failures: 0,
  attempts_total: 0,
  failures_total: 0,
  failing_since: null,
  recover_since: null,
  failed_events: 0,
});

const COLS =
  'last_attempt_at, last_outcome, last_status_code, last_error, consecutive_failures, ' +
  'attempts_total, failures_total, failing_since, recover_since, failed_events';

export function getDeliveryStatus(db: Db, webhookId: string): DeliveryStatus {
  const r = db.prepare(`SELECT ${COLS} FROM webhook_delivery_status WHERE webhook_id = ?`).get(webhookId) as DeliveryStatus | undefined;
  return r ?? { ...NO_DELIVERIES };
}

/** Every webhook of an org that has a status row, by webhook id. */
export function listDeliveryStatus(db: Db, orgId: string): Map<string, DeliveryStatus> {
  const rows = db.prepare(`SELECT webhook_id, ${COLS} FROM webhook_delivery_status WHERE org_id = ?`).all(orgId) as Array<
    DeliveryStatus & { webhook_id: string }
  >;
  return new Map(rows.map(({ webhook_id, ...s }) => [webhook_id, s]));
}

/** Write the statuses of many webhooks in one transaction (rows of deleted webhooks are skipped). */
export function saveDeliveryStatuses(db: Db, rows: Array<{ webhook_id: string; org_id: string; status: DeliveryStatus }>): void {
  if (!rows.length) return;
  const stmt = db.prepare(
    `INSERT INTO webhook_delivery_status (webhook_id, org_id, ${COLS})
     SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM webhooks WHERE webhook_id = ?)
     ON CONFLICT (webhook_id) DO UPDATE SET
       last_attempt_at = excluded.last_attempt_at, last_outcome = excluded.last_outcome,
       last_status_code = excluded.last_status_code, last_error = excluded.last_error,
       consecutive_failures = excluded.consecutive_failures, attempts_total = excluded.attempts_total,
       failures_total = excluded.failures_total, failing_since = excluded.failing_since,
       recover_since = excluded.recover_since, failed_events = excluded.failed_events`,
  );
  db.transaction(() => {
    for (const { webhook_id, org_id, status: s } of rows) {
      stmt.run(
        webhook_id,
        org_id,
        s.last_attempt_at,
        s.last_outcome,
        s.last_status_code,
        s.last_error,
        s.consecutive_failures,
        s.attempts_total,
        s.failures_total,
        s.failing_since,
        s.recover_since,
        s.failed_events,
        webhook_id,
      );
    }
  })();
}
