// Webhook subscription documents: validation of create/PATCH bodies (CONTRACT 4.1, spec 2.1-2.4),
// normalisation of match for responses, the canonical match used for uniqueness, and the
// effective interests of a stored webhook.
import { z } from 'zod';
import { largerPart, LIMITS, labelsSchema, subscriptionBytes } from './limits.ts';
import { durationMs } from './duration.ts';
import { checkFilter, FILTER_LIMITS, type EventFilter } from './event-filter.ts';

// ------------------------------------------------------------------ vocabulary

/** Resources of the interests filter and their subscription ops (spec 2.2, plus app_branches). */
export const RESOURCE_OPS = {
  installs: ['provision', 'deprovision', 'reprovision'],
  stacks: ['version_active'],
  components: ['deploy', 'teardown'],
  sandboxes: ['provision', 'reprovision', 'deprovision'],
  install_configurations: ['inputs', 'secrets'],
  runners: ['provision', 'reprovision', 'inactive', 'unhealthy'],
  actions: ['run'],
  app_branches: ['run'],
  // the delivery watchdog's events (CONTRACT 4.1, new in 0.2)
  webhooks: ['delivery'],
} as const satisfies Record<string, readonly [string, ...string[]]>;

export type ResourceName = keyof typeof RESOURCE_OPS;
export const RESOURCE_NAMES = Object.keys(RESOURCE_OPS) as ResourceName[];

/** Which run outcomes a subscription wants lifecycle events of (its `outcome` filter). */
export const INTEREST_OUTCOMES = ['all', 'completion', 'failures', 'none'] as const;
export type InterestOutcome = (typeof INTEREST_OUTCOMES)[number];

/** The boolean flags of a resource's config (spec 2.2). */
export const FLAGS = [
  'approval_requests',
  'approval_responses',
  'drift_detected',
  'component_health',
  'install_degraded',
  'delivery_failing',
  'delivery_recovered',
  'delivery_disabled',
] as const;
export type Flag = (typeof FLAGS)[number];

/** The resources whose events come of workflows (every one but `webhooks`): where approvals happen. */
export const WORKFLOW_RESOURCES = [
  'installs',
  'stacks',
  'components',
  'sandboxes',
  'install_configurations',
  'runners',
  'actions',
  'app_branches',
] as const;

/** Flags that may be `true` only on some resources (`false` is accepted anywhere). */
const FLAG_RESOURCES = {
  approval_requests: WORKFLOW_RESOURCES,
  approval_responses: WORKFLOW_RESOURCES,
  drift_detected: ['components', 'sandboxes'],
  component_health: ['components'],
  install_degraded: ['installs'],
  delivery_failing: ['webhooks'],
  delivery_recovered: ['webhooks'],
  delivery_disabled: ['webhooks'],
} as const satisfies Record<Flag, readonly ResourceName[]>;

/** Whether a flag means something on a resource. */
export function flagApplies(flag: Flag, resource: string): boolean {
  const only = (FLAG_RESOURCES as Partial<Record<Flag, readonly string[]>>)[flag];
  return only === undefined || only.includes(resource);
}

/** The flags a resource offers. */
export function flagsOf(resource: ResourceName): Flag[] {
  return FLAGS.filter((f) => flagApplies(f, resource));
}

export const MATCH_KINDS = ['installs', 'components', 'actions'] as const;
export type MatchKind = (typeof MATCH_KINDS)[number];

// ------------------------------------------------------------------ types

export interface ResourceConfig {
  ops?: string[];
  outcome?: InterestOutcome;
  approval_requests?: boolean;
  approval_responses?: boolean;
  drift_detected?: boolean;
  component_health?: boolean;
  install_degraded?: boolean;
  delivery_failing?: boolean;
  delivery_recovered?: boolean;
  /** `disabled` and `enabled` events */
  delivery_disabled?: boolean;
}

export interface Interests {
  all_events?: boolean;
  resources?: Partial<Record<ResourceName, ResourceConfig>>;
}

export interface MatchFilter {
  ids?: string[];
  selector?: { match_labels: Record<string, string> };
}

export type Match = Partial<Record<MatchKind, MatchFilter>>;

// ------------------------------------------------------------------ interests

/** Whole-document rules run only on an otherwise valid document (no redundant issues). */
const onlyIfValid = { when: (payload: { issues: readonly unknown[] }) => payload.issues.length === 0 };

function resourceConfigSchema(resource: ResourceName) {
  return z
    .strictObject({
      ops: z
        .array(z.enum(RESOURCE_OPS[resource], { error: `not an op of ${resource} (one of: ${RESOURCE_OPS[resource].join(', ')})` }))
        .optional(),
      outcome: z.enum(INTEREST_OUTCOMES, { error: `must be one of: ${INTEREST_OUTCOMES.join(', ')}` }).optional(),
      approval_requests: z.boolean().optional(),
      approval_responses: z.boolean().optional(),
      drift_detected: z.boolean().optional(),
      component_health: z.boolean().optional(),
      install_degraded: z.boolean().optional(),
      delivery_failing: z.boolean().optional(),
      delivery_recovered: z.boolean().optional(),
      delivery_disabled: z.boolean().optional(),
    })
    .superRefine((cfg, ctx) => {
      for (const [flag, allowed] of Object.entries(FLAG_RESOURCES) as [keyof typeof FLAG_RESOURCES, readonly ResourceName[]][]) {
        if (cfg[flag] === true && !allowed.includes(resource)) {
          ctx.addIssue({ code: 'custom', path: [flag], message: `${flag} does not apply to ${resource} (only to ${allowed.join(', ')})` });
        }
      }
    });
}

const resourcesSchema = z.strictObject(
  Object.fromEntries(RESOURCE_NAMES.map((r) => [r, resourceConfigSchema(r).optional()])) as {
    [R in ResourceName]: z.ZodOptional<ReturnType<typeof resourceConfigSchema>>;
  },
);

export const interestsSchema = z
  .strictObject({
    all_events: z.boolean().optional(),
    resources: resourcesSchema.optional(),
  })
  .superRefine((doc, ctx) => {
    if (doc.all_events === true) {
      if (doc.resources !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['resources'], message: 'all_events true cannot be combined with resources' });
      }
      return;
    }
    if (doc.resources === undefined) {
      const path = doc.all_events === false ? ['all_events'] : [];
      ctx.addIssue({ code: 'custom', path, message: 'interests select nothing: set all_events true or name resources' });
    } else if (Object.keys(doc.resources).length === 0) {
      ctx.addIssue({ code: 'custom', path: ['resources'], message: 'resources must name at least one resource' });
    }
  }, onlyIfValid);

// ------------------------------------------------------------------ match

/**
 * A kind's filter. `limits` (CONTRACT 8: ids per kind, the label rules) apply to what a request
 * sets; a stored match is read without them (data from before the limits still reads).
 */
function matchFilterSchema(limits: boolean) {
  const ids = z.array(z.string().min(1, { error: 'must be a non-empty string' })).min(1, { error: 'ids must not be empty' });
  const labels = limits ? labelsSchema : z.record(z.string().min(1, { error: 'label key must be non-empty' }), z.string());
  return z.strictObject({
    ids: (limits ? ids.max(LIMITS.matchIdsPerKind, { error: `at most ${LIMITS.matchIdsPerKind} ids in one kind` }) : ids).optional(),
    selector: z
      .strictObject({
        match_labels: labels.refine((l) => Object.keys(l).length > 0, { error: 'match_labels must name at least one label' }),
      })
      .optional(),
  });
}

function matchSchemaOf(limits: boolean) {
  const filter = matchFilterSchema(limits);
  return z
    .strictObject({
      installs: filter.optional(),
      components: filter.optional(),
      actions: filter.optional(),
    })
    .refine((m) => MATCH_KINDS.some((k) => m[k] !== undefined), {
      error: `match must name at least one of: ${MATCH_KINDS.join(', ')}`,
      ...onlyIfValid,
    });
}

/** A match as a request sets it (CONTRACT 4.1, within the limits of CONTRACT 8). */
export const matchSchema = matchSchemaOf(true);

/** A match as stored and returned: the same shape, without the limits of CONTRACT 8. */
export const storedMatchSchema = matchSchemaOf(false);

/** CONTRACT 8: a subscription (interests + match as JSON) of at most 16 KiB, named by its larger part. */
function checkSubscriptionSize(body: { interests?: unknown; match?: unknown }, ctx: z.core.$RefinementCtx): void {
  if (body.interests === undefined && body.match === undefined) return;
  const bytes = subscriptionBytes(body);
  if (bytes <= LIMITS.subscriptionBytes) return;
  ctx.addIssue({
    code: 'custom',
    path: [largerPart(body)],
    message: `the subscription (interests + match as JSON) is ${bytes} bytes; at most ${LIMITS.subscriptionBytes} (16 KiB)`,
  });
}

const SUBSCRIPTION_SIZE = `interests + match as JSON: at most ${LIMITS.subscriptionBytes} bytes (16 KiB)`;

// ------------------------------------------------------------------ bodies

const MAX_URL = 2048;

/** Absolute http(s) URL with a non-empty host: the raw text must read `http(s)://<host>...`. */
function isWebhookUrl(s: string): boolean {
  if (!/^https?:\/\/[^/\\?#]/i.test(s) || /[\s\u0000-\u001f\u007f]/.test(s)) return false;
  try {
    const u = new URL(s);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
  } catch {
    return false;
  }
}

const webhookUrlSchema = z
  .string({ error: (iss) => (iss.input === undefined ? 'webhook_url is required' : 'webhook_url must be a string') })
  .max(MAX_URL, { error: `webhook_url must be at most ${MAX_URL} characters` })
  .refine(isWebhookUrl, { error: 'webhook_url must be an absolute http or https URL with a host' });

/** How long a rotated-out secret may keep signing beside the new one (CONTRACT 4.1): 7 days. */
export const MAX_PREVIOUS_SECRET_TTL_S = 7 * 24 * 3600;

const secretSchema = z.string({ error: 'secret must be a string' }).min(1, { error: 'secret must not be empty' }).max(512, {
  error: 'secret must be at most 512 characters',
});

/** The bounds of `disable_after` (CONTRACT 4.1). */
export const DISABLE_AFTER = { minFailures: 10, maxFailures: 100_000, maxDurationMs: 30 * 86_400_000 } as const;

/** Opt-in auto-disable (CONTRACT 4.1): both required; null (the default) never disables. */
export const disableAfterSchema = z
  .strictObject({
    failures: z
      .number({ error: 'failures must be an integer' })
      .int({ error: 'failures must be an integer' })
      .min(DISABLE_AFTER.minFailures, { error: `failures must be at least ${DISABLE_AFTER.minFailures}` })
      .max(DISABLE_AFTER.maxFailures, { error: `failures must be at most ${DISABLE_AFTER.maxFailures}` }),
    duration: z.string({ error: 'duration must be a duration such as "0s", "30m", "5d"' }).refine(
      (d) => {
        const ms = durationMs(d);
        return ms !== null && ms <= DISABLE_AFTER.maxDurationMs;
      },
      { error: 'duration must be a duration from 0s to 30d (such as "0s", "30m", "5d")' },
    ),
  })
  .describe('disable the webhook once its consecutive failures reach `failures` and the first of them is at least `duration` old');

export type DisableAfter = z.infer<typeof disableAfterSchema>;

/**
 * A payload filter (CONTRACT 10.2) as a request sets it: its shape and bounds (src/domain/event-filter.ts),
 * each problem at `filter.<its path>`. The catalog's path check needs the interests: the service's.
 */
export const filterSchema = z
  .record(z.string(), z.unknown(), { error: 'filter must be a JSON object (or null for none)' })
  .superRefine((doc, ctx) => {
    for (const i of checkFilter(doc)) ctx.addIssue({ code: 'custom', path: i.path === '' ? [] : [i.path], message: i.message });
  })
  .transform((doc) => doc as EventFilter)
  .meta({
    description:
      'a JSON document over the CloudEvent as delivered (CONTRACT 10.2): plain values by equality, objects by keys, operators ' +
      `$eq $neq $gt $gte $lt $lte $in $nin $startsWith $endsWith $exist $contains $and $or $not; at most ${FILTER_LIMITS.depth} ` +
      `nested objects, ${FILTER_LIMITS.operators} operators, ${FILTER_LIMITS.bytes} bytes; null: none`,
  });

/**
 * How a webhook's attempts are made (CONTRACT 10.1): `{ordering: "per_key"}` serialises them per
 * ordering key; `{}` or null: no order (read as null: deliveryOf).
 */
export const deliverySchema = z
  .strictObject({
    ordering: z
      .enum(['per_key'], { error: 'ordering must be "per_key"' })
      .describe('per_key: the next event of an ordering key is attempted only after the previous one has an outcome')
      .optional(),
  })
  .describe('how its attempts are made; null or {}: no order');

/** The stored form of `delivery`: null unless it asks for something. */
export function deliveryOf(d: z.infer<typeof deliverySchema> | null | undefined): { ordering: 'per_key' } | null {
  return d?.ordering === 'per_key' ? { ordering: 'per_key' } : null;
}

export const createWebhookBodySchema = z
  .strictObject({
    webhook_url: webhookUrlSchema,
    secret: secretSchema.optional(),
    interests: interestsSchema.optional(),
    match: matchSchema.nullable().optional(),
    disable_after: disableAfterSchema.nullable().optional(),
    filter: filterSchema.nullable().optional(),
    delivery: deliverySchema.nullable().optional(),
  })
  .superRefine(checkSubscriptionSize, onlyIfValid)
  .describe(SUBSCRIPTION_SIZE);

export const patchWebhookBodySchema = z
  .strictObject({
    webhook_url: z.never({ error: 'webhook_url is immutable after create' }).optional(),
    interests: interestsSchema.optional(),
    match: matchSchema.nullable().optional(),
    secret: secretSchema.nullable().optional(),
    previous_secret_ttl_s: z
      .number({ error: 'previous_secret_ttl_s must be an integer' })
      .int({ error: 'previous_secret_ttl_s must be an integer' })
      .min(0, { error: 'previous_secret_ttl_s must be at least 0' })
      .max(MAX_PREVIOUS_SECRET_TTL_S, { error: `previous_secret_ttl_s must be at most ${MAX_PREVIOUS_SECRET_TTL_S} (7 days)` })
      .optional(),
    disable_after: disableAfterSchema.nullable().optional(),
    filter: filterSchema.nullable().optional(),
    delivery: deliverySchema.nullable().optional(),
  })
  .refine(
    (b) =>
      b.interests !== undefined ||
      b.match !== undefined ||
      b.secret !== undefined ||
      b.disable_after !== undefined ||
      b.filter !== undefined ||
      b.delivery !== undefined,
    { error: 'body must name at least one of: interests, match, secret, disable_after, filter, delivery' },
  )
  .refine((b) => b.previous_secret_ttl_s === undefined || typeof b.secret === 'string', {
    error: 'previous_secret_ttl_s needs a new secret in the same request',
    path: ['previous_secret_ttl_s'],
  })
  .superRefine(checkSubscriptionSize, onlyIfValid)
  .describe(SUBSCRIPTION_SIZE);

export type CreateWebhookBody = z.infer<typeof createWebhookBodySchema>;
export type PatchWebhookBody = z.infer<typeof patchWebhookBodySchema>;

// Compile-time checks that the schemas produce the declared types.
const _interestsFits = (i: z.infer<typeof interestsSchema>): Interests => i;
const _matchFits = (m: z.infer<typeof matchSchema>): Match => m;
const _storedMatchFits = (m: z.infer<typeof storedMatchSchema>): Match => m;
void _interestsFits;
void _matchFits;
void _storedMatchFits;

// ------------------------------------------------------------------ helpers

const sortedSet = (xs: readonly string[]): string[] => [...new Set(xs)].sort();

/** Match as returned by the API: ids deduplicated and sorted, everything else as given. */
export function normalizeMatch(m: Match | null): Match | null {
  if (m === null || m === undefined) return null;
  const out: Match = {};
  for (const [kind, filter] of Object.entries(m) as [MatchKind, MatchFilter | undefined][]) {
    if (filter === undefined) continue;
    const copy: MatchFilter = { ...filter };
    if (filter.ids) copy.ids = sortedSet(filter.ids);
    if (filter.selector) copy.selector = { match_labels: { ...filter.selector.match_labels } };
    out[kind] = copy;
  }
  return out;
}

/**
 * Deterministic text of a match for the (org, webhook_url, match) unique index: '' for org-wide;
 * otherwise kinds in fixed order, ids as a sorted set, labels sorted by key.
 */
export function canonicalMatch(m: Match | null): string {
  if (m === null || m === undefined) return '';
  const parts: unknown[] = [];
  for (const kind of MATCH_KINDS) {
    const f = m[kind];
    if (f === undefined) continue;
    const ids = f.ids ? sortedSet(f.ids) : null;
    const labels = f.selector ? Object.entries(f.selector.match_labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)) : null;
    parts.push([kind, ids, labels]);
  }
  return JSON.stringify(parts);
}

/**
 * A stored webhook's interests as chosen: a valid stored document (a JSON string is parsed); null
 * when none was given (null, undefined, empty, legacy or otherwise unreadable).
 */
function chosenInterests(stored: unknown): Interests | null {
  let doc = stored;
  if (typeof doc === 'string') {
    try {
      doc = JSON.parse(doc);
    } catch {
      return null;
    }
  }
  if (doc === null || doc === undefined) return null;
  const r = interestsSchema.safeParse(doc);
  return r.success ? r.data : null;
}

/**
 * Interests of a stored webhook: a valid stored document as is; null, undefined, empty, legacy or
 * otherwise unreadable documents mean `{all_events: true}` (spec 2.1, 9.3); `chosen` says which.
 */
export function storedInterests(stored: unknown): { interests: Interests; chosen: boolean } {
  const c = chosenInterests(stored);
  return c ? { interests: c, chosen: true } : { interests: { all_events: true }, chosen: false };
}

/** Interests of a stored webhook as they read (storedInterests without `chosen`). */
export const effectiveInterests = (stored: unknown): Interests => storedInterests(stored).interests;
