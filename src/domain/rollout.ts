// Health-gated rollouts and fleet rollbacks (CONTRACT 4.3): the gate a run carries and what a run
// records once its gate trips (`data.rollout` of its events).

import { durationMs } from './duration.ts';

/** The composite verdicts a gate can watch for (`on`). */
export const GATE_VERDICTS = ['degraded', 'unhealthy'] as const;
export type GateVerdict = (typeof GATE_VERDICTS)[number];
/** What a tripped gate does: stop the run, or also roll back the groups it deployed. */
export const GATE_ACTIONS = ['halt', 'rollback'] as const;
export type GateAction = (typeof GATE_ACTIONS)[number];
/** The longest bake (CONTRACT 4.3: `bake` from 0s to 24h). */
export const MAX_BAKE_MS = 24 * 3_600_000;

/** A run's health gate as the engine keeps it (the request's, with the defaults filled in). */
export interface HealthGate {
  /** as given, e.g. `10m` */
  bake: string;
  bake_ms: number;
  on: GateVerdict[];
  action: GateAction;
}

/** `data.rollout` of a run's events once its gate has tripped. */
export interface Rollout {
  run_id: string;
  trigger: 'health_gate';
  install_id: string;
  component_id: string;
  verdict: GateVerdict;
  reason: string | null;
}

/** A bake duration (`0s`, `90s`, `10m`, `1h`) in milliseconds; null when it is not one. */
export const bakeMs = durationMs;
