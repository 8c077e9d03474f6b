// What a branch run or a fleet rollback is given for its rollout (CONTRACT 4.3 "Rollout policy"),
// In only: the health gate, the rollout policy and the verification URLs as a request sets them,
// each validated here (a bad one is a 400 that changes nothing) and turned into what the engine keeps
// with the defaults filled in (src/domain/rollout.ts, src/domain/verification.ts).
import { z } from 'zod';
import { durationMs } from '../domain/duration.ts';
import {
  bakeMs,
  GATE_ACTIONS,
  GATE_VERDICTS,
  type HealthGate,
  MAX_BAKE_MS,
  MAX_GATE_FOR_MS,
  MAX_PARALLEL,
  MAX_WINDOW_TIMEOUT_MS,
  MIN_WINDOW_TIMEOUT_MS,
  ON_FAILURE,
  type RolloutPolicy,
} from '../domain/rollout.ts';
import {
  MAX_VERIFICATIONS,
  VERIFY_FAILURE_LIMIT,
  VERIFY_INTERVAL,
  VERIFY_MAX_WAIT,
  VERIFY_TIMEOUT,
  type Verification,
} from '../domain/verification.ts';

/**
 * A run's health gate (CONTRACT 4.3): the bake from 0s to 24h, the verdicts that trip it, what then, and how long a bad one must last
 * (`for`, 0s to 1h).
 */
export const healthGateInSchema = z
  .strictObject({
    bake: z
      .string()
      .refine((b) => bakeMs(b) !== null, 'a duration such as 0s, 90s, 10m or 1h')
      .refine((b) => (bakeMs(b) ?? 0) <= MAX_BAKE_MS, 'at most 24h'),
    on: z.array(z.enum(GATE_VERDICTS)).min(1).optional(),
    action: z.enum(GATE_ACTIONS).optional(),
    for: z
      .string()
      .refine((b) => bakeMs(b) !== null, 'a duration such as 0s, 3s or 5m')
      .refine((b) => (bakeMs(b) ?? 0) <= MAX_GATE_FOR_MS, 'at most 1h')
      .optional(),
  })
  .transform(
    (g): HealthGate => ({
      bake: g.bake,
      bake_ms: bakeMs(g.bake)!,
      on: [...new Set(g.on ?? GATE_VERDICTS)],
      action: g.action ?? 'halt',
      for: g.for ?? '0s',
      for_ms: g.for === undefined ? 0 : bakeMs(g.for)!,
    }),
  );

/**
 * A run's rollout policy (CONTRACT 4.3 "Rollout policy"): batches, a failure budget, what a failing group does, how long an install may
 * wait for a change window.
 */
export const rolloutPolicyInSchema = z
  .strictObject({
    max_parallel: z.number().int().min(1).max(MAX_PARALLEL).optional(),
    failure_budget: z.strictObject({ max_failed_pct: z.number().min(0).max(100) }).optional(),
    on_failure: z.enum(ON_FAILURE).optional(),
    window_timeout: z
      .string()
      .refine((d) => durationMs(d) !== null, 'a duration such as 30m, 24h or 7d')
      .refine((d) => (durationMs(d) ?? 0) >= MIN_WINDOW_TIMEOUT_MS && (durationMs(d) ?? 0) <= MAX_WINDOW_TIMEOUT_MS, 'from 1m to 7d')
      .optional(),
  })
  .transform(
    (r): RolloutPolicy => ({
      max_parallel: r.max_parallel ?? null,
      max_failed_pct: r.failure_budget?.max_failed_pct ?? 0,
      on_failure: r.on_failure ?? null,
      window_timeout: r.window_timeout ?? '24h',
      window_timeout_ms: r.window_timeout === undefined ? 24 * 3_600_000 : durationMs(r.window_timeout)!,
    }),
  );

// ------------------------------------------------------------------ verification: at most 5 URLs, each with its secret, interval,
// timeout, max_wait and failure_limit

const fmt = (ms: number) => (ms % 3_600_000 === 0 ? `${ms / 3_600_000}h` : ms % 60_000 === 0 ? `${ms / 60_000}m` : `${ms / 1000}s`);

const bounded = (b: { min: number; max: number }) =>
  z
    .string()
    .refine((d) => durationMs(d) !== null, 'a duration such as 10s, 5m or 1h')
    .refine((d) => (durationMs(d) ?? 0) >= b.min && (durationMs(d) ?? 0) <= b.max, `from ${fmt(b.min)} to ${fmt(b.max)}`);

const verificationUrl = z
  .string()
  .max(2048)
  .refine((u) => {
    try {
      const p = new URL(u).protocol;
      return p === 'http:' || p === 'https:';
    } catch {
      return false;
    }
  }, 'an http or https URL');

export const verificationRequestSchema = z
  .strictObject({
    url: verificationUrl.describe(
      'http(s) URL POSTed a signed com.svc.rollout.verification.v1 CloudEvent after each group deploys, until it answers a verdict',
    ),
    secret: z.string().min(1).max(1024).optional().describe('signs each request (Standard Webhooks, as a delivery); never shown'),
    interval: bounded(VERIFY_INTERVAL).optional().describe('10s to 10m (default 30s)'),
    timeout: bounded(VERIFY_TIMEOUT).optional().describe('1s to 30s (default 10s)'),
    max_wait: bounded(VERIFY_MAX_WAIT).optional().describe('1m to 24h (default 1h)'),
    failure_limit: z.number().int().min(VERIFY_FAILURE_LIMIT.min).max(VERIFY_FAILURE_LIMIT.max).optional().describe('1 to 10 (default 3)'),
  })
  .transform(
    (v): Verification => ({
      url: v.url,
      secret: v.secret ?? null,
      interval: v.interval ?? VERIFY_INTERVAL.default,
      interval_ms: v.interval === undefined ? VERIFY_INTERVAL.defaultMs : durationMs(v.interval)!,
      timeout: v.timeout ?? VERIFY_TIMEOUT.default,
      timeout_ms: v.timeout === undefined ? VERIFY_TIMEOUT.defaultMs : durationMs(v.timeout)!,
      max_wait: v.max_wait ?? VERIFY_MAX_WAIT.default,
      max_wait_ms: v.max_wait === undefined ? VERIFY_MAX_WAIT.defaultMs : durationMs(v.max_wait)!,
      failure_limit: v.failure_limit ?? VERIFY_FAILURE_LIMIT.default,
    }),
  );

/** `verification: [...]`: 1 to 5 URLs. */
export const verificationListSchema = z.array(verificationRequestSchema).min(1).max(MAX_VERIFICATIONS);
