// What SVC_EVENTS holds now, in events (each message is a batch of them, src/bus/hop.ts).
import type { JetStreamManager } from '@nats-io/jetstream';
import { decodeHopBatch } from '../../src/bus/hop.ts';
import { EVENTS_STREAM } from '../../src/bus/nats/jetstream.ts';

/** Events in the messages SVC_EVENTS holds (an event is mirrored as its batch is published, and stored a moment later). */
export async function eventsStored(jsm: JetStreamManager): Promise<number> {
  const info = await jsm.streams.info(EVENTS_STREAM);
  let events = 0;
  for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
    const m = await jsm.streams.getMessage(EVENTS_STREAM, { seq });
    if (m) events += decodeHopBatch(m.data)!.length;
  }
  return events;
}
