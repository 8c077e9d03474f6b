// Which orgs exist, as an ingest gate asks it (CONTRACT 9 "Durable ingest": the gate refuses a fact
// of an org that does not exist). NATS mode: the svc_orgs directory every process watches
// (src/bus/nats/org-directory.ts); embedded mode: the store itself (src/topology/embedded.ts).

export interface OrgDirectory {
  /** whether the org exists, as far as this process knows now */
  has(orgId: string): boolean;
  /**
   * Whether `has` can be trusted to say no: the directory has caught up with what every engine put
   * in it. Before that an org that `has` does not know may still exist (a gate must not refuse it
   * as unknown yet). Once true it stays true.
   */
  readonly synced: boolean;
  /** resolves once `synced` (at once when it is already) */
  whenSynced(): Promise<void>;
}

/** What the directory holds of an org (nothing secret: every worker reads it). Orgs are never renamed nor deleted. */
export interface OrgEntry {
  name: string;
  created_at: string;
}

/** The value put for an org: the same entry always gives the same text (compared, to publish only what differs). */
export function orgValue(entry: OrgEntry): string {
  return JSON.stringify({ name: entry.name, created_at: entry.created_at });
}

/** The directory as it is replicated now. */
export interface ReplicatedOrgs {
  /** each org's value (orgValue), by org id */
  orgs: Map<string, string>;
  /** whether an engine has put every org of its store once (what makes a directory `synced`) */
  complete: boolean;
}
