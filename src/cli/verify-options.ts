// `--verify URL` (repeatable) of `svc branches run` and `svc apps rollback` (CONTRACT 4.3 `verification`, 7):
// each URL a verification gate with the server's defaults (interval 30s, timeout 10s, max_wait 1h,
// failure_limit 3). A URL that is not http(s) is a usage error (exit 2) before any request.
// `--verify-secret S` signs every --verify URL's requests with S (Standard Webhooks, as a delivery),
// so that a receiver that checks signatures (e.g. `svc listen --secret S --verdict pass`) can answer.
import type { Command } from 'commander';
import { MAX_VERIFICATIONS } from '../domain/verification.ts';
import { UsageError } from './exit-errors.ts';

const collect = (v: string, prev: string[]) => [...prev, v];

export function withVerifyOption(cmd: Command): Command {
  return cmd
    .option(
      '--verify <url>',
      `verification: after each group deploys, ask this URL for a verdict until it passes (repeat for more, at most ${MAX_VERIFICATIONS})`,
      collect,
      [] as string[],
    )
    .option('--verify-secret <secret>', 'sign the --verify requests with this secret (whsec_… or plain; Standard Webhooks, as a delivery)');
}

/** The `verification` body of --verify; undefined without any. */
export function verificationOf(opts: Record<string, unknown>): Array<{ url: string; secret?: string }> | undefined {
  const urls = (opts.verify as string[] | undefined) ?? [];
  const secret = typeof opts.verifySecret === 'string' ? opts.verifySecret : undefined;
  if (secret !== undefined && !urls.length) throw new UsageError('--verify-secret signs the --verify requests: give --verify URL too');
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
  return urls.map((url) => (secret ? { url, secret } : { url }));
}
