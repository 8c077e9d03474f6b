// Ready means ready (CONTRACT 1): one place owns whether this process should get traffic. The parts
// of a process (the HTTP port, the bus subscriptions, the outbox relay or source and the consumers, the NATS
// connection) report to it; `svc serve` prints `listening on` and `svc worker` prints `worker ready`
// once it is first ready (whenReady), and GET /readyz answers from it at every moment after:
// ready, or not with the reasons (a part not started yet, the NATS connection down, shutting down).
import type { NatsConnection } from '@nats-io/transport-node';

export interface ReadinessState {
  ready: boolean;
  /** why not, one line per part that is not ready (empty when ready) */
  reasons: string[];
}

export class Readiness {
  /** part → why it is not ready; a part is ready when it is not in here */
  private readonly pending = new Map<string, string>();
  private stoppingReason: string | null = null;
  private waiters: Array<() => void> = [];

  /** `parts`: part → the reason it gives until it reports ready. */
  constructor(parts: Record<string, string> = {}) {
    for (const [part, reason] of Object.entries(parts)) this.pending.set(part, reason);
  }

  /** This part is ready (again). */
  ready(part: string): void {
    if (!this.pending.delete(part)) return;
    if (this.isReady()) {
      const waiters = this.waiters;
      this.waiters = [];
      for (const w of waiters) w();
    }
  }

  /** This part is not ready (any more), and why. */
  notReady(part: string, reason: string): void {
    this.pending.set(part, reason);
  }

  /** From now on never ready again (SIGTERM: traffic moves elsewhere before the drain). */
  stopping(reason = 'shutting down'): void {
    this.stoppingReason ??= reason;
  }

  get isStopping(): boolean {
    return this.stoppingReason !== null;
  }

  isReady(): boolean {
    return this.stoppingReason === null && this.pending.size === 0;
  }

  state(): ReadinessState {
    const reasons = [...(this.stoppingReason ? [this.stoppingReason] : []), ...this.pending.values()];
    return { ready: reasons.length === 0, reasons };
  }

  /** Resolves the first moment every part is ready (at once if they are); never once stopping. */
  whenReady(): Promise<void> {
    if (this.isReady()) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }
}

/**
 * The NATS connection as a part of `readiness`: not ready while it is down or reconnecting; ready
 * again once it is back and a flush round trip has confirmed that the server has every
 * subscription again (the client sends them again before that flush).
 */
export function trackNatsConnection(nc: NatsConnection, readiness: Readiness, part = 'nats'): void {
  let generation = 0;
  void (async () => {
    for await (const s of nc.status()) {
      switch (s.type) {
        case 'disconnect':
        case 'reconnecting':
        case 'staleConnection':
          generation++;
          readiness.notReady(part, 'the NATS connection is down (reconnecting)');
          break;
        case 'reconnect': {
          const g = ++generation;
          nc.flush().then(
            () => {
              if (g === generation) readiness.ready(part);
            },
            () => undefined,
          );
          break;
        }
        case 'close':
          readiness.notReady(part, 'the NATS connection is closed');
          break;
        default:
          break;
      }
    }
  })().catch(() => undefined);
  void nc.closed().then(() => readiness.notReady(part, 'the NATS connection is closed'));
}
