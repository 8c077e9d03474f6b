// WAL checkpoints off the engine's thread. SQLite copies the write-ahead log back into the database
// file (a checkpoint: the pages, and an fsync of each file) in the commit that takes the log past
// 1,000 pages: under a flood of producers' facts that is every ~800 facts, 10–60 ms of waiting on
// the disk in the engine's thread, and every producer answered after that commit waits too
// (CONTRACT §8: another org's answers within 100 ms). Instead, a thread of its own checkpoints on a
// connection of its own every PASS_EVERY_MS (PASSIVE: it never waits for the engine nor holds it
// up), and the engine's connection checkpoints nothing in its commits.
//
// A checkpoint beside commits never quite catches up (what was committed during it is left), and
// the log starts again from its beginning only once it has been copied whole: so once the log holds
// RESTART_BYTES, the engine's connection copies the few pages the thread left, between two turns
// of the event loop (not in a commit: the answers of the commit before are sent first), and its
// next commit starts the log again. The thread tells the log's length only after a pass, every 50 ms
// or later on a busy machine, and a flood adds megabytes in that time: so the engine also looks at
// the log's file after each group of facts (`committed`), and finishes once that file grows past
// RESTART_BYTES, and again only once it grows FINISH_STEP_BYTES past that (its size is the longest
// the log has been: a log started again is written from the file's beginning, so the file grows only
// while the log has not started again). A store in memory, or not in WAL mode, is left as it is.
import { statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { nextTurnOnce } from '../src/domain/clock.ts';
import type { Db } from './db.ts';

/** How often the thread checkpoints (a pass with nothing to copy costs microseconds). */
const PASS_EVERY_MS = 50;
/** The log's length (16 MiB: 4 000 pages of 4 KiB, 1 000 of 16 KiB) after which the engine's connection finishes a checkpoint itself. */
const RESTART_BYTES = 16 * 1024 * 1024;
/** How much more the log's file grows before `committed` finishes again. */
const FINISH_STEP_BYTES = 1024 * 1024;
/** How long the engine's close waits for the thread to end a pass and close its connection. */
const STOP_WAIT_MS = 2000;
/** SQLite's default wal_autocheckpoint, for the engine's connection when the thread is gone. */
const AUTOCHECKPOINT_PAGES = 1000;

/** One pass's result, as PRAGMA wal_checkpoint gives it: pages in the log, and of them copied. */
interface Pass {
  busy: number;
  log: number;
  checkpointed: number;
}

// The thread: plain JavaScript (it needs no TypeScript transform, from source or dist/).
const THREAD = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { fileMustExist: true });
// a pass's result (or error) is told when it differs from the one before: the engine is not woken
// 20 times a second while nothing is written
let last = '';
const tell = (m) => {
  const text = JSON.stringify(m);
  if (text !== last) parentPort.postMessage(m);
  last = text;
};
const timer = setInterval(() => {
  try {
    tell(db.pragma('wal_checkpoint(PASSIVE)')[0]);
  } catch (err) {
    tell({ error: String((err && err.message) || err) });
  }
}, workerData.everyMs);
parentPort.on('message', () => {
  clearInterval(timer);
  db.close();
  Atomics.store(workerData.stopped, 0, 1);
  Atomics.notify(workerData.stopped, 0);
  parentPort.close();
});
`;

export class WalCheckpoints {
  private worker: Worker | null = null;
  /** set to 1 by the thread once its connection is closed */
  private readonly stopped = new Int32Array(new SharedArrayBuffer(4));
  /** The log is long: copy what the thread has left, at the next turn of the event loop. */
  private readonly finish = nextTurnOnce(() => {
    if (!this.closed && this.db.open) this.db.pragma('wal_checkpoint(PASSIVE)');
  });
  private closed = false;
  /** the log's file, and the size past which `committed` finishes next */
  private readonly walFile: string;
  private finishPast: number;
  /** a page as the log's file counts it (a frame: the page and a 24-byte header) */
  private readonly frameBytes: number;
  /** RESTART_BYTES in the database's pages */
  private readonly restartPages: number;

  /** Checkpoints for `db` on a thread of their own; nothing for a store in memory or not in WAL mode. */
  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
  ) {
    this.walFile = `${db.name}-wal`;
    const pageSize = Number(db.pragma('page_size', { simple: true }));
    this.frameBytes = pageSize + 24;
    this.restartPages = Math.ceil(RESTART_BYTES / pageSize);
    this.finishPast = this.restartPages * this.frameBytes;
    if (db.memory || String(db.pragma('journal_mode', { simple: true })).toLowerCase() !== 'wal') return;
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    const worker = new Worker(THREAD, { eval: true, workerData: { driver, file: db.name, everyMs: PASS_EVERY_MS, stopped: this.stopped } });
    worker.unref();
    db.pragma('wal_autocheckpoint = 0');
    worker.on('message', (m: Pass | { error: string }) => {
      if ('error' in m)
        return this.logger.warn({ err: m.error }, 'WAL checkpoint failed (tried again every 50 ms; logged when the error changes)');
      // (a pass's figures are of the log as it began: commits may have added to it since)
      if (m.log >= this.restartPages) this.finish();
    });
    const gone = (why: string) => {
      if (this.closed || this.worker !== worker) return;
      this.worker = null;
      // the engine's commits checkpoint again, as SQLite does by default
      if (db.open) db.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
      this.logger.warn({ err: why }, 'the WAL checkpoint thread stopped; the engine checkpoints in its commits');
    };
    worker.on('error', (err) => gone(String(err)));
    worker.on('exit', (code) => gone(`exit ${code}`));
    this.worker = worker;
  }

  /** Whether the checkpoints run on their own thread. */
  get threaded(): boolean {
    return this.worker !== null;
  }

  /**
   * After a commit (the engine's, of a group of facts): the log's file past `finishPast` means the
   * log has not started again, whatever the thread saw at its last pass: finish. The next finish
   * waits for FINISH_STEP_BYTES more (one may find the thread's pass under way, or a reader keeping
   * the log from starting again; a finish is a disk sync on the engine's thread, not one per commit).
   */
  committed(): void {
    if (!this.worker) return;
    const size = statSync(this.walFile, { throwIfNoEntry: false })?.size ?? 0;
    if (size < this.finishPast) return;
    this.finishPast = size + FINISH_STEP_BYTES;
    this.finish();
  }

  /**
   * Stop the thread once its pass under way ends, its connection closed (waiting up to
   * STOP_WAIT_MS), then copy the whole log into the database file and empty it, as the engine's
   * connection would have done at its close if it were the last one.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (!this.worker) return;
    this.worker.postMessage('stop');
    this.worker = null;
    Atomics.wait(this.stopped, 0, 0, STOP_WAIT_MS);
    try {
      if (this.db.open) this.db.pragma('wal_checkpoint(TRUNCATE)');
    } catch (err) {
      this.logger.warn({ err: String(err) }, 'the last WAL checkpoint failed (the log stays, committed)');
    }
  }
}
