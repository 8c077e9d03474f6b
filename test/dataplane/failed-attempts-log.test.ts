// Failed attempts in the log (CONTRACT §8, bounded logs): a webhook's first failed attempt is
// written in full (host only, never the path), its further failures are counted and summed up
// every 10 s, and nothing is written once it stops failing. The data plane's pipeline with a
// real deliverer and a receiver that always answers 500, on a ManualClock.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.ts';
import type { EventRoute } from '../../src/domain/event-route.ts';
import type { WebhookEntry } from '../../src/domain/webhook-entry.ts';
import { Deliverer } from '../../src/delivery/client.ts';
import type { WebhookRegistry } from '../../src/dispatch/registry.ts';
import { WebhookSubscriber } from '../../src/dispatch/subscriber.ts';
import { DeliveryPipeline, type InboundEvent } from '../../src/dataplane/pipeline.ts';
import type { DeliveryOutcome } from '../../src/outcomes/outcome.ts';
import { waitFor } from '../helpers/wait.ts';
import { startReceiver } from '../helpers/receiver.ts';

type Json = any;

describe('failed attempts in the log', () => {
  it("writes each failing webhook's first failure, then one count per webhook every 10 s, then nothing", async () => {
    const clock = new ManualClock();
    const lines: Array<{ obj: Json; msg: string }> = [];
    const logger = { warn: (obj: Json, msg: string) => void lines.push({ obj, msg }), info() {}, error() {}, debug() {} };
    const rx = await startReceiver();
    const subs = ['wh_1', 'wh_2'].map((id) => {
      rx.set(`${id}/secret-path`, { status: 500 });
      return new WebhookSubscriber({
        webhook_id: id,
        org_id: 'org_a',
        url: `${rx.hook(id)}/secret-path?token=x`,
        interests: null,
        match: null,
      } as unknown as WebhookEntry);
    });
    const registry = {
      revision: 0,
      reached: async () => {},
      match: () => subs,
      onRemoved: () => {},
      onDisabled: () => {},
    } as unknown as WebhookRegistry;
    const deliverer = new Deliverer({ timeoutMs: 5000, allowPrivateTargets: true, clock });
    const outcomes: DeliveryOutcome[] = [];
    const pipeline = new DeliveryPipeline({
      registry,
      deliverer,
      sign: () => ({}),
      outcomes: { record: (o: DeliveryOutcome) => void outcomes.push(o), flush: async () => {} },
      progress: null,
      clock,
      logger: logger as Json,
      concurrency: 16,
    });
    let settled = 0;
    const event = (i: number): InboundEvent => ({
      id: `evt_${i}`,
      route: { org: 'org_a', type: 'com.example.test', rev: 0 } as unknown as EventRoute,
      body: Buffer.from('{}'),
      done: [],
      settle: () => void settled++,
      release: () => {},
    });
    for (let i = 0; i < 50; i++) pipeline.accept(event(i));
    await waitFor(() => settled === 50, 10_000, 'the 50 events settled');
    expect(outcomes).toHaveLength(100);

    expect(lines.map((l) => l.msg)).toEqual(['webhook delivery failed', 'webhook delivery failed']);
    expect(lines.map((l) => l.obj.webhook_id).sort()).toEqual(['wh_1', 'wh_2']);
    expect(lines[0].obj).toMatchObject({
      org_id: 'org_a',
      outcome: 'failure',
      status: 500,
      host: new URL(rx.url).host,
      type: 'com.example.test',
    });
    expect(JSON.stringify(lines)).not.toContain('secret-path');

    clock.advance(10_000);
    expect(
      lines
        .slice(2)
        .map((l) => [l.obj.webhook_id, l.obj.repeated, l.msg])
        .sort(),
    ).toEqual([
      ['wh_1', 49, 'webhook delivery failed (49 more like this in the last 10 s)'],
      ['wh_2', 49, 'webhook delivery failed (49 more like this in the last 10 s)'],
    ]);
    clock.advance(60_000);
    expect(lines).toHaveLength(4);
    await pipeline.drain();
    await deliverer.close(0);
    await rx.close();
  });
});
