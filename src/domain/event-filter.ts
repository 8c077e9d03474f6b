// Payload filters of webhooks (CONTRACT 10.2, issue 54): a JSON document over the CloudEvent as
// delivered, with Outpost's operators. Parse and check a document (shape and bounds, each problem
// with its path), compile it once into one generated JS function (what dispatch runs per event: no
// walk of the document per event), explain an evaluation with a walk of closures (what the dry runs
// answer: the clause that decided), and read off the values an admitted event must hold (what
// dispatch indexes filters by). The catalog's path check (a path no admitted type has) is
// src/services/filter-paths.ts.
//
// Semantics (CONTRACT 10.2):
// - an object matches by its keys, all of them (AND): a key starting with `$` is an operator on the
//   value at hand, any other key a field of it (a value that is not an object has no fields);
// - a plain value (string, number, boolean, null) matches by equality; an array in the event is
//   matched only through `$contains`, so a plain array in a filter could match nothing (refused);
// - `$gt $gte $lt $lte` compare numbers with numbers and strings with strings (by code point);
//   another type does not match; `$in`/`$nin` take an array of plain values;
// - a missing path matches only `$exist: false`, `$neq` and `$nin`; `null` is present;
// - `$contains`: the value is an array holding an element that matches the operand (a plain value
//   by equality, an object as a filter of the element);
// - `$and`/`$or`: a non-empty array of filter objects; `$not`: a filter object.
//
// The deciding clause (decided_by) is the clause whose outcome decided under left-to-right
// short-circuit evaluation: for a refused event the first clause that failed, for an admitted one
// the last clause that held (in an `$or` the first branch that held). Its path joins the keys with
// dots, array positions as numbers: `data.install.labels.ring.$in`, `$or.1.type`.

/** The bounds of one filter (CONTRACT 10.2). */
export const FILTER_LIMITS = { depth: 8, operators: 64, bytes: 4096 } as const;

export const FILTER_OPERATORS = [
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
] as const;
export type FilterOperator = (typeof FILTER_OPERATORS)[number];

/** A filter document (a JSON object). */
export type EventFilter = Record<string, unknown>;

/** A problem of a filter document: where (a dotted path inside the filter) and why. */
export interface FilterIssue {
  path: string;
  message: string;
}

/** A path of the event a filter reads (field keys only, from the event's root), for the catalog check. */
export interface FilterField {
  /** the field keys from the event's root: ['data', 'install', 'labels', 'ring'] */
  fields: string[];
  /** the clause path in the filter, for the error: `data.install.labels.ring.$in` */
  at: string;
}

export type Plain = string | number | boolean | null;

const isPlain = (v: unknown): v is Plain => v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const join = (path: string, key: string | number): string => (path === '' ? String(key) : `${path}.${key}`);
const OPERATOR_SET: ReadonlySet<string> = new Set(FILTER_OPERATORS);

/** UTF-8 bytes of the filter as JSON. */
export function filterBytes(doc: unknown): number {
  return Buffer.byteLength(JSON.stringify(doc) ?? '', 'utf8');
}

// ------------------------------------------------------------------ checking

/**
 * The problems of a filter document: not an object, an unknown operator, an operand of the wrong
 * type, an empty object or array where a clause is needed, deeper than 8 nested objects, more than
 * 64 operators, over 4 KiB. Empty: it is a valid filter (`{}` at the root is valid and admits all).
 */
export function checkFilter(doc: unknown): FilterIssue[] {
  if (!isObject(doc)) return [{ path: '', message: 'filter must be a JSON object (or null for none)' }];
  const issues: FilterIssue[] = [];
  const bytes = filterBytes(doc);
  if (bytes > FILTER_LIMITS.bytes) {
    issues.push({ path: '', message: `the filter is ${bytes} bytes as JSON; at most ${FILTER_LIMITS.bytes} (4 KiB)` });
  }
  const counts = { operators: 0, deepest: 0, deepAt: '' };
  checkObject(doc, '', 1, issues, counts);
  if (counts.deepest > FILTER_LIMITS.depth) {
    issues.push({
      path: counts.deepAt,
      message: `the filter nests ${counts.deepest} objects deep here; at most ${FILTER_LIMITS.depth}`,
    });
  }
  if (counts.operators > FILTER_LIMITS.operators) {
    issues.push({ path: '', message: `the filter has ${counts.operators} operators ($ keys); at most ${FILTER_LIMITS.operators}` });
  }
  return issues;
}

interface Counts {
  operators: number;
  deepest: number;
  deepAt: string;
}

/** A filter object at depth `depth` (the root is 1): each key a clause. */
function checkObject(obj: Record<string, unknown>, path: string, depth: number, issues: FilterIssue[], c: Counts): void {
  if (depth > c.deepest) {
    c.deepest = depth;
    c.deepAt = path;
  }
  const keys = Object.keys(obj);
  if (keys.length === 0 && path !== '') {
    issues.push({ path, message: 'an empty object is not a clause: name a value or an operator' });
    return;
  }
  for (const key of keys) {
    const at = join(path, key);
    const v = obj[key];
    if (key.startsWith('$')) {
      c.operators++;
      checkOperator(key, v, at, depth, issues, c);
    } else if (key === '') {
      issues.push({ path: at, message: 'a field name must not be empty' });
    } else {
      checkValue(v, at, depth, issues, c);
    }
  }
}

/** The value of a field: a plain value, or a filter object of it. */
function checkValue(v: unknown, at: string, depth: number, issues: FilterIssue[], c: Counts): void {
  if (isObject(v)) checkObject(v, at, depth + 1, issues, c);
  else if (Array.isArray(v))
    issues.push({ path: at, message: 'an array matches nothing here: match an array of the event with $contains, one of values with $in' });
}

function checkOperator(op: string, v: unknown, at: string, depth: number, issues: FilterIssue[], c: Counts): void {
  if (!OPERATOR_SET.has(op)) {
    issues.push({ path: at, message: `unknown operator ${op} (one of: ${FILTER_OPERATORS.join(' ')})` });
    return;
  }
  switch (op as FilterOperator) {
    case '$eq':
    case '$neq':
      if (!isPlain(v)) issues.push({ path: at, message: `${op} takes a string, number, boolean or null` });
      return;
    case '$gt':
    case '$gte':
    case '$lt':
    case '$lte':
      if (typeof v !== 'number' && typeof v !== 'string') issues.push({ path: at, message: `${op} takes a number or a string` });
      return;
    case '$in':
    case '$nin':
      if (!Array.isArray(v) || !v.every(isPlain)) {
        issues.push({ path: at, message: `${op} takes an array of strings, numbers, booleans or nulls` });
      }
      return;
    case '$startsWith':
    case '$endsWith':
      if (typeof v !== 'string') issues.push({ path: at, message: `${op} takes a string` });
      return;
    case '$exist':
      if (typeof v !== 'boolean') issues.push({ path: at, message: '$exist takes true or false' });
      return;
    case '$contains':
      if (isObject(v)) checkObject(v, at, depth + 1, issues, c);
      else if (!isPlain(v)) issues.push({ path: at, message: '$contains takes a plain value or a filter object of an element' });
      return;
    case '$not':
      if (isObject(v)) checkObject(v, at, depth + 1, issues, c);
      else issues.push({ path: at, message: '$not takes a filter object' });
      return;
    case '$and':
    case '$or':
      if (!Array.isArray(v) || v.length === 0) {
        issues.push({ path: at, message: `${op} takes a non-empty array of filter objects` });
        return;
      }
      v.forEach((x, i) => {
        if (isObject(x) && Object.keys(x).length > 0) checkObject(x, join(at, i), depth + 1, issues, c);
        else issues.push({ path: join(at, i), message: `each element of ${op} must be a non-empty filter object` });
      });
      return;
  }
}

/** Every event path the filter reads, with where (a valid filter only). */
export function filterFields(doc: EventFilter): FilterField[] {
  const out: FilterField[] = [];
  const walk = (obj: Record<string, unknown>, fields: string[], path: string): void => {
    for (const [key, v] of Object.entries(obj)) {
      const at = join(path, key);
      if (!key.startsWith('$')) {
        const f = [...fields, key];
        if (isObject(v)) walk(v, f, at);
        else out.push({ fields: f, at });
      } else if (key === '$and' || key === '$or') {
        (v as unknown[]).forEach((x, i) => walk(x as Record<string, unknown>, fields, join(at, i)));
      } else if (key === '$not') {
        walk(v as Record<string, unknown>, fields, at);
      } else if (key === '$contains') {
        // an element's fields: the array's items ('[]' stands for any element)
        if (isObject(v)) walk(v, [...fields, '[]'], at);
        else out.push({ fields, at });
      } else {
        out.push({ fields, at });
      }
    }
  };
  walk(doc, [], '');
  return out;
}

/** A value the event must hold at a path for the filter to admit it: one of `values` (compared with ===). */
export interface FilterKey {
  /** the field keys from the event's root (at least one) */
  fields: string[];
  values: Plain[];
}

/**
 * What an event must hold for the filter to admit it, read off the clauses every admitted event
 * meets (the root's fields, recursively, and the elements of its $and): a plain value, `$eq` or `$in`
 * at a path. Dispatch indexes webhooks by them (src/dispatch/filter-index.ts): an event whose value at
 * the path is none of them is refused without running the filter. A valid filter only.
 */
export function filterKeys(doc: EventFilter): FilterKey[] {
  const out: FilterKey[] = [];
  const walk = (obj: Record<string, unknown>, fields: string[]): void => {
    for (const [key, v] of Object.entries(obj)) {
      if (!key.startsWith('$')) {
        const f = [...fields, key];
        if (isObject(v)) walk(v, f);
        else out.push({ fields: f, values: [v as Plain] });
      } else if (fields.length > 0 && key === '$eq') out.push({ fields, values: [v as Plain] });
      else if (fields.length > 0 && key === '$in') out.push({ fields, values: v as Plain[] });
      else if (key === '$and') for (const x of v as Record<string, unknown>[]) walk(x, fields);
    }
  };
  walk(doc, []);
  return out;
}

/**
 * The event's value at a path of field keys, as a filter reads it: an own property of an object (not
 * of an array) at each step; undefined when missing.
 */
export function readFields(event: unknown, fields: readonly string[]): unknown {
  let v = event;
  for (const key of fields) {
    if (!isObject(v) || !Object.hasOwn(v, key)) return undefined;
    v = v[key];
  }
  return v;
}

// ------------------------------------------------------------------ compiling

/** A value of the event and whether it is there (a missing path: present false, value undefined). */
type Test = (v: unknown, present: boolean) => boolean;
/** The same test, with the path of the clause that decided. */
type Explain = (v: unknown, present: boolean) => Decision;

export interface Decision {
  matched: boolean;
  /** the deciding clause's path in the filter; '' for the empty filter */
  clause: string;
}

interface Node {
  test: Test;
  explain: Explain;
}

/** A filter compiled once: `test` for dispatch, `explain` for the dry runs. */
export interface CompiledFilter {
  test(event: unknown): boolean;
  explain(event: unknown): Decision;
}

/** Compile a valid filter (checkFilter found nothing); throws on an invalid one. */
export function compileFilter(doc: EventFilter): CompiledFilter {
  const issues = checkFilter(doc);
  if (issues.length) throw new Error(`invalid filter at ${issues[0].path || '(root)'}: ${issues[0].message}`);
  const test = generatedTest(doc) ?? interpretedTest(doc);
  // the walk that names the deciding clause: built the first time a dry run asks, not for dispatch
  let root: Node | undefined;
  return { test, explain: (e) => (root ??= objectNode(doc, '')).explain(e, true) };
}

/**
 * The filter as a walk of closures, one per clause: what `explain` runs, what `test` falls back to
 * where code cannot be generated, and the reference the generated test is checked against.
 */
export function interpretedTest(doc: EventFilter): (event: unknown) => boolean {
  const root = objectNode(doc, '');
  return (e) => root.test(e, true);
}

// ------------------------------------------------------------------ dispatch's test, generated

// Dispatch runs the filter of every webhook whose route admits an event, for each event: its `test`
// is one JS function per filter, generated from the document (new Function), so that an event costs
// straight-line comparisons, not a call per clause.
//
// The source is the filter's shape: its field keys (written by JSON.stringify) and operators. Its
// operands are constants `k0`, `k1`, … of the instance, never text of the source: no value of a
// filter is ever code. Filters of one shape (the same clauses, other values: what an org's webhooks
// created by one tool have) share one factory, so V8 compiles and optimises their code once, not once
// per webhook. Identical filters share one instance, which remembers its answer for the last event
// (dispatch asks each filtered webhook about the same event in turn).
//
// In the generated code a missing value is undefined: JSON has no undefined, so an own property of a
// parsed event never is, and a field's value is present when it is not undefined. The event itself and
// an array's elements are present whatever they are (an event whose body is not JSON is undefined:
// present, every path of it missing), so their presence is the constant `true`.

type EventTest = (event: unknown) => boolean;
type Factory = (codePointCmp: (a: string, b: string) => number, hasOwn: typeof Object.hasOwn, k: unknown[]) => EventTest;

const GENERATED_MAX = 10_000;
/** per shape (source), its factory and its instances by their constants */
const shapes = new Map<string, { factory: Factory; instances: Map<string, EventTest> }>();
let instances = 0;

/** The generated test of a valid filter; null where code generation from strings is disallowed. */
function generatedTest(doc: EventFilter): EventTest | null {
  const { source, constants } = generateFilter(doc);
  let shape = shapes.get(source);
  const key = constants.map(constantKey).join(',');
  const known = shape?.instances.get(key);
  if (known) return known;
  if (!shape) {
    let factory: Factory;
    try {
      factory = new Function('codePointCmp', 'hasOwn', 'k', source) as Factory;
    } catch (err) {
      // node --disallow-code-generation-from-strings: the walk (any other error is a bug of the generator)
      if (err instanceof EvalError) return null;
      throw err;
    }
    shape = { factory, instances: new Map() };
  }
  if (instances >= GENERATED_MAX) {
    // filters come and go: start again rather than grow
    shapes.clear();
    instances = 0;
  }
  shapes.set(source, shape);
  const test = shape.factory(codePointCmp, Object.hasOwn, constants);
  shape.instances.set(key, test);
  instances++;
  return test;
}

/** A constant's identity: its value as === compares it (0 and -0 alike), its type included. */
function constantKey(c: unknown): string {
  if (Array.isArray(c)) return `[${c.map(constantKey).join(',')}]`;
  return typeof c === 'number' ? `n${c}` : JSON.stringify(c);
}

/** What a generator writes into: the declarations of the whole filter, its constants, the names used. */
interface Unit {
  decls: string[];
  constants: unknown[];
  names: number;
}

/** The body of one generated function: the temporaries its expression assigns. */
interface Scope {
  temps: string[];
}

const fresh = (u: Unit, s: Scope, prefix: string): string => {
  const name = `${prefix}${u.names++}`;
  s.temps.push(name);
  return name;
};

/** A constant of the instance (an operand): its name in the source. */
const constant = (u: Unit, x: unknown): string => {
  u.constants.push(x);
  return `k${u.constants.length - 1}`;
};

/**
 * The source of a factory of (codePointCmp, hasOwn, k) that returns a test of the filter's shape
 * with the constants k, and the filter's constants.
 */
export function generateFilter(doc: EventFilter): { source: string; constants: unknown[] } {
  const unit: Unit = { decls: [], constants: [], names: 0 };
  const scope: Scope = { temps: [] };
  const body = objectExpr(doc, 'e', 'true', unit, scope);
  const source = [
    '"use strict";',
    ...unit.constants.map((_, i) => `const k${i} = k[${i}];`),
    ...unit.decls,
    'let lastEvent = lastNone, lastAnswer = false;',
    'function lastNone() {}',
    'return function filter(e) {',
    '  if (e === lastEvent) return lastAnswer;',
    ...(scope.temps.length ? [`  let ${scope.temps.join(', ')};`] : []),
    `  lastAnswer = ${body};`,
    '  lastEvent = e;',
    '  return lastAnswer;',
    '};',
  ].join('\n');
  return { source, constants: unit.constants };
}

/**
 * All clauses of an object on the value `v` (an expression: a name), present when `p` is: AND, in
 * order. `isObj`: whether `v` is an object, when an enclosing clause on the same value has asked it
 * already; else, when the clauses name two fields or more, it is asked once, first.
 */
function objectExpr(obj: Record<string, unknown>, v: string, p: string, u: Unit, s: Scope, isObj: string | null = null): string {
  const o = isObj === null && fieldsOf(obj) >= 2 ? fresh(u, s, 'o') : null;
  const known = isObj ?? o;
  const parts = Object.entries(obj).map(([key, x]) =>
    key.startsWith('$') ? operatorExpr(key as FilterOperator, x, v, p, u, s, known) : fieldExpr(key, x, v, known ?? objectTest(v), u, s),
  );
  if (parts.length === 0) return 'true';
  const all = parts.length === 1 ? parts[0] : `(${parts.join(' && ')})`;
  return o === null ? all : `((${o} = ${objectTest(v)}), ${all})`;
}

const objectTest = (v: string): string => `(typeof ${v} === "object" && ${v} !== null && !Array.isArray(${v}))`;

/** The fields an object's clauses read of the value at hand: its own, and those of its $not, $and, $or. */
function fieldsOf(obj: Record<string, unknown>): number {
  let n = 0;
  for (const [key, x] of Object.entries(obj)) {
    if (!key.startsWith('$')) n++;
    else if (key === '$not') n += fieldsOf(x as Record<string, unknown>);
    else if (key === '$and' || key === '$or') for (const b of x as Record<string, unknown>[]) n += fieldsOf(b);
  }
  return n;
}

/** A field of `v` (an own property of an object, not of an array), then its own clause. */
function fieldExpr(key: string, x: unknown, v: string, isObj: string, u: Unit, s: Scope): string {
  const t = fresh(u, s, 't');
  const k = JSON.stringify(key);
  // `constructor`, `__proto__`, …: only an own property is the event's
  const own = key in Object.prototype ? ` && hasOwn(${v}, ${k})` : '';
  const inner = isObject(x) ? objectExpr(x, t, `${t} !== undefined`, u, s) : `${t} === ${constant(u, x)}`;
  return `((${t} = ${isObj}${own} ? ${v}[${k}] : undefined), ${inner})`;
}

const RELATION = { $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' } as const;
const IN_CONSTANTS_MAX = 8;

/** An operator on `v`; `isObj` as for objectExpr (what its $not, $and, $or pass on). */
function operatorExpr(op: FilterOperator, x: unknown, v: string, p: string, u: Unit, s: Scope, isObj: string | null): string {
  switch (op) {
    case '$eq':
      return `${v} === ${constant(u, x)}`;
    case '$neq':
      return `${v} !== ${constant(u, x)}`;
    case '$gt':
    case '$gte':
    case '$lt':
    case '$lte': {
      const rel = RELATION[op];
      if (typeof x === 'number') return `(typeof ${v} === "number" && ${v} ${rel} ${constant(u, x)})`;
      // native string order is by UTF-16 code unit; it is code point order whenever the operand has no unit from
      // \ud800 up (the first unit that differs is then below the surrogates, and both orders agree on it)
      const want = x as string;
      if (/[\ud800-\uffff]/.test(want)) return `(typeof ${v} === "string" && codePointCmp(${v}, ${constant(u, want)}) ${rel} 0)`;
      return `(typeof ${v} === "string" && ${v} ${rel} ${constant(u, want)})`;
    }
    case '$in':
      return inExpr(x as Plain[], v, u);
    case '$nin':
      return `!${inExpr(x as Plain[], v, u)}`;
    case '$startsWith':
    case '$endsWith':
      return `(typeof ${v} === "string" && ${v}.${op.slice(1)}(${constant(u, x)}))`;
    case '$exist':
      return x === true ? `(${p})` : `!(${p})`;
    case '$contains': {
      // indexOf compares with ===, as equality does
      if (!isObject(x)) return `(Array.isArray(${v}) && ${v}.indexOf(${constant(u, x)}) !== -1)`;
      const name = `contains${u.names++}`;
      const inner: Scope = { temps: [] };
      const elem = objectExpr(x, 'x', 'true', u, inner);
      u.decls.push(
        `function ${name}(a) {`,
        ...(inner.temps.length ? [`  let ${inner.temps.join(', ')};`] : []),
        '  for (let i = 0; i < a.length; i++) {',
        '    const x = a[i];',
        `    if (${elem}) return true;`,
        '  }',
        '  return false;',
        '}',
      );
      return `(Array.isArray(${v}) && ${name}(${v}))`;
    }
    case '$not':
      return `!(${objectExpr(x as Record<string, unknown>, v, p, u, s, isObj)})`;
    case '$and':
    case '$or': {
      const parts = (x as Record<string, unknown>[]).map((b) => `(${objectExpr(b, v, p, u, s, isObj)})`);
      return `(${parts.join(op === '$and' ? ' && ' : ' || ')})`;
    }
  }
}

/** Whether `v` is one of the values: === each (a few), or a Set's has (more); never an object or array. */
function inExpr(values: Plain[], v: string, u: Unit): string {
  const distinct = [...new Set(values)];
  if (distinct.length === 0) return 'false';
  if (distinct.length <= IN_CONSTANTS_MAX) return `(${distinct.map((w) => `${v} === ${constant(u, w)}`).join(' || ')})`;
  const name = `set${u.names++}`;
  u.decls.push(`const ${name} = new Set(${constant(u, distinct)});`);
  return `${name}.has(${v})`;
}

// ------------------------------------------------------------------ the walk (explain, and the reference)

/** All clauses of an object, in order (AND). */
function objectNode(obj: Record<string, unknown>, path: string): Node {
  const clauses = Object.entries(obj).map(([key, v]) =>
    key.startsWith('$') ? operatorNode(key as FilterOperator, v, join(path, key)) : fieldNode(key, v, join(path, key)),
  );
  if (clauses.length === 0) return { test: () => true, explain: () => ({ matched: true, clause: path }) };
  if (clauses.length === 1) return clauses[0];
  const tests = clauses.map((c) => c.test);
  return {
    test: (v, p) => {
      for (let i = 0; i < tests.length; i++) if (!tests[i](v, p)) return false;
      return true;
    },
    explain: (v, p) => {
      let last: Decision = { matched: true, clause: path };
      for (const c of clauses) {
        last = c.explain(v, p);
        if (!last.matched) return last;
      }
      return last;
    },
  };
}

/** A field of the value at hand, then its own clause. */
function fieldNode(key: string, v: unknown, at: string): Node {
  const inner = isObject(v) ? objectNode(v, at) : leaf(at, equals(v as Plain));
  const { test, explain } = inner;
  return {
    test: (obj, p) => {
      if (p && isObject(obj) && Object.hasOwn(obj, key)) return test(obj[key], true);
      return test(undefined, false);
    },
    explain: (obj, p) => {
      if (p && isObject(obj) && Object.hasOwn(obj, key)) return explain(obj[key], true);
      return explain(undefined, false);
    },
  };
}

const leaf = (at: string, test: Test): Node => ({ test, explain: (v, p) => ({ matched: test(v, p), clause: at }) });

/** Equality with a plain value: present, not an array, the same value. */
function equals(want: Plain): Test {
  return (v, p) => p && v === want;
}

function compare(op: '$gt' | '$gte' | '$lt' | '$lte', want: number | string): Test {
  const kind = typeof want;
  switch (op) {
    case '$gt':
      return (v, p) => p && typeof v === kind && (v as number | string) > want;
    case '$gte':
      return (v, p) => p && typeof v === kind && (v as number | string) >= want;
    case '$lt':
      return (v, p) => p && typeof v === kind && (v as number | string) < want;
    case '$lte':
      return (v, p) => p && typeof v === kind && (v as number | string) <= want;
  }
}

/** The test of an operator on a plain operand (every one but $contains, $not, $and, $or). */
function leafTest(op: FilterOperator, v: unknown): Test {
  switch (op) {
    case '$eq':
      return equals(v as Plain);
    case '$neq': {
      const want = v as Plain;
      return (x, p) => !p || x !== want;
    }
    case '$gt':
    case '$gte':
    case '$lt':
    case '$lte':
      // native string order is by UTF-16 code unit; it is code point order whenever the operand has no unit from
      // \ud800 up (the first unit that differs is then below the surrogates, and both orders agree on it)
      if (typeof v === 'string') return /[\ud800-\uffff]/.test(v) ? codePointCompare(op, v) : compare(op, v);
      return compare(op, v as number);
    case '$in': {
      const set = new Set(v as Plain[]);
      return (x, p) => p && isPlain(x) && set.has(x);
    }
    case '$nin': {
      const set = new Set(v as Plain[]);
      return (x, p) => !p || !isPlain(x) || !set.has(x);
    }
    case '$startsWith': {
      const s = v as string;
      return (x, p) => p && typeof x === 'string' && x.startsWith(s);
    }
    case '$endsWith': {
      const s = v as string;
      return (x, p) => p && typeof x === 'string' && x.endsWith(s);
    }
    case '$exist': {
      const want = v as boolean;
      return (_x, p) => p === want;
    }
    default:
      throw new Error(`${op} is not a leaf operator`);
  }
}

function operatorNode(op: FilterOperator, v: unknown, at: string): Node {
  switch (op) {
    case '$contains':
      return containsNode(v, at);
    case '$not': {
      const inner = objectNode(v as Record<string, unknown>, at);
      return {
        test: (x, p) => !inner.test(x, p),
        explain: (x, p) => {
          const d = inner.explain(x, p);
          return { matched: !d.matched, clause: d.clause };
        },
      };
    }
    case '$and':
    case '$or':
      return combinator(
        op,
        (v as Record<string, unknown>[]).map((x, i) => objectNode(x, join(at, i))),
        at,
      );
    default:
      return leaf(at, leafTest(op, v));
  }
}

function containsNode(v: unknown, at: string): Node {
  const elem = isObject(v) ? objectNode(v, at) : leaf(at, equals(v as Plain));
  const { test } = elem;
  return {
    test: (x, p) => {
      if (!p || !Array.isArray(x)) return false;
      for (let i = 0; i < x.length; i++) if (test(x[i], true)) return true;
      return false;
    },
    explain: (x, p) => {
      if (!p || !Array.isArray(x)) return { matched: false, clause: at };
      for (const e of x) {
        const d = elem.explain(e, true);
        if (d.matched) return d;
      }
      return { matched: false, clause: at };
    },
  };
}

function combinator(op: '$and' | '$or', nodes: Node[], at: string): Node {
  const tests = nodes.map((n) => n.test);
  const decisive = op === '$or'; // the outcome that ends the evaluation
  return {
    test: (x, p) => {
      for (let i = 0; i < tests.length; i++) if (tests[i](x, p) === decisive) return decisive;
      return !decisive;
    },
    explain: (x, p) => {
      let last: Decision = { matched: !decisive, clause: at };
      for (const n of nodes) {
        last = n.explain(x, p);
        if (last.matched === decisive) return last;
      }
      // $or with no branch held: the whole $or refused it
      return op === '$or' ? { matched: false, clause: at } : last;
    },
  };
}

/** The sign of a - b, strings compared by code point (CONTRACT 10.2). */
function codePointCmp(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.codePointAt(i)!;
    const y = b.codePointAt(i)!;
    if (x !== y) return x < y ? -1 : 1;
    if (x > 0xffff) i++;
  }
  return a.length < b.length ? -1 : a.length > b.length ? 1 : 0;
}

/** String comparison by code point, for an operand with a unit from \ud800 up (the others compare natively). */
function codePointCompare(op: '$gt' | '$gte' | '$lt' | '$lte', want: string): Test {
  switch (op) {
    case '$gt':
      return (v, p) => p && typeof v === 'string' && codePointCmp(v, want) > 0;
    case '$gte':
      return (v, p) => p && typeof v === 'string' && codePointCmp(v, want) >= 0;
    case '$lt':
      return (v, p) => p && typeof v === 'string' && codePointCmp(v, want) < 0;
    case '$lte':
      return (v, p) => p && typeof v === 'string' && codePointCmp(v, want) <= 0;
  }
}

/** Compile a filter or none (null: every event passes). */
export function compileOptional(doc: EventFilter | null | undefined): CompiledFilter | null {
  return doc === null || doc === undefined || Object.keys(doc).length === 0 ? null : compileFilter(doc);
}
