// Org settings: API tokens (a new token is shown once, on the response that created it; revoke).
import type { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import { change, may, refused, TOKENS_CREATE, TOKENS_REVOKE } from '../changes.ts';
import { InvalidError } from '../../domain/errors.ts';
import { createToken, listTokens, revokeToken } from '../../services/api-tokens.ts';
import { DEFAULT_SCOPE, isScope, SCOPES, type Scope } from '../../domain/scopes.ts';
import { csrfOf, render } from '../render.tsx';
import { flash, type DashContext, type DashEnv } from '../session.ts';
import { Csrf, ScopeNote, Section, StackTable, Time, LabeledSelect } from '../ui.tsx';

/** What each scope may do (CONTRACT 2), as the token form explains it. */
export const SCOPE_HINTS: Record<Scope, string> = {
  read: 'read: every page and GET, but not the audit log; changes nothing',
  webhooks: 'webhooks: read, plus creating, changing, pinging, recovering and deleting webhooks',
  deploy: 'deploy: read, plus apps, configs, branches, installs, runs, rollbacks, approvals, cancel and veto',
  admin: 'admin: everything, tokens and the audit log included',
};

function settingsPage(
  c: DashContext,
  ctx: AppContext,
  created?: { token_id: string; api_token: string; name: string | null; scope: Scope },
) {
  const orgId = c.req.param('org') as string;
  const paths = c.get('paths');
  const tokens = listTokens(ctx, orgId);
  return render(c, {
    title: 'Settings',
    current: 'settings',
    children: (
      <>
        <h1>Settings</h1>
        <Section headingId="h-new-token" title="New API token">
          {created ? (
            <div class="flash ok" role="status">
              <p>
                Token {created.name ? `“${created.name}” ` : ''}created with scope <strong>{created.scope}</strong>. Copy it now: it is
                shown only once.
              </p>
              <p>
                <label for="new-token">API token</label>
                <input type="text" id="new-token" class="secret-once" readonly value={created.api_token} />
              </p>
              <p class="hint">
                Use it with <code>Authorization: Bearer …</code> and <code>X-Svc-Org-ID: {orgId}</code>.
              </p>
            </div>
          ) : null}
          {!may(c, 'admin') ? <ScopeNote have={c.get('session')?.scope ?? 'read'} need="admin" what="Creating or revoking tokens" /> : null}
          {may(c, 'admin') ? (
            <form method="post" action={`${paths.settings}/tokens`} class="stack">
              <Csrf token={csrfOf(c)} />
              <div>
                <label for="token-name">Name (optional)</label>
                <input type="text" id="token-name" name="name" maxlength={100} placeholder="ci, cli, laptop…" />
              </div>
              <LabeledSelect
                id="token-scope"
                label="Scope"
                name="scope"
                aria-describedby="token-scope-hint"
                after={
                  <ul id="token-scope-hint" class="hint">
                    {SCOPES.map((sc) => (
                      <li>{SCOPE_HINTS[sc]}</li>
                    ))}
                  </ul>
                }
              >
                {SCOPES.map((sc) => (
                  <option value={sc} selected={sc === DEFAULT_SCOPE}>
                    {sc}
                  </option>
                ))}
              </LabeledSelect>
              <div>
                <button type="submit">Create token</button>
              </div>
            </form>
          ) : null}
        </Section>
        <Section headingId="h-tokens" title="API tokens">
          <StackTable
            columns={['Name', 'Token ID', 'Scope', 'Created', 'State', <span class="muted">Actions</span>]}
            items={tokens}
            row={(t) => (
              <tr>
                <td data-label="Name">{t.name ?? <span class="muted">—</span>}</td>
                <td data-label="Token ID">
                  <code>{t.token_id}</code>
                </td>
                <td data-label="Scope">{t.scope}</td>
                <td data-label="Created">
                  <Time iso={t.created_at} />
                </td>
                <td data-label="State">
                  {t.revoked_at ? (
                    <>
                      revoked <Time iso={t.revoked_at} />
                    </>
                  ) : (
                    'active'
                  )}
                </td>
                <td>
                  {t.revoked_at || !may(c, 'admin') ? null : (
                    <form method="post" action={`${paths.settings}/tokens/${encodeURIComponent(t.token_id)}/revoke`} class="inline">
                      <Csrf token={csrfOf(c)} />
                      <button type="submit" class="danger" aria-label={`Revoke token ${t.name ?? t.token_id}`}>
                        Revoke
                      </button>
                    </form>
                  )}
                </td>
              </tr>
            )}
          />
        </Section>
      </>
    ),
  });
}

export function registerSettings(r: Hono<DashEnv>, ctx: AppContext) {
  r.get('/:org/settings', (c) => settingsPage(c, ctx));

  r.post('/:org/settings/tokens', async (c) => {
    const body = await c.req.parseBody();
    const name = typeof body.name === 'string' && body.name.trim() !== '' ? body.name.trim().slice(0, 100) : null;
    const scope = body.scope === undefined ? DEFAULT_SCOPE : body.scope;
    if (!isScope(scope)) {
      refused(c, ctx, TOKENS_CREATE, 400);
      throw new InvalidError(`scope: one of ${SCOPES.join(', ')}`, [{ path: 'scope', message: `one of ${SCOPES.join(', ')}` }]);
    }
    const t = change(c, ctx, TOKENS_CREATE, { idOf: (x) => x.token_id, status: 201 }, () =>
      createToken(ctx, c.req.param('org'), name, scope),
    );
    // rendered directly (no redirect): the plaintext token never goes into a URL or cookie
    return settingsPage(c, ctx, { ...t, name });
  });

  r.post('/:org/settings/tokens/:token/revoke', (c) => {
    change(c, ctx, TOKENS_REVOKE, { id: c.req.param('token') }, () => revokeToken(ctx, c.req.param('org'), c.req.param('token')));
    flash(c, { kind: 'ok', text: `Token ${c.req.param('token')} revoked.` });
    return c.redirect(c.get('paths').settings, 303);
  });
}
