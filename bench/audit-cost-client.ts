// The HTTP clients of bench/audit-cost.ts, in a process of their own, so that the bench's process
// CPU is svc's alone. Told a round over IPC ({url, headers, op, n, concurrency, ids, seq}); answers
// {done: true} once its N writes are answered (or {error} on the first refused one).
interface Round {
  url: string;
  headers: Record<string, string>;
  op: 'patch' | 'create';
  n: number;
  concurrency: number;
  ids: string[];
  seq: number;
}

async function call(r: Round, method: string, p: string, body: unknown): Promise<void> {
  const res = await fetch(r.url + p, { method, headers: r.headers, body: JSON.stringify(body) });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${text}`);
}

async function round(r: Round): Promise<void> {
  let next = 0;
  let seq = r.seq;
  await Promise.all(
    Array.from({ length: r.concurrency }, async () => {
      while (next < r.n) {
        const i = next++;
        if (r.op === 'patch') await call(r, 'PATCH', `/v1/orgs/current/webhooks/${r.ids[i % r.ids.length]}`, { secret: `s-${seq++}` });
        else await call(r, 'POST', '/v1/orgs/current/webhooks', { webhook_url: `http://127.0.0.1:9/c/${seq++}`, secret: 'bench-secret' });
      }
    }),
  );
}

process.on('message', (m: Round) => {
  round(m).then(
    () => process.send!({ done: true }),
    (err: unknown) => process.send!({ error: String(err) }),
  );
});
process.on('disconnect', () => process.exit(0));
