// The engine: the one owner of workflows, steps, jobs, runners, health and drift. Every operation
// is one transaction (or, for producers' facts under load, one group commit): the machines decide
// what is legal and what it emits, the new state and its events commit together, and what the
// outbox holds is handed on by the topology (src/topology/: the outbox relay to JetStream, or the
// outbox source). The API's services, ingest and the scheduler all come through here.
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import type { AppConfig } from '../../store/apps.ts';
import {
  listComponents,
  listProvisionedInstalls,
  setInstallInputs,
  type Action,
  type Component,
  type Install,
} from '../../store/installs.ts';
import { listRunners } from '../../store/runners.ts';
import { getOrg } from '../../store/orgs.ts';
import {
  jobsToSend,
  listBakingSteps,
  markJobSent,
  requeueStartedJobs,
  type StepRow,
  type VersionRow,
  type WorkflowRow,
} from '../../store/workflows.ts';
import type { Bus } from '../bus/bus.ts';
import { jobSubject } from '../bus/subjects.ts';
import { isoNow } from '../domain/clock.ts';
import { InvalidError } from '../domain/errors.ts';
import type { HealthMessage, JobResult, RunnerMessage, WorkflowMessage } from '../domain/producer-messages.ts';
import { applyConfig, deployGroup, provisionNewInstall, type NewInstall } from './config-apply.ts';
import type { ConfigDiff } from '../domain/config-diff.ts';
import { appRollbackSteps, branchRunSteps, installSteps, type InstallWorkflowType, type RunGroup } from './definitions.ts';
import type { HealthGate, RolloutPolicy } from '../domain/rollout.ts';
import type { ApprovalAnswer } from '../domain/facts.ts';
import { reportExternalWorkflow } from './external.ts';
import { listWindowWaits } from '../../store/change-windows.ts';
import { reportHealth } from './health-verdicts.ts';
import { checkRunner, reportRunner } from './runners.ts';
import { checkRecoveryBounds, RecoveryFeeder, type RecoveryOutcomeSource, type RecoveryRequest } from './recoveries.ts';
import { WalCheckpoints } from '../../store/checkpoints.ts';
import { Transactions, type BatchResult, type TransactionDeps, type Tx } from './transaction.ts';
import { RunnerResults, type IngestResult, type Unclassified } from './runner-results.ts';
import { WorkflowFacts } from './workflow-facts.ts';
import { WorkflowRuns } from './workflow-runs.ts';
import { Wakeups } from './wakeups.ts';
import type { ApprovalPolicy } from '../domain/approval-policy.ts';
import type { Actor } from '../domain/scopes.ts';
import { waitDueOf } from './steps/window.ts';
import { WebhookWatchdog } from './watchdog-transitions.ts';
import { Verifier } from './steps/verify-requests.ts';
import { startTurnGuard } from './turns.ts';
import type { Verification } from '../domain/verification.ts';

export type { IngestResult, Unclassified };

/** What the engine is built from: its transactions' needs (src/engine/transaction.ts), and more. */
export interface EngineDeps extends Omit<TransactionDeps, 'keepEvents' | 'jobsChanged'> {
  bus: Bus;
  logger: Logger;
  /** keep every emitted event in the history (CONTRACT 4.5 --event-retention > 0; default true) */
  keepEvents?: boolean;
  /** where the outcomes of recovery attempts are heard (each frees a place for the next item) */
  recoveryOutcomes?: RecoveryOutcomeSource;
  /** replicate a webhook to the data plane (the watchdog disabled or enabled it) */
  webhookChanged?: (orgId: string, webhookId: string) => void;
  /** verification requests may go to private targets (--allow-private-targets; default false) */
  allowPrivateTargets?: boolean;
}

/** A producer's message, checked and parsed (src/ingest), for one org. */
export type ProducerFact =
  | { family: 'jobs'; orgId: string; id: string; body: JobResult }
  | { family: 'workflows'; orgId: string; id: string; body: WorkflowMessage }
  | { family: 'runners'; orgId: string; id: string; body: RunnerMessage }
  | { family: 'health'; orgId: string; id: string; body: HealthMessage };

/** A job not started within this long is sent again with the same job_id (CONTRACT 5.2). */
export const JOB_RESEND_MS = 10_000;

export class Engine {
  readonly db: Db;
  private readonly tx: Transactions;
  /** every workflow status change and its event (CONTRACT 4.2) */
  private readonly facts: WorkflowFacts;
  /** workflows run step by step, each step by the handler of its kind (./steps/) */
  private readonly runs: WorkflowRuns;
  /** runners' reports on jobs */
  private readonly results: RunnerResults;
  /** step policies' wakeups on the engine's clock (a bake's `for`, a window's opening, a verify step's next ask) */
  private readonly wakeups: Wakeups;
  private readonly recoveries: RecoveryFeeder;
  /** the delivery watchdog of every webhook (CONTRACT 4.1): fed outcomes, disable and enable */
  readonly watchdog: WebhookWatchdog;
  /** WAL checkpoints on a thread of their own, not in the commits that producers' answers wait for */
  private readonly checkpoints: WalCheckpoints;
  /** verification gates' requests (CONTRACT 4.3): polled on the engine's clock, sent outside transactions */
  private readonly verifier: Verifier;
  private sendingJobs = false;
  private closed = false;
  /** orgs seen to exist (orgs are never deleted; another process may add one, so a miss asks the store) */
  private readonly knownOrgs = new Set<string>();
  /** SVC_TURN_GUARD=1: turns of the thread over 50 ms (SVC_TURN_GUARD_MS) logged with their causes (./turns.ts) */
  private readonly turnGuard: { stop(): void } | null;

  constructor(private readonly deps: EngineDeps) {
    this.db = deps.db;
    this.turnGuard =
      process.env.SVC_TURN_GUARD === '1' ? startTurnGuard(deps.logger, { limitMs: Number(process.env.SVC_TURN_GUARD_MS ?? 50) }) : null;
    this.tx = new Transactions({ ...deps, keepEvents: deps.keepEvents ?? true, jobsChanged: () => this.kickJobs() });
    this.wakeups = new Wakeups(deps.clock);
    this.wakeups.listen({
      // a gate's bad verdict lasts its `for`: tick then, not at the next periodic tick
      bakes: () => this.bakeTick(),
      // a change window opens (or a wait times out): look then (the scheduler also looks every second)
      windows: () => this.windowTick(),
      // a verify step is looked at when it says, once what it recorded is committed
      verify: (workflowId, stepId, at) => this.tx.afterCommit(() => this.verifier.arm(workflowId, stepId, at)),
      // an approval policy's expires_after passed (the scheduler also looks every second)
      approvals: () => this.approvalTick(),
    });
    this.facts = new WorkflowFacts(deps.db);
    this.runs = new WorkflowRuns(
      deps.db,
      this.facts,
      (t, wf, step, only) => deployGroup(t, deps.db, this.runs, wf, step, only),
      this.wakeups,
    );
    this.results = new RunnerResults(deps.db, this.facts, this.runs);
    this.verifier = new Verifier({
      db: deps.db,
      clock: deps.clock,
      tx: this.tx,
      steps: () => this.runs.steps.verify,
      logger: deps.logger,
      urls: deps.urls,
      allowPrivateTargets: deps.allowPrivateTargets ?? false,
    });
    this.recoveries = new RecoveryFeeder({
      db: deps.db,
      clock: deps.clock,
      logger: deps.logger,
      tx: this.tx,
      registryRev: deps.registryRev,
    });
    deps.recoveryOutcomes?.onRecoveryAttempt((id, ok) => this.recoveries.attempted(id, ok));
    this.checkpoints = new WalCheckpoints(deps.db, deps.logger);
    this.watchdog = new WebhookWatchdog(deps.db, this.tx, deps.webhookChanged ?? (() => {}));
  }

  // ------------------------------------------------------------------ producers (CONTRACT 5.2)

  /**
   * Producers' facts, committed together (each in its own savepoint); results in order. `last` runs
   * in the same transaction after them, with their results (the SVC_FACTS cursor and late refusals).
   */
  ingest(
    facts: readonly ProducerFact[],
    last?: (results: Array<BatchResult<IngestResult | Unclassified>>) => void,
  ): Array<BatchResult<IngestResult | Unclassified>> {
    const results = this.tx.batch(
      facts,
      (t, f) => {
        if (!this.knownOrgs.has(f.orgId)) {
          if (!getOrg(this.db, f.orgId)) throw new InvalidError('unknown org');
          this.knownOrgs.add(f.orgId);
        }
        switch (f.family) {
          case 'jobs':
            return this.results.jobReport(t, f.orgId, f.id, f.body);
          case 'workflows':
            return reportExternalWorkflow(t, this.db, this.facts, f.orgId, f.id, f.body);
          case 'runners':
            return reportRunner(t, this.db, f.orgId, f.id, f.body);
          case 'health': {
            const r = reportHealth(t, this.db, f.orgId, f.id, f.body);
            if (r === 'accepted') this.runs.steps.bake.installHealthChanged(t, f.orgId, f.id);
            return r;
          }
        }
      },
      last,
    );
    // a flood of facts is what lengthens the log fastest: its file looked at after each group
    this.checkpoints.committed();
    return results;
  }

  // ------------------------------------------------------------------ the API's operations

  /**
   * A change made through the API or the dashboard: `fn` and everything it asks of the engine (or
   * writes to the store) in ONE transaction, with the audit row `fn` records through `t.audit`
   * (CONTRACT 2: a change without its audit row cannot be committed). `fn` is synchronous: I/O
   * (a ping, a wait) comes after the commit.
   */
  change<T>(fn: (t: Tx) => T): T {
    return this.tx.run(fn);
  }

  /** Run `fn` once the open transaction commits (at once when none is open): replication, notifications. */
  afterCommit(fn: () => void): void {
    this.tx.afterCommit(fn);
  }

  /** A new install on a config, provisioned (CONTRACT 4.2). */
  createInstall(input: NewInstall, config: AppConfig): Install {
    return this.tx.run((t) => provisionNewInstall(t, this.db, this.runs, input, config));
  }

  /** One of the install workflows of CONTRACT 4.2. */
  startInstallWorkflow(
    install: Install,
    type: InstallWorkflowType,
    opts: { component?: Component; action?: Action; inputs?: Record<string, unknown> } = {},
  ): WorkflowRow {
    return this.tx.run((t) => {
      if (type === 'input_update' && opts.inputs) setInstallInputs(this.db, install.install_id, { ...install.inputs, ...opts.inputs });
      return this.runs.start(t, {
        org_id: install.org_id,
        type,
        owner_id: install.install_id,
        owner_type: 'installs',
        action_id: opts.action?.action_id ?? null,
        params: opts.inputs ? { inputs: opts.inputs } : {},
        steps: installSteps(type, {
          install,
          components: listComponents(this.db, install.install_id),
          component: opts.component,
          action: opts.action,
        }),
      });
    });
  }

  /** Apply an app config to an install (rollback, CONTRACT 4.3). */
  applyConfig(install: Install, target: AppConfig): { workflow: WorkflowRow; version: VersionRow; plan: ConfigDiff } {
    return this.tx.run((t) => applyConfig(t, this.db, this.runs, install, target));
  }

  /** An app branch run over install groups (CONTRACT 4.3), health-gated when `gate` is given. */
  startBranchRun(
    orgId: string,
    appId: string,
    branchId: string,
    target: AppConfig,
    groups: RunGroup[],
    skipBuilds: boolean,
    gate: HealthGate | null = null,
    policy: RolloutPolicy | null = null,
    verification: Verification[] = [],
    approval: RunApproval = {},
  ): WorkflowRow {
    return this.tx.run((t) =>
      this.runs.start(t, {
        org_id: orgId,
        type: 'app_branch_run',
        owner_id: branchId,
        owner_type: 'app_branches',
        params: {
          app_config_id: target.app_config_id,
          app_id: appId,
          skip_builds: skipBuilds,
          ...rolloutParams(gate, policy, verification),
          ...runApprovalParams(approval),
        },
        steps: branchRunSteps(groups, skipBuilds, !!gate, verification.length > 0),
      }),
    );
  }

  /** A fleet rollback (CONTRACT 4.3): an `app_rollback` workflow moving each install to its own target, group by group. */
  startAppRollback(
    orgId: string,
    appId: string,
    groups: RunGroup[],
    targets: Record<string, string>,
    opts: {
      to: string;
      approval: boolean;
      gate: HealthGate | null;
      policy?: RolloutPolicy | null;
      verification?: Verification[];
      runApproval?: RunApproval;
    },
  ): WorkflowRow {
    return this.tx.run((t) =>
      this.runs.start(t, {
        org_id: orgId,
        type: 'app_rollback',
        owner_id: appId,
        owner_type: 'apps',
        params: {
          app_id: appId,
          to: opts.to,
          targets,
          approval: opts.approval ? 'per_group' : 'none',
          ...rolloutParams(opts.gate, opts.policy ?? null, opts.verification ?? []),
          ...runApprovalParams(opts.runApproval ?? {}),
        },
        steps: appRollbackSteps(groups, { approval: opts.approval, gate: !!opts.gate, verify: !!opts.verification?.length }),
      }),
    );
  }

  /** Answer an approval step; `actor` (who answered) is kept on the step and in the response event (CONTRACT 2). */
  respondToApproval(orgId: string, workflowId: string, stepId: string, ...answer: ApprovalAnswer): StepRow {
    return this.tx.run((t) => this.runs.steps.approval.respondToApproval(t, orgId, workflowId, stepId, ...answer));
  }

  cancelWorkflow(orgId: string, workflowId: string): WorkflowRow {
    return this.tx.run((t) => this.runs.steps.approval.cancel(t, orgId, workflowId));
  }

  // ------------------------------------------------------------------ recoveries (CONTRACT 4.5)

  /** Start a recovery: checked against the bounds and kept, then fed behind the caller (src/engine/recoveries.ts). */
  beginRecovery(req: RecoveryRequest): void {
    this.recoveries.begin(req);
  }

  /** Throws (409) when a recovery of this webhook could not start now (CONTRACT 4.5 bounds). */
  checkRecoveryBounds(orgId: string, webhookId: string): void {
    checkRecoveryBounds(this.db, orgId, webhookId);
  }

  /** Resolves once a recovery's window has been looked at in full (its `events` is final). */
  recoveryPrepared(recoveryId: string): Promise<void> {
    return this.recoveries.prepared(recoveryId);
  }

  // ------------------------------------------------------------------ the scheduler's (src/engine/scheduler.ts)

  /** The runner health check (CONTRACT 5.1): one transaction per active runner. */
  runnerHealthCheck(): void {
    for (const r of listRunners(this.db)) {
      if (r.state === 'active') this.tx.run((t) => checkRunner(t, this.db, r.org_id, r.runner_id));
    }
  }

  /** Scheduled drift scans: a drift_run and a drift_run_reprovision_sandbox for every provisioned install. */
  driftScans(): void {
    for (const install of listProvisionedInstalls(this.db)) {
      for (const type of ['drift_run', 'drift_run_reprovision_sandbox'] as const) this.startInstallWorkflow(install, type);
    }
  }

  /** Health gates: bakes whose time is up on the engine's clock pass (CONTRACT 4.3). */
  bakeTick(): void {
    if (this.closed || !listBakingSteps(this.db).length) return;
    this.tx.run((t) => this.runs.steps.bake.bakeTick(t));
  }

  /**
   * At start, once the URLs are known: every verify step still running polls again at the next-ask
   * time SQLite holds for it (CONTRACT 4.3: within one interval after a restart). Returns how many.
   */
  resumeVerifications(): number {
    return this.verifier.resume();
  }

  /** Approval policies (CONTRACT 10.4): steps past their expires_after on the engine's clock fail approval_expired. */
  approvalTick(): void {
    if (this.closed || !this.runs.steps.approval.anyDue(this.deps.clock.now())) return;
    this.tx.run((t) => this.runs.steps.approval.expireDue(t));
  }

  /** An app's approval policy changed (in the caller's transaction): its runs' waiting approval steps are looked at afresh. */
  approvalPolicyChanged(orgId: string, appId: string): void {
    this.tx.run((t) => this.runs.steps.approval.policyChanged(t, orgId, appId));
  }

  /** Change windows: installs whose window opened (or whose wait timed out) on the engine's clock move on (CONTRACT 4.3). */
  windowTick(): void {
    if (this.closed || !listWindowWaits(this.db).some((s) => waitDueOf(s) <= this.deps.clock.now())) return;
    this.tx.run((t) => this.reviewWindowWaits(t));
  }

  /** An app's change windows changed (in the caller's transaction): its waiting installs are evaluated afresh. */
  windowsChanged(orgId: string, appId: string): void {
    this.tx.run((t) => this.reviewWindowWaits(t, { orgId, appId }));
  }

  /**
   * Change windows (CONTRACT 4.3): installs waiting for one are looked at again, those due on the
   * clock or, when an app's windows changed, every one of that app's; runs whose group deploy ended move on.
   */
  private reviewWindowWaits(t: Tx, opts: { orgId?: string; appId?: string } = {}): void {
    for (const id of this.runs.steps['group-deploy'].reviewWaits(t, opts)) this.runs.advance(t, id);
  }

  /** Send queued jobs, and send again jobs not started within JOB_RESEND_MS (same job_id). */
  kickJobs(): void {
    if (this.sendingJobs || this.closed) return;
    this.sendingJobs = true;
    try {
      const now = this.deps.clock.now();
      for (const job of jobsToSend(this.db, new Date(now - JOB_RESEND_MS).toISOString())) {
        this.deps.bus.publish(jobSubject(job.org_id, job.runner_id), JSON.stringify(job.payload));
        markJobSent(this.db, job.job_id, isoNow(this.deps.clock));
      }
    } catch (err) {
      this.deps.logger.warn({ err: String(err) }, 'sending jobs failed');
    } finally {
      this.sendingJobs = false;
    }
  }

  /**
   * At the start of a process whose local runner runs every job: the jobs it had started when the
   * process stopped (or died) stopped with it. Queue them again; they go out with the same job_id,
   * the step's second `started` is a duplicate, and its end carries the workflow on.
   */
  resumeLocalJobs(): number {
    return requeueStartedJobs(this.db);
  }

  close(): void {
    this.closed = true;
    this.turnGuard?.stop();
    this.verifier.close();
    this.recoveries.close();
    this.checkpoints.close();
  }
}

/** A run's rollout settings as its params keep them (CONTRACT 4.3), only those it has: health_gate, policy, verification. */
function rolloutParams(gate: HealthGate | null, policy: RolloutPolicy | null, verification: Verification[]): Record<string, unknown> {
  return {
    ...(gate ? { health_gate: gate } : {}),
    ...(policy ? { policy } : {}),
    ...(verification.length ? { verification } : {}),
  };
}

/** Who started a run and the stricter approval policy it names (CONTRACT 10.4), as its params keep them. */
export interface RunApproval {
  policy?: ApprovalPolicy | null;
  started_by?: Actor | null;
}

function runApprovalParams(a: RunApproval): Record<string, unknown> {
  return {
    ...(a.policy ? { approval_policy: a.policy } : {}),
    ...(a.started_by ? { started_by: { token_id: a.started_by.token_id, token_name: a.started_by.token_name } } : {}),
  };
}
