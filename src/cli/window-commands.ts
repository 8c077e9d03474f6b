// `svc apps windows list|create|delete APP …` (CONTRACT 7, new in 0.2): an app's change windows
// (CONTRACT 4.3 "Change windows") over the API. Usage errors (exit 2) come before any request.
import type { Command } from 'commander';
import { seg } from './api-client.ts';
import { group, handle, leaf, parseSelector, str } from './command-kit.ts';
import { UsageError } from './exit-errors.ts';
import { printFields, printJson, printTable, println } from './output.ts';
import { RUN_KINDS, startMinutes, WEEKDAYS } from '../domain/change-windows.ts';
import type { ChangeWindowOut } from '../schemas/change-windows.ts';

const collect = (v: string, prev: string[]) => [...prev, v];
const list = (text: string) =>
  text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/** Who a window selects, as people read it. */
const whom = (w: ChangeWindowOut) =>
  [
    w.install_ids?.length ? w.install_ids.join(',') : '',
    w.selector
      ? Object.entries(w.selector.match_labels)
          .map(([k, v]) => `${k}=${v}`)
          .join(',')
      : '',
  ]
    .filter(Boolean)
    .join(' ') || 'all installs';

export function registerWindowCommands(apps: Command): void {
  const windows = group(
    apps,
    'windows',
    "an app's change windows: when its installs may (allow) or may not (deny) start an update of a run",
  );
  handle(leaf(windows, 'list <app_id>', "list an app's change windows"), async (run) => {
    const [app] = run.args;
    const ws = await run.api().get<ChangeWindowOut[]>(`/v1/apps/${seg(app)}/change-windows`);
    if (run.json) return printJson(ws);
    printTable(
      ['window_id', 'name', 'kind', 'days', 'start', 'duration', 'time_zone', 'installs', 'applies_to'],
      (ws ?? []).map((w) => [
        w.window_id,
        w.name,
        w.kind,
        w.days.join(','),
        w.start,
        w.duration,
        w.time_zone,
        whom(w),
        w.applies_to.join(','),
      ]),
      'no change windows',
    );
  });
  handle(
    leaf(windows, 'create <app_id>', 'create a change window')
      .requiredOption('--name <name>', 'what to call it')
      .requiredOption('--kind <allow|deny>', 'allow: installs it selects start updates only inside it; deny: never inside it')
      .requiredOption('--days <days>', `days of the week, comma separated (${WEEKDAYS.join(',')})`)
      .requiredOption('--start <HH:MM>', 'when it opens, local to --time-zone')
      .requiredOption('--duration <duration>', 'how long it stays open, 15m to 24h (e.g. 2h)')
      .requiredOption('--time-zone <iana>', 'an IANA time zone, e.g. America/Los_Angeles (daylight saving included)')
      .option('--install <install_id>', 'only this install (repeat for more)', collect, [] as string[])
      .option('--selector <k=v,...>', 'only the installs with these labels')
      .option('--applies-to <kinds>', `the runs it holds, comma separated (${RUN_KINDS.join(',')}; default branch_run)`),
    async (run) => {
      const [app] = run.args;
      const kind = str(run.opts.kind)!;
      if (kind !== 'allow' && kind !== 'deny') throw new UsageError(`--kind ${JSON.stringify(kind)}: allow or deny`);
      const days = list(str(run.opts.days)!);
      const badDay = days.find((d) => !(WEEKDAYS as readonly string[]).includes(d));
      if (!days.length || badDay !== undefined)
        throw new UsageError(`--days ${JSON.stringify(run.opts.days)}: days of the week, comma separated (${WEEKDAYS.join(',')})`);
      const start = str(run.opts.start)!;
      if (startMinutes(start) === null) throw new UsageError(`--start ${JSON.stringify(start)}: HH:MM, 00:00 to 23:59`);
      const body: Record<string, unknown> = {
        name: str(run.opts.name),
        kind,
        days,
        start,
        duration: str(run.opts.duration),
        time_zone: str(run.opts.timeZone),
      };
      const installs = (run.opts.install as string[] | undefined) ?? [];
      if (installs.length) body.install_ids = installs;
      const selector = str(run.opts.selector);
      if (selector !== undefined) body.selector = { match_labels: parseSelector(selector) };
      const appliesTo = str(run.opts.appliesTo);
      if (appliesTo !== undefined) {
        const kinds = list(appliesTo);
        if (!kinds.length || kinds.some((k) => !(RUN_KINDS as readonly string[]).includes(k)))
          throw new UsageError(`--applies-to ${JSON.stringify(appliesTo)}: ${RUN_KINDS.join(', ')}, comma separated`);
        body.applies_to = kinds;
      }
      const w = await run.api().post<ChangeWindowOut>(`/v1/apps/${seg(app)}/change-windows`, body);
      if (run.json) return printJson(w);
      printFields([
        ['window_id', w.window_id],
        ['name', w.name],
        ['kind', w.kind],
        ['when', `${w.days.join(',')} ${w.start} for ${w.duration} (${w.time_zone})`],
        ['installs', whom(w)],
        ['applies_to', w.applies_to.join(',')],
      ]);
    },
  );
  handle(
    leaf(windows, 'delete <app_id> <window_id>', 'delete a change window (installs it held start at once if nothing else holds them)'),
    async (run) => {
      const [app, id] = run.args;
      await run.api().del(`/v1/apps/${seg(app)}/change-windows/${seg(id)}`);
      if (run.json) return printJson({ deleted: id });
      println(`deleted change window ${id}`);
    },
  );
}
