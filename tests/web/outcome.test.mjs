// Drives the Cohort web console in headless Chromium through honest outcomes (run by
// tests/suite/web_console.rs against tests/fixtures/outcome): a task whose manager declared success on
// nothing ends failed, and the console says why (its badge's title, the outcome note in its
// summary card, a task entry in the failures panel that selects it); a task that finished with
// one stage that gave nothing says so (a "1 stage failed" flag in the task list and head, the
// stage named in the summary card). The flag is checked for contrast in light and dark mode.
//
//   COHORT_URL=http://127.0.0.1:7878 COHORT_USER=operator COHORT_PASSWORD=cohort-demo \
//   COHORT_SCREENSHOT=target/web-console-outcome.png node tests/web/outcome.test.mjs

import { Failure, settings, step, log, elapsed, launch, signIn as logIn, sendGoal, reportFailure } from './harness.mjs';

const S = settings('outcome test', 'web-console-outcome.png');
const { SHOT, WAIT, shot } = S;
const signIn = (page) => logIn(page, S);
const HOLLOW_WHY = 'no stage of the task finished with a result';

/** The WCAG contrast ratio of an element's text on its background (both opaque `rgb(…)`). */
function contrastOf(el) {
  const rgb = (c) => (c.match(/[\d.]+/g) || []).slice(0, 3).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => {
      const s = v / 255;
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const css = getComputedStyle(el);
  const [a, b] = [lum(rgb(css.color)), lum(rgb(css.backgroundColor))];
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}

const browser = await launch(S);
const pageErrors = [];
let page;
let ok = false;
try {
  const context = await browser.newContext({ viewport: { width: 1366, height: 900 }, deviceScaleFactor: 1 });
  page = await context.newPage();
  page.setDefaultTimeout(WAIT);
  page.on('pageerror', (e) => pageErrors.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') pageErrors.push(`console error: ${m.text()}`);
  });

  await step(`sign in as ${S.USER}`, () => signIn(page));

  const hollow = await step('a manager that declares success on nothing: the task ends failed, and its badge says why', async () => {
    await sendGoal(page, 'HOLLOW# write the haiku');
    const item = page.locator('[data-testid="task-item"][data-task-name="Hollow haiku"][data-state="failed"]');
    await item.waitFor();
    const title = (await item.getByTestId('task-state').getAttribute('title')) || '';
    if (!title.includes(HOLLOW_WHY)) throw new Failure(`the failed badge's title: "${title}"`);
    return item.getAttribute('data-task-id');
  });

  await step('its summary card gives the reason and the stage that failed', async () => {
    await page.locator(`[data-testid="task-item"][data-task-id="${hollow}"]`).click();
    await page.getByTestId('tab-stages').click();
    const note = page.locator('[data-testid="task-summary"] [data-testid="task-outcome"]');
    await note.waitFor();
    const text = (await note.textContent()) || '';
    if (!text.includes(HOLLOW_WHY) || !text.includes('Stage "HOLLOW write" failed')) throw new Failure(`the outcome note: "${text}"`);
    const heading = await page.locator('[data-testid="task-summary"] h3').textContent();
    if (heading !== 'Task failed') throw new Failure(`the summary card's heading: "${heading}"`);
  });

  const mixed = await step('a task that finished with a stage that gave nothing is flagged in the list and its head', async () => {
    await sendGoal(page, 'MIXED# write and review');
    const item = page.locator('[data-testid="task-item"][data-task-name="Mixed haiku"][data-state="finished"]');
    await item.waitFor();
    const flag = ((await item.getByTestId('task-stages-failed').textContent()) || '').trim();
    if (flag !== '1 stage failed') throw new Failure(`the list's flag: "${flag}"`);
    // The stage that gave nothing is not counted as finished, and its dot is a failed one.
    const label = ((await item.getByTestId('task-running-stage').textContent()) || '').trim();
    if (!label.startsWith('1/2 stages finished')) throw new Failure(`the list's stage label: "${label}"`);
    const dots = await item.locator('.stage-dots .dot').evaluateAll((els) => els.map((e) => e.className));
    if (JSON.stringify(dots) !== JSON.stringify(['dot st-failed', 'dot st-finished'])) throw new Failure(`the stage dots: ${JSON.stringify(dots)}`);
    await item.click();
    const head = ((await page.locator('[data-testid="task-detail"] [data-testid="task-stages-failed"]').textContent()) || '').trim();
    if (head !== '1 stage failed') throw new Failure(`the head's flag: "${head}"`);
    const note = (await page.locator('[data-testid="task-summary"] [data-testid="task-outcome"]').textContent()) || '';
    if (!note.includes('Stage "MIXED write" failed') || note.includes('MIXED review')) throw new Failure(`the outcome note: "${note}"`);
    const heading = await page.locator('[data-testid="task-summary"] h3').textContent();
    if (heading !== 'Task summary') throw new Failure(`the summary card's heading: "${heading}"`);
    // The stage closed as finished with its writer failed is marked as giving no result.
    const marked = await page.locator('[data-testid="stage-item"]:has([data-testid="stage-gave-nothing"]) .stage-intention').allTextContents();
    if (JSON.stringify(marked) !== JSON.stringify(['MIXED write'])) throw new Failure(`stages marked as giving nothing: ${JSON.stringify(marked)}`);
    await page.screenshot({ path: shot('-mixed') });
    return item.getAttribute('data-task-id');
  });

  await step('the failures panel lists the failed task with its reason, and a click shows it', async () => {
    const entry = page.locator(`[data-testid="failure-item"][data-kind="task"][data-task-id="${hollow}"]`);
    await entry.waitFor();
    const reason = (await entry.getByTestId('failure-reason').textContent()) || '';
    if (!reason.includes(HOLLOW_WHY)) throw new Failure(`the task's failure reason: "${reason}"`);
    // The finished task is no failure, whatever its stages.
    if (await page.locator(`[data-testid="failure-item"][data-kind="task"][data-task-id="${mixed}"]`).count()) throw new Failure('the finished task is listed as a failure');
    await entry.click();
    await page.locator(`[data-testid="task-detail"][data-task-id="${hollow}"]`).waitFor();
  });

  await step('the stage-failed flag reads in light and dark mode', async () => {
    const light = await page.locator(`[data-testid="task-item"][data-task-id="${mixed}"] [data-testid="task-stages-failed"]`).evaluate(contrastOf);
    const dark = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, colorScheme: 'dark', isMobile: true, hasTouch: true });
    const p = await dark.newPage();
    p.setDefaultTimeout(WAIT);
    await signIn(p);
    const flag = p.locator(`[data-testid="task-item"][data-task-id="${mixed}"] [data-testid="task-stages-failed"]`);
    await flag.waitFor();
    const night = await flag.evaluate(contrastOf);
    await p.screenshot({ path: shot('-phone-dark') });
    await dark.close();
    if (light < 4.5 || night < 4.5) throw new Failure(`the flag's contrast: ${light.toFixed(2)} light, ${night.toFixed(2)} dark (4.5 needed)`);
  });

  await step(`screenshot to ${SHOT}`, async () => {
    await page.screenshot({ path: SHOT });
  });
  if (pageErrors.length) throw new Failure(`the page reported errors:\n  ${pageErrors.join('\n  ')}`);
  ok = true;
  log(`passed in ${elapsed()} s`);
} catch (e) {
  await reportFailure('OUTCOME TEST', e, { page, pageErrors, shot: SHOT });
} finally {
  await browser.close().catch(() => {});
}
process.exit(ok ? 0 : 1);
