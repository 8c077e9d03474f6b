// Payload filters (CONTRACT 10.2, issue 54): every operator, nesting, arrays, missing paths, null,
// combinators and unicode, each case against the expected answer and against a reference
// evaluator written here plainly from the contract's words (a recursive walk, no compilation);
// the deciding clause of the dry runs; and the checks on write (malformed, depth, operators, size).
import { describe, expect, it } from 'vitest';
import { checkFilter, compileFilter, filterFields, FILTER_LIMITS, type EventFilter } from '../../src/domain/event-filter.ts';

const MISSING = Symbol('missing');
type V = unknown;

/** The reference: the contract's rules, read one by one, on (value | MISSING). */
function ref(f: V, v: V): boolean {
  const isObj = (x: V): x is Record<string, V> => typeof x === 'object' && x !== null && !Array.isArray(x);
  if (!isObj(f)) return v !== MISSING && !Array.isArray(v) && v === f;
  return Object.entries(f).every(([k, arg]) => {
    if (!k.startsWith('$')) return ref(arg, isObj(v) && Object.hasOwn(v, k) ? v[k] : MISSING);
    const present = v !== MISSING;
    const sameType = typeof v === typeof arg && (typeof v === 'number' || typeof v === 'string');
    const cp = (a: string, b: string): number => {
      const x = [...a].map((c) => c.codePointAt(0)!);
      const y = [...b].map((c) => c.codePointAt(0)!);
      for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
      return x.length - y.length;
    };
    const c = (): number => (typeof v === 'string' ? cp(v, arg as string) : (v as number) - (arg as number));
    switch (k) {
      case '$eq':
        return present && v === arg;
      case '$neq':
        return !present || v !== arg;
      case '$gt':
        return present && sameType && c() > 0;
      case '$gte':
        return present && sameType && c() >= 0;
      case '$lt':
        return present && sameType && c() < 0;
      case '$lte':
        return present && sameType && c() <= 0;
      case '$in':
        return present && !Array.isArray(v) && !isObj(v) && (arg as V[]).includes(v);
      case '$nin':
        return !present || Array.isArray(v) || isObj(v) || !(arg as V[]).includes(v);
      case '$startsWith':
        return typeof v === 'string' && v.startsWith(arg as string);
      case '$endsWith':
        return typeof v === 'string' && v.endsWith(arg as string);
      case '$exist':
        return present === arg;
      case '$contains':
        return Array.isArray(v) && v.some((e) => ref(arg, e));
      case '$and':
        return (arg as V[]).every((g) => ref(g, v));
      case '$or':
        return (arg as V[]).some((g) => ref(g, v));
      case '$not':
        return !ref(arg, v);
      default:
        throw new Error(`unknown ${k}`);
    }
  });
}

const ev = {
  type: 'com.svc.workflow_step.lifecycle.v1',
  subject: 'org_1/workflow_step/wf_1/st_1/failed',
  time: '2026-12-07T10:00:00.000Z',
  sequence: '00000000000000000042',
  data: {
    transition: 'failed',
    count: 7,
    ratio: 0.5,
    ok: false,
    nothing: null,
    tags: ['blue', 'green'],
    nums: [1, 5, 9],
    items: [
      { name: 'a', size: 1 },
      { name: 'b', size: 10 },
    ],
    install: { id: 'ins_1', labels: { ring: 'prod', region: 'eu-1', 'app.k8s.io/name': 'web' } },
    name: 'Zürich — 東京 😀',
    empty: '',
  },
};

// [name, filter, matched, deciding clause]
const CASES: Array<[string, EventFilter, boolean, string]> = [
  ['plain string equal', { type: 'com.svc.workflow_step.lifecycle.v1' }, true, 'type'],
  ['plain string differs', { type: 'com.svc.workflow.lifecycle.v1' }, false, 'type'],
  ['plain number equal', { data: { count: 7 } }, true, 'data.count'],
  ['plain number vs string', { data: { count: '7' } }, false, 'data.count'],
  ['plain boolean false', { data: { ok: false } }, true, 'data.ok'],
  ['plain null matches null', { data: { nothing: null } }, true, 'data.nothing'],
  ['plain null vs missing', { data: { absent: null } }, false, 'data.absent'],
  ['plain value vs array in event', { data: { tags: 'blue' } }, false, 'data.tags'],
  ['nested object by keys', { data: { install: { labels: { ring: 'prod', region: 'eu-1' } } } }, true, 'data.install.labels.region'],
  ['nested, one key differs', { data: { install: { labels: { ring: 'prod', region: 'us-1' } } } }, false, 'data.install.labels.region'],
  ['field of a non-object is missing', { data: { count: { x: 1 } } }, false, 'data.count.x'],
  ['label key with dots', { data: { install: { labels: { 'app.k8s.io/name': 'web' } } } }, true, 'data.install.labels.app.k8s.io/name'],
  ['$eq', { data: { transition: { $eq: 'failed' } } }, true, 'data.transition.$eq'],
  ['$eq null', { data: { nothing: { $eq: null } } }, true, 'data.nothing.$eq'],
  ['$eq missing', { data: { absent: { $eq: 'x' } } }, false, 'data.absent.$eq'],
  ['$neq differs', { data: { transition: { $neq: 'succeeded' } } }, true, 'data.transition.$neq'],
  ['$neq same', { data: { transition: { $neq: 'failed' } } }, false, 'data.transition.$neq'],
  ['$neq missing matches', { data: { absent: { $neq: 'x' } } }, true, 'data.absent.$neq'],
  ['$neq null vs null', { data: { nothing: { $neq: null } } }, false, 'data.nothing.$neq'],
  ['$gt number', { data: { count: { $gt: 6 } } }, true, 'data.count.$gt'],
  ['$gt number equal', { data: { count: { $gt: 7 } } }, false, 'data.count.$gt'],
  ['$gte number equal', { data: { count: { $gte: 7 } } }, true, 'data.count.$gte'],
  ['$lt fraction', { data: { ratio: { $lt: 0.6 } } }, true, 'data.ratio.$lt'],
  ['$lte', { data: { ratio: { $lte: 0.4 } } }, false, 'data.ratio.$lte'],
  ['$gt string vs number', { data: { count: { $gt: '1' } } }, false, 'data.count.$gt'],
  ['$gt null does not compare', { data: { nothing: { $gt: 0 } } }, false, 'data.nothing.$gt'],
  ['$gt missing', { data: { absent: { $gt: 0 } } }, false, 'data.absent.$gt'],
  ['ISO time range', { time: { $gte: '2026-12-07T00:00:00Z', $lt: '2026-12-08T00:00:00Z' } }, true, 'time.$lt'],
  ['ISO time before', { time: { $lt: '2026-12-07T09:00:00Z' } }, false, 'time.$lt'],
  ['sequence as string', { sequence: { $gt: '00000000000000000041' } }, true, 'sequence.$gt'],
  ['code point order past the BMP', { data: { name: { $gt: 'Zürich — 東京 \uffff' } } }, true, 'data.name.$gt'],
  ['$in', { data: { install: { labels: { ring: { $in: ['prod', 'canary'] } } } } }, true, 'data.install.labels.ring.$in'],
  ['$in misses', { data: { install: { labels: { ring: { $in: ['dev'] } } } } }, false, 'data.install.labels.ring.$in'],
  ['$in missing', { data: { absent: { $in: ['x', null] } } }, false, 'data.absent.$in'],
  ['$in with null present', { data: { nothing: { $in: ['x', null] } } }, true, 'data.nothing.$in'],
  ['$in vs array in event', { data: { tags: { $in: ['blue'] } } }, false, 'data.tags.$in'],
  ['$nin', { data: { transition: { $nin: ['succeeded', 'started'] } } }, true, 'data.transition.$nin'],
  ['$nin holds it', { data: { transition: { $nin: ['failed'] } } }, false, 'data.transition.$nin'],
  ['$nin missing matches', { data: { absent: { $nin: ['x'] } } }, true, 'data.absent.$nin'],
  ['$startsWith', { subject: { $startsWith: 'org_1/workflow_step/' } }, true, 'subject.$startsWith'],
  ['$startsWith non-string', { data: { count: { $startsWith: '7' } } }, false, 'data.count.$startsWith'],
  ['$endsWith', { subject: { $endsWith: '/failed' } }, true, 'subject.$endsWith'],
  ['$endsWith unicode', { data: { name: { $endsWith: '東京 😀' } } }, true, 'data.name.$endsWith'],
  ['$startsWith empty string on empty', { data: { empty: { $startsWith: '' } } }, true, 'data.empty.$startsWith'],
  ['$exist true', { data: { install: { $exist: true } } }, true, 'data.install.$exist'],
  ['$exist true on null', { data: { nothing: { $exist: true } } }, true, 'data.nothing.$exist'],
  ['$exist false on missing', { data: { absent: { $exist: false } } }, true, 'data.absent.$exist'],
  ['$exist false on present', { data: { count: { $exist: false } } }, false, 'data.count.$exist'],
  ['$exist false under a missing parent', { data: { absent: { deeper: { $exist: false } } } }, true, 'data.absent.deeper.$exist'],
  ['$contains plain', { data: { tags: { $contains: 'green' } } }, true, 'data.tags.$contains'],
  ['$contains plain misses', { data: { tags: { $contains: 'red' } } }, false, 'data.tags.$contains'],
  ['$contains operator on elements', { data: { nums: { $contains: { $gt: 8 } } } }, true, 'data.nums.$contains.$gt'],
  [
    '$contains object element',
    { data: { items: { $contains: { name: 'b', size: { $gte: 10 } } } } },
    true,
    'data.items.$contains.size.$gte',
  ],
  ['$contains no element', { data: { items: { $contains: { name: 'a', size: 10 } } } }, false, 'data.items.$contains'],
  ['$contains on a string', { data: { transition: { $contains: 'fail' } } }, false, 'data.transition.$contains'],
  ['$contains missing', { data: { absent: { $contains: 'x' } } }, false, 'data.absent.$contains'],
  ['$and all hold', { $and: [{ data: { count: { $gt: 1 } } }, { data: { ok: false } }] }, true, '$and.1.data.ok'],
  ['$and one fails', { $and: [{ data: { count: { $gt: 10 } } }, { data: { ok: false } }] }, false, '$and.0.data.count.$gt'],
  ['$or one holds', { $or: [{ type: 'nope' }, { data: { tags: { $contains: 'blue' } } }] }, true, '$or.1.data.tags.$contains'],
  ['$or none holds', { $or: [{ type: 'nope' }, { subject: 'nope' }] }, false, '$or'],
  ['$not of a failing clause', { $not: { data: { transition: 'succeeded' } } }, true, '$not.data.transition'],
  ['$not of a holding clause', { $not: { data: { transition: 'failed' } } }, false, '$not.data.transition'],
  ['$not of a missing path', { data: { absent: { $not: { $eq: 1 } } } }, true, 'data.absent.$not.$eq'],
  [
    '$or nested under a field',
    { data: { install: { labels: { $or: [{ ring: 'canary' }, { region: { $startsWith: 'eu-' } }] } } } },
    true,
    'data.install.labels.$or.1.region.$startsWith',
  ],
  [
    'operators and fields side by side',
    { data: { $exist: true, transition: { $in: ['failed', 'cancelled'] }, count: { $lt: 10 } } },
    true,
    'data.count.$lt',
  ],
  ['first failure decides', { data: { transition: 'failed', count: 0, ok: true } }, false, 'data.count'],
  ['unknown top field', { nope: 'x' }, false, 'nope'],
  ['extension attribute missing: $neq', { svcexample: { $neq: true } }, true, 'svcexample.$neq'],
  ['empty root filter admits all', {}, true, ''],
];

describe('event filters: each case against the expectation and the reference', () => {
  it.each(CASES)('%s', (_name, filter, matched, clause) => {
    expect(checkFilter(filter)).toEqual([]);
    const f = compileFilter(filter);
    expect(ref(filter, ev)).toBe(matched);
    expect(f.test(ev)).toBe(matched);
    expect(f.explain(ev)).toEqual({ matched, clause });
  });

  it('has at least 40 cases, and both outcomes of every operator', () => {
    expect(CASES.length).toBeGreaterThanOrEqual(40);
    for (const op of [
      '$eq',
      '$neq',
      '$gt',
      '$gte',
      '$lt',
      '$lte',
      '$in',
      '$nin',
      '$startsWith',
      '$endsWith',
      '$exist',
      '$contains',
      '$and',
      '$or',
      '$not',
    ]) {
      const outcomes = new Set(CASES.filter(([, f]) => JSON.stringify(f).includes(`"${op}"`)).map(([, , m]) => m));
      expect(outcomes.size, op).toBeGreaterThanOrEqual(op === '$gte' || op === '$lte' || op === '$endsWith' ? 1 : 2);
    }
  });

  it('agrees with the reference on generated filters and events', () => {
    // a small deterministic generator: random clauses over a few paths and values
    let seed = 54;
    const rnd = (n: number): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const values: V[] = ['a', 'b', 'ab', '', 1, 2, 2.5, true, false, null, ['a', 1], [{ k: 'a' }], { k: 'a' }];
    const plain: V[] = ['a', 'b', 'ab', '', 1, 2, 2.5, true, false, null];
    const keys = ['x', 'y', 'k'];
    const clause = (d: number): EventFilter => {
      const r = rnd(d > 2 ? 12 : 15);
      const p = plain[rnd(plain.length)];
      const s = ['a', 'b', ''][rnd(3)];
      const n = [1, 2, 'a', 'b'][rnd(4)];
      const ops: Array<() => EventFilter> = [
        () => ({ $eq: p }),
        () => ({ $neq: p }),
        () => ({ $gt: n }),
        () => ({ $gte: n }),
        () => ({ $lt: n }),
        () => ({ $lte: n }),
        () => ({ $in: [p, plain[rnd(plain.length)]] }),
        () => ({ $nin: [p] }),
        () => ({ $startsWith: s }),
        () => ({ $endsWith: s }),
        () => ({ $exist: rnd(2) === 0 }),
        () => ({ $contains: p }),
        () => ({ [keys[rnd(3)]]: clause(d + 1) }),
        () => ({ $or: [clause(d + 1), clause(d + 1)] }),
        () => ({ $not: clause(d + 1) }),
      ];
      return ops[r]();
    };
    const eventOf = (): Record<string, V> => {
      const o: Record<string, V> = {};
      for (const k of keys) if (rnd(3) > 0) o[k] = rnd(4) === 0 ? { k: values[rnd(values.length)] } : values[rnd(values.length)];
      return o;
    };
    let matched = 0;
    for (let i = 0; i < 3000; i++) {
      const filter: EventFilter = { [keys[rnd(3)]]: clause(0), ...(rnd(2) ? { [`${keys[rnd(3)]}`]: clause(0) } : {}) };
      expect(checkFilter(filter)).toEqual([]);
      const f = compileFilter(filter);
      const e = eventOf();
      const want = ref(filter, e);
      expect(f.test(e), JSON.stringify({ filter, e })).toBe(want);
      expect(f.explain(e).matched).toBe(want);
      if (want) matched++;
    }
    // both outcomes are well represented
    expect(matched).toBeGreaterThan(300);
    expect(matched).toBeLessThan(2700);
  });
});

describe('event filters: clauses shared between filters', () => {
  it('filters sharing clauses answer each event on its own, whatever was asked before', () => {
    const a = compileFilter({ data: { ring: 'prod', n: { $gt: 1 } } });
    const b = compileFilter({ data: { ring: 'prod', n: { $gt: 5 } } });
    const c = compileFilter({ data: { ring: 'prod' } });
    const e1 = { data: { ring: 'prod', n: 3 } };
    const e2 = { data: { ring: 'dev', n: 9 } };
    const e3 = { data: { ring: 'prod', n: 9 } };
    expect([a.test(e1), b.test(e1), c.test(e1)]).toEqual([true, false, true]);
    expect([a.test(e2), b.test(e2), c.test(e2)]).toEqual([false, false, false]);
    expect([a.test(e3), b.test(e3), c.test(e3)]).toEqual([true, true, true]);
    // the same object again, and a field named like an Object.prototype member
    expect(c.test(e2)).toBe(false);
    const proto = compileFilter({ data: { constructor: { $exist: false }, toString: { $exist: true } } });
    expect(proto.test({ data: {} })).toBe(false);
    expect(proto.test({ data: { toString: 'x' } })).toBe(true);
    expect(compileFilter({ data: { length: { $exist: true } } }).test({ data: [1, 2] })).toBe(false);
  });
});

describe('event filters: strings compare by code point', () => {
  it('whatever the operand: ASCII, CJK, private use, past the BMP', () => {
    const cp = (a: string, b: string): number => {
      const x = [...a].map((c) => c.codePointAt(0)!);
      const y = [...b].map((c) => c.codePointAt(0)!);
      for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
      return x.length - y.length;
    };
    const words = ['', 'a', 'ab', 'b', 'Z', '東', '東京', '\ue000', '\uffff', '😀', 'a😀', 'a\ue000', 'a\uffff', '\ud7ff'];
    for (const want of words)
      for (const got of words)
        for (const op of ['$gt', '$gte', '$lt', '$lte'] as const) {
          const c = cp(got, want);
          const expected = op === '$gt' ? c > 0 : op === '$gte' ? c >= 0 : op === '$lt' ? c < 0 : c <= 0;
          expect(compileFilter({ s: { [op]: want } }).test({ s: got }), `${JSON.stringify(got)} ${op} ${JSON.stringify(want)}`).toBe(
            expected,
          );
        }
  });
});

describe('event filters: checks on write', () => {
  const deep = (n: number): EventFilter => {
    let f: EventFilter = { $eq: 1 };
    for (let i = 1; i < n; i++) f = { [`k${i}`]: f };
    return f;
  };

  it.each<[string, unknown, string, RegExp]>([
    ['not an object', 'type', '', /JSON object/],
    ['an array', [{ type: 'x' }], '', /JSON object/],
    ['unknown operator', { data: { x: { $regex: 'a' } } }, 'data.x.$regex', /unknown operator \$regex/],
    ['$in not an array', { type: { $in: 'a' } }, 'type.$in', /array/],
    ['$in with an object', { type: { $in: [{ a: 1 }] } }, 'type.$in', /array of strings/],
    ['$gt boolean', { data: { n: { $gt: true } } }, 'data.n.$gt', /number or a string/],
    ['$eq object', { data: { n: { $eq: { a: 1 } } } }, 'data.n.$eq', /string, number, boolean or null/],
    ['$startsWith number', { subject: { $startsWith: 1 } }, 'subject.$startsWith', /takes a string/],
    ['$exist string', { subject: { $exist: 'yes' } }, 'subject.$exist', /true or false/],
    ['$not array', { $not: [{ type: 'a' }] }, '$not', /filter object/],
    ['$or empty', { $or: [] }, '$or', /non-empty array/],
    ['$and element not an object', { $and: [{ type: 'a' }, 'b'] }, '$and.1', /non-empty filter object/],
    ['plain array', { data: { tags: ['a'] } }, 'data.tags', /\$contains/],
    ['empty nested object', { data: {} }, 'data', /empty object/],
    ['empty field name', { data: { '': 1 } }, 'data.', /must not be empty/],
  ])('%s is refused at its path', (_n, filter, path, message) => {
    const issues = checkFilter(filter);
    expect(issues.length).toBeGreaterThan(0);
    expect(issues[0].path).toBe(path);
    expect(issues[0].message).toMatch(message);
    if (typeof filter === 'object' && filter && !Array.isArray(filter)) expect(() => compileFilter(filter as EventFilter)).toThrow();
  });

  it('depth: 8 nested objects pass, 9 are refused at the deepest', () => {
    expect(checkFilter(deep(8))).toEqual([]);
    const issues = checkFilter(deep(9));
    expect(issues).toHaveLength(1);
    expect(issues[0].path).toBe('k8.k7.k6.k5.k4.k3.k2.k1');
    expect(issues[0].message).toMatch(/9 objects deep here; at most 8/);
    // objects inside $and count too
    expect(checkFilter({ $and: [deep(7)] })).toEqual([]);
    expect(checkFilter({ $and: [deep(8)] })[0].message).toMatch(/at most 8/);
  });

  it('operators: 64 pass, 65 are refused, each $ key one', () => {
    const ops = (n: number): EventFilter => Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, { $exist: true }]));
    expect(checkFilter(ops(64))).toEqual([]);
    const issues = checkFilter(ops(65));
    expect(issues).toEqual([{ path: '', message: 'the filter has 65 operators ($ keys); at most 64' }]);
    // $and and its elements' operators all count: 1 + 64
    expect(checkFilter({ $and: [ops(64)] })[0].message).toMatch(/65 operators/);
  });

  it('size: 4 KiB as UTF-8 JSON passes, a byte more is refused', () => {
    const base = JSON.stringify({ subject: '' }).length;
    const at = (bytes: number): EventFilter => ({ subject: 'x'.repeat(bytes - base) });
    expect(checkFilter(at(FILTER_LIMITS.bytes))).toEqual([]);
    expect(checkFilter(at(FILTER_LIMITS.bytes + 1))[0].message).toMatch(/4097 bytes as JSON; at most 4096/);
    // counted in UTF-8 bytes: 1366 three-byte characters are 4098 bytes + the wrapper
    expect(checkFilter({ subject: '東'.repeat(1366) })[0].message).toMatch(/at most 4096/);
  });

  it('lists every event path a filter reads, with the clause where', () => {
    const fields = filterFields({
      type: 'x',
      data: { install: { labels: { ring: { $in: ['a'] } } }, items: { $contains: { name: 'a' } } },
      $or: [{ subject: { $startsWith: 'o' } }, { $not: { data: { count: 1 } } }],
    });
    expect(fields).toEqual([
      { fields: ['type'], at: 'type' },
      { fields: ['data', 'install', 'labels', 'ring'], at: 'data.install.labels.ring.$in' },
      { fields: ['data', 'items', '[]', 'name'], at: 'data.items.$contains.name' },
      { fields: ['subject'], at: '$or.0.subject.$startsWith' },
      { fields: ['data', 'count'], at: '$or.1.$not.data.count' },
    ]);
  });
});
