// Facts: what the engine records. Each fact becomes exactly one CloudEvent (src/events/cloudevent.ts).
// The engine builds facts from machine outputs; events/ turns them into envelopes; dispatch/ routes them.

import type { Rollout } from './rollout.ts';
import type { Actor } from './scopes.ts';
import type { RespondedBy } from './approval-policy.ts';
import type { ExecutionType, LifecycleTransition, RunOutcome, OwnerType, Verdict } from './status.ts';

export interface ParentRef {
  workflow_id: string;
  step_id: string;
  kind: 'workflow_step';
}

export interface WorkflowRef {
  id: string;
  type: string;
  owner_id: string;
  owner_type: OwnerType;
  /** present only when launched from another workflow's step */
  parent?: ParentRef | null;
}

export interface StepRef {
  id: string;
  name: string;
  idx: number;
  target_type?: string | null;
  target_id?: string | null;
  component_id?: string | null;
  sandbox_id?: string | null;
  execution_type: ExecutionType;
}

/** How a run ended, as its terminal lifecycle event tells it: the outcome, an error, how long it took. */
export interface RunResult {
  status: RunOutcome;
  error?: string;
  duration_ms: number;
}

/** Entities an event is about, for `match` (CONTRACT 6.3) and for links. */
export interface FactScope {
  install_id?: string | null;
  component_id?: string | null;
  sandbox_id?: string | null;
  action?: { id: string; name: string } | null;
}

interface Base {
  org_id: string;
  /** ISO 8601 UTC: when the engine recorded the fact */
  time: string;
}

export interface WorkflowFact extends Base, FactScope {
  kind: 'workflow';
  transition: LifecycleTransition;
  workflow: WorkflowRef;
  /** terminal transitions only */
  outcome?: RunResult;
  /** a run whose health gate has tripped (CONTRACT 4.3) */
  rollout?: Rollout;
}

export interface StepFact extends Base, FactScope {
  kind: 'workflow_step';
  transition: LifecycleTransition;
  workflow: WorkflowRef;
  step: StepRef;
  outcome?: RunResult;
  /** a step of a run whose health gate has tripped (CONTRACT 4.3) */
  rollout?: Rollout;
}

export interface ApprovalFact extends Base, FactScope {
  kind: 'workflow_step_approval';
  transition: 'requested' | 'response_recorded' | 'approved' | 'rejected' | 'expired';
  workflow: WorkflowRef;
  step: StepRef;
  approval: {
    status: 'requested' | 'approved' | 'rejected' | 'expired';
    plan?: unknown;
    note?: string;
    responded_at?: string;
    responded_by?: RespondedBy;
    /** under a policy (CONTRACT 10.4): on response_recorded, the answer recorded */
    response?: 'approved' | 'rejected';
    /** under a policy: the rule that decided (on approved, rejected) */
    decided_by_rule?: string;
    /** under a policy: each rule, as k of n */
    rules?: Array<{ name: string; required: number; approvals: Array<{ responded_by: RespondedBy; at: string; note?: string }> }>;
    expires_at?: string | null;
  };
}

/**
 * An answer to an approval step, as the API, the engine and the step's handler take it: approved or
 * rejected, an optional note, and who answered (absent or null: not known).
 */
export type ApprovalAnswer = [response: 'approved' | 'rejected', note?: string, actor?: Actor | null, via?: 'link'];

export interface DriftFact extends Base, FactScope {
  kind: 'drift_detected';
  transition: 'detected';
  workflow: WorkflowRef;
  step: StepRef;
  install_id: string;
  drift: { component_id?: string; sandbox_id?: string; changes: Array<{ address: string; action: string }> };
}

export interface ComponentHealthFact extends Base {
  kind: 'component_health';
  transition: 'unhealthy' | 'recovered';
  install_id: string;
  component_id: string;
  health: { verdict: Verdict; previous: Verdict | null; reason?: string };
}

export interface InstallHealthFact extends Base {
  kind: 'install_health';
  transition: 'degraded' | 'recovered';
  install_id: string;
  health: { verdict: Verdict; previous: Verdict | null; component_id: string };
}

export interface RunnerInfo {
  id: string;
  name: string;
  group_id: string;
  group_type: string;
}

export interface RunnerUnhealthyFact extends Base {
  kind: 'runner_unhealthy';
  transition: 'unhealthy';
  runner: RunnerInfo;
  reason: string;
  install_id?: string | null;
}

export interface RunnerInactiveFact extends Base {
  kind: 'runner_inactive';
  transition: 'inactive';
  runner: RunnerInfo;
  reason?: string;
  install_id?: string | null;
}

export interface PingFact extends Base {
  kind: 'webhook_ping';
  transition: 'ping';
  webhook_id: string;
}

/** What the delivery watchdog says of one webhook (CONTRACT 4.1, 6.2 `com.svc.webhook.delivery.v1`). */
export interface WebhookDeliveryFact extends Base {
  kind: 'webhook_delivery';
  transition: 'failing' | 'recovered' | 'disabled' | 'enabled';
  /** `url_host`: the URL's host (and :port when it names one); never its path, query or secret */
  webhook: { id: string; url_host: string };
  delivery: {
    consecutive_failures: number;
    failing_since: string | null;
    last_error: string | null;
    last_status_code: number | null;
    /** on `recovered`: how many events failed in the streak, and where a recovery should start */
    failed_events?: number;
    recover_since?: string | null;
    /** on `disabled` */
    disabled_reason?: string;
  };
}

export type Fact =
  | WorkflowFact
  | StepFact
  | ApprovalFact
  | DriftFact
  | ComponentHealthFact
  | InstallHealthFact
  | RunnerUnhealthyFact
  | RunnerInactiveFact
  | PingFact
  | WebhookDeliveryFact;
