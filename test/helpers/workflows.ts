// Workflow helpers over the HTTP API for tests.
import { expect } from 'vitest';
import { waitFor, type ApiClient } from './service.ts';

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

const TERMINAL = ['succeeded', 'failed', 'cancelled'];

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
  return waitFor(async () => {
    const wf = await getWf(api, id);
    return TERMINAL.includes(wf.status) ? wf : null;
  }, timeoutMs, `workflow ${id} to end`);
}

/** Wait until the named step has `status`; resolves the workflow and the step. */
export async function waitStep(api: ApiClient, wfId: string, name: string, status: string, timeoutMs = 15_000): Promise<{ wf: Json; step: Json }> {
  return waitFor(async () => {
    const wf = await getWf(api, wfId);
    const step = wf.steps.find((x: Json) => x.name === name);
    return step && step.status === status ? { wf, step } : null;
  }, timeoutMs, `step ${name} of ${wfId} to be ${status}`);
}
