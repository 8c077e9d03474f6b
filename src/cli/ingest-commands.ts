// `svc ingest rejections` (CONTRACT 9 "Durable ingest"): the org's facts that svc acknowledged and
// the engine refused later, newest first, over GET /v1/ingest/rejections.
import type { Command } from 'commander';
import { group, handle, leaf, str } from './command-kit.ts';
import { UsageError } from './exit-errors.ts';
import { printJson, printTable } from './output.ts';
import type { IngestRejectionView } from '../services/ingest-rejections.ts';
import type { Page } from '../services/history.ts';

/** What the API gives per page at most. */
const PAGE = 500;
/** What --limit may ask for: every refusal an org keeps (store/ingest-rejections.ts MAX_REJECTIONS_PER_ORG). */
const MAX_LIMIT = 10_000;
/** A fact's cell in the table: its compact JSON (or its text) cut to this many characters (the whole of it with --json). */
const FACT_CELL = 80;

/** Producer text, safe on a terminal: control characters shown as `?`, in one cell. */
const printable = (text: string) => text.replace(/[\x00-\x1f\x7f-\x9f\u2028\u2029]/g, '?');

function factCell(fact: unknown): string {
  const text = printable(typeof fact === 'string' ? fact : JSON.stringify(fact));
  return text.length > FACT_CELL ? `${text.slice(0, FACT_CELL - 1)}…` : text;
}

/** `--limit`: a whole number from 1 to MAX_LIMIT (default 100); checked before any request (exit 2). */
function limitOption(v: string | undefined): number {
  if (v === undefined) return 100;
  const t = v.trim();
  if (/^\d{1,6}$/.test(t) && Number(t) >= 1 && Number(t) <= MAX_LIMIT) return Number(t);
  throw new UsageError(`--limit ${JSON.stringify(v)}: a whole number from 1 to ${MAX_LIMIT}`);
}

export function registerIngestCommands(program: Command): void {
  const ingest = group(program, 'ingest', "the org's producer facts as svc ingested them (CONTRACT 9)");
  handle(
    leaf(ingest, 'rejections', 'facts svc acknowledged and the engine refused later, newest first (kept for --event-retention)').option(
      '--limit <n>',
      `at most this many, the newest (1 to ${MAX_LIMIT}, default 100)`,
    ),
    async (run) => {
      const limit = limitOption(str(run.opts.limit));
      const list: IngestRejectionView[] = [];
      let after: string | undefined;
      do {
        const q = new URLSearchParams({ limit: String(Math.min(PAGE, limit - list.length)) });
        if (after) q.set('after', after);
        const page = await run.api().get<Page<IngestRejectionView>>(`/v1/ingest/rejections?${q}`);
        list.push(...page.data);
        after = page.next_cursor ?? undefined;
      } while (after && list.length < limit);
      if (run.json) return printJson(list);
      printTable(
        ['received_at', 'subject', 'error', 'fact'],
        list.map((r) => [r.received_at, printable(r.subject), printable(r.error), factCell(r.fact)]),
        'no rejections',
      );
    },
  );
}
