// A one-time approval link's page (CONTRACT 10.4), for chat tools: no sign-in. It shows the step,
// the token it answers as and the plan, and takes one response (src/services/approval-links.ts).
// Nothing else of the org is shown (no navigation, no links into it, even to a signed-in browser). CSRF: a
// random value in a cookie (SameSite=Strict, this path only) that the form must repeat; the link's
// secret in the URL is itself unguessable and bound to its step. A used or expired link answers 410.
import type { Hono } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import type { AppContext } from '../../context.ts';
import { answerByLink, linkState, LINK_SECRET_RE } from '../../services/approval-links.ts';
import { randomToken } from '../../services/sessions.ts';
import { errorPage, notFoundPage, render } from '../render.tsx';
import { sameToken, type DashContext, type DashEnv } from '../session.ts';
import { Csrf, Diff, Time } from '../ui.tsx';
import { PolicyRules } from './workflow.tsx';

const LINK_CSRF_COOKIE = 'svc_link_csrf';

interface PlanShape {
  installs?: Array<{
    install_id: string;
    install_name?: string;
    old_app_config_id?: string | null;
    new_app_config_id?: string | null;
    diff?: Parameters<typeof Diff>[0]['diff'];
  }>;
}

const LinkPlan = ({ plan }: { plan: unknown }) => {
  const installs = (plan as PlanShape | null)?.installs ?? [];
  if (!installs.length) return <p class="muted">The plan names no installs.</p>;
  return (
    <ul class="plan">
      {installs.map((i) => (
        <li>
          <strong>{i.install_name ?? i.install_id}</strong>{' '}
          <span class="muted id">
            {i.old_app_config_id ?? 'none'} → {i.new_app_config_id ?? '?'}
          </span>
          {i.diff ? <Diff diff={i.diff} /> : null}
        </li>
      ))}
    </ul>
  );
};

/** The link's page path (its cookie's path too). */
const linkPath = (c: DashContext, secret: string) => `${c.get('prefix')}/approval-links/${secret}`;

export function registerApprovalLinks(r: Hono<DashEnv>, ctx: AppContext) {
  r.get('/approval-links/:secret', (c) => {
    // show nothing of a session this browser may have: the page is the link's alone
    c.set('session', undefined);
    const secret = c.req.param('secret');
    const state = LINK_SECRET_RE.test(secret) ? linkState(ctx, secret) : ({ kind: 'unknown' } as const);
    if (state.kind === 'unknown') return notFoundPage(c);
    if (state.kind === 'gone') return errorPage(c, 410, 'Approval link gone', state.why);
    const csrf = randomToken();
    setCookie(c, LINK_CSRF_COOKIE, csrf, {
      path: linkPath(c, secret),
      httpOnly: true,
      sameSite: 'Strict',
      secure: c.get('secure'),
      maxAge: 3600,
    });
    const { step, link } = state;
    return render(c, {
      title: `Approve ${step.name}`,
      children: (
        <>
          <h1>{step.name}</h1>
          <p>
            You answer as token <strong>{state.tokenName ?? link.token_id}</strong>. This link works once, until{' '}
            <Time iso={link.expires_at} />.
          </p>
          {step.approval ? <PolicyRules approval={step.approval as Parameters<typeof PolicyRules>[0]['approval']} /> : null}
          <h2>Plan</h2>
          <LinkPlan plan={step.plan} />
          <form method="post" action={linkPath(c, secret)} class="stack card">
            <Csrf token={csrf} />
            <input type="hidden" name="step_id" value={step.step_id} />
            <div>
              <label for="note">Note (optional)</label>
              <textarea id="note" name="note" rows={2} maxlength={2000}></textarea>
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
        </>
      ),
    });
  });

  r.post('/approval-links/:secret', async (c) => {
    c.set('session', undefined);
    const secret = c.req.param('secret');
    if (!LINK_SECRET_RE.test(secret)) return notFoundPage(c);
    const body = await c.req.parseBody();
    const form = typeof body.csrf === 'string' ? body.csrf : undefined;
    if (!sameToken(form, getCookie(c, LINK_CSRF_COOKIE)))
      return errorPage(c, 403, 'Forbidden', 'Missing or invalid CSRF token. Open the link again and answer from its page.');
    const response = body.response;
    if (response !== 'approved' && response !== 'rejected') return errorPage(c, 400, 'Request refused', 'Choose Approve or Reject.');
    const note = typeof body.note === 'string' && body.note.trim() !== '' ? body.note.trim().slice(0, 4000) : undefined;
    const stepId = typeof body.step_id === 'string' ? body.step_id : '';
    const r = answerByLink(ctx, secret, stepId, response, note);
    if (r.status === 404) return notFoundPage(c);
    if (r.status !== 200) return errorPage(c, r.status, r.status === 410 ? 'Approval link gone' : 'Answer refused', r.message);
    return render(c, {
      title: 'Answer recorded',
      children: (
        <>
          <h1>Answer recorded</h1>
          <p>
            {r.step.name}: {response}. The step is now {r.step.status.replace('_', ' ')}.
          </p>
          <p class="muted">This link cannot be used again.</p>
        </>
      ),
    });
  });
}
