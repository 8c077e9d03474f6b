// Headless Chromium (the system's /usr/bin/chromium) through playwright-core, for dashboard tests.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { expect } from 'vitest';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { OrgCreds } from './service.ts';
import { REFRESH_PAUSED_KEY } from '../../src/dashboard/script.ts';

export const CHROMIUM = process.env.SVC_CHROMIUM ?? '/usr/bin/chromium';
export const ARTIFACTS = path.resolve(import.meta.dirname, '..', 'artifacts');

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** A fresh browser profile (own cookies) at phone-ish width unless told otherwise. */
export function newContext(browser: Browser, opts: { width?: number; height?: number } = {}): Promise<BrowserContext> {
  return browser.newContext({ viewport: { width: opts.width ?? 1100, height: opts.height ?? 900 } });
}

/** Sign in through the login form; resolves on the page the form redirects to. */
export async function signIn(page: Page, dashboardUrl: string, org: OrgCreds, next?: string): Promise<void> {
  await page.goto(`${dashboardUrl}/login${next ? `?next=${encodeURIComponent(next)}` : ''}`);
  await page.getByLabel('Org ID').fill(org.org_id);
  await page.getByLabel('API token').fill(org.api_token);
  await Promise.all([page.waitForURL((u) => !u.pathname.endsWith('/login')), page.getByRole('button', { name: 'Sign in' }).click()]);
}

/** Full-page screenshot under test/artifacts/ (git-ignored). */
export async function screenshot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

const AXE_SOURCE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: unknown; summary: string | undefined }>;
}

/**
 * axe-core's violations on the page as it is now (every rule axe runs by default, WCAG 2 A/AA
 * and best practices). The script goes in through the DevTools protocol, so the page's CSP stays on.
 */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE_SOURCE);
  const result = await page.evaluate(() => (window as any).axe.run(document, { resultTypes: ['violations'] }));
  return (result.violations as any[]).map((v) => ({
    id: v.id,
    impact: v.impact,
    help: v.help,
    nodes: v.nodes.map((n: any) => ({ target: n.target, summary: n.failureSummary })),
  }));
}

/** A readable list of violations for a failing assertion's message. */
export function describeViolations(where: string, vs: AxeViolation[]): string {
  return vs
    .map(
      (v) =>
        `${where}: [${v.impact}] ${v.id}: ${v.help}\n${v.nodes.map((n) => `  ${JSON.stringify(n.target)}: ${n.summary ?? ''}`).join('\n')}`,
    )
    .join('\n');
}

/** axe-core finds no violation on the page as it is now (they are printed when it does). */
export async function expectAccessible(p: Page, where: string): Promise<void> {
  const found = await axeViolations(p);
  if (found.length) console.error(describeViolations(where, found));
  expect(found, describeViolations(where, found)).toEqual([]);
}

/**
 * Every page of `context` starts with a running workflow's (or recovery's) own refresh switched off,
 * as the reader's switch leaves it for the tab. For tests that reload pages themselves once the
 * engine has moved: the page's refresh every 3 s could start a navigation just as the test's reload
 * does, and one of the two then fails ("Not attached to an active page").
 */
async function pauseAutoRefresh(context: BrowserContext): Promise<void> {
  await context.addInitScript((key) => {
    try {
      sessionStorage.setItem(key, '1');
    } catch {
      // about:blank has no storage; the dashboard's pages do
    }
  }, REFRESH_PAUSED_KEY);
}

/**
 * A new browser context with one page signed in to the dashboard as `org`, its pages' own refresh
 * off (pauseAutoRefresh): a test that watches the refresh makes a context of its own.
 */
export async function signedInPage(
  browser: Browser,
  dashboardUrl: string,
  org: OrgCreds,
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await newContext(browser);
  await pauseAutoRefresh(context);
  const page = await context.newPage();
  await signIn(page, dashboardUrl, org);
  return { context, page };
}
