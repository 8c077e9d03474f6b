// Entry of embedded mode's delivery thread (see outbox-thread.ts): the outbox source, the pipeline,
// the deliverer and the outcome batches, off the engine's thread, over this thread's own SQLite
// connection to the same file (WAL: its reads never wait for the engine). A settled row is marked
// delivered in a file of this thread's own (`<db>-delivered`) and deleted from the outbox in
// batches; progress records are batched too (every 50 ms). It delivers nothing before the
// registry the engine's thread sends first is loaded; events name the registry revision they need
// (Route.rev) and the pipeline waits for later ones.
import { parentPort, workerData } from 'node:worker_threads';
import pino from 'pino';
import { openDb } from '../../store/db.ts';
import { DeliveryLedger } from '../../store/outbox.ts';
import { nextTurnOnce } from '../domain/clock.ts';
import { startOutboxDataPlane, type RegistryChange } from './data-plane.ts';
import type { FromOutboxThread, OutboxThreadConfig, ToOutboxThread } from './outbox-thread.ts';

const config = workerData as OutboxThreadConfig;
const port = parentPort!;
const logger = pino({ base: { thread: 'delivery' }, level: config.logLevel, timestamp: pino.stdTimeFunctions.isoTime });
const post = (m: FromOutboxThread) => port.postMessage(m);

function main(): void {
  const db = openDb(config.db);
  // checkpoints (copying the WAL back into the file, with an fsync) are left to the engine's
  // checkpoint thread (store/checkpoints.ts): this thread's deletes stay short writes
  db.pragma('wal_autocheckpoint = 0');
  // delivered rows and progress are recorded in a file this thread alone writes, and delivered rows
  // deleted from the outbox in batches: a settled row costs no wait for the engine's write lock
  // (measured: about 0.7 ms a row under load when each was deleted from the outbox at once)
  const ledger = new DeliveryLedger(config.db);
  const delivery = startOutboxDataPlane({
    db,
    ledger,
    outcomes: (batch) => post({ type: 'outcomes', batch }),
    limits: config.limits,
    logger,
  });
  const source = delivery.source;

  // the engine's thread publishes versions in order; an older one would be a bug, never a replay
  const apply = (changes: readonly RegistryChange[]) => {
    for (const c of changes) {
      if (!delivery.apply(c))
        logger.warn(
          { org_id: c.orgId, webhook_id: c.webhookId, version: c.v },
          'a webhook registry entry older than the one held; refused',
        );
    }
  };

  let loaded = false;
  let draining = false;
  // the kicks of every commit that arrived in one turn of this loop: one read of the outbox
  const kick = nextTurnOnce(() => {
    if (!draining) source.kick();
  });
  port.on('message', (m: ToOutboxThread) => {
    switch (m.type) {
      case 'registry':
        apply(m.changes);
        if (!loaded) {
          loaded = true;
          post({ type: 'ready' });
          source.kick(); // what was committed before a stop or a crash, then everything after
        }
        break;
      case 'kick':
        if (loaded && !draining) kick();
        break;
      case 'idle':
        post({ type: 'idle', id: m.id, idle: delivery.idle() });
        break;
      case 'drain':
        if (draining) return;
        draining = true;
        void (async () => {
          // CONTRACT 6.6: take nothing more, finish the attempts in flight, record the progress of
          // the rest and leave it in the outbox; the last outcomes go before `drained`
          await delivery.drain();
          ledger.close();
          db.close();
          post({ type: 'drained' });
        })().catch((err: unknown) => {
          post({ type: 'failed', error: err instanceof Error ? err.message : String(err) });
          process.exit(1);
        });
        break;
    }
  });
}

try {
  main();
} catch (err) {
  post({ type: 'failed', error: err instanceof Error ? err.message : String(err) });
  process.exit(1);
}
