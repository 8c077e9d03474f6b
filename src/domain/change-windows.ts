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

/** A window as POST /v1/apps/{app_id}/change-windows takes it (validated by src/schemas/change-windows.ts). */
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

const DAY_MS = 86_400_000;

const formatters = new Map<string, Intl.DateTimeFormat>();
function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(tz, f);
  }
  return f;
}

/** The wall clock of `tz` at instant `ms` as Intl reads it (to the second), read as if it were UTC (ms since the epoch). */
function readWallMs(tz: string, ms: number): number {
  const p: Record<string, number> = {};
  for (const part of formatter(tz).formatToParts(new Date(ms))) if (part.type !== 'literal') p[part.type] = Number(part.value);
  return Date.UTC(p.year, p.month - 1, p.day, p.hour % 24, p.minute, p.second);
}

/**
 * A zone's offsets over one UTC day: the offset at its start and, when the zone changes offset
 * within the day (a daylight-saving change), the first second on the new one. A zone changes its
 * offset at most once a day, so one Intl reading a day (and a bisection on the days it changes)
 * tells every second of it: reading Intl costs about 10 µs, and an evaluation of 50 windows over
 * a fortnight asks about ten thousand moments.
 */
interface DayOffsets {
  start: number;
  /** the first second (ms) on `after`; Infinity when the offset holds all day */
  change: number;
  after: number;
}
/** Per zone, per UTC day number: its offsets (cleared whole past DAY_OFFSETS_KEPT days in all). */
const dayOffsets = new Map<string, Map<number, DayOffsets>>();
const DAY_OFFSETS_KEPT = 100_000;
let dayOffsetsKept = 0;

function offsetsOfDay(tz: string, day: number): DayOffsets {
  let zone = dayOffsets.get(tz);
  if (!zone) dayOffsets.set(tz, (zone = new Map()));
  let d = zone.get(day);
  if (d) return d;
  const lo0 = day * DAY_MS;
  const read = (sec: number) => readWallMs(tz, sec) - sec;
  const start = read(lo0);
  const after = read(lo0 + DAY_MS);
  let change = Number.POSITIVE_INFINITY;
  if (after !== start) {
    let lo = lo0;
    let hi = lo0 + DAY_MS;
    while (hi - lo > 1000) {
      const mid = Math.floor((lo + hi) / 2000) * 1000;
      if (read(mid) === start) lo = mid;
      else hi = mid;
    }
    change = hi;
  }
  d = { start, change, after };
  if (dayOffsetsKept >= DAY_OFFSETS_KEPT) {
    dayOffsets.clear();
    dayOffsetsKept = 0;
    dayOffsets.set(tz, zone);
    zone.clear();
  }
  zone.set(day, d);
  dayOffsetsKept++;
  return d;
}

/** The zone's offset from UTC at instant `ms` (wall clock minus UTC), to the second. */
function offsetAt(tz: string, ms: number): number {
  const sec = Math.floor(ms / 1000) * 1000;
  const d = offsetsOfDay(tz, Math.floor(sec / DAY_MS));
  return sec >= d.change ? d.after : d.start;
}

/** The wall clock of `tz` at instant `ms` (to the second), read as if it were UTC (ms since the epoch). */
export function wallMs(tz: string, ms: number): number {
  const sec = Math.floor(ms / 1000) * 1000;
  return sec + offsetAt(tz, sec);
}

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

/** JavaScript's getUTCDay (0 = Sunday) as a weekday name. */
const weekdayOf = (civilMs: number): Weekday => WEEKDAYS[(new Date(civilMs).getUTCDay() + 6) % 7];

/** A window's opening on one local day: [open, close) instants and the local day (its wall-clock midnight, read as UTC ms). */
interface Opening {
  day: number;
  open: number;
  close: number;
}

/** The window's openings whose local day lies from `fromMs` - 2 days to `toMs` + 1 day, in order. */
function openings(w: ScheduleWindow, fromMs: number, toMs: number): Opening[] {
  const minutes = startMinutes(w.start);
  if (minutes === null) return [];
  const firstDay = Math.floor(wallMs(w.time_zone, fromMs) / DAY_MS) * DAY_MS - 2 * DAY_MS;
  const lastDay = Math.floor(wallMs(w.time_zone, toMs) / DAY_MS) * DAY_MS + DAY_MS;
  const out: Opening[] = [];
  for (let day = firstDay; day <= lastDay; day += DAY_MS) {
    if (!w.days.includes(weekdayOf(day))) continue;
    const open = wallToInstant(w.time_zone, day + minutes * 60_000);
    out.push({ day, open, close: open + w.duration_ms });
  }
  return out;
}

/**
 * The window's openings as [open, close) instants whose local day lies from `fromMs` - 2 days to
 * `toMs` + 1 day. `duration` is elapsed time: a 2h window on the night the clocks go back closes
 * two hours after it opened, whatever the wall clock says then.
 */
export function occurrences(w: ScheduleWindow, fromMs: number, toMs: number): Array<[number, number]> {
  return openings(w, fromMs, toMs).map((o) => [o.open, o.close]);
}

/** Whether a window selects an install: named, or labelled as its selector says (every install when neither is given). */
export function selects(w: ScheduleWindow, install: ScheduleInstall): boolean {
  return selector(w)(install);
}

/** A window's selection as a test of an install (the named ids in a set: a window may name 1,000). */
function selector(w: ScheduleWindow): (install: ScheduleInstall) => boolean {
  const named = w.install_ids?.length ? new Set(w.install_ids) : null;
  const labels = w.selector?.match_labels ? Object.entries(w.selector.match_labels) : null;
  if (!named && !labels) return () => true;
  return (install) => !!named?.has(install.install_id) || (!!labels && labels.every(([k, v]) => install.labels[k] === v));
}

/** Whether a window applies to a kind of run (branch runs only unless applies_to says otherwise). */
export const appliesTo = (w: ScheduleWindow, kind: RunKind): boolean =>
  (w.applies_to?.length ? w.applies_to : ['branch_run']).includes(kind);

/** How far ahead the next opening is looked for (a weekly schedule repeats within 7 days; DST shifts by hours). */
const HORIZON_MS = 15 * DAY_MS;

/** The verdicts of one evaluation: per install, what the schedule says of it at the planner's moment. */
export type WindowPlanner = (install: ScheduleInstall) => WindowVerdict;

/**
 * The schedule of an app's windows for runs of `kind` at `atMs`, for asking about any number of
 * installs (a plan, a deploy batch, a review of waits). The cost is linear: each window's openings
 * are computed once (with Intl, a few readings per day of the horizon), merged into one sorted list
 * of edges, and each install is answered by one sweep over the edges of the windows selecting it,
 * stopping at the first moment it may start; installs selected by the same windows share an answer.
 *
 * May an install start an update at `atMs`? It may when no deny window selecting it covers that
 * moment and, if any allow window selects it, one of them does. When it may not: the first moment
 * it may (a window's opening or closing within the horizon; null when none within two weeks) and
 * the windows holding it (the deny windows covering it, or every allow window when none covers it).
 */
export function windowPlanner(windows: ScheduleWindow[], kind: RunKind, atMs: number): WindowPlanner {
  const ws = windows.filter((w) => appliesTo(w, kind));
  const tests = ws.map(selector);
  const deny = ws.map((w) => w.kind === 'deny');
  /** per window: how many of its openings cover atMs */
  const coverAt = new Array<number>(ws.length).fill(0);
  // each window's openings once: those of the horizon are candidate edges; two days more are read
  // only to know what covers an edge near the horizon's end
  const found: Array<{ t: number; k: number; d: 1 | -1; edge: boolean }> = [];
  ws.forEach((w, k) => {
    const horizonDay = Math.floor(wallMs(w.time_zone, atMs + HORIZON_MS) / DAY_MS) * DAY_MS + DAY_MS;
    for (const o of openings(w, atMs, atMs + HORIZON_MS + 2 * DAY_MS)) {
      if (o.open <= atMs && atMs < o.close) coverAt[k]++;
      const edge = o.day <= horizonDay;
      if (o.open > atMs) found.push({ t: o.open, k, d: 1, edge });
      if (o.close > atMs) found.push({ t: o.close, k, d: -1, edge });
    }
  });
  found.sort((a, b) => a.t - b.t);
  // the edges as flat arrays: an install's sweep reads them a thousand times over in a plan
  const n = found.length;
  const times = Float64Array.from(found, (e) => e.t);
  const owners = Int32Array.from(found, (e) => e.k);
  const deltas = Int8Array.from(found, (e) => e.d);
  const edges = Uint8Array.from(found, (e) => (e.edge ? 1 : 0));
  const isDeny = Uint8Array.from(deny, (d) => (d ? 1 : 0));

  const bySelection = new Map<string, WindowVerdict>();
  const selected = new Uint8Array(ws.length);
  return (install) => {
    const chosen: number[] = [];
    for (let k = 0; k < ws.length; k++) if (tests[k](install)) chosen.push(k);
    const key = chosen.join(',');
    let v = bySelection.get(key);
    if (!v) {
      v = verdictOf(chosen);
      bySelection.set(key, v);
    }
    return v;
  };

  function verdictOf(chosen: number[]): WindowVerdict {
    const denies = chosen.filter((k) => deny[k] && coverAt[k] > 0);
    const allows = chosen.filter((k) => !deny[k]);
    let allowActive = allows.reduce((sum, k) => sum + coverAt[k], 0);
    const held = denies.length ? denies : allows.length && allowActive === 0 ? allows : [];
    if (!held.length) return { may_start: true, next_window_at: null, window_ids: [] };
    let denyActive = denies.reduce((sum, k) => sum + coverAt[k], 0);
    for (const k of chosen) selected[k] = 1;
    // the first edge (of the windows selecting it) after which no deny covers it and, with allows, one does
    let next: number | null = null;
    const needAllow = allows.length > 0;
    let candidate = false;
    for (let i = 0; i < n; i++) {
      const k = owners[i];
      if (selected[k]) {
        if (edges[i]) candidate = true;
        if (isDeny[k]) denyActive += deltas[i];
        else allowActive += deltas[i];
      }
      // the end of the edges at one moment: is the install free from it on?
      if (candidate && (i + 1 === n || times[i + 1] !== times[i])) {
        if (denyActive === 0 && (!needAllow || allowActive > 0)) {
          next = times[i];
          break;
        }
        candidate = false;
      }
    }
    for (const k of chosen) selected[k] = 0;
    return {
      may_start: false,
      next_window_at: next === null ? null : new Date(next).toISOString(),
      window_ids: held.map((k) => ws[k].window_id),
    };
  }
}

/** May `install` start an update of a run of `kind` at `atMs`? One install's answer of windowPlanner (ask the planner itself for many). */
export function windowVerdict(windows: ScheduleWindow[], install: ScheduleInstall, kind: RunKind, atMs: number): WindowVerdict {
  return windowPlanner(
    windows.filter((w) => selects(w, install)),
    kind,
    atMs,
  )(install);
}
