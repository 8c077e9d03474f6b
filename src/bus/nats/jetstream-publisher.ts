// Publishing events into a JetStream stream, pipelined: one reply subscription for every publish
// and one timer for them all, instead of a request (reply subscription, timer and error objects)
// per message. Each publish resolves when the stream stored the message (or recognised its msg id
// as a duplicate), and rejects on an error answer, no answer within the timeout, or no stream. The
// relay publishes events with it (publish), the ingest gates producers' facts (store).
import { headers as natsHeaders, nuid, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { EVENT_ID_HEADER, SEAL_HEADER } from './jetstream.ts';

interface Pending {
  /** with the stream's seq of the message */
  resolve(seq: number): void;
  reject(err: Error): void;
  at: number;
}

/** Why a message was not stored; `unanswered`: no answer (a timeout, no stream, a reconnect), so publishing again may store it. */
export class NotStoredError extends Error {
  constructor(
    message: string,
    readonly unanswered: boolean,
  ) {
    super(message);
    this.name = 'NotStoredError';
  }
}

const dec = new TextDecoder();

export class JetStreamPublisher {
  private readonly prefix: string;
  private readonly sub: Subscription;
  private readonly pending = new Map<string, Pending>();
  private next = 0;
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly nc: NatsConnection,
    inboxPrefix: string,
    private readonly timeoutMs = 10_000,
  ) {
    this.prefix = `${inboxPrefix}.pub_${nuid.next()}`;
    this.sub = nc.subscribe(`${this.prefix}.*`, { callback: (_err, m) => this.answered(m) });
    this.sweeper = setInterval(() => this.expire(), Math.min(1000, timeoutMs));
    this.sweeper.unref();
    // After a reconnect, publishes the client held while disconnected go out before the reply
    // subscription is back, so their acks are lost: fail them at once (the caller publishes again;
    // JetStream drops a second copy by its msg id) rather than at the timeout.
    void (async () => {
      for await (const st of nc.status()) if (st.type === 'reconnect') this.failAll('reconnected to NATS; publishing again');
    })().catch(() => undefined);
  }

  /**
   * Stop waiting for the acknowledgements of every publish made so far: each rejects with `why`
   * (the caller publishes again; JetStream drops a second copy by its msg id). For when none will
   * come: a stream without a leader drops what is published to it without an answer.
   */
  abandonPending(why: string): number {
    const n = this.pending.size;
    this.failAll(why);
    return n;
  }

  private failAll(why: string): void {
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const p of pending) p.reject(new NotStoredError(why, true));
  }

  /** Publish a message (`msgId` as Nats-Msg-Id, its seal in a header); resolves once stored. */
  publish(subject: string, body: string | Uint8Array, msgId: string, seal: string): Promise<void> {
    const h = natsHeaders();
    h.set(EVENT_ID_HEADER, msgId);
    h.set(SEAL_HEADER, seal);
    return new Promise<void>((resolve, reject) => this.send(subject, body, h, () => resolve(), reject));
  }

  /** Publish a message with its headers (a Nats-Msg-Id among them, for a second copy to be dropped); resolves its seq once stored. */
  store(subject: string, body: string | Uint8Array, h: MsgHdrs): Promise<number> {
    return new Promise<number>((resolve, reject) => this.send(subject, body, h, resolve, reject));
  }

  private send(subject: string, body: string | Uint8Array, h: MsgHdrs, resolve: (seq: number) => void, reject: (err: Error) => void): void {
    const token = (this.next++).toString(36);
    {
      this.pending.set(token, { resolve, reject, at: Date.now() });
      try {
        this.nc.publish(subject, body, { reply: `${this.prefix}.${token}`, headers: h });
      } catch (err) {
        this.pending.delete(token);
        reject(err as Error);
      }
    }
  }

  /** A plain publish (no stream captures it, nothing answers): observers' copy of an event. */
  mirror(subject: string, body: string | Uint8Array): void {
    this.nc.publish(subject, body);
  }

  private answered(m: Msg): void {
    const token = m.subject.slice(this.prefix.length + 1);
    const p = this.pending.get(token);
    if (!p) return;
    this.pending.delete(token);
    if (m.headers?.hasError) {
      p.reject(new NotStoredError(`no stream stored the event (${m.headers.code} ${m.headers.description})`, true));
      return;
    }
    try {
      const ack = JSON.parse(dec.decode(m.data)) as { stream?: string; seq?: number; error?: { description?: string; code?: number } };
      if (ack.error) p.reject(new Error(`JetStream refused the event: ${ack.error.description ?? ack.error.code}`));
      else if (!ack.stream) p.reject(new Error('JetStream answered without a stream'));
      else p.resolve(ack.seq ?? 0);
    } catch {
      p.reject(new Error('JetStream answered something that is not an acknowledgement'));
    }
  }

  private expire(): void {
    const cutoff = Date.now() - this.timeoutMs;
    for (const [token, p] of this.pending) {
      if (p.at > cutoff) break; // insertion order = time order
      this.pending.delete(token);
      p.reject(new NotStoredError(`JetStream did not acknowledge the event within ${this.timeoutMs} ms`, true));
    }
  }

  close(): void {
    clearInterval(this.sweeper);
    this.sub.unsubscribe();
    this.failAll('publisher closed');
  }
}
