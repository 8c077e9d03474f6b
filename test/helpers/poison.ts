// Poison items planted straight into the store (data from before the limits of CONTRACT 8): an
// outbox row the bus cannot carry, a webhook whose registry entry is over NATS max_payload.
import Database from 'better-sqlite3';
import type { Db } from '../../store/db.ts';
import { insertOutbox } from '../../store/outbox.ts';
import { insertWebhook } from '../../store/webhooks.ts';
import { canonicalMatch } from '../../src/domain/subscription.ts';
import { encodeRoute, type Labels } from '../../src/domain/event-route.ts';
import { eventSubject } from '../../src/bus/subjects.ts';
import { newId } from '../../src/domain/ids.ts';

/**
 * An install.created-like event of `orgId` whose install carries `labels` labels of 200 characters
 * (each in the route header and in the body), with `padBytes` more in the body. 330 labels make a
 * route header over JetStream's 64k; 300 KiB of padding an event over 256 KiB.
 */
export function plantEvent(db: Db, orgId: string, opts: { labels?: number; padBytes?: number } = {}): string {
  const eventId = newId('evt');
  const installId = newId('inst');
  const labels: Labels = {};
  for (let i = 0; i < (opts.labels ?? 0); i++) labels[`k${i}`] = 'v'.repeat(200);
  const ceSubject = `${orgId}/install/${installId}/created`;
  const body = JSON.stringify({
    specversion: '1.0',
    id: eventId,
    type: 'svc.install.created',
    source: 'http://127.0.0.1/',
    subject: ceSubject,
    svcorgid: orgId,
    data: { install: { install_id: installId, labels }, pad: 'x'.repeat(opts.padBytes ?? 0) },
  });
  const route = encodeRoute({
    org: orgId,
    type: 'svc.install.created',
    resource: 'install',
    op: 'created',
    event: 'lifecycle.created',
    install: { id: installId, labels },
    component: null,
    action: null,
    rev: 0,
  });
  insertOutbox(db, { event_id: eventId, org_id: orgId, subject: eventSubject(ceSubject), type: 'svc.install.created', body, route });
  return eventId;
}

/** A webhook of `orgId` matching `ids` install ids (40,000 make an entry over NATS max_payload). */
export function plantWebhook(db: Db, orgId: string, url: string, ids: number, secret = 'whsec_poison_secret_do_not_log'): string {
  const webhookId = newId('wh');
  const match = { installs: { ids: Array.from({ length: ids }, (_, i) => `inst_${String(i).padStart(20, '0')}`) } };
  insertWebhook(db, {
    webhook_id: webhookId,
    org_id: orgId,
    url,
    secret,
    previous_secret: null,
    previous_secret_expires_at: null,
    interests: { all_events: true },
    match,
    match_canonical: canonicalMatch(match),
  });
  return webhookId;
}

/** Dead letters in a database file, read-only. */
export function deadLetters(
  file: string,
): Array<{ id: string; kind: string; org_id: string; item_id: string; reason: string; data: string }> {
  const h = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return h.prepare('SELECT id, kind, org_id, item_id, reason, data FROM dead_letters ORDER BY rowid').all() as never;
  } finally {
    h.close();
  }
}

/** The value of svc_events_dropped_total{reason="unpublishable"} on a server's /metrics. */
export async function unpublishableCount(baseUrl: string): Promise<number> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const m = /^svc_events_dropped_total\{reason="unpublishable"\} (\d+)/m.exec(text);
  return m ? Number(m[1]) : -1;
}
