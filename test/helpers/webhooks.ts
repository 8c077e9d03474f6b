// Webhooks for whole-service tests: written to the store directly (before svc starts), or created
// through the API.
import { expect } from 'vitest';
import { openDb } from '../../store/db.ts';
import { insertWebhook } from '../../store/webhooks.ts';
import { newId } from '../../src/domain/ids.ts';
import type { WebhookEntry } from '../../src/domain/webhook-entry.ts';
import type { ApiClient } from './service.ts';

/** An org-wide all-events webhook as the registry holds it. */
export function allEventsEntry(orgId: string, webhookId: string, url: string, secret: string | null = null): WebhookEntry {
  return {
    webhook_id: webhookId,
    org_id: orgId,
    url,
    secret,
    previous_secret: null,
    previous_secret_expires_at: null,
    interests: { all_events: true },
    match: null,
  };
}

/** Org-wide all-events webhooks without a secret, written to the store in one transaction. */
export function insertWebhooks(db: string, orgId: string, urls: string[]): void {
  const h = openDb(db);
  try {
    h.transaction(() => {
      for (const url of urls) {
        insertWebhook(h, { ...allEventsEntry(orgId, newId('wh'), url), match_canonical: '' });
      }
    })();
  } finally {
    h.close();
  }
}

/** An org-wide webhook created through the API (201); its id. */
export async function createWebhook(api: ApiClient, target: string): Promise<string> {
  const r = await api.post('/v1/orgs/current/webhooks', { webhook_url: target });
  expect(r.status, r.text).toBe(201);
  return r.body.webhook_id;
}
