// The org directory, replicated from the store to every ingest gate (CONTRACT 9 "Durable ingest";
// the gates' side is src/bus/nats/org-directory.ts): every org of the orgs table is put in the
// svc_orgs bucket (src/bus/nats/kv-orgs.ts), and then a key that says the directory is complete.
//
// Orgs are created in this process (changed(), at once) or by `svc orgs create --db` in another
// process on the same file (CONTRACT 2: it works beside svc serve), which nothing here hears of:
// the table is looked at every POLL_MS (its greatest rowid and its count, one cheap query) and
// the new rows put. Orgs are never renamed nor deleted (store/orgs.ts): an org's value never
// changes, and nothing is ever removed from the directory (an engine on an empty or older disk
// must not make the gates refuse orgs that exist).
//
// Nothing here holds up the engine (CONTRACT 8): start() waits a few seconds at most for the first
// sync, which goes on behind; a put that fails is tried again at the next look.
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import { getOrg, listOrgsAfter, orgsMark, type Org, type OrgsMark } from '../../store/orgs.ts';
import { isoNow, systemClock, within, type Clock, type Timer } from '../domain/clock.ts';
import { orgValue, type OrgEntry, type ReplicatedOrgs } from '../domain/org-directory.ts';

/** Where orgs go: the svc_orgs bucket (src/bus/nats/kv-orgs.ts KvOrgsPublisher). */
export interface OrgsPublisher {
  put(orgId: string, entry: OrgEntry): Promise<void>;
  /** say that every org of the store is in the directory */
  markComplete(at: string): Promise<void>;
  /** the directory now, to publish only what differs */
  replicated(): Promise<ReplicatedOrgs>;
}

/** How often the orgs table is looked at for orgs that another process created. */
export const POLL_MS = 1000;
/** How long start() waits for the first sync before going on (the sync goes on behind). */
const START_WAIT_MS = 3000;
/** How long stop() waits for a put under way. */
const STOP_WAIT_MS = 2000;
/** Puts in flight at once during the first sync (an older store may have many orgs). */
const SYNC_PARALLEL = 64;

export class OrgReplicator {
  /** each org's value as the directory holds it; null until the first sync has read it */
  private replica: Map<string, string> | null = null;
  /** how far the table went at the last look */
  private mark: OrgsMark = { last: 0, count: 0 };
  /** orgs this process created, to put before the next look at the table */
  private readonly created = new Set<string>();
  private busy: Promise<void> | null = null;
  private again = false;
  private closed = false;
  private failing = false;
  private timer: Timer | null = null;
  private markSynced!: () => void;
  private readonly firstSync = new Promise<void>((r) => (this.markSynced = r));

  constructor(
    private readonly db: Db,
    private readonly publisher: OrgsPublisher,
    private readonly logger: Pick<Logger, 'info' | 'warn'>,
    /** the looks at the table and the waits at start and stop */
    private readonly clock: Clock = systemClock,
    private readonly pollMs: number = POLL_MS,
  ) {}

  /** Whether the first sync is done: every org the store had then is in the directory, and the directory says it is complete. */
  get synced(): boolean {
    return this.replica !== null;
  }

  /**
   * The first sync and then a look at the table every pollMs. Resolves once the first sync is
   * done, or after a few seconds whatever it is still doing: it goes on behind the caller.
   */
  async start(waitMs = START_WAIT_MS): Promise<void> {
    if (this.closed || this.timer) return;
    this.timer = this.clock.setInterval(() => this.kick(), this.pollMs);
    this.kick();
    await within(this.clock, this.firstSync, waitMs);
  }

  /** An org was created in this process (committed): put it now rather than at the next look. */
  changed(orgId: string): void {
    this.created.add(orgId);
    this.kick();
  }

  /** Resolves once the first sync is done (never, if it never is: for tests, with a bound). */
  whenSynced(): Promise<void> {
    return this.firstSync;
  }

  /** Resolves when what was asked for so far is done (a pass under way and the one asked after it). */
  async settled(): Promise<void> {
    while (this.busy) await this.busy;
  }

  /** At shutdown: no more looks; a pass under way is waited for a little. */
  async stop(waitMs = STOP_WAIT_MS): Promise<void> {
    this.closed = true;
    this.timer?.cancel();
    this.timer = null;
    if (this.busy) await within(this.clock, this.busy, waitMs);
  }

  /** One pass now, or one more after the pass under way. */
  private kick(): void {
    if (this.closed) return;
    if (this.busy) {
      this.again = true;
      return;
    }
    this.busy = this.passes().finally(() => (this.busy = null));
  }

  private async passes(): Promise<void> {
    do {
      this.again = false;
      try {
        await this.pass();
        if (this.failing) this.logger.info('the org directory is replicated again');
        this.failing = false;
      } catch (err) {
        // the first failure of a streak; the next look (pollMs) tries again
        if (!this.failing) this.logger.warn({ err: String(err) }, 'could not replicate the org directory; retrying');
        this.failing = true;
        return;
      }
    } while (this.again && !this.closed);
  }

  private async pass(): Promise<void> {
    const replica = this.replica;
    if (!replica) return this.syncAll();
    for (const orgId of [...this.created]) {
      const org = getOrg(this.db, orgId);
      if (org) await this.publish(replica, org);
      this.created.delete(orgId);
    }
    const mark = orgsMark(this.db);
    if (mark.last === this.mark.last && mark.count === this.mark.count) return;
    const added = listOrgsAfter(this.db, this.mark.last);
    // rows only ever come at the end (orgs are not deleted); anything else (a table changed by
    // hand) is compared in full
    const rows = this.mark.count + added.length >= mark.count ? added : listOrgsAfter(this.db, 0);
    for (const org of rows) await this.publish(replica, org);
    this.mark = mark;
  }

  /**
   * The first sync: every org the directory lacks (or holds otherwise) is put, then the key that
   * says it is complete, if it is not there yet. A restart with nothing new writes nothing.
   */
  private async syncAll(): Promise<void> {
    const mark = orgsMark(this.db); // before the rows: an org created meanwhile is found at the next look
    const { orgs: replica, complete } = await this.publisher.replicated();
    const stale = listOrgsAfter(this.db, 0).filter((o) => replica.get(o.org_id) !== orgValue(o));
    for (let i = 0; i < stale.length; i += SYNC_PARALLEL) {
      await Promise.all(stale.slice(i, i + SYNC_PARALLEL).map((o) => this.publish(replica, o)));
    }
    if (!complete) await this.publisher.markComplete(isoNow(this.clock));
    if (stale.length || !complete) this.logger.info({ orgs: mark.count, put: stale.length }, 'org directory replicated');
    this.mark = mark;
    this.replica = replica;
    this.markSynced();
  }

  private async publish(replica: Map<string, string>, org: Org): Promise<void> {
    const value = orgValue(org);
    if (replica.get(org.org_id) === value) return;
    await this.publisher.put(org.org_id, { name: org.name, created_at: org.created_at });
    replica.set(org.org_id, value);
  }
}
