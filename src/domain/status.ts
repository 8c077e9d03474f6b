// Statuses and transitions (spec 3, CONTRACT 4.2, 5): defined here once; machines, store, engine,
// events, ingest, HTTP and dashboard all use these.

export const WORKFLOW_STATUSES = ['pending', 'started', 'succeeded', 'failed', 'cancelled'] as const;
export type WorkflowStatus = (typeof WORKFLOW_STATUSES)[number];

/** A step's status: a workflow's, plus waiting for an approval and skipped. */
export const STEP_STATUSES = ['pending', 'started', 'awaiting_approval', 'skipped', 'succeeded', 'failed', 'cancelled'] as const;
export type StepStatus = (typeof STEP_STATUSES)[number];

/** Any status a workflow, step or app config version shows (CONTRACT 4.2). */
export type Status = StepStatus;

/** How a run (a workflow or a step) ended: its final status. Not a delivery's outcome (src/outcomes/outcome.ts). */
export const RUN_OUTCOMES = ['succeeded', 'failed', 'cancelled'] as const;
export type RunOutcome = (typeof RUN_OUTCOMES)[number];

/** Transitions of workflow and step lifecycle events (spec 6.2). */
export const LIFECYCLE_TRANSITIONS = ['started', ...RUN_OUTCOMES] as const;
export type LifecycleTransition = (typeof LIFECYCLE_TRANSITIONS)[number];

export function isRunOutcome(s: string): s is RunOutcome {
  return s === 'succeeded' || s === 'failed' || s === 'cancelled';
}

/** Whether a status is final: an outcome, or (steps) skipped. */
export function isFinal(s: Status): boolean {
  return isRunOutcome(s) || s === 'skipped';
}

export const EXECUTION_TYPES = ['system', 'user', 'approval', 'skipped', 'hidden'] as const;
export type ExecutionType = (typeof EXECUTION_TYPES)[number];

export const OWNER_TYPES = ['installs', 'apps', 'app_branches'] as const;
export type OwnerType = (typeof OWNER_TYPES)[number];

export const VERDICTS = ['healthy', 'degraded', 'unhealthy', 'unknown'] as const;
export type Verdict = (typeof VERDICTS)[number];

export const RUNNER_STATES = ['pending', 'active', 'offline'] as const;
export type RunnerState = (typeof RUNNER_STATES)[number];
