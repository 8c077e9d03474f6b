// `--verify URL` (repeatable) of `svc branches run` and `svc apps rollback` (CONTRACT 4.3 `verification`, 7):
// each URL a verification gate with the server's defaults (interval 30s, timeout 10s, max_wait 1h,
// failure_limit 3). A URL that is not http(s) is a usage error (exit 2) before any request.
import type { Command } from 'commander';
import { MAX_VERIFICATIONS } from '../domain/verification.ts';
import { UsageError } from './exit-errors.ts';

const collect = (v: string, prev: string[]) => [...prev, v];

export function withVerifyOption(cmd: Command): Command {
  return cmd.option('--verify <url>', `verification: after each group deploys, ask this URL for a verdict until it passes (repeat for more, at most ${MAX_VERIFICATIONS})`, collect, [] as string[]);
}

/** The `verification` body of --verify; undefined without any. */
export function verificationOf(opts: Record<string, unknown>): Array<{ url: string }> | undefined {
  const urls = (opts.verify as string[] | undefined) ?? [];
  if (!urls.length) return undefined;
  if (urls.length > MAX_VERIFICATIONS) throw new UsageError(`--verify: at most ${MAX_VERIFICATIONS} URLs`);
  for (const u of urls) {
    let ok = false;
    try {
      ok = ['http:', 'https:'].includes(new URL(u).protocol);
    } catch {
      ok = false;
    }
    if (!ok) throw new UsageError(`--verify ${JSON.stringify(u)}: an http or https URL`);
  }
  return urls.map((url) => ({ url }));
}
