// The data plane key of this installation (src/bus/seal.ts): from the credentials file (svc nats init
// writes it into engine.creds and worker.creds), else SVC_DATAPLANE_KEY, else — for a process that
// has the database (svc serve, svc dataplane-key) — the one this database generated at its first
// start. The one resolver of svc serve's NATS topology, svc worker and svc dataplane-key.
import type { Db } from '../../../store/db.ts';
import { setSettingOnce } from '../../../store/settings.ts';
import { readCredsFile } from './nats-creds.ts';
import { newDataplaneKey, parseDataplaneKey } from '../seal.ts';

const KEY_SETTING = 'dataplane_key';

/** No key in the credentials file nor the environment, and no database to keep one in (svc worker). */
export class DataplaneKeyMissingError extends Error {
  override name = 'DataplaneKeyMissingError';
}

export function resolveDataplaneKey(db: Db | null, natsCreds: string | null): Buffer {
  const fromCreds = natsCreds ? readCredsFile(natsCreds).dataplaneKey : null;
  if (fromCreds) return fromCreds;
  const fromEnv = process.env.SVC_DATAPLANE_KEY;
  if (fromEnv !== undefined) return parseDataplaneKey(fromEnv);
  if (!db) throw new DataplaneKeyMissingError('no data plane key: neither in the credentials file nor in SVC_DATAPLANE_KEY');
  return parseDataplaneKey(setSettingOnce(db, KEY_SETTING, newDataplaneKey().toString('base64')));
}
