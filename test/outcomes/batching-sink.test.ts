// A data plane's outcome sink (src/outcomes/batching-sink.ts): outcomes go back in batches on a
// timer, but the end of an org's backlog (src/dataplane/pipeline.ts caughtUp) goes at once, since
// the control plane holds that org's facts while it thinks its deliveries queue. A manual clock:
// nothing here waits on time.
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { BatchingOutcomeSink } from '../../src/outcomes/batching-sink.ts';
import type { BacklogReport, OutcomeBatch } from '../../src/outcomes/outcome.ts';
import { ManualClock } from '../helpers/clock.ts';

function rig() {
  const clock = new ManualClock();
  const sent: OutcomeBatch[] = [];
  let report: BacklogReport = { backlogged: [], caughtUp: [] };
  const sink = new BatchingOutcomeSink(
    'w',
    async (b) => void sent.push(b),
    () => 0,
    clock,
    pino({ level: 'silent' }),
    () => {
      const r = report;
      report = { backlogged: [], caughtUp: [] };
      return r;
    },
  );
  return { clock, sent, sink, tell: (r: BacklogReport) => void (report = r) };
}

const outcome = {
  webhook_id: 'wh_1',
  org_id: 'org_a',
  event_id: 'ev_1',
  type: 't',
  ok: true,
  status: 200,
  error: null,
  duration_ms: 1,
  at: 0,
};

describe('BatchingOutcomeSink', () => {
  it('sends what is buffered on its timer, with the backlog report; nothing when nothing is buffered', async () => {
    const r = rig();
    r.tell({ backlogged: ['org_a'], caughtUp: [] });
    await r.sink.flush();
    expect(r.sent).toHaveLength(0);
    r.sink.record(outcome);
    await r.sink.flush();
    expect(r.sent).toHaveLength(1);
    expect(r.sent[0].outcomes).toHaveLength(1);
    expect(r.sent[0].backlogged).toEqual(['org_a']);
    expect(r.sent[0].caught_up).toBeUndefined();
    r.sink.close();
  });

  it('an org that caught up is told in a batch at once, outcomes or not', async () => {
    const r = rig();
    r.tell({ backlogged: [], caughtUp: ['org_a'] });
    r.sink.caughtUp();
    await r.sink.flush(); // waits for the send under way
    expect(r.sent).toHaveLength(1);
    expect(r.sent[0].outcomes).toEqual([]);
    expect(r.sent[0].caught_up).toEqual(['org_a']);
    // told once: the next flush with nothing buffered sends nothing
    await r.sink.flush();
    expect(r.sent).toHaveLength(1);
    r.sink.close();
  });
});
