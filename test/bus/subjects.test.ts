import { describe, expect, it } from 'vitest';
import {
  eventSubject,
  eventsWildcard,
  ingestSubject,
  ingestWildcard,
  isSafeToken,
  isValidSubject,
  jobResultSubject,
  jobSubject,
  jobsWildcard,
  parseIngestSubject,
  parseJobSubject,
  subjectMatches,
  subjectsOverlap,
} from '../../src/bus/subjects.ts';

describe('subjects', () => {
  it('builds event subjects from CloudEvents subjects', () => {
    expect(eventSubject('org_1/workflow_step/wf_1/st_2/succeeded')).toBe('svc.events.org_1.workflow_step.wf_1.st_2.succeeded');
    expect(eventSubject('org_1/workflow/wf_1/started')).toBe('svc.events.org_1.workflow.wf_1.started');
    expect(eventSubject('org_1/install_health/ins_1/degraded')).toBe('svc.events.org_1.install_health.ins_1.degraded');
    expect(subjectMatches(eventsWildcard, eventSubject('org_1/webhook_ping/wh_1/ping'))).toBe(true);
  });

  it('refuses CloudEvents subjects that would not make a clean subject', () => {
    for (const bad of ['', 'org_1//x', '/org_1/x', 'org_1/x/', 'org.1/x', 'org_1/*', 'org_1/>', 'org 1/x', 'org_1/x\n']) {
      expect(() => eventSubject(bad), bad).toThrow();
    }
  });

  it('builds job and ingest subjects', () => {
    expect(jobSubject('org_1', 'run_1')).toBe('svc.jobs.org_1.run_1');
    expect(jobsWildcard).toBe('svc.jobs.>');
    expect(ingestWildcard).toBe('svc.ingest.>');
    expect(jobResultSubject('org_1', 'job_1')).toBe('svc.ingest.org_1.jobs.job_1');
    expect(ingestSubject('org_1', 'health', 'ins_1')).toBe('svc.ingest.org_1.health.ins_1');
    expect(subjectMatches(jobsWildcard, jobSubject('o', 'r'))).toBe(true);
    expect(subjectMatches(ingestWildcard, jobResultSubject('o', 'j'))).toBe(true);
    expect(() => jobSubject('org.1', 'r')).toThrow();
    expect(() => jobSubject('org_1', '*')).toThrow();
    expect(() => jobResultSubject('org_1', '')).toThrow();
    expect(() => ingestSubject('org_1', 'nope' as never, 'x')).toThrow();
    expect(parseJobSubject('svc.jobs.org_1.run_1')).toEqual({ orgId: 'org_1', runnerId: 'run_1' });
    expect(parseJobSubject('svc.jobs.org_1')).toBeNull();
  });

  it('parses ingest subjects', () => {
    expect(parseIngestSubject('svc.ingest.org_1.jobs.job_1')).toEqual({ orgId: 'org_1', family: 'jobs', id: 'job_1' });
    expect(parseIngestSubject('svc.ingest.org_1.workflows.wf_1')).toEqual({ orgId: 'org_1', family: 'workflows', id: 'wf_1' });
    expect(parseIngestSubject('svc.ingest.org_1.runners.run_1')).toEqual({ orgId: 'org_1', family: 'runners', id: 'run_1' });
    expect(parseIngestSubject('svc.ingest.org_1.health.ins_1')).toEqual({ orgId: 'org_1', family: 'health', id: 'ins_1' });
    expect(parseIngestSubject(jobResultSubject('org_2', 'job_9'))).toEqual({ orgId: 'org_2', family: 'jobs', id: 'job_9' });
  });

  it('rejects malformed ingest subjects', () => {
    const bad = [
      '',
      'svc.ingest',
      'svc.ingest.x',
      'svc.ingest.org_1.jobs',
      'svc.ingest.org_1.jobs.job_1.extra',
      'svc.ingest.org_1.builds.b_1',
      'svc.ingest.*.jobs.job_1',
      'svc.ingest.org_1.jobs.>',
      'svc.ingest.org_1.*.job_1',
      'svc.ingest..jobs.job_1',
      'svc.ingest.org_1.jobs.',
      'svc.events.org_1.jobs.job_1',
      'nuon.ingest.org_1.jobs.job_1',
      'svc.ingest.org-1.jobs.job_1',
      'svc.ingest.org_1.jobs.job 1',
      `svc.ingest.org_1.jobs.${'a'.repeat(65)}`,
    ];
    for (const s of bad) expect(parseIngestSubject(s), s).toBeNull();
    expect(parseIngestSubject(`svc.ingest.org_1.jobs.${'a'.repeat(64)}`)).not.toBeNull();
    expect(parseIngestSubject(undefined as unknown as string)).toBeNull();
  });

  it('knows safe tokens', () => {
    expect(isSafeToken('org_1')).toBe(true);
    expect(isSafeToken('abc_123')).toBe(true);
    // an svc id (CONTRACT 2): lowercase [a-z0-9_], 1..64 characters
    for (const t of ['', '*', '>', 'a.b', 'a b', 'a-b', 'é', 'ABC_123', 'x'.repeat(65)]) expect(isSafeToken(t), t).toBe(false);
  });

  it('validates subjects', () => {
    expect(isValidSubject('a.b.c')).toBe(true);
    expect(isValidSubject('a.*.c')).toBe(false);
    expect(isValidSubject('a.*.c', { wildcards: true })).toBe(true);
    expect(isValidSubject('a.>', { wildcards: true })).toBe(true);
    expect(isValidSubject('a.>.c', { wildcards: true })).toBe(false);
    expect(isValidSubject('a..c')).toBe(false);
    expect(isValidSubject('')).toBe(false);
    expect(isValidSubject('a.b*')).toBe(false);
    expect(isValidSubject('a b')).toBe(false);
  });

  it('matches like NATS', () => {
    const cases: Array<[string, string, boolean]> = [
      ['a.b', 'a.b', true],
      ['a.b', 'a.b.c', false],
      ['a.*', 'a.b', true],
      ['a.*', 'a', false],
      ['a.*', 'a.b.c', false],
      ['a.>', 'a.b', true],
      ['a.>', 'a.b.c', true],
      ['a.>', 'a', false],
      ['>', 'a', true],
      ['*.b.>', 'x.b.c', true],
      ['*.b.>', 'x.b', false],
      ['*', 'a.b', false],
    ];
    for (const [p, s, want] of cases) expect(subjectMatches(p, s), `${p} ~ ${s}`).toBe(want);
  });

  it('tells when two patterns overlap', () => {
    expect(subjectsOverlap('svc.events.>', 'svc.ingest.>')).toBe(false);
    expect(subjectsOverlap('svc.>', 'svc.ingest.>')).toBe(true);
    expect(subjectsOverlap('>', 'svc.ingest.>')).toBe(true);
    expect(subjectsOverlap('svc.*.org_1.jobs.*', 'svc.ingest.>')).toBe(true);
    expect(subjectsOverlap('svc.ingest', 'svc.ingest.>')).toBe(false);
    expect(subjectsOverlap('a.*', 'a.b.c')).toBe(false);
  });
});
