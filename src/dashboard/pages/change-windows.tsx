// An app's change windows on its page (CONTRACT 4.3 "Change windows"): the list, a delete button
// each and a create form; both shown to a session whose token may deploy (else a note), and
// checked again when posted (src/dashboard/changes.ts). The API's request schema and service.
import type { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import { apiOp, change, may, refused } from '../changes.ts';
import { InvalidError, LimitExceededError, NotFoundError, type ErrorDetail } from '../../domain/errors.ts';
import { RUN_KINDS, WEEKDAYS } from '../../domain/change-windows.ts';
import { createChangeWindowSchema } from '../../schemas/change-windows.ts';
import { issuesToDetails } from '../../http/validation.ts';
import { createChangeWindow, listAppChangeWindows, removeChangeWindow } from '../../services/change-windows.ts';
import { mustGetApp } from '../../services/catalog.ts';
import { csrfOf } from '../render.tsx';
import { flash, type DashContext, type DashEnv } from '../session.ts';
import { Csrf, ScopeNote, StackTable, Time, HintedField, DangerForm } from '../ui.tsx';

type Window = ReturnType<typeof listAppChangeWindows>[number];

const windowsPath = (c: DashContext, appId: string) => `${c.get('paths').app(appId)}/windows`;

const whom = (w: Window) =>
  [
    w.install_ids?.length ? `installs ${w.install_ids.join(', ')}` : '',
    w.selector
      ? `labelled ${Object.entries(w.selector.match_labels)
          .map(([k, v]) => `${k}=${v}`)
          .join(',')}`
      : '',
  ]
    .filter(Boolean)
    .join(' or ') || 'all installs';

/** The "Change windows" section of an app's page. */
export const ChangeWindows = ({ c, ctx, orgId, appId }: { c: DashContext; ctx: AppContext; orgId: string; appId: string }) => {
  const windows = listAppChangeWindows(ctx, orgId, appId);
  const canChange = may(c, 'deploy');
  return (
    <>
      <p class="hint">
        An install starts an update of a branch run (or a rollback, when a window names them) only when no deny window selecting it covers
        that moment and, if any allow window selects it, inside one of them; until then it waits in a <em>wait for change window</em> step.
      </p>
      <StackTable
        id="change-windows"
        columns={['Window', 'Kind', 'When', 'Installs', 'Holds', 'Created', '']}
        items={windows}
        empty="No change windows: installs start their updates whenever a run reaches them."
        row={(w) => (
          <tr>
            <td data-label="Window">
              {w.name} <span class="muted id">{w.window_id}</span>
            </td>
            <td data-label="Kind">{w.kind}</td>
            <td data-label="When">
              {w.days.join(', ')} {w.start} for {w.duration} ({w.time_zone})
            </td>
            <td data-label="Installs">{whom(w)}</td>
            <td data-label="Holds">{w.applies_to.map((k) => (k === 'branch_run' ? 'branch runs' : 'rollbacks')).join(', ')}</td>
            <td data-label="Created">
              <Time iso={w.created_at} />
            </td>
            <td>
              {canChange ? (
                <DangerForm action={`${windowsPath(c, appId)}/${encodeURIComponent(w.window_id)}/delete`} token={csrfOf(c)} layout="inline">
                  Delete<span class="sr-only"> window {w.name}</span>
                </DangerForm>
              ) : null}
            </td>
          </tr>
        )}
      />
      {canChange ? (
        <WindowForm c={c} appId={appId} />
      ) : (
        <ScopeNote have={c.get('session')?.scope ?? 'read'} need="deploy" what="Changing change windows" />
      )}
    </>
  );
};

const WindowForm = ({ c, appId }: { c: DashContext; appId: string }) => (
  <form method="post" action={windowsPath(c, appId)} class="stack" id="change-window-form">
    <Csrf token={csrfOf(c)} />
    <h3>New change window</h3>
    <div>
      <label for="cw-name">Name</label>
      <input type="text" id="cw-name" name="name" required maxlength={200} placeholder="enterprise weekend" />
    </div>
    <fieldset>
      <legend>Kind</legend>
      <label class="check">
        <input type="radio" name="kind" value="allow" checked /> allow: the installs it selects update only inside it
      </label>
      <label class="check">
        <input type="radio" name="kind" value="deny" /> deny: they never start an update inside it
      </label>
    </fieldset>
    <fieldset>
      <legend>Days</legend>
      {WEEKDAYS.map((d) => (
        <label class="check">
          <input type="checkbox" name="days" value={d} /> {d}
        </label>
      ))}
    </fieldset>
    <div>
      <label for="cw-start">Opens at (HH:MM, local)</label>
      <input type="text" id="cw-start" name="start" required placeholder="02:00" pattern="[0-2][0-9]:[0-5][0-9]" />
    </div>
    <HintedField id="cw-duration" label="Open for" hint="15m to 24h." type="text" name="duration" required placeholder="2h" />
    <HintedField
      id="cw-tz"
      label="Time zone"
      hint="An IANA name; daylight saving time is followed (a start the clocks skip opens right after the change)."
      type="text"
      name="time_zone"
      required
      placeholder="America/Los_Angeles"
    />
    <div>
      <label for="cw-selector">Only installs labelled (k=v,…)</label>
      <input type="text" id="cw-selector" name="selector" placeholder="tier=enterprise" />
    </div>
    <div>
      <label for="cw-installs">Only these installs (ids, comma separated)</label>
      <input type="text" id="cw-installs" name="install_ids" />
    </div>
    <fieldset>
      <legend>Holds</legend>
      {RUN_KINDS.map((k) => (
        <label class="check">
          <input type="checkbox" name="applies_to" value={k} checked={k === 'branch_run'} />{' '}
          {k === 'branch_run' ? 'branch runs' : 'fleet rollbacks'}
        </label>
      ))}
    </fieldset>
    <div class="actions">
      <button type="submit">Create window</button>
    </div>
  </form>
);

const str = (v: unknown) => (typeof v === 'string' ? v.trim() : '');
const strs = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : typeof v === 'string' ? [v] : []);

/** The API body from the form; errors name the API's fields. */
function windowBody(form: Record<string, unknown>): { body?: ReturnType<typeof createChangeWindowSchema.parse>; errors: ErrorDetail[] } {
  const raw: Record<string, unknown> = {
    name: str(form.name),
    kind: str(form.kind),
    days: strs(form.days),
    start: str(form.start),
    duration: str(form.duration),
    time_zone: str(form.time_zone),
  };
  const selector = str(form.selector);
  if (selector) {
    const labels: Record<string, string> = {};
    for (const part of selector.split(',')) {
      const eq = part.indexOf('=');
      if (eq <= 0) return { errors: [{ path: 'selector', message: `"${part.trim()}" is not key=value (e.g. tier=enterprise)` }] };
      labels[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
    }
    raw.selector = { match_labels: labels };
  }
  const ids = str(form.install_ids)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (ids.length) raw.install_ids = ids;
  const kinds = strs(form.applies_to);
  if (kinds.length) raw.applies_to = kinds;
  const parsed = createChangeWindowSchema.safeParse(raw);
  return parsed.success ? { body: parsed.data, errors: [] } : { errors: issuesToDetails(parsed.error.issues) };
}

export function registerChangeWindowActions(r: Hono<DashEnv>, ctx: AppContext) {
  r.post('/:org/apps/:app/windows', async (c) => {
    const orgId = c.req.param('org');
    const app = mustGetApp(ctx, orgId, c.req.param('app'));
    const { body, errors } = windowBody(await c.req.parseBody({ all: true }));
    const op = apiOp('createChangeWindow');
    const fail = (details: ErrorDetail[]) =>
      flash(c, { kind: 'error', text: `Change window refused: ${details.map((d) => `${d.path}: ${d.message}`).join('; ')}` });
    if (!body) {
      refused(c, ctx, op, 400, null);
      fail(errors);
    } else {
      try {
        const w = change(c, ctx, op, { idOf: (x) => x.window_id, status: 201 }, () => createChangeWindow(ctx, orgId, app.app_id, body));
        flash(c, { kind: 'ok', text: `Change window ${w.name} created.` });
      } catch (err) {
        if (err instanceof LimitExceededError) fail([{ path: '(body)', message: err.message }]);
        else if (!(err instanceof InvalidError)) throw err;
        else fail(err.details ?? [{ path: '', message: err.message }]);
      }
    }
    return c.redirect(`${c.get('paths').app(app.app_id)}#h-windows`, 303);
  });

  r.post('/:org/apps/:app/windows/:window/delete', (c) => {
    const orgId = c.req.param('org');
    const app = mustGetApp(ctx, orgId, c.req.param('app'));
    try {
      change(c, ctx, apiOp('deleteChangeWindow'), { id: c.req.param('window'), status: 204 }, () =>
        removeChangeWindow(ctx, orgId, app.app_id, c.req.param('window')),
      );
      flash(c, { kind: 'ok', text: 'Change window deleted: the installs it held are evaluated afresh.' });
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      flash(c, { kind: 'error', text: err.message });
    }
    return c.redirect(`${c.get('paths').app(app.app_id)}#h-windows`, 303);
  });
}
