// How smooth the console stays on a large team: run by `cohort bench --only console` (which
// serves a scripted team of 100 workers that run ~5,000 steps while this watches), or by hand
// against any served team:
//
//   COHORT_URL=http://127.0.0.1:7878 COHORT_USER=operator COHORT_PASSWORD=… \
//   COHORT_GOAL_URL=… node tests/web/console.bench.mjs
//
// It signs in, then measures each view while the team works (and the task list, agent list and
// filter once it is done): the gaps between animation frames (p50, p95, max) and the time spent
// in long tasks (main-thread work over 50 ms) per second, and how long the view took to draw.
// Prints one JSON object on stdout; progress goes to stderr. Not a test: figures, no verdict.
//
// Environment: COHORT_URL, COHORT_USER, COHORT_PASSWORD, COHORT_CHROMIUM (/usr/bin/chromium),
// COHORT_PHASE_MS (how long each view is watched, default 6000), COHORT_STEPS (steps to wait
// for before the last phases, or the task's end, default 5000), COHORT_START (a file: the bench writes the goal
// once this script is signed in and watching, when it sees the file; optional).

import { chromium } from 'playwright-core';
import { writeFileSync } from 'node:fs';

const env = (k, d) => process.env[k] || d;
const BASE_URL = env('COHORT_URL').replace(/\/+$/, '');
const USER = env('COHORT_USER', 'operator');
const PASSWORD = env('COHORT_PASSWORD');
const PHASE_MS = Number(env('COHORT_PHASE_MS', '6000'));
const STEPS = Number(env('COHORT_STEPS', '5000'));
const START = env('COHORT_START', '');
const log = (m) => process.stderr.write(`console bench: ${m}\n`);

const browser = await chromium.launch({
  executablePath: env('COHORT_CHROMIUM', '/usr/bin/chromium'),
  args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const out = { phases: [] };
try {
  const page = await (await browser.newContext({ viewport: { width: 1366, height: 768 } })).newPage();
  page.setDefaultTimeout(120000);
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${BASE_URL}/`);
  await page.getByTestId('login-user').fill(USER);
  await page.getByTestId('login-password').fill(PASSWORD);
  await page.getByTestId('login-submit').click();
  await page.locator('[data-testid="conn-status"][data-state="live"]').waitFor();
  // Frame gaps and long tasks, sampled in the page for the whole run.
  await page.evaluate(() => {
    const m = (window.__bench = { frames: [], long: [] });
    let last = performance.now();
    const tick = (t) => {
      m.frames.push([t, t - last]);
      last = t;
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
    new PerformanceObserver((l) => l.getEntries().forEach((e) => m.long.push([e.startTime, e.duration]))).observe({ type: 'longtask', buffered: true });
  });
  const counts = () =>
    page.evaluate(() => {
      const q = (s) => document.querySelectorAll(s).length;
      return { dom_nodes: q('*'), step_rows: q('[data-testid="step-item"]'), agents: q('[data-testid="agent-item"]') };
    });
  const stepsKnown = () => page.evaluate(async () => (await import('./ctx.js')).store.maps.step.size);

  /** Watches the page for `ms` after `act` (which shows a view): frames, long tasks, drawing time. */
  async function phase(name, act) {
    const t0 = await page.evaluate(() => performance.now());
    const drawn = await act();
    await page.waitForTimeout(PHASE_MS);
    const r = await page.evaluate((t0) => {
      const m = window.__bench;
      const gaps = m.frames.filter(([t]) => t >= t0).map(([, d]) => d).sort((a, b) => a - b);
      const at = (p) => gaps[Math.min(gaps.length - 1, Math.floor(p * gaps.length))] || 0;
      const span = performance.now() - t0;
      const long = m.long.filter(([t]) => t >= t0).reduce((s, [, d]) => s + d, 0);
      return { frame_p50_ms: at(0.5), frame_p95_ms: at(0.95), frame_max_ms: gaps[gaps.length - 1] || 0, long_task_ms_per_s: (long / span) * 1000 };
    }, t0);
    const row = { phase: name, draw_ms: drawn, ...r, steps_known: await stepsKnown(), ...(await counts()) };
    log(JSON.stringify(row));
    out.phases.push(row);
  }

  /** Clicks a tab and times it to the next painted frame. */
  const show = (tab) => async () => {
    const started = Date.now();
    await page.getByTestId(`tab-${tab}`).click();
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    return Date.now() - started;
  };

  // How many steps the console holds. Polled here: waitForFunction takes an async predicate's
  // promise as true at once (microsoft/playwright#29132), so it would not wait.
  // `over`: a task other than the base task ended (the steps of a finished stage leave the
  // console as they leave the agent, so the console may never hold every step at once).
  const held = () => page.evaluate(async () => {
    const { store } = await import('./ctx.js');
    const over = [...store.maps.task.values()].some((r) => r.state.stage_list?.length
      && ['finished', 'failed', 'cancelled'].includes(r.state.execution_state));
    return { steps: store.maps.step.size, over };
  });
  const untilSteps = async (n, every) => {
    const deadline = Date.now() + 600_000;
    for (;;) {
      const h = await held();
      if (h.steps >= n || h.over) return h;
      if (Date.now() > deadline) throw new Error(`the console never held ${n} steps (10 min)`);
      await page.waitForTimeout(every);
    }
  };

  if (START) writeFileSync(START, 'ready\n');
  log('signed in; waiting for the team to start');
  await untilSteps(201, 500);
  await phase('stages, while the team works', show('stages'));
  await phase('agents, while the team works', show('agents'));
  await phase('timeline, while the team works', show('timeline'));
  await phase('who talks, while the team works', show('graph'));
  log(`waiting for ${STEPS} steps, or the task's end`);
  const end = await untilSteps(STEPS, 1000);
  log(`${end.steps} steps held${end.over ? ' at the task\'s end' : ''}`);
  await phase('agents, all steps in', show('agents'));
  await phase('filter typed, all steps in', async () => {
    const started = Date.now();
    await page.getByTestId('filter').fill('w00042');
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    return Date.now() - started;
  });
  await phase('timeline, all steps in', async () => {
    await page.getByTestId('filter').fill('');
    return show('timeline')();
  });
  out.page_errors = errors;
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
