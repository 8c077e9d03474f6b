// Names for ids the pages show: "config v2" for an app config id (looked up once per page).
import type { AppContext } from '../context.ts';
import { configVersion } from '../services/names.ts';

/** `config v<N>` of an app config of the org (its id when unknown; "nothing" for none). */
export function configNamer(ctx: AppContext, orgId: string): (id: string | null | undefined) => string {
  const seen = new Map<string, string>();
  return (id) => {
    if (!id) return 'nothing';
    let name = seen.get(id);
    if (name === undefined) {
      const version = configVersion(ctx, orgId, id);
      name = version !== null ? `config v${version}` : id;
      seen.set(id, name);
    }
    return name;
  };
}
