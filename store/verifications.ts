// Verify steps running now (CONTRACT 4.3 `verification`): looked up once at start, to poll them again.
import type { Db } from './db.ts';

/** Every started verify step: its workflow and id. */
export function listVerifyingSteps(db: Db): Array<{ workflow_id: string; step_id: string }> {
  return db
    .prepare(`SELECT workflow_id, step_id FROM steps WHERE status = 'started' AND json_extract(params, '$.kind') = 'verify' ORDER BY rowid`)
    .all() as Array<{ workflow_id: string; step_id: string }>;
}
