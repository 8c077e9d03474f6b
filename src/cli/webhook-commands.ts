// `svc webhooks list|create|update|delete|ping` (CONTRACT 7): the org's webhook subscriptions,
// over HTTP. Their history commands (attempts, recover, resend) are in history-commands.ts.
import type { Command } from 'commander';
import type { DeliveryStatus } from '../../store/delivery-status.ts';
import { seg } from './api-client.ts';
import { group, handle, leaf, reportAttempt, str, type AttemptNow } from './command-kit.ts';
import { UsageError } from './exit-errors.ts';
import { formatLabels, formatLastDelivery, printFields, printJson, printTable, println } from './output.ts';
import { checkSecretOptions, parseSecretTtl, readSecret, readSubscriptionDocument } from './webhook-inputs.ts';

// ---------------------------------------------------------------- webhooks

interface Webhook {
  webhook_id: string;
  webhook_url: string;
  has_secret: boolean;
  interests: unknown;
  match: unknown;
  created_at?: string;
  updated_at?: string;
  previous_secret_expires_at?: string | null;
  delivery_status?: Partial<DeliveryStatus> | null;
}

const WEBHOOKS = '/v1/orgs/current/webhooks';

/** A one-line summary of an interests document. */
export function summarizeInterests(i: unknown): string {
  if (!i || typeof i !== 'object') return '-';
  const o = i as Record<string, unknown>;
  if (o.all_events === true) return 'all events';
  const r = o.resources;
  if (!r || typeof r !== 'object') return JSON.stringify(i);
  const parts = Object.entries(r as Record<string, unknown>).map(([name, cfg]) => {
    const c = (cfg ?? {}) as Record<string, unknown>;
    const bits: string[] = [];
    if (Array.isArray(c.ops) && c.ops.length) bits.push(c.ops.join('|'));
    if (typeof c.outcome === 'string' && c.outcome !== 'all') bits.push(c.outcome);
    for (const f of ['approval_requests', 'approval_responses', 'drift_detected', 'component_health', 'install_degraded']) {
      if (c[f] === true) bits.push(f);
    }
    return bits.length ? `${name}(${bits.join(',')})` : name;
  });
  return parts.join(' ') || '-';
}

/** A one-line summary of a match predicate; null is org-wide. */
export function summarizeMatch(m: unknown): string {
  if (m === null || m === undefined) return 'org-wide';
  if (typeof m !== 'object') return JSON.stringify(m);
  const parts = Object.entries(m as Record<string, unknown>).map(([kind, f]) => {
    const k = (f ?? {}) as { ids?: unknown; selector?: { match_labels?: unknown } };
    const bits: string[] = [];
    if (Array.isArray(k.ids)) bits.push(k.ids.join('|'));
    if (k.selector && typeof k.selector === 'object') bits.push(formatLabels(k.selector.match_labels));
    return `${kind}(${bits.length ? bits.join(' ') : 'any'})`;
  });
  return parts.join(' ');
}

/** The SECRET cell: yes, no, or rotating (a rotated-out secret still signs beside the new one). */
const secretCell = (w: Webhook) => (!w.has_secret ? 'no' : w.previous_secret_expires_at ? 'rotating' : 'yes');

function printWebhook(w: Webhook): void {
  const d = w.delivery_status ?? {};
  printFields([
    ['webhook_id', w.webhook_id],
    ['webhook_url', w.webhook_url],
    ['has_secret', w.has_secret],
    ...(w.previous_secret_expires_at ? [['previous_secret_expires_at', w.previous_secret_expires_at] as [string, unknown]] : []),
    ['interests', w.interests],
    ['match', w.match === null ? 'null (org-wide)' : w.match],
    ['created_at', w.created_at],
    ['updated_at', w.updated_at],
    ['last_delivery', formatLastDelivery(d)],
    ['consecutive_failures', d.consecutive_failures ?? 0],
    ['attempts_total', d.attempts_total ?? 0],
    ['failures_total', d.failures_total ?? 0],
  ]);
}

export function registerWebhooks(program: Command): Command {
  const webhooks = group(program, 'webhooks', 'manage the org\'s webhook subscriptions');

  handle(leaf(webhooks, 'list', 'list the org\'s webhooks'), async (run) => {
    const list = await run.api().get<Webhook[]>(WEBHOOKS);
    if (run.json) return printJson(list);
    // FAILS: consecutive failures now; ATTEMPTS and FAILURES: totals (CONTRACT 4.1 delivery_status)
    printTable(
      ['webhook_id', 'webhook_url', 'secret', 'interests', 'match', 'last', 'fails', 'attempts', 'failures', 'created_at'],
      (list ?? []).map((w) => {
        const d = w.delivery_status ?? {};
        return [
          w.webhook_id,
          w.webhook_url,
          secretCell(w),
          summarizeInterests(w.interests),
          summarizeMatch(w.match),
          formatLastDelivery(d),
          d.consecutive_failures ?? 0,
          d.attempts_total ?? 0,
          d.failures_total ?? 0,
          w.created_at,
        ];
      }),
      'no webhooks',
    );
  });

  handle(
    leaf(webhooks, 'create', 'register a webhook (default subscription: every event, org-wide)')
      .requiredOption('--url <url>', 'the receiver URL (absolute http or https)')
      .option('--secret <secret>', 'signing secret (X-Svc-Signature and webhook-signature; whsec_<base64> or any string); never printed')
      .option('--secret-file <path>', 'read the signing secret from a file (- = stdin; one trailing newline dropped), so it stays out of the process list')
      .option('--subscription <json>', 'subscription document {"interests"?, "match"?} as inline JSON')
      .option('--subscription-file <path>', 'subscription document {"interests"?, "match"?} from a JSON file'),
    async (run) => {
      checkSecretOptions(run.opts);
      const sub = readSubscriptionDocument(run.opts);
      const body: Record<string, unknown> = { webhook_url: str(run.opts.url) };
      const secret = await readSecret(run.opts);
      if (secret !== undefined) body.secret = secret;
      if (sub) Object.assign(body, sub);
      const w = await run.api().post<Webhook & { warnings?: string[] }>(WEBHOOKS, body);
      // a target the server would refuse: said on stderr either way (stdout stays the webhook)
      for (const warning of w.warnings ?? []) process.stderr.write(`warning: ${warning}\n`);
      if (run.json) return printJson(w);
      println(`created webhook ${w.webhook_id}`);
      printWebhook(w);
    },
  );

  handle(
    leaf(webhooks, 'update <webhook_id>', 'rotate or remove the secret, or replace the subscription wholesale')
      .option('--secret <secret>', 'a new signing secret (rotation); never printed')
      .option('--secret-file <path>', 'read the new signing secret from a file (- = stdin; one trailing newline dropped)')
      .option('--previous-secret-ttl <duration>', 'with a new secret: keep the old one signing beside it this long (e.g. 30m, 1h, 7d; at most 7d; default a hard cut)')
      .option('--remove-secret', 'remove the signing secret (deliveries are no longer signed)')
      .option('--subscription <json>', 'new subscription document {"interests"?, "match"?} (replaces both)')
      .option('--subscription-file <path>', 'new subscription document from a JSON file (replaces both)'),
    async (run) => {
      const [id] = run.args;
      const newSecret = checkSecretOptions(run.opts);
      const ttlText = str(run.opts.previousSecretTtl);
      const ttl = ttlText === undefined ? undefined : await parseSecretTtl(ttlText);
      const sub = readSubscriptionDocument(run.opts);
      if (!newSecret && run.opts.removeSecret !== true && !sub) {
        throw new UsageError('nothing to update: pass --secret, --secret-file, --remove-secret, --subscription or --subscription-file');
      }
      const body: Record<string, unknown> = {};
      const secret = await readSecret(run.opts);
      if (secret !== undefined) body.secret = secret;
      if (ttl !== undefined) body.previous_secret_ttl_s = ttl;
      if (run.opts.removeSecret === true) body.secret = null;
      if (sub) {
        Object.assign(body, sub);
        // An empty document still means "replace the subscription" (with the defaults: every event,
        // org-wide); naming match makes the body a subscription replacement (CONTRACT 4.1).
        if (!('interests' in sub) && !('match' in sub)) body.match = null;
      }
      const w = await run.api().patch<Webhook>(`${WEBHOOKS}/${seg(id)}`, body);
      if (run.json) return printJson(w);
      println(`updated webhook ${w.webhook_id}`);
      printWebhook(w);
    },
  );

  handle(leaf(webhooks, 'delete <webhook_id>', 'delete a webhook'), async (run) => {
    const [id] = run.args;
    await run.api().del(`${WEBHOOKS}/${seg(id)}`);
    if (run.json) return printJson({ webhook_id: id, deleted: true });
    println(`deleted webhook ${id}`);
  });

  handle(leaf(webhooks, 'ping <webhook_id>', 'send one signed com.svc.webhook.ping.v1 event to a webhook (exit 1 when it is not delivered)'), async (run) => {
    const [id] = run.args;
    reportAttempt(run, await run.api().post<AttemptNow>(`${WEBHOOKS}/${seg(id)}/ping`), 'the ping');
  });
  return webhooks;
}
