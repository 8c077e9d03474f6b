// Test helpers: a real svc (in process, real SQLite file, real HTTP, memory or NATS bus).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import type { ServeConfig } from '../../src/config.ts';
import type { Clock } from '../../src/domain/clock.ts';
import { LIMITS } from '../../src/domain/limits.ts';
import type { RelayFault } from '../../src/handoff/outbox-relay.ts';
import { startServer, type RunningServer } from '../../src/server.ts';
import { openDb } from '../../store/db.ts';
import { createOrg, createToken } from '../../store/orgs.ts';
import type { Scope } from '../../src/domain/scopes.ts';
import { waitFor } from './wait.ts';

export { waitFor };

export interface OrgCreds {
  org_id: string;
  api_token: string;
}

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  text: string;
}

export interface TestService {
  url: string;
  dir: string;
  db: string;
  server: RunningServer;
  createOrg(name?: string): OrgCreds;
  /** Another token of the org, of this scope (CONTRACT 2), as the database command makes it. */
  createToken(org: OrgCreds, scope: Scope, name?: string): OrgCreds & { token_id: string };
  api(org: OrgCreds): ApiClient;
  /**
   * Every event emitted for an org so far, in commit order: what svc.events.> carried on this
   * server's bus (the outbox relay mirrors each event there as it hands it to delivery).
   */
  events(orgId: string): Promise<any[]>;
  /** Wait until every event committed so far is delivered (or failed): nothing more will arrive. */
  settled(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export interface ApiClient {
  get<T = any>(p: string): Promise<ApiResponse<T>>;
  post<T = any>(p: string, body?: unknown): Promise<ApiResponse<T>>;
  patch<T = any>(p: string, body?: unknown): Promise<ApiResponse<T>>;
  del<T = any>(p: string): Promise<ApiResponse<T>>;
  raw(method: string, p: string, init?: { body?: string | Buffer; headers?: Record<string, string> }): Promise<ApiResponse>;
}

export function tmpDir(prefix = 'svc-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** A fresh database file with one org (svc creates its schema on open; a running server shares it). */
export function newDbWithOrg(name: string): { db: string; org: OrgCreds } {
  const db = path.join(tmpDir(`svc-${name}-`), 'svc.db');
  const h = openDb(db);
  try {
    const { org, api_token } = createOrg(h, name);
    return { db, org: { org_id: org.org_id, api_token } };
  } finally {
    h.close();
  }
}

/** The config a test's svc runs with (on port 0, private targets allowed), `overrides` applied. */
export function testServeConfig(db: string, overrides: Partial<ServeConfig> = {}): ServeConfig {
  return {
    port: 0,
    host: '127.0.0.1',
    db,
    natsUrl: null,
    baseUrl: null,
    dashboardUrl: null,
    localRunner: true,
    runnerHealthIntervalMs: 15 * 60_000,
    deliveryTimeoutMs: 5000,
    allowPrivateTargets: true,
    driftIntervalMs: null,
    deliveryConcurrency: 256,
    deliver: true,
    natsCreds: null,
    // NATS mode: the data plane on this thread (replayWindowMs reaches it); embedded mode: its own
    // thread, as `npm start` runs it
    deliveryThreads: overrides.natsUrl ? 0 : null,
    maxWebhooksPerOrg: LIMITS.webhooksPerOrg,
    ...overrides,
  };
}

/**
 * Start svc in this process on a free port with a fresh database (or `db`, to restart on one).
 * `opts.logger` replaces the silent logger (a test that reads what svc logs). `opts.clock` is the
 * engine's time (a ManualClock: the test moves the runner health checks, job re-sends, drift scans
 * and the local runner's heartbeats by advancing it); delivery runs on real time whatever it is.
 */
export async function startService(
  overrides: Partial<ServeConfig> = {},
  opts: { logger?: pino.Logger; clock?: Clock; replayWindowMs?: number; relayFault?: RelayFault } = {},
): Promise<TestService> {
  const dir = overrides.db ? path.dirname(overrides.db) : tmpDir();
  const config = testServeConfig(path.join(dir, 'svc.db'), overrides);
  const server = await startServer(config, {
    logger: opts.logger ?? pino({ level: process.env.SVC_TEST_LOG ?? 'silent' }),
    clock: opts.clock,
    replayWindowMs: opts.replayWindowMs,
    relayFault: opts.relayFault,
  });
  const url = server.url;
  const seen: any[] = [];
  server.bus.subscribe('svc.events.>', (m) => void seen.push(m.json()));
  return {
    url,
    dir,
    db: config.db,
    server,
    createOrg(name = 'test-org') {
      const db = openDb(config.db);
      try {
        const { org, api_token } = createOrg(db, name);
        return { org_id: org.org_id, api_token };
      } finally {
        db.close();
      }
    },
    createToken(org, scope, name = scope) {
      const db = openDb(config.db);
      try {
        const t = createToken(db, org.org_id, name, scope);
        return { org_id: org.org_id, api_token: t.api_token, token_id: t.token_id };
      } finally {
        db.close();
      }
    },
    api: (org) => apiClient(url, org),
    async events(orgId) {
      await server.bus.flush();
      return seen.filter((e) => e.svcorgid === orgId);
    },
    async settled(timeoutMs = 10_000) {
      await waitFor(() => server.deliveryIdle(), timeoutMs, 'every committed event to be delivered');
    },
    stop: () => server.stop(),
  };
}

export function apiClient(url: string, org: OrgCreds): ApiClient {
  const auth = { authorization: `Bearer ${org.api_token}`, 'x-svc-org-id': org.org_id };
  const raw = async (method: string, p: string, init: { body?: string | Buffer; headers?: Record<string, string> } = {}) => {
    const res = await fetch(url + p, {
      method,
      headers: { ...auth, ...(init.headers ?? {}) },
      body: init.body as BodyInit | undefined,
      redirect: 'manual',
    });
    const text = await res.text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    return { status: res.status, body, text } as ApiResponse;
  };
  const json = (method: string) => (p: string, body?: unknown) =>
    raw(method, p, body === undefined ? {} : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  return { get: (p) => raw('GET', p), post: json('POST'), patch: json('PATCH'), del: (p) => raw('DELETE', p), raw };
}
