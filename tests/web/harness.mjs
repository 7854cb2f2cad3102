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
export async function reportFailure(test, e, { page, pageErrors, refused = [], shot, more }) {
  console.error(`\n${test} FAILED at "${run.phase}":\n  ${e instanceof Failure ? e.message : firstLine(e)}`);
  if (pageErrors.length) console.error(`page errors:\n  ${pageErrors.join('\n  ')}`);
  if (refused.length) console.error(`requests refused:\n  ${refused.join('\n  ')}`);
  if (!page) return;
  try {
    if (more) console.error(await more());
    // What the task list shows, so a wait for a task's state says what it saw instead.
    const tasks = await page.locator('[data-testid="task-item"]').evaluateAll((items) => items.map((i) => `${i.dataset.base === 'true' ? 'base' : 'task'} ${i.dataset.state}: ${(i.textContent || '').trim().slice(0, 80)}`));
    if (tasks.length) console.error(`the task list:\n  ${tasks.join('\n  ')}`);
    await page.screenshot({ path: shot });
    console.error(`screenshot of the failure: ${shot}`);
  } catch {
    /* the page itself is gone */
  }
}

/**
 * Every visible text on the page whose contrast with what it is drawn on is below `min`
 * (WCAG AA: 4.5 for text), as `{text, ratio, fg, bg, where}`. The background is found by
 * compositing the element's and its ancestors' background colours (a gradient counts as its
 * first colour); disabled controls are left out, as WCAG does.
 */
export function lowContrast(page, min = 4.5) {
  return page.evaluate((min) => {
    const parse = (c) => {
      const m = c.match(/rgba?\(([^)]+)\)/);
      if (!m) return null;
      const p = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
      return { r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1 };
    };
    const over = (top, under) => ({
      r: top.r * top.a + under.r * (1 - top.a),
      g: top.g * top.a + under.g * (1 - top.a),
      b: top.b * top.a + under.b * (1 - top.a),
      a: 1,
    });
    const background = (el) => {
      const layers = [];
      for (let e = el; e; e = e.parentElement) {
        const s = getComputedStyle(e);
        let c = parse(s.backgroundColor);
        if ((!c || c.a === 0) && s.backgroundImage.includes('gradient')) c = parse(s.backgroundImage);
        if (c && c.a > 0) {
          layers.push(c);
          if (c.a >= 1) break;
        }
      }
      let bg = { r: 255, g: 255, b: 255, a: 1 };
      if (getComputedStyle(document.documentElement).colorScheme.includes('dark') && !layers.some((l) => l.a >= 1)) bg = { r: 0, g: 0, b: 0, a: 1 };
      for (const l of layers.reverse()) bg = over(l, bg);
      return bg;
    };
    const lum = ({ r, g, b }) => {
      const f = (v) => {
        v /= 255;
        return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
      };
      return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
    };
    const ratio = (a, b) => {
      const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
      return (x + 0.05) / (y + 0.05);
    };
    const where = (el) => {
      const parts = [];
      for (let e = el; e && parts.length < 3; e = e.parentElement) parts.push(e.tagName.toLowerCase() + (e.dataset.testid ? `[${e.dataset.testid}]` : e.className && typeof e.className === 'string' ? `.${e.className.trim().split(/\s+/).join('.')}` : ''));
      return parts.join(' < ');
    };
    const bad = [];
    for (const el of document.querySelectorAll('body *')) {
      const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
      if (!own || el.closest(':disabled, [hidden], svg, option')) continue;
      const r = el.getBoundingClientRect();
      const s = getComputedStyle(el);
      if (!r.width || !r.height || s.visibility === 'hidden' || Number(s.opacity) === 0) continue;
      const fg = parse(s.color);
      const bg = background(el);
      const q = ratio(fg.a < 1 ? over(fg, bg) : fg, bg);
      if (q < min) bad.push({ text: el.textContent.trim().slice(0, 40), ratio: Math.round(q * 100) / 100, fg: s.color, bg: `rgb(${[bg.r, bg.g, bg.b].map(Math.round)})`, where: where(el) });
    }
    return bad;
  }, min);
}

/** The elements reaching past the viewport's right edge, as `{where, right, width}`; empty when
 * the page fits. Inside a panel that scrolls, an element past the edge still counts (it is cut
 * off until the panel is scrolled sideways), except in the parts meant to scroll sideways (a
 * plan's graph, code and JSON blocks, text being edited) and text cut with an ellipsis. */
export function overflowing(page) {
  return page.evaluate(() => {
    const vw = document.documentElement.clientWidth;
    const SIDEWAYS = '.plan-box, pre, .call-text, textarea, .json, svg';
    // Text cut on purpose (an ellipsis): a box that hides what overflows it, and fits.
    const clipped = (el) => {
      for (let e = el.parentElement; e && e !== document.body; e = e.parentElement) {
        const o = getComputedStyle(e).overflowX;
        if ((o === 'hidden' || o === 'clip') && e.getBoundingClientRect().right <= vw + 1) return true;
      }
      return false;
    };
    const out = [];
    for (const el of document.querySelectorAll('body *')) {
      const r = el.getBoundingClientRect();
      if (!r.width || !r.height || getComputedStyle(el).visibility === 'hidden' || el.closest('[hidden]')) continue;
      if (r.right > vw + 1 && !el.closest(SIDEWAYS) && !clipped(el)) {
        const name = `${el.tagName.toLowerCase()}${el.dataset.testid ? `[${el.dataset.testid}]` : el.className && typeof el.className === 'string' ? `.${el.className.trim().split(/\s+/).join('.')}` : ''}`;
        out.push({ where: name, right: Math.round(r.right), width: Math.round(r.width) });
      }
    }
    if (document.documentElement.scrollWidth > vw + 1) out.push({ where: 'the page scrolls sideways', right: document.documentElement.scrollWidth, width: vw });
    return out;
  });
}

/** Fails with every text below 4.5:1 on the page, naming `where`. */
export async function contrastOk(page, where) {
  const bad = await lowContrast(page);
  if (bad.length) throw new Failure(`${where}: ${bad.length} texts below 4.5:1, e.g. ${bad.slice(0, 5).map((b) => `"${b.text}" ${b.ratio}:1 (${b.fg} on ${b.bg}, ${b.where})`).join('; ')}`);
}

/** Fails when anything reaches past the screen's width. */
export async function fitsOk(page, where) {
  const out = await overflowing(page);
  if (out.length) throw new Failure(`${where}: wider than the screen: ${out.slice(0, 12).map((o) => `${o.where} to ${o.right} px`).join(', ')}`);
}

/** Gives the manager `text` from the composer in the base task (need_reply as the API's
 * default has it), waits for the task it becomes, selects it and returns its id. */
export async function goalBecomesTask(page, text) {
  const base = await page.locator('[data-testid="task-item"][data-base="true"]').first().getAttribute('data-task-id');
  await page.getByTestId('composer-task').selectOption(base);
  await page.getByTestId('composer-need-reply').check();
  await page.getByTestId('composer-content').fill(text);
  await page.getByTestId('composer-send').click();
  const item = page.locator('[data-testid="task-item"][data-base="false"]').first();
  await item.waitFor();
  await item.click();
  return item.getAttribute('data-task-id');
}

/**
 * A whole browser walk: Chromium started, a laptop-sized page whose errors are collected, the
 * person signed in, `body(page, browser)` run, a screenshot at `S.SHOT`, and the process ended
 * with 0, or 1 with the failure said (`label` names the test). The page's own errors fail it.
 */
export async function walk(S, label, body) {
  const browser = await launch(S);
  const pageErrors = [];
  const refused = [];
  let page;
  let ok = false;
  try {
    const context = await browser.newContext({ viewport: { width: 1366, height: 900 }, deviceScaleFactor: 1 });
    page = await context.newPage();
    page.setDefaultTimeout(S.WAIT);
    // Which request the server refused, and its reason: a console error names only the status.
    page.on('response', async (r) => {
      if (r.status() < 400 || !new URL(r.url()).pathname.startsWith('/api/')) return;
      const body = await r.text().catch(() => '');
      refused.push(`${elapsed()} s ${r.request().method()} ${new URL(r.url()).pathname} → ${r.status()} ${body.slice(0, 400)}`);
    });
    page.on('pageerror', (e) => pageErrors.push(`page error: ${e.message}`));
    // A test that provokes an error on purpose names it in `S.expectedErrors` (regexes).
    const expected = (text) => (S.expectedErrors || []).some((re) => re.test(text));
    page.on('console', (m) => {
      if (m.type() === 'error' && !expected(m.text())) pageErrors.push(`console error: ${m.text()}`);
    });
    await step(`sign in as ${S.USER}`, () => signIn(page, S));
    await body(page, browser);
    await step(`screenshot to ${S.SHOT}`, () => page.screenshot({ path: S.SHOT }));
    if (pageErrors.length) throw new Failure(`the page reported errors:\n  ${pageErrors.join('\n  ')}`);
    ok = true;
    log(`passed in ${elapsed()} s`);
  } catch (e) {
    await reportFailure(label, e, { page, pageErrors, refused, shot: S.SHOT });
  } finally {
    await browser.close().catch(() => {});
  }
  process.exit(ok ? 0 : 1);
}
