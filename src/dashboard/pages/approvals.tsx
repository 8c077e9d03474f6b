// Approvals: every step of the org awaiting an approval response (install workflows and app branch
// runs), each with its workflow, its plan and the approve / reject form of the workflow page.
import type { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import { listPendingApprovals, type PendingApproval } from '../../services/approvals.ts';
import { render } from '../render.tsx';
import type { DashContext, DashEnv } from '../session.ts';
import { duration, FactLine, Owner, StatusBadge, Time } from '../ui.tsx';
import { configNamer } from '../config-namer.ts';
import { ApprovalForm, Plan, PolicyRules, workflowTitle, type ConfigName } from './workflow.tsx';
import { approvalRefusal } from '../../services/approval-policies.ts';

const ApprovalCard = ({
  item,
  c,
  configName,
  refusal,
}: {
  item: PendingApproval;
  c: DashContext;
  configName: ConfigName;
  refusal: string | null;
}) => {
  const { workflow: wf } = item;
  const { step } = item;
  const paths = c.get('paths');
  const hid = `h-${wf.workflow_id}-${step.step_id}`;
  return (
    <section class="approval" id={`approval-${wf.workflow_id}-${step.step_id}`} aria-labelledby={hid}>
      <h2 id={hid}>{step.name}</h2>
      <dl class="facts">
        <FactLine term="Workflow">
          <a href={paths.workflow(wf.workflow_id)}>{workflowTitle(wf.type, wf.owner)}</a> <StatusBadge status={wf.status} />{' '}
          <span class="muted id">{wf.workflow_id}</span>
        </FactLine>
        <FactLine term="Owner">
          <Owner owner={wf.owner} paths={paths} />
        </FactLine>
        <FactLine term="Step">
          {step.idx}. {step.name} <StatusBadge status={step.status} /> <span class="muted id">{step.step_id}</span>
        </FactLine>
        <FactLine term="Waiting">
          since <Time iso={step.started_at} /> ({duration(step.started_at, null)})
        </FactLine>
      </dl>
      {step.approval ? <PolicyRules approval={step.approval} /> : null}
      {step.plan !== undefined && step.plan !== null ? (
        <Plan plan={step.plan} c={c} configName={configName} />
      ) : (
        <p class="muted">No plan.</p>
      )}
      <ApprovalForm workflowId={wf.workflow_id} step={step} c={c} back="approvals" refusal={refusal} />
    </section>
  );
};

export function registerApprovals(r: Hono<DashEnv>, ctx: AppContext) {
  r.get('/:org/approvals', (c) => {
    const orgId = c.req.param('org');
    const items = listPendingApprovals(ctx, orgId);
    const configName = configNamer(ctx, orgId);
    const s = c.get('session');
    const refusalOf = (item: PendingApproval) =>
      s ? approvalRefusal(ctx, item.workflow.workflow_id, item.step.step_id, s.actor, s.scope) : null;
    return render(c, {
      title: items.length ? `Approvals (${items.length})` : 'Approvals',
      current: 'approvals',
      children: (
        <>
          <h1>Approvals</h1>
          <p class="muted">Steps waiting for an approval response in this org: install workflows and app branch runs, oldest first.</p>
          {items.length ? (
            items.map((item) => <ApprovalCard item={item} c={c} configName={configName} refusal={refusalOf(item)} />)
          ) : (
            <section>
              <p>Nothing is waiting for approval.</p>
            </section>
          )}
        </>
      ),
    });
  });
}
