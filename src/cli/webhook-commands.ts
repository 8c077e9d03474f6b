// `svc webhooks list|create|update|delete|ping|disable|enable` (CONTRACT 7): the org's webhook
// subscriptions and their delivery watchdog, over HTTP. Their history commands (attempts, recover,
// resend) are in history-commands.ts.
import type { Command } from 'commander';
import { durationMs } from '../domain/duration.ts';
import { DISABLE_AFTER, FLAGS } from '../domain/subscription.ts';
import type { DeliveryStatusView } from '../services/webhooks.ts';
import { seg } from './api-client.ts';
import { group, handle, leaf, reportAttempt, str, type AttemptNow, type Run } from './command-kit.ts';
import { UsageError } from './exit-errors.ts';
import { formatLabels, formatLastDelivery, printFields, printJson, printTable, println } from './output.ts';
import { checkSecretOptions, parseSecretTtl, readFilterDocument, readSecret, readSubscriptionDocument } from './webhook-inputs.ts';

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
  disable_after?: { failures: number; duration: string } | null;
  delivery?: { ordering?: string } | null;
  filter?: Record<string, unknown> | null;
  delivery_status?: Partial<DeliveryStatusView> | null;
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
    for (const f of FLAGS) {
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
    ['filter', w.filter ? JSON.stringify(w.filter) : 'none'],
    ['created_at', w.created_at],
    ['updated_at', w.updated_at],
    ['last_delivery', formatLastDelivery(d)],
    ['consecutive_failures', d.consecutive_failures ?? 0],
    ['attempts_total', d.attempts_total ?? 0],
    ['failures_total', d.failures_total ?? 0],
    ['state', d.state ?? 'active'],
    ...(d.failing_since ? [['failing_since', d.failing_since] as [string, unknown]] : []),
    ...(d.recover_since ? [['recover_since', d.recover_since] as [string, unknown]] : []),
    ...(d.disabled_at
      ? [['disabled_at', d.disabled_at] as [string, unknown], ['disabled_reason', d.disabled_reason] as [string, unknown]]
      : []),
    ['disable_after', w.disable_after ? `${w.disable_after.failures} failures over ${w.disable_after.duration}` : 'never'],
    ['ordering', w.delivery?.ordering ?? 'none'],
  ]);
}

/**
 * `--disable-after N:DURATION` (e.g. 50:1h; CONTRACT 4.1 disable_after) or `off` (null): checked
 * before any request (exit 2).
 */
export function parseDisableAfter(text: string): { failures: number; duration: string } | null {
  const t = text.trim();
  if (t === 'off' || t === 'never') return null;
  const m = /^(\d+):(\S+)$/.exec(t);
  const failures = m ? Number(m[1]) : Number.NaN;
  const ms = m ? durationMs(m[2]) : null;
  if (
    !m ||
    failures < DISABLE_AFTER.minFailures ||
    failures > DISABLE_AFTER.maxFailures ||
    ms === null ||
    ms > DISABLE_AFTER.maxDurationMs
  ) {
    throw new UsageError(
      `--disable-after ${JSON.stringify(text)}: FAILURES:DURATION with ${DISABLE_AFTER.minFailures} to ${DISABLE_AFTER.maxFailures} ` +
        'failures and a duration from 0s to 30d (e.g. 50:1h), or off',
    );
  }
  return { failures, duration: m[2] };
}

const DISABLE_AFTER_HELP =
  'disable the webhook once this many consecutive failures span at least this long: FAILURES:DURATION (e.g. 50:1h, 10:0s)';

export function registerWebhookCommands(program: Command): Command {
  const webhooks = group(program, 'webhooks', "manage the org's webhook subscriptions");
  handle(leaf(webhooks, 'list', "list the org's webhooks"), listWebhooks);
  registerCreate(webhooks);
  registerUpdate(webhooks);
  handle(leaf(webhooks, 'delete <webhook_id>', 'delete a webhook'), async (run) => {
    const [id] = run.args;
    await run.api().del(`${WEBHOOKS}/${seg(id)}`);
    if (run.json) return printJson({ webhook_id: id, deleted: true });
    println(`deleted webhook ${id}`);
  });
  registerDeliverySwitches(webhooks);
  registerTestFilter(webhooks);
  return webhooks;
}

interface DryRun {
  examined: number;
  matched: number;
  results: Array<{ event_id: string; type: string; subject: string; matched: boolean; decided_by: string }>;
}

/** `svc webhooks test-filter [webhook_id]` (CONTRACT 10.2): what a subscription would have received, nothing sent. */
function registerTestFilter(webhooks: Command): void {
  handle(
    leaf(
      webhooks,
      'test-filter [webhook_id]',
      "dry run: which kept events a filter (with a webhook's subscription, or --subscription) admits, and what decided each",
    )
      .option('--filter <json>', 'the filter as inline JSON (with a webhook: tried in place of its own; null: none)')
      .option('--filter-file <path>', 'the filter from a JSON file')
      .option('--subscription <json>', 'without a webhook: {"interests"?, "match"?} (default: every event, org-wide)')
      .option('--subscription-file <path>', 'without a webhook: the subscription document from a JSON file')
      .option('--event-id <id>', 'one kept event')
      .option('--since <time>', 'kept events emitted at or after (ISO 8601, or 24h back from now; at most 10,000)')
      .option('--until <time>', 'with --since: events emitted before')
      .option('--all', 'list every event examined, not only those admitted'),
    async (run) => {
      const [id] = run.args;
      const filter = readFilterDocument(run.opts);
      const sub = readSubscriptionDocument(run.opts);
      if (id !== undefined && sub) throw new UsageError('--subscription is for a dry run without a webhook (a webhook has its own)');
      const eventId = str(run.opts.eventId);
      const since = str(run.opts.since);
      if ((eventId === undefined) === (since === undefined)) throw new UsageError('give one source: --event-id ID or --since TIME');
      const body: Record<string, unknown> = { ...(sub ?? {}) };
      if (id === undefined) body.filter = filter ?? null;
      else if (filter !== undefined) body.filter = filter;
      if (eventId !== undefined) body.event_id = eventId;
      if (since !== undefined) body.since = since;
      const until = str(run.opts.until);
      if (until !== undefined) body.until = until;
      const path = id === undefined ? `${WEBHOOKS}/test-filter` : `${WEBHOOKS}/${seg(id)}/test-filter`;
      const r = await run.api().post<DryRun>(path, body);
      if (run.json) return printJson(r);
      println(`would have received ${r.matched} of ${r.examined} events`);
      const rows = r.results.filter((x) => run.opts.all === true || x.matched);
      printTable(
        ['matched', 'decided_by', 'type', 'subject', 'event_id'],
        rows.map((x) => [x.matched ? 'yes' : 'no', x.decided_by, x.type, x.subject, x.event_id]),
        'no events',
      );
    },
  );
}

/** `svc webhooks list`: a table of the org's webhooks with their delivery status. */
async function listWebhooks(run: Run): Promise<void> {
  const list = await run.api().get<Webhook[]>(WEBHOOKS);
  if (run.json) return printJson(list);
  // FAILS: consecutive failures now; ATTEMPTS and FAILURES: totals (CONTRACT 4.1 delivery_status)
  printTable(
    ['webhook_id', 'webhook_url', 'secret', 'interests', 'match', 'state', 'last', 'fails', 'attempts', 'failures', 'created_at'],
    (list ?? []).map((w) => {
      const d = w.delivery_status ?? {};
      return [
        w.webhook_id,
        w.webhook_url,
        secretCell(w),
        summarizeInterests(w.interests),
        summarizeMatch(w.match),
        d.state ?? 'active',
        formatLastDelivery(d),
        d.consecutive_failures ?? 0,
        d.attempts_total ?? 0,
        d.failures_total ?? 0,
        w.created_at,
      ];
    }),
    'no webhooks',
  );
}

const ORDERING_HELP = "per_key: each ordering key's events (an install's) one at a time, in sequence order (CONTRACT 10.1); none: no order";

/** `--ordering per_key|none` as the `delivery` field (checked before any request: exit 2). */
function parseOrdering(text: string): { ordering: 'per_key' } | null {
  if (text === 'per_key') return { ordering: 'per_key' };
  if (text === 'none') return null;
  throw new UsageError(`--ordering ${JSON.stringify(text)}: per_key or none`);
}

/** --disable-after, --ordering and the secret (--secret or --secret-file) of a create or an update, as fields of its body. */
async function addDisableAfterAndSecret(opts: Record<string, unknown>, body: Record<string, unknown>): Promise<void> {
  const disableAfter = str(opts.disableAfter);
  if (disableAfter !== undefined) body.disable_after = parseDisableAfter(disableAfter);
  const ordering = str(opts.ordering);
  if (ordering !== undefined) body.delivery = parseOrdering(ordering);
  const secret = await readSecret(opts);
  if (secret !== undefined) body.secret = secret;
}

/** `svc webhooks create`. */
function registerCreate(webhooks: Command): void {
  handle(
    leaf(webhooks, 'create', 'register a webhook (default subscription: every event, org-wide)')
      .requiredOption('--url <url>', 'the receiver URL (absolute http or https)')
      .option('--secret <secret>', 'signing secret (X-Svc-Signature and webhook-signature; whsec_<base64> or any string); never printed')
      .option(
        '--secret-file <path>',
        'read the signing secret from a file (- = stdin; one trailing newline dropped), so it stays out of the process list',
      )
      .option('--subscription <json>', 'subscription document {"interests"?, "match"?} as inline JSON')
      .option('--subscription-file <path>', 'subscription document {"interests"?, "match"?} from a JSON file')
      .option('--filter <json>', 'payload filter over the CloudEvent as inline JSON (CONTRACT 10.2; null: none)')
      .option('--filter-file <path>', 'payload filter from a JSON file')
      .option('--disable-after <failures:duration>', DISABLE_AFTER_HELP)
      .option('--ordering <per_key|none>', ORDERING_HELP),
    async (run) => {
      checkSecretOptions(run.opts);
      const sub = readSubscriptionDocument(run.opts);
      const body: Record<string, unknown> = { webhook_url: str(run.opts.url) };
      await addDisableAfterAndSecret(run.opts, body);
      if (sub) Object.assign(body, sub);
      const filter = readFilterDocument(run.opts);
      if (filter !== undefined) body.filter = filter;
      const w = await run.api().post<Webhook & { warnings?: string[] }>(WEBHOOKS, body);
      // a target the server would refuse: said on stderr either way (stdout stays the webhook)
      for (const warning of w.warnings ?? []) process.stderr.write(`warning: ${warning}\n`);
      if (run.json) return printJson(w);
      println(`created webhook ${w.webhook_id}`);
      printWebhook(w);
    },
  );
}

/** `svc webhooks update`: the secret (rotated or removed), the subscription, disable_after. */
function registerUpdate(webhooks: Command): void {
  handle(
    leaf(webhooks, 'update <webhook_id>', 'rotate or remove the secret, or replace the subscription wholesale')
      .option('--secret <secret>', 'a new signing secret (rotation); never printed')
      .option('--secret-file <path>', 'read the new signing secret from a file (- = stdin; one trailing newline dropped)')
      .option(
        '--previous-secret-ttl <duration>',
        'with a new secret: keep the old one signing beside it this long (e.g. 30m, 1h, 7d; at most 7d; default a hard cut)',
      )
      .option('--remove-secret', 'remove the signing secret (deliveries are no longer signed)')
      .option('--subscription <json>', 'new subscription document {"interests"?, "match"?} (replaces both)')
      .option('--subscription-file <path>', 'new subscription document from a JSON file (replaces both)')
      .option('--filter <json>', 'new payload filter as inline JSON (null: remove it); the subscription stays as it is')
      .option('--filter-file <path>', 'new payload filter from a JSON file')
      .option('--disable-after <failures:duration>', `${DISABLE_AFTER_HELP}; off: never`)
      .option('--ordering <per_key|none>', ORDERING_HELP),
    async (run) => {
      const [id] = run.args;
      const newSecret = checkSecretOptions(run.opts);
      const ttlText = str(run.opts.previousSecretTtl);
      const ttl = ttlText === undefined ? undefined : await parseSecretTtl(ttlText);
      const sub = readSubscriptionDocument(run.opts);
      const disableAfter = str(run.opts.disableAfter);
      const filter = readFilterDocument(run.opts);
      if (
        !newSecret &&
        run.opts.removeSecret !== true &&
        !sub &&
        disableAfter === undefined &&
        filter === undefined &&
        str(run.opts.ordering) === undefined
      ) {
        throw new UsageError(
          'nothing to update: pass --secret, --secret-file, --remove-secret, --subscription, --subscription-file, --filter, ' +
            '--filter-file, --disable-after or --ordering',
        );
      }
      const body: Record<string, unknown> = {};
      await addDisableAfterAndSecret(run.opts, body);
      if (ttl !== undefined) body.previous_secret_ttl_s = ttl;
      if (run.opts.removeSecret === true) body.secret = null;
      if (sub) {
        Object.assign(body, sub);
        // An empty document still means "replace the subscription" (with the defaults: every event,
        // org-wide); naming match makes the body a subscription replacement (CONTRACT 4.1).
        if (!('interests' in sub) && !('match' in sub)) body.match = null;
      }
      if (filter !== undefined) body.filter = filter;
      const w = await run.api().patch<Webhook>(`${WEBHOOKS}/${seg(id)}`, body);
      if (run.json) return printJson(w);
      println(`updated webhook ${w.webhook_id}`);
      printWebhook(w);
    },
  );
}

/**
 * `svc trigger TYPE --webhook ID` (CONTRACT 10.3): one signed example of an event type to that
 * webhook alone, marked `svcexample`, never kept; answered like a ping (exit 1 when not delivered).
 * Without TYPE it lists the types (GET /v1/event-types).
 */
export function registerTrigger(program: Command): void {
  handle(
    leaf(program, 'trigger [type]', 'send one signed example event of TYPE to a webhook alone (exit 1 when it is not delivered)')
      .option('--webhook <webhook_id>', 'the webhook it is sent to')
      .option('--list', 'list the event types (the default without TYPE; --json adds descriptions, schema URLs and examples)'),
    async (run) => {
      const [type] = run.args;
      if (type === undefined || run.opts.list === true) {
        const types = await run.api().get<Array<{ type: string; description: string; subject_pattern: string }>>('/v1/event-types');
        if (run.json) return printJson(types);
        return printTable(
          ['TYPE', 'SUBJECT'],
          types.map((t) => [t.type, t.subject_pattern]),
        );
      }
      const id = str(run.opts.webhook);
      if (!id) throw new UsageError('svc trigger TYPE needs --webhook <webhook_id> (svc webhooks list names them)');
      reportAttempt(run, await run.api().post<AttemptNow>(`${WEBHOOKS}/${seg(id)}/examples`, { type }), `the example of ${type}`);
    },
  );
}

/** `svc webhooks ping|disable|enable`: whether and when svc sends to a webhook. */
function registerDeliverySwitches(webhooks: Command): void {
  handle(
    leaf(webhooks, 'ping <webhook_id>', 'send one signed com.svc.webhook.ping.v1 event to a webhook (exit 1 when it is not delivered)'),
    async (run) => {
      const [id] = run.args;
      reportAttempt(run, await run.api().post<AttemptNow>(`${WEBHOOKS}/${seg(id)}/ping`), 'the ping');
    },
  );

  handle(
    leaf(webhooks, 'disable <webhook_id>', 'stop sending to a webhook: no attempts until it is enabled; its events are still kept').option(
      '--note <text>',
      'why (shown as its disabled_reason)',
    ),
    async (run) => {
      const [id] = run.args;
      const note = str(run.opts.note);
      const w = await run.api().post<Webhook>(`${WEBHOOKS}/${seg(id)}/disable`, note !== undefined ? { note } : {});
      if (run.json) return printJson(w);
      println(`disabled webhook ${w.webhook_id}`);
      printWebhook(w);
    },
  );

  handle(
    leaf(
      webhooks,
      'enable <webhook_id>',
      'send to a webhook again, once a ping to it is delivered (exit 1 when it is not: still disabled)',
    ).option(
      '--recover',
      'then attempt again every event it failed or missed since its streak began ' +
        '(prints the recovery; follow it with `svc webhooks recover` or GET …/recoveries/ID)',
    ),
    async (run) => {
      const [id] = run.args;
      const r = await run
        .api()
        .post<{ webhook: Webhook; recovery_id?: string }>(
          `${WEBHOOKS}/${seg(id)}/enable`,
          run.opts.recover === true ? { recover: true } : {},
        );
      if (run.json) return printJson(r);
      println(`enabled webhook ${r.webhook.webhook_id}${r.recovery_id ? `; recovery ${r.recovery_id} started` : ''}`);
      printWebhook(r.webhook);
    },
  );
}
