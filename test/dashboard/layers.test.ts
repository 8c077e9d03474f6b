// The dashboard and the HTTP layer read and write through src/services only (STYLE.md "one owner
// per view type; routing never touches the database"): none of their files imports store/ or
// reads ctx.db.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

function sources(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = `${dir}/${e.name}`;
    return e.isDirectory() ? sources(rel) : /\.tsx?$/.test(e.name) ? [rel] : [];
  });
}

describe('views through services', () => {
  it('no file of src/dashboard or src/http imports store/ or reads ctx.db', () => {
    const files = [...sources('src/dashboard'), ...sources('src/http')];
    expect(files.length).toBeGreaterThan(20);
    const offenders = files.filter((f) => {
      const text = fs.readFileSync(path.join(ROOT, f), 'utf8');
      return /from '(\.\.\/)+store\//.test(text) || /\bctx\.db\b/.test(text);
    });
    expect(offenders).toEqual([]);
  });
});
