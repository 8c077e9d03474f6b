// Durations as people write them in options, API bodies and queries: `500ms`, `90s`, `15m`, `24h`,
// `7d` (a number, decimals allowed, and one unit). One parser for the CLI's options, the history's
// `since`/`until` and a health gate's `bake`.

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** The duration in whole milliseconds (0 allowed); null when the text is not a duration. */
export function durationMs(text: string): number | null {
  const m = /^(\d{1,12}(?:\.\d{1,6})?)(ms|s|m|h|d)$/.exec(text.trim());
  return m ? Math.round(Number(m[1]) * UNITS[m[2]]) : null;
}

/**
 * A time bound as people give it (`since`, `until`): an ISO 8601 time, or a duration back from
 * `nowMs` (`2h`). Milliseconds since the epoch; null when the text is neither.
 */
export function timeBoundMs(text: string, nowMs: number): number | null {
  const t = text.trim();
  const back = durationMs(t);
  if (back !== null) return nowMs - back;
  const ms = /^\d{4}-\d{2}-\d{2}/.test(t) ? Date.parse(t) : Number.NaN;
  return Number.isNaN(ms) ? null : ms;
}
