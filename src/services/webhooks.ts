import type { AppContext } from '../context.ts';
import { ConflictError, NotFoundError } from '../errors.ts';
import { newId } from '../ids.ts';
import {
  canonicalMatch,
  effectiveInterests,
  normalizeMatch,
  type Interests,
  type Match,
} from '../webhooks/subscription.ts';
import {
  deleteWebhook as dbDelete,
  getWebhook as dbGet,
  insertWebhook,
  listWebhooks as dbList,
  updateWebhook as dbUpdate,
  UniqueViolation,
  type WebhookRow,
} from '../../store/webhooks.ts';
import { toCloudEvent } from '../events/cloudevent.ts';
import type { DeliveryResult } from '../delivery/client.ts';

/** The webhook as the API returns it (CONTRACT 4.1). The secret never leaves the store. */
export interface WebhookView {
  webhook_id: string;
  webhook_url: string;
  has_secret: boolean;
  interests: Interests;
  match: Match | null;
  created_at: string;
  updated_at: string;
}

export function view(w: WebhookRow): WebhookView {
  return {
    webhook_id: w.webhook_id,
    webhook_url: w.url,
    has_secret: w.secret !== null,
    interests: effectiveInterests(w.interests),
    match: (w.match as Match | null) ?? null,
    created_at: w.created_at,
    updated_at: w.updated_at,
  };
}

export interface CreateWebhookInput {
  webhook_url: string;
  secret?: string;
  interests?: Interests;
  match?: Match | null;
}

export interface PatchWebhookInput {
  secret?: string | null;
  interests?: Interests;
  match?: Match | null;
}

const CONFLICT = 'a webhook with this webhook_url and match already exists in this org';

export function listWebhooks(ctx: AppContext, orgId: string): WebhookView[] {
  return dbList(ctx.db, orgId).map(view);
}

export function getWebhook(ctx: AppContext, orgId: string, id: string): WebhookView {
  return view(mustGet(ctx, orgId, id));
}

function mustGet(ctx: AppContext, orgId: string, id: string): WebhookRow {
  const w = dbGet(ctx.db, orgId, id);
  if (!w) throw new NotFoundError('webhook', id);
  return w;
}

export function createWebhook(ctx: AppContext, orgId: string, input: CreateWebhookInput): WebhookView {
  const match = normalizeMatch(input.match ?? null);
  try {
    const row = insertWebhook(ctx.db, {
      webhook_id: newId('wh'),
      org_id: orgId,
      url: input.webhook_url,
      secret: input.secret ?? null,
      interests: input.interests ?? { all_events: true },
      match,
      match_canonical: canonicalMatch(match),
    });
    ctx.webhookChanged(orgId, row.webhook_id);
    return view(row);
  } catch (err) {
    if (err instanceof UniqueViolation) throw new ConflictError(CONFLICT);
    throw err;
  }
}

/** PATCH semantics of CONTRACT 4.1: naming interests or match replaces the whole subscription. */
export function patchWebhook(ctx: AppContext, orgId: string, id: string, input: PatchWebhookInput): WebhookView {
  const current = mustGet(ctx, orgId, id);
  const replacesSubscription = 'interests' in input || 'match' in input;
  const interests = replacesSubscription ? (input.interests ?? { all_events: true }) : current.interests;
  const match = replacesSubscription ? normalizeMatch(input.match ?? null) : (current.match as Match | null);
  const secret = 'secret' in input ? (input.secret ?? null) : current.secret;
  try {
    const row = dbUpdate(ctx.db, {
      org_id: orgId,
      webhook_id: id,
      secret,
      interests,
      match,
      match_canonical: canonicalMatch(match),
    });
    ctx.webhookChanged(orgId, id);
    return view(row!);
  } catch (err) {
    if (err instanceof UniqueViolation) throw new ConflictError(CONFLICT);
    throw err;
  }
}

export function deleteWebhook(ctx: AppContext, orgId: string, id: string): void {
  if (!dbDelete(ctx.db, orgId, id)) throw new NotFoundError('webhook', id);
  ctx.webhookChanged(orgId, id);
}

/** Send one ping event to this webhook alone, ignoring interests and match (CONTRACT 4.1, 6.4). */
export async function pingWebhook(ctx: AppContext, orgId: string, id: string): Promise<DeliveryResult> {
  const w = mustGet(ctx, orgId, id);
  const ev = toCloudEvent(
    { kind: 'webhook_ping', transition: 'ping', org_id: orgId, webhook_id: id, time: new Date().toISOString() },
    { source: ctx.urls.source, dashboardUrl: ctx.urls.dashboard },
  );
  return ctx.deliverer.deliver({ url: w.url, secret: w.secret }, JSON.stringify(ev));
}
