// Drives the Cohort web console in headless Chromium through a message that chooses its model
// and tools (seed 004; run by tests/suite/web_console.rs against a team whose writer may be
// given the `strong` model and calls the workspace server): with the writer as the receiver the
// composer offers the writer's models and tools; the message sent with `strong` and no tools is
// answered by the strong model's script, and the step carries the choice.
//
//   COHORT_URL=http://127.0.0.1:7878 COHORT_USER=operator COHORT_PASSWORD=cohort-demo \
//   COHORT_SCREENSHOT=target/web-console-choice.png node tests/web/choice.test.mjs

import { Failure, settings, step, walk } from './harness.mjs';

const S = settings('choice test', 'web-console-choice.png');
const { shot } = S;

/** The writer's process_message steps, through the API with the page's session. */
async function writerSteps(page) {
  return page.evaluate(async () => {
    const { token } = JSON.parse(sessionStorage.getItem('cohort.session'));
    const res = await fetch('/api/states?type=step', { headers: { Authorization: `Bearer ${token}` } });
    const steps = Object.values(await res.json());
    return steps.filter((s) => s.agent_id === 'writer' && s.executor === 'process_message');
  });
}

await walk(S, 'CHOICE TEST', async (page) => {
  await step('with the manager as receiver nothing is offered', async () => {
    await page.locator('[data-testid="receiver-option"][data-agent-id="manager"]').waitFor();
    if (await page.getByTestId('composer-choice').isVisible()) throw new Failure('a choice is offered for the manager, who may be given none');
  });

  await step('with the writer, its models and tools are offered', async () => {
    await page.getByTestId('receivers-all').click();
    await page.locator('[data-testid="receiver-option"][data-agent-id="manager"] input').uncheck();
    await page.locator('[data-testid="receiver-option"][data-agent-id="writer"] input').check();
    const choice = page.getByTestId('composer-choice');
    await choice.waitFor();
    const models = await page.locator('[data-testid="composer-llm"] option').evaluateAll((els) => els.map((e) => e.value));
    if (models.join(',') !== ',strong') throw new Failure(`the models offered: ${models.join(', ')}`);
    const servers = await page.locator('[data-testid="composer-server"]').evaluateAll((els) => els.map((e) => e.dataset.server));
    if (servers.join(',') !== 'workspace') throw new Failure(`the tools offered: ${servers.join(', ')}`);
    await page.getByTestId('composer-llm').selectOption('strong');
    await page.locator('[data-testid="composer-server"][data-server="workspace"] input').uncheck();
    await page.getByTestId('composer').screenshot({ path: shot('-composer') });
  });

  await step('the message is answered by the chosen model', async () => {
    await page.getByTestId('composer-need-reply').uncheck();
    await page.getByTestId('composer-waiting').uncheck();
    await page.getByTestId('composer-content').fill('CHOICE# from the console');
    await page.getByTestId('composer-send').click();
    await page.locator('[data-testid="composer-status"][data-state="sent"]').waitFor();
    const deadline = Date.now() + S.WAIT;
    for (;;) {
      const done = (await writerSteps(page)).find((s) => s.execution_state === 'finished');
      if (done) {
        const result = JSON.stringify(done.execute_result);
        if (!result.includes('Answered by the strong model.')) throw new Failure(`answered: ${result}`);
        const choice = JSON.stringify(done.choice);
        if (choice !== '{"llm":"strong","mcp_servers":[]}') throw new Failure(`the step's choice: ${choice}`);
        break;
      }
      if (Date.now() > deadline) throw new Failure('the writer never answered');
      await page.waitForTimeout(200);
    }
  });
});
