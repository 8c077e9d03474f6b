// Webhooks: list with delivery status, create, a webhook's page (delivery status, test event with its
// result, the delivery watchdog (watchdog.tsx: state, disable, enable and catch up, attempts
// per hour), its attempts with "Resend" and "Recover since…" (webhook-history.tsx), edit: secret rotate
// with an overlap / keep / remove, interests, match), delete.
import type { Hono } from 'hono';
import type { AppContext } from '../../context.ts';
import { apiOp, change, may, refused } from '../changes.ts';
import { ConflictError, InvalidError, LimitExceededError, type ErrorDetail } from '../../domain/errors.ts';
import { FILTER_LIMITS } from '../../domain/event-filter.ts';
import { DRY_RUN_MAX_EVENTS, testWebhookFilter } from '../../services/filter-dry-run.ts';
import { LIMITS } from '../../domain/limits.ts';
import {
  createWebhook,
  deleteWebhook,
  getWebhook,
  listWebhooks,
  patchWebhook,
  pingWebhook,
  type WebhookView,
} from '../../services/webhooks.ts';
import { INTEREST_OUTCOMES, RESOURCE_NAMES, type ResourceName } from '../../domain/subscription.ts';
import { csrfOf, render } from '../render.tsx';
import { flash, flashAttempt, type DashContext, type DashEnv } from '../session.ts';
import {
  Csrf,
  DetailsSection,
  ScopeNote,
  Errors,
  FactLine,
  Section,
  StackTable,
  StatusBadge,
  Time,
  CodeFact,
  TimeFact,
  Heading,
  DangerForm,
  LabeledInput,
  LabeledSelect,
} from '../ui.tsx';
import { WebhookHistory, type RecoverFormState } from './webhook-history.tsx';
import { WatchdogSection } from './watchdog.tsx';
import { ExampleForm } from './event-types.tsx';
import {
  createBodyOf,
  describeInterests,
  describeMatch,
  flagsOf,
  formStateFromForm,
  formStateOf,
  OPS_OF,
  OVERLAP_CHOICES,
  patchBodyOf,
  type FormData,
  type ResourceState,
  type WebhookFormState,
} from '../webhook-form.ts';

const FLAG_LABELS: Record<string, string> = {
  approval_requests: 'Approval requests',
  approval_responses: 'Approval responses',
  drift_detected: 'Drift detected',
  component_health: 'Component health',
  install_degraded: 'Install degraded / recovered',
  delivery_failing: 'Delivery failing',
  delivery_recovered: 'Delivery recovered',
  delivery_disabled: 'Webhook disabled / enabled',
};

const ResourceFields = ({ r, s }: { r: ResourceName; s: ResourceState }) => {
  const id = (x: string) => `res_${r}_${x}`;
  return (
    <fieldset class="resource">
      <legend>{r.replace(/_/g, ' ')}</legend>
      <label class="check">
        <input type="checkbox" name={id('enabled')} id={id('enabled')} value="1" checked={s.enabled} /> Subscribe to {r.replace(/_/g, ' ')}
      </label>
      <div class="opts">
        <div class="check" role="group" aria-label={`${r} ops (none ticked = every op)`}>
          <span class="muted">Ops (none = all):</span>{' '}
          {OPS_OF[r].map((op) => (
            <label class="check">
              <input type="checkbox" name={id('ops')} value={op} checked={s.ops.includes(op)} /> {op}
            </label>
          ))}
        </div>
        <div>
          <label for={id('outcome')}>Lifecycle outcome</label>
          <select name={id('outcome')} id={id('outcome')}>
            {INTEREST_OUTCOMES.map((o) => (
              <option value={o} selected={s.outcome === o}>
                {o}
              </option>
            ))}
          </select>
        </div>
        <div class="check">
          {flagsOf(r).map((f) => (
            <label class="check">
              <input type="checkbox" name={id(f)} value="1" checked={!!s.flags[f]} /> {FLAG_LABELS[f]}
            </label>
          ))}
        </div>
      </div>
    </fieldset>
  );
};

interface FormProps {
  c: DashContext;
  state: WebhookFormState;
  webhook?: WebhookView;
  errors?: ErrorDetail[];
  /** a stored filter's dry run over the last 24 h (CONTRACT 10.2) */
  dryRun?: { examined: number; matched: number };
}

const WebhookForm = ({ c, state, webhook, errors, dryRun }: FormProps) => {
  const paths = c.get('paths');
  return (
    <form method="post" action={webhook ? paths.webhook(webhook.webhook_id) : paths.webhooks} class="stack">
      <Errors errors={errors} />
      <Csrf token={csrfOf(c)} />
      {webhook ? (
        <p>
          URL: <code>{webhook.webhook_url}</code>
          <span class="hint"> (to change the URL, delete this webhook and create a new one)</span>
        </p>
      ) : (
        <LabeledInput
          id="webhook_url"
          label="Webhook URL"
          type="url"
          name="webhook_url"
          value={state.webhook_url}
          required
          maxlength={2048}
          placeholder="https://example.com/hooks/svc"
        />
      )}
      {webhook ? (
        <fieldset>
          <legend>Signing secret ({webhook.has_secret ? 'set' : 'none'})</legend>
          <label class="check">
            <input type="radio" name="secret_action" value="keep" checked={state.secret_action === 'keep'} /> Keep{' '}
            {webhook.has_secret ? 'the current secret' : 'no secret'}
          </label>
          <label class="check">
            <input type="radio" name="secret_action" value="rotate" checked={state.secret_action === 'rotate'} />{' '}
            {webhook.has_secret ? 'Rotate to a new secret' : 'Set a secret'}
          </label>
          {webhook.has_secret ? (
            <label class="check">
              <input type="radio" name="secret_action" value="remove" checked={state.secret_action === 'remove'} /> Remove the secret
              (unsigned deliveries)
            </label>
          ) : null}
          <LabeledInput id="new_secret" label="New secret" type="password" name="new_secret" maxlength={512} autocomplete="new-password" />
          {webhook.has_secret ? (
            <LabeledSelect
              id="previous_secret_ttl"
              label="With a rotation, the old secret keeps signing for"
              name="previous_secret_ttl"
              aria-describedby="overlap-hint"
              after={
                <p class="hint" id="overlap-hint">
                  During the overlap, webhook-signature carries a signature with each secret (new first), so receivers can switch over;
                  X-Svc-Signature uses the new secret only.
                </p>
              }
            >
              {OVERLAP_CHOICES.map((o) => (
                <option value={String(o.seconds)} selected={state.previous_secret_ttl === String(o.seconds)}>
                  {o.label}
                </option>
              ))}
            </LabeledSelect>
          ) : null}
          {webhook.previous_secret_expires_at ? (
            <p class="hint">
              The previous secret still signs until <Time iso={webhook.previous_secret_expires_at} />.
            </p>
          ) : null}
        </fieldset>
      ) : (
        <div>
          <label for="secret">Signing secret (optional)</label>
          <input type="password" id="secret" name="secret" maxlength={512} autocomplete="new-password" />
          <p class="hint">Deliveries carry X-Svc-Signature, the HMAC-SHA256 of the body with this secret.</p>
        </div>
      )}
      <fieldset>
        <legend>Events</legend>
        <label class="check">
          <input type="checkbox" id="all_events" name="all_events" value="1" checked={state.all_events} /> Send all events
        </label>
        <p class="hint">Switch off to choose per resource; the choices start from the recommended baseline.</p>
        <div class="resources">
          {RESOURCE_NAMES.map((r) => (
            <ResourceFields r={r} s={state.resources[r]} />
          ))}
        </div>
      </fieldset>
      <div>
        <label for="match">Scope (match, JSON)</label>
        <textarea id="match" name="match" rows={5} spellcheck={false} aria-describedby="match-hint">
          {state.match_text}
        </textarea>
        <p class="hint" id="match-hint">
          Empty = org-wide. Example: {'{"installs": {"selector": {"match_labels": {"env": "prod"}}}}'}. Kinds: installs, components,
          actions, each with ids and/or selector. At most {LIMITS.matchIdsPerKind.toLocaleString('en')} ids per kind and{' '}
          {LIMITS.labelsPerEntity} labels per selector; the whole subscription at most {LIMITS.subscriptionBytes / 1024} KiB.
        </p>
      </div>
      <div>
        <label for="ordering">Ordering</label>
        <select id="ordering" name="ordering" aria-describedby="ordering-hint">
          <option value="none" selected={state.ordering === 'none'}>
            No order (fastest)
          </option>
          <option value="per_key" selected={state.ordering === 'per_key'}>
            In order per install (per_key)
          </option>
        </select>
        <p class="hint" id="ordering-hint">
          In order per install: the next event of an install (or of a workflow, runner or webhook without one) is sent only after the
          previous one's attempt has an outcome; installs go in parallel, and one that hangs holds only itself.
        </p>
        <label for="filter">Filter (JSON over the CloudEvent)</label>
        <textarea id="filter" name="filter" rows={5} spellcheck={false} aria-describedby="filter-hint">
          {state.filter_text}
        </textarea>
        <p class="hint" id="filter-hint">
          Empty = none. Sent only when interests, scope and filter all admit an event. Example:{' '}
          {'{"data": {"transition": "failed", "step": {"name": {"$startsWith": "deploy"}}}}'}. Operators: $eq $neq $gt $gte $lt $lte $in
          $nin $startsWith $endsWith $exist $contains $and $or $not; at most {FILTER_LIMITS.depth} levels, {FILTER_LIMITS.operators}{' '}
          operators, {FILTER_LIMITS.bytes / 1024} KiB. Paths are those of the event types these interests admit (GET /v1/event-types).
        </p>
        {dryRun ? (
          <p class="hint" id="filter-dry-run">
            Over the last 24 h this webhook would have received {dryRun.matched.toLocaleString('en')} of{' '}
            {dryRun.examined.toLocaleString('en')} events{dryRun.examined >= DRY_RUN_MAX_EVENTS ? ' (the first 10,000 examined)' : ''}.
          </p>
        ) : null}
      </div>
      <div class="actions">
        <button type="submit">{webhook ? 'Save webhook' : 'Create webhook'}</button>
        <a class="button secondary" href={paths.webhooks}>
          Cancel
        </a>
      </div>
    </form>
  );
};

/** Sends a ping; the result shows on the page it was sent from (`from`: the list or the webhook's page). */
const PingButton = ({ c, w, from }: { c: DashContext; w: WebhookView; from: 'list' | 'webhook' }) =>
  !may(c, 'webhooks') ? null : (
    <form method="post" action={`${c.get('paths').webhook(w.webhook_id)}/ping`} class="inline">
      <Csrf token={csrfOf(c)} />
      <input type="hidden" name="from" value={from} />
      <button type="submit" class="secondary" aria-label={from === 'list' ? `Send test event to ${w.webhook_url}` : undefined}>
        Send test event
      </button>
    </form>
  );

type DeliveryStatus = WebhookView['delivery_status'];

const Outcome = ({ s, short }: { s: DeliveryStatus; short?: boolean }) =>
  s.last_outcome ? <StatusBadge status={s.last_outcome} /> : <span class="muted">{short ? 'none yet' : 'no deliveries yet'}</span>;

/** Every field of a webhook's delivery status (CONTRACT 4.1). */
const DeliveryFacts = ({ s }: { s: DeliveryStatus }) => (
  <dl class="facts" id="delivery-status">
    <FactLine term="Last outcome">
      <Outcome s={s} />
    </FactLine>
    <TimeFact term="Last attempt" iso={s.last_attempt_at} />
    <FactLine term="Last HTTP status">{s.last_status_code ?? <span class="muted">—</span>}</FactLine>
    <dt>Last error</dt>
    <dd class={s.last_error ? 'step-error' : undefined}>{s.last_error ?? <span class="muted">—</span>}</dd>
    <FactLine term="Consecutive failures">{s.consecutive_failures}</FactLine>
    <FactLine term="Attempts">{s.attempts_total}</FactLine>
    <FactLine term="Failures">{s.failures_total}</FactLine>
  </dl>
);

/** The watchdog's state as a badge (CONTRACT 4.1): active, failing, disabled. */
const WatchState = ({ s }: { s: DeliveryStatus }) => <span class={`badge w-${s.state}`}>{s.state}</span>;

const WebhookList = ({ c, webhooks }: { c: DashContext; webhooks: WebhookView[] }) => (
  <StackTable
    columns={[
      'URL',
      'Events',
      'Scope',
      'Secret',
      'State',
      'Last outcome',
      'Last attempt',
      'Consecutive failures',
      'Attempts / failures',
      <span class="muted">Actions</span>,
    ]}
    items={webhooks}
    empty="No webhooks yet."
    row={(w) => (
      <tr id={`webhook-${w.webhook_id}`}>
        <td data-label="URL">
          <a href={c.get('paths').webhook(w.webhook_id)}>{w.webhook_url}</a>
        </td>
        <td data-label="Events">{describeInterests(w.interests)}</td>
        <td data-label="Scope">{describeMatch(w.match)}</td>
        <td data-label="Secret">{w.has_secret ? (w.previous_secret_expires_at ? 'yes (rotating)' : 'yes') : 'no'}</td>
        <td data-label="State">
          <WatchState s={w.delivery_status} />
        </td>
        <td data-label="Last outcome">
          <Outcome s={w.delivery_status} short />
          {w.delivery_status.last_status_code !== null ? <span class="muted"> HTTP {w.delivery_status.last_status_code}</span> : null}
        </td>
        <td data-label="Last attempt">
          <Time iso={w.delivery_status.last_attempt_at} />
        </td>
        <td data-label="Consecutive failures">{w.delivery_status.consecutive_failures}</td>
        <td data-label="Attempts / failures">
          {w.delivery_status.attempts_total} / {w.delivery_status.failures_total}
        </td>
        <td>
          <div class="actions">
            <a href={c.get('paths').webhook(w.webhook_id)} aria-label={`Edit ${w.webhook_url}`}>
              Edit
            </a>
            <PingButton c={c} w={w} from="list" />
          </div>
        </td>
      </tr>
    )}
  />
);

async function formOf(c: DashContext): Promise<FormData> {
  const raw = await c.req.parseBody({ all: true });
  const out: FormData = {};
  for (const [k, v] of Object.entries(raw)) {
    if (typeof v === 'string') out[k] = v;
    else if (Array.isArray(v)) out[k] = v.filter((x): x is string => typeof x === 'string');
  }
  return out;
}

/** A webhook's page (with `ctx`: its attempts and the recover form, as `recover` says), or the new webhook form. */
export function showForm(
  c: DashContext,
  props: Omit<FormProps, 'c'> & { ctx?: AppContext; recover?: RecoverFormState },
  status: 200 | 400 | 409 = 200,
) {
  const paths = c.get('paths');
  const w = props.webhook;
  return render(
    c,
    {
      title: w ? `Webhook ${w.webhook_url}` : 'New webhook',
      current: 'webhooks',
      children: (
        <>
          <p class="muted">
            <a href={paths.webhooks}>Webhooks</a> /
          </p>
          {w ? (
            <>
              <Heading title="Webhook" sub={w.webhook_url} />
              <DetailsSection headingId="h-details">
                <CodeFact term="URL" value={w.webhook_url} />
                <CodeFact term="Webhook ID" value={w.webhook_id} />
                <FactLine term="Signing secret">{w.has_secret ? 'set' : 'none (deliveries are unsigned)'}</FactLine>
                {w.previous_secret_expires_at ? (
                  <FactLine term="Previous secret" id="previous-secret">
                    still signs until <Time iso={w.previous_secret_expires_at} />
                  </FactLine>
                ) : null}
                <TimeFact term="Created" iso={w.created_at} />
                <TimeFact term="Updated" iso={w.updated_at} />
              </DetailsSection>
              <Section headingId="h-delivery" title="Delivery status">
                <DeliveryFacts s={w.delivery_status} />
                <p class="actions">
                  <PingButton c={c} w={w} from="webhook" />
                  <span class="hint">Sends one com.svc.webhook.ping.v1 event to this webhook alone and shows the result here.</span>
                </p>
                <ExampleForm c={c} w={w} />
              </Section>
              {props.ctx ? <WatchdogSection c={c} ctx={props.ctx} w={w} /> : null}
              {props.ctx ? <WebhookHistory c={c} ctx={props.ctx} w={w} recover={props.recover} /> : null}
              {may(c, 'webhooks') ? (
                <>
                  <Section headingId="h-edit" title="Edit">
                    <WebhookForm c={c} {...props} />
                  </Section>
                  <Section headingId="h-delete" title="Delete">
                    <DangerForm action={`${paths.webhook(w.webhook_id)}/delete`} token={csrfOf(c)} layout="inline">
                      Delete webhook
                    </DangerForm>
                  </Section>
                </>
              ) : (
                <ScopeNote have={c.get('session')?.scope ?? 'read'} need="webhooks" what="Changing, pinging or deleting this webhook" />
              )}
            </>
          ) : (
            <>
              <h1>New webhook</h1>
              <section aria-label="New webhook">
                {may(c, 'webhooks') ? (
                  <WebhookForm c={c} {...props} />
                ) : (
                  <ScopeNote have={c.get('session')?.scope ?? 'read'} need="webhooks" what="Creating a webhook" />
                )}
              </section>
            </>
          )}
        </>
      ),
    },
    status,
  );
}

const conflict = (err: ConflictError): ErrorDetail[] => [{ path: 'match', message: err.message }];
/** A filter whose path no admitted event type has (CONTRACT 10.2): the service's 400, each detail named. */
const invalidDetails = (err: InvalidError): ErrorDetail[] => err.details ?? [{ path: '(body)', message: err.message }];
/** A per-org limit (CONTRACT 8): about the org, not one field, so it names the whole form as the API names the body. */
const limitExceeded = (err: LimitExceededError): ErrorDetail[] => [{ path: '(body)', message: err.message }];

export function registerWebhooks(r: Hono<DashEnv>, ctx: AppContext) {
  r.get('/:org/webhooks', (c) =>
    render(c, {
      title: 'Webhooks',
      current: 'webhooks',
      children: (
        <>
          <h1>Webhooks</h1>
          {may(c, 'webhooks') ? (
            <p>
              <a class="button" href={c.get('paths').newWebhook}>
                New webhook
              </a>
            </p>
          ) : null}
          <section>
            <WebhookList c={c} webhooks={listWebhooks(ctx, c.req.param('org'))} />
          </section>
        </>
      ),
    }),
  );

  r.get('/:org/webhooks/new', (c) => showForm(c, { state: formStateOf({}) }));

  r.post('/:org/webhooks', async (c) => {
    const form = await formOf(c);
    const parsed = createBodyOf(form);
    if (!parsed.ok) {
      refused(c, ctx, apiOp('createWebhook'), 400);
      return showForm(c, { state: formStateFromForm(form), errors: parsed.errors }, 400);
    }
    try {
      const w = change(c, ctx, apiOp('createWebhook'), { idOf: (x) => x.webhook_id, status: 201 }, () =>
        createWebhook(ctx, c.req.param('org'), parsed.value),
      );
      flash(c, { kind: 'ok', text: `Webhook created for ${w.webhook_url}.` });
    } catch (err) {
      if (err instanceof ConflictError) return showForm(c, { state: formStateFromForm(form), errors: conflict(err) }, 409);
      if (err instanceof InvalidError) {
        refused(c, ctx, apiOp('createWebhook'), 400);
        return showForm(c, { state: formStateFromForm(form), errors: invalidDetails(err) }, 400);
      }
      if (err instanceof LimitExceededError) return showForm(c, { state: formStateFromForm(form), errors: limitExceeded(err) }, 409);
      throw err;
    }
    return c.redirect(c.get('paths').webhooks, 303);
  });

  r.get('/:org/webhooks/:id', (c) => {
    const w = getWebhook(ctx, c.req.param('org'), c.req.param('id'));
    // with a filter: what it would have received of the last day (the dry run of CONTRACT 10.2)
    const run = w.filter ? testWebhookFilter(ctx, c.req.param('org'), w.webhook_id, { since: '24h' }) : null;
    const dryRun = run ? { examined: run.examined, matched: run.matched } : undefined;
    return showForm(c, { state: formStateOf(w), webhook: w, ctx, dryRun });
  });

  r.post('/:org/webhooks/:id', async (c) => {
    const orgId = c.req.param('org');
    const w = getWebhook(ctx, orgId, c.req.param('id'));
    const form = await formOf(c);
    const parsed = patchBodyOf(form, w);
    const again = (errors: ErrorDetail[], status: 400 | 409) =>
      showForm(c, { state: formStateFromForm(form), webhook: w, errors, ctx }, status);
    if (!parsed.ok) {
      refused(c, ctx, apiOp('updateWebhook'), 400, w.webhook_id);
      return again(parsed.errors, 400);
    }
    try {
      change(c, ctx, apiOp('updateWebhook'), { id: w.webhook_id }, () => patchWebhook(ctx, orgId, w.webhook_id, parsed.value));
    } catch (err) {
      if (err instanceof ConflictError) return again(conflict(err), 409);
      if (err instanceof InvalidError) {
        refused(c, ctx, apiOp('updateWebhook'), 400, w.webhook_id);
        return again(invalidDetails(err), 400);
      }
      throw err;
    }
    flash(c, { kind: 'ok', text: `Webhook for ${w.webhook_url} saved.` });
    return c.redirect(c.get('paths').webhooks, 303);
  });

  r.post('/:org/webhooks/:id/delete', (c) => {
    const orgId = c.req.param('org');
    const w = getWebhook(ctx, orgId, c.req.param('id'));
    change(c, ctx, apiOp('deleteWebhook'), { id: w.webhook_id, status: 204 }, () => deleteWebhook(ctx, orgId, w.webhook_id));
    flash(c, { kind: 'ok', text: `Webhook for ${w.webhook_url} deleted.` });
    return c.redirect(c.get('paths').webhooks, 303);
  });

  r.post('/:org/webhooks/:id/ping', async (c) => {
    const orgId = c.req.param('org');
    const w = getWebhook(ctx, orgId, c.req.param('id'));
    const back = (await c.req.parseBody()).from === 'webhook' ? c.get('paths').webhook(w.webhook_id) : c.get('paths').webhooks;
    // recorded before the attempt (which changes nothing kept but its outcome), as the API does
    change(c, ctx, apiOp('pingWebhook'), { id: w.webhook_id }, () => getWebhook(ctx, orgId, w.webhook_id));
    const res = await pingWebhook(ctx, orgId, w.webhook_id);
    flashAttempt(c, res, {
      ok: (http) => `Test event delivered to ${w.webhook_url}: ${http} in ${res.duration_ms} ms.`,
      failed: (why) => `Test event to ${w.webhook_url} was not delivered: ${why}.`,
    });
    return c.redirect(back, 303);
  });
}
