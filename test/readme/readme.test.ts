// The README is tested (issue 32): the marked shell walkthroughs of README.md and docs/*.md
// (test/readme/walkthroughs.ts says how they are marked) run as written, each in its file's order,
// one after the other in one fresh directory, against real
// processes: svc serve, nats-server with JetStream, svc worker, and svc listen as the receiver. A
// README change that breaks a walkthrough fails here; the second group shows that on broken copies.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNatsServer } from '../helpers/nats-server.ts';
import { ROOT } from '../helpers/paths.ts';
import { extractAll, extractSteps, readDocs, runSteps, Session, walkthroughNames, WalkthroughError, type Step } from './walkthroughs.ts';

const DOCS = readDocs(ROOT);
const README = DOCS.find((d) => d.file === 'README.md')!.text;
const made: string[] = [];
const tmp = (prefix: string) => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  made.push(d);
  return d;
};

// the order they run in: each continues the ones before it (operations stops svc at its end)
const WALKTHROUGHS = ['quickstart', 'health-gated-rollback', 'delivery-with-workers', 'after-an-outage', 'producers', 'operations'];

/** The ```sh blocks of a markdown text, with the walkthrough step each is (if it is one). */
function shBlocks(text: string, file: string): Array<{ code: string; step?: Step }> {
  const steps = extractSteps(text, file);
  const lines = text.split('\n');
  const blocks: Array<{ code: string; step?: Step }> = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== '```sh') continue;
    const end = lines.findIndex((l, j) => j > i && l.trim() === '```');
    blocks.push({ code: lines.slice(i + 1, end).join('\n'), step: steps.find((s) => s.line === i + 1) });
    i = end;
  }
  return blocks;
}

describe('the README walkthroughs are marked where they live', () => {
  it('every svc produce example is a walkthrough step that waits for what the receiver gets (issue 56)', () => {
    let examples = 0;
    for (const d of DOCS) {
      for (const b of shBlocks(d.text, d.file)) {
        // a usage line (`--nats URL`, upper-case placeholders) is not an example
        const produce = b.code.split('\n').filter((l) => /svc produce (health|workflow) /.test(l) && !/--nats URL/.test(l));
        if (!produce.length) continue;
        examples += produce.length;
        expect(b.step, `${d.file}: a svc produce example outside a walkthrough:\n${b.code}`).toBeDefined();
        expect(
          b.step!.expect.filter((e) => e.proc === 'receiver').length,
          `${d.file} line ${b.step!.line}: fewer expect-receiver= than svc produce lines`,
        ).toBeGreaterThanOrEqual(produce.length);
        for (const l of produce)
          expect(l, 'a workflow of a type that emits nothing (issue 56)').not.toMatch(/"type\\?"\s*:\s*\\?"deploy\\?"/);
      }
    }
    expect(examples).toBeGreaterThanOrEqual(3);
  });

  it('NATS walkthroughs take the port from SVC_NATS_PORT, never a fixed 4222 (issue 56)', () => {
    const steps = extractAll(DOCS);
    const nats = steps.filter((s) => /nats-server|--nats /.test(s.code));
    expect(nats.length).toBeGreaterThan(4);
    for (const s of steps) expect(s.code.replaceAll('${SVC_NATS_PORT:-4222}', ''), `${s.file} line ${s.line}`).not.toMatch(/4222/);
    for (const s of nats) {
      for (const l of s.code.split('\n').filter((l) => /nats-server |--nats /.test(l)))
        expect(l, `${s.file} line ${s.line}`).toMatch(/\$SVC_NATS_PORT/);
    }
  });
});

describe('the README walkthroughs run as written', () => {
  const steps = extractAll(DOCS);
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
    expect(walkthroughNames(steps).sort()).toEqual([...WALKTHROUGHS].sort());
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

  it('the quickstart with `npm start --allow-private-targets` (npm drops a flag without --): the receiver never gets the provision', {
    timeout: 120_000,
  }, async () => {
    const broken = README.replace('npm start -- --allow-private-targets', 'npm start --allow-private-targets');
    expect(broken).not.toBe(README);
    const quickstart = extractSteps(broken).filter((s) => s.walkthrough === 'quickstart');
    const err = await runSteps(quickstart, { root: ROOT, dir: tmp('svc-readme-broken-'), waitMs: 15_000 }).catch((e) => e);
    expect(err).toBeInstanceOf(WalkthroughError);
    expect(err.message).toMatch(/expect-receiver=.*not seen within 15000 ms/);
  });

  it('the health-gated walkthrough with nats-server started without -js: svc stops, "jetstream is not enabled"', {
    timeout: 120_000,
  }, async () => {
    const steps = extractAll(DOCS);
    const nats = steps.find((s) => s.walkthrough === 'health-gated-rollback' && s.background === 'nats');
    expect(nats?.code).toMatch(/nats-server -js /);
    // the quickstart (README.md), then the health-gated walkthrough from its file with -js taken out
    const file = DOCS.find((d) => d.file === nats!.file)!;
    const broken = file.text.replace(nats!.code, nats!.code.replace('nats-server -js ', 'nats-server '));
    const upTo = [
      ...extractSteps(README).filter((s) => s.walkthrough === 'quickstart'),
      ...extractSteps(broken, file.file).filter((s) => s.walkthrough === 'health-gated-rollback'),
    ];
    const serverStep = upTo.findIndex((s) => s.walkthrough === 'health-gated-rollback' && s.background === 'server');
    const err = await runSteps(upTo.slice(0, serverStep + 1), { root: ROOT, dir: tmp('svc-readme-broken-'), waitMs: 30_000 }).catch(
      (e) => e,
    );
    expect(err).toBeInstanceOf(WalkthroughError);
    expect(err.message).toMatch(/server exited 1[\s\S]*jetstream/i);
  });
});
