// CONTRACT 4.3 "Change windows": an app's allow and deny windows.
import { createChangeWindow, listAppChangeWindows, removeChangeWindow } from '../../services/change-windows.ts';
import { creates, defineRoute, deleteRoute, readRoute, reply } from '../api-route.ts';
import { changeWindowListSchema, changeWindowSchema, createChangeWindowSchema } from '../../schemas/change-windows.ts';

const WINDOWS = '/v1/apps/{app_id}/change-windows';
const tag = 'apps';

export const changeWindowRoutes = [
  defineRoute({
    operationId: 'createChangeWindow',
    method: 'post',
    path: WINDOWS,
    tag,
    scope: 'deploy',
    ...creates('change_windows.create', 'change_window', 'window_id', 'the window', changeWindowSchema),
    summary: "Create a change window: when the app's installs may (allow) or may not (deny) start an update of a run",
    description:
      'An install may start an update of a branch run (or, when applies_to names them, a rollback) ' +
      'when no deny window selecting it covers that moment and, if any allow window selects it, one ' +
      'of them does; otherwise it waits in a `wait for change window: <install>` step. days ' +
      'mon..sun, start HH:MM local to time_zone (IANA; a start skipped by daylight saving opens at ' +
      'the first moment after, one in a repeated hour at its first occurrence), duration 15m to 24h ' +
      '(echoed as given). Installs waiting are evaluated afresh at once.',
    before: ({ ctx, orgId, params }) => void listAppChangeWindows(ctx, orgId, params.app_id),
    body: { schema: createChangeWindowSchema },
    errors: [404],
    handle: ({ ctx, orgId, params, body }) => reply.created(createChangeWindow(ctx, orgId, params.app_id, body)),
  }),
  readRoute(
    {
      operationId: 'listChangeWindows',
      path: WINDOWS,
      tag,
      summary: "List an app's change windows, oldest first",
      ok: ['the windows', changeWindowListSchema],
      errors: [404],
    },
    ({ ctx, orgId, params }) => listAppChangeWindows(ctx, orgId, params.app_id),
  ),
  deleteRoute({
    operationId: 'deleteChangeWindow',
    path: `${WINDOWS}/{window_id}`,
    tag,
    scope: 'deploy',
    audit: { action: 'change_windows.delete', resource: 'change_window' },
    summary: 'Delete a change window (installs it held are evaluated afresh at once)',
    remove: ({ ctx, orgId, params }) => removeChangeWindow(ctx, orgId, params.app_id, params.window_id),
  }),
];
