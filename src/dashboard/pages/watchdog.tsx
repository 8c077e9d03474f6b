// A webhook's delivery watchdog on its page (CONTRACT 4.1): its state and streak, "Disable" (with a
// note), "Enable" and "Enable and catch up" (a ping first; with a recovery of what it failed and
// missed), and its attempts per hour over the last 24 h by outcome, drawn on the server as SVG.
import type { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import { ConflictError } from '../../domain/errors.ts';
import { attemptsPerHour, type AttemptHour } from '../../services/history.ts';
import {
  disableWebhook,
  enableAfterPing,
  getWebhook,
  pingBeforeEnable,
  type EnablePing,
  type WebhookView,
} from '../../services/webhooks.ts';
import { apiOp, change, may, refused } from '../changes.ts';
import { toHttpError } from '../../http/http-error.ts';
import { csrfOf } from '../render.tsx';
import { flash, type DashContext, type DashEnv } from '../session.ts';
import { Csrf, FactLine, ScopeNote, Section, Time, TimeFact } from '../ui.tsx';

const W = 24 * 22;
const H = 140;
const TOP = 10;
const BOTTOM = 22;
const LEFT = 34;
/** room on the right for the last hour's label */
const RIGHT = 16;

/** A round upper bound for the axis: 1, 2, 5 × 10^n. */
function niceMax(n: number): number {
  if (n <= 4) return 4;
  const p = 10 ** Math.floor(Math.log10(n));
  for (const m of [1, 2, 5, 10]) if (m * p >= n) return m * p;
  return 10 * p;
}

const hourLabel = (iso: string) => `${iso.slice(11, 13)}:00`;

/**
 * Stacked bars, one per hour (oldest left): failures (red) on top of successes (green). Each bar
 * has a <title> with its counts, for a pointer and for screen readers; the whole has a summary.
 */
export const AttemptsChart = ({ hours }: { hours: AttemptHour[] }) => {
  const max = niceMax(Math.max(0, ...hours.map((h) => h.success + h.failure)));
  const plot = H - TOP - BOTTOM;
  const bar = (W - LEFT) / hours.length;
  const y = (n: number) => (plot * n) / max;
  const total = hours.reduce((a, h) => ({ success: a.success + h.success, failure: a.failure + h.failure }), { success: 0, failure: 0 });
  const summary = `Attempts per hour over the last 24 hours: ${total.success} succeeded, ${total.failure} failed.`;
  return (
    <figure class="chart">
      <svg
        id="attempts-chart"
        viewBox={`0 0 ${W + RIGHT} ${H}`}
        width="100%"
        role="img"
        aria-labelledby="attempts-chart-title"
        preserveAspectRatio="xMinYMin meet"
      >
        <title id="attempts-chart-title">{summary}</title>
        <line x1={LEFT} x2={W} y1={TOP + plot} y2={TOP + plot} class="axis" />
        <line x1={LEFT} x2={W} y1={TOP} y2={TOP} class="grid" />
        <text x={LEFT - 4} y={TOP + 4} class="tick" text-anchor="end">
          {max}
        </text>
        <text x={LEFT - 4} y={TOP + plot} class="tick" text-anchor="end">
          0
        </text>
        {hours.map((h, i) => {
          const x = LEFT + i * bar + 2;
          const ok = y(h.success);
          const bad = y(h.failure);
          return (
            <g class="hour" data-hour={h.start} data-success={h.success} data-failure={h.failure}>
              <title>{`${hourLabel(h.start)} UTC: ${h.success} succeeded, ${h.failure} failed`}</title>
              {/* a transparent full-height target, so that an empty hour has a tooltip too */}
              <rect x={x} y={TOP} width={bar - 4} height={plot} class="target" />
              {h.success ? <rect class="bar-success" x={x} y={TOP + plot - ok} width={bar - 4} height={ok} /> : null}
              {h.failure ? <rect class="bar-failure" x={x} y={TOP + plot - ok - bad} width={bar - 4} height={bad} /> : null}
              {i % 6 === 0 || i === hours.length - 1 ? (
                <text x={x + (bar - 4) / 2} y={H - 6} class="tick" text-anchor="middle">
                  {hourLabel(h.start)}
                </text>
              ) : null}
            </g>
          );
        })}
      </svg>
      <figcaption class="hint">
        <span class="key key-success" /> succeeded <span class="key key-failure" /> failed — per hour, UTC. {summary}
      </figcaption>
    </figure>
  );
};

const STATE_TEXT: Record<WebhookView['delivery_status']['state'], string> = {
  active: 'active',
  failing: 'failing',
  disabled: 'disabled',
};

/** The watchdog's state and what can be done about it. */
export const WatchdogSection = ({ c, ctx, w }: { c: DashContext; ctx: AppContext; w: WebhookView }) => {
  const s = w.delivery_status;
  const action = `${c.get('paths').webhook(w.webhook_id)}`;
  const hours = attemptsPerHour(ctx, c.req.param('org') ?? '', w.webhook_id);
  return (
    <Section headingId="h-watchdog" id="watchdog" title="Delivery watchdog">
      <dl class="facts" id="watchdog-state">
        <dt>State</dt>
        <dd>
          <span class={`badge w-${s.state}`} id="watchdog-badge">
            {STATE_TEXT[s.state]}
          </span>
        </dd>
        <FactLine term="Failure streak">
          {s.consecutive_failures ? (
            <>
              <strong id="watchdog-streak">{s.consecutive_failures}</strong> in a row since <Time iso={s.failing_since} />
            </>
          ) : (
            <span class="muted" id="watchdog-streak">
              none
            </span>
          )}
        </FactLine>
        {s.state === 'disabled' ? (
          <>
            <TimeFact term="Disabled" iso={s.disabled_at} />
            <FactLine term="Why">{s.disabled_reason}</FactLine>
          </>
        ) : null}
        {s.recover_since ? <TimeFact term="Missed since" iso={s.recover_since} /> : null}
        <FactLine term="Disables itself">
          {w.disable_after
            ? `after ${w.disable_after.failures} consecutive failures over at least ${w.disable_after.duration}`
            : 'never (disable_after not set)'}
        </FactLine>
      </dl>
      {!may(c, 'webhooks') ? (
        <ScopeNote
          have={c.get('session')?.scope ?? 'read'}
          need="webhooks"
          what={s.state === 'disabled' ? 'Enabling this webhook' : 'Disabling this webhook'}
        />
      ) : s.state === 'disabled' ? (
        <div class="actions">
          <form method="post" action={`${action}/enable`} class="inline">
            <Csrf token={csrfOf(c)} />
            <input type="hidden" name="recover" value="1" />
            <button type="submit">Enable and catch up</button>
          </form>
          <form method="post" action={`${action}/enable`} class="inline">
            <Csrf token={csrfOf(c)} />
            <button type="submit" class="secondary">
              Enable only
            </button>
          </form>
          <p class="hint">
            A test event is sent first; the webhook stays disabled unless it is delivered. Catching up attempts again, once each, every
            event it failed or missed since {s.recover_since ? <Time iso={s.recover_since} /> : 'it was disabled'}.
          </p>
        </div>
      ) : (
        <form method="post" action={`${action}/disable`} class="inline">
          <Csrf token={csrfOf(c)} />
          <label for="disable-note">Note (optional)</label>
          <input type="text" id="disable-note" name="note" maxlength={1000} placeholder="why: shown as the reason" />{' '}
          <button type="submit" class="danger">
            Disable
          </button>
        </form>
      )}
      <h3>Delivery outcomes per hour (last 24 h)</h3>
      <AttemptsChart hours={hours} />
    </Section>
  );
};

export function registerWatchdog(r: Hono<DashEnv>, ctx: AppContext) {
  r.post('/:org/webhooks/:id/disable', async (c) => {
    const orgId = c.req.param('org');
    const w = getWebhook(ctx, orgId, c.req.param('id'));
    const note = String((await c.req.parseBody()).note ?? '')
      .trim()
      .slice(0, 1000);
    change(c, ctx, apiOp('disableWebhook'), { id: w.webhook_id }, () => disableWebhook(ctx, orgId, w.webhook_id, note || undefined));
    flash(c, { kind: 'ok', text: `Webhook for ${w.webhook_url} disabled: no deliveries until it is enabled.` });
    return c.redirect(`${c.get('paths').webhook(w.webhook_id)}#watchdog`, 303);
  });

  r.post('/:org/webhooks/:id/enable', async (c) => {
    const orgId = c.req.param('org');
    const w = getWebhook(ctx, orgId, c.req.param('id'));
    const recover = (await c.req.parseBody()).recover === '1';
    const op = apiOp('enableWebhook');
    try {
      if (!may(c, op.scope)) change(c, ctx, op, { id: w.webhook_id }, () => undefined); // 403, kept, before any ping
      let ping: EnablePing;
      try {
        ping = await pingBeforeEnable(ctx, orgId, w.webhook_id, { recover });
      } catch (err) {
        refused(c, ctx, op, toHttpError(err).status, w.webhook_id);
        throw err;
      }
      const r = change(c, ctx, op, { id: w.webhook_id }, () => enableAfterPing(ctx, orgId, w.webhook_id, { recover }, ping));
      const text = r.recovery_id
        ? `Webhook for ${w.webhook_url} enabled; catching up (recovery ${r.recovery_id}).`
        : `Webhook for ${w.webhook_url} enabled.`;
      flash(c, { kind: 'ok', text });
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      flash(c, { kind: 'error', text: err.message });
    }
    return c.redirect(`${c.get('paths').webhook(w.webhook_id)}#watchdog`, 303);
  });
}
