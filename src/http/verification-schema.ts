// The `verification` of a branch run or a fleet rollback (CONTRACT 4.3 "Rollout policy"): at most 5
// URLs, each with its secret, interval, timeout, max_wait and failure_limit; validated here (a
// bad one is a 400 that changes nothing) and kept with the defaults filled in (src/domain/verification.ts).
import { z } from 'zod';
import { durationMs } from '../domain/duration.ts';
import {
  MAX_VERIFICATIONS,
  VERIFY_FAILURE_LIMIT,
  VERIFY_INTERVAL,
  VERIFY_MAX_WAIT,
  VERIFY_TIMEOUT,
  type Verification,
} from '../domain/verification.ts';

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
