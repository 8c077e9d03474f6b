// Headless Chromium (the system's /usr/bin/chromium) through playwright-core, for dashboard tests.
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { OrgCreds } from './service.ts';

export const CHROMIUM = process.env.SVC_CHROMIUM ?? '/usr/bin/chromium';
export const ARTIFACTS = path.resolve(import.meta.dirname, '..', 'artifacts');

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
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
