// Target guard (CONTRACT 6.4): loopback, private, link-local, metadata and similar targets are refused.
import { describe, expect, it } from 'vitest';
import { checkTarget, classifyAddress, parseIPv6, TargetLookupError, TargetRefusedError } from '../../src/delivery/guard.ts';

describe('classifyAddress', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['::1', 'loopback'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['fc00::1', 'private'],
    ['fd12:3456::1', 'private'],
    ['169.254.1.1', 'link-local'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['febf::1', 'link-local'],
    ['169.254.169.254', 'metadata'],
    ['fd00:ec2::254', 'metadata'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['::', 'unspecified'],
    ['100.64.0.1', 'shared'],
    ['100.127.255.255', 'shared'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['240.0.0.1', 'reserved'],
    // IPv4-mapped, -compatible, SIIT, NAT64 and 6to4 forms carry the IPv4 verdict
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['0:0:0:0:0:ffff:7f00:0001', 'loopback'],
    ['::127.0.0.1', 'loopback'],
    ['::7f00:1', 'loopback'],
    ['::ffff:0:127.0.0.1', 'loopback'],
    ['64:ff9b::127.0.0.1', 'loopback'],
    ['2002:7f00:1::', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:a9fe:a9fe', 'metadata'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['::ffff:192.168.0.10', 'private'],
    ['::ffff:0.0.0.0', 'unspecified'],
    ['::ffff:100.64.0.1', 'shared'],
    ['not-an-ip', 'reserved'],
  ])('%s is %s', (addr, reason) => {
    expect(classifyAddress(addr)).toBe(reason);
  });

  it.each([
    '8.8.8.8',
    '93.184.215.14',
    '172.32.0.1',
    '172.15.255.255',
    '100.128.0.1',
    '169.255.0.1',
    '192.169.0.1',
    '11.0.0.1',
    '2001:4860:4860::8888',
    '2606:4700::1111',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::1',
  ])('%s is allowed', (addr) => {
    expect(classifyAddress(addr)).toBeNull();
  });

  // More special-purpose ranges (the table is ipaddr.js's; guard.ts maps each to a reason).
  it.each([
    ['192.0.2.10', 'reserved'], // TEST-NET-1 (documentation)
    ['198.51.100.7', 'reserved'], // TEST-NET-2
    ['203.0.113.200', 'reserved'], // TEST-NET-3
    ['198.18.0.1', 'reserved'], // benchmarking
    ['192.0.0.8', 'reserved'], // IETF protocol assignments
    ['100.64.1.2', 'shared'], // CGNAT
    ['2001:db8::1', 'reserved'], // IPv6 documentation
    ['3fff::1', 'reserved'], // IPv6 documentation (RFC 9637)
    ['2001:2::1', 'reserved'], // IPv6 benchmarking
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'reserved'], // Teredo
    ['100::1', 'reserved'], // discard
    ['fec0::1', 'private'], // site-local (deprecated)
    ['fe80::1%eth-0.1', 'link-local'], // a zone id ipaddr.js would not parse
    ['::ffff:0a00:0001', 'private'], // IPv4-mapped in hex
    ['::ffff:c0a8:1', 'private'],
    ['::ffff:100.64.0.1', 'shared'],
    ['::ffff:192.0.2.1', 'reserved'],
    ['::ffff:224.0.0.1', 'multicast'],
    ['::ffff:0:10.0.0.1', 'private'], // SIIT
    ['64:ff9b::10.0.0.1', 'private'], // NAT64 well-known prefix
    ['64:ff9b::a9fe:a9fe', 'metadata'],
    ['64:ff9b:1::8.8.8.8', 'private'], // NAT64 local-use prefix (RFC 8215)
    ['2002:a00:1::1', 'private'], // 6to4 of 10.0.0.1
    ['2002:a9fe:a9fe::', 'metadata'], // 6to4 of 169.254.169.254
    ['2002:6440::', 'shared'], // 6to4 of 100.64.0.0
    ['::10.1.2.3', 'private'], // IPv4-compatible
    ['127.1', 'reserved'], // not a dotted quad: not an address (URLs are normalized before)
    ['010.0.0.1', 'reserved'],
    ['', 'reserved'],
  ])('%s is %s', (addr, reason) => {
    expect(classifyAddress(addr)).toBe(reason);
  });

  it.each([
    '1.1.1.1',
    '100.63.255.255',
    '192.0.3.1',
    '198.20.0.1',
    '203.0.114.1',
    '2001:4:112::1',
    '2001:3::1',
    '2a00:1450:4001:80b::200e',
    '::ffff:1.1.1.1',
    '64:ff9b::1.1.1.1',
    '2002:101:101::',
  ])('%s is allowed too', (addr) => {
    expect(classifyAddress(addr)).toBeNull();
  });

  it('is cheap per call', () => {
    const addrs = ['8.8.8.8', '10.0.0.1', '2001:4860:4860::8888', '::ffff:127.0.0.1', 'fd00:ec2::254', '2002:a00:1::1'];
    const n = 30_000;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) classifyAddress(addrs[i % addrs.length]);
    const perCallUs = ((performance.now() - t0) * 1000) / n;
    expect(perCallUs).toBeLessThan(100); // a few µs on an idle machine; generous for a loaded one
  });

  it('parses IPv6 forms', () => {
    expect(parseIPv6('::')).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect(parseIPv6('1::')).toEqual([1, 0, 0, 0, 0, 0, 0, 0]);
    expect(parseIPv6('1:2:3:4:5:6:7:8')).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(parseIPv6('1:2:3:4:5:6:1.2.3.4')).toEqual([1, 2, 3, 4, 5, 6, 0x102, 0x304]);
    expect(parseIPv6('::ffff:1.2.3.4')).toEqual([0, 0, 0, 0, 0, 0xffff, 0x102, 0x304]);
    expect(parseIPv6('1.2.3.4')).toBeNull();
    expect(parseIPv6('1:::2')).toBeNull();
  });
});

describe('checkTarget', () => {
  const noDns = async () => {
    throw new Error('DNS must not be used for IP literals');
  };

  it.each([
    'http://127.0.0.1/x',
    'http://127.1/x',
    'http://2130706433/x',
    'http://0x7f000001/x',
    'http://[::1]:8080/x',
    'http://[::ffff:127.0.0.1]/x',
    'http://[::ffff:7f00:1]/x',
    'http://169.254.169.254/latest/meta-data/',
    'http://[fd00:ec2::254]/latest',
    'https://10.0.0.1/hook',
    'http://0.0.0.0:9/x',
    'http://[fe80::1]/x',
  ])('refuses the IP literal of %s without DNS', async (url) => {
    await expect(checkTarget(url, { allowPrivate: false, lookup: noDns })).rejects.toBeInstanceOf(TargetRefusedError);
  });

  it('allows a public IP literal without DNS', async () => {
    expect(await checkTarget('https://8.8.8.8/hook', { allowPrivate: false, lookup: noDns })).toMatchObject({
      address: '8.8.8.8',
      family: 4,
    });
    expect(await checkTarget('https://[2001:4860:4860::8888]/hook', { allowPrivate: false, lookup: noDns })).toMatchObject({
      address: '2001:4860:4860::8888',
      family: 6,
    });
  });

  it('allows private addresses with allowPrivate', async () => {
    expect(await checkTarget('http://127.0.0.1:8080/x', { allowPrivate: true })).toMatchObject({ address: '127.0.0.1', family: 4 });
    expect(await checkTarget('http://[::1]/x', { allowPrivate: true })).toMatchObject({ address: '::1', family: 6 });
  });

  it('resolves names and checks every address', async () => {
    const lookup = async (h: string) => {
      if (h === 'ok.example.test')
        return [
          { address: '93.184.215.14', family: 4 },
          { address: '2606:2800:21f:cb07:6820:80da:af6b:8b2c', family: 6 },
        ];
      if (h === 'mixed.example.test')
        return [
          { address: '93.184.215.14', family: 4 },
          { address: '::ffff:10.0.0.5', family: 6 },
        ];
      return [];
    };
    expect(await checkTarget('https://ok.example.test/h', { allowPrivate: false, lookup })).toEqual({
      address: '93.184.215.14',
      family: 4,
      addresses: [
        { address: '93.184.215.14', family: 4 },
        { address: '2606:2800:21f:cb07:6820:80da:af6b:8b2c', family: 6 },
      ],
    });
    await expect(checkTarget('https://mixed.example.test/h', { allowPrivate: false, lookup })).rejects.toMatchObject({ reason: 'private' });
    expect(await checkTarget('https://mixed.example.test/h', { allowPrivate: true, lookup })).toMatchObject({
      address: '93.184.215.14',
      family: 4,
    });
    await expect(checkTarget('https://empty.example.test/h', { allowPrivate: true, lookup })).rejects.toMatchObject({
      reason: 'no address',
    });
  });

  it('refuses localhost through the real resolver', async () => {
    await expect(checkTarget('http://localhost:1234/x', { allowPrivate: false })).rejects.toMatchObject({
      reason: 'loopback',
      host: 'localhost',
    });
  });

  it('the refusal names the host only', async () => {
    const err = await checkTarget('http://user:pw@10.1.2.3:8443/secret/path?token=abc', { allowPrivate: false }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TargetRefusedError);
    const e = err as TargetRefusedError;
    expect(e.message).toBe('target refused: private address (host 10.1.2.3)');
    expect(e.short).toBe('target refused: private address');
    expect(e.message).not.toMatch(/secret|token|abc|pw|8443/);
  });

  it('refuses schemes other than http and https', async () => {
    await expect(checkTarget('ftp://8.8.8.8/x', { allowPrivate: true })).rejects.toMatchObject({ reason: 'unsupported scheme' });
  });

  it('a failed lookup is a TargetLookupError naming the host', async () => {
    const lookup = async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
    };
    const err = await checkTarget('https://nowhere.invalid/x?y=1', { allowPrivate: false, lookup }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TargetLookupError);
    expect((err as Error).message).toBe('dns lookup failed for nowhere.invalid (ENOTFOUND)');
  });
});
