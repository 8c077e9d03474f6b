// Health verdicts (spec 3, CONTRACT 5.2): a component's verdict moves its health and the install's
// composite health, each through its machine; crossings emit component and install health events.
import type { Db } from '../../store/db.ts';
import { getComponent, getInstall, setComponentHealth, setInstallHealth } from '../../store/installs.ts';
import { advanceComponentHealth, advanceInstallHealth, isKnownVerdict } from '../../machines/health.ts';
import { NotFoundError } from '../domain/errors.ts';
import type { HealthMessage } from '../domain/producer-messages.ts';
import type { Tx } from './transaction.ts';
import type { IngestResult } from './runner-results.ts';

export function reportHealth(t: Tx, db: Db, orgId: string, installId: string, msg: HealthMessage): IngestResult {
  const install = getInstall(db, orgId, installId);
  if (!install) throw new NotFoundError('install', installId);
  const component = getComponent(db, installId, msg.component_id);
  if (!component) throw new NotFoundError('component', msg.component_id);
  const reason = msg.reason !== undefined ? { reason: msg.reason } : {};
  const c = advanceComponentHealth(component.health_state, component.health_ctx, { type: 'verdict', verdict: msg.verdict, ...reason });
  if (!c.accepted) return 'ignored';
  setComponentHealth(
    db,
    component.component_id,
    c.state,
    c.context,
    isKnownVerdict(msg.verdict) ? (msg.reason ?? null) : component.health_reason,
  );
  for (const f of c.emitted) {
    t.emit({
      kind: 'component_health',
      transition: f.type,
      org_id: orgId,
      time: t.now,
      install_id: installId,
      component_id: component.component_id,
      health: { verdict: f.verdict, previous: f.previous, ...(f.reason ? { reason: f.reason } : {}) },
    });
  }
  const i = advanceInstallHealth(install.health_state, install.health_ctx, {
    type: 'verdict',
    verdict: msg.verdict,
    component_id: component.component_id,
    ...reason,
  });
  if (i.accepted) {
    setInstallHealth(db, installId, i.state, i.context);
    for (const f of i.emitted) {
      t.emit({
        kind: 'install_health',
        transition: f.type,
        org_id: orgId,
        time: t.now,
        install_id: installId,
        health: { verdict: f.verdict, previous: f.previous, component_id: f.component_id },
      });
    }
  }
  return c.changed || i.changed ? 'accepted' : 'duplicate';
}
