// The webhooks of one org in dispatch order, each with the key its filter is indexed by (issue 54):
// a path and the values the event must hold there for the filter to admit it (filterKeys). Of the
// keys a filter has, the one chosen is the one fewest other webhooks of the org share values with
// (`data.workflow.owner_id` naming one install, rather than `type` naming the type every filter
// names), so that for an event most of the filters that would refuse it are refused by one Set look-up
// of a value read once per event and path, without running. A filter's test still decides the rest:
// the key is a clause the filter has, so the index never admits what the filter refuses.
import { filterKeys, type Plain, readFields } from '../domain/event-filter.ts';
import type { WebhookSubscriber } from './subscriber.ts';

/** A webhook, and the key its filter is indexed by: slot -1 when it has none. */
export interface IndexedSubscriber {
  sub: WebhookSubscriber;
  /** the path's position in FilterIndex.paths */
  slot: number;
  /** the values the event must hold at the path */
  values: ReadonlySet<Plain>;
}

const NONE: ReadonlySet<Plain> = new Set();

/** A key of a filter, ready to count: its path as one string, its values without repeats. */
interface Key {
  path: string;
  fields: string[];
  values: Plain[];
}

/** Each subscriber's keys, read once (a subscriber is immutable: a changed webhook is a new one). */
const keysOf = new WeakMap<WebhookSubscriber, Key[]>();

function keys(sub: WebhookSubscriber): Key[] {
  let ks = keysOf.get(sub);
  if (!ks) {
    const doc = sub.filter !== null ? sub.entry.filter : undefined;
    ks = doc ? filterKeys(doc).map((k) => ({ path: JSON.stringify(k.fields), fields: k.fields, values: [...new Set(k.values)] })) : [];
    keysOf.set(sub, ks);
  }
  return ks;
}

export class FilterIndex {
  /** the org's webhooks, in the order of the registry's map (dispatch's order) */
  readonly entries: IndexedSubscriber[];
  /** the paths keys read, each as field keys */
  readonly paths: string[][];

  constructor(subs: Iterable<WebhookSubscriber>) {
    const all = [...subs];
    const subKeys = all.map(keys);
    // how many filters of the org name each value at each path
    const counts = new Map<string, Map<Plain, number>>();
    for (const ks of subKeys)
      for (const k of ks) {
        let byValue = counts.get(k.path);
        if (!byValue) counts.set(k.path, (byValue = new Map()));
        for (const v of k.values) byValue.set(v, (byValue.get(v) ?? 0) + 1);
      }
    const slots = new Map<string, number>();
    this.paths = [];
    this.entries = all.map((sub, i) => {
      let best: Key | null = null;
      let bestWeight = 0;
      for (const k of subKeys[i]) {
        // the filters an event holding one of these values would still run
        const byValue = counts.get(k.path)!;
        let weight = 0;
        for (const v of k.values) weight += byValue.get(v)!;
        if (best === null || weight < bestWeight) {
          best = k;
          bestWeight = weight;
        }
      }
      if (best === null) return { sub, slot: -1, values: NONE };
      let slot = slots.get(best.path);
      if (slot === undefined) {
        slot = this.paths.length;
        slots.set(best.path, slot);
        this.paths.push(best.fields);
      }
      return { sub, slot, values: new Set(best.values) };
    });
  }
}

/** The event's values at an index's paths, each read the first time it is asked. */
export class KeyValues {
  private readonly values: unknown[];
  private readonly read: boolean[];

  constructor(
    private readonly paths: string[][],
    private readonly event: () => unknown,
  ) {
    this.values = new Array(paths.length);
    this.read = new Array(paths.length).fill(false);
  }

  at(slot: number): unknown {
    if (!this.read[slot]) {
      this.read[slot] = true;
      this.values[slot] = readFields(this.event(), this.paths[slot]);
    }
    return this.values[slot];
  }
}
