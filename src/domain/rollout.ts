// Health-gated rollouts and fleet rollbacks (CONTRACT 4.3): the gate a run carries and what a run
// records once its gate trips (`data.rollout` of its events).

import { z } from 'zod';
import { durationMs } from './duration.ts';

/** The composite verdicts a gate can watch for (`on`). */
export const GATE_VERDICTS = ['degraded', 'unhealthy'] as const;
export type GateVerdict = (typeof GATE_VERDICTS)[number];
/** What a tripped gate does: stop the run, or also roll back the groups it deployed. */
export const GATE_ACTIONS = ['halt', 'rollback'] as const;
export type GateAction = (typeof GATE_ACTIONS)[number];
/** The longest bake (CONTRACT 4.3: `bake` from 0s to 24h). */
export const MAX_BAKE_MS = 24 * 3_600_000;
/** The longest a bad verdict may be required to last before it trips (CONTRACT 4.3: `for` from 0s to 1h). */
export const MAX_GATE_FOR_MS = 3_600_000;

/** A run's health gate as the engine keeps it in the run's params (the request's, with the defaults filled in). */
export const healthGateSchema = z.object({
  /** as given, e.g. `10m` */
  bake: z.string(),
  bake_ms: z.number(),
  on: z.array(z.enum(GATE_VERDICTS)),
  action: z.enum(GATE_ACTIONS),
  /** as given (`0s` when not); a bad verdict trips once it has stayed bad this long */
  for: z.string().default('0s'),
  for_ms: z.number().default(0),
});
export type HealthGate = z.infer<typeof healthGateSchema>;

/** What tripped a gate: the install, the component behind its composite verdict, the verdict, the reason. */
export const gateTripSchema = z.object({
  install_id: z.string(),
  component_id: z.string(),
  verdict: z.enum(GATE_VERDICTS),
  reason: z.string().nullable(),
});
export type GateTrip = z.infer<typeof gateTripSchema>;

/** Why a run's group failed (CONTRACT 4.3 `data.rollout.trigger`). */
export const ROLLOUT_TRIGGERS = ['health_gate', 'deploy_failed', 'verification', 'window_timeout'] as const;
export type RolloutTrigger = (typeof ROLLOUT_TRIGGERS)[number];

/** An install of a group whose config update failed (`data.rollout.failed_installs`). */
export const failedInstallSchema = z.object({ install_id: z.string(), workflow_id: z.string(), error: z.string() });
export type FailedInstall = z.infer<typeof failedInstallSchema>;

/**
 * `data.rollout` of a run's events once a group failed (kept in the run's params): the trigger, and
 * for a health gate the install, component, verdict and reason that tripped it; for a deploy over
 * its failure budget the installs that failed. A step of a group that succeeded within its budget
 * carries `failed_installs` alone.
 */
export const rolloutSchema = z.object({
  run_id: z.string(),
  trigger: z.enum(ROLLOUT_TRIGGERS).optional(),
  ...gateTripSchema.partial().shape,
  failed_installs: z.array(failedInstallSchema).optional(),
  /**
   * a change window's wait step (its events carry these three alone, no run_id): the install, when its next window opens, the windows
   * holding it; a window_timeout: the installs that waited too long
   */
  next_window_at: z.string().nullable().optional(),
  window_ids: z.array(z.string()).optional(),
  install_ids: z.array(z.string()).optional(),
});
export type Rollout = z.infer<typeof rolloutSchema>;

/** What a group that fails does: stop the run, or also roll back what the run deployed. */
export const ON_FAILURE = ['halt', 'rollback'] as const;
export type OnFailure = (typeof ON_FAILURE)[number];
/** CONTRACT 4.3 `window_timeout`: 1m to 7d, default 24h. */
export const MIN_WINDOW_TIMEOUT_MS = 60_000;
export const MAX_WINDOW_TIMEOUT_MS = 7 * 24 * 3_600_000;
export const MAX_PARALLEL = 1000;

/** A run's rollout policy as the engine keeps it in the run's params (`policy`; the request's `rollout`, defaults filled in). */
export const rolloutPolicySchema = z.object({
  /** null: every install of a group at once */
  max_parallel: z.number().nullable(),
  /** a group fails once more than floor(size × this / 100) of its installs failed */
  max_failed_pct: z.number(),
  /** null: the health gate's action, else halt */
  on_failure: z.enum(ON_FAILURE).nullable(),
  window_timeout: z.string(),
  window_timeout_ms: z.number(),
});
export type RolloutPolicy = z.infer<typeof rolloutPolicySchema>;

/** A run's health gate, its rollout policy and its rollout record as kept in the run's params (each absent until set). */
export function rolloutParamsOf(params: Record<string, unknown>): {
  gate: HealthGate | null;
  rollout: Rollout | null;
  policy: RolloutPolicy | null;
} {
  return {
    gate: params.health_gate === undefined ? null : healthGateSchema.parse(params.health_gate),
    rollout: params.rollout === undefined ? null : rolloutSchema.parse(params.rollout),
    policy: params.policy === undefined ? null : rolloutPolicySchema.parse(params.policy),
  };
}

/** The health gate's trip a rollout record names (null: the run's group failed for another reason, or none did). */
export function gateTripOf(r: Rollout | null): GateTrip | null {
  if (r?.trigger !== 'health_gate' || !r.install_id || !r.component_id || !r.verdict) return null;
  return { install_id: r.install_id, component_id: r.component_id, verdict: r.verdict, reason: r.reason ?? null };
}

/** What a failing group of this run does (CONTRACT 4.3: `on_failure`, else the gate's `action`, else halt). */
export function onFailureOf(params: Record<string, unknown>): OnFailure {
  const { gate, policy } = rolloutParamsOf(params);
  return policy?.on_failure ?? gate?.action ?? 'halt';
}

/** A bake duration (`0s`, `90s`, `10m`, `1h`) in milliseconds; null when it is not one. */
export const bakeMs = durationMs;
