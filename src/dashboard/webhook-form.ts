// The webhook form of the dashboard: form fields <-> subscription documents (pure functions).
// Field names: all_events, res_<resource>_enabled, res_<resource>_ops (repeated),
// res_<resource>_outcome, res_<resource>_<flag>, match (JSON text), secret / secret_action / new_secret /
// previous_secret_ttl (seconds the rotated-out secret keeps signing), ordering (none | per_key:
// CONTRACT 10.1 delivery).
import type { z } from 'zod';
import { issuesToDetails } from '../http/validation.ts';
import { jsonEqual } from '../../machines/advance.ts';
import type { ErrorDetail } from '../domain/errors.ts';
import {
  canonicalMatch,
  createWebhookBodySchema,
  FLAGS,
  flagsOf,
  INTEREST_OUTCOMES,
  patchWebhookBodySchema,
  RESOURCE_NAMES,
  RESOURCE_OPS,
  storedMatchSchema,
  type CreateWebhookBody,
  type Flag,
  type Interests,
  type Match,
  type InterestOutcome,
  type PatchWebhookBody,
  type ResourceConfig,
  type ResourceName,
} from '../domain/subscription.ts';

export type FormData = Record<string, string | string[]>;

export { FLAGS, flagsOf, type Flag };

const approvals = { outcome: 'completion', approval_requests: true, approval_responses: true } as const;

/** Spec 4 behaviour 5: where the form starts when "Send all events" is switched off. */
export const BASELINE: Required<Pick<Interests, 'resources'>> = {
  resources: {
    installs: { ...approvals },
    stacks: { outcome: 'completion' },
    components: { ...approvals, drift_detected: true },
    sandboxes: { ...approvals, drift_detected: true },
    install_configurations: { ...approvals },
  },
};

/** What the form shows for one resource. */
export interface ResourceState {
  enabled: boolean;
  ops: string[];
  outcome: InterestOutcome;
  flags: Partial<Record<Flag, boolean>>;
}

export interface WebhookFormState {
  webhook_url: string;
  all_events: boolean;
  resources: Record<ResourceName, ResourceState>;
  match_text: string;
  /** the payload filter (CONTRACT 10.2) as JSON text; empty: none */
  filter_text: string;
  secret_action: 'keep' | 'rotate' | 'remove';
  /** with a rotation: seconds the old secret keeps signing beside the new one, as a form value */
  previous_secret_ttl: string;
  /** CONTRACT 10.1 delivery: per_key serialises attempts per ordering key; none: no order */
  ordering: 'none' | 'per_key';
}

/** How long a rotated-out secret may keep signing (CONTRACT 4.1 previous_secret_ttl_s): the form's choices. */
export const OVERLAP_CHOICES: ReadonlyArray<{ seconds: number; label: string }> = [
  { seconds: 0, label: 'No overlap (hard cut)' },
  { seconds: 3600, label: '1 hour' },
  { seconds: 86_400, label: '1 day' },
  { seconds: 604_800, label: '7 days' },
];

function stateOf(cfg: ResourceConfig | undefined): ResourceState {
  const flags: Partial<Record<Flag, boolean>> = {};
  for (const f of FLAGS) if (cfg?.[f]) flags[f] = true;
  return { enabled: cfg !== undefined, ops: cfg?.ops ? [...cfg.ops] : [], outcome: cfg?.outcome ?? 'all', flags };
}

/** The form state of a subscription; all_events shows the baseline underneath the toggle. */
export function formStateOf(sub: {
  webhook_url?: string;
  interests?: Interests;
  match?: Match | null;
  delivery?: { ordering?: string } | null;
  filter?: Record<string, unknown> | null;
}): WebhookFormState {
  const interests = sub.interests ?? { all_events: true };
  const all = interests.all_events === true || !interests.resources;
  const source = all ? BASELINE.resources : interests.resources!;
  const resources = Object.fromEntries(RESOURCE_NAMES.map((r) => [r, stateOf(source[r])])) as Record<ResourceName, ResourceState>;
  return {
    webhook_url: sub.webhook_url ?? '',
    all_events: all,
    resources,
    match_text: sub.match ? JSON.stringify(sub.match, null, 2) : '',
    filter_text: sub.filter ? JSON.stringify(sub.filter, null, 2) : '',
    secret_action: 'keep',
    previous_secret_ttl: '0',
    ordering: sub.delivery?.ordering === 'per_key' ? 'per_key' : 'none',
  };
}

const one = (v: string | string[] | undefined): string => (Array.isArray(v) ? (v[v.length - 1] ?? '') : (v ?? ''));
const many = (v: string | string[] | undefined): string[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
const checked = (v: string | string[] | undefined) => v !== undefined && one(v) !== '';

/** The form state of a submitted form (to show it again with its errors). */
export function formStateFromForm(form: FormData): WebhookFormState {
  const resources = {} as Record<ResourceName, ResourceState>;
  for (const r of RESOURCE_NAMES) {
    const outcome = one(form[`res_${r}_outcome`]);
    const flags: Partial<Record<Flag, boolean>> = {};
    for (const f of flagsOf(r)) if (checked(form[`res_${r}_${f}`])) flags[f] = true;
    resources[r] = {
      enabled: checked(form[`res_${r}_enabled`]),
      ops: many(form[`res_${r}_ops`]),
      outcome: (INTEREST_OUTCOMES as readonly string[]).includes(outcome) ? (outcome as InterestOutcome) : 'all',
      flags,
    };
  }
  const action = one(form.secret_action);
  return {
    webhook_url: one(form.webhook_url).trim(),
    all_events: checked(form.all_events),
    resources,
    match_text: one(form.match),
    filter_text: one(form.filter),
    secret_action: action === 'rotate' || action === 'remove' ? action : 'keep',
    previous_secret_ttl: one(form.previous_secret_ttl) || '0',
    ordering: one(form.ordering) === 'per_key' ? 'per_key' : 'none',
  };
}

/**
 * Interests from the form state. Ops, outcome and flags are passed through as submitted (the
 * schema rejects what is not in the vocabulary); no ops ticked means every op; false flags are left out.
 */
export function interestsOf(state: WebhookFormState): Interests {
  if (state.all_events) return { all_events: true };
  const resources: Record<string, ResourceConfig> = {};
  for (const r of RESOURCE_NAMES) {
    const s = state.resources[r];
    if (!s.enabled) continue;
    const cfg: ResourceConfig = {};
    if (s.ops.length) cfg.ops = [...s.ops];
    cfg.outcome = s.outcome;
    for (const f of FLAGS) if (s.flags[f]) cfg[f] = true;
    resources[r] = cfg;
  }
  return { resources };
}

type Parsed<T> = { ok: true; value: T } | { ok: false; errors: ErrorDetail[] };

/** The match textarea: empty = org-wide (null); otherwise a JSON document. */
function matchOf(text: string): Parsed<unknown> {
  if (text.trim() === '') return { ok: true, value: null };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false, errors: [{ path: 'match', message: 'is not valid JSON' }] };
  }
}

/** The filter textarea: empty = none (null); otherwise a JSON document (its shape and paths: the API's checks). */
function filterOf(text: string): Parsed<unknown> {
  if (text.trim() === '') return { ok: true, value: null };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false, errors: [{ path: 'filter', message: 'is not valid JSON' }] };
  }
}

function validate<S extends z.ZodType>(schema: S, body: unknown): Parsed<z.infer<S>> {
  const r = schema.safeParse(body);
  return r.success ? { ok: true, value: r.data } : { ok: false, errors: issuesToDetails(r.error.issues) };
}

/** The create body of a submitted form, validated by the API's own schema. */
export function createBodyOf(form: FormData): Parsed<CreateWebhookBody> {
  const state = formStateFromForm(form);
  const match = matchOf(state.match_text);
  if (!match.ok) return match;
  const filter = filterOf(state.filter_text);
  if (!filter.ok) return filter;
  const secret = one(form.secret);
  return validate(createWebhookBodySchema, {
    webhook_url: state.webhook_url,
    ...(secret !== '' ? { secret } : {}),
    interests: interestsOf(state),
    match: match.value,
    ...(state.ordering === 'per_key' ? { delivery: { ordering: 'per_key' } } : {}),
    ...(filter.value !== null ? { filter: filter.value } : {}),
  });
}

/** Whether the submitted subscription is the stored one (interests as a document, match canonically). */
function sameSubscription(interests: Interests, match: unknown, current: { interests: Interests; match: Match | null }): boolean {
  if (!jsonEqual(interests, current.interests)) return false;
  const m = storedMatchSchema.safeParse(match); // without the limits: an old oversized match compares too
  return (match === null || m.success) && canonicalMatch(match === null ? null : (m.data as Match)) === canonicalMatch(current.match);
}

/**
 * The PATCH body of a submitted edit form. It names interests and match (both replace the
 * subscription wholesale), so the match shown in the form is what is saved: a scoped webhook stays
 * scoped. With `current` (the stored webhook), a secret change that leaves the subscription as it
 * is names only the secret: a webhook stored before the limits of CONTRACT 8 keeps its oversized
 * subscription and can still have its secret rotated or removed.
 */
export function patchBodyOf(
  form: FormData,
  current?: { interests: Interests; match: Match | null; delivery?: { ordering?: string } | null; filter?: Record<string, unknown> | null },
): Parsed<PatchWebhookBody> {
  const state = formStateFromForm(form);
  const match = matchOf(state.match_text);
  if (!match.ok) return match;
  const filter = filterOf(state.filter_text);
  if (!filter.ok) return filter;
  const interests = interestsOf(state);
  const body: Record<string, unknown> = { interests, match: match.value };
  // delivery is named only when it changes (or, without the stored webhook, when ordering is asked for)
  const wasOrdered = current?.delivery?.ordering === 'per_key';
  if (current ? wasOrdered !== (state.ordering === 'per_key') : state.ordering === 'per_key')
    body.delivery = state.ordering === 'per_key' ? { ordering: 'per_key' } : null;
  // the filter shown is what is saved: named when it differs from the stored one (CONTRACT 10.2)
  if (!jsonEqual(filter.value, current?.filter ?? null)) body.filter = filter.value;
  if (state.secret_action === 'remove') body.secret = null;
  if (state.secret_action === 'rotate') {
    const secret = one(form.new_secret);
    if (secret === '') return { ok: false, errors: [{ path: 'new_secret', message: 'enter the new secret to rotate to' }] };
    body.secret = secret;
    // an overlap only with a rotation (the API refuses previous_secret_ttl_s without a new secret)
    const ttl = state.previous_secret_ttl.trim();
    if (ttl !== '0') {
      if (!/^\d{1,7}$/.test(ttl))
        return { ok: false, errors: [{ path: 'previous_secret_ttl_s', message: 'choose how long the old secret keeps signing' }] };
      body.previous_secret_ttl_s = Number(ttl);
    }
  }
  if (current && 'secret' in body && sameSubscription(interests, match.value, current)) {
    delete body.interests;
    delete body.match;
  }
  return validate(patchWebhookBodySchema, body);
}

/** A one-line summary of interests for the list page. */
export function describeInterests(i: Interests): string {
  if (i.all_events || !i.resources) return 'All events';
  return Object.entries(i.resources)
    .map(([r, cfg]) => {
      const bits = [cfg?.ops?.length ? cfg.ops.join('/') : 'all ops', `outcome ${cfg?.outcome ?? 'all'}`];
      for (const f of FLAGS) if (cfg?.[f]) bits.push(f.replace(/_/g, ' '));
      return `${r} (${bits.join(', ')})`;
    })
    .join('; ');
}

/** A one-line summary of match for the list page. */
export function describeMatch(m: Match | null): string {
  if (!m) return 'Org-wide';
  return Object.entries(m)
    .map(([kind, f]) => {
      const bits: string[] = [];
      if (f?.ids) bits.push(`ids ${f.ids.join(', ')}`);
      if (f?.selector)
        bits.push(
          Object.entries(f.selector.match_labels)
            .map(([k, v]) => `${k}=${v}`)
            .join(', '),
        );
      return `${kind}: ${bits.length ? bits.join('; ') : 'any'}`;
    })
    .join(' · ');
}

export const OPS_OF: Record<ResourceName, readonly string[]> = RESOURCE_OPS;
