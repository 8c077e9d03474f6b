// Target guard (CONTRACT 6.4): a webhook URL whose host resolves to a loopback, private,
// link-local, metadata, unspecified, shared (CGNAT), multicast or reserved address is refused
// at delivery unless private targets are allowed. The caller connects to the address checked
// here (never resolving the name again), so a DNS answer cannot change between check and use.
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP, isIPv4, isIPv6 } from 'node:net';

export type RefusalReason =
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'metadata'
  | 'unspecified'
  | 'shared'
  | 'multicast'
  | 'reserved';

/** The target is not allowed. The message names only the host, never the path or query. */
export class TargetRefusedError extends Error {
  readonly code = 'TARGET_REFUSED';
  constructor(
    readonly host: string,
    readonly reason: RefusalReason | 'unsupported scheme' | 'no address',
  ) {
    super(`target refused: ${describeReason(reason)} (host ${host})`);
    this.name = 'TargetRefusedError';
  }
  /** Short form without the host, e.g. `target refused: private address`. */
  get short(): string {
    return `target refused: ${describeReason(this.reason)}`;
  }
}

function describeReason(reason: TargetRefusedError['reason']): string {
  return reason === 'unsupported scheme' || reason === 'no address' ? reason : `${reason} address`;
}

/** Name resolution failed (the message names only the host). */
export class TargetLookupError extends Error {
  constructor(
    readonly host: string,
    readonly code: string,
  ) {
    super(`dns lookup failed for ${host} (${code})`);
    this.name = 'TargetLookupError';
  }
}

export interface ResolvedTarget {
  /** The address to connect to (the first one the resolver gave). */
  address: string;
  family: 4 | 6;
  /** Every checked address, in resolver order (a connection may fall back to the next one). */
  addresses: Array<{ address: string; family: 4 | 6 }>;
}

export type LookupAll = (hostname: string) => Promise<Array<{ address: string; family: number }>>;

export interface CheckTargetOptions {
  allowPrivate: boolean;
  /** Name resolution; dns.lookup(host, {all: true}) by default (tests may replace it). */
  lookup?: LookupAll;
}

const defaultLookup: LookupAll = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/** Hostname of a URL without IPv6 brackets. */
export function urlHostname(url: URL): string {
  const h = url.hostname;
  return h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h;
}

/**
 * Resolve the URL's host and check every address it resolves to. Returns the address to
 * connect to (the first one, in resolver order). IP literals are checked without DNS.
 */
export async function checkTarget(url: string | URL, opts: CheckTargetOptions): Promise<ResolvedTarget> {
  const u = typeof url === 'string' ? new URL(url) : url;
  const host = urlHostname(u);
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new TargetRefusedError(host, 'unsupported scheme');

  let addrs: Array<{ address: string; family: number }>;
  const literal = isIP(host);
  if (literal) {
    addrs = [{ address: host, family: literal }];
  } else {
    try {
      addrs = await (opts.lookup ?? defaultLookup)(host);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException)?.code ?? 'ERROR';
      throw new TargetLookupError(host, code);
    }
  }
  if (!addrs.length) throw new TargetRefusedError(host, 'no address');
  if (!opts.allowPrivate) {
    for (const a of addrs) {
      const reason = classifyAddress(a.address);
      if (reason) throw new TargetRefusedError(host, reason);
    }
  }
  const addresses = addrs.map((a) => ({ address: a.address, family: (isIPv6(a.address) ? 6 : 4) as 4 | 6 }));
  return { address: addresses[0].address, family: addresses[0].family, addresses };
}

// ------------------------------------------------------------------ address classification

type V4Rule = [base: number, prefix: number, reason: RefusalReason];

// Order matters: the first matching rule names the reason (metadata before link-local).
const V4_RULES: V4Rule[] = [
  [ipv4ToInt('169.254.169.254'), 32, 'metadata'],
  [ipv4ToInt('0.0.0.0'), 8, 'unspecified'],
  [ipv4ToInt('127.0.0.0'), 8, 'loopback'],
  [ipv4ToInt('10.0.0.0'), 8, 'private'],
  [ipv4ToInt('172.16.0.0'), 12, 'private'],
  [ipv4ToInt('192.168.0.0'), 16, 'private'],
  [ipv4ToInt('169.254.0.0'), 16, 'link-local'],
  [ipv4ToInt('100.64.0.0'), 10, 'shared'],
  [ipv4ToInt('192.0.0.0'), 24, 'reserved'], // IETF protocol assignments
  [ipv4ToInt('198.18.0.0'), 15, 'reserved'], // benchmarking
  [ipv4ToInt('224.0.0.0'), 4, 'multicast'],
  [ipv4ToInt('240.0.0.0'), 4, 'reserved'], // incl. 255.255.255.255 broadcast
];

function ipv4ToInt(s: string): number {
  const p = s.split('.').map(Number);
  return ((p[0] << 24) | (p[1] << 16) | (p[2] << 8) | p[3]) >>> 0;
}

function classifyV4Int(n: number): RefusalReason | null {
  for (const [base, prefix, reason] of V4_RULES) {
    const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
    if (((n & mask) >>> 0) === ((base & mask) >>> 0)) return reason;
  }
  return null;
}

/** Eight 16-bit groups of an IPv6 address (zone id dropped), or null if it is not one. */
export function parseIPv6(input: string): number[] | null {
  const s = input.split('%')[0];
  if (!isIPv6(s)) return null;
  let head = s;
  let tailV4: number[] = [];
  const lastColon = s.lastIndexOf(':');
  const last = s.slice(lastColon + 1);
  if (last.includes('.')) {
    if (!isIPv4(last)) return null;
    const n = ipv4ToInt(last);
    tailV4 = [n >>> 16, n & 0xffff];
    head = s.slice(0, lastColon + 1);
    if (head.endsWith(':') && !head.endsWith('::')) head = head.slice(0, -1);
  }
  const parseGroups = (part: string): number[] => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  let groups: number[];
  const dbl = head.indexOf('::');
  if (dbl >= 0) {
    const left = parseGroups(head.slice(0, dbl));
    const right = parseGroups(head.slice(dbl + 2));
    const fill = 8 - left.length - right.length - tailV4.length;
    if (fill < 0) return null;
    groups = [...left, ...new Array<number>(fill).fill(0), ...right, ...tailV4];
  } else {
    groups = [...parseGroups(head), ...tailV4];
  }
  if (groups.length !== 8 || groups.some((g) => !Number.isInteger(g) || g < 0 || g > 0xffff)) return null;
  return groups;
}

function classifyV6(g: number[]): RefusalReason | null {
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  const v4At = (hi: number, lo: number) => (((g[hi] << 16) | g[lo]) >>> 0);
  if (zeros(0, 8)) return 'unspecified';
  if (zeros(0, 7) && g[7] === 1) return 'loopback';
  // IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d, SIIT ::ffff:0:a.b.c.d, NAT64 64:ff9b::a.b.c.d:
  // the embedded IPv4 address decides (an unremarkable one passes).
  if (zeros(0, 5) && g[5] === 0xffff) return classifyV4Int(v4At(6, 7));
  if (zeros(0, 6)) return classifyV4Int(v4At(6, 7));
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return classifyV4Int(v4At(6, 7));
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return classifyV4Int(v4At(6, 7));
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return 'private'; // local-use NAT64 (RFC 8215)
  if (g[0] === 0x2002) return classifyV4Int(v4At(1, 2)); // 6to4 embeds the IPv4 address
  if (g[0] === 0xfd00 && g[1] === 0x0ec2 && zeros(2, 7) && g[7] === 0x254) return 'metadata'; // AWS IMDS
  if ((g[0] & 0xfe00) === 0xfc00) return 'private'; // fc00::/7 unique local
  if ((g[0] & 0xffc0) === 0xfe80) return 'link-local'; // fe80::/10
  if ((g[0] & 0xffc0) === 0xfec0) return 'private'; // fec0::/10 site-local (deprecated)
  if ((g[0] & 0xff00) === 0xff00) return 'multicast'; // ff00::/8
  if (g[0] === 0x0100 && zeros(1, 4)) return 'reserved'; // 100::/64 discard
  return null;
}

/** Why an address must not be a webhook target, or null when it may be. Non-IP input is 'reserved'. */
export function classifyAddress(address: string): RefusalReason | null {
  if (isIPv4(address)) return classifyV4Int(ipv4ToInt(address));
  const g = parseIPv6(address);
  if (!g) return 'reserved';
  return classifyV6(g);
}
