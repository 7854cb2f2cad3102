// Drives the Cohort web console in headless Chromium through a fork (run by tests/suite/web_console.rs
// on a store that holds a recorded run of tests/fixtures/outcome whose writer's step failed, and
// that run forked at the failed step by `cohort replay --fork-at` with an edited step text): the
// forked task's head says which task and step it was forked from and leads to that task; the
// failed step offers "Fork from here…", whose command names the step and carries an edited
// text, quoted for a shell.
//
//   COHORT_URL=http://127.0.0.1:7878 COHORT_USER=operator COHORT_PASSWORD=cohort-demo \
//   COHORT_SCREENSHOT=target/web-console-fork.png node tests/web/fork.test.mjs

import { Failure, settings, step, log, walk } from './harness.mjs';

const S = settings('fork test', 'web-console-fork.png');
const { WAIT } = S;

await walk(S, 'FORK TEST', async (page) => {

  const { recorded, failedStep } = await step('the forked task says what it was forked from', async () => {
    const items = page.locator('[data-testid="task-item"][data-task-name="Hollow haiku"]');
    await items.nth(1).waitFor();
    const ids = await items.evaluateAll((els) => els.map((e) => e.dataset.taskId));
    for (const id of ids) {
      await page.locator(`[data-testid="task-item"][data-task-id="${id}"]`).click();
      await page.locator(`[data-testid="task-detail"][data-task-id="${id}"]`).waitFor();
      const from = page.locator('[data-testid="task-detail"] [data-testid="task-forked-from"]');
      if (!(await from.count())) continue;
      const text = (await from.textContent()) || '';
      const task = await from.getAttribute('data-task-id');
      const stepId = await from.getAttribute('data-step-id');
      if (!ids.includes(task) || task === id) throw new Failure(`forked from ${task}, not the other task of ${ids}`);
      if (!text.startsWith('forked from “Hollow haiku” at step ')) throw new Failure(`the fork's note: "${text}"`);
      await from.click();
      await page.locator(`[data-testid="task-detail"][data-task-id="${task}"]`).waitFor();
      return { recorded: task, failedStep: stepId };
    }
    throw new Failure(`no task of ${ids} says it was forked`);
  });

  await step('the failed step offers the fork, its command naming the step and the edited text', async () => {
    await page.getByTestId('tab-agents').click();
    const item = page.locator(`[data-testid="step-item"][data-step-id="${failedStep}"]`);
    await item.waitFor();
    if ((await item.getAttribute('data-state')) !== 'failed') throw new Failure('the step the fork names did not fail');
    await item.locator('summary').first().click();
    await item.getByTestId('step-fork').click();
    const command = item.getByTestId('step-fork-command');
    await command.waitFor();
    const plain = (await command.textContent()) || '';
    if (!plain.includes(`--fork-at ${failedStep}`) || plain.includes('--step-text')) throw new Failure(`the command: "${plain}"`);
    await item.getByTestId('step-fork-text').fill("Write the rain's haiku");
    const edited = (await command.textContent()) || '';
    if (!edited.endsWith(`--step-text 'Write the rain'\\''s haiku'`)) throw new Failure(`the edited command: "${edited}"`);
    log(`recorded task ${recorded}: ${edited}`);
  });
});
