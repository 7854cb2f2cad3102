// Drives the Cohort web console in headless Chromium through a server's question during a tool
// call (MCP elicitation; run by tests/suite/web_console.rs against tests/fixtures/elicitation, with
// server-everything): the clerk's call of `trigger-elicitation-request` makes its server ask
// for a person's details; the question shows under "Waiting for you" with the server's message
// and its form, defaults filled in; the operator answers it there, the card goes, and the
// call's result holds the answer. The clerk's next call fetches server-everything's tiny image,
// which its step shows as a picture (fetched from /api/blob with the session's token).
//
//   COHORT_URL=http://127.0.0.1:7878 COHORT_USER=operator COHORT_PASSWORD=cohort-demo \
//   COHORT_SCREENSHOT=target/web-console-elicitation.png node tests/web/elicitation.test.mjs

import { Failure, settings, step, log, elapsed, launch, signIn as logIn, sendGoal, reportFailure } from './harness.mjs';

const S = settings('elicitation test', 'web-console-elicitation.png');
const { SHOT, WAIT, shot } = S;

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

  await step(`sign in as ${S.USER}`, () => logIn(page, S));
  await step('give the goal', () => sendGoal(page, 'Ask the person for their details'));

  const card = page.locator('[data-testid="decisions"] [data-testid="decision"][data-kind="elicitation"]').first();
  await step('the server\'s question waits under "Waiting for you", with its message and form', async () => {
    await card.waitFor();
    const title = (await card.locator('.msg-head b').textContent()) || '';
    if (title !== 'A server asks') throw new Failure(`the card's title: "${title}"`);
    const message = (await card.getByTestId('decision-message').textContent()) || '';
    if (!message.includes('Please provide inputs')) throw new Failure(`the server's message: "${message}"`);
    const integer = await card.getByTestId('field-integer').inputValue();
    if (integer !== '42') throw new Failure(`the integer field holds "${integer}", not its default 42`);
    const hero = card.getByTestId('field-titledSingleSelectEnum');
    if ((await hero.locator('option').count()) !== 4) throw new Failure('the titled select does not offer its three heroes');
    const decline = (await card.getByTestId('decision-reject').textContent()) || '';
    if (decline !== 'Decline') throw new Failure(`the refusal button reads "${decline}"`);
    await card.scrollIntoViewIfNeeded();
    await page.screenshot({ path: shot('-asked') });
  });

  await step('the operator answers in place; the card goes', async () => {
    await card.getByTestId('field-name').fill('Ada Lovelace');
    await card.getByTestId('field-check').check();
    await card.getByTestId('decision-fill').click();
    await page.locator('[data-testid="decision"][data-kind="elicitation"]').waitFor({ state: 'detached' });
  });

  await step('the call\'s result holds the answer, defaults and all', async () => {
    // Polled here rather than with waitForFunction, which takes an async predicate's promise as
    // true at once (microsoft/playwright#29132): under load it returned before the call ended.
    const finished = () => page.evaluate(async () => {
      const { token } = JSON.parse(sessionStorage.getItem('cohort.session') || '{}');
      const r = await fetch('/api/states?type=step', { headers: { authorization: `Bearer ${token}` } });
      const steps = Object.values(await r.json());
      const call = steps.find((s) => s.executor === 'everything' && s.step_intention === 'Ask the person through the server' && s.execution_state === 'finished');
      return call ? JSON.stringify(call.execute_result) : null;
    });
    const deadline = Date.now() + 30_000;
    let text = await finished();
    while (!text) {
      if (Date.now() > deadline) throw new Failure('the call did not finish within 30 s of the answer');
      await page.waitForTimeout(250);
      text = await finished();
    }
    for (const want of ['Name: Ada Lovelace', 'Agreed to terms: true', 'Favorite Integer: 42']) {
      if (!text.includes(want)) throw new Failure(`the result lacks "${want}": ${text.slice(0, 600)}`);
    }
  });

  await step("the image the clerk's next call returned shows in its step, as a picture", async () => {
    await page.getByTestId('tab-agents').click();
    const card = page.locator('[data-testid="agent-card"][data-agent-id="clerk"]');
    await card.waitFor();
    const row = card.locator('[data-testid="step-item"][data-executor="everything"][data-state="finished"]', { hasText: 'Get the logo' });
    await row.waitFor();
    await row.locator('summary').first().click();
    const img = row.getByTestId('step-media-image');
    await img.waitFor();
    const size = await page.waitForFunction((el) => (el.complete && el.naturalWidth > 0 ? [el.naturalWidth, el.naturalHeight] : null), await img.elementHandle(), { polling: 100 });
    const [w, hgt] = await size.jsonValue();
    if (w !== 20 || hgt !== 20) throw new Failure(`the logo shows at ${w}x${hgt}, not as the 20x20 PNG the server sent`);
    const note = (await row.getByTestId('step-media').textContent()) || '';
    if (!note.includes('image/png')) throw new Failure(`the picture's note: "${note}"`);
    await row.scrollIntoViewIfNeeded();
    await page.screenshot({ path: shot('-image') });
  });

  await step(`screenshot to ${SHOT}`, async () => {
    await page.screenshot({ path: SHOT });
  });
  if (pageErrors.length) throw new Failure(`the page reported errors:\n  ${pageErrors.join('\n  ')}`);
  ok = true;
  log(`PASSED in ${elapsed()} s`);
} catch (e) {
  await reportFailure('ELICITATION TEST', e, { page, pageErrors, shot: SHOT });
} finally {
  await browser.close();
}
process.exit(ok ? 0 : 1);
