// The generated test of a filter (issue 54: one compiled predicate per webhook, not a walk per event)
// answers as the walk of closures does (interpretedTest, what `explain` still runs), on thousands of
// seeded random filters × events: every operator, nesting, $and/$or/$not, $contains of objects, long
// $in, code point order, fields named like Object.prototype members, events that are not objects. No
// text of a filter is ever code; where code cannot be generated, the walk answers.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  checkFilter,
  compileFilter,
  type EventFilter,
  filterKeys,
  generateFilter,
  interpretedTest,
  readFields,
} from '../../src/domain/event-filter.ts';

/** mulberry32: a seeded generator, so that a failure is reproduced by its seed. */
function random(seed: number): (n: number) => number {
  let a = seed;
  return (n) => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
}

const EVIL = '"]); process.exit(1); (["';
const STRINGS = ['', 'a', 'ab', 'b', 'Z', '東', '東京', '\ue000', '\uffff', '😀', 'a😀', '\u2028', '\\', '${x}', '`', EVIL];
const PLAIN: unknown[] = [...STRINGS, 0, -0, 1, 2, 2.5, -1, 1e21, true, false, null];
const KEYS = ['a', 'b', 'k', 'constructor', '__proto__', 'toString', 'length', EVIL];

/** An object with these own properties (`__proto__` included, as JSON.parse makes it). */
function own(entries: Array<[string, unknown]>): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  for (const [k, v] of entries) Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
  return o;
}

function generators(rnd: (n: number) => number) {
  const pick = <T>(xs: readonly T[]): T => xs[rnd(xs.length)];
  const plain = (): unknown => pick(PLAIN);
  const comparable = (): unknown => (rnd(2) ? pick(STRINGS) : pick([0, 1, 2, 2.5, -1]));
  const clause = (d: number): EventFilter => {
    const ops: Array<() => EventFilter> = [
      () => ({ $eq: plain() }),
      () => ({ $neq: plain() }),
      () => ({ [pick(['$gt', '$gte', '$lt', '$lte'])]: comparable() }),
      () => ({ $in: Array.from({ length: rnd(3) ? 1 + rnd(3) : 9 + rnd(4) }, plain) }),
      () => ({ $nin: Array.from({ length: rnd(3) ? rnd(3) : 9 + rnd(4) }, plain) }),
      () => ({ [pick(['$startsWith', '$endsWith'])]: pick(STRINGS) }),
      () => ({ $exist: rnd(2) === 0 }),
      () => ({ $contains: d > 3 || rnd(2) ? plain() : clause(d + 1) }),
      () => own([[pick(KEYS), rnd(3) ? clause(d + 1) : plain()]]),
      () =>
        own([
          [pick(KEYS), clause(d + 1)],
          [pick(KEYS), clause(d + 1)],
        ]),
      () => ({ [pick(['$and', '$or'])]: Array.from({ length: 1 + rnd(3) }, () => clause(d + 1)) }),
      () => ({ $not: clause(d + 1) }),
      () => ({ ...clause(d + 1), ...clause(d + 1) }),
    ];
    return ops[rnd(d > 4 ? 8 : ops.length)]();
  };
  const value = (d: number): unknown => {
    const r = rnd(d > 2 ? 6 : 10);
    if (r < 6) return plain();
    if (r < 8) return Array.from({ length: rnd(4) }, () => value(d + 1));
    return object(d + 1);
  };
  const object = (d: number): Record<string, unknown> => own(Array.from({ length: rnd(5) }, () => [pick(KEYS), value(d)]));
  // the event as a parsed body is: JSON (undefined: a body that is not JSON)
  const event = (): unknown => {
    const r = rnd(20);
    if (r === 0) return undefined;
    const v = r === 1 ? value(1) : object(0);
    return JSON.parse(JSON.stringify(v));
  };
  return { clause, event };
}

describe('event filters: the generated test answers as the walk', () => {
  it('on 4,000 seeded random filters × 4 events each, every clause kind, each event asked twice', () => {
    const rnd = random(54);
    const { clause, event } = generators(rnd);
    let cases = 0;
    let matched = 0;
    let refusedAsInvalid = 0;
    const kinds = new Set<string>();
    for (let i = 0; i < 4000; i++) {
      const filter = rnd(8) === 0 ? clause(0) : own([[KEYS[rnd(KEYS.length)], clause(0)]]);
      if (checkFilter(filter).length > 0) {
        refusedAsInvalid++;
        continue;
      }
      const compiled = compileFilter(filter);
      // the generated function, not the fallback walk
      expect(compiled.test.name).toBe('filter');
      const walk = interpretedTest(filter);
      for (const op of JSON.stringify(filter).match(/"\$[a-zA-Z]+"/g) ?? []) kinds.add(op);
      for (let j = 0; j < 4; j++) {
        const e = event();
        const want = walk(e);
        const where = JSON.stringify({ i, filter, e });
        expect(compiled.test(e), where).toBe(want);
        expect(compiled.test(e), where).toBe(want); // its last answer, remembered
        expect(compiled.explain(e).matched, where).toBe(want);
        cases++;
        if (want) matched++;
      }
    }
    expect(cases).toBeGreaterThan(12_000);
    expect(refusedAsInvalid).toBeLessThan(400);
    expect([...kinds].sort()).toEqual(
      ['$and', '$contains', '$endsWith', '$eq', '$exist', '$gt', '$gte', '$in', '$lt', '$lte', '$neq', '$nin', '$not', '$or', '$startsWith']
        .map((k) => `"${k}"`)
        .sort(),
    );
    // both outcomes well represented
    expect(matched).toBeGreaterThan(cases * 0.15);
    expect(matched).toBeLessThan(cases * 0.85);
  });

  it('filters with the same source share one function, which answers each event on its own', () => {
    const a = compileFilter({ data: { ring: 'prod' } });
    const b = compileFilter({ data: { ring: 'prod' } });
    expect(a.test).toBe(b.test);
    const prod = { data: { ring: 'prod' } };
    const dev = { data: { ring: 'dev' } };
    expect([a.test(prod), b.test(prod), a.test(dev), b.test(dev), a.test(prod), b.test(undefined)]).toEqual([
      true,
      true,
      false,
      false,
      true,
      false,
    ]);
  });

  it('at the root: an event that is not JSON (undefined) is present, every path of it missing', () => {
    for (const [filter, want] of [
      [{ $exist: true }, true],
      [{ $exist: false }, false],
      [{ $neq: 1 }, true],
      [{ $nin: [1] }, true],
      [{ $not: { a: { $exist: true } } }, true],
      [{ a: { $exist: false } }, true],
      [{ a: { $neq: 'x' } }, true],
      [{ a: null }, false],
    ] as Array<[EventFilter, boolean]>) {
      expect(compileFilter(filter).test(undefined), JSON.stringify(filter)).toBe(want);
      expect(interpretedTest(filter)(undefined), JSON.stringify(filter)).toBe(want);
    }
  });
});

describe('event filters: no text of a filter is ever code', () => {
  const payloads = [
    EVIL,
    '"); globalThis.pwned = 1; ("',
    '\\"); globalThis.pwned = 1; //',
    '*/ globalThis.pwned = 1; /*',
    '${globalThis.pwned = 1}',
    '`; globalThis.pwned = 1; `',
    '\u2028globalThis.pwned = 1;',
    "'); globalThis.pwned = 1; ('",
    '\ud800"]; globalThis.pwned = 1; //',
  ];

  it('a key or a value that reads as JS is only compared, with every operator', () => {
    const g = globalThis as { pwned?: number };
    for (const s of payloads) {
      // as a key, a payload is a field's name (a key starting with $ would be an operator)
      const f = s.startsWith('$') ? `_${s}` : s;
      const filters: Array<[EventFilter, unknown, boolean]> = [
        [own([[f, s]]), own([[f, s]]), true],
        [own([[f, { $eq: s }]]), own([[f, s]]), true],
        [own([[f, { $neq: s }]]), own([[f, 'x']]), true],
        [{ a: { $in: [s, 'x'] } }, { a: s }, true],
        [{ a: { $in: [s, 1, 2, 3, 4, 5, 6, 7, 8, 9] } }, { a: s }, true],
        [{ a: { $nin: [s] } }, { a: s }, false],
        [{ a: { $gte: s } }, { a: s }, true],
        [{ a: { $lt: s } }, { a: s }, false],
        [{ a: { $startsWith: s } }, { a: `${s}!` }, true],
        [{ a: { $endsWith: s } }, { a: `!${s}` }, true],
        [{ a: { $contains: s } }, { a: ['x', s] }, true],
        [{ a: { $contains: own([[f, { $exist: true }]]) } }, { a: [own([[f, 1]])] }, true],
        [{ $or: [own([[f, 1]]), { $not: own([[f, { $exist: true }]]) }] }, own([[f, 1]]), true],
      ];
      for (const [filter, event, want] of filters) {
        expect(checkFilter(filter), s).toEqual([]);
        const e = JSON.parse(JSON.stringify(event));
        const compiled = compileFilter(filter);
        expect(compiled.test.name).toBe('filter');
        expect(compiled.test(e), JSON.stringify({ filter, e })).toBe(want);
        expect(interpretedTest(filter)(e)).toBe(want);
      }
    }
    expect(g.pwned).toBeUndefined();
  });

  it('the source holds a key only as a JSON string literal, a value never: filters of one shape share it', () => {
    const a = generateFilter(
      own([
        [EVIL, { $in: [EVIL, 'x'] }],
        ['n', { $gt: 1 }],
      ]),
    );
    const b = generateFilter(
      own([
        [EVIL, { $in: ['y', 'z'] }],
        ['n', { $gt: 2 }],
      ]),
    );
    expect(b.source).toBe(a.source);
    expect(a.constants).toEqual([EVIL, 'x', 1]);
    const withoutLiterals = a.source.replace(/"(?:[^"\\\n]|\\.)*"/g, '""');
    expect(withoutLiterals).not.toContain('process');
    expect(withoutLiterals).not.toContain('exit');
    // a number's type is the shape's (typeof), its value the instance's
    expect(generateFilter({ n: { $gt: 'a' } }).source).not.toBe(generateFilter({ n: { $gt: 1 } }).source);
  });

  it('where code cannot be generated (node --disallow-code-generation-from-strings), the walk answers', () => {
    const module = path.resolve(import.meta.dirname, '../../src/domain/event-filter.ts');
    const script = [
      `import { compileFilter } from ${JSON.stringify(module)};`,
      `const f = compileFilter({ data: { ring: { $in: ['prod', 'eu'] } }, type: { $startsWith: 'com.' } });`,
      `console.log(JSON.stringify([f.test.name, f.test({ type: 'com.x', data: { ring: 'eu' } }), f.test({ type: 'com.x', data: {} })]));`,
    ].join('\n');
    const out = execFileSync(
      process.execPath,
      ['--disallow-code-generation-from-strings', '--import', 'tsx', '--input-type=module', '-e', script],
      { cwd: path.resolve(import.meta.dirname, '../..'), encoding: 'utf8' },
    );
    const [name, yes, no] = JSON.parse(out.trim().split('\n').pop()!);
    expect(name).not.toBe('filter');
    expect([yes, no]).toEqual([true, false]);
  });
});

describe('event filters: the keys dispatch indexes by', () => {
  it('a plain value, $eq or $in at a path every admitted event meets; not under $or, $not, $contains', () => {
    const keys = filterKeys({
      type: 'com.x',
      data: { ring: { $in: ['prod', 'eu'] }, n: { $eq: 3, $gt: 1 }, $and: [{ owner: 'o1' }] },
      $or: [{ a: 1 }, { a: 2 }],
      $not: { b: 1 },
      list: { $contains: { c: 1 } },
      $eq: 'root',
    });
    expect(keys).toEqual([
      { fields: ['type'], values: ['com.x'] },
      { fields: ['data', 'ring'], values: ['prod', 'eu'] },
      { fields: ['data', 'n'], values: [3] },
      { fields: ['data', 'owner'], values: ['o1'] },
    ]);
  });

  it('each key holds for every event the filter admits (random filters × events)', () => {
    const rnd = random(4054);
    const { clause, event } = generators(rnd);
    let checked = 0;
    for (let i = 0; i < 3000; i++) {
      const filter = own([[KEYS[rnd(KEYS.length)], clause(0)]]);
      if (checkFilter(filter).length > 0) continue;
      const keys = filterKeys(filter);
      const test = compileFilter(filter).test;
      for (let j = 0; j < 40; j++) {
        const e = event();
        if (!test(e)) continue;
        for (const k of keys) {
          expect(k.values.includes(readFields(e, k.fields) as never), JSON.stringify({ filter, e, k })).toBe(true);
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(200);
  });
});
