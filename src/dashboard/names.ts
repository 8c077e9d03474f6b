// Names for ids the pages show: "config v2" for an app config id (looked up once per page).
import type { AppContext } from '../context.ts';
import { getConfig } from '../../store/apps.ts';

/** `config v<N>` of an app config of the org (its id when unknown; "nothing" for none). */
export function configNamer(ctx: AppContext, orgId: string): (id: string | null | undefined) => string {
  const seen = new Map<string, string>();
  return (id) => {
    if (!id) return 'nothing';
    let name = seen.get(id);
    if (name === undefined) {
      const cfg = getConfig(ctx.db, orgId, id);
      name = cfg ? `config v${cfg.version}` : id;
      seen.set(id, name);
    }
    return name;
  };
}
