// A data plane's pipeline starts the attempts an answer frees slots for at the end of the turn
// (startAfterTurn), after the source has recorded what settled in that turn (it schedules its
// record first): a receiver never sees a new attempt before the record of the one answered before
// it is handed to the bus, so a kill -9 repeats only attempts in flight (CONTRACT 6.6; the recovery
// ledger, test/system/recovery-ledger.test.ts, found the race under load when attempts started
// within the answer's callback). A deliverer that answers when the test says so.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.ts';
import type { EventRoute } from '../../src/domain/event-route.ts';
import { WebhookRegistry } from '../../src/dispatch/registry.ts';
import { heldPipeline } from '../helpers/pipeline.ts';
import { allEventsEntry } from '../helpers/webhooks.ts';

const route: EventRoute = {
  org: 'org_a',
  type: 'com.svc.test.turn',
  resource: 'installs',
  op: 'provision',
  event: 'lifecycle.started',
  install: null,
  component: null,
  action: null,
  rev: 0,
};
const turn = () => new Promise<void>((r) => setImmediate(r));

function rig(startAfterTurn: boolean) {
  const registry = new WebhookRegistry();
  registry.upsert(allEventsEntry('org_a', 'wh_a', 'http://a.test/hook'), 1);
  const log: string[] = [];
  const { pipeline, open } = heldPipeline({
    registry,
    clock: new ManualClock(),
    sent: (id) => void log.push(`sent ${id}`),
    startAfterTurn,
  });
  // each event's settlement is recorded at the end of the turn it settles in, as the JetStream source does
  for (let i = 0; i < 9; i++) {
    const id = `ev_${i}`;
    pipeline.accept({
      id,
      route,
      body: Buffer.from('{}'),
      done: [],
      settle: () => void setImmediate(() => log.push(`recorded ${id}`)),
      release: () => {},
    });
  }
  return { log, open };
}

describe('startAfterTurn', () => {
  it('the attempt an answer frees a slot for is sent after the answered event is recorded, not before', async () => {
    const r = rig(true);
    // 8 attempts (the webhook's bound) start as the events come; the 9th waits
    expect(r.log).toEqual([0, 1, 2, 3, 4, 5, 6, 7].map((i) => `sent ev_${i}`));
    r.log.length = 0;
    r.open.shift()!({ delivered: true, status: 200, duration_ms: 1 });
    expect(r.log).toEqual([]);
    await turn();
    await turn();
    expect(r.log).toEqual(['recorded ev_0', 'sent ev_8']);
  });

  it("without it (the unit tests' default), the next attempt is sent within the answer, before the record", async () => {
    const r = rig(false);
    r.log.length = 0;
    r.open.shift()!({ delivered: true, status: 200, duration_ms: 1 });
    await turn();
    expect(r.log).toEqual(['sent ev_8', 'recorded ev_0']);
  });
});
