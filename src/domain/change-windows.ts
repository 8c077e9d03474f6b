// Change windows (CONTRACT 4.3 "Change windows"): per app, allow or deny windows on days of the
// week, from a local `HH:MM` for a duration, in an IANA time zone; a window selects installs (by id
// or labels, all when neither) and applies to branch runs unless `applies_to` names rollbacks.
// This file is the pure schedule: given the windows, an install, the run kind and a moment, may
// the install start an update now, and if not, when may it and which windows hold it. No I/O.
//
// Time zones: the built-in `Intl.DateTimeFormat` with `timeZone` does the wall-clock reading of an
// instant; wall clock → instant is solved from it (below). Intl suffices: Node 20 ships full ICU
// with its IANA tz database (every zone, its daylight-saving rules and their history), so no
// time-zone library (and no hand-written offset table) is needed; all we need from a zone is "what
// does the clock on the wall read at this instant", which is exactly what Intl answers.

export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type Weekday = (typeof WEEKDAYS)[number];
export const WINDOW_KINDS = ['allow', 'deny'] as const;
export type WindowKind = (typeof WINDOW_KINDS)[number];
export const RUN_KINDS = ['branch_run', 'rollback'] as const;
export type RunKind = (typeof RUN_KINDS)[number];
/** CONTRACT 4.3: a window lasts 15m to 24h. */
export const MIN_WINDOW_MS = 15 * 60_000;
export const MAX_WINDOW_MS = 24 * 3_600_000;

/** A window as the schedule needs it (the stored row has more: name, created_at, the duration as given). */
export interface ScheduleWindow {
  window_id: string;
  kind: WindowKind;
  days: Weekday[];
  /** `HH:MM`, local to time_zone */
  start: string;
  duration_ms: number;
  time_zone: string;
  install_ids?: string[] | null;
  selector?: { match_labels: Record<string, string> } | null;
  /** absent: branch runs only */
  applies_to?: RunKind[] | null;
}

/** A window as POST /v1/apps/{app_id}/change-windows takes it (validated by src/http/change-window-schemas.ts). */
export interface ChangeWindowInput {
  name: string;
  kind: WindowKind;
  days: Weekday[];
  start: string;
  /** as given, e.g. `2h` (15m to 24h) */
  duration: string;
  time_zone: string;
  install_ids?: string[];
  selector?: { match_labels: Record<string, string> };
  applies_to?: RunKind[];
}

export interface ScheduleInstall {
  install_id: string;
  labels: Record<string, string>;
}

/** What the schedule says of an install at a moment. */
export interface WindowVerdict {
  may_start: boolean;
  /** when it may start next (ISO 8601, UTC); null when it may start now, or never will */
  next_window_at: string | null;
  /** the windows holding it now ([] when none) */
  window_ids: string[];
}

/** Whether a time zone name is one the runtime knows (IANA). */
export function isTimeZone(name: string): boolean {
  if (!name || name.length > 64) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** `HH:MM` (00:00 to 23:59) in minutes after midnight; null when it is not one. */
export function startMinutes(text: string): number | null {
  const m = /^([01]\d|2[0-3]):([0-5]\d)$/.exec(text);
  return m ? Number(m[1]) * 60 + Number(m[2]) : null;
}

const formatters = new Map<string, Intl.DateTimeFormat>();
function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone: tz, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' });
    formatters.set(tz, f);
  }
  return f;
}

/** The wall clock of `tz` at instant `ms`, read as if it were UTC (ms since the epoch). */
function wallMs(tz: string, ms: number): number {
  const p: Record<string, number> = {};
  for (const part of formatter(tz).formatToParts(new Date(ms))) if (part.type !== 'literal') p[part.type] = Number(part.value);
  return Date.UTC(p.year, p.month - 1, p.day, p.hour % 24, p.minute, p.second);
}

/** The zone's offset from UTC at instant `ms` (wall clock minus UTC), to the second. */
const offsetAt = (tz: string, ms: number): number => wallMs(tz, Math.floor(ms / 1000) * 1000) - Math.floor(ms / 1000) * 1000;

/**
 * The instant a local wall-clock time (`wall`, read as UTC ms) happens in `tz`. A time that a
 * daylight-saving change skips happens at the first moment after the gap (02:30 on a spring-forward
 * day: the change itself, 03:00); one in a repeated hour at its first occurrence.
 */
export function wallToInstant(tz: string, wall: number): number {
  // the zone's offsets around that day (a change happens at most once within two days either way)
  const before = offsetAt(tz, wall - 2 * 86_400_000);
  const after = offsetAt(tz, wall + 2 * 86_400_000);
  const fits = [wall - before, wall - after].filter((ms) => wallMs(tz, ms) === wall).sort((a, b) => a - b);
  if (fits.length) return fits[0];
  // skipped: the change lies between the two readings; find its first minute on the later offset
  let lo = Math.min(wall - before, wall - after);
  let hi = Math.max(wall - before, wall - after);
  const later = offsetAt(tz, hi);
  while (hi - lo > 1000) {
    const mid = Math.floor((lo + hi) / 2000) * 1000;
    if (offsetAt(tz, mid) === later) hi = mid;
    else lo = mid;
  }
  return hi;
}

const DAY_MS = 86_400_000;
/** JavaScript's getUTCDay (0 = Sunday) as a weekday name. */
const weekdayOf = (civilMs: number): Weekday => WEEKDAYS[(new Date(civilMs).getUTCDay() + 6) % 7];

/**
 * The window's openings as [open, close) instants whose local day lies from `fromMs` - 2 days to
 * `toMs` + 1 day. `duration` is elapsed time: a 2h window on the night the clocks go back closes
 * two hours after it opened, whatever the wall clock says then.
 */
export function occurrences(w: ScheduleWindow, fromMs: number, toMs: number): Array<[number, number]> {
  const minutes = startMinutes(w.start);
  if (minutes === null) return [];
  const firstDay = Math.floor(wallMs(w.time_zone, fromMs) / DAY_MS) * DAY_MS - 2 * DAY_MS;
  const lastDay = Math.floor(wallMs(w.time_zone, toMs) / DAY_MS) * DAY_MS + DAY_MS;
  const out: Array<[number, number]> = [];
  for (let day = firstDay; day <= lastDay; day += DAY_MS) {
    if (!w.days.includes(weekdayOf(day))) continue;
    const open = wallToInstant(w.time_zone, day + minutes * 60_000);
    out.push([open, open + w.duration_ms]);
  }
  return out;
}

/** Whether a window selects an install: named, or labelled as its selector says (every install when neither is given). */
export function selects(w: ScheduleWindow, install: ScheduleInstall): boolean {
  const named = w.install_ids?.length ? w.install_ids : null;
  const labels = w.selector?.match_labels ?? null;
  if (!named && !labels) return true;
  if (named?.includes(install.install_id)) return true;
  return !!labels && Object.entries(labels).every(([k, v]) => install.labels[k] === v);
}

/** Whether a window applies to a kind of run (branch runs only unless applies_to says otherwise). */
export const appliesTo = (w: ScheduleWindow, kind: RunKind): boolean => (w.applies_to?.length ? w.applies_to : ['branch_run']).includes(kind);

const covers = (w: ScheduleWindow, at: number): boolean => occurrences(w, at, at).some(([open, close]) => open <= at && at < close);

/** The windows that hold the install at `at` ([] when it may start): the deny windows covering it, or every allow window when none covers it. */
function holding(ws: ScheduleWindow[], at: number): string[] {
  const denies = ws.filter((w) => w.kind === 'deny' && covers(w, at));
  if (denies.length) return denies.map((w) => w.window_id);
  const allows = ws.filter((w) => w.kind === 'allow');
  if (allows.length && !allows.some((w) => covers(w, at))) return allows.map((w) => w.window_id);
  return [];
}

/** How far ahead the next opening is looked for (a weekly schedule repeats within 7 days; DST shifts by hours). */
const HORIZON_MS = 15 * DAY_MS;

/**
 * May `install` start an update of a run of `kind` at `atMs`? It may when no deny window selecting
 * it covers that moment and, if any allow window selects it, one of them does. When it may not:
 * the first moment it may (a window's opening or closing; null when none within two weeks) and the
 * windows holding it.
 */
export function windowVerdict(windows: ScheduleWindow[], install: ScheduleInstall, kind: RunKind, atMs: number): WindowVerdict {
  const ws = windows.filter((w) => appliesTo(w, kind) && selects(w, install));
  const held = holding(ws, atMs);
  if (!held.length) return { may_start: true, next_window_at: null, window_ids: [] };
  const edges = new Set<number>();
  for (const w of ws) for (const [open, close] of occurrences(w, atMs, atMs + HORIZON_MS)) for (const e of [open, close]) if (e > atMs) edges.add(e);
  const next = [...edges].sort((a, b) => a - b).find((e) => holding(ws, e).length === 0);
  return { may_start: false, next_window_at: next === undefined ? null : new Date(next).toISOString(), window_ids: held };
}
