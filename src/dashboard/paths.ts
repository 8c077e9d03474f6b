// Dashboard URL paths (CONTRACT 6.2 links), all under the dashboard's path prefix.
const seg = encodeURIComponent;

export interface Paths {
  prefix: string;
  login(next?: string): string;
  logout: string;
  style: string;
  script: string;
  org: string;
  installs: string;
  install(id: string): string;
  sandbox(installId: string): string;
  component(installId: string, componentId: string): string;
  rollbackPlan(installId: string): string;
  rollbackApply(installId: string): string;
  workflow(id: string): string;
  apps: string;
  app(id: string): string;
  /** GET: a fleet rollback's plan (query: to, selector); POST: apply it */
  fleetRollback(appId: string): string;
  configVeto(appId: string, configId: string): string;
  configUnveto(appId: string, configId: string): string;
  approvals: string;
  webhooks: string;
  newWebhook: string;
  webhook(id: string): string;
  recovery(webhookId: string, recoveryId: string): string;
  events: string;
  /** the event catalog (CONTRACT 10.3) */
  eventTypes: string;
  audit: string;
  /** durable ingest's late refusals (CONTRACT 9) */
  rejections: string;
  event(id: string): string;
  settings: string;
}

/** `prefix` is the dashboard URL's path without a trailing slash ('' at the root). */
export function pathsFor(prefix: string, orgId: string): Paths {
  const org = `${prefix}/${seg(orgId)}`;
  const install = (id: string) => `${org}/installs/${seg(id)}`;
  const app = (id: string) => `${org}/apps/${seg(id)}`;
  return {
    prefix,
    login: (next) => `${prefix}/login${next ? `?next=${seg(next)}` : ''}`,
    logout: `${prefix}/logout`,
    style: `${prefix}/style.css`,
    script: `${prefix}/app.js`,
    org,
    installs: `${org}/installs`,
    install,
    sandbox: (id) => `${install(id)}/sandbox`,
    component: (id, c) => `${install(id)}/components/${seg(c)}`,
    rollbackPlan: (id) => `${install(id)}/rollback/plan`,
    rollbackApply: (id) => `${install(id)}/rollback/apply`,
    workflow: (id) => `${org}/workflows/${seg(id)}`,
    apps: `${org}/apps`,
    app,
    fleetRollback: (id) => `${app(id)}/rollback`,
    configVeto: (id, cfg) => `${app(id)}/configs/${seg(cfg)}/veto`,
    configUnveto: (id, cfg) => `${app(id)}/configs/${seg(cfg)}/unveto`,
    approvals: `${org}/approvals`,
    webhooks: `${org}/webhooks`,
    newWebhook: `${org}/webhooks/new`,
    webhook: (id) => `${org}/webhooks/${seg(id)}`,
    recovery: (id, r) => `${org}/webhooks/${seg(id)}/recoveries/${seg(r)}`,
    events: `${org}/events`,
    eventTypes: `${org}/event-types`,
    audit: `${org}/audit`,
    rejections: `${org}/ingest/rejections`,
    event: (id) => `${org}/events/${seg(id)}`,
    settings: `${org}/settings`,
  };
}

/** The dashboard's path prefix from its absolute URL: '/dashboard', '/ops/dash', or '' at the root. */
export function prefixOf(dashboardUrl: string): string {
  return new URL(dashboardUrl).pathname.replace(/\/+$/, '');
}

/**
 * `next` after sign-in: only a local path under the dashboard (no scheme, no `//host`, no
 * backslashes or control characters); anything else is ignored.
 */
export function safeNext(next: string | undefined, prefix: string): string | undefined {
  if (!next || next.length > 2048) return undefined;
  if (!next.startsWith('/') || next.startsWith('//') || /[\\\u0000-\u001f\u007f]/.test(next)) return undefined;
  let url: URL;
  try {
    url = new URL(next, 'http://local.invalid');
  } catch {
    return undefined;
  }
  if (url.host !== 'local.invalid') return undefined;
  const path = url.pathname;
  if (prefix && path !== prefix && !path.startsWith(`${prefix}/`)) return undefined;
  if (path === `${prefix}/login`) return undefined;
  return path + url.search;
}
