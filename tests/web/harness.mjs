// What the browser tests of the console share: their settings from the environment, a log with
// times, named steps whose failure says where it happened, Chromium, signing in, and sending the
// manager a goal from the composer.

import { chromium } from 'playwright-core';

/** A check that failed, with what was seen (not a stack trace). */
export class Failure extends Error {}

/** The test's settings: `COHORT_URL`, `COHORT_USER`, `COHORT_PASSWORD` (required),
 * `COHORT_SCREENSHOT` (default `defaultShot`), `COHORT_WAIT_MS`, `COHORT_CHROMIUM`. */
export function settings(test, defaultShot) {
  const env = (name, fallback) => {
    const v = process.env[name];
    if (v !== undefined && v !== '') return v;
    if (fallback !== undefined) return fallback;
    console.error(`${test}: set ${name}`);
    process.exit(2);
  };
  const SHOT = env('COHORT_SCREENSHOT', defaultShot);
  return {
    BASE_URL: env('COHORT_URL').replace(/\/+$/, ''),
    USER: env('COHORT_USER'),
    PASSWORD: env('COHORT_PASSWORD'),
    SHOT,
    WAIT: Number(env('COHORT_WAIT_MS', '60000')),
    CHROMIUM: env('COHORT_CHROMIUM', '/usr/bin/chromium'),
    /** The screenshot's path with `suffix` before its extension. */
    shot: (suffix) => SHOT.replace(/(\.png)?$/, `${suffix}.png`),
  };
}

const started = Date.now();

/** Seconds since the test started. */
export const elapsed = () => ((Date.now() - started) / 1000).toFixed(1);

export const log = (msg) => console.log(`[web ${elapsed().padStart(5)}s] ${msg}`);

/** The step running now, for the failure message. */
export const run = { phase: 'start' };

/** Runs one named step; any error in it becomes a [`Failure`] with its first lines. */
export async function step(name, fn) {
  run.phase = name;
  log(name);
  try {
    return await fn();
  } catch (e) {
    throw e instanceof Failure ? e : new Failure(firstLine(e));
  }
}

export function firstLine(e) {
  // eslint-disable-next-line no-control-regex
  const s = String((e && e.message) || e).replace(/\x1b\[[0-9;]*m/g, '');
  return s.split('\n').slice(0, 3).join(' | ');
}

/** Headless Chromium as the tests run it. */
export function launch(s) {
  return chromium.launch({
    executablePath: s.CHROMIUM,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

export async function signIn(page, s) {
  await page.goto(`${s.BASE_URL}/`, { waitUntil: 'domcontentloaded' });
  await page.getByTestId('login-user').fill(s.USER);
  await page.getByTestId('login-password').fill(s.PASSWORD);
  await page.getByTestId('login-submit').click();
  await page.locator('[data-testid="conn-status"][data-state="live"]').waitFor();
}

/** Sends the manager `text` in the base task, as an operator gives a goal. */
export async function sendGoal(page, text) {
  const baseId = await page.locator('[data-testid="task-item"][data-base="true"]').first().getAttribute('data-task-id');
  await page.getByTestId('composer-task').selectOption(baseId);
  const box = page.locator('[data-testid="receiver-option"][data-agent-id="manager"] input');
  if (!(await box.count())) await page.getByTestId('receivers-all').click();
  await box.check();
  await page.getByTestId('composer-need-reply').uncheck();
  await page.getByTestId('composer-waiting').uncheck();
  await page.getByTestId('composer-content').fill(text);
  await page.getByTestId('composer-send').click();
  await page.locator('[data-testid="composer-status"][data-state="sent"]').waitFor();
}

/** Says where and why a test failed, with the page's errors and a screenshot of the page at
 * `shot`; `more` (optional, async) says what else the page shows. */
export async function reportFailure(test, e, { page, pageErrors, shot, more }) {
  console.error(`\n${test} FAILED at "${run.phase}":\n  ${e instanceof Failure ? e.message : firstLine(e)}`);
  if (pageErrors.length) console.error(`page errors:\n  ${pageErrors.join('\n  ')}`);
  if (!page) return;
  try {
    if (more) console.error(await more());
    await page.screenshot({ path: shot });
    console.error(`screenshot of the failure: ${shot}`);
  } catch {
    /* the page itself is gone */
  }
}
