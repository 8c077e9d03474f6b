// A NATS URL that names a user and password (or a token): used to connect, never shown
// (CONTRACT 6.7), against a nats-server that requires them.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectNats, natsUrlOptions, redactNatsUrl } from '../../src/bus/nats/nats-connection.ts';
import { parseNatsUrls } from '../../src/bus/nats/nats-url.ts';
import { findNatsServer, freePort, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';

describe('--nats: a URL or a seed list (CONTRACT 1)', () => {
  it('takes a comma-separated list of seeds, as NATS clients do', () => {
    expect(parseNatsUrls('nats://a:4222, nats://b:4222 ,tls://c:4222/')).toBe('nats://a:4222,nats://b:4222,tls://c:4222');
    expect(parseNatsUrls('127.0.0.1:4222')).toBe('127.0.0.1:4222');
    expect(parseNatsUrls('nats://svc:pw@a:4222,nats://b:4222')).toBe('nats://svc:pw@a:4222,nats://b:4222');
  });

  it('refuses a list with a bad URL, naming it without its credentials', () => {
    expect(() => parseNatsUrls('nats://a:4222,http://svc:s3cret@b:4222')).toThrow(/invalid NATS URL "http:\/\/\*\*\*@b:4222"/);
    expect(() => parseNatsUrls('nats://svc:s3cret@a:4222/path')).not.toThrow(/s3cret/);
    expect(() => parseNatsUrls('nats://svc:s3cret@a:4222/path')).toThrow(/invalid NATS URL/);
    expect(() => parseNatsUrls(' , ')).toThrow(/no NATS URL/);
    expect(() => parseNatsUrls('not a url')).toThrow(/invalid NATS URL/);
  });
});

describe('NATS URL credentials', () => {
  it('are taken out of the servers into connection options, decoded', () => {
    expect(natsUrlOptions('nats://svc:p%40ss@10.0.0.1:4222, nats://10.0.0.2:4222')).toEqual({
      servers: ['nats://10.0.0.1:4222', 'nats://10.0.0.2:4222'],
      user: 'svc',
      pass: 'p@ss',
    });
    expect(natsUrlOptions('nats://s3cr3t-token@host:4222')).toEqual({ servers: ['nats://host:4222'], token: 's3cr3t-token' });
    expect(natsUrlOptions('127.0.0.1:4222')).toEqual({ servers: ['127.0.0.1:4222'] });
  });

  it('are never shown: redacted in what logs and errors print', () => {
    expect(redactNatsUrl('nats://svc:p%40ss@10.0.0.1:4222,nats://10.0.0.2:4222')).toBe('nats://***@10.0.0.1:4222,nats://10.0.0.2:4222');
    expect(redactNatsUrl('tls://token@h:4222')).toBe('tls://***@h:4222');
    expect(redactNatsUrl('nats://127.0.0.1:4222')).toBe('nats://127.0.0.1:4222');
  });
});

describe.skipIf(findNatsServer() === null)('a nats-server that requires a user and password', () => {
  let server: NatsServerHandle;
  let url: string;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-nats-userpass-'));

  beforeAll(async () => {
    const port = await freePort();
    const conf = path.join(dir, 'nats.conf');
    fs.writeFileSync(
      conf,
      `listen: 127.0.0.1:${port}\njetstream { store_dir: "${path.join(dir, 'js')}" }\nauthorization { user: svc, password: "s3cret-pw" }\n`,
    );
    server = await startNatsServer({ config: conf });
    url = `nats://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    await server?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('accepts svc with the user and password of the URL', async () => {
    const nc = await connectNats(url.replace('nats://', 'nats://svc:s3cret-pw@'));
    await nc.flush();
    await nc.close();
  });

  it('refuses a wrong password, and the error does not show it', async () => {
    const err = await connectNats(url.replace('nats://', 'nats://svc:wrong-pw@')).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/cannot connect to NATS at nats:\/\/\*\*\*@127\.0\.0\.1/);
    expect(err?.message).not.toContain('wrong-pw');
  });
});
