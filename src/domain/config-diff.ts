// Pure app-config diff (CONTRACT 4.3): what changes when an install moves from one app config to another.
// Components are matched by name; field changes are found by deep comparison, with dotted paths
// (`values.image`, `labels.tier`). Arrays are compared as whole values. Unchanged values are never reported.

import type { AppConfigBody, ComponentSpec } from './app-config.ts';

export interface FieldChange {
  path: string;
  op: 'add' | 'remove' | 'replace';
  old?: unknown;
  new?: unknown;
}

export interface ConfigDiff {
  changed: boolean;
  components: {
    added: Array<{ name: string }>;
    removed: Array<{ name: string }>;
    changed: Array<{ name: string; changes: FieldChange[] }>;
    unchanged: Array<{ name: string }>;
  };
  sandbox_changed: boolean;
  inputs_changed: boolean;
}

/** A plain JSON object (not an array, not null). */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/**
 * Structural equality of JSON-like values. Object key order does not matter; a key whose value is
 * `undefined` counts as absent (as in JSON). Arrays are equal when equal element by element.
 */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === 'number' && typeof b === 'number') return Number.isNaN(a) && Number.isNaN(b);
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!deepEqual(a[i], b[i])) return false;
    return true;
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const ka = definedKeys(a);
    const kb = definedKeys(b);
    if (ka.length !== kb.length) return false;
    for (const k of ka) {
      if (!Object.hasOwn(b, k) || b[k] === undefined) return false;
      if (!deepEqual(a[k], b[k])) return false;
    }
    return true;
  }
  return false;
}

function definedKeys(o: Record<string, unknown>): string[] {
  return Object.keys(o).filter((k) => o[k] !== undefined);
}

const byName = (x: { name: string }, y: { name: string }) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0);

/**
 * Field-level changes between two values at `path`. Plain objects are walked key by key (sorted);
 * anything else (scalars, arrays, a type change) is a single add/remove/replace at that path.
 * `undefined` means absent.
 */
function diffValue(path: string, from: unknown, to: unknown, out: FieldChange[]): void {
  if (from === undefined && to === undefined) return;
  if (from === undefined) {
    out.push({ path, op: 'add', new: to });
    return;
  }
  if (to === undefined) {
    out.push({ path, op: 'remove', old: from });
    return;
  }
  if (isPlainObject(from) && isPlainObject(to)) {
    const keys = [...new Set([...definedKeys(from), ...definedKeys(to)])].sort();
    for (const k of keys) diffValue(path ? `${path}.${k}` : k, from[k], to[k], out);
    return;
  }
  if (!deepEqual(from, to)) out.push({ path, op: 'replace', old: from, new: to });
}

/** The fields of a component that are compared: everything but its name. */
function componentFields(c: ComponentSpec): Record<string, unknown> {
  const { name: _name, ...rest } = c;
  return rest;
}

/** Changes of one component (by field path), empty when the two are the same. */
export function diffComponent(from: ComponentSpec, to: ComponentSpec): FieldChange[] {
  const a = componentFields(from);
  const b = componentFields(to);
  const out: FieldChange[] = [];
  // labels and values: an absent map is the same as an empty one, so a first label is `labels.<key>` add.
  for (const k of ['labels', 'values'] as const) {
    if (a[k] === undefined && isPlainObject(b[k])) a[k] = {};
    if (b[k] === undefined && isPlainObject(a[k])) b[k] = {};
  }
  diffValue('', a, b, out);
  return out;
}

/** An absent or null sandbox / inputs is the same as an empty one. */
const orEmpty = (v: Record<string, unknown> | null | undefined): Record<string, unknown> => v ?? {};

/**
 * Diff two app configs. `from` null (an install's first config) means every component is added.
 * Lists are sorted by name; `changed` is true when any component was added, removed or changed, or
 * the sandbox or the inputs changed.
 */
export function diffConfigs(from: AppConfigBody | null, to: AppConfigBody): ConfigDiff {
  const fromComps = new Map<string, ComponentSpec>();
  for (const c of from?.components ?? []) fromComps.set(c.name, c);
  const toComps = new Map<string, ComponentSpec>();
  for (const c of to.components ?? []) toComps.set(c.name, c);

  const added: Array<{ name: string }> = [];
  const removed: Array<{ name: string }> = [];
  const changed: Array<{ name: string; changes: FieldChange[] }> = [];
  const unchanged: Array<{ name: string }> = [];

  for (const [name, c] of toComps) {
    const prev = fromComps.get(name);
    if (!prev) {
      added.push({ name });
      continue;
    }
    const changes = diffComponent(prev, c);
    if (changes.length) changed.push({ name, changes });
    else unchanged.push({ name });
  }
  for (const name of fromComps.keys()) if (!toComps.has(name)) removed.push({ name });

  added.sort(byName);
  removed.sort(byName);
  changed.sort(byName);
  unchanged.sort(byName);

  const sandbox_changed = !deepEqual(orEmpty(from?.sandbox), orEmpty(to.sandbox));
  const inputs_changed = !deepEqual(orEmpty(from?.inputs), orEmpty(to.inputs));
  return {
    changed: added.length > 0 || removed.length > 0 || changed.length > 0 || sandbox_changed || inputs_changed,
    components: { added, removed, changed, unchanged },
    sandbox_changed,
    inputs_changed,
  };
}
