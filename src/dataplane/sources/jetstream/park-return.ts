// Parked batches go back (issue 33). The pipeline parks an org's events while that org has work
// enough queued (src/dataplane/pipeline.ts): taken, held, no attempt yet, so that this plane starts
// them without a trip back to JetStream. Held, they are out of every other plane's reach, and a
// plane that started first would keep a backlog to itself while another plane has nothing to do.
// So a batch parked whole for PARK_RETURN_MS is given back (withdrawn from the pipeline, nak'd
// without delay): the oldest pull request waiting gets it, another plane's if one is idle, else
// this plane's own, which parks it again. The newest go first (the oldest are started next), at
// most PARK_RETURNS_PER_TICK each PARK_RETURN_TICK_MS (16 a second), so going round costs a plane
// alone little.
import type { JsMsg } from '@nats-io/jetstream';
import type { DeliveryPipeline } from '../../pipeline.ts';
import type { HeldBatch } from './progress.ts';

/** A batch parked whole this long is given back to JetStream (see the header), */
export const PARK_RETURN_MS = 500;
/** Parked batches are looked at this often, ... */
export const PARK_RETURN_TICK_MS = 250;
/** ... and at most this many go back each time. */
export const PARK_RETURNS_PER_TICK = 4;

/**
 * Withdraw from the pipeline the newest batches whose events have all been parked for
 * PARK_RETURN_MS, and hand each to `giveBack` (which lets it go and naks it). Only a batch with
 * nothing to record: none of its events settled or attempted before, and no copy of it held.
 */
export function returnParked(
  batches: ReadonlyMap<string, { batch: HeldBatch; copies: JsMsg[] }>,
  pipeline: Pick<DeliveryPipeline, 'parkedSince' | 'withdraw'>,
  now: number,
  giveBack: (b: HeldBatch) => void,
): void {
  const entries = [...batches.values()];
  let n = 0;
  for (let i = entries.length - 1; i >= 0 && n < PARK_RETURNS_PER_TICK; i--) {
    const { batch: b, copies } = entries[i];
    if (copies.length || b.released || b.finished.size || b.done.size || b.left !== b.ids.length || !b.ids.length) continue;
    const since = pipeline.parkedSince(b.ids[0]);
    if (since === undefined || now - since < PARK_RETURN_MS) continue;
    if (!pipeline.withdraw(b.ids)) continue;
    giveBack(b);
    n++;
  }
}
