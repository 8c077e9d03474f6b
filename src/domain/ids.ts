import { createHash, randomBytes } from 'node:crypto';

// Ids are lowercase [a-z0-9_], at most 64 characters, safe as NATS subject tokens (CONTRACT 2).

/** A new random id: `<prefix>_<20 base36 chars>`. */
export function newId(prefix: string): string {
  const bytes = randomBytes(16);
  let n = 0n;
  for (const b of bytes) n = (n << 8n) | BigInt(b);
  return `${prefix}_${n.toString(36).padStart(20, '0').slice(0, 20)}`;
}

/** A deterministic id for a name inside a scope (component `api` of install X keeps its id). */
export function stableId(prefix: string, ...parts: string[]): string {
  const h = createHash('sha256').update(parts.join('\u0000')).digest('hex').slice(0, 20);
  return `${prefix}_${h}`;
}

export const ID_RE = /^[a-z0-9_]{1,64}$/;
