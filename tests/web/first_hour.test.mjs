// The operator's first hour, in headless Chromium (run by tests/suite/web_console.rs against the
// operator example): a laptop (1280×800) and a phone (390×844), light and dark.
//
// - What waits for the person is at the top of the page, never in a scrolled panel: the
//   manager's question (its options inside the viewport; one click answers), then the writer's
//   plan check (Confirm and Reject inside the viewport). The task says "waiting for you".
// - The goal is sent as the API's default sends it (need_reply on), and the task still runs.
// - The person who gave the goal is told how the task ended (a notice), and the "new" badge
//   clears once the notices are opened.
// - The runtime's messages in the group chat read as sentences, the raw text one click away.
// - Pause shows at once (within a second, no reload); a cancelled task is not drawn as a
//   success.
// - Every text has a contrast of at least 4.5:1 (WCAG AA) in both themes, the sign-in page
//   included, and nothing is wider than the phone's screen.
// - The timeline draws a step's wait for the person's check as waiting.
//
//   COHORT_URL=http://127.0.0.1:7878 COHORT_USER=operator COHORT_PASSWORD=cohort-demo \
//   COHORT_SCREENSHOT=target/web-console-first-hour.png node tests/web/first_hour.test.mjs

import { Failure, settings, step, log, elapsed, launch, signIn as logIn, reportFailure, contrastOk, fitsOk, goalBecomesTask } from './harness.mjs';

const S = settings('first-hour test', 'web-console-first-hour.png');
const { WAIT, shot } = S;
const LAPTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };
const TABS = ['stages', 'chat', 'agents', 'timeline', 'graph'];

/** Fails unless `locator` is wholly inside the viewport, outside any panel that scrolls. */
async function inView(page, locator, what) {
  const r = await locator.evaluate((el) => {
    const b = el.getBoundingClientRect();
    let nested = null;
    for (let e = el.parentElement; e && e !== document.body; e = e.parentElement) {
      const o = getComputedStyle(e).overflowY;
      if ((o === 'auto' || o === 'scroll') && e.scrollHeight > e.clientHeight) nested = e.className || e.tagName;
    }
    return { top: b.top, bottom: b.bottom, left: b.left, right: b.right, vh: window.innerHeight, vw: window.innerWidth, nested };
  });
  if (r.top < 0 || r.bottom > r.vh || r.left < 0 || r.right > r.vw) throw new Failure(`${what} is outside the viewport: ${JSON.stringify(r)}`);
  if (r.nested) throw new Failure(`${what} is inside a panel that scrolls (${r.nested})`);
}

async function signedIn(browser, viewport, colorScheme, pageErrors) {
  const context = await browser.newContext({ viewport, colorScheme, deviceScaleFactor: 1 });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT);
  page.on('pageerror', (e) => pageErrors.push(`page error (${viewport.width} ${colorScheme}): ${e.message}`));
  await page.goto(`${S.BASE_URL}/`, { waitUntil: 'domcontentloaded' });
  await page.getByTestId('login-form').waitFor();
  await contrastOk(page, `the sign-in page (${colorScheme}, ${viewport.width} px)`);
  if (viewport.width < 500) await fitsOk(page, 'the sign-in page');
  await logIn(page, S);
  return { context, page };
}

/** Every tab of the selected task, checked for contrast (and, on a phone, for width). */
async function everyTab(page, where, phone) {
  for (const tab of TABS) {
    await page.getByTestId(`tab-${tab}`).click();
    await page.waitForTimeout(250);
    await contrastOk(page, `${where}, tab ${tab}`);
    if (phone) await fitsOk(page, `${where}, tab ${tab}`);
    if (phone && tab === 'agents') {
      // A person's step opened: the goal they sent, a long word in it, wraps within the screen.
      const only = page.locator('#steps-this-task');
      if ((await only.count()) && (await only.isChecked())) await only.uncheck();
      const item = page.locator('[data-testid="step-item"]', { hasText: 'example.org' }).first();
      await item.locator('summary').first().click();
      await page.waitForTimeout(150);
      await fitsOk(page, `${where}, tab ${tab}, a person's step opened`);
    }
  }
  await page.getByTestId('tab-stages').click();
}

const browser = await launch(S);
const pageErrors = [];
let page;
let ok = false;
try {
  ({ page } = await step('sign in on a laptop (light); the sign-in page reads at 4.5:1', () => signedIn(browser, LAPTOP, 'light', pageErrors)));

  const task = await step('a goal sent with need_reply on (the API default) becomes a task', () => goalBecomesTask(page, 'Write a haiku about the season I choose.'));

  await step("the manager's question waits at the top, its options in view, and the task says so", async () => {
    const card = page.locator('[data-testid="decisions"] [data-testid="question"]').first();
    await card.waitFor();
    for (const option of await card.getByTestId('ask-option').all()) await inView(page, option, 'an option of the question');
    // Who asks, in which task, by when.
    const head = (await card.locator('.msg-head').textContent()) || '';
    if (!head.includes('Mira') || !head.includes('Haiku for the operator')) throw new Failure(`the question's head: "${head}"`);
    const by = (await card.getByTestId('question-deadline').textContent()) || '';
    if (!/^by \d\d:\d\d:\d\d$/.test(by)) throw new Failure(`the question's deadline: "${by}"`);
    await page.locator(`[data-testid="task-detail"][data-task-id="${task}"] [data-testid="task-waits-you"]`).waitFor();
    await page.locator(`[data-testid="task-item"][data-task-id="${task}"] [data-testid="task-waits-you-flag"]`).waitFor();
    await contrastOk(page, 'the laptop, a question waiting');
    await page.screenshot({ path: shot('-question') });
  });

  await step('one click on an option answers the question', async () => {
    const card = page.locator('[data-testid="question"]').first();
    await card.locator('[data-testid="ask-option"]', { hasText: 'Autumn' }).click();
    await page.locator('[data-testid="question"]').waitFor({ state: 'detached' });
    await page.locator('[data-testid="agent-item"][data-agent-id="manager"][data-locked="false"]').waitFor();
  });

  await step("the writer's plan check waits at the top, Confirm and Reject in view; the stage says the writer waits for you", async () => {
    const plan = page.locator('[data-testid="decisions"] [data-testid="decision"][data-kind="plan"]').first();
    await plan.waitFor();
    await inView(page, plan.getByTestId('decision-approve'), 'Confirm plan');
    await inView(page, plan.getByTestId('decision-reject'), 'Reject');
    await page.locator('[data-testid="stage-agent-state"][data-state="waiting_for_you"]').waitFor();
    await contrastOk(page, 'the laptop, a plan check waiting');
    await page.screenshot({ path: shot('-plan-check') });
    await plan.getByTestId('decision-approve').click();
    await page.locator('[data-testid="decisions"]').waitFor({ state: 'hidden' });
  });

  await step('the task finishes and its goal-giver gets a notice with the result; opened, "new" clears', async () => {
    await page.locator(`[data-testid="task-item"][data-task-id="${task}"][data-state="finished"]`).waitFor();
    await page.locator('#notice-new:not([hidden])').waitFor();
    await page.getByTestId('notices').locator('summary').click();
    // The person's notices are fetched again once their own record changes: wait for it.
    const told = page.getByTestId('notice-item').filter({ hasText: 'Your task "Haiku for the operator" finished.' }).first();
    await told.waitFor();
    const text = (await told.textContent()) || '';
    if (!text.includes('Cold rain')) throw new Failure(`the notice: "${text}"`);
    await page.locator('#notice-new').waitFor({ state: 'hidden' });
  });

  await step("the group chat shows the runtime's messages as sentences, the raw text one click away", async () => {
    await page.getByTestId('tab-chat').click();
    const sentence = page.locator('[data-testid="group-message"][data-sender="[TaskState]"] [data-testid="system-sentence"]').first();
    await sentence.waitFor();
    const shown = await page.locator('[data-testid="group-message"][data-sender="[TaskState]"] [data-testid="system-sentence"] > .pre').allTextContents();
    if (shown.some((t) => t.includes('[TaskState]') || t.includes('<instruction>'))) throw new Failure(`machine text shown: ${shown.join(' | ')}`);
    await sentence.getByTestId('system-message-raw').locator('summary').click();
    const raw = (await sentence.locator('pre').textContent()) || '';
    if (!raw.includes('[TaskState]')) throw new Failure(`the raw text: "${raw.slice(0, 80)}"`);
    await page.getByTestId('tab-stages').click();
  });

  await step("the timeline draws the plan check's wait as waiting, with a legend", async () => {
    await page.getByTestId('tab-timeline').click();
    await page.locator('[data-testid="timeline-wait"]').first().waitFor({ state: 'attached' });
    const legend = (await page.getByTestId('timeline-legend').textContent()) || '';
    if (!legend.includes('waits for a person')) throw new Failure(`the legend: "${legend}"`);
    await page.getByTestId('tab-stages').click();
  });

  await step('every tab of the finished task reads at 4.5:1 on the laptop (light)', () => everyTab(page, 'laptop light', false));

  const long = await step('pause shows within a second, and Resume is offered', async () => {
    await page.getByTestId('composer-task').selectOption({ label: 'MAS base task (base)' });
    await page.getByTestId('composer-need-reply').uncheck();
    await page.getByTestId('composer-content').fill('LONG TASK: think at length');
    await page.getByTestId('composer-send').click();
    const item = page.locator('[data-testid="task-item"][data-task-name="A long task"]');
    await item.waitFor();
    const id = await item.getAttribute('data-task-id');
    await item.click();
    const plan = page.locator('[data-testid="decision"][data-kind="plan"]').first();
    await plan.waitFor();
    await plan.getByTestId('decision-approve').click();
    await page.locator(`[data-testid="task-detail"][data-task-id="${id}"][data-state="running"]`).waitFor();
    const clicked = Date.now();
    await page.getByTestId('task-pause').click();
    await page.locator('[data-testid="task-detail-state"][data-state="paused"]').waitFor({ timeout: 1000 });
    await page.locator(`[data-testid="task-item"][data-task-id="${id}"] [data-testid="task-state"][data-state="paused"]`).waitFor({ timeout: 1000 });
    const label = (await page.getByTestId('task-pause').textContent()) || '';
    if (label.trim() !== 'Resume') throw new Failure(`the pause button says "${label}" once paused`);
    log(`  paused shown after ${Date.now() - clicked} ms`);
    // The writer's work in it is paused too, and its entry says so.
    await page.locator('[data-testid="agent-item"][data-agent-id="writer"] [data-testid="agent-paused"]').waitFor({ timeout: 1000 });
    await page.getByTestId('task-pause').click();
    await page.locator('[data-testid="task-detail-state"][data-state="running"]').waitFor({ timeout: 1000 });
    await page.locator('[data-testid="agent-item"][data-agent-id="writer"] [data-testid="agent-paused"]').waitFor({ state: 'detached', timeout: 1000 });
    return id;
  });

  await step('a cancelled task is not drawn as a success', async () => {
    page.once('dialog', (d) => d.accept('not needed'));
    await page.getByTestId('task-cancel').click();
    await page.locator(`[data-testid="task-item"][data-task-id="${long}"][data-state="cancelled"]`).waitFor();
    const card = page.getByTestId('task-summary');
    await card.waitFor();
    const look = await card.evaluate((el) => ({ cls: el.className, bg: getComputedStyle(el).backgroundColor, border: getComputedStyle(el).borderLeftColor, title: el.querySelector('h3')?.textContent }));
    const finished = await page.evaluate(() => getComputedStyle(document.documentElement).getPropertyValue('--finished').trim());
    if (look.title !== 'Task cancelled' || look.border.replace(/\s/g, '') === finished || /rgb\(244, 251, 247\)/.test(look.bg)) throw new Failure(`the cancelled task's card: ${JSON.stringify(look)}`);
    // Its stage was cancelled with it: nobody works in it, and it is not called a failure.
    const agents = await page.locator('[data-testid="stage-item"] [data-testid="stage-agent-state"]').allTextContents();
    if (agents.some((a) => a.trim() === 'working')) throw new Failure(`the cancelled stage's agents: ${agents.join(', ')}`);
    const note = (await card.textContent()) || '';
    if (note.includes('failed')) throw new Failure(`the cancelled task's card calls something failed: ${note}`);
    await contrastOk(page, 'the laptop, a cancelled task');
  });

  await step('dark mode on the laptop: the sign-in page and every tab read at 4.5:1', async () => {
    const dark = await signedIn(browser, LAPTOP, 'dark', pageErrors);
    await dark.page.locator(`[data-testid="task-item"][data-task-id="${task}"]`).click();
    await everyTab(dark.page, 'laptop dark', false);
    await dark.page.screenshot({ path: shot('-dark') });
    await dark.context.close();
  });

  await step('on a 390×844 phone a goal sent from the composer (far down) brings its question and plan check into view', async () => {
    const phone = await signedIn(browser, PHONE, 'light', pageErrors);
    const p = phone.page;
    const base = await p.locator('[data-testid="task-item"][data-base="true"]').first().getAttribute('data-task-id');
    await p.getByTestId('composer-task').selectOption(base);
    await p.getByTestId('composer-content').fill('Write another haiku, as https://example.org/an-address-with-no-space-in-it-at-all/of/a/long/path asks');
    await p.getByTestId('composer-send').click();
    const card = p.locator('[data-testid="decisions"] [data-testid="question"]').first();
    await card.waitFor();
    await p.waitForTimeout(300);
    for (const option of await card.getByTestId('ask-option').all()) await inView(p, option, 'an option of the question (phone)');
    await card.locator('[data-testid="ask-option"]', { hasText: 'Spring' }).click();
    const plan = p.locator('[data-testid="decisions"] [data-testid="decision"][data-kind="plan"]').first();
    await plan.waitFor();
    await p.waitForTimeout(300);
    await inView(p, plan.getByTestId('decision-approve'), 'Confirm plan (phone)');
    await inView(p, plan.getByTestId('decision-reject'), 'Reject (phone)');
    await p.screenshot({ path: shot('-phone-plan-check') });
    await plan.getByTestId('decision-approve').click();
    await p.locator('[data-testid="decisions"]').waitFor({ state: 'hidden' });
    await phone.context.close();
  });

  for (const scheme of ['light', 'dark']) {
    await step(`a 390×844 phone (${scheme}): nothing wider than the screen, every text at 4.5:1`, async () => {
      const phone = await signedIn(browser, PHONE, scheme, pageErrors);
      await phone.page.locator(`[data-testid="task-item"][data-task-id="${task}"]`).click();
      await fitsOk(phone.page, `phone ${scheme}`);
      await everyTab(phone.page, `phone ${scheme}`, true);
      await phone.page.screenshot({ path: shot(`-phone-${scheme}`), fullPage: true });
      await phone.context.close();
    });
  }

  await step(`screenshot to ${S.SHOT}`, () => page.screenshot({ path: S.SHOT }));
  if (pageErrors.length) throw new Failure(`the page reported errors:\n  ${pageErrors.join('\n  ')}`);
  ok = true;
  log(`passed in ${elapsed()} s`);
} catch (e) {
  await reportFailure('first-hour test', e, { page, pageErrors, shot: S.SHOT });
} finally {
  await browser.close().catch(() => {});
}
process.exit(ok ? 0 : 1);
