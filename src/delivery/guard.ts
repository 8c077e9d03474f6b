// Target guard (CONTRACT 6.4): a webhook URL whose host resolves to a loopback, private,
// link-local, metadata, unspecified, shared (CGNAT), multicast or reserved address is refused
// at delivery unless private targets are allowed. The caller connects to the address checked
// here (never resolving the name again), so a DNS answer cannot change between check and use.
import type { LookupAddress, LookupOneOptions } from 'node:dns';
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP, isIPv4, isIPv6, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

export type RefusalReason = 'loopback' | 'private' | 'link-local' | 'metadata' | 'unspecified' | 'shared' | 'multicast' | 'reserved';

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
// The special-purpose ranges are ipaddr.js's (IANA's registries, RFC by RFC); this table only says
// which of them refuse a target and why. A range it does not name (one a later ipaddr.js adds)
// is refused as reserved: the guard fails closed.

/** What each ipaddr.js range (`addr.range()`) means for a webhook target; null = allowed. */
const V4_RANGES: Record<string, RefusalReason | null> = {
  unicast: null,
  unspecified: 'unspecified', // 0.0.0.0/8
  broadcast: 'reserved', // 255.255.255.255
  multicast: 'multicast', // 224.0.0.0/4
  linkLocal: 'link-local', // 169.254.0.0/16
  loopback: 'loopback', // 127.0.0.0/8
  carrierGradeNat: 'shared', // 100.64.0.0/10
  private: 'private', // 10/8, 172.16/12, 192.168/16
  reserved: 'reserved', // 192.0.0/24, documentation, 192.88.99/24, 198.18/15 benchmarking, 240/4
  as112: null, // public anycast DNS sinks
  amt: null, // public AMT relays
};

const V6_RANGES: Record<string, RefusalReason | null> = {
  unicast: null,
  unspecified: 'unspecified', // ::
  loopback: 'loopback', // ::1
  linkLocal: 'link-local', // fe80::/10
  multicast: 'multicast', // ff00::/8
  uniqueLocal: 'private', // fc00::/7
  deprecatedSiteLocal: 'private', // fec0::/10
  discard: 'reserved', // 100::/64
  teredo: 'reserved', // 2001::/32, a tunnel to an address we cannot check
  benchmarking: 'reserved', // 2001:2::/48
  deprecatedOrchid: 'reserved', // 2001:10::/28, identifiers, not locators
  segmentRouting: 'reserved', // 5f00::/16 SRv6 SIDs
  reserved: 'reserved', // 2001::/23 (the rest), 2001:db8::/32 and 3fff::/20 documentation
  amt: null, // the ranges IANA marks globally reachable
  as112v6: null,
  orchid2: null,
  droneRemoteIdProtocolEntityTags: null,
  // The forms that embed an IPv4 address are decided by it (classifyV6): ipv4Mapped, rfc6145,
  // rfc6052, 6to4.
};

// Exact addresses with a reason of their own, checked first (they lie inside a broader range).
const METADATA_V4 = ipaddr.IPv4.parse('169.254.169.254'); // cloud instance metadata
const METADATA_V6 = ipaddr.IPv6.parse('fd00:ec2::254'); // AWS IMDS over IPv6
const NAT64_WELL_KNOWN: [ipaddr.IPv6, number] = ipaddr.IPv6.parseCIDR('64:ff9b::/96'); // RFC 6052
const IPV4_COMPATIBLE: [ipaddr.IPv6, number] = ipaddr.IPv6.parseCIDR('::/96'); // deprecated ::a.b.c.d

function classifyV4(a: ipaddr.IPv4): RefusalReason | null {
  if (a.match(METADATA_V4, 32)) return 'metadata';
  const range = a.range() as string;
  return Object.hasOwn(V4_RANGES, range) ? V4_RANGES[range] : 'reserved';
}

/** The IPv4 address at parts[hi], parts[lo] of an IPv6 address. */
const v4At = (p: number[], hi: number, lo: number) => new ipaddr.IPv4([p[hi] >> 8, p[hi] & 0xff, p[lo] >> 8, p[lo] & 0xff]);

function classifyV6(a: ipaddr.IPv6): RefusalReason | null {
  if (a.match(METADATA_V6, 128)) return 'metadata';
  const range = a.range() as string;
  const p = a.parts;
  switch (range) {
    // IPv4-mapped ::ffff:a.b.c.d and SIIT ::ffff:0:a.b.c.d: the embedded IPv4 address decides
    case 'ipv4Mapped':
    case 'rfc6145':
      return classifyV4(v4At(p, 6, 7));
    // NAT64: the well-known prefix 64:ff9b::/96 embeds an IPv4 address; 64:ff9b:1::/48 is local use
    case 'rfc6052':
      return a.match(NAT64_WELL_KNOWN) ? classifyV4(v4At(p, 6, 7)) : 'private';
    // 6to4 2002:aabb:ccdd::/48 embeds aa.bb.cc.dd
    case '6to4':
      return classifyV4(v4At(p, 1, 2));
  }
  // IPv4-compatible ::a.b.c.d (deprecated; :: and ::1 matched their own ranges above)
  if (range === 'unicast' && a.match(IPV4_COMPATIBLE)) return classifyV4(v4At(p, 6, 7));
  return Object.hasOwn(V6_RANGES, range) ? V6_RANGES[range] : 'reserved';
}

/** An address node:net calls IPv6; the zone id (whose syntax ipaddr.js takes narrowly) is dropped. */
const parseV6 = (address: string) => ipaddr.IPv6.parse(address.split('%')[0]);

/** Eight 16-bit groups of an IPv6 address (zone id dropped), or null if it is not one. */
export function parseIPv6(input: string): number[] | null {
  return isIPv6(input) ? parseV6(input).parts : null;
}

/** Why an address must not be a webhook target, or null when it may be. Non-IP input is 'reserved'. */
export function classifyAddress(address: string): RefusalReason | null {
  // node:net decides what is an address (strict dotted quads, IPv6 with an optional zone id);
  // ipaddr.js's parser alone would also take 127.1 or 0x7f000001.
  if (isIPv4(address)) return classifyV4(ipaddr.IPv4.parse(address));
  if (isIPv6(address)) return classifyV6(parseV6(address));
  return 'reserved';
}

/**
 * How to connect to only what the guard checked: a name is pinned to its vetted addresses (never
 * resolved again) and keeps its TLS server name; an IP literal needs no lookup. Deliveries' pools
 * (src/delivery/http1.ts) connect with these.
 */
export function pinnedLookup(url: URL, resolved: ResolvedTarget): { lookup?: LookupFunction; servername?: string } {
  const hostname = urlHostname(url);
  if (isIP(hostname)) return {};
  const { address, family } = resolved;
  const all: LookupAddress[] = resolved.addresses.map((a) => ({ address: a.address, family: a.family }));
  // net.connect asks for all addresses when it races families (autoSelectFamily), else one
  const pinned = (_host: string, options: LookupOneOptions & { all?: boolean }, cb: (...args: unknown[]) => void) => {
    if (options?.all) cb(null, all);
    else cb(null, address, family);
  };
  return { lookup: pinned as unknown as LookupFunction, servername: hostname };
}

/** pinnedLookup as undici's `connect` options (verification requests), with a connect timeout. */
export function pinnedConnect(
  url: URL,
  resolved: ResolvedTarget,
  timeoutMs: number,
): { timeout: number; lookup?: never; servername?: string } {
  const { lookup, servername } = pinnedLookup(url, resolved);
  return lookup ? { timeout: timeoutMs, lookup: lookup as never, servername } : { timeout: timeoutMs };
}
