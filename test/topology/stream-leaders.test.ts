// The leader watch (src/topology/stream-leaders.ts) and what waits on a leader: a server's
// leader-elected advisory makes the watch look again at once (not at its next check, which the
// ManualClock never reaches here) and tells onLeader which target it names; the publisher gives up
// on acknowledgements that a leaderless stream will never send, so that its caller publishes again.
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JetStreamPublisher } from '../../src/bus/nats/jetstream-publisher.ts';
import { leaderElectedSubject, watchStreamLeaders, type LeaderTarget } from '../../src/topology/stream-leaders.ts';
import { Readiness } from '../../src/readiness.ts';
import { ManualClock } from '../helpers/clock.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { waitFor } from '../helpers/wait.ts';

describe.skipIf(findNatsServer() === null)('stream leaders', () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    jsm = await jetstreamManager(nc, { timeout: 2000 });
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  it('names the advisory subjects the server publishes for a stream and a consumer', () => {
    expect(leaderElectedSubject({ stream: 'SVC_EVENTS' })).toBe('$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.SVC_EVENTS');
    expect(leaderElectedSubject({ stream: 'SVC_EVENTS', consumer: 'svc-dispatch' })).toBe(
      '$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED.SVC_EVENTS.svc-dispatch',
    );
  });

  it('looks again at once when a leader-elected advisory names a target, and tells onLeader', async () => {
    const clock = new ManualClock();
    const readiness = new Readiness();
    const heard: LeaderTarget[] = [];
    const stream = 'LEADERS_A';
    const watch = watchStreamLeaders({
      jsm,
      nc,
      targets: [{ stream }],
      readiness,
      clock,
      intervalMs: 60_000,
      onLeader: (t) => heard.push(t),
    });
    try {
      // the stream does not exist yet: not ready, naming it
      await waitFor(() => !readiness.isReady(), 5000, 'not ready while the stream is missing');
      expect(readiness.state().reasons.join()).toContain(`stream ${stream}`);
      await jsm.streams.add({ name: stream, subjects: ['leaders.a'] });
      // no check is due (the clock does not move): only the advisory can make it ready now
      await nc.flush();
      expect(readiness.isReady()).toBe(false);
      nc.publish(leaderElectedSubject({ stream }), '{}');
      // another stream's advisory is not one of the targets
      nc.publish(leaderElectedSubject({ stream: 'OTHER' }), '{}');
      await waitFor(() => readiness.isReady(), 5000, 'ready after the advisory');
      expect(heard).toEqual([{ stream }]);
    } finally {
      watch.stop();
    }
  });

  it('abandons the acknowledgements it waits for: each publish rejects at once, and a later one is answered', async () => {
    await jsm.streams.add({ name: 'LEADERS_B', subjects: ['leaders.b'] });
    // a subscriber that swallows what is published on the subject stands in for a stream without a
    // leader: nobody answers (the server would drop it the same way)
    const swallow = nc.subscribe('leaders.swallowed');
    const publisher = new JetStreamPublisher(nc, `_INBOX_leaders_${Date.now()}`);
    try {
      const lost = publisher.publish('leaders.swallowed', 'x', 'id-1', 'seal');
      const outcome = lost.then(
        () => 'stored',
        (err: Error) => err.message,
      );
      await nc.flush();
      const started = Date.now();
      expect(publisher.abandonPending('the stream has a new leader')).toBe(1);
      expect(await outcome).toBe('the stream has a new leader');
      expect(Date.now() - started).toBeLessThan(1000); // not the 10 s publish timeout
      expect(publisher.abandonPending('nothing waits')).toBe(0);
      await publisher.publish('leaders.b', 'y', 'id-2', 'seal');
      expect((await jsm.streams.info('LEADERS_B')).state.messages).toBe(1);
    } finally {
      swallow.unsubscribe();
      publisher.close();
    }
  });
});
