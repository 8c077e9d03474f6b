// Ready means ready (CONTRACT 1): on a JetStream cluster a stream (or KV bucket) svc needs can be
// without a leader for seconds — after the server that led it died, until the others elect a new
// one — and nothing stored or handed out on it moves meanwhile; the same of a durable consumer.
// /readyz says so: every second each stream and consumer of the layout is asked for its info (its
// leader answers it); one that does not answer, or answers with no leader, is a part of readiness
// that is not ready (`stream <name>`, `consumer <name> of <stream>`), naming it. Delivery
// resumes by itself once a leader is elected (the pull loops retry, the relay publishes again).
// The server announces each election (`$JS.EVENT.ADVISORY.{STREAM,CONSUMER}.LEADER_ELECTED.…`):
// one for a target checks again at once, and `onLeader` hears it the moment it comes, so that what
// waits on a leader (the relay's publishes, which nobody answers while there is none) goes on
// without waiting for a timeout or the next check.
import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { Clock, Timer } from '../domain/clock.ts';
import type { Readiness } from '../readiness.ts';

export const LEADER_CHECK_INTERVAL_MS = 1000;

export interface StreamLeaderWatch {
  /** no more checks (one under way ends unheeded) */
  stop(): void;
}

/** A stream, or a durable consumer of one: what must have a leader. */
export interface LeaderTarget {
  stream: string;
  consumer?: string;
}

const nameOf = (t: LeaderTarget) => (t.consumer ? `consumer ${t.consumer} of ${t.stream}` : `stream ${t.stream}`);

/** Why `t` cannot be used now, or null when it has a leader. */
async function leaderless(jsm: JetStreamManager, t: LeaderTarget): Promise<string | null> {
  try {
    const info = t.consumer ? await jsm.consumers.info(t.stream, t.consumer) : await jsm.streams.info(t.stream);
    // a server in no cluster reports no cluster, or itself as the leader
    if (info.cluster && !info.cluster.leader) return `JetStream ${nameOf(t)} has no leader (an election is under way)`;
    return null;
  } catch (err) {
    return `JetStream ${nameOf(t)} has no leader (it did not answer: ${(err as Error)?.message ?? String(err)})`;
  }
}

/** The advisory subject the server publishes when `t` has a new leader. */
export function leaderElectedSubject(t: LeaderTarget): string {
  return t.consumer
    ? `$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED.${t.stream}.${t.consumer}`
    : `$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.${t.stream}`;
}

/**
 * Watch the leaders of `targets` until stopped. `jsm` should time out in about a second or two (an
 * answer from a leader takes milliseconds; none comes during an election). With `nc`, the
 * server's leader-elected advisories wake the watch and call `onLeader` with the target.
 */
export function watchStreamLeaders(o: {
  jsm: JetStreamManager;
  targets: readonly LeaderTarget[];
  readiness: Readiness;
  clock: Clock;
  intervalMs?: number;
  nc?: NatsConnection;
  onLeader?: (t: LeaderTarget) => void;
}): StreamLeaderWatch {
  let stopped = false;
  const every = o.intervalMs ?? LEADER_CHECK_INTERVAL_MS;
  let wake: (() => void) | null = null;
  let again = false;
  const checkNow = () => {
    again = true;
    wake?.();
  };
  const subs: Subscription[] = [];
  if (o.nc) {
    for (const t of o.targets) {
      subs.push(
        o.nc.subscribe(leaderElectedSubject(t), {
          callback: (err) => {
            if (err || stopped) return;
            o.onLeader?.(t);
            checkNow();
          },
        }),
      );
    }
  }
  void (async () => {
    while (!stopped) {
      again = false;
      const reasons = await Promise.all(o.targets.map((t) => leaderless(o.jsm, t)));
      if (stopped) break;
      o.targets.forEach((t, i) => {
        const why = reasons[i];
        if (why) o.readiness.notReady(nameOf(t), why);
        else o.readiness.ready(nameOf(t));
      });
      if (again) continue; // an election was announced during the check: look again now
      await new Promise<void>((resolve) => {
        let timer: Timer | null = null;
        wake = () => {
          timer?.cancel();
          wake = null;
          resolve();
        };
        timer = o.clock.setTimeout(() => wake?.(), every);
      });
    }
  })();
  return {
    stop() {
      stopped = true;
      wake?.();
      for (const s of subs) s.unsubscribe();
    },
  };
}
