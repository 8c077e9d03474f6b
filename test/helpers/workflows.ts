// Workflow helpers over the HTTP API for tests.
import { expect } from 'vitest';
import { waitFor, type ApiClient, type TestService } from './service.ts';
import { ingestSubject } from '../../src/bus/subjects.ts';

type Json = any;

/** the statuses a workflow or step ends in */
export const TERMINAL = ['succeeded', 'failed', 'cancelled'];

/** A workflow's events as `kind:step name:transition`, in the order they came. */
export function trail(events: Json[], workflowId: string): string[] {
  return events
    .filter((e) => e.data?.workflow?.id === workflowId)
    .map((e) => `${e.data.kind}:${e.data.step?.name ?? ''}:${e.data.transition}`);
}

/** The trail of a workflow whose steps all ran one after the other and succeeded. */
export function successTrail(stepNames: string[]): string[] {
  return [
    'workflow::started',
    ...stepNames.flatMap((n) => [`workflow_step:${n}:started`, `workflow_step:${n}:succeeded`]),
    'workflow::succeeded',
  ];
}

/** POST and expect `status` (201 by default); resolves the body. */
export async function post(api: ApiClient, p: string, body?: unknown, status = 201): Promise<Json> {
  const r = await api.post(p, body);
  expect(r.status, `${p}: ${r.text}`).toBe(status);
  return r.body;
}

/** GET and expect 200; resolves the body. */
export async function get(api: ApiClient, p: string): Promise<Json> {
  const r = await api.get(p);
  expect(r.status, `${p}: ${r.text}`).toBe(200);
  return r.body;
}

export const getWf = (api: ApiClient, id: string): Promise<Json> => get(api, `/v1/workflows/${id}`);

/** Wait until the workflow has ended; resolves it. */
export async function waitWf(api: ApiClient, id: string, timeoutMs = 15_000): Promise<Json> {
  return waitFor(
    async () => {
      const wf = await getWf(api, id);
      return TERMINAL.includes(wf.status) ? wf : null;
    },
    timeoutMs,
    `workflow ${id} to end`,
  );
}

/** Wait until the named step has `status`; resolves the workflow and the step. */
export async function waitStep(
  api: ApiClient,
  wfId: string,
  name: string,
  status: string,
  timeoutMs = 15_000,
): Promise<{ wf: Json; step: Json }> {
  return waitFor(
    async () => {
      const wf = await getWf(api, wfId);
      const step = wf.steps.find((x: Json) => x.name === name);
      return step && step.status === status ? { wf, step } : null;
    },
    timeoutMs,
    `step ${name} of ${wfId} to be ${status}`,
  );
}

const DRIFT = ['drift_run', 'drift_run_reprovision_sandbox'];

/**
 * The CloudEvents subjects a workflow has emitted so far, derived from what the API shows
 * (CONTRACT 5, 6.2): the workflow's started and terminal events, and for each step that ran (not
 * hidden or skipped) its started and terminal events, plus an approval step's request and answer.
 * The ledger of what must have reached an all-events webhook.
 */
export function emittedSubjects(orgId: string, wf: Json): string[] {
  if (DRIFT.includes(wf.type)) return [];
  const W = wf.workflow_id;
  const out: string[] = [];
  if (wf.started_at) out.push(`${orgId}/workflow/${W}/started`);
  for (const s of wf.steps as Json[]) {
    if (s.execution_type === 'hidden' || s.execution_type === 'skipped' || !s.started_at) continue;
    out.push(`${orgId}/workflow_step/${W}/${s.step_id}/started`);
    if (s.execution_type === 'approval') {
      out.push(`${orgId}/workflow_step_approval/${W}/${s.step_id}/requested`);
      if (s.approval?.status === 'approved' || s.approval?.status === 'rejected')
        out.push(`${orgId}/workflow_step_approval/${W}/${s.step_id}/${s.approval.status}`);
    }
    if (TERMINAL.includes(s.status)) out.push(`${orgId}/workflow_step/${W}/${s.step_id}/${s.status}`);
  }
  if (TERMINAL.includes(wf.status)) out.push(`${orgId}/workflow/${W}/${wf.status}`);
  return out;
}

/** emittedSubjects of every workflow of these installs and of these other workflows (e.g. branch runs). */
export async function emittedByAll(api: ApiClient, orgId: string, opts: { installs?: string[]; workflows?: string[] }): Promise<string[]> {
  const ids = new Set(opts.workflows ?? []);
  for (const i of opts.installs ?? []) for (const w of await get(api, `/v1/installs/${i}/workflows`)) ids.add(w.workflow_id);
  const out: string[] = [];
  for (const id of ids) out.push(...emittedSubjects(orgId, await getWf(api, id)));
  return out;
}

/** An app with configs v1, v2, v3 made by `cfg` from the images api:1, api:2, api:3. */
export async function appWithThreeConfigs(api: ApiClient, name: string, cfg: (image: string) => Json) {
  const app = await post(api, '/v1/apps', { name });
  const out: Json[] = [];
  for (const image of ['api:1', 'api:2', 'api:3']) out.push(await post(api, `/v1/apps/${app.app_id}/configs`, cfg(image)));
  return { app, v1: out[0], v2: out[1], v3: out[2] };
}

/** An install provisioned on `cfgId`, then moved through `then` (each update awaited): the install as it is then. */
export async function installWith(
  api: ApiClient,
  name: string,
  appId: string,
  cfgId: string,
  labels: Record<string, string> = {},
  then: string[] = [],
): Promise<Json> {
  const install = await post(api, '/v1/installs', { app_id: appId, name, labels, app_config_id: cfgId });
  const [prov] = await get(api, `/v1/installs/${install.install_id}/workflows`);
  expect((await waitWf(api, prov.workflow_id)).status).toBe('succeeded');
  for (const id of then) {
    const u = await post(api, `/v1/installs/${install.install_id}/app-config-updates`, { app_config_id: id });
    expect((await waitWf(api, u.workflow_id)).status).toBe('succeeded');
  }
  return get(api, `/v1/installs/${install.install_id}`);
}

/** A health checker's verdict on one of an install's components (CONTRACT 5.2) over `svc`'s bus, answered once committed. */
export async function healthVerdict(
  svc: TestService,
  orgId: string,
  install: Json,
  component: string,
  v: string,
  reason?: string,
): Promise<void> {
  const componentId = install.components.find((c: Json) => c.name === component).component_id;
  const body = { component_id: componentId, verdict: v, ...(reason ? { reason } : {}) };
  const r = await svc.server.bus.request(ingestSubject(orgId, 'health', install.install_id), JSON.stringify(body), { timeoutMs: 5000 });
  expect(r.json()).toMatchObject({ ok: true });
}
