// The README is tested (issue 32): its marked shell walkthroughs (test/readme/walkthroughs.ts says
// how they are marked) run as written, in README order, in one fresh directory, against real
// processes: svc serve, nats-server with JetStream, svc worker, and svc listen as the receiver. A
// README change that breaks a walkthrough fails here; the second group shows that on broken copies.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNatsServer } from '../helpers/nats-server.ts';
import { ROOT } from '../helpers/paths.ts';
import { extractSteps, runSteps, Session, walkthroughNames, WalkthroughError } from './walkthroughs.ts';

const README = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const made: string[] = [];
const tmp = (prefix: string) => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  made.push(d);
  return d;
};

const WALKTHROUGHS = ['quickstart', 'health-gated-rollback', 'delivery-with-workers', 'after-an-outage', 'operations'];

describe('the README walkthroughs run as written', () => {
  const steps = extractSteps(README);
  let failed: string | null = null;
  let session: Session;
  let dir: string;
  beforeAll(async () => {
    if (!findNatsServer()) throw new Error('nats-server is needed (npm test installs it)');
    dir = tmp('svc-readme-');
    session = await Session.open({ root: ROOT, dir });
  });
  afterAll(async () => {
    await session?.close();
    // what every block and process printed, for whoever reads a failure
    if (session) fs.writeFileSync(path.join(dir, '.readme-test', 'transcript.txt'), session.transcript.join('\n\n'));
    if (!failed) fs.rmSync(dir, { recursive: true, force: true });
    else console.error(`README walkthrough ${failed} failed: its directory and transcript are kept in ${dir}`);
  });

  it('every walkthrough is marked', () => {
    expect(walkthroughNames(steps)).toEqual(WALKTHROUGHS);
  });

  // one after the other, in one session: a later walkthrough continues an earlier one, as the README says
  for (const name of WALKTHROUGHS) {
    it(name, { timeout: 300_000 }, async () => {
      if (failed) throw new Error(`not run: walkthrough ${failed} failed before it`);
      try {
        for (const step of steps.filter((s) => s.walkthrough === name)) await session.run(step);
      } catch (err) {
        failed = name;
        throw err;
      }
    });
  }
});

describe('a broken README fails', () => {
  afterAll(() => {
    for (const d of made.filter((d) => d.includes('broken'))) fs.rmSync(d, { recursive: true, force: true });
  });

  it('a marker without its block, or with an unknown option, does not extract', () => {
    expect(() => extractSteps('<!-- walkthrough: x -->\nsome text\n')).toThrow(/must be followed by a ```sh block/);
    expect(() => extractSteps('<!-- walkthrough: x colour=red -->\n```sh\ntrue\n```\n')).toThrow(/unknown walkthrough option colour=red/);
    expect(() => extractSteps('<!-- walkthrough: x ready="y" -->\n```sh\ntrue\n```\n')).toThrow(/ready= needs background=/);
  });

  it('a command that fails names its README line', async () => {
    const broken = ['# t', '', '<!-- walkthrough: t -->', '```sh', 'X=1', 'npx svc installs lst', '```', ''].join('\n');
    const err = await runSteps(extractSteps(broken), { root: ROOT, dir: tmp('svc-readme-broken-'), waitMs: 5000 }).catch((e) => e);
    expect(err).toBeInstanceOf(WalkthroughError);
    expect(err.message).toMatch(/README line 4 \(walkthrough t\): exit 2, expected 0/);
    expect(err.message).toMatch(/unknown command 'lst'/);
  });

  it("the quickstart with `npm start --allow-private-targets` (npm drops a flag without --): the receiver never gets the provision", { timeout: 120_000 }, async () => {
    const broken = README.replace('npm ci && npm start -- --allow-private-targets', 'npm ci && npm start --allow-private-targets');
    expect(broken).not.toBe(README);
    const quickstart = extractSteps(broken).filter((s) => s.walkthrough === 'quickstart');
    const err = await runSteps(quickstart, { root: ROOT, dir: tmp('svc-readme-broken-'), waitMs: 15_000 }).catch((e) => e);
    expect(err).toBeInstanceOf(WalkthroughError);
    expect(err.message).toMatch(/expect-receiver=.*not seen within 15000 ms/);
  });

  it('the health-gated walkthrough with nats-server started without -js: svc stops, "jetstream is not enabled"', { timeout: 120_000 }, async () => {
    const steps = extractSteps(README);
    const nats = steps.find((s) => s.walkthrough === 'health-gated-rollback' && s.background === 'nats');
    expect(nats?.code).toMatch(/nats-server -js /);
    const broken = README.replace(nats!.code, nats!.code.replace('nats-server -js ', 'nats-server '));
    const upTo = extractSteps(broken);
    const serverStep = upTo.findIndex((s) => s.walkthrough === 'health-gated-rollback' && s.background === 'server');
    const err = await runSteps(upTo.slice(0, serverStep + 1), { root: ROOT, dir: tmp('svc-readme-broken-'), waitMs: 30_000 }).catch((e) => e);
    expect(err).toBeInstanceOf(WalkthroughError);
    expect(err.message).toMatch(/server exited 1[\s\S]*jetstream/i);
  });
});
