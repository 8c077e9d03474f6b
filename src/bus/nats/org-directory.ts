// The org directory as any svc process on NATS reads it (CONTRACT 9 "Durable ingest"): a watch of
// the svc_orgs bucket (src/bus/nats/kv-orgs.ts) held in memory, for the ingest gate of svc serve, a
// standby or svc worker to tell at once whether an org exists. The engine puts the orgs
// (src/handoff/org-replicator.ts). Works with the worker's credentials: it only reads the bucket's
// stream info and watches it (src/cli/nats-init/nats-permissions.ts).
//
// Started without waiting: the bucket may not exist yet (a worker started before any svc serve),
// and the watch is made again whenever it ends while the connection lives. What it learnt stays:
// `synced` never goes back to false and an org is forgotten only when its key is removed.
import type { Logger } from 'pino';
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { sleep, systemClock, type Clock } from '../../domain/clock.ts';
import type { OrgDirectory } from '../../domain/org-directory.ts';
import { ORGS_BUCKET } from './jetstream.ts';
import { watchOrgs } from './kv-orgs.ts';

/** Between two tries to open or watch the bucket. */
const RETRY_MS = 1000;

export interface OrgDirectoryOptions {
  /** where a watch that fails or ends is told (once per streak) */
  logger?: Pick<Logger, 'warn' | 'info'>;
  /** the waits between tries */
  clock?: Clock;
}

/** The directory of one process: a KV watch, caught up (`synced`) once the engine's whole store is in it. */
export class NatsOrgDirectory implements OrgDirectory {
  private readonly orgs = new Set<string>();
  private caughtUp = false;
  private complete = false;
  private stopped = false;
  private watch: { stop(): void } | null = null;
  private markSynced!: () => void;
  private readonly syncedPromise = new Promise<void>((r) => (this.markSynced = r));

  constructor(
    private readonly nc: NatsConnection,
    private readonly opts: OrgDirectoryOptions = {},
  ) {}

  has(orgId: string): boolean {
    return this.orgs.has(orgId);
  }

  get synced(): boolean {
    return this.caughtUp && this.complete;
  }

  whenSynced(): Promise<void> {
    return this.syncedPromise;
  }

  /** How many orgs it knows. */
  get size(): number {
    return this.orgs.size;
  }

  stop(): void {
    this.stopped = true;
    this.watch?.stop();
  }

  /** Watches the bucket until stop() or the connection closes: opened again and watched again after any failure. */
  async run(): Promise<void> {
    const clock = this.opts.clock ?? systemClock;
    const kvm = new Kvm(jetstream(this.nc));
    let failing = false;
    while (!this.stopped && !this.nc.isClosed()) {
      try {
        const kv = await kvm.open(ORGS_BUCKET);
        const w = await watchOrgs(kv, {
          put: (orgId) => this.orgs.add(orgId),
          removed: (orgId) => this.orgs.delete(orgId),
          complete: () => {
            this.complete = true;
            this.check();
          },
        });
        this.watch = w;
        if (this.stopped) w.stop();
        if (failing) this.opts.logger?.info({ bucket: ORGS_BUCKET }, 'watching the org directory again');
        failing = false;
        void w.caughtUp.then(() => {
          this.caughtUp = true;
          this.check();
        });
        await w.ended;
        if (this.stopped || this.nc.isClosed()) return;
        this.opts.logger?.warn({ bucket: ORGS_BUCKET }, 'the watch of the org directory ended; watching it again');
      } catch (err) {
        if (this.stopped) return;
        // the first failure of a streak (svc serve has not created the bucket yet, an election on a cluster)
        if (!failing) this.opts.logger?.warn({ bucket: ORGS_BUCKET, err: String(err) }, 'cannot watch the org directory yet; retrying');
        failing = true;
      }
      await sleep(clock, RETRY_MS);
    }
  }

  private check(): void {
    if (this.synced) this.markSynced();
  }
}

/** A directory watching svc_orgs over `nc`, at once (it never holds the caller up); stop() ends it. */
export function startOrgDirectory(nc: NatsConnection, opts: OrgDirectoryOptions = {}): NatsOrgDirectory {
  const d = new NatsOrgDirectory(nc, opts);
  void d.run();
  return d;
}
