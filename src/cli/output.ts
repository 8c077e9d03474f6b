// Output of the API commands: plain aligned tables for people, pretty JSON with --json.
import type { DeliveryStatus } from '../../store/delivery-status.ts';

/** Write a line (or lines) to stdout. */
export function println(text = ''): void {
  process.stdout.write(`${text}\n`);
}

/** Pretty JSON of a value, as `--json` prints it. */
export function printJson(value: unknown): void {
  println(JSON.stringify(value === undefined ? null : value, null, 2));
}

/** A cell: strings as they are, null/undefined as `-`, everything else as compact JSON. */
export function cell(v: unknown): string {
  if (v === null || v === undefined || v === '') return '-';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return JSON.stringify(v);
}

/**
 * A webhook's last delivery attempt (CONTRACT 4.1 delivery_status) in one cell: outcome, then the
 * receiver's status code or the error, then when; `-` when it was never attempted.
 */
export function formatLastDelivery(d: Partial<DeliveryStatus> | null | undefined): string {
  if (!d || (!d.last_outcome && !d.last_attempt_at)) return '-';
  const detail = d.last_status_code ?? d.last_error;
  return [
    d.last_outcome ?? '?',
    detail === null || detail === undefined || detail === '' ? undefined : String(detail),
    d.last_attempt_at ?? undefined,
  ]
    .filter((x) => x !== undefined)
    .join(' ');
}

/** `k=v,k=v` for a label map (sorted), `-` when empty. */
export function formatLabels(labels: unknown): string {
  if (!labels || typeof labels !== 'object' || Array.isArray(labels)) return '-';
  const entries = Object.entries(labels as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (!entries.length) return '-';
  return entries.map(([k, v]) => `${k}=${cell(v)}`).join(',');
}

/** Render rows as a table with aligned columns (two spaces apart) under upper-case headers. */
export function formatTable(headers: string[], rows: unknown[][]): string {
  const cells = rows.map((r) => headers.map((_, i) => cell(r[i]).replace(/[\r\n\t]+/g, ' ')));
  const head = headers.map((h) => h.toUpperCase());
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i].length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(head), ...cells.map(line)].join('\n');
}

export function printTable(headers: string[], rows: unknown[][], empty = '(none)'): void {
  if (!rows.length) {
    println(empty);
    return;
  }
  println(formatTable(headers, rows));
}

/** `key: value` lines, keys aligned. */
export function formatFields(fields: Array<[string, unknown]>): string {
  const w = Math.max(0, ...fields.map(([k]) => k.length));
  return fields.map(([k, v]) => `${`${k}:`.padEnd(w + 1)} ${cell(v)}`).join('\n');
}

export function printFields(fields: Array<[string, unknown]>): void {
  println(formatFields(fields));
}

/** The diff shape of CONTRACT 4.3 as the server returns it (loosely typed: it comes off the wire). */
export interface DiffLike {
  changed?: boolean;
  components?: {
    added?: Array<{ name: string }>;
    removed?: Array<{ name: string }>;
    changed?: Array<{ name: string; changes?: Array<{ path: string; op: string; old?: unknown; new?: unknown }> }>;
    unchanged?: Array<{ name: string }>;
  };
  sandbox_changed?: boolean;
  inputs_changed?: boolean;
}

const show = (v: unknown) => (v === undefined ? 'undefined' : JSON.stringify(v));

/** A human-readable config diff: added, removed and changed components with their field changes. */
export function formatDiff(d: DiffLike, indent = ''): string {
  const c = d.components ?? {};
  const added = c.added ?? [];
  const removed = c.removed ?? [];
  const changed = c.changed ?? [];
  const unchanged = c.unchanged ?? [];
  const out: string[] = [];
  if (d.changed === false) out.push('no changes');
  out.push(`sandbox: ${d.sandbox_changed ? 'changed' : 'unchanged'}`);
  out.push(`inputs: ${d.inputs_changed ? 'changed' : 'unchanged'}`);
  out.push('components:');
  if (!added.length && !removed.length && !changed.length && !unchanged.length) out.push('  (none)');
  for (const x of added) out.push(`  + ${x.name} (added)`);
  for (const x of removed) out.push(`  - ${x.name} (removed)`);
  for (const x of changed) {
    out.push(`  ~ ${x.name} (changed)`);
    for (const ch of x.changes ?? []) {
      if (ch.op === 'add') out.push(`      + ${ch.path}: ${show(ch.new)}`);
      else if (ch.op === 'remove') out.push(`      - ${ch.path}: ${show(ch.old)}`);
      else out.push(`      ~ ${ch.path}: ${show(ch.old)} -> ${show(ch.new)}`);
    }
  }
  if (unchanged.length) out.push(`  = ${unchanged.map((x) => x.name).join(', ')} (unchanged)`);
  return out.map((l) => indent + l).join('\n');
}
