// A real HTTP receiver that records every request (test helper).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { later } from './wait.ts';

export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  json: any;
  at: number;
}

export interface Behaviour {
  status?: number;
  hang?: boolean;
  delayMs?: number;
  redirect?: string;
  /** answer with this status and body (a verification URL's verdict), decided per request */
  answer?: (r: Received) => { status: number; body?: string };
}

export interface Receiver {
  url: string;
  hook(name: string): string;
  at(name: string): Received[];
  subjects(name: string): string[];
  set(name: string, b: Behaviour): void;
  all: Received[];
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const all: Received[] = [];
  const behaviours = new Map<string, Behaviour>();
  const hanging = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let json: unknown;
      try {
        json = JSON.parse(raw.toString('utf8'));
      } catch {
        json = undefined;
      }
      const p = new URL(req.url ?? '/', 'http://x').pathname;
      all.push({ path: p, headers: req.headers, raw, json, at: Date.now() });
      const b = behaviours.get(p) ?? {};
      if (b.answer) {
        const a = b.answer(all[all.length - 1]);
        res.writeHead(a.status, { 'content-type': 'application/json' }).end(a.body ?? '');
        return;
      }
      if (b.hang) {
        hanging.add(res);
        return;
      }
      const send = () => {
        if (b.redirect) res.writeHead(b.status ?? 302, { location: b.redirect }).end();
        else res.writeHead(b.status ?? 200).end('ok');
      };
      if (b.delayMs) later(b.delayMs, send, 'a receiver that holds its answer, as a test asked');
      else send();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const pathOf = (name: string) => `/h/${name}`;
  return {
    url,
    all,
    hook: (name) => url + pathOf(name),
    at: (name) => all.filter((r) => r.path === pathOf(name)),
    subjects: (name) => all.filter((r) => r.path === pathOf(name)).map((r) => r.json?.subject),
    set: (name, b) => void behaviours.set(pathOf(name), b),
    close: async () => {
      for (const r of hanging) r.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
