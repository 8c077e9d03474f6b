// Types of check-engines.mjs for the tests.
export interface LockEntry {
  version?: string;
  engines?: { node?: unknown } | unknown[];
  optional?: boolean;
  dev?: boolean;
  [key: string]: unknown;
}
export interface Manifest {
  name?: string;
  version?: string;
  engines?: { node?: unknown } | unknown[];
}
export interface EngineViolation {
  path: string;
  name: string;
  version: string | undefined;
  range: string;
  problem: string;
}
export const TARGET_NODE: string;
export function engineViolations(
  packages: Record<string, LockEntry> | undefined,
  opts: { node?: string; manifest: (path: string, entry: LockEntry) => Manifest | null },
): EngineViolation[];
export function installedManifest(root: string): (path: string) => Manifest | null;
