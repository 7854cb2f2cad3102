// Drives the Cohort web console in headless Chromium through a graph plan (run by
// tests/suite/web_console.rs against tests/fixtures/plan-graph): the writer plans four parts `a`..`d`
// with no dependencies and `join` after all four. Checks the plan graph in the stage card (5
// nodes, 4 edges into `join`, `join` saying what it waits for while the parts run), the
// timeline (the parts in rows side by side, `join`'s ready mark, the legend), and the graph on a
// 390 px phone in dark mode; and, from states it makes itself, a pending node and a node whose
// dependency failed.
//
//   COHORT_URL=http://127.0.0.1:7878 COHORT_USER=operator COHORT_PASSWORD=cohort-demo \
//   COHORT_SCREENSHOT=target/web-console-plan-graph.png node tests/web/plan_graph.test.mjs

import { Failure, settings, step, log, elapsed, launch, signIn as logIn, sendGoal, reportFailure } from './harness.mjs';

const S = settings('plan graph test', 'web-console-plan-graph.png');
const { SHOT, WAIT, shot } = S;
const signIn = (page) => logIn(page, S);
const PARTS = ['a', 'b', 'c', 'd'];

/** What the page's plan graph shows now (in the page). */
function graphNow() {
  const fig = document.querySelector('[data-testid="stage-plans"] [data-testid="plan-graph"]');
  if (!fig) return null;
  return {
    nodes: [...fig.querySelectorAll('[data-testid="plan-node"]')].map((n) => ({
      id: n.dataset.planId,
      step: n.dataset.stepId,
      state: n.dataset.state,
      level: n.dataset.level,
      waits: n.dataset.waitsFor ?? null,
      status: n.querySelector('[data-testid="plan-node-status"]').textContent,
    })),
    edges: [...fig.querySelectorAll('[data-testid="plan-edge"]')].map((e) => `${e.dataset.from}->${e.dataset.to}`),
  };
}


const browser = await launch(S);
const pageErrors = [];
let page;
let ok = false;
try {
  const context = await browser.newContext({ viewport: { width: 1366, height: 900 }, deviceScaleFactor: 1 });
  // The graph as the page shows it, for the waits below (which run in the page).
  await context.addInitScript(`window.__graphNow = ${graphNow.toString()};`);
  page = await context.newPage();
  page.setDefaultTimeout(WAIT);
  page.on('pageerror', (e) => pageErrors.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') pageErrors.push(`console error: ${m.text()}`);
  });

  await step(`sign in as ${S.USER}`, () => signIn(page));

  await step('the store notes when a pending step became ready, as the server does', async () => {
    const got = await page.evaluate(async () => {
      const { Store } = await import('./store.js');
      const s = new Store();
      const agent = { agent_id: 'w', working_state: 'idle', working_memory: {}, persistent_memory: {}, agent_step: { step_list: [], todo: [] }, step_lock: [] };
      s.loadSnapshot(1, { task: {}, stage: {}, agent: { w: agent }, step: {} });
      const join = { step_id: 'j', task_id: 't', stage_id: 's', agent_id: 'w', execution_state: 'pending', plan_id: 'join', depends_on: ['x'], origin: { kind: 'planned', by: 'p' } };
      s.apply({ version: 2, kind: 'step', op: 'added', agent_id: 'w', step: join, list_at: 0, todo_at: 0, remember: true });
      const graph = s.plansIn('t', 's').map((p) => [p.by, p.steps.length]);
      s.apply({ version: 3, at: 1700000000500, kind: 'step', op: 'updated', agent_id: 'w', step_id: 'j', execution_state: 'init' });
      s.apply({ version: 4, at: 1700000000600, kind: 'step', op: 'started', agent_id: 'w', step_id: 'j' });
      const j = s.get('step', 'j');
      return { graph, ready: j.ready_at, start: j.started_at, inGraph: s.inGraphPlan(j) };
    });
    const want = { graph: [['p', 1]], ready: 1700000000500, start: 1700000000600, inGraph: true };
    if (JSON.stringify(got) !== JSON.stringify(want)) throw new Failure(`got ${JSON.stringify(got)}`);
  });

  await step('a plan drawn from states made here: levels, edges, what a pending step waits for, why a step did not run', async () => {
    const got = await page.evaluate(async () => {
      const { Store } = await import('./store.js');
      const { planGraph } = await import('./plan.js');
      const s = new Store();
      const mk = (id, state, deps, more = {}) => ({
        step_id: `s-${id}`, task_id: 't', stage_id: 's', agent_id: 'w', step_intention: `Step ${id}`, executor: 'think', type: 'skill',
        execution_state: state, plan_id: id, depends_on: deps.map((d) => `s-${d}`), origin: { kind: 'planned', by: 'plan' }, ...more,
      });
      const why = 'it depends on step `c` ("Step c"), which failed: the model answered nothing';
      const steps = [
        mk('a', 'finished', [], { started_at: 1000, ended_at: 2000 }),
        mk('b', 'running', [], { started_at: 1000 }),
        mk('c', 'failed', [], { started_at: 1000, ended_at: 1500, execute_result: { error: 'the model answered nothing' } }),
        mk('d', 'pending', ['a', 'b']),
        mk('e', 'failed', ['c'], { execute_result: { error: why } }),
      ];
      const planning = { step_id: 'plan', task_id: 't', stage_id: 's', agent_id: 'w', step_intention: 'Plan', executor: 'planning', type: 'skill', execution_state: 'finished', execute_result: { planned_step: ['a', 'b', 'c', 'd', 'e'].map((id) => ({ id })) } };
      const agent = { agent_id: 'w', working_state: 'working', working_memory: {}, persistent_memory: {}, agent_step: { step_list: [], todo: [] }, step_lock: [] };
      s.loadSnapshot(1, { task: {}, stage: {}, agent: { w: agent }, step: Object.fromEntries([planning, ...steps].map((st) => [st.step_id, st])) });
      const plans = s.plansIn('t', 's');
      const fig = planGraph({ store: s, agentName: () => 'Wren', showStep: () => {}, now: 3000 }, plans[0]);
      document.body.append(fig);
      const node = (id) => fig.querySelector(`[data-testid="plan-node"][data-plan-id="${id}"]`);
      const out = {
        plans: plans.length,
        caption: fig.querySelector('figcaption').textContent,
        levels: ['a', 'b', 'c', 'd', 'e'].map((id) => node(id).dataset.level).join(''),
        edges: [...fig.querySelectorAll('[data-testid="plan-edge"]')].map((e) => `${e.dataset.from}->${e.dataset.to}`).sort(),
        open: fig.querySelectorAll('.pg-edge-open').length,
        waits: node('d').dataset.waitsFor,
        dStatus: node('d').querySelector('[data-testid="plan-node-status"]').textContent,
        eStatus: node('e').querySelector('[data-testid="plan-node-status"]').textContent,
        eTitle: node('e').querySelector('title').textContent.includes(why),
        colours: ['a', 'b', 'c', 'd'].map((id) => getComputedStyle(node(id).querySelector('rect')).stroke),
      };
      fig.remove();
      return out;
    });
    const bad = [];
    if (got.plans !== 1) bad.push(`${got.plans} plans`);
    if (got.levels !== '00011') bad.push(`levels ${got.levels}`);
    if (JSON.stringify(got.edges) !== JSON.stringify(['a->d', 'b->d', 'c->e'])) bad.push(`edges ${got.edges}`);
    // Only the edge from the running `b` is still open (dashed); a's is done, c's ended.
    if (got.open !== 2) bad.push(`${got.open} open edges`);
    if (got.waits !== 'b' || got.dStatus !== 'waits for b') bad.push(`d waits for "${got.waits}", says "${got.dStatus}"`);
    if (got.eStatus !== 'not run: c failed' || !got.eTitle) bad.push(`e says "${got.eStatus}" (reason in its title: ${got.eTitle})`);
    if (new Set(got.colours).size !== 4) bad.push(`the states' colours are not all different: ${got.colours}`);
    if (!got.caption.includes('Plan of Wren') || !got.caption.includes('1 waiting')) bad.push(`caption "${got.caption}"`);
    if (bad.length) throw new Failure(bad.join('; '));
    // Everything after this point must arrive live: this marker is lost on a reload.
    await page.evaluate(() => {
      window.__noReload = true;
    });
  });

  await step('send the manager the goal', () => sendGoal(page, 'GOAL# run the plan'));

  const taskId = await step('the task appears and its stage card is shown', async () => {
    const item = page.locator('[data-testid="task-item"][data-task-name="Graph"]');
    await item.waitFor();
    const id = await item.getAttribute('data-task-id');
    await item.click();
    await page.getByTestId('tab-stages').click();
    await page.locator('[data-testid="stage-item"]').first().waitFor();
    return id;
  });

  await step('while the parts run, the plan graph shows 5 nodes, 4 edges into join, and join waits for the unfinished parts', async () => {
    // Consistent at one moment: join is pending and names exactly the parts not finished yet.
    const seen = await page
      .waitForFunction(
        (parts) => {
          const g = window.__graphNow();
          if (!g || g.nodes.length !== 5) return false;
          const join = g.nodes.find((n) => n.id === 'join');
          if (!join || join.state !== 'pending') return false;
          const open = parts.filter((p) => g.nodes.find((n) => n.id === p)?.state !== 'finished');
          if (!open.length || join.waits !== open.join(',') || join.status !== `waits for ${open.join(', ')}`) return false;
          return g;
        },
        PARTS,
        { timeout: 30000 },
      )
      .then((h) => h.jsonValue(), () => null);
    if (!seen) throw new Failure(`the join was never seen waiting for its parts; the graph: ${JSON.stringify(await page.evaluate(graphNow))}`);
    const join = seen.nodes.find((n) => n.id === 'join');
    log(`  join says "${join.status}"; parts: ${seen.nodes.filter((n) => n.id !== 'join').map((n) => `${n.id} ${n.state}`).join(', ')}`);
    const into = seen.edges.filter((e) => e.endsWith('->join')).sort();
    if (JSON.stringify(into) !== JSON.stringify(PARTS.map((p) => `${p}->join`)) || seen.edges.length !== 4) throw new Failure(`edges: ${seen.edges}`);
    const levels = seen.nodes.map((n) => `${n.id}:${n.level}`).sort().join(' ');
    if (levels !== 'a:0 b:0 c:0 d:0 join:1') throw new Failure(`levels: ${levels}`);
    await page.screenshot({ path: shot('-running') });
  });

  await step('the task finishes and the graph shows every step finished', async () => {
    await page.locator(`[data-testid="task-item"][data-task-id="${taskId}"][data-state="finished"]`).waitFor();
    const done = await page
      .waitForFunction(
        () => {
          const g = window.__graphNow();
          return g && g.nodes.length === 5 && g.nodes.every((n) => n.state === 'finished' && n.status.startsWith('finished')) && g;
        },
        null,
        { timeout: 10000 },
      )
      .then((h) => h.jsonValue(), () => null);
    if (!done) throw new Failure(`the final graph: ${JSON.stringify(await page.evaluate(graphNow))}`);
    if ((await page.locator('[data-testid="stage-plans"] .pg-edge-open').count()) !== 0) throw new Failure('an edge is still drawn open after every step finished');
    await page.locator('[data-testid="stage-plans"] [data-testid="plan-graph"]').screenshot({ path: shot('-graph') });
  });

  await step('the timeline shows the parts side by side in rows, and when join became ready', async () => {
    await page.getByTestId('tab-timeline').click();
    const got = await page
      .waitForFunction(
        (parts) => {
          const lane = document.querySelector('[data-testid="timeline-lane"][data-agent-id="writer"]');
          if (!lane) return false;
          const rows = parts.map((p) => lane.querySelector(`[data-testid="timeline-step"][data-plan-id="${p}"]`)?.dataset.row);
          const join = lane.querySelector('[data-testid="timeline-step"][data-plan-id="join"]');
          const ready = join && lane.querySelector(`[data-testid="timeline-ready"][data-step-id="${join.dataset.stepId}"]`);
          if (rows.some((r) => r === undefined) || !ready) return false;
          return { laneRows: Number(lane.dataset.rows), rows, ready: ready.title, legend: document.querySelector('[data-testid="timeline-legend"]')?.textContent || '' };
        },
        PARTS,
        { timeout: 10000 },
      )
      .then((h) => h.jsonValue(), () => null);
    if (!got) throw new Failure('the writer\'s lane never showed the four parts and join\'s ready mark');
    if (new Set(got.rows).size !== 4 || got.laneRows < 4) throw new Failure(`the parts are in rows ${got.rows} of ${got.laneRows}: they ran at once and must not overlap`);
    if (!got.ready.startsWith('ready at')) throw new Failure(`the ready mark says "${got.ready}"`);
    if (!got.legend.includes('ready → start')) throw new Failure(`the legend says "${got.legend}"`);
    await page.screenshot({ path: shot('-timeline') });
  });

  await step('a click on a plan node opens its step in its agent\'s card', async () => {
    await page.getByTestId('tab-stages').click();
    const node = page.locator('[data-testid="stage-plans"] [data-testid="plan-node"][data-plan-id="join"]');
    const id = await node.getAttribute('data-step-id');
    await node.click();
    await page.locator(`[data-testid="agent-card"][data-agent-id="writer"] li[data-step-id="${id}"] details[open]`).waitFor();
    const tag = await page.locator(`li[data-step-id="${id}"] [data-testid="step-plan-id"]`).textContent();
    if (tag !== 'join') throw new Failure(`the step row names its plan id "${tag}"`);
    await page.getByTestId('tab-stages').click();
  });

  await step('on a 390×844 phone in dark mode the graph scrolls in its own box and the page fits', async () => {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, colorScheme: 'dark', isMobile: true, hasTouch: true });
    const p = await phone.newPage();
    p.setDefaultTimeout(WAIT);
    p.on('pageerror', (e) => pageErrors.push(`phone page error: ${e.message}`));
    await signIn(p);
    await p.locator(`[data-testid="task-item"][data-task-id="${taskId}"]`).click();
    const fig = p.locator('[data-testid="stage-plans"] [data-testid="plan-graph"]');
    await fig.waitFor();
    await fig.scrollIntoViewIfNeeded();
    const fit = await p.evaluate(() => {
      const box = document.querySelector('[data-testid="stage-plans"] .plan-box');
      const rect = (sel) => document.querySelector(sel).getBoundingClientRect();
      const fill = getComputedStyle(document.querySelector('[data-testid="plan-node"][data-state="finished"] rect')).fill;
      const text = getComputedStyle(document.querySelector('[data-testid="plan-node"] .pg-intent')).fill;
      return { page: document.documentElement.scrollWidth, screen: window.innerWidth, boxRight: box.getBoundingClientRect().right, figRight: rect('[data-testid="stage-plans"]').right, fill, text };
    });
    if (fit.page > fit.screen) throw new Failure(`the page is ${fit.page} px wide on a ${fit.screen} px screen`);
    if (fit.boxRight > fit.screen) throw new Failure(`the graph's box reaches ${fit.boxRight} px on a ${fit.screen} px screen`);
    const sum = (c) => (c.match(/\d+/g) || []).slice(0, 3).map(Number).reduce((a, b) => a + b, 0);
    if (sum(fit.fill) > 240 || sum(fit.text) < 500) throw new Failure(`dark mode: a finished node is filled ${fit.fill} with text ${fit.text}`);
    await p.screenshot({ path: shot('-phone-dark') });
    await phone.close();
  });

  await step(`screenshot to ${SHOT}`, async () => {
    await page.screenshot({ path: SHOT });
  });

  if (!(await page.evaluate(() => window.__noReload === true))) throw new Failure('the page reloaded; updates must arrive live');
  if (pageErrors.length) throw new Failure(`the page reported errors:\n  ${pageErrors.join('\n  ')}`);
  ok = true;
  log(`passed in ${elapsed()} s`);
} catch (e) {
  const more = async () => `the plan graph shown: ${JSON.stringify(await page.evaluate(graphNow))}`;
  await reportFailure('PLAN GRAPH TEST', e, { page, pageErrors, shot: SHOT, more });
} finally {
  await browser.close().catch(() => {});
}
process.exit(ok ? 0 : 1);
