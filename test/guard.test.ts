// Target guard (CONTRACT 6.4): loopback, private, link-local, metadata and similar targets are refused.
import { describe, expect, it } from 'vitest';
import { checkTarget, classifyAddress, parseIPv6, TargetLookupError, TargetRefusedError } from '../src/delivery/guard.ts';

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

  it.each(['8.8.8.8', '93.184.215.14', '172.32.0.1', '172.15.255.255', '100.128.0.1', '169.255.0.1', '192.169.0.1', '11.0.0.1', '2001:4860:4860::8888', '2606:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1'])(
    '%s is allowed',
    (addr) => {
      expect(classifyAddress(addr)).toBeNull();
    },
  );

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
    expect(await checkTarget('https://8.8.8.8/hook', { allowPrivate: false, lookup: noDns })).toMatchObject({ address: '8.8.8.8', family: 4 });
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
      if (h === 'ok.example.test') return [{ address: '93.184.215.14', family: 4 }, { address: '2606:2800:21f:cb07:6820:80da:af6b:8b2c', family: 6 }];
      if (h === 'mixed.example.test') return [{ address: '93.184.215.14', family: 4 }, { address: '::ffff:10.0.0.5', family: 6 }];
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
    expect(await checkTarget('https://mixed.example.test/h', { allowPrivate: true, lookup })).toMatchObject({ address: '93.184.215.14', family: 4 });
    await expect(checkTarget('https://empty.example.test/h', { allowPrivate: true, lookup })).rejects.toMatchObject({ reason: 'no address' });
  });

  it('refuses localhost through the real resolver', async () => {
    await expect(checkTarget('http://localhost:1234/x', { allowPrivate: false })).rejects.toMatchObject({ reason: 'loopback', host: 'localhost' });
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
