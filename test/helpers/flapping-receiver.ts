// A real HTTP receiver whose paths answer at once, hang, or "flap" (CONTRACT 8, issue 49): a
// flapping path answers at once for `fastMs` of every `cycleMs` (from the moment the cycle is
// started) and holds every request that arrives in the rest of the cycle until the client gives
// up (svc's delivery timeout) or the receiver is closed. It counts the requests it holds now and
// the most it held at once, so a test can show that the attack it stages really took slots.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type PathMode = 'fast' | 'hang' | 'flap';

export interface FlapRequest {
  path: string;
  json: any;
  /** when it arrived (ms since the epoch) */
  at: number;
  /** answered at once (false: held) */
  fast: boolean;
}

export interface FlappingReceiver {
  url: string;
  /** the URL of a path named `name` */
  hook(name: string): string;
  /** how a path answers from now on (default: fast) */
  set(name: string, mode: PathMode): void;
  /** the flapping paths' cycle: fast for `fastMs` of every `cycleMs`, starting now with a fast phase */
  startCycle(fastMs: number, cycleMs: number): void;
  /** whether a flapping path answers at once now */
  fastNow(): boolean;
  /** requests at a path, in arrival order */
  at(name: string): FlapRequest[];
  all: FlapRequest[];
  /** requests held now */
  held(): number;
  /** the most requests held at once since the last resetMaxHeld() */
  maxHeld(): number;
  resetMaxHeld(): void;
  /** ends every held request (its client sees the connection close) and stops listening */
  close(): Promise<void>;
}

export async function startFlappingReceiver(): Promise<FlappingReceiver> {
  const all: FlapRequest[] = [];
  const modes = new Map<string, PathMode>();
  const holding = new Set<http.ServerResponse>();
  let maxHeld = 0;
  let cycle: { t0: number; fastMs: number; cycleMs: number } | null = null;
  const fastNow = () => !cycle || (Date.now() - cycle.t0) % cycle.cycleMs < cycle.fastMs;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let json: unknown;
      try {
        json = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        json = undefined;
      }
      const p = new URL(req.url ?? '/', 'http://x').pathname;
      const mode = modes.get(p) ?? 'fast';
      const fast = mode === 'fast' || (mode === 'flap' && fastNow());
      all.push({ path: p, json, at: Date.now(), fast });
      if (fast) {
        res.writeHead(200).end('ok');
        return;
      }
      holding.add(res);
      maxHeld = Math.max(maxHeld, holding.size);
      res.once('close', () => holding.delete(res));
    });
  });
  // many requests held at once: never let node time them out on the receiver's side
  server.requestTimeout = 0;
  server.headersTimeout = 0;
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const pathOf = (name: string) => `/h/${name}`;
  return {
    url,
    all,
    hook: (name) => url + pathOf(name),
    set: (name, mode) => void modes.set(pathOf(name), mode),
    startCycle(fastMs, cycleMs) {
      cycle = { t0: Date.now(), fastMs, cycleMs };
    },
    fastNow,
    at: (name) => all.filter((r) => r.path === pathOf(name)),
    held: () => holding.size,
    maxHeld: () => maxHeld,
    resetMaxHeld: () => void (maxHeld = holding.size),
    close: async () => {
      for (const r of holding) r.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
