// Is dist/ (the compiled JavaScript that bin/svc.mjs runs) there, and built from the current
// sources? bin/svc.mjs asks on every call, so this only lists and stats ~100 files (a few ms).
//
// `node scripts/build.mjs` writes dist/.built after a build, its mtime set to when the build
// started. dist/ is stale when a source file (or a tsconfig) was modified after that.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** The folders tsconfig.build.json compiles (dist/ mirrors them: dist/src, dist/machines, dist/store). */
export const SOURCE_DIRS = ['src', 'machines', 'store'];
/** Files whose change also calls for a rebuild. */
export const BUILD_CONFIGS = ['tsconfig.json', 'tsconfig.build.json'];
/** Written by scripts/build.mjs after each build; its mtime is the build's start. */
export const STAMP = 'dist/.built';
/** The module bin/svc.mjs imports. */
export const ENTRY = 'dist/src/cli/main.js';

const mtime = (file) => statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? null;

/** The first .ts/.tsx file under dir (relative to root) modified after `since`, or null. */
function newerSource(root, dir, since) {
  let entries;
  try {
    entries = readdirSync(join(root, dir), { withFileTypes: true });
  } catch {
    return null;
  }
  for (const e of entries) {
    const rel = join(dir, e.name);
    if (e.isDirectory()) {
      const found = newerSource(root, rel, since);
      if (found) return found;
    } else if (/\.tsx?$/.test(e.name) && (mtime(join(root, rel)) ?? 0) > since) {
      return rel;
    }
  }
  return null;
}

/**
 * The state of root's dist/: `missing` (no build), `stale` (`newer` names a source changed since
 * the build) or `fresh`. `sources` is false when there is no src/ (an installed package): then a
 * dist/ that is there counts as fresh.
 */
export function distState(root) {
  if (mtime(join(root, 'src')) === null) return { state: mtime(join(root, ENTRY)) === null ? 'missing' : 'fresh', sources: false };
  const built = mtime(join(root, STAMP));
  if (built === null || mtime(join(root, ENTRY)) === null) return { state: 'missing', sources: true };
  for (const file of BUILD_CONFIGS) {
    if ((mtime(join(root, file)) ?? 0) > built) return { state: 'stale', sources: true, newer: file };
  }
  for (const dir of SOURCE_DIRS) {
    const newer = newerSource(root, dir, built);
    if (newer) return { state: 'stale', sources: true, newer };
  }
  return { state: 'fresh', sources: true };
}
