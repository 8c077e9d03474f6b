// One-time approval links (CONTRACT 10.4), for chat tools: an admin makes a link bound to one step
// awaiting approval and one token, good for `expires_in` (1m–7d); its page (the dashboard's, no
// sign-in) shows the plan and takes ONE response as that token, through the same answer as the API
// (the step's policy applies), audited like any response with the actor named "… (via link)". Only
// a SHA-256 hash of the link's secret is kept; the secret is in the URL answered once. A used or
// expired link is gone (410); the page shows nothing of the org beyond the step and its plan.
import { createHash, randomBytes } from 'node:crypto';
import type { AppContext } from '../context.ts';
import { ApprovalRefusedError, ConflictError, InvalidError, NotFoundError } from '../domain/errors.ts';
import { durationMs } from '../domain/duration.ts';
import { newId } from '../domain/ids.ts';
import { getApprovalLinkByHash, insertApprovalLink, useApprovalLink, type ApprovalLink } from '../../store/approval-policies.ts';
import { liveTokenById } from '../../store/orgs.ts';
import { findOrgWorkflow, getStep, getWorkflow, type StepRow, type WorkflowRow } from '../../store/workflows.ts';
import { respondToApproval } from './workflows.ts';

/** A link's secret as it appears in its URL. */
export const LINK_SECRET_RE = /^[A-Za-z0-9_-]{43}$/;

const hashOf = (secret: string) => createHash('sha256').update(secret).digest('hex');

/** POST /v1/workflows/{wf}/steps/{step}/approval-links: a link for a step awaiting approval, answering as `token_id`. */
export function createApprovalLink(
  ctx: AppContext,
  orgId: string,
  workflowId: string,
  stepId: string,
  body: { token_id: string; expires_in: string },
) {
  const wf = findOrgWorkflow(ctx.db, orgId, workflowId);
  if (!wf) throw new NotFoundError('workflow', workflowId);
  const step = getStep(ctx.db, wf.workflow_id, stepId);
  if (!step) throw new NotFoundError('step', stepId);
  if (step.status !== 'awaiting_approval') throw new ConflictError(`step ${step.name} is not awaiting approval (status ${step.status})`);
  const token = liveTokenById(ctx.db, body.token_id);
  if (!token || token.org_id !== orgId)
    throw new InvalidError('token_id names no live token of this org', [{ path: 'token_id', message: `no live token ${body.token_id}` }]);
  if (token.scope !== 'deploy' && token.scope !== 'admin')
    throw new InvalidError(
      `token ${token.name ?? token.token_id} has scope ${token.scope}; only deploy and admin tokens may answer approvals`,
      [{ path: 'token_id', message: `scope ${token.scope} may not answer approvals` }],
    );
  const secret = randomBytes(32).toString('base64url');
  const now = ctx.clock.now();
  const expiresAt = new Date(now + durationMs(body.expires_in)!).toISOString();
  insertApprovalLink(ctx.db, {
    link_id: newId('apl'),
    org_id: orgId,
    workflow_id: wf.workflow_id,
    step_id: step.step_id,
    token_id: token.token_id,
    secret_hash: hashOf(secret),
    expires_at: expiresAt,
    used_at: null,
    created_at: new Date(now).toISOString(),
  });
  return { url: `${ctx.urls.dashboard.replace(/\/+$/, '')}/approval-links/${secret}`, expires_at: expiresAt };
}

/** What a link's page may show, or why it is gone. */
export type LinkState =
  | { kind: 'unknown' }
  | { kind: 'gone'; why: string }
  | { kind: 'open'; link: ApprovalLink; wf: WorkflowRow; step: StepRow; tokenName: string | null };

export function linkState(ctx: AppContext, secret: string): LinkState {
  if (!LINK_SECRET_RE.test(secret)) return { kind: 'unknown' };
  const link = getApprovalLinkByHash(ctx.db, hashOf(secret));
  if (!link) return { kind: 'unknown' };
  if (link.used_at) return { kind: 'gone', why: 'This approval link has been used.' };
  if (Date.parse(link.expires_at) <= ctx.clock.now()) return { kind: 'gone', why: 'This approval link has expired.' };
  const wf = getWorkflow(ctx.db, link.workflow_id);
  const step = wf ? getStep(ctx.db, link.workflow_id, link.step_id) : undefined;
  if (!wf || !step || step.status !== 'awaiting_approval') return { kind: 'gone', why: 'The step of this link no longer awaits approval.' };
  const token = liveTokenById(ctx.db, link.token_id);
  if (!token) return { kind: 'gone', why: 'The token of this link has been revoked.' };
  return { kind: 'open', link, wf, step, tokenName: token.name };
}

/** What a link answer came to: the step answered (200), or why not (the page shows `message`). */
export type LinkAnswer = { status: 200; step: ReturnType<typeof respondToApproval> } | { status: 403 | 404 | 409 | 410; message: string };

/**
 * Take a link's one response (in one engine transaction with its audit row): refused, nothing
 * changed and the link still good, when it names another step or the step's policy refuses the
 * token (the refusal kept in the audit log, as any refused write); otherwise the link is used and
 * the answer recorded as the link's token, the audit row's actor named "<token> (via link)".
 */
export function answerByLink(
  ctx: AppContext,
  secret: string,
  stepId: string,
  response: 'approved' | 'rejected',
  note?: string,
): LinkAnswer {
  const first = linkState(ctx, secret);
  if (first.kind === 'unknown') return { status: 404, message: 'There is no such approval link.' };
  if (first.kind === 'gone') return { status: 410, message: first.why };
  const { link } = first;
  const entry = (status: number) => ({
    org_id: link.org_id,
    actor: { token_id: link.token_id, token_name: `${first.tokenName ?? link.token_id} (via link)` },
    action: response === 'rejected' ? 'steps.reject' : 'steps.approve',
    resource_type: 'step',
    resource_id: link.step_id,
    status,
  });
  try {
    return ctx.engine.change((t): LinkAnswer => {
      const state = linkState(ctx, secret);
      if (state.kind !== 'open') return { status: 410, message: state.kind === 'gone' ? state.why : 'This approval link is gone.' };
      if (stepId !== link.step_id) throw new ApprovalRefusedError('not_an_approver', `this link answers step ${state.step.name} only`);
      if (!useApprovalLink(ctx.db, link.link_id, t.now)) return { status: 410, message: 'This approval link has been used.' };
      const actor = { token_id: link.token_id, token_name: state.tokenName };
      const step = respondToApproval(ctx, link.org_id, link.workflow_id, link.step_id, response, note, actor, 'link');
      t.audit(entry(200));
      return { status: 200, step };
    });
  } catch (err) {
    const status = err instanceof ApprovalRefusedError ? 403 : err instanceof ConflictError ? 409 : null;
    if (status === null) throw err;
    ctx.engine.change((t) => t.audit(entry(status)));
    return { status, message: err instanceof Error ? err.message : String(err) };
  }
}
