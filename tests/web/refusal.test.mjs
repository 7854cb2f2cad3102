// Drives the Cohort web console in headless Chromium through a tool call its server refused
// (run by tests/suite/web_console.rs against a team whose booker books a room through the
// rooms MCP server the test serves): the booker writes the date as "next monday", the server
// refuses it in its own words, and the operator is asked for exactly that field, the refusal
// told in plain words; filled in, the call runs and the task finishes.
//
//   COHORT_URL=http://127.0.0.1:7878 COHORT_USER=operator COHORT_PASSWORD=cohort-demo \
//   COHORT_SCREENSHOT=target/web-console-refusal.png node tests/web/refusal.test.mjs

import { Failure, settings, step, walk, sendGoal } from './harness.mjs';

const S = settings('refusal test', 'web-console-refusal.png');
const { shot } = S;

await walk(S, 'REFUSAL TEST', async (page) => {
  await step('send the manager the goal', () => sendGoal(page, 'GOAL# book room A'));

  await step('the refused call waits for its date, the refusal in plain words', async () => {
    const card = page.locator('[data-testid="decisions"] [data-testid="decision"][data-kind="params"]').first();
    await card.waitFor();
    const told = ((await card.getByTestId('decision-refusal').textContent()) || '').trim();
    const expected = 'the tool `book_room` did not accept the value of `date`: date must be written as YYYY-MM-DD, not `next monday`';
    if (told !== expected) throw new Failure(`the refusal as told: "${told}"`);
    const fields = await card.locator('[data-key]').evaluateAll((els) => els.map((e) => e.getAttribute('data-key')));
    if (fields.join(',') !== 'date') throw new Failure(`the fields asked for: ${fields.join(', ')}`);
    await card.screenshot({ path: shot('-card') });
    await card.getByTestId('field-date').fill('2026-12-07');
    await card.getByTestId('decision-fill').click();
    await card.waitFor({ state: 'detached' });
  });

  await step('the filled call runs and the task finishes', async () => {
    await page.locator('[data-testid="task-item"][data-base="false"][data-state="finished"]').first().waitFor();
  });
});
