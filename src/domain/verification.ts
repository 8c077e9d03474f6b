// Verification gates (CONTRACT 4.3 "Rollout policy", `verification`): the external checks a run's
// group must pass after its deploy, as the engine keeps them in the run's params, and how one
// answer of a verification URL reads. One vocabulary for the API's schema, the machine
// (machines/verification-gate.ts), the engine and the dashboard.
import { z } from 'zod';

/** CONTRACT 4.3: at most 5 verifications per run. */
export const MAX_VERIFICATIONS = 5;
/** `interval`: 10s–10m, default 30s. */
export const VERIFY_INTERVAL = { min: 10_000, max: 600_000, default: '30s', defaultMs: 30_000 } as const;
/** `timeout`: 1s–30s, default 10s. */
export const VERIFY_TIMEOUT = { min: 1000, max: 30_000, default: '10s', defaultMs: 10_000 } as const;
/** `max_wait`: 1m–24h, default 1h. */
export const VERIFY_MAX_WAIT = { min: 60_000, max: 24 * 3_600_000, default: '1h', defaultMs: 3_600_000 } as const;
/** `failure_limit`: 1–10, default 3. */
export const VERIFY_FAILURE_LIMIT = { min: 1, max: 10, default: 3 } as const;

/**
 * A verification as the engine keeps it in the run's params (`verification`: the request's, the
 * defaults filled in). `secret` stays there (as a webhook's secret stays on its row): it signs the
 * requests and is never shown (the workflow's views and events do not carry the run's params).
 */
export const verificationSchema = z.object({
  url: z.string(),
  secret: z.string().nullable(),
  interval: z.string(),
  interval_ms: z.number(),
  timeout: z.string(),
  timeout_ms: z.number(),
  max_wait: z.string(),
  max_wait_ms: z.number(),
  failure_limit: z.number(),
});
export type Verification = z.infer<typeof verificationSchema>;

/** The run's verifications (empty when it has none). */
export function verificationsOf(params: Record<string, unknown>): Verification[] {
  return params.verification === undefined ? [] : z.array(verificationSchema).parse(params.verification);
}

/** How an answer reads (CONTRACT 4.3): `error` is any other answer, a timeout or a refused target. */
export const VERIFY_VERDICTS = ['pass', 'fail', 'pending', 'error'] as const;
export type VerifyVerdict = (typeof VERIFY_VERDICTS)[number];

/** One answer of a verification URL, as recorded (the step's params; the dashboard shows the last one). */
export const verifyAnswerSchema = z.object({
  verdict: z.enum(VERIFY_VERDICTS),
  /** the HTTP status, when there was an answer */
  status: z.number().nullable(),
  /** why it counts as a failure (error), never the URL's path, query or secret */
  error: z.string().nullable(),
  /** a `fail` verdict's reason, as the URL gave it */
  reason: z.string().nullable(),
  /** when it was recorded (ISO 8601, engine clock) */
  at: z.string(),
});
export type VerifyAnswer = z.infer<typeof verifyAnswerSchema>;

/** At most this much of an answer is read (as for deliveries, CONTRACT 6.4). */
export const MAX_VERIFY_ANSWER_BYTES = 64 * 1024;
/** A reason longer than this is cut (it is kept in the step's params and in events). */
const MAX_REASON = 500;

/**
 * How an HTTP answer reads: a 2xx whose JSON body has `verdict` pass, fail (with its `reason`) or
 * pending is that verdict; otherwise a 202 is pending; anything else counts one failure.
 */
export function readAnswer(status: number, body: string): Omit<VerifyAnswer, 'at'> {
  if (status >= 200 && status < 300) {
    let parsed: unknown;
    try {
      parsed = body ? JSON.parse(body) : undefined;
    } catch {
      parsed = undefined;
    }
    const verdict = parsed && typeof parsed === 'object' ? (parsed as Record<string, unknown>).verdict : undefined;
    if (verdict === 'pass' || verdict === 'pending') return { verdict, status, error: null, reason: null };
    if (verdict === 'fail') {
      const r = (parsed as Record<string, unknown>).reason;
      return { verdict, status, error: null, reason: typeof r === 'string' ? r.slice(0, MAX_REASON) : null };
    }
    if (status === 202) return { verdict: 'pending', status, error: null, reason: null };
    return { verdict: 'error', status, error: `HTTP ${status} without a verdict`, reason: null };
  }
  return { verdict: 'error', status, error: `HTTP ${status}`, reason: null };
}

/** The part of a URL that may be shown (scheme, host and path): never its user, password or query. */
export function shownUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '?';
  }
}
