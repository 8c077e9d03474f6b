// One workflow: steps with status, durations, errors and plans; approvals; cancel; refresh while running.
import type { Hono } from 'hono';
import type { Child } from 'hono/jsx';
import type { AppContext } from '../../context.ts';
import { apiOp, change, may } from '../changes.ts';
import { changesOf, type AuditView } from '../../services/audit.ts';
import { ApprovalRefusedError, ConflictError, InvalidError } from '../../domain/errors.ts';
import { approvalRefusal } from '../../services/approval-policies.ts';
import { componentNames } from '../../services/names.ts';
import { rolloutView, type RolloutView } from '../../services/rollouts.ts';
import {
  cancelWorkflow,
  getWorkflowView,
  respondToApproval,
  workflowOwner,
  workflowParent,
  type ParentInfo,
  type StepView,
  type WorkflowOwner,
  type WorkflowView,
} from '../../services/workflows.ts';
import { csrfOf, render } from '../render.tsx';
import { flash, type DashContext, type DashEnv } from '../session.ts';
import {
  ActorName,
  RespondedByName,
  Csrf,
  Diff,
  ScopeNote,
  duration,
  FactLine,
  isTerminal,
  Json,
  LabelList,
  Owner,
  ownerText,
  Section,
  StatusBadge,
  Time,
  type DiffShape,
  CodeFact,
  TimeFact,
  DangerForm,
} from '../ui.tsx';
import { configNamer } from '../config-namer.ts';
import { groupStatus, RolloutFacts, RunPicture, stepExtra, TripCause } from './rollouts.tsx';

export type ConfigName = ReturnType<typeof configNamer>;

interface GroupPlan {
  install_group: string;
  installs: Array<{
    install_id: string;
    install_name: string;
    labels: Record<string, string>;
    old_app_config_id: string | null;
    new_app_config_id: string;
    diff: DiffShape;
  }>;
}

const REFRESH_SECONDS = 3;

const isGroupPlan = (p: unknown): p is GroupPlan => !!p && typeof p === 'object' && Array.isArray((p as GroupPlan).installs);

/** An install's move in a plan: the install, its labels, from which config to which (names, then ids), a badge between. */
export const PlanMove = (p: {
  href: string;
  move: { install_name: string; labels: Record<string, string>; old_app_config_id: string | null; new_app_config_id: string };
  configName: ConfigName;
  badge?: Child;
}) => (
  <>
    <a href={p.href}>{p.move.install_name}</a> <LabelList labels={p.move.labels} />: {p.configName(p.move.old_app_config_id)} →{' '}
    {p.configName(p.move.new_app_config_id)} {p.badge === undefined ? null : <>{p.badge} </>}
    <span class="muted id">
      {p.move.old_app_config_id ?? '—'} → {p.move.new_app_config_id}
    </span>
  </>
);

/** A step's plan: a branch run's group plan as installs with their diffs, anything else as JSON. */
export const Plan = ({ plan, c, configName }: { plan: unknown; c: DashContext; configName: ConfigName }) =>
  isGroupPlan(plan) ? (
    <div>
      <p>
        Plan for install group <strong>{plan.install_group}</strong>: {plan.installs.length} install(s)
      </p>
      <ul>
        {plan.installs.map((i) => (
          <li>
            <PlanMove href={c.get('paths').install(i.install_id)} move={i} configName={configName} />
            <Diff diff={i.diff} />
          </li>
        ))}
      </ul>
    </div>
  ) : (
    <details>
      <summary>Plan</summary>
      <Json value={plan} label="Plan" />
    </details>
  );

type ApprovalView = NonNullable<StepView['approval']>;

/** An approval step under a policy (CONTRACT 10.4): each rule "k of n" with who approved and when, the rejections, the expiry. */
export const PolicyRules = ({ approval }: { approval: ApprovalView }) =>
  approval.rules ? (
    <div class="approval-policy">
      <ul class="policy-rules">
        {approval.rules.map((r) => (
          <li>
            <strong>{r.name}</strong>: {Math.min(r.approvals.length, r.required)} of {r.required}
            {r.approvals.length ? (
              <>
                {' '}
                ·{' '}
                {r.approvals.map((a, i) => (
                  <>
                    {i ? ', ' : ''}
                    <RespondedByName by={a.responded_by} /> <Time iso={a.at} />
                  </>
                ))}
              </>
            ) : (
              <span class="muted"> · no approvals yet</span>
            )}
          </li>
        ))}
      </ul>
      {approval.rejections?.length ? (
        <p>
          Rejected by{' '}
          {approval.rejections.map((a, i) => (
            <>
              {i ? ', ' : ''}
              <RespondedByName by={a.responded_by} /> <Time iso={a.at} />
            </>
          ))}
        </p>
      ) : null}
      {approval.expires_at && approval.status === 'requested' ? (
        <p class="muted">
          Expires <Time iso={approval.expires_at} /> (then the step fails approval_expired)
        </p>
      ) : null}
      {approval.decided_by_rule ? <p class="muted">Decided by rule {approval.decided_by_rule}.</p> : null}
      {approval.auto_approve_declined ? <p class="muted">Not approved by the policy: {approval.auto_approve_declined}</p> : null}
    </div>
  ) : null;

/** Where an approval answer returns to: the workflow's page, or the approvals page it was given on. */
export type ApprovalBack = 'workflow' | 'approvals';

/** Approve or reject a waiting step, with a note. */
export const ApprovalForm = ({
  workflowId,
  step,
  c,
  back = 'workflow',
  refusal,
}: {
  workflowId: string;
  step: Pick<StepView, 'step_id'>;
  c: DashContext;
  back?: ApprovalBack;
  /** why this session's token may not answer under the step's approval policy (CONTRACT 10.4) */
  refusal?: string | null;
}) =>
  !may(c, 'deploy') ? (
    <ScopeNote have={c.get('session')?.scope ?? 'read'} need="deploy" what="Approving or rejecting" />
  ) : refusal ? (
    <p class="muted scope-note approval-refusal">You may not answer this step: {refusal}.</p>
  ) : (
    <form method="post" action={`${c.get('paths').workflow(workflowId)}/steps/${encodeURIComponent(step.step_id)}/approval`} class="stack">
      <Csrf token={csrfOf(c)} />
      {back !== 'workflow' ? <input type="hidden" name="back" value={back} /> : null}
      <div>
        <label for={`note-${workflowId}-${step.step_id}`}>Note (optional)</label>
        <textarea id={`note-${workflowId}-${step.step_id}`} name="note" rows={2} maxlength={2000}></textarea>
      </div>
      <div class="actions">
        <button type="submit" name="response" value="approved">
          Approve
        </button>
        <button type="submit" name="response" value="rejected" class="danger">
          Reject
        </button>
      </div>
    </form>
  );

const StepCard = ({
  wf,
  step,
  c,
  components,
  configName,
  extra,
  refusals,
}: {
  wf: WorkflowView;
  step: StepView;
  c: DashContext;
  components: Map<string, string>;
  configName: ConfigName;
  extra?: Child;
  refusals?: Map<string, string>;
}) => (
  <li class="card" id={`step-${step.step_id}`}>
    <p>
      <strong>
        {step.idx}. {step.name}
      </strong>{' '}
      <StatusBadge status={step.status} /> <span class="muted">{step.execution_type}</span>
    </p>
    <p class="muted">
      Started <Time iso={step.started_at} /> · duration {duration(step.started_at, step.finished_at)}
      {step.target_type ? ` · ${step.target_type}` : ''}
    </p>
    {wf.owner_type === 'installs' && (step.component_id || step.sandbox_id) ? (
      <p>
        {step.component_id ? (
          <>
            <a href={c.get('paths').component(wf.owner_id, step.component_id)}>
              Component {components.get(step.component_id) ?? step.component_id}
            </a>{' '}
            <span class="muted id">{step.component_id}</span>
          </>
        ) : null}
        {step.component_id && step.sandbox_id ? ' · ' : null}
        {step.sandbox_id ? (
          <>
            <a href={c.get('paths').sandbox(wf.owner_id)}>Sandbox</a> <span class="muted id">{step.sandbox_id}</span>
          </>
        ) : null}
      </p>
    ) : null}
    {step.error ? <p class="step-error">Error: {step.error}</p> : null}
    {extra ?? null}
    {step.approval && step.approval.status !== 'requested' ? (
      <p>
        Approval: <StatusBadge status={step.approval.status} />
        {step.approval.responded_by ? (
          <span class="responded-by">
            {' '}
            by <RespondedByName by={step.approval.responded_by} />
          </span>
        ) : null}{' '}
        {step.approval.note ? `“${step.approval.note}”` : ''} <Time iso={step.approval.responded_at} />
      </p>
    ) : null}
    {step.approval ? <PolicyRules approval={step.approval} /> : null}
    {step.plan !== undefined && step.plan !== null ? <Plan plan={step.plan} c={c} configName={configName} /> : null}
    {step.status === 'awaiting_approval' ? (
      <ApprovalForm workflowId={wf.workflow_id} step={step} c={c} refusal={refusals?.get(step.step_id)} />
    ) : null}
  </li>
);

/** "provision for install rb-1" (page titles, headings, links). */
export const workflowTitle = (type: string, owner: WorkflowOwner) => `${type} for ${ownerText(owner)}`;

interface PageData {
  wf: WorkflowView;
  owner: WorkflowOwner;
  parent: ParentInfo | null;
  components: Map<string, string>;
  configName: ConfigName;
  c: DashContext;
  rollout: RolloutView | null;
  /** who changed this workflow (started it, cancelled it), from the audit log */
  changes: AuditView[];
  /** per step awaiting approval: why this session's token may not answer it (its policy) */
  refusals?: Map<string, string>;
}

const GROUP_BADGE: Record<string, string> = {
  succeeded: 's-succeeded',
  failed: 's-failed',
  'rollback failed': 's-failed',
  'rolled back': 's-cancelled',
  cancelled: 's-cancelled',
  'awaiting approval': 's-awaiting_approval',
  pending: 's-pending',
};

/** A rollout's steps: those of no group, then each install group's plan, deploy, bake and rollback. */
function RolloutSteps({
  wf,
  components,
  configName,
  c,
  rollout,
  refusals,
}: Omit<PageData, 'owner' | 'parent' | 'changes'> & { rollout: RolloutView }) {
  const steps = wf.steps;
  const byId = new Map(steps.map((s) => [s.step_id, s]));
  const card = (id: string) => {
    const s = byId.get(id);
    return s ? (
      <StepCard
        wf={wf}
        step={s}
        c={c}
        components={components}
        configName={configName}
        extra={stepExtra(c, rollout, id)}
        refusals={refusals}
      />
    ) : null;
  };
  return (
    <>
      {rollout.ungrouped.length ? (
        <>
          <h2>Steps</h2>
          <ol class="steps">{rollout.ungrouped.map(card)}</ol>
        </>
      ) : null}
      {rollout.groups.map((g, n) => {
        const status = groupStatus(rollout, g);
        return (
          <section class="group" aria-labelledby={`h-group-${n}`} id={`group-${n}`}>
            <h2 id={`h-group-${n}`}>
              Group {n + 1}: {g.name} <span class={`badge ${GROUP_BADGE[status] ?? 's-started'}`}>{status}</span>
            </h2>
            <p class="muted">{g.install_ids.length} install(s)</p>
            <ol class="steps">{g.step_ids.map(card)}</ol>
          </section>
        );
      })}
    </>
  );
}

function WorkflowPage({ wf, owner, parent, components, configName, c, rollout, changes, refusals }: PageData) {
  const started = changes.find((e) => e.action !== 'workflows.cancel');
  const cancelled = changes.find((e) => e.action === 'workflows.cancel');
  const paths = c.get('paths');
  const steps = wf.steps;
  return (
    <>
      <p class="muted">
        {owner.type === 'installs' ? (
          <>
            <a href={paths.installs}>Installs</a> / <a href={paths.install(owner.id)}>{owner.name ?? owner.id}</a> /
          </>
        ) : owner.app ? (
          <>
            <a href={paths.apps}>Apps</a> / <a href={paths.app(owner.app.app_id)}>{owner.app.name}</a> /
          </>
        ) : (
          <>{ownerText(owner)} /</>
        )}
      </p>
      <h1>
        {wf.type} <span class="h-sub">for {ownerText(owner)}</span> <StatusBadge status={wf.status} />
      </h1>
      <Section headingId="h-wf" title="Details">
        <dl class="facts">
          <CodeFact term="Type" value={wf.type} />
          <FactLine term="Owner">
            <Owner owner={owner} paths={paths} />
          </FactLine>
          <CodeFact term="Workflow ID" value={wf.workflow_id} />
          <TimeFact term="Created" iso={wf.created_at} />
          <TimeFact term="Started" iso={wf.started_at} />
          <TimeFact term="Finished" iso={wf.finished_at} />
          <FactLine term="Duration">{duration(wf.started_at, wf.finished_at)}</FactLine>
          {started ? (
            <FactLine term="Started by" id="started-by">
              <ActorName actor={started.actor} /> <span class="muted">({started.action})</span>
            </FactLine>
          ) : null}
          {cancelled ? (
            <FactLine term="Cancelled by" id="cancelled-by">
              <ActorName actor={cancelled.actor} />
            </FactLine>
          ) : null}
          {rollout ? <RolloutFacts data={rollout} /> : null}
          {wf.parent ? (
            <FactLine term="Launched by">
              {parent ? (
                <>
                  <a href={paths.workflow(parent.workflow_id)}>{workflowTitle(parent.type, parent.owner)}</a>, step{' '}
                  {parent.step_name ?? <code>{parent.step_id}</code>} <span class="muted id">{parent.workflow_id}</span>
                </>
              ) : (
                <>
                  workflow <code>{wf.parent.workflow_id}</code>, step <code>{wf.parent.step_id}</code>
                </>
              )}
            </FactLine>
          ) : null}
          {wf.error ? (
            <>
              <dt>Error</dt>
              <dd class="step-error">{wf.error}</dd>
            </>
          ) : null}
        </dl>
        {!isTerminal(wf.status) && !may(c, 'deploy') ? (
          <ScopeNote have={c.get('session')?.scope ?? 'read'} need="deploy" what="Cancelling" />
        ) : null}
        {!isTerminal(wf.status) && may(c, 'deploy') ? (
          <DangerForm action={`${paths.workflow(wf.workflow_id)}/cancel`} token={csrfOf(c)} layout="actions">
            Cancel workflow
          </DangerForm>
        ) : null}
      </Section>
      {rollout ? <TripCause c={c} data={rollout} /> : null}
      {rollout ? <RunPicture data={rollout} /> : null}
      {rollout ? (
        <RolloutSteps wf={wf} components={components} configName={configName} c={c} rollout={rollout} refusals={refusals} />
      ) : (
        <>
          <h2>Steps</h2>
          {steps.length ? (
            <ol class="steps">
              {steps.map((s) => (
                <StepCard wf={wf} step={s} c={c} components={components} configName={configName} refusals={refusals} />
              ))}
            </ol>
          ) : (
            <p class="muted">No steps.</p>
          )}
        </>
      )}
    </>
  );
}

export function registerWorkflows(r: Hono<DashEnv>, ctx: AppContext) {
  r.get('/:org/workflows/:wf', (c) => {
    const orgId = c.req.param('org');
    const wf = getWorkflowView(ctx, orgId, c.req.param('wf'));
    const owner = workflowOwner(ctx, orgId, wf.owner_type, wf.owner_id);
    const parent: ParentInfo | null = wf.parent ? workflowParent(ctx, orgId, wf.parent) : null;
    // components by id, removed ones too (a step of an old workflow may name one)
    const components = owner.type === 'installs' && owner.name ? componentNames(ctx, owner.id) : new Map<string, string>();
    const waiting = wf.steps.some((s) => s.status === 'awaiting_approval');
    // refresh while running, but not while a form waits for an answer (it would wipe the note)
    const refresh = !isTerminal(wf.status) && !waiting ? REFRESH_SECONDS : undefined;
    return render(c, {
      title: workflowTitle(wf.type, owner),
      refresh,
      children: (
        <WorkflowPage
          wf={wf}
          owner={owner}
          parent={parent}
          components={components}
          configName={configNamer(ctx, orgId)}
          c={c}
          rollout={rolloutView(ctx, orgId, wf.workflow_id)}
          changes={changesOf(ctx, orgId, wf.workflow_id)}
          refusals={refusalsOf(ctx, c, wf)}
        />
      ),
    });
  });

  r.post('/:org/workflows/:wf/steps/:step/approval', async (c) => {
    const orgId = c.req.param('org');
    const wfId = c.req.param('wf');
    getWorkflowView(ctx, orgId, wfId);
    const body = await c.req.parseBody();
    const back = body.back === 'approvals' ? c.get('paths').approvals : c.get('paths').workflow(wfId);
    const response = body.response;
    const note = typeof body.note === 'string' && body.note.trim() !== '' ? body.note.trim() : undefined;
    if (response !== 'approved' && response !== 'rejected') {
      flash(c, { kind: 'error', text: 'Choose Approve or Reject.' });
    } else {
      try {
        const s = c.get('session')!;
        const op = apiOp('respondToApproval', response === 'rejected' ? 'steps.reject' : 'steps.approve');
        const step = change(c, ctx, op, { id: c.req.param('step') }, () =>
          respondToApproval(ctx, orgId, wfId, c.req.param('step'), response, note, s.actor),
        );
        flash(c, { kind: 'ok', text: `${String(step.name)}: ${response}.` });
      } catch (err) {
        if (!(err instanceof ConflictError || err instanceof InvalidError || err instanceof ApprovalRefusedError)) throw err;
        flash(c, { kind: 'error', text: err.message });
      }
    }
    return c.redirect(back, 303);
  });

  r.post('/:org/workflows/:wf/cancel', (c) => {
    const orgId = c.req.param('org');
    const wfId = c.req.param('wf');
    getWorkflowView(ctx, orgId, wfId);
    try {
      change(c, ctx, apiOp('cancelWorkflow'), { id: wfId }, () => cancelWorkflow(ctx, orgId, wfId));
      flash(c, { kind: 'ok', text: 'Workflow cancelled.' });
    } catch (err) {
      if (!(err instanceof ConflictError || err instanceof InvalidError)) throw err;
      flash(c, { kind: 'error', text: err.message });
    }
    return c.redirect(c.get('paths').workflow(wfId), 303);
  });
}

/** Per step of `wf` awaiting approval: why the session's token may not answer it under its policy (CONTRACT 10.4). */
export function refusalsOf(ctx: AppContext, c: DashContext, wf: Pick<WorkflowView, 'workflow_id' | 'steps'>): Map<string, string> {
  const out = new Map<string, string>();
  const s = c.get('session');
  if (!s) return out;
  for (const step of wf.steps) {
    if (step.status !== 'awaiting_approval') continue;
    const why = approvalRefusal(ctx, wf.workflow_id, step.step_id, s.actor, s.scope);
    if (why) out.set(step.step_id, why);
  }
  return out;
}
