// The event catalog (CONTRACT 10.3, src/events/catalog.ts): one entry per type svc sends to a URL
// (every kind, and the verification request), each with a description, a subject pattern, the
// JSON Schema of its whole CloudEvent and an example made by the real builders; every example
// validates against its schema (zod, and the JSON Schema with ajv, draft 2020-12, strict), and the
// schemas refuse what the builders never make.
import { describe, expect, it } from 'vitest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { EVENT_TYPES, cloudEventJsonSchema, eventTypeEntries, schemaDocument } from '../../src/events/catalog.ts';
import { KINDS } from '../../src/events/kinds/index.ts';
import { VERIFICATION_TYPE } from '../../src/events/verification-request.ts';
import { classify } from '../../src/events/classify.ts';
import { toCloudEvent } from '../../src/events/cloudevent.ts';
import type { Rollout } from '../../src/domain/rollout.ts';

const BASE = 'https://svc.example.com:8443/api';
const URLS = { baseUrl: BASE, source: '//svc.example.com:8443/ctl-api', dashboardUrl: 'https://dash.example.com' };
const ajv = new Ajv2020({ strict: true, allErrors: true });
const validator = (type: string) => ajv.compile(schemaDocument(type, BASE)!);
const validators = new Map([...EVENT_TYPES.keys()].map((t) => [t, validator(t)]));
const jsonValid = (type: string, ev: unknown) => {
  const v = validators.get(type)!;
  return v(ev) ? 'valid' : ajv.errorsText(v.errors);
};

describe('event catalog', () => {
  it('lists every kind and the verification request, once each', () => {
    const kinds = Object.values(KINDS).map((k) => k.type);
    expect([...EVENT_TYPES.keys()].sort()).toEqual([...kinds, VERIFICATION_TYPE].sort());
    expect(EVENT_TYPES.size).toBe(11);
  });

  it.each([...EVENT_TYPES.keys()])('%s: its example, made by the real builder, validates (zod and ajv) and matches its pattern', (type) => {
    const t = EVENT_TYPES.get(type)!;
    const ex = t.example({ ...URLS, orgId: 'org_mine' });
    expect(ex.type).toBe(type);
    expect(ex.svcorgid).toBe('org_mine');
    expect(ex.data.org_id).toBe('org_mine');
    expect(ex.dataschema).toBe(`${BASE}/v1/event-types/${type}/schema`);
    expect(t.schema.safeParse(ex).error).toBeUndefined();
    expect(jsonValid(type, ex)).toBe('valid');
    // the subject follows the pattern: each <name> one segment
    const pattern = new RegExp(`^${t.subject_pattern.replace(/<[a-z_]+>/g, '[^/]+')}$`);
    expect(ex.subject).toMatch(pattern);
    expect(t.description.length).toBeGreaterThan(20);
  });

  it("each kind's example fact is classified (a kind but ping makes an event only then)", () => {
    for (const k of Object.values(KINDS)) if (!k.direct) expect(classify(k.catalog.example), k.type).not.toBeNull();
  });

  it('the schemas refuse what svc never sends: a missing dataschema, a foreign attribute, an unknown data field, a wrong kind', () => {
    const ex = EVENT_TYPES.get('com.svc.workflow.lifecycle.v1')!.example(URLS);
    const { dataschema: _d, ...noSchema } = ex;
    const mutants: Array<[string, unknown]> = [
      ['no dataschema', noSchema],
      ['foreign attribute', { ...ex, extra: 1 }],
      ['unknown data field', { ...ex, data: { ...ex.data, surprise: true } }],
      ['svckind of another kind', { ...ex, svckind: 'workflow_step' }],
      ['transition not of the kind', { ...ex, svctransition: 'detected', data: { ...ex.data, transition: 'detected' } }],
      ['short sequence', { ...ex, sequence: '12' }],
      ['svcexample false', { ...ex, svcexample: false }],
    ];
    for (const [what, ev] of mutants) {
      expect(jsonValid(ex.type, ev), what).not.toBe('valid');
      expect(EVENT_TYPES.get(ex.type)!.schema.safeParse(ev).success, what).toBe(false);
    }
    // the optional attributes of CONTRACT 10.1 and 10.3
    const full = { ...ex, svcorderkey: 'inst_example', sequence: '00000000000000000042', svcexample: true };
    expect(jsonValid(ex.type, full)).toBe('valid');
  });

  it("a change window's wait step (data.rollout without run_id) and a tripped gate's run validate", () => {
    const step = EVENT_TYPES.get('com.svc.workflow_step.lifecycle.v1')!;
    const base = { org_id: 'org_1', time: '2026-01-15T09:30:00.000Z' };
    const wf = { id: 'wf_1', type: 'app_branch_run', owner_id: 'br_1', owner_type: 'app_branches' as const };
    const wait = toCloudEvent(
      {
        ...base,
        kind: 'workflow_step',
        transition: 'started',
        workflow: wf,
        step: { id: 'st_1', name: 'wait for window: eu-1', idx: 2, execution_type: 'system' },
        // as the engine makes it (src/engine/workflow-facts.ts): the wait step's params, no run_id
        rollout: { install_id: 'inst_1', next_window_at: null, window_ids: ['cw_1'] } as Rollout,
      },
      URLS,
    )!;
    expect(step.schema.safeParse(wait).error).toBeUndefined();
    expect(jsonValid(wait.type, wait)).toBe('valid');
    const tripped = toCloudEvent(
      {
        ...base,
        kind: 'workflow',
        transition: 'failed',
        workflow: wf,
        outcome: { status: 'failed', duration_ms: 5, error: 'health gate' },
        rollout: { run_id: 'run_1', trigger: 'health_gate', install_id: 'i', component_id: 'c', verdict: 'degraded', reason: null },
      },
      URLS,
    )!;
    expect(jsonValid(tripped.type, tripped)).toBe('valid');
  });

  it('the schema document: draft 2020-12, `$id` its own absolute URL, the type as title; an unknown type has none', () => {
    const doc = schemaDocument('com.svc.webhook.ping.v1', BASE)!;
    expect(doc.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
    expect(doc.$id).toBe(`${BASE}/v1/event-types/com.svc.webhook.ping.v1/schema`);
    expect(doc.title).toBe('com.svc.webhook.ping.v1');
    expect(Object.keys(doc).slice(0, 3)).toEqual(['$schema', '$id', 'title']);
    expect(schemaDocument('com.svc.nope.v1', BASE)).toBeUndefined();
    expect(cloudEventJsonSchema('com.svc.nope.v1')).toBeUndefined();
  });

  it('the listing: each type with its schema URL and example, the same at every call', () => {
    const a = eventTypeEntries(URLS);
    expect(a.map((e) => e.type)).toEqual([...EVENT_TYPES.keys()]);
    for (const e of a) expect(e.schema_url).toBe(e.example.dataschema);
    expect(JSON.stringify(eventTypeEntries(URLS))).toBe(JSON.stringify(a));
  });
});
