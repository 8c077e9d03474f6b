// The data plane key of this installation (src/bus/seal.ts): from the credentials file (svc nats
// init writes it into engine.creds and worker.creds), else SVC_DATAPLANE_KEY, else the one this
// database generated at its first start (printed by `svc dataplane-key` for a svc worker).
import type { Db } from '../../store/db.ts';
import { setSettingOnce } from '../../store/settings.ts';
import { readCredsFile } from '../bus/nats-creds.ts';
import { newDataplaneKey, parseDataplaneKey } from '../bus/seal.ts';

const KEY_SETTING = 'dataplane_key';

export function resolveDataplaneKey(db: Db, natsCreds: string | null): Buffer {
  const fromCreds = natsCreds ? readCredsFile(natsCreds).dataplaneKey : null;
  if (fromCreds) return fromCreds;
  return parseDataplaneKey(process.env.SVC_DATAPLANE_KEY ?? setSettingOnce(db, KEY_SETTING, newDataplaneKey().toString('base64')));
}
