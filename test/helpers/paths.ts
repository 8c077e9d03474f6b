// Where the project is, whatever folder a test file sits in and whatever the working directory.
import path from 'node:path';

/** The project root (this file is test/helpers/paths.ts). */
export const ROOT = path.resolve(import.meta.dirname, '..', '..');
/** The command-line entry point, `svc`. */
export const BIN = path.join(ROOT, 'bin', 'svc.mjs');
