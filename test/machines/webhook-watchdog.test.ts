// The delivery watchdog (CONTRACT 4.1 "Delivery watchdog", 6.2, 6.3): the pure machine, its events'
// envelope and route, and the `webhooks` resource of the interests model.
import { describe, expect, it } from 'vitest';
import {
  advanceWatchdog,
  failingThreshold,
  initialWatchdog,
  watchdogCares,
  type DisablePolicy,
  type Streak,
  type WatchContext,
  type WatchEmit,
  type WatchEvent,
  type WatchState,
} from '../../machines/webhook-watchdog.ts';
import { ManualClock } from '../helpers/clock.ts';
import { emit, toCloudEvent } from '../../src/events/cloudevent.ts';
import type { WebhookDeliveryFact } from '../../src/domain/facts.ts';
import { interestsAdmit } from '../../src/dispatch/interests.ts';
import { createWebhookBodySchema, interestsSchema } from '../../src/domain/subscription.ts';
import { WebhookRegistry } from '../../src/dispatch/registry.ts';
import type { WebhookEntry } from '../../src/domain/webhook-entry.ts';

const iso = (c: ManualClock) => new Date(c.now()).toISOString();

/** Drives one webhook's watchdog with outcomes as the status book would, on a manual clock. */
class Harness {
  state: WatchState;
  context: WatchContext;
  streak: Streak = {
    consecutive_failures: 0,
    failing_since: null,
    recover_since: null,
    failed_events: 0,
    last_error: null,
    last_status_code: null,
  };
  out: WatchEmit[] = [];
  /** how many outcomes reached the machine (passed the cheap test) */
  stepped = 0;

  constructor(
    readonly clock: ManualClock,
    readonly policy: DisablePolicy | null = null,
  ) {
    ({ state: this.state, context: this.context } = initialWatchdog());
  }

  private step(e: WatchEvent): void {
    if (!watchdogCares(this.state, this.context, e)) return;
    this.stepped++;
    const r = advanceWatchdog(this.state, this.context, e);
    this.state = r.state;
    this.context = r.context;
    this.out.push(...r.emitted);
  }

  fail(n = 1): void {
    for (let i = 0; i < n; i++) {
      const at = iso(this.clock);
      const s = this.streak;
      this.streak = {
        consecutive_failures: s.consecutive_failures + 1,
        failing_since: s.failing_since ?? at,
        recover_since: s.recover_since ?? at,
        failed_events: s.failed_events + 1,
        last_error: 'HTTP 500',
        last_status_code: 500,
      };
      this.step({ type: 'failure', streak: this.streak, at, policy: this.policy });
      this.clock.advance(1000);
    }
  }

  succeed(): void {
    const ended = this.streak;
    this.streak = {
      consecutive_failures: 0,
      failing_since: null,
      recover_since: null,
      failed_events: 0,
      last_error: null,
      last_status_code: null,
    };
    this.step({ type: 'success', streak: ended });
  }

  disable(note?: string): void {
    this.step({ type: 'disable', streak: this.streak, at: iso(this.clock), ...(note !== undefined ? { note } : {}) });
  }

  enable(): void {
    this.step({ type: 'enable', streak: this.streak, at: iso(this.clock) });
  }

  types(): string[] {
    return this.out.map((e) => `${e.type}@${e.streak.consecutive_failures}`);
  }
}

describe('watchdog machine: failing, recovered', () => {
  it('thresholds: 5, 20, 50, then every further 100', () => {
    expect([0, 4, 5, 19, 20, 49, 50, 149, 150, 151, 250].map(failingThreshold)).toEqual([5, 5, 20, 20, 50, 50, 150, 150, 250, 250, 350]);
  });

  it('a streak of 260 failures makes failing at 5, 20, 50, 150, 250 and nothing else; the machine sees only those outcomes', () => {
    const h = new Harness(new ManualClock());
    h.fail(4);
    expect(h.state).toBe('active');
    expect(h.out).toEqual([]);
    h.fail(1);
    expect(h.state).toBe('failing');
    h.fail(255);
    expect(h.types()).toEqual(['failing@5', 'failing@20', 'failing@50', 'failing@150', 'failing@250']);
    expect(h.stepped).toBe(5);
  });

  it('the first success after failing: recovered with the streak (failed events, recover_since); the next streak starts over', () => {
    const c = new ManualClock();
    const h = new Harness(c);
    const start = iso(c);
    h.fail(7);
    h.succeed();
    expect(h.state).toBe('active');
    const rec = h.out.at(-1)!;
    expect(rec.type).toBe('recovered');
    expect(rec.streak).toMatchObject({ consecutive_failures: 7, failed_events: 7, failing_since: start, recover_since: start });
    h.succeed();
    expect(h.out.length).toBe(2); // no second recovered
    h.fail(5);
    expect(h.types()).toEqual(['failing@5', 'recovered@7', 'failing@5']);
  });

  it('a success without a failing event before it says nothing', () => {
    const h = new Harness(new ManualClock());
    h.fail(4);
    h.succeed();
    expect(h.out).toEqual([]);
    expect(h.stepped).toBe(0);
  });

  it('a streak that skips a threshold (counts read back after a crash) still makes one failing, not one per threshold', () => {
    const h = new Harness(new ManualClock());
    const r = advanceWatchdog('active', initialWatchdog().context, {
      type: 'failure',
      streak: { ...h.streak, consecutive_failures: 23, failing_since: iso(h.clock) },
      at: iso(h.clock),
      policy: null,
    });
    expect(r.state).toBe('failing');
    expect(r.emitted.map((e) => e.type)).toEqual(['failing']);
    expect(r.context.notified).toBe(20);
  });
});

describe('watchdog machine: disable and enable', () => {
  it('disable_after {failures: 10, duration: 0s}: failing at 5, one disabled at 10 with the automatic reason, nothing after', () => {
    const c = new ManualClock();
    const h = new Harness(c, { failures: 10, duration_ms: 0 });
    const since = iso(c);
    h.fail(30);
    expect(h.types()).toEqual(['failing@5', 'disabled@10']);
    expect(h.state).toBe('disabled');
    expect(h.out[1]!.reason).toBe(`auto: 10 consecutive failures since ${since}`);
    expect(h.context).toMatchObject({ disabled_reason: `auto: 10 consecutive failures since ${since}`, recover_since: since });
    expect(h.context.disabled_at).toBe(new Date(Date.parse(since) + 9000).toISOString());
  });

  it('the duration holds the disable back until the streak is that old, on the clock the outcomes bring', () => {
    const c = new ManualClock();
    const h = new Harness(c, { failures: 10, duration_ms: 60_000 });
    h.fail(10); // 9 s old at the 10th
    expect(h.state).toBe('failing');
    c.advance(50_000); // the 11th failure is at 60 s
    h.fail(1);
    expect(h.state).toBe('disabled');
    expect(h.types()).toEqual(['failing@5', 'disabled@11']);
  });

  it('manual disable (note or "manual"), enable emits enabled only and clears; a success while disabled changes nothing', () => {
    const c = new ManualClock();
    const h = new Harness(c);
    h.disable('maintenance');
    expect(h.state).toBe('disabled');
    expect(h.out[0]).toMatchObject({ type: 'disabled', reason: 'maintenance' });
    expect(h.context.recover_since).toBe(iso(c)); // no streak: since the disable
    h.disable('again');
    h.succeed();
    h.fail(20);
    expect(h.out.length).toBe(1);
    h.enable();
    expect(h.state).toBe('active');
    expect(h.types()).toEqual(['disabled@0', 'enabled@20']);
    expect(h.context).toEqual({ notified: 0, disabled_at: null, disabled_reason: null, recover_since: null });
    const m = new Harness(c);
    m.disable();
    expect(m.out[0]!.reason).toBe('manual');
  });

  it('enable on an active webhook is no transition', () => {
    const r = advanceWatchdog('active', initialWatchdog().context, {
      type: 'enable',
      streak: new Harness(new ManualClock()).streak,
      at: '2026-01-01T00:00:00.000Z',
    });
    expect(r.changed).toBe(false);
    expect(r.emitted).toEqual([]);
  });
});

const fact = (
  transition: WebhookDeliveryFact['transition'],
  extra: Partial<WebhookDeliveryFact['delivery']> = {},
): WebhookDeliveryFact => ({
  kind: 'webhook_delivery',
  transition,
  org_id: 'org_a',
  time: '2026-01-01T00:00:10.000Z',
  webhook: { id: 'wh_1', url_host: 'hooks.example.com:8443' },
  delivery: { consecutive_failures: 5, failing_since: '2026-01-01T00:00:00.000Z', last_error: 'HTTP 500', last_status_code: 500, ...extra },
});

describe('com.svc.webhook.delivery.v1 (CONTRACT 6.2)', () => {
  it('type, subject, slugs, data; classification webhooks/delivery', () => {
    const ev = toCloudEvent(fact('recovered', { failed_events: 5, recover_since: '2025-12-31T23:59:59.000Z' }), {
      source: '//svc.example/ctl-api',
      baseUrl: 'https://svc.example',
      dashboardUrl: 'https://dash.example',
    })!;
    expect(ev.type).toBe('com.svc.webhook.delivery.v1');
    expect(ev.subject).toBe('org_a/webhook_delivery/wh_1/recovered');
    expect(ev.interests).toEqual(['resource:webhooks', 'op:webhooks.delivery', 'event:webhook.recovered']);
    expect(ev.svckind).toBe('webhook_delivery');
    expect(ev.data).toEqual({
      kind: 'webhook_delivery',
      transition: 'recovered',
      org_id: 'org_a',
      webhook: { id: 'wh_1', url_host: 'hooks.example.com:8443' },
      delivery: {
        consecutive_failures: 5,
        failing_since: '2026-01-01T00:00:00.000Z',
        last_error: 'HTTP 500',
        last_status_code: 500,
        failed_events: 5,
        recover_since: '2025-12-31T23:59:59.000Z',
      },
      links: { org: 'https://dash.example/org_a' },
    });
  });

  it('the route names the webhook it is about, which the registry never matches; org-wide only', () => {
    const none = { install: () => null, component: () => null, action: () => null };
    const ev = emit(fact('failing'), { source: '//s/ctl-api', baseUrl: 'https://s', dashboardUrl: 'https://d', labels: none, rev: 0 })!;
    expect(ev.route).toMatchObject({ resource: 'webhooks', op: 'delivery', event: 'webhook.failing', not_to: 'wh_1', install: null });
    const reg = new WebhookRegistry();
    const entry = (id: string, over: Partial<WebhookEntry> = {}): WebhookEntry => ({
      webhook_id: id,
      org_id: 'org_a',
      url: 'http://x/',
      secret: null,
      previous_secret: null,
      previous_secret_expires_at: null,
      interests: { all_events: true },
      match: null,
      ...over,
    });
    reg.upsert(entry('wh_1'));
    reg.upsert(entry('wh_2'));
    reg.upsert(entry('wh_3', { match: { installs: {} } }));
    reg.upsert(entry('wh_4', { interests: { resources: { webhooks: { delivery_recovered: true } } } }));
    expect(reg.match(ev.route).map((s) => s.id)).toEqual(['wh_2']);
  });
});

describe('interests: the webhooks resource (CONTRACT 4.1)', () => {
  const ev = (t: string) => ({ resource: 'webhooks', op: 'delivery', event: `webhook.${t}` });

  it('each flag admits its transitions; enabled follows delivery_disabled; ops alone admit nothing', () => {
    const cases: Array<[Record<string, boolean | string[]>, string[]]> = [
      [{ delivery_failing: true }, ['failing']],
      [{ delivery_recovered: true }, ['recovered']],
      [{ delivery_disabled: true }, ['disabled', 'enabled']],
      [{ ops: ['delivery'] }, []],
    ];
    for (const [cfg, admitted] of cases) {
      const interests = interestsSchema.parse({ resources: { webhooks: cfg } });
      for (const t of ['failing', 'recovered', 'disabled', 'enabled'])
        expect(interestsAdmit(interests, ev(t)), `${JSON.stringify(cfg)} ${t}`).toBe(admitted.includes(t));
    }
    expect(interestsAdmit({ all_events: true }, ev('failing'))).toBe(true);
    expect(interestsAdmit({ resources: { installs: { delivery_failing: false } } }, ev('failing'))).toBe(false);
  });

  it('validation: an unknown op of webhooks, a delivery flag elsewhere → invalid; false elsewhere is accepted', () => {
    const body = (interests: unknown) => createWebhookBodySchema.safeParse({ webhook_url: 'https://x.example/h', interests });
    expect(body({ resources: { webhooks: { ops: ['delivery'], delivery_failing: true } } }).success).toBe(true);
    const bad = body({ resources: { webhooks: { ops: ['deliver'] } } });
    expect(bad.success).toBe(false);
    expect(bad.error!.issues[0]!.path).toEqual(['interests', 'resources', 'webhooks', 'ops', 0]);
    expect(body({ resources: { installs: { delivery_disabled: true } } }).success).toBe(false);
    expect(body({ resources: { installs: { delivery_disabled: false } } }).success).toBe(true);
    expect(body({ resources: { webhooks: { component_health: true } } }).success).toBe(false);
    // no workflow, no approval: the approval flags do not apply to webhooks either
    expect(body({ resources: { webhooks: { approval_requests: true } } }).success).toBe(false);
    expect(body({ resources: { webhooks: { approval_responses: false, delivery_failing: true } } }).success).toBe(true);
  });
});
