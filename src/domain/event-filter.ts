// Payload filters of webhooks (CONTRACT 10.2, issue 54): a JSON document over the CloudEvent as
// delivered, with Outpost's operators. Pure: parse and check a document (shape and bounds, each
// problem with its path), compile it once into closures (what dispatch runs per event: no walk of
// the document per event), and explain an evaluation (what the dry runs answer: the clause that
// decided). The catalog's path check (a path no admitted type has) is src/services/filter-paths.ts.
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

type Plain = string | number | boolean | null;

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
  const root = objectNode(doc, '');
  const test = sharedObject(doc).test;
  return { test: (e) => test(e, true), explain: (e) => root.explain(e, true) };
}

// ------------------------------------------------------------------ dispatch's tests, shared

// Dispatch runs every filter of an org against each event. The filters of many webhooks share
// most of their clauses, so `test` is built from shared pieces: a clause met before (the same
// field, operator and operand, anywhere in any filter of this process) is the same function, and
// one that reads an object (a field of it, its clauses, the elements of an array) remembers its
// last answer for that object, so that an event costs each distinct clause once, whatever the
// number of filters that have it. The deciding clause of a dry run (`explain`) is built per filter.

/** A shared test and its canonical key (what it tests, not where). */
interface Shared {
  key: string;
  test: Test;
}

const SHARED_MAX = 50_000;
/** Whether a shared test is used by more than one filter (or twice in one): only then is remembering worth its cost. */
interface Use {
  many: boolean;
}
const shared = new Map<string, { test: Test; use: Use }>();
/** The use of the test being made (read by remember as it wraps it). */
let making: Use = { many: true };

function share(key: string, make: () => Test): Shared {
  const known = shared.get(key);
  if (known) {
    known.use.many = true;
    return { key, test: known.test };
  }
  if (shared.size >= SHARED_MAX) shared.clear(); // filters come and go: start again rather than grow
  const use: Use = { many: false };
  making = use;
  const test = make();
  making = { many: true };
  shared.set(key, { test, use });
  return { key, test };
}

/**
 * The last answer for the last object asked about, once the test is shared (a test of one filter
 * is asked once per event: remembering would only cost); primitives are cheaper to test than to look up.
 */
function remember(t: Test): Test {
  const use = making;
  let lastV: unknown;
  let lastP = false;
  let lastR = false;
  let primed = false;
  return (v, p) => {
    if (!use.many || typeof v !== 'object' || v === null) return t(v, p);
    if (primed && v === lastV && p === lastP) return lastR;
    lastR = t(v, p);
    lastV = v;
    lastP = p;
    primed = true;
    return lastR;
  };
}

function sharedObject(obj: Record<string, unknown>): Shared {
  const clauses = Object.entries(obj).map(([key, v]) =>
    key.startsWith('$') ? sharedOperator(key as FilterOperator, v) : sharedField(key, v),
  );
  if (clauses.length === 0) return { key: 'O()', test: () => true };
  if (clauses.length === 1) return clauses[0];
  return share(`O(${clauses.map((c) => c.key).join(',')})`, () => {
    const tests = clauses.map((c) => c.test);
    return remember((v, p) => {
      for (let i = 0; i < tests.length; i++) if (!tests[i](v, p)) return false;
      return true;
    });
  });
}

function sharedField(key: string, v: unknown): Shared {
  const inner = isObject(v) ? sharedObject(v) : share(`E${JSON.stringify(v)}`, () => equals(v as Plain));
  // remembered only over a subtree: a leaf costs no more than the look-up of a remembered answer
  const keep = isObject(v) ? remember : (t: Test) => t;
  return share(`F${JSON.stringify(key)}:${inner.key}`, () => {
    const test = inner.test;
    if (key in Object.prototype) {
      // `constructor`, `__proto__`, …: only an own property is the event's
      return keep((obj, p) => (p && isObject(obj) && Object.hasOwn(obj, key) ? test(obj[key], true) : test(undefined, false)));
    }
    // one lookup: JSON has no undefined, so undefined is a missing field (an array has no fields)
    return keep((obj, p) => {
      if (!p || typeof obj !== 'object' || obj === null || Array.isArray(obj)) return test(undefined, false);
      const x = (obj as Record<string, unknown>)[key];
      return x === undefined ? test(undefined, false) : test(x, true);
    });
  });
}

function sharedOperator(op: FilterOperator, v: unknown): Shared {
  switch (op) {
    case '$contains': {
      const elem = isObject(v) ? sharedObject(v) : share(`E${JSON.stringify(v)}`, () => equals(v as Plain));
      return share(`C(${elem.key})`, () => {
        const test = elem.test;
        return remember((x, p) => {
          if (!p || !Array.isArray(x)) return false;
          for (let i = 0; i < x.length; i++) if (test(x[i], true)) return true;
          return false;
        });
      });
    }
    case '$not': {
      const inner = sharedObject(v as Record<string, unknown>);
      return share(`N(${inner.key})`, () => {
        const test = inner.test;
        return (x, p) => !test(x, p);
      });
    }
    case '$and':
    case '$or': {
      const parts = (v as Record<string, unknown>[]).map(sharedObject);
      return share(`${op}(${parts.map((x) => x.key).join(',')})`, () => {
        const tests = parts.map((x) => x.test);
        const decisive = op === '$or';
        return remember((x, p) => {
          for (let i = 0; i < tests.length; i++) if (tests[i](x, p) === decisive) return decisive;
          return !decisive;
        });
      });
    }
    default:
      return share(`${op}${JSON.stringify(v)}`, () => leafTest(op, v));
  }
}

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

/** String comparison by code point (CONTRACT 10.2), with a fast path for the usual strings. */
function codePointCompare(op: '$gt' | '$gte' | '$lt' | '$lte', want: string): Test {
  const cmp = (a: string): number => {
    if (a === want) return 0;
    const n = Math.min(a.length, want.length);
    for (let i = 0; i < n; i++) {
      const x = a.codePointAt(i)!;
      const y = want.codePointAt(i)!;
      if (x !== y) return x < y ? -1 : 1;
      if (x > 0xffff) i++;
    }
    return a.length < want.length ? -1 : a.length > want.length ? 1 : 0;
  };
  switch (op) {
    case '$gt':
      return (v, p) => p && typeof v === 'string' && cmp(v) > 0;
    case '$gte':
      return (v, p) => p && typeof v === 'string' && cmp(v) >= 0;
    case '$lt':
      return (v, p) => p && typeof v === 'string' && cmp(v) < 0;
    case '$lte':
      return (v, p) => p && typeof v === 'string' && cmp(v) <= 0;
  }
}

/** Compile a filter or none (null: every event passes). */
export function compileOptional(doc: EventFilter | null | undefined): CompiledFilter | null {
  return doc === null || doc === undefined || Object.keys(doc).length === 0 ? null : compileFilter(doc);
}
