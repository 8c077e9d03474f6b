// What `svc webhooks create|update` (and `svc listen`) read beside their flags: the subscription
// document (--subscription, --subscription-file) and the secret (--secret, --secret-file, stdin),
// checked before any request (a usage error exits 2).
import fs from 'node:fs';
import { parseDuration } from '../config.ts';
import { str } from './command-kit.ts';
import { UsageError } from './exit-errors.ts';

// ---------------------------------------------------------------- JSON documents

/**
 * A JSON document given inline (`--x`) or in a file (`--x-file`), one way only: the parsed value and
 * where it came from (for the caller's messages); undefined when neither is given.
 */
function readJsonOption(inlineOpt: unknown, fileOpt: unknown, flag: string, what: string): { doc: unknown; where: string } | undefined {
  const inline = str(inlineOpt);
  const file = str(fileOpt);
  if (inline !== undefined && file !== undefined) {
    throw new UsageError(`${flag} and ${flag}-file are mutually exclusive: give ${what} one way`);
  }
  if (inline === undefined && file === undefined) return undefined;
  let text: string;
  let where: string;
  if (file !== undefined) {
    where = `${flag}-file ${file}`;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (err) {
      throw new UsageError(`cannot read ${where}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  } else {
    where = flag;
    text = inline as string;
  }
  try {
    return { doc: JSON.parse(text), where };
  } catch (err) {
    throw new UsageError(`${where} is not valid JSON: ${(err as Error).message}`);
  }
}

// ---------------------------------------------------------------- subscription documents (spec 2.4)

/** The subscription document of --subscription / --subscription-file, or undefined when neither. */
export function readSubscriptionDocument(opts: Record<string, unknown>): Record<string, unknown> | undefined {
  const read = readJsonOption(opts.subscription, opts.subscriptionFile, '--subscription', 'the subscription document');
  if (read === undefined) return undefined;
  const { doc, where } = read;
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) {
    throw new UsageError(`${where} must be a JSON object {"interests"?: {...}, "match"?: {...} | null}`);
  }
  const unknown = Object.keys(doc).filter((k) => k !== 'interests' && k !== 'match');
  if (unknown.length) {
    throw new UsageError(
      `${where}: unknown key${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => JSON.stringify(k)).join(', ')}; ` +
        'the subscription document is {"interests"?: {...}, "match"?: {...} | null}',
    );
  }
  const d = doc as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  if ('interests' in d) out.interests = d.interests;
  if ('match' in d) out.match = d.match;
  return out;
}

// ---------------------------------------------------------------- filters (CONTRACT 10.2)

/**
 * The payload filter of --filter / --filter-file: a JSON object, or null (`null`: remove it);
 * undefined when neither. Its shape and paths are checked by the server (400 naming the path).
 */
export function readFilterDocument(opts: Record<string, unknown>): Record<string, unknown> | null | undefined {
  const read = readJsonOption(opts.filter, opts.filterFile, '--filter', 'the filter');
  if (read === undefined) return undefined;
  const { doc, where } = read;
  if (doc !== null && (typeof doc !== 'object' || Array.isArray(doc))) {
    throw new UsageError(`${where} must be a JSON object (a filter over the CloudEvent), or null to remove it`);
  }
  return doc as Record<string, unknown> | null;
}

// ---------------------------------------------------------------- secrets (--secret, --secret-file, --previous-secret-ttl)

/**
 * Check the secret options of create (and update, with removeSecret and previousSecretTtl) for
 * conflicts, before anything is read or sent. True when they name a new secret.
 */
export function checkSecretOptions(opts: Record<string, unknown>): boolean {
  const inline = str(opts.secret) !== undefined;
  const file = str(opts.secretFile) !== undefined;
  if (inline && file) throw new UsageError('--secret and --secret-file are mutually exclusive: give the secret one way');
  if (opts.removeSecret === true && (inline || file)) {
    throw new UsageError(`${inline ? '--secret' : '--secret-file'} and --remove-secret are mutually exclusive`);
  }
  if (opts.previousSecretTtl !== undefined && !inline && !file) {
    throw new UsageError(
      '--previous-secret-ttl needs a new secret (--secret or --secret-file): it is how long the old one keeps signing beside it',
    );
  }
  return inline || file;
}

/**
 * --previous-secret-ttl as whole seconds (CONTRACT 4.1 previous_secret_ttl_s): a duration like
 * 30m, 1h or 7d, at most 7 days; 0 is a hard cut.
 */
export async function parseSecretTtl(text: string): Promise<number> {
  // the limit lives with the API's validation (zod), loaded only when this option is used
  const { MAX_PREVIOUS_SECRET_TTL_S } = await import('../domain/subscription.ts');
  const t = text.trim();
  if (/^0+(?:\.0*)?(?:ms|s|m|h|d)?$/.test(t)) return 0;
  let ms: number;
  try {
    ms = parseDuration(t);
  } catch {
    throw new UsageError(`--previous-secret-ttl ${JSON.stringify(text)} is not a duration (use e.g. 30m, 1h, 7d)`);
  }
  if (ms % 1000 !== 0) throw new UsageError(`--previous-secret-ttl ${JSON.stringify(text)} is not a whole number of seconds`);
  if (ms / 1000 > MAX_PREVIOUS_SECRET_TTL_S) throw new UsageError(`--previous-secret-ttl ${JSON.stringify(text)} is over 7 days (7d)`);
  return ms / 1000;
}

async function readStream(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream as AsyncIterable<Buffer | string>) chunks.push(typeof c === 'string' ? Buffer.from(c) : c);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * The new secret of --secret, or of --secret-file (`-` = stdin) without exactly one trailing
 * newline (\n or \r\n); undefined when neither. Never echoes the secret in an error.
 */
export async function readSecret(opts: Record<string, unknown>, stdin: NodeJS.ReadableStream = process.stdin): Promise<string | undefined> {
  const file = str(opts.secretFile);
  if (file === undefined) return str(opts.secret);
  const where = file === '-' ? '--secret-file - (stdin)' : `--secret-file ${file}`;
  let text: string;
  try {
    text = file === '-' ? await readStream(stdin) : fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${where}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const secret = text.replace(/\r?\n$/, '');
  if (!secret) throw new UsageError(`${where} is empty`);
  return secret;
}
