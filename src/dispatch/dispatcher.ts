// Dispatch: events from the bus → the org's subscriber actors (a per-org index, so an event
// costs only its own org's webhooks). Labels of installs, components and actions come from the
// store through a cache that services invalidate when labels change.
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import { getWebhook, listAllWebhooks } from '../../store/webhooks.ts';
import { getActionById, getComponentById, getInstallById } from '../../store/installs.ts';
import type { Deliverer } from '../delivery/client.ts';
import type { CloudEvent } from '../events/cloudevent.ts';
import { routeFromSlugs } from './interests.ts';
import type { Entity, EventEntities } from './match.ts';
import { WebhookSubscriber } from './subscriber.ts';

export class Dispatcher {
  private readonly byOrg = new Map<string, Map<string, WebhookSubscriber>>();
  private readonly labels = new Map<string, Record<string, string> | null>();

  constructor(
    private readonly db: Db,
    private readonly deliverer: Deliverer,
    private readonly logger: Logger,
  ) {
    for (const w of listAllWebhooks(db)) this.refresh(w.org_id, w.webhook_id);
  }

  /** Spawn, update or stop the subscriber of one webhook, from the store. */
  refresh(orgId: string, webhookId: string): void {
    const row = getWebhook(this.db, orgId, webhookId);
    let org = this.byOrg.get(orgId);
    const existing = org?.get(webhookId);
    if (!row) {
      existing?.stop();
      org?.delete(webhookId);
      if (org && org.size === 0) this.byOrg.delete(orgId);
      return;
    }
    if (existing) {
      existing.update(row);
      return;
    }
    if (!org) this.byOrg.set(orgId, (org = new Map()));
    org.set(webhookId, new WebhookSubscriber(webhookId, row, this.deliverer, this.logger));
  }

  /** Forget cached labels of an install and its components and actions. */
  invalidateLabels(): void {
    this.labels.clear();
  }

  subscriberCount(): number {
    let n = 0;
    for (const org of this.byOrg.values()) n += org.size;
    return n;
  }

  /** One event from the bus: route it to the subscribers of its org (the exact bytes are delivered). */
  dispatch(data: Uint8Array): void {
    const body = Buffer.from(data); // one copy per event: deliveries outlive the bus message
    let ev: CloudEvent;
    try {
      ev = JSON.parse(body.toString('utf8')) as CloudEvent;
    } catch {
      this.logger.warn('event on the bus is not JSON; dropped');
      return;
    }
    const org = this.byOrg.get(ev.svcorgid);
    if (!org || org.size === 0) return;
    const route = routeFromSlugs(ev.interests ?? []);
    if (!route) return;
    let entities: EventEntities | undefined;
    const lazyEntities = () => (entities ??= this.entitiesOf(ev));
    for (const sub of org.values()) {
      if (sub.wants(route, lazyEntities)) sub.offer(body, ev.id);
    }
  }

  private entitiesOf(ev: CloudEvent): EventEntities {
    const d = ev.data as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    const installId: string | undefined =
      d.workflow?.owner_type === 'installs' ? d.workflow.owner_id : (d.install_id ?? undefined);
    const componentId: string | undefined = d.step?.component_id ?? d.drift?.component_id ?? (d.kind === 'component_health' ? d.component_id : undefined);
    const actionId: string | undefined = d.action?.id;
    return {
      install: installId ? this.entity('i', installId) : null,
      component: componentId ? this.entity('c', componentId) : null,
      action: actionId ? this.entity('a', actionId) : null,
    };
  }

  private entity(kind: 'i' | 'c' | 'a', id: string): Entity {
    const key = `${kind}:${id}`;
    if (!this.labels.has(key)) {
      const row = kind === 'i' ? getInstallById(this.db, id) : kind === 'c' ? getComponentById(this.db, id) : getActionById(this.db, id);
      this.labels.set(key, row ? row.labels : null);
    }
    return { id, labels: this.labels.get(key) ?? null };
  }
}
