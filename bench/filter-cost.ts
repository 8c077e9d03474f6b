// What payload filters cost dispatch (issue 54, CONTRACT 10.2): `npx tsx bench/filter-cost.ts`.
//
// One org of 1,000 webhooks and events that each go to 100 of them (fan-out x100), decided two ways
// in the same run, alternating rounds:
//   match:   no filters; each webhook's `match` names one of 10 installs (100 webhooks per install);
//   filters: no match; every webhook carries a 20-operator filter whose last clause (the one that
//            selects) names the install, so all 1,000 filters run in full for every event (the
//            worst case: nothing short-circuits before the last clause) and 100 admit it;
//   distinct: the same with no clause shared between webhooks (each operand its webhook's own);
//   match+filters, match+distinct: `match` selects the 100 and every webhook carries a filter too,
//            run on the 100 that match admits (the x100 of bench/run.ts with a filter on every webhook).
// Each event is a real CloudEvent body (toCloudEvent) with its route, decided by WebhookRegistry.match
// (what the pipeline calls, the body parsed once when a filter needs it). The figure: dispatch's
// µs per event each way, and what the difference would do to the x100 throughput of
// bench/results/latest.json (svc's CPU per delivery there × 100 = its CPU per event).
// Results: stdout, and bench/results/filter-cost.json.
//
// FILTER_BENCH_BEFORE=<dir>: the same arms also with the registry of another tree of svc (an earlier
// commit, e.g. `git archive <commit> src | tar -x -C <dir>`), in the same rounds, alternating with this
// one's: a change's before and after under the same load.
import fs from 'node:fs';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { checkFilter, type EventFilter } from '../src/domain/event-filter.ts';
import type { EventRoute } from '../src/domain/event-route.ts';
import type { WebhookEntry } from '../src/domain/webhook-entry.ts';
import { WebhookRegistry } from '../src/dispatch/registry.ts';
import { sourceFor, toCloudEvent } from '../src/events/cloudevent.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const ORG = 'org_bench';
const WEBHOOKS = 1000;
const INSTALLS = 10;
const EVENTS = Number(process.env.FILTER_BENCH_EVENTS ?? '1000');
const ROUNDS = Number(process.env.FILTER_BENCH_ROUNDS ?? '5');

const installOf = (i: number) => `inst_${i % INSTALLS}`;

/** 20 operators, the selecting one last (data.workflow.owner_id.$in). */
function filterFor(install: string): EventFilter {
  return {
    type: { $in: ['com.svc.workflow.lifecycle.v1', 'com.svc.workflow_step.lifecycle.v1'] },
    specversion: { $eq: '1.0' },
    subject: { $startsWith: `${ORG}/`, $endsWith: '/started' },
    time: { $gte: '2000-01-01T00:00:00Z', $lt: '2100-01-01T00:00:00Z' },
    svcorgid: { $neq: 'org_other' },
    datacontenttype: { $exist: true },
    interests: { $contains: { $startsWith: 'resource:' } },
    data: {
      transition: { $nin: ['cancelled', 'failed'] },
      org_id: { $eq: ORG },
      $not: { kind: { $eq: 'drift_detected' } },
      $or: [{ kind: 'workflow' }, { kind: 'workflow_step' }],
      links: { org: { $exist: true } },
      workflow: {
        type: { $in: ['provision', 'reprovision'] },
        id: { $startsWith: 'bwf_' },
        owner_type: { $eq: 'installs' },
        owner_id: { $in: [install] },
      },
    },
  };
}

/** 20 operators again, each clause with an operand of this webhook alone: nothing shared between webhooks. */
function distinctFilterFor(install: string, i: number): EventFilter {
  const u = `u${i}`;
  return {
    type: { $in: ['com.svc.workflow.lifecycle.v1', 'com.svc.workflow_step.lifecycle.v1', u] },
    specversion: { $neq: u },
    subject: { $nin: [u], $endsWith: '/started' },
    time: { $gte: `2000-01-01T00:00:00Z${u}`, $lt: `2100-01-01T00:00:00Z${u}` },
    svcorgid: { $neq: u },
    datacontenttype: { $nin: [u] },
    interests: { $contains: { $nin: [u] } },
    data: {
      transition: { $nin: ['cancelled', 'failed', u] },
      org_id: { $in: [ORG, u] },
      $not: { kind: { $eq: u } },
      $or: [{ kind: 'workflow' }, { kind: u }],
      links: { org: { $neq: u } },
      workflow: { type: { $in: ['provision', u] }, id: { $neq: u }, owner_type: { $nin: [u] }, owner_id: { $in: [install, u] } },
    },
  };
}

type Arm = 'match' | 'filters' | 'distinct' | 'match+filters' | 'match+distinct';

function entry(i: number, arm: Arm): WebhookEntry {
  const install = installOf(i);
  const byMatch = arm === 'match' || arm === 'match+filters' || arm === 'match+distinct';
  const filter =
    arm === 'filters' || arm === 'match+filters'
      ? filterFor(install)
      : arm === 'distinct' || arm === 'match+distinct'
        ? distinctFilterFor(install, i)
        : null;
  return {
    webhook_id: `wh_${i}`,
    org_id: ORG,
    url: `http://127.0.0.1:1/h/${i}`,
    secret: null,
    previous_secret: null,
    previous_secret_expires_at: null,
    interests: { all_events: true },
    match: byMatch ? { installs: { ids: [install] } } : null,
    ...(filter ? { filter } : {}),
  };
}

/** What the bench needs of a registry (this tree's, or another's). */
interface Registry {
  upsert(entry: WebhookEntry, rev?: number): boolean;
  match(route: EventRoute, body?: Buffer | string): unknown[];
}
type RegistryClass = new () => Registry;

function registry(arm: Arm, Class: RegistryClass): Registry {
  const r = new Class();
  for (let i = 0; i < WEBHOOKS; i++) r.upsert(entry(i, arm), i + 1);
  return r;
}

function events(): Array<{ route: EventRoute; body: Buffer }> {
  const out: Array<{ route: EventRoute; body: Buffer }> = [];
  for (let n = 0; n < EVENTS; n++) {
    const install = installOf(n);
    const ev = toCloudEvent(
      {
        kind: 'workflow',
        transition: 'started',
        org_id: ORG,
        time: new Date(Date.UTC(2026, 11, 7, 12, 0, n % 60)).toISOString(),
        workflow: { id: `bwf_${n}`, type: 'provision', owner_id: install, owner_type: 'installs' },
        install_id: install,
      },
      { source: sourceFor('http://127.0.0.1:8080'), baseUrl: 'http://127.0.0.1:8080', dashboardUrl: 'http://127.0.0.1:8080/dashboard' },
    );
    if (!ev) throw new Error('the bench event is not classified');
    const route: EventRoute = {
      org: ORG,
      type: ev.type,
      resource: 'installs',
      op: 'provision',
      event: 'lifecycle.started',
      install: { id: install, labels: {} },
      component: null,
      action: null,
      rev: 0,
    };
    out.push({ route, body: Buffer.from(JSON.stringify(ev), 'utf8') });
  }
  return out;
}

/** µs per event to decide its webhooks; checks the fan-out is 100. */
function timeOne(r: Registry, evs: Array<{ route: EventRoute; body: Buffer }>): number {
  let total = 0;
  // CPU time of this thread, not wall time: other load on the machine does not count
  const c0 = process.cpuUsage();
  for (const e of evs) total += r.match(e.route, e.body).length;
  const c = process.cpuUsage(c0);
  const us = (c.user + c.system) / evs.length;
  if (total !== evs.length * (WEBHOOKS / INSTALLS)) throw new Error(`fan-out ${total / evs.length}, not ${WEBHOOKS / INSTALLS}`);
  return us;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** The figures of one registry's arms: medians, rounds, and the projected x100 throughput ratios. */
function figures(rounds: Map<Arm, number[]>, arms: Arm[], perEvent: number) {
  const us = Object.fromEntries(arms.map((a) => [a, round(median(rounds.get(a)!))])) as Record<Arm, number>;
  const ratio = (arm: Arm) => round(perEvent / (perEvent + Math.max(0, us[arm] - us.match)), 3);
  return {
    us,
    ratio,
    json: {
      dispatch_us_per_event: us,
      rounds_us: Object.fromEntries(arms.map((a) => [a, rounds.get(a)!.map((x) => round(x))])),
      projected_throughput_ratio: {
        filters: ratio('filters'),
        distinct: ratio('distinct'),
        'match+filters': ratio('match+filters'),
        'match+distinct': ratio('match+distinct'),
      },
    },
  };
}

async function main(): Promise<void> {
  for (const f of [filterFor('inst_0'), distinctFilterFor('inst_0', 7)]) {
    const ops = JSON.stringify(f).match(/"\$/g)?.length ?? 0;
    if (ops !== 20 || checkFilter(f).length) throw new Error(`a filter has ${ops} operators or is invalid`);
  }
  const arms: Arm[] = ['match', 'filters', 'distinct', 'match+filters', 'match+distinct'];
  const trees: Array<{ name: 'after' | 'before'; Class: RegistryClass }> = [{ name: 'after', Class: WebhookRegistry }];
  const beforeDir = process.env.FILTER_BENCH_BEFORE;
  if (beforeDir) {
    const mod = await import(path.resolve(beforeDir, 'src/dispatch/registry.ts'));
    trees.push({ name: 'before', Class: mod.WebhookRegistry });
  }
  const runs = trees.flatMap((t) => arms.map((a) => ({ tree: t.name, arm: a, reg: registry(a, t.Class), rounds: [] as number[] })));
  const evs = events();
  for (const r of runs) timeOne(r.reg, evs); // warm-up
  // a collection before each measurement, so that an arm does not pay for the garbage of the one before it;
  // arm by arm, the trees in turn, the first one alternating between rounds
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  for (let i = 0; i < ROUNDS; i++)
    for (const a of arms) {
      const turn = runs.filter((r) => r.arm === a);
      for (const r of i % 2 ? turn.reverse() : turn) {
        gc();
        r.rounds.push(timeOne(r.reg, evs));
      }
    }
  const latest = JSON.parse(fs.readFileSync(path.join(ROOT, 'bench/results/latest.json'), 'utf8'));
  const x100 = latest.summary_median?.x100?.svc;
  const cpuPerDelivery: number = x100?.sut_cpu_us_per_delivery ?? Number.NaN;
  const perEvent = cpuPerDelivery * 100;
  const of = (tree: string) => figures(new Map(runs.filter((r) => r.tree === tree).map((r) => [r.arm, r.rounds])), arms, perEvent);
  const after = of('after');
  const before = beforeDir ? of('before') : null;
  const result = {
    generated_at: new Date().toISOString(),
    loadavg: fs.readFileSync('/proc/loadavg', 'utf8').trim(),
    webhooks: WEBHOOKS,
    fanout: WEBHOOKS / INSTALLS,
    operators_per_filter: 20,
    events: EVENTS,
    rounds: ROUNDS,
    ...after.json,
    x100_from_latest: {
      deliveries_per_sec: x100?.deliveries_per_sec ?? null,
      sut_cpu_us_per_delivery: cpuPerDelivery,
      cpu_us_per_event: perEvent,
      projected_throughput_ratio: after.json.projected_throughput_ratio,
    },
    ...(before ? { before: { tree: beforeDir, ...before.json } } : {}),
  };
  for (const [name, f] of before ? [['before', before] as const, ['after', after] as const] : [['', after] as const]) {
    const { us, ratio } = f;
    console.log(
      `${name ? `${name}: ` : ''}dispatch µs per event, 1,000 webhooks, fan-out 100: match ${us.match}; ` +
        `20-operator filters ${us.filters} (nothing shared: ${us.distinct}); ` +
        `match + filters ${us['match+filters']} (nothing shared: ${us['match+distinct']}).\n` +
        `  x100 in latest.json costs svc ${perEvent} µs of CPU per event: throughput with filters ≈ ${ratio('filters')}, ` +
        `nothing shared ≈ ${ratio('distinct')}, match + filters ≈ ${ratio('match+filters')}, ` +
        `match + nothing shared ≈ ${ratio('match+distinct')} of without`,
    );
  }
  fs.writeFileSync(path.join(ROOT, 'bench/results/filter-cost.json'), `${JSON.stringify(result, null, 2)}\n`);
}

const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;

await main();
