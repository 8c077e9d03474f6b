// The size limits of CONTRACT 8, defined once: every layer that checks or shows one (the request
// schemas of the API and the dashboard forms, install creation, the default of `svc serve
// --max-webhooks-per-org` that the webhook service enforces) imports it from here.
// They are enforced where data enters; what was stored before them is read and delivered as it is.
import { z } from 'zod';

/** CONTRACT 8: what one org may store. Characters are counted as JavaScript counts them (UTF-16 code units). */
export const LIMITS = {
  /** labels on one install, component or action (and in one selector's match_labels) */
  labelsPerEntity: 64,
  /** a label key: 1 to this many characters, not blank, no control characters */
  labelKeyChars: 128,
  /** a label value: a string of at most this many characters */
  labelValueChars: 63,
  /** one webhook's subscription, `interests` + `match` as JSON, in UTF-8 bytes (16 KiB) */
  subscriptionBytes: 16 * 1024,
  /** ids in one kind (installs, components, actions) of a webhook's `match` */
  matchIdsPerKind: 1000,
  /** webhooks per org: the default of `--max-webhooks-per-org` (SVC_MAX_WEBHOOKS_PER_ORG) */
  webhooksPerOrg: 10_000,
  /** change windows per app: evaluating them is engine work for every plan and deploy batch of the app; the 51st is 409 limit_exceeded */
  changeWindowsPerApp: 50,
  /** one event: its CloudEvent body and its route, in UTF-8 bytes (256 KiB); a fact whose event is larger is refused */
  eventBytes: 256 * 1024,
} as const;

// ------------------------------------------------------------------ labels

/** C0 and C1 control characters (\u0000-\u001f, \u007f-\u009f). */
const CONTROL = /\p{Cc}/u;

export const labelKeySchema = z
  .string()
  .min(1, { error: 'label key must not be empty' })
  .max(LIMITS.labelKeyChars, { error: `label key must be at most ${LIMITS.labelKeyChars} characters` })
  .refine((k) => k.trim() !== '', { error: 'label key must not be blank' })
  .refine((k) => !CONTROL.test(k), { error: 'label key must not contain control characters' });

export const labelValueSchema = z
  .string({ error: 'label value must be a string' })
  .max(LIMITS.labelValueChars, { error: `label value must be at most ${LIMITS.labelValueChars} characters` });

/**
 * Labels as a request may set them (CONTRACT 8): at most 64, each key and value within its limits.
 * Stored labels are read without these rules (data from before the limits still reads).
 */
export const labelsSchema = z
  .record(labelKeySchema, labelValueSchema)
  .refine((labels) => Object.keys(labels).length <= LIMITS.labelsPerEntity, {
    error: (iss) => `at most ${LIMITS.labelsPerEntity} labels (got ${Object.keys(iss.input as object).length})`,
  })
  .meta({
    maxProperties: LIMITS.labelsPerEntity,
    description:
      `at most ${LIMITS.labelsPerEntity} labels; keys 1 to ${LIMITS.labelKeyChars} characters, not blank, no control ` +
      `characters; values at most ${LIMITS.labelValueChars} characters`,
  });

/**
 * The label sets of a stored app config that break the limits (`components.0.labels`, ...): a config
 * stored before them. Creating an install from it would write those labels anew, so that is refused.
 */
export function labelsOverLimits(config: {
  components?: ReadonlyArray<{ labels?: unknown }>;
  actions?: ReadonlyArray<{ labels?: unknown }>;
}): string[] {
  const out: string[] = [];
  for (const kind of ['components', 'actions'] as const) {
    (config[kind] ?? []).forEach((entity, i) => {
      if (entity.labels !== undefined && !labelsSchema.safeParse(entity.labels).success) out.push(`${kind}.${i}.labels`);
    });
  }
  return out;
}

// ------------------------------------------------------------------ webhook subscriptions

/**
 * The size of a subscription as CONTRACT 8 measures it: `{interests, match}` (what the request
 * gives of them) as JSON, in UTF-8 bytes.
 */
export function subscriptionBytes(sub: { interests?: unknown; match?: unknown }): number {
  return Buffer.byteLength(JSON.stringify({ interests: sub.interests, match: sub.match }), 'utf8');
}

/** Which part of a subscription to name when it is too large: the larger of interests and match. */
export function largerPart(sub: { interests?: unknown; match?: unknown }): 'interests' | 'match' {
  const size = (v: unknown) => (v === undefined ? 0 : Buffer.byteLength(JSON.stringify(v), 'utf8'));
  return size(sub.match) >= size(sub.interests) ? 'match' : 'interests';
}
