// A client in a process of its own, as the isolation tests drive it (forked with an IPC channel): a
// producer (test/helpers/ingest-load.mjs) or an API client (test/helpers/http-load.mjs, or
// test/helpers/request-load.mjs for given requests one after another). What it
// measures is the time from its request to its answer as a client elsewhere would see it, not the
// event loop of svc or of the test. `nice` lowers its priority (a client elsewhere takes no CPU from
// svc; on 2 cores, at the same priority, it takes a third of it).
import { fork } from 'node:child_process';
import os from 'node:os';
import { fileURLToPath } from 'node:url';

type Json = any;

const SCRIPTS = {
  ingest: new URL('./ingest-load.mjs', import.meta.url),
  http: new URL('./http-load.mjs', import.meta.url),
  requests: new URL('./request-load.mjs', import.meta.url),
};

/** A producer process (ingest-load.mjs: `data` as it describes). */
export const producer = (data: Record<string, unknown>, o: { nice?: number } = {}) => loadProcess('ingest', data, o);

/** A load process: `next(key)` waits for the next message carrying key, `post` sends it one. */
export function loadProcess(script: keyof typeof SCRIPTS, data: Record<string, unknown>, o: { nice?: number } = {}) {
  const child = fork(fileURLToPath(SCRIPTS[script]), {
    env: { ...process.env, SVC_LOAD: JSON.stringify(data) },
    execArgv: [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  if (o.nice) os.setPriority(child.pid!, o.nice);
  const messages: Json[] = [];
  let wake = () => {};
  let exited = false;
  child.on('message', (m) => {
    messages.push(m);
    wake();
  });
  child.on('exit', () => {
    exited = true;
    wake();
  });
  /** the next message carrying `key`, its value */
  const next = async (key: string): Promise<Json> => {
    for (;;) {
      const i = messages.findIndex((m) => key in m);
      if (i >= 0) return messages.splice(i, 1)[0][key];
      if (exited) throw new Error(`the producer ended before it reported ${key}`);
      await new Promise<void>((r) => (wake = r));
    }
  };
  return { child, next, post: (m: string) => child.send(m) };
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
export type Figures = { p50: number; p99: number; max: number };
/** p50, p99 and max of a sample of latencies (ms), to one decimal. */
export const figures = (xs: number[]): Figures => ({
  p50: +pct(xs, 50).toFixed(1),
  p99: +pct(xs, 99).toFixed(1),
  max: +Math.max(...xs).toFixed(1),
});
