// Opaque page cursors (CONTRACT 8: `next_cursor` values reveal nothing about other orgs). A list
// pages by a global sequence (the events' and attempts' `seq`, shared by every org); its cursor is
// that number sealed for one list of one org, so that neither the number (how much every org has
// emitted) nor the difference between two cursors can be read from it, and a cursor is good only
// for the list it came from (another org's or another webhook's is 400, never a page of its data).
//
// The seal: one 16-byte block, the seq (8 bytes) and a tag of the list's scope (8 bytes, an HMAC),
// through AES-256 as a single-block permutation, written in base64url (22 characters). A single
// block needs no mode or IV: equal cursors for equal rows is all it shows. Opening it checks the
// tag: a forged or foreign cursor passes with odds of 2^-64. The key is made once per database.
import { createCipheriv, createDecipheriv, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Db } from '../../store/db.ts';
import { setSettingOnce } from '../../store/settings.ts';
import { InvalidError } from '../domain/errors.ts';

interface CursorKeys {
  cipher: Buffer;
  tag: Buffer;
}

const byDb = new WeakMap<Db, CursorKeys>();

function keysOf(db: Db): CursorKeys {
  let k = byDb.get(db);
  if (!k) {
    const master = Buffer.from(setSettingOnce(db, 'page_cursor_key', randomBytes(32).toString('base64url')), 'base64url');
    const derive = (use: string) => createHmac('sha256', master).update(use).digest();
    k = { cipher: derive('cursor cipher'), tag: derive('cursor tag') };
    byDb.set(db, k);
  }
  return k;
}

/** The list a cursor belongs to: `events:<org>`, `attempts:<org>:<webhook>`. */
export type CursorScope = string;

const scopeTag = (keys: CursorKeys, scope: CursorScope) => createHmac('sha256', keys.tag).update(scope).digest().subarray(0, 8);

/** The cursor of a row's sequence number in one list. */
export function sealCursor(db: Db, scope: CursorScope, seq: number): string {
  const keys = keysOf(db);
  const block = Buffer.alloc(16);
  block.writeBigUInt64BE(BigInt(seq), 0);
  scopeTag(keys, scope).copy(block, 8);
  const c = createCipheriv('aes-256-ecb', keys.cipher, null).setAutoPadding(false);
  return Buffer.concat([c.update(block), c.final()]).toString('base64url');
}

/** The sequence number of a cursor of this list; 400 for anything else (another list's, a forged one, an old plain number). */
export function openCursor(db: Db, scope: CursorScope, text: string, field = 'after'): number {
  const bad = () =>
    new InvalidError(`invalid request: ${field}: not a cursor of this list`, [{ path: field, message: 'not a cursor of this list' }]);
  if (!/^[A-Za-z0-9_-]{22}$/.test(text)) throw bad();
  const keys = keysOf(db);
  const d = createDecipheriv('aes-256-ecb', keys.cipher, null).setAutoPadding(false);
  const block = Buffer.concat([d.update(Buffer.from(text, 'base64url')), d.final()]);
  if (block.length !== 16 || !timingSafeEqual(block.subarray(8), scopeTag(keys, scope))) throw bad();
  const seq = block.readBigUInt64BE(0);
  if (seq > BigInt(Number.MAX_SAFE_INTEGER)) throw bad();
  return Number(seq);
}
