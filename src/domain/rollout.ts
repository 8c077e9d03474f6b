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

/** `data.rollout` of a run's events once its gate has tripped, kept in the run's params. */
export const rolloutSchema = z.object({ run_id: z.string(), trigger: z.literal('health_gate'), ...gateTripSchema.shape });
export type Rollout = z.infer<typeof rolloutSchema>;

/** A run's health gate and its rollout record as kept in the run's params (each absent until set). */
export function rolloutParamsOf(params: Record<string, unknown>): { gate: HealthGate | null; rollout: Rollout | null } {
  return {
    gate: params.health_gate === undefined ? null : healthGateSchema.parse(params.health_gate),
    rollout: params.rollout === undefined ? null : rolloutSchema.parse(params.rollout),
  };
}

/** A bake duration (`0s`, `90s`, `10m`, `1h`) in milliseconds; null when it is not one. */
export const bakeMs = durationMs;
