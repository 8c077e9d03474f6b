// Lines at most 140 characters in the sources (issue 50): the formatter wraps code at that width but
// leaves long strings and comments alone, so a long one is split by hand (strings concatenated to the
// same value, comments wrapped). Tests are left out: their data may be long.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/paths.ts';

const MAX = 140;
const FOLDERS = ['src', 'store', 'machines', 'scripts', 'bench', 'bin'];

describe('line length', () => {
  it(`keeps every line of the tracked sources at most ${MAX} characters`, () => {
    const files = execFileSync('git', ['ls-files', '-z', '--', ...FOLDERS], { cwd: ROOT, encoding: 'utf8' })
      .split('\0')
      .filter((f) => /\.(ts|tsx|mjs|mts)$/.test(f) && fs.existsSync(path.join(ROOT, f)));
    expect(files.length).toBeGreaterThan(0);
    const long: string[] = [];
    for (const f of files) {
      const lines = fs.readFileSync(path.join(ROOT, f), 'utf8').split('\n');
      lines.forEach((line, i) => {
        if (line.length > MAX) long.push(`${f}:${i + 1} (${line.length} characters)`);
      });
    }
    expect(long, `lines over ${MAX} characters:\n${long.join('\n')}`).toEqual([]);
  });
});
