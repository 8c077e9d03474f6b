// src/metrics.ts: the Prometheus registry of one svc (CONTRACT 6.5). Counting deliveries through the
// Deliverer and the status book: test/delivery/delivery.test.ts.
import { describe, expect, it } from 'vitest';
import { createMetrics, renderMetrics, type Metrics } from '../src/metrics.ts';

/** The sum of a metric's samples whose labels include `labels` (undefined: no such sample). */
async function counter(m: Metrics, name: string, labels: Record<string, string> = {}) {
  const { body } = await renderMetrics(m);
  let sum = 0;
  let found = false;
  for (const line of body.split('\n')) {
    const mm = /^([a-z_]+)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!mm || mm[1] !== name) continue;
    const ls = Object.fromEntries([...(mm[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => ls[k] === v)) {
      sum += Number(mm[3]);
      found = true;
    }
  }
  return found ? sum : undefined;
}

describe('metrics registry', () => {
  it('pre-initialises the ingest and delivery series and keeps registries separate', async () => {
    const a = createMetrics();
    const b = createMetrics();
    for (const result of ['accepted', 'duplicate', 'ignored', 'invalid'])
      expect(await counter(a, 'svc_ingest_messages_total', { result })).toBe(0);
    expect(await counter(a, 'svc_deliveries_total', { outcome: 'success' })).toBe(0);
    expect(await counter(a, 'svc_delivery_duration_seconds_bucket', { le: '0.001' })).toBe(0);
    expect(await counter(a, 'svc_delivery_duration_seconds_bucket', { le: '+Inf' })).toBe(0);
    a.eventsEmitted.inc({ type: 'com.svc.workflow.lifecycle.v1' });
    a.ingestMessages.inc({ result: 'accepted' });
    expect(await counter(a, 'svc_events_emitted_total', { type: 'com.svc.workflow.lifecycle.v1' })).toBe(1);
    expect(await counter(a, 'svc_ingest_messages_total', { result: 'accepted' })).toBe(1);
    expect(await counter(b, 'svc_events_emitted_total')).toBeUndefined();
    const { contentType, body } = await renderMetrics(a);
    expect(contentType).toMatch(/^text\/plain/);
    expect(body).toContain('# TYPE svc_delivery_duration_seconds histogram');
  });
});
