// Runners (spec 3, CONTRACT 5.1): heartbeats and inactive messages, and the periodic health check
// that moves an active runner without a running heartbeat offline (one unhealthy event per outage).
import type { Db } from '../../store/db.ts';
import { getRunner, saveRunnerState, type RunnerRow } from '../../store/runners.ts';
import { advanceRunner, type RunnerEvent } from '../../machines/runner.ts';
import { NotFoundError } from '../domain/errors.ts';
import type { RunnerInfo } from '../domain/facts.ts';
import type { RunnerMessage } from '../domain/producer-messages.ts';
import type { Tx } from './transaction.ts';
import type { IngestResult } from './runner-results.ts';

/** A heartbeat or an inactive message from a runner. A heartbeat is counted accepted or ignored, never duplicate. */
export function reportRunner(t: Tx, db: Db, orgId: string, runnerId: string, msg: RunnerMessage): IngestResult {
  const runner = getRunner(db, orgId, runnerId);
  if (!runner) throw new NotFoundError('runner', runnerId);
  const event: RunnerEvent =
    msg.type === 'heartbeat'
      ? { type: 'heartbeat', process: msg.process }
      : { type: 'inactive', ...(msg.reason !== undefined ? { reason: msg.reason } : {}) };
  const result = applyRunnerEvent(t, db, runner, event);
  return msg.type === 'heartbeat' && result === 'duplicate' ? 'accepted' : result;
}

/** The health check of one runner (an active one without a running heartbeat since the last check goes offline). */
export function checkRunner(t: Tx, db: Db, orgId: string, runnerId: string): void {
  const runner = getRunner(db, orgId, runnerId);
  if (runner) applyRunnerEvent(t, db, runner, { type: 'check' });
}

function applyRunnerEvent(t: Tx, db: Db, runner: RunnerRow, event: RunnerEvent): IngestResult {
  const r = advanceRunner(runner.state, runner.ctx, event);
  if (!r.accepted) return 'ignored';
  if (!r.changed) return 'duplicate';
  saveRunnerState(db, runner.runner_id, r.state, r.context);
  const info: RunnerInfo = { id: runner.runner_id, name: runner.name, group_id: runner.group_id, group_type: runner.group_type };
  const base = { org_id: runner.org_id, time: t.now, runner: info, ...(runner.install_id ? { install_id: runner.install_id } : {}) };
  for (const f of r.emitted) {
    if (f.type === 'unhealthy') t.emit({ ...base, kind: 'runner_unhealthy', transition: 'unhealthy', reason: f.reason });
    else t.emit({ ...base, kind: 'runner_inactive', transition: 'inactive', ...(f.reason ? { reason: f.reason } : {}) });
  }
  return 'accepted';
}
