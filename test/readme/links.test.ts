// Every relative link of the docs resolves (issue 50, docs as a tree): README.md, BENCHMARKS.md and
// every docs/**/*.md. A link to a file must name one that exists; a `#fragment` must name a heading
// of the file it points to (GitHub's anchors: lower case, punctuation dropped, spaces to hyphens).
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/paths.ts';

function markdownFiles(): string[] {
  const out = ['README.md', 'BENCHMARKS.md'];
  const walk = (dir: string) => {
    if (!fs.existsSync(path.join(ROOT, dir))) return;
    for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const rel = `${dir}/${e.name}`;
      if (e.isDirectory()) walk(rel);
      else if (e.name.endsWith('.md')) out.push(rel);
    }
  };
  walk('docs');
  return out;
}

/** The text outside ``` fences and `code spans` (links there are not links). */
function prose(md: string): string[] {
  let fence = false;
  return md.split('\n').map((l) => {
    if (/^\s*```/.test(l)) {
      fence = !fence;
      return '';
    }
    return fence ? '' : l.replace(/`[^`]*`/g, '');
  });
}

/** GitHub's anchor of a heading. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\- _]/gu, '')
    .replace(/ /g, '-');
}

function anchors(md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fence = false;
  for (const l of md.split('\n')) {
    if (/^\s*```/.test(l)) fence = !fence;
    const m = !fence && /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(l);
    if (!m) continue;
    const base = slug(m[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n ? `${base}-${n}` : base);
  }
  return out;
}

const LINK = /!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g;

describe('the docs link to what exists', () => {
  const files = markdownFiles();

  it('the tree is there: README.md and docs/*.md', () => {
    expect(files).toContain('README.md');
    expect(files.filter((f) => f.startsWith('docs/')).length).toBeGreaterThan(0);
  });

  it('every relative link names a file that exists, and a heading of it when it has a #fragment', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of files) {
      const lines = prose(fs.readFileSync(path.join(ROOT, file), 'utf8'));
      lines.forEach((line, i) => {
        for (const m of line.matchAll(LINK)) {
          const href = m[1];
          if (/^[a-z][a-z0-9+.-]*:/i.test(href)) continue; // https:, mailto:
          checked++;
          const [target, fragment] = href.split('#', 2);
          const resolved = target ? path.normalize(path.join(path.dirname(file), decodeURIComponent(target))) : file;
          const abs = path.join(ROOT, resolved);
          if (resolved.startsWith('..') || !fs.existsSync(abs)) {
            broken.push(`${file}:${i + 1}: ${href} (no file ${resolved})`);
            continue;
          }
          if (fragment && resolved.endsWith('.md') && !anchors(fs.readFileSync(abs, 'utf8')).has(fragment)) {
            broken.push(`${file}:${i + 1}: ${href} (no heading #${fragment} in ${resolved})`);
          }
        }
      });
    }
    expect(broken).toEqual([]);
    expect(checked).toBeGreaterThan(10);
  });

  it('every path of the code a page names in a code span exists (the dated perf log aside)', () => {
    const missing: string[] = [];
    let checked = 0;
    for (const file of files.filter((f) => !f.startsWith('docs/perf/'))) {
      fs.readFileSync(path.join(ROOT, file), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          for (const m of line.matchAll(/`((?:src|store|machines|test|bench|scripts)\/[\w./-]+)`/g)) {
            checked++;
            if (!fs.existsSync(path.join(ROOT, m[1]))) missing.push(`${file}:${i + 1}: ${m[1]}`);
          }
        });
    }
    expect(missing).toEqual([]);
    expect(checked).toBeGreaterThan(50);
  });

  it("the anchors are GitHub's", () => {
    expect(slug('Issue 33, step 15: ingest alone, counted')).toBe('issue-33-step-15-ingest-alone-counted');
    expect(slug('Embedded mode (issue 20)')).toBe('embedded-mode-issue-20');
    expect(slug('After an outage: history, attempts, recover, resend')).toBe('after-an-outage-history-attempts-recover-resend');
  });
});
