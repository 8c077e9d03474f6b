// One workflow: steps with status, durations, errors and plans; approvals; cancel; refresh while running.
import type { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import { ConflictError, InvalidError } from '../../errors.ts';
import { cancelWorkflow, getWorkflowView, respondToApproval } from '../../services/workflows.ts';
import { csrfOf, render } from '../render.tsx';
import { flash, type DashContext, type DashEnv } from '../session.ts';
import { Csrf, Diff, duration, isTerminal, Json, Labels, Status, Time, type DiffShape } from '../ui.tsx';

type WorkflowView = ReturnType<typeof getWorkflowView>;
interface Step {
  step_id: string;
  name: string;
  idx: number;
  execution_type: string;
  target_type: string | null;
  component_id: string | null;
  sandbox_id: string | null;
  status: string;
  error: string | null;
  started_at: string | null;
  finished_at: string | null;
  plan?: unknown;
  approval?: { status: string; note?: string; responded_at?: string };
}
interface GroupPlan {
  install_group: string;
  installs: Array<{ install_id: string; install_name: string; labels: Record<string, string>; old_app_config_id: string | null; new_app_config_id: string; diff: DiffShape }>;
}

const REFRESH_SECONDS = 3;

const isGroupPlan = (p: unknown): p is GroupPlan => !!p && typeof p === 'object' && Array.isArray((p as GroupPlan).installs);

const Plan = ({ plan, c }: { plan: unknown; c: DashContext }) =>
  isGroupPlan(plan) ? (
    <div>
      <p>
        Plan for install group <strong>{plan.install_group}</strong>: {plan.installs.length} install(s)
      </p>
      <ul>
        {plan.installs.map((i) => (
          <li>
            <a href={c.get('paths').install(i.install_id)}>{i.install_name}</a> <Labels labels={i.labels} />: <code>{i.old_app_config_id ?? '—'}</code> →{' '}
            <code>{i.new_app_config_id}</code>
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

const ApprovalForm = ({ wf, step, c }: { wf: WorkflowView; step: Step; c: DashContext }) => (
  <form method="post" action={`${c.get('paths').workflow(wf.workflow_id)}/steps/${encodeURIComponent(step.step_id)}/approval`} class="stack">
    <Csrf token={csrfOf(c)} />
    <div>
      <label for={`note-${step.step_id}`}>Note (optional)</label>
      <textarea id={`note-${step.step_id}`} name="note" rows={2} maxlength={2000}></textarea>
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

const StepCard = ({ wf, step, c }: { wf: WorkflowView; step: Step; c: DashContext }) => (
  <li class="card" id={`step-${step.step_id}`}>
    <p>
      <strong>
        {step.idx}. {step.name}
      </strong>{' '}
      <Status status={step.status} /> <span class="muted">{step.execution_type}</span>
    </p>
    <p class="muted">
      Started <Time iso={step.started_at} /> · duration {duration(step.started_at, step.finished_at)}
      {step.target_type ? ` · ${step.target_type}` : ''}
    </p>
    {wf.owner_type === 'installs' && (step.component_id || step.sandbox_id) ? (
      <p>
        {step.component_id ? <a href={c.get('paths').component(wf.owner_id, step.component_id)}>Component {step.component_id}</a> : null}
        {step.component_id && step.sandbox_id ? ' · ' : null}
        {step.sandbox_id ? <a href={c.get('paths').sandbox(wf.owner_id)}>Sandbox {step.sandbox_id}</a> : null}
      </p>
    ) : null}
    {step.error ? <p class="step-error">Error: {step.error}</p> : null}
    {step.approval && step.approval.status !== 'requested' ? (
      <p>
        Approval: <Status status={step.approval.status} /> {step.approval.note ? `“${step.approval.note}”` : ''} <Time iso={step.approval.responded_at} />
      </p>
    ) : null}
    {step.plan !== undefined && step.plan !== null ? <Plan plan={step.plan} c={c} /> : null}
    {step.status === 'awaiting_approval' ? <ApprovalForm wf={wf} step={step} c={c} /> : null}
  </li>
);

function WorkflowPage({ wf, c }: { wf: WorkflowView; c: DashContext }) {
  const paths = c.get('paths');
  const steps = wf.steps as unknown as Step[];
  return (
    <>
      <p class="muted">
        {wf.owner_type === 'installs' ? (
          <>
            <a href={paths.install(wf.owner_id)}>Install {wf.owner_id}</a> /
          </>
        ) : (
          <>
            {wf.owner_type} {wf.owner_id} /
          </>
        )}
      </p>
      <h1>
        {wf.type} <Status status={wf.status} />
      </h1>
      <section aria-labelledby="h-wf">
        <h2 id="h-wf">Details</h2>
        <dl class="facts">
          <dt>Workflow ID</dt>
          <dd>
            <code>{wf.workflow_id}</code>
          </dd>
          <dt>Created</dt>
          <dd>
            <Time iso={wf.created_at} />
          </dd>
          <dt>Started</dt>
          <dd>
            <Time iso={wf.started_at} />
          </dd>
          <dt>Finished</dt>
          <dd>
            <Time iso={wf.finished_at} />
          </dd>
          <dt>Duration</dt>
          <dd>{duration(wf.started_at, wf.finished_at)}</dd>
          {wf.parent ? (
            <>
              <dt>Launched by</dt>
              <dd>
                <a href={paths.workflow(wf.parent.workflow_id)}>workflow {wf.parent.workflow_id}</a>, step <code>{wf.parent.step_id}</code>
              </dd>
            </>
          ) : null}
          {wf.error ? (
            <>
              <dt>Error</dt>
              <dd class="step-error">{wf.error}</dd>
            </>
          ) : null}
        </dl>
        {!isTerminal(wf.status) ? (
          <form method="post" action={`${paths.workflow(wf.workflow_id)}/cancel`} class="actions">
            <Csrf token={csrfOf(c)} />
            <button type="submit" class="danger">
              Cancel workflow
            </button>
          </form>
        ) : null}
      </section>
      <h2>Steps</h2>
      {steps.length ? (
        <ol class="steps">
          {steps.map((s) => (
            <StepCard wf={wf} step={s} c={c} />
          ))}
        </ol>
      ) : (
        <p class="muted">No steps.</p>
      )}
    </>
  );
}

export function registerWorkflows(r: Hono<DashEnv>, ctx: AppContext) {
  r.get('/:org/workflows/:wf', (c) => {
    const wf = getWorkflowView(ctx, c.req.param('org'), c.req.param('wf'));
    const waiting = (wf.steps as unknown as Step[]).some((s) => s.status === 'awaiting_approval');
    // refresh while running, but not while a form waits for an answer (it would wipe the note)
    const refresh = !isTerminal(wf.status) && !waiting ? REFRESH_SECONDS : undefined;
    return render(c, { title: `Workflow ${wf.type}`, refresh, children: <WorkflowPage wf={wf} c={c} /> });
  });

  r.post('/:org/workflows/:wf/steps/:step/approval', async (c) => {
    const orgId = c.req.param('org');
    const wfId = c.req.param('wf');
    getWorkflowView(ctx, orgId, wfId);
    const body = await c.req.parseBody();
    const response = body.response;
    const note = typeof body.note === 'string' && body.note.trim() !== '' ? body.note.trim() : undefined;
    if (response !== 'approved' && response !== 'rejected') {
      flash(c, { kind: 'error', text: 'Choose Approve or Reject.' });
    } else {
      try {
        const step = respondToApproval(ctx, orgId, wfId, c.req.param('step'), response, note);
        flash(c, { kind: 'ok', text: `${String(step.name)}: ${response}.` });
      } catch (err) {
        if (!(err instanceof ConflictError || err instanceof InvalidError)) throw err;
        flash(c, { kind: 'error', text: err.message });
      }
    }
    return c.redirect(c.get('paths').workflow(wfId), 303);
  });

  r.post('/:org/workflows/:wf/cancel', (c) => {
    const orgId = c.req.param('org');
    const wfId = c.req.param('wf');
    getWorkflowView(ctx, orgId, wfId);
    try {
      cancelWorkflow(ctx, orgId, wfId);
      flash(c, { kind: 'ok', text: 'Workflow cancelled.' });
    } catch (err) {
      if (!(err instanceof ConflictError || err instanceof InvalidError)) throw err;
      flash(c, { kind: 'error', text: err.message });
    }
    return c.redirect(c.get('paths').workflow(wfId), 303);
  });
}
