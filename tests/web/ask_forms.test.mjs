// Drives the Cohort web console in headless Chromium through structured questions (run by
// tests/suite/web_console.rs against tests/fixtures/ask-forms, whose writer asks the operator): a
// multi-select (one option with a key apart from its label) answered with two of its options
// (a box each, then Send), and a form with every
// field kind (a line with its description and length, a longer text, a number, yes/no, a
// choice) filled in and sent; the task finishes. tests/suite/web_console.rs then reads the answers
// the writer got from the store: the options as a JSON list, the form as typed values.
//
//   COHORT_URL=http://127.0.0.1:7878 COHORT_USER=operator COHORT_PASSWORD=cohort-demo \
//   COHORT_SCREENSHOT=target/web-console-asks.png node tests/web/ask_forms.test.mjs

import { Failure, settings, step, walk, sendGoal } from './harness.mjs';

const S = settings('asks test', 'web-console-asks.png');
const { shot } = S;

await walk(S, 'ASKS TEST', async (page) => {
  await step('send the manager the goal', () => sendGoal(page, 'GOAL# ask me'));

  await step('a multi-select: a box per option; two chosen and sent', async () => {
    const card = page.locator('[data-testid="question"]').first();
    await card.locator('[data-testid="ask-choice"]').first().waitFor();
    const options = await card.locator('[data-testid="ask-choice"]').evaluateAll((els) => els.map((e) => e.dataset.option));
    if (JSON.stringify(options) !== JSON.stringify(['spring', 'Summer', 'Autumn', 'Winter'])) throw new Failure(`the options' keys: ${options}`);
    const labels = await card.locator('.ask-choice').allTextContents();
    if (labels[0].trim() !== 'Spring: blossoms') throw new Failure(`the first option reads "${labels[0]}", not its label`);
    await card.locator('[data-testid="ask-choice"][data-option="spring"]').check();
    await card.locator('[data-testid="ask-choice"][data-option="Autumn"]').check();
    await card.screenshot({ path: shot('-multi') });
    await card.getByTestId('ask-choices-send').click();
    await page.locator('[data-testid="question"] [data-testid="ask-choice"]').first().waitFor({ state: 'detached' });
  });

  await step('a form with every field kind: its descriptions shown, its length kept, filled in and sent', async () => {
    const card = page.locator('[data-testid="question"]:has([data-testid="ask-form"])').first();
    await card.waitFor();
    const help = await card.locator('.field-help').allTextContents();
    if (!help.includes('At most 40 characters') || !help.includes('Anything the writer should know')) throw new Failure(`the descriptions: ${help}`);
    if ((await card.getByTestId('field-title').getAttribute('maxlength')) !== '40') throw new Failure('the title field has no length limit');
    if ((await card.getByTestId('field-notes').getAttribute('rows')) !== '5') throw new Failure('the notes field is not a longer text');
    await card.getByTestId('field-title').fill('Four seasons');
    await card.getByTestId('field-notes').fill('Short poems.\nOne per season.');
    await card.getByTestId('field-count').fill('2');
    await card.getByTestId('field-urgent').check();
    await card.getByTestId('field-colour').selectOption('blue');
    await card.screenshot({ path: shot('-form') });
    await card.getByTestId('ask-form-send').click();
    await page.locator('[data-testid="question"]').first().waitFor({ state: 'detached' });
  });

  await step('the task finishes', () => page.locator('[data-testid="task-item"][data-task-name="Asks"][data-state="finished"]').waitFor());
});
