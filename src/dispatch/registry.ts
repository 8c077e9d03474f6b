// The webhook registry of a data plane: one subscriber per webhook, indexed by org, so that an
// event costs only its own org's webhooks. Fed by the control plane (NATS KV watch, or directly in
// embedded mode); `revision` is the last replicated revision applied, which events name (Route.rev)
// so that a data plane never matches an event against a registry older than the event.
import type { Plain } from '../domain/event-filter.ts';
import type { EventRoute } from '../domain/event-route.ts';
import type { WebhookEntry } from '../domain/webhook-entry.ts';
import { FilterIndex, KeyValues } from './filter-index.ts';
import { ParsedEvent, WebhookSubscriber } from './subscriber.ts';

export class WebhookRegistry {
  private readonly byOrg = new Map<string, Map<string, WebhookSubscriber>>();
  /** each org's webhooks in order with their filters' keys, built when an event first needs it after a change */
  private readonly indexes = new Map<string, FilterIndex>();
  /** the version of each webhook's newest entry applied, deletions (tombstones) included */
  private readonly versions = new Map<string, number>();
  private rev = 0;
  private waiters: Array<{ rev: number; resolve: () => void }> = [];
  private removedListeners: Array<(orgId: string, webhookId: string) => void> = [];
  private disabledListeners: Array<(orgId: string, webhookId: string) => void> = [];

  /** Call fn each time a webhook is removed (deleted, or no longer deliverable): the pipeline drops its queue. */
  onRemoved(fn: (orgId: string, webhookId: string) => void): void {
    this.removedListeners.push(fn);
  }

  /** Call fn each time a webhook becomes disabled (CONTRACT 4.1): the pipeline drops its queue. */
  onDisabled(fn: (orgId: string, webhookId: string) => void): void {
    this.disabledListeners.push(fn);
  }

  get revision(): number {
    return this.rev;
  }

  /**
   * Add or replace a webhook at version rev. An entry older than the one held for that webhook
   * (an old value put back: a deleted webhook, a rotated-out secret) is refused: false.
   */
  upsert(entry: WebhookEntry, rev = 0): boolean {
    if (this.stale(entry.org_id, entry.webhook_id, rev)) return false;
    let org = this.byOrg.get(entry.org_id);
    if (!org) this.byOrg.set(entry.org_id, (org = new Map()));
    const was = org.get(entry.webhook_id);
    org.set(entry.webhook_id, new WebhookSubscriber(entry));
    this.indexes.delete(entry.org_id);
    this.advance(rev);
    if (entry.disabled && !was?.disabled) for (const fn of this.disabledListeners) fn(entry.org_id, entry.webhook_id);
    return true;
  }

  /** Remove a webhook at version rev (a tombstone); false when a newer entry is held (refused). */
  remove(orgId: string, webhookId: string, rev = 0): boolean {
    if (this.stale(orgId, webhookId, rev)) return false;
    const org = this.byOrg.get(orgId);
    const had = org?.delete(webhookId) ?? false;
    this.indexes.delete(orgId);
    if (org && org.size === 0) this.byOrg.delete(orgId);
    this.advance(rev);
    if (had) for (const fn of this.removedListeners) fn(orgId, webhookId);
    return true;
  }

  /** Whether version rev of this webhook is older than the one applied; else it becomes the one held. */
  private stale(orgId: string, webhookId: string, rev: number): boolean {
    const key = `${orgId}.${webhookId}`;
    if (rev < (this.versions.get(key) ?? 0)) return true;
    this.versions.set(key, rev);
    return false;
  }

  /** Note that the replicated registry has reached rev (also when an entry was refused). */
  advance(rev: number): void {
    if (rev <= this.rev) return;
    this.rev = rev;
    if (!this.waiters.length) return;
    const ready = this.waiters.filter((w) => w.rev <= rev);
    this.waiters = this.waiters.filter((w) => w.rev > rev);
    for (const w of ready) w.resolve();
  }

  /** Resolves once the registry has reached rev (at once when it has). */
  reached(rev: number): Promise<void> {
    if (rev <= this.rev) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ rev, resolve }));
  }

  get(orgId: string, webhookId: string): WebhookSubscriber | undefined {
    return this.byOrg.get(orgId)?.get(webhookId);
  }

  /**
   * The subscribers of the event's org that want it (each as `wants` decides). `body`: the
   * CloudEvent's bytes, parsed once (only when a webhook whose interests and match admit it has a
   * filter, CONTRACT 10.2). A filter whose indexed key the event does not hold refuses it unrun.
   */
  match(route: EventRoute, body?: Buffer | string): WebhookSubscriber[] {
    const org = this.byOrg.get(route.org);
    if (!org) return [];
    let index = this.indexes.get(route.org);
    if (!index) this.indexes.set(route.org, (index = new FilterIndex(org.values())));
    const event = body === undefined ? undefined : new ParsedEvent(body);
    const keys = event && index.paths.length > 0 ? new KeyValues(index.paths, () => event.event) : undefined;
    const out: WebhookSubscriber[] = [];
    for (const { sub, slot, values } of index.entries) {
      // a webhook created after the event was emitted is not one of its recipients, however late it is
      // dispatched (rev 0: an event that names no revision)
      if (route.rev !== 0 && (sub.entry.since_rev ?? 0) > route.rev) continue;
      if (!sub.admitsRoute(route)) continue;
      if (sub.filter !== null) {
        // a filtered webhook asked without the event refuses it (as `wants` does)
        if (event === undefined) continue;
        if (slot >= 0 && !values.has(keys!.at(slot) as Plain)) continue;
        if (!sub.filter.test(event.event)) continue;
      }
      out.push(sub);
    }
    return out;
  }

  size(): number {
    let n = 0;
    for (const org of this.byOrg.values()) n += org.size;
    return n;
  }
}
