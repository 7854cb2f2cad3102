// Drives the Cohort web console in headless Chromium through the check of a graph plan (run by
// tests/suite/web_console.rs against tests/fixtures/plan-graph/checked.yaml, whose writer's plans wait
// for the operator): the plan-check card shows the plan as a graph (each step's id and what it
// waits for, a sketch with an arrow per dependency); an edit that makes a circle is refused in
// the card with the reason and sent nowhere; an edit that adds a dependency (part b after part
// a) is confirmed, and the plan runs as the edited graph (the stage card draws a→b besides the
// four arrows into join).
//
//   COHORT_URL=http://127.0.0.1:7878 COHORT_USER=operator COHORT_PASSWORD=cohort-demo \
//   COHORT_SCREENSHOT=target/web-console-plan-check-graph.png node tests/web/plan_check_graph.test.mjs

import { Failure, settings, step, log, walk, sendGoal } from './harness.mjs';

const S = settings('plan check graph test', 'web-console-plan-check-graph.png');
const { WAIT, shot } = S;
const INTO_JOIN = ['a->join', 'b->join', 'c->join', 'd->join'];

await walk(S, 'PLAN CHECK GRAPH TEST', async (page) => {
  await step('send the manager the goal', () => sendGoal(page, 'GOAL# run the plan'));

  const card = page.locator('[data-testid="decisions"] [data-testid="decision"][data-kind="plan"]').first();
  await step("the writer's plan waits as a graph: ids, what join waits for, an arrow per dependency", async () => {
    await card.waitFor();
    const ids = await card.locator('[data-testid="plan-check-step"]').evaluateAll((els) => els.map((e) => e.dataset.planId));
    if (JSON.stringify(ids) !== JSON.stringify(['a', 'b', 'c', 'd', 'join'])) throw new Failure(`the steps' ids: ${ids}`);
    const after = (await card.locator('[data-testid="plan-check-step"][data-plan-id="join"] [data-testid="plan-check-after"]').textContent()) || '';
    if (after.trim() !== '· after a, b, c, d') throw new Failure(`what join waits for: "${after}"`);
    const edges = await card.locator('[data-testid="plan-check-edge"]').evaluateAll((els) => els.map((e) => `${e.dataset.from}->${e.dataset.to}`).sort());
    if (JSON.stringify(edges) !== JSON.stringify(INTO_JOIN)) throw new Failure(`the sketch's arrows: ${edges}`);
    await card.screenshot({ path: shot('-card') });
  });

  const edit = (steps) => card.getByTestId('decision-steps').fill(JSON.stringify(steps, null, 2));
  const planned = async () => JSON.parse(await card.getByTestId('decision-steps').inputValue());

  await step('an edit that makes a circle is refused in the card, with the reason, and sent nowhere', async () => {
    await card.locator('summary', { hasText: 'Edit the steps' }).click();
    const steps = await planned();
    if (!steps.every((p) => p.id) || steps[4].depends_on.length !== 4) throw new Failure(`the edit box lost the graph: ${JSON.stringify(steps)}`);
    steps[0].depends_on = ['join'];
    await edit(steps);
    await card.getByTestId('decision-approve').click();
    const said = card.locator('[data-testid="decision-status"][data-state="error"]');
    await said.waitFor();
    const text = (await said.textContent()) || '';
    if (!text.includes('wait for each other in a circle')) throw new Failure(`the refusal: "${text}"`);
    if (!(await card.isVisible())) throw new Failure('the plan check left');
  });

  await step('an edit that adds a dependency (b after a) is confirmed', async () => {
    const steps = await planned();
    steps[0].depends_on = [];
    delete steps[0].depends_on;
    steps[1].depends_on = ['a'];
    await edit(steps);
    await card.getByTestId('decision-approve').click();
    await page.locator('[data-testid="decisions"]').waitFor({ state: 'hidden' });
  });

  await step('the plan runs as the edited graph: a→b drawn besides the four arrows into join', async () => {
    const item = page.locator('[data-testid="task-item"][data-task-name="Graph"]');
    await item.click();
    await page.getByTestId('tab-stages').click();
    const fig = page.locator('[data-testid="stage-plans"] [data-testid="plan-graph"]').first();
    await fig.waitFor();
    const deadline = Date.now() + WAIT;
    let edges = [];
    while (Date.now() < deadline) {
      edges = await fig.locator('[data-testid="plan-edge"]').evaluateAll((els) => els.map((e) => `${e.dataset.from}->${e.dataset.to}`).sort());
      if (edges.length === 5) break;
      await page.waitForTimeout(200);
    }
    if (JSON.stringify(edges) !== JSON.stringify(['a->b', ...INTO_JOIN])) throw new Failure(`the running plan's arrows: ${edges}`);
    await page.locator('[data-testid="task-item"][data-task-name="Graph"][data-state="finished"]').waitFor();
  });
});
