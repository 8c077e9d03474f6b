// The org directory on NATS KV (bucket svc_orgs, CONTRACT 9 "Durable ingest"): which orgs exist,
// for every ingest gate (svc serve, standbys, svc worker) to refuse a fact of an unknown org.
// Key: the org id; value: `{"name", "created_at"}` (nothing secret: workers read it). One more key,
// COMPLETE_KEY, says that an engine has put every org of its store once: before it, an empty or
// partial bucket (the first start of an engine that had orgs before 0.3) tells a gate nothing.
// Org ids are lowercase (CONTRACT 2), so the uppercase key can never be an org's.
import type { KV, KvEntry } from '@nats-io/kv';
import { ID_RE } from '../../domain/ids.ts';
import { orgValue, type OrgEntry, type ReplicatedOrgs } from '../../domain/org-directory.ts';

/** The key that says an engine has put every org of its store (its value: when, first). */
export const COMPLETE_KEY = 'COMPLETE';

/** The engine's side: puts orgs (an OrgsPublisher of src/handoff/org-replicator.ts). Never deletes one: orgs are not deleted. */
export class KvOrgsPublisher {
  constructor(private readonly kv: KV) {}

  async put(orgId: string, entry: OrgEntry): Promise<void> {
    if (!ID_RE.test(orgId)) throw new Error(`not an org id: ${JSON.stringify(orgId)}`);
    await this.kv.put(orgId, orgValue(entry));
  }

  async markComplete(at: string): Promise<void> {
    await this.kv.put(COMPLETE_KEY, JSON.stringify({ since: at }));
  }

  /** Every org the bucket holds now, read to its last revision (a watch of the last values). */
  async replicated(): Promise<ReplicatedOrgs> {
    const out: ReplicatedOrgs = { orgs: new Map(), complete: false };
    const state = (await this.kv.status()).streamInfo.state;
    if (state.last_seq === 0 || state.messages === 0) return out;
    const it = await this.kv.watch({ key: '>' });
    try {
      for await (const e of it) {
        const what = entryKind(e);
        if (what === 'complete') out.complete = true;
        else if (what === 'org') out.orgs.set(e.key, e.string());
        else if (what === 'gone') out.orgs.delete(e.key);
        if (e.revision >= state.last_seq || e.delta === 0) break;
      }
    } finally {
      it.stop();
    }
    return out;
  }
}

/** What a watched entry says: an org (put), an org's key removed, the COMPLETE_KEY, or nothing (a key that is no org id). */
function entryKind(e: KvEntry): 'org' | 'gone' | 'complete' | 'other' {
  if (e.key === COMPLETE_KEY) return e.operation === 'PUT' ? 'complete' : 'other';
  if (!ID_RE.test(e.key)) return 'other';
  return e.operation === 'PUT' ? 'org' : 'gone';
}

export interface OrgWatchHandlers {
  /** an org is in the directory */
  put(orgId: string): void;
  /** an org's key was removed (by hand: svc itself never removes one) */
  removed(orgId: string): void;
  /** an engine has put every org of its store */
  complete(): void;
}

/**
 * A gate's side: every org now, then every change. `caughtUp` resolves once what the bucket held
 * when the watch started has been handed to `h`; `ended` once the watch stopped (stop(), or the
 * connection closed), to be watched again by whoever wants more.
 */
export async function watchOrgs(kv: KV, h: OrgWatchHandlers): Promise<{ caughtUp: Promise<void>; ended: Promise<void>; stop(): void }> {
  const state = (await kv.status()).streamInfo.state;
  const last = state.messages === 0 ? 0 : state.last_seq;
  let markCaughtUp!: () => void;
  const caughtUp = new Promise<void>((r) => (markCaughtUp = r));
  if (last === 0) markCaughtUp();
  const it = await kv.watch({ key: '>' });
  const ended = (async () => {
    for await (const e of it) {
      const what = entryKind(e);
      if (what === 'org') h.put(e.key);
      else if (what === 'gone') h.removed(e.key);
      else if (what === 'complete') h.complete();
      if (e.revision >= last || e.delta === 0) markCaughtUp();
    }
  })().catch(() => undefined);
  return { caughtUp, ended, stop: () => it.stop() };
}
