// store/ingest-rejections.ts (CONTRACT 9 "Durable ingest"): the engine's late refusals, newest first
// by seq, paged down from a seq; each org keeps its newest 10,000 (exact, in the writing transaction,
// other orgs untouched); --event-retention prunes on received_at and counts the rows off.
import { describe, expect, it } from 'vitest';
import type { Db } from '../../store/db.ts';
import {
  listIngestRejections,
  MAX_REJECTIONS_PER_ORG,
  pruneIngestRejections,
  recordIngestRejections,
  type IngestRejectionInput,
} from '../../store/ingest-rejections.ts';
import { eventHistory } from '../../src/engine/history-pruner.ts';
import { tempStores } from '../helpers/store.ts';

const stores = tempStores('svc-rejections-');

const row = (org: string, n: number, receivedAt = 1_000 + n): IngestRejectionInput => ({
  org_id: org,
  subject: `svc.ingest.${org}.workflow.started`,
  received_at: receivedAt,
  error: `refused ${n}`,
  fact: JSON.stringify({ n }),
});

/** As the engine calls it: inside its own transaction. */
const record = (d: Db, rows: IngestRejectionInput[], max?: number) => d.transaction(() => recordIngestRejections(d, rows, max)).immediate();

const all = (d: Db, org: string, keptSinceMs = 0) =>
  listIngestRejections(d, { orgId: org, keptSinceMs, beforeSeq: 0, limit: 1_000_000 }).map((r) => r.error);
const counted = (d: Db, org: string) =>
  (d.prepare('SELECT n FROM ingest_rejection_counts WHERE org_id = ?').get(org) as { n: number } | undefined)?.n ?? 0;

describe('recordIngestRejections and listIngestRejections', () => {
  it('lists an org newest first (the order written), paged down from a seq, without other orgs', () => {
    const d = stores.open();
    record(d, [row('org_a', 1), row('org_b', 1), row('org_a', 2)]);
    record(d, [row('org_a', 3, 5)]); // received earlier than the others, written later: listed first
    expect(all(d, 'org_a')).toEqual(['refused 3', 'refused 2', 'refused 1']);
    expect(all(d, 'org_b')).toEqual(['refused 1']);
    const first = listIngestRejections(d, { orgId: 'org_a', keptSinceMs: 0, beforeSeq: 0, limit: 2 });
    expect(first.map((r) => r.error)).toEqual(['refused 3', 'refused 2']);
    const next = listIngestRejections(d, { orgId: 'org_a', keptSinceMs: 0, beforeSeq: first[1].seq, limit: 2 });
    expect(next.map((r) => [r.error, r.subject, r.received_at, r.fact])).toEqual([
      ['refused 1', 'svc.ingest.org_a.workflow.started', 1001, '{"n":1}'],
    ]);
  });

  it('opens no transaction of its own: what it wrote goes when the engine rolls its transaction back', () => {
    const d = stores.open();
    expect(() =>
      d.transaction(() => {
        recordIngestRejections(d, [row('org_a', 1)]);
        throw new Error('the fact is not applied after all');
      })(),
    ).toThrow('not applied');
    expect(all(d, 'org_a')).toEqual([]);
    expect(counted(d, 'org_a')).toBe(0);
  });

  it('does not list rows received before the kept-since bound', () => {
    const d = stores.open();
    record(d, [row('org_a', 1, 100), row('org_a', 2, 200)]);
    expect(all(d, 'org_a', 150)).toEqual(['refused 2']);
  });

  it(`keeps each org's newest ${MAX_REJECTIONS_PER_ORG} by default, and never touches another org's`, () => {
    const d = stores.open();
    const many = Array.from({ length: MAX_REJECTIONS_PER_ORG + 5 }, (_, i) => row('org_a', i));
    record(d, [row('org_b', 0), ...many]);
    const left = all(d, 'org_a');
    expect(left.length).toBe(MAX_REJECTIONS_PER_ORG);
    expect(left[0]).toBe(`refused ${MAX_REJECTIONS_PER_ORG + 4}`);
    expect(left.at(-1)).toBe('refused 5');
    expect(counted(d, 'org_a')).toBe(MAX_REJECTIONS_PER_ORG);
    expect(all(d, 'org_b')).toEqual(['refused 0']);
  });

  it('drops the oldest as new ones come, one batch after another (a smaller cap)', () => {
    const d = stores.open();
    for (let i = 0; i < 7; i++) record(d, [row('org_a', i)], 3);
    record(d, [row('org_b', 0), row('org_b', 1)], 3);
    expect(all(d, 'org_a')).toEqual(['refused 6', 'refused 5', 'refused 4']);
    record(d, [row('org_a', 7), row('org_a', 8)], 3);
    expect(all(d, 'org_a')).toEqual(['refused 8', 'refused 7', 'refused 6']);
    expect(counted(d, 'org_a')).toBe(3);
    expect(all(d, 'org_b')).toEqual(['refused 1', 'refused 0']);
  });
});

describe('pruneIngestRejections', () => {
  it('deletes the rows received before the cut-off, of every org, and counts them off', () => {
    const d = stores.open();
    record(d, [row('org_a', 1, 100), row('org_b', 1, 100), row('org_a', 2, 300), row('org_a', 3, 200)]);
    expect(pruneIngestRejections(d, 250)).toBe(3);
    expect(all(d, 'org_a')).toEqual(['refused 2']);
    expect(all(d, 'org_b')).toEqual([]);
    expect(counted(d, 'org_a')).toBe(1);
    expect(counted(d, 'org_b')).toBe(0);
    expect(pruneIngestRejections(d, 250)).toBe(0);
    // the cap counts from what is left
    record(d, [row('org_a', 4), row('org_a', 5)], 2);
    expect(all(d, 'org_a')).toEqual(['refused 5', 'refused 4']);
  });

  it('runs with the event history prune (--event-retention, src/engine/history-pruner.ts)', () => {
    const d = stores.open();
    record(d, [row('org_a', 1, 100), row('org_a', 2, 300)]);
    expect(eventHistory().prune(d, 200)).toBe(1);
    expect(all(d, 'org_a')).toEqual(['refused 2']);
  });
});
