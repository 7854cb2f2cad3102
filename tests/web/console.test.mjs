// Drives the Cohort web console in headless Chromium (Debian's /usr/bin/chromium) the way an
// operator would: sign in, give the manager a goal in the base task, watch the task appear,
// answer the manager's waiting question (a wrong answer from the inbox's composer is refused;
// the option in "Waiting for you" sends), see the manager's step lock released,
// the stages run and the task finish; then keep a screenshot.
//
//   COHORT_URL=http://127.0.0.1:7878 COHORT_USER=operator COHORT_PASSWORD=cohort-demo \
//   COHORT_SCREENSHOT=target/web-console.png node tests/web/console.test.mjs
//
// Optional: COHORT_MANAGER (the manager's agent id, default "manager"), COHORT_GOAL,
// COHORT_ANSWER, COHORT_WAIT_MS (default 60000). Exit code 0 on success, 1 with the reason.

import { chromium } from 'playwright-core';

const env = (name, fallback) => {
  const v = process.env[name];
  if (v !== undefined && v !== '') return v;
  if (fallback !== undefined) return fallback;
  console.error(`console test: set ${name}`);
  process.exit(2);
};

const BASE_URL = env('COHORT_URL').replace(/\/+$/, '');
const USER = env('COHORT_USER');
const PASSWORD = env('COHORT_PASSWORD');
const SHOT = env('COHORT_SCREENSHOT', 'web-console.png');
const MANAGER = env('COHORT_MANAGER', 'manager');
const GOAL = env('COHORT_GOAL', 'Write a haiku about the season I choose.');
const ANSWER = env('COHORT_ANSWER', 'Autumn');
const WAIT = Number(env('COHORT_WAIT_MS', '60000'));
const CHROMIUM = env('COHORT_CHROMIUM', '/usr/bin/chromium');

const started = Date.now();
const log = (msg) => console.log(`[web ${((Date.now() - started) / 1000).toFixed(1).padStart(5)}s] ${msg}`);

class Failure extends Error {}

let phase = 'start';
async function step(name, fn) {
  phase = name;
  log(name);
  try {
    return await fn();
  } catch (e) {
    throw e instanceof Failure ? e : new Failure(firstLine(e));
  }
}

function firstLine(e) {
  // eslint-disable-next-line no-control-regex
  const s = String((e && e.message) || e).replace(/\x1b\[[0-9;]*m/g, '');
  // Playwright's messages carry a call log; the first lines say what timed out.
  return s.split('\n').slice(0, 3).join(' | ');
}

const q = {
  task: (id) => `[data-testid="task-item"][data-task-id="${id}"]`,
  agent: (id) => `[data-testid="agent-item"][data-agent-id="${id}"]`,
  pendingFrom: (id) => `[data-testid="private-message"][data-pending="true"][data-sender="${id}"]`,
};

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const pageErrors = [];
let page;
let ok = false;
try {
  const context = await browser.newContext({ viewport: { width: 1366, height: 768 }, deviceScaleFactor: 1 });
  page = await context.newPage();
  page.setDefaultTimeout(WAIT);
  page.on('pageerror', (e) => pageErrors.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') pageErrors.push(`console error: ${m.text()}`);
  });

  await step(`open ${BASE_URL}`, async () => {
    const res = await page.goto(`${BASE_URL}/`, { waitUntil: 'domcontentloaded' });
    if (!res || !res.ok()) throw new Failure(`GET / answered ${res ? res.status() : 'nothing'}`);
    await page.getByTestId('login-form').waitFor({ state: 'visible' });
  });

  await step('a wrong password is refused', async () => {
    await page.getByTestId('login-user').fill(USER);
    await page.getByTestId('login-password').fill(`${PASSWORD}-wrong`);
    await page.getByTestId('login-submit').click();
    await page.getByTestId('login-error').waitFor({ state: 'visible' });
    // The browser logs the refused request (401) as a console error; that one is expected.
    pageErrors.length = 0;
  });

  await step(`sign in as ${USER}`, async () => {
    await page.getByTestId('login-password').fill(PASSWORD);
    await page.getByTestId('login-submit').click();
    await page.getByTestId('app').waitFor({ state: 'visible' });
    await page.locator('[data-testid="conn-status"][data-state="live"]').waitFor();
    const who = await page.getByTestId('current-user').textContent();
    if (who !== USER) throw new Failure(`the header shows "${who}", not "${USER}"`);
    const token = await page.evaluate(() => sessionStorage.getItem('cohort.session'));
    if (!token || !token.includes('token')) throw new Failure('no session in sessionStorage');
  });

  await step('the state store applies change events in version order, as the runtime does', async () => {
    const got = await page.evaluate(async () => {
      const { Store } = await import('./store.js');
      const s = new Store();
      const task = { task_id: 't', task_group: ['m'], stage_list: [], shared_info_pool: [], shared_conversation_pool: [], execution_state: 'init' };
      const agent = { agent_id: 'a', working_state: 'idle', working_memory: {}, persistent_memory: {}, agent_step: { step_list: [], todo: [] }, step_lock: [] };
      s.loadSnapshot(10, { task: { t: task }, stage: {}, agent: { a: agent }, step: {} });
      const step = { step_id: 'x', task_id: 't', stage_id: 's1', agent_id: 'a', execution_state: 'init' };
      const out = [
        s.apply({ version: 9, kind: 'task', op: 'state', task_id: 't', execution_state: 'failed' }).length, // covered by the snapshot
        s.apply({ version: 11, kind: 'task', op: 'state', task_id: 't', execution_state: 'running' }).length,
        s.apply({ version: 11, kind: 'task', op: 'state', task_id: 't', execution_state: 'failed' }).length, // a repeat
        s.apply({ version: 12, kind: 'stage', op: 'added', at: 1700000000000, list_at: 0, stage: { stage_id: 's1', task_id: 't', every_agent_state: {}, completion_summary: {} } }).length,
        s.apply({ version: 13, kind: 'task', op: 'joined', task_id: 't', agents: ['a', 'm'] }).length,
        s.apply({ version: 14, kind: 'step', op: 'added', agent_id: 'a', step, list_at: 0, todo_at: 0, remember: true }).length,
        s.apply({ version: 15, kind: 'step', op: 'started', agent_id: 'a', step_id: 'x' }).length,
        s.apply({ version: 16, kind: 'step', op: 'updated', agent_id: 'a', step_id: 'x', execution_state: 'finished', execute_result: { ok: 1 } }).length,
        s.apply({ version: 17, kind: 'agent', op: 'waits_held', agent_id: 'a', task_id: 't', stage_id: 's1', ids: ['w'] }).length,
      ];
      const mid = JSON.parse(JSON.stringify(s.get('agent', 'a')));
      s.apply({ version: 18, kind: 'step', op: 'removed', agent_id: 'a', step_ids: ['x'] });
      s.apply({ version: 19, kind: 'agent', op: 'waits_released', agent_id: 'a', ids: ['w'] });
      return {
        out,
        state: s.get('task', 't').execution_state,
        group: s.get('task', 't').task_group,
        stages: s.get('task', 't').stage_list,
        mid,
        step: s.get('step', 'x'),
        after: s.get('agent', 'a'),
      };
    });
    const want = {
      out: [0, 1, 0, 2, 1, 2, 2, 1, 1],
      state: 'running',
      group: ['m', 'a'],
      stages: ['s1'],
      mid: { agent_id: 'a', working_state: 'idle', working_memory: { t: { s1: ['x'] } }, persistent_memory: {}, agent_step: { step_list: ['x'], todo: [] }, step_lock: ['w'] },
      step: { step_id: 'x', task_id: 't', stage_id: 's1', agent_id: 'a', execution_state: 'finished', execute_result: { ok: 1 } },
      after: { agent_id: 'a', working_state: 'idle', working_memory: { t: { s1: [] } }, persistent_memory: {}, agent_step: { step_list: [], todo: [] }, step_lock: [] },
    };
    if (JSON.stringify(got) !== JSON.stringify(want)) throw new Failure(`got ${JSON.stringify(got)}`);
    // A step's wait for its model's endpoint: set, cleared (null), and over when the step ends.
    const waits = await page.evaluate(async () => {
      const { Store } = await import('./store.js');
      const s = new Store();
      const agent = { agent_id: 'a', working_state: 'idle', working_memory: {}, persistent_memory: {}, agent_step: { step_list: [], todo: [] }, step_lock: [] };
      s.loadSnapshot(1, { task: {}, stage: {}, agent: { a: agent }, step: {} });
      const step = { step_id: 'y', task_id: 't', stage_id: 'no_relative', agent_id: 'a', execution_state: 'init' };
      s.apply({ version: 2, kind: 'step', op: 'added', agent_id: 'a', step, list_at: 0, todo_at: 0, remember: false });
      s.apply({ version: 3, kind: 'step', op: 'started', agent_id: 'a', step_id: 'y' });
      const wait = { since: 1700000000000, reason: 'the LLM endpoint answered HTTP 500: down' };
      s.apply({ version: 4, kind: 'step', op: 'updated', agent_id: 'a', step_id: 'y', model_wait: wait });
      const waiting = s.get('step', 'y').model_wait?.reason;
      s.apply({ version: 5, kind: 'step', op: 'updated', agent_id: 'a', step_id: 'y', model_wait: null });
      const cleared = s.get('step', 'y').model_wait;
      s.apply({ version: 6, kind: 'step', op: 'updated', agent_id: 'a', step_id: 'y', model_wait: wait });
      s.apply({ version: 7, kind: 'step', op: 'updated', agent_id: 'a', step_id: 'y', execution_state: 'failed' });
      return { waiting, cleared: cleared === undefined, over: s.get('step', 'y').model_wait === undefined };
    });
    if (!(waits.waiting?.includes('HTTP 500') && waits.cleared && waits.over)) {
      throw new Failure(`a step's wait for its endpoint: ${JSON.stringify(waits)}`);
    }
    // A report the runtime composed or added results to: the agent's words stay its own, the
    // runtime's part is shown beside them, marked; given again in its own words, it is gone.
    const reports = await page.evaluate(async () => {
      const { Store } = await import('./store.js');
      const { agentReport } = await import('./tasks.js');
      const s = new Store();
      const stage = { stage_id: 's1', task_id: 't', every_agent_state: { w: 'working' }, completion_summary: {} };
      s.loadSnapshot(1, { task: {}, stage: { s1: stage }, agent: {}, step: {} });
      const shown = () => {
        const el = agentReport(s.get('stage', 's1'), 'w');
        return { written: el.dataset.written, text: el.textContent, added: !!el.querySelector('[data-testid="stage-summary-added"]') };
      };
      s.apply({ version: 2, kind: 'stage', op: 'completion', stage_id: 's1', agent_id: 'w', summary: '', results: ['Rain on red maples'], written: 'composed' });
      const composed = shown();
      s.apply({ version: 3, kind: 'stage', op: 'completion', stage_id: 's1', agent_id: 'w', summary: 'Wrote it: rain on red maples.' });
      return { composed, own: shown() };
    });
    const { composed, own } = reports;
    if (composed.written !== 'composed' || !composed.added || !composed.text.includes('Rain on red maples') || !composed.text.includes('composed by the runtime')) {
      throw new Failure(`a composed report: ${JSON.stringify(composed)}`);
    }
    if (own.written !== 'own' || own.added || !own.text.includes('Wrote it')) throw new Failure(`a report in its own words: ${JSON.stringify(own)}`);
    // A task's summary likewise: the manager's words, and the runtime's part beside them.
    const summaries = await page.evaluate(async () => {
      const { Store } = await import('./store.js');
      const { taskSummaryAdded } = await import('./tasks.js');
      const s = new Store();
      const task = { task_id: 't', task_name: 'n', task_group: [], stage_list: [], execution_state: 'running' };
      s.loadSnapshot(1, { task: { t: task }, stage: {}, agent: {}, step: {} });
      const shown = () => {
        const el = taskSummaryAdded(s.get('task', 't').summary_written);
        return { words: s.get('task', 't').task_summary, written: el?.dataset.written, text: el?.textContent || '' };
      };
      const written = { written: 'closed_by_runtime', reason: 'refused twice', reports: '- rain on red maples' };
      s.apply({ version: 2, kind: 'task', op: 'state', task_id: 't', execution_state: 'failed', task_summary: '', summary_written: written });
      const closed = shown();
      s.apply({ version: 3, kind: 'task', op: 'state', task_id: 't', execution_state: 'finished', task_summary: 'Rain on red maples.' });
      return { closed, own: shown() };
    });
    const closedTask = summaries.closed;
    if (closedTask.written !== 'closed_by_runtime' || closedTask.words !== '' || !closedTask.text.includes('refused twice') || !closedTask.text.includes('rain on red maples')) {
      throw new Failure(`a task the runtime closed: ${JSON.stringify(closedTask)}`);
    }
    if (summaries.own.written !== undefined || summaries.own.words !== 'Rain on red maples.') throw new Failure(`a task summary in the manager's words: ${JSON.stringify(summaries.own)}`);
    // A question answered and a plan check fetched together leave the task waiting, for
    // someone else: the task views are drawn again (their stage says who waits).
    const sigs = await page.evaluate(async () => {
      const { waitSignature } = await import('./waiting.js');
      const question = [{ from: 'manager', m: { task_id: 't' } }];
      const plan = [{ task_id: 't', kind: 'plan', agent_id: 'writer' }];
      return [waitSignature(question, []), waitSignature([], plan)];
    });
    if (sigs[0] === sigs[1]) throw new Failure(`a question and a plan check in one task have one signature: ${sigs[0]}`);
    // Everything after this point must arrive live: this marker is lost on a reload.
    await page.evaluate(() => {
      window.__noReload = true;
    });
  });

  const baseId = await step('the base task and the manager are shown', async () => {
    const base = page.locator('[data-testid="task-item"][data-base="true"]');
    await base.first().waitFor();
    await page.locator(q.agent(MANAGER)).waitFor();
    return base.first().getAttribute('data-task-id');
  });

  await step(`send the goal to ${MANAGER} in the base task`, async () => {
    await page.getByTestId('composer-task').selectOption(baseId);
    const box = page.locator(`[data-testid="receiver-option"][data-agent-id="${MANAGER}"] input`);
    if (!(await box.count())) await page.getByTestId('receivers-all').click();
    await box.check();
    await page.getByTestId('composer-need-reply').uncheck();
    await page.getByTestId('composer-waiting').uncheck();
    await page.getByTestId('composer-content').fill(GOAL);
    await page.getByTestId('composer-send').click();
    await waitSent();
  });

  const task = await step('a task (not the base task) appears', async () => {
    const item = page.locator('[data-testid="task-item"][data-base="false"]').first();
    await item.waitFor();
    const id = await item.getAttribute('data-task-id');
    const name = await item.getAttribute('data-task-name');
    await item.click();
    await page.locator(`[data-testid="task-detail"][data-task-id="${id}"]`).waitFor();
    log(`  task "${name}" (${id})`);
    return { id, name };
  });

  const question = await step(`${MANAGER}'s waiting question is pending in the inbox`, async () => {
    const msg = page.locator(q.pendingFrom(MANAGER)).first();
    await msg.waitFor();
    if ((await msg.getAttribute('data-waiting')) !== 'true') throw new Failure('the pending message is not marked as waiting');
    await page.locator('[data-testid="pending-count"]:not([data-count="0"])').waitFor();
    const text = (await msg.locator('.msg-body').textContent()).trim();
    log(`  question: ${text}`);
    return { msg, taskId: await msg.getAttribute('data-task-id') };
  });

  await step(`${MANAGER} is waiting with a step lock, and its card says for whom`, async () => {
    await page.locator(`${q.agent(MANAGER)}[data-locked="true"]`).waitFor();
    await page.locator(`${q.agent(MANAGER)}[data-working-state="waiting"]`).waitFor();
    await page.getByTestId('tab-agents').click();
    const waits = page.locator(`[data-testid="agent-card"][data-agent-id="${MANAGER}"] [data-testid="agent-waits-for"]`);
    await waits.waitFor();
    const whom = await waits.locator('[data-agent-id]').getAttribute('data-agent-id');
    if (whom !== USER) throw new Failure(`the card says it waits for ${whom}, not ${USER}`);
  });

  await step('answer the question from the inbox', async () => {
    await question.msg.getByTestId('answer-button').click();
    // The answer action prefills the task, the receiver and the flags.
    await page.getByTestId('composer-replying').waitFor({ state: 'visible' });
    const chosen = await page.getByTestId('composer-task').inputValue();
    if (chosen !== question.taskId) throw new Failure(`the composer's task is ${chosen}, not the question's ${question.taskId}`);
    const checked = await page.locator('[data-testid="receiver-option"] input:checked').evaluateAll((els) => els.map((e) => e.value));
    if (checked.length !== 1 || checked[0] !== MANAGER) throw new Failure(`receivers prefilled as [${checked}], not [${MANAGER}]`);
    if (await page.getByTestId('composer-need-reply').isChecked()) throw new Failure('need_reply should start unchecked for an answer');
    // The question is a choice: an answer that is not an option is refused, and says so.
    await page.getByTestId('composer-content').fill('Autumn, please.');
    await page.getByTestId('composer-send').click();
    await page.locator('[data-testid="composer-status"][data-state="error"]').waitFor();
    const refusal = await page.getByTestId('composer-status').textContent();
    if (!refusal.includes('Spring | Summer | Autumn | Winter')) throw new Failure(`the refusal says: ${refusal}`);
    // The browser logs the refused request (422) as an error; that one was asked for.
    for (let i = pageErrors.length - 1; i >= 0; i--) if (pageErrors[i].includes('status of 422')) pageErrors.splice(i, 1);
    // The question waits at the top of the page too, where its options answer at one click.
    const card = page.locator(`[data-testid="question"][data-agent-id="${MANAGER}"]`);
    await card.locator('[data-testid="ask-option"]', { hasText: ANSWER }).click();
    // Answered, it leaves the strip (the server recorded the answer).
    await card.waitFor({ state: 'detached' });
    // What was typed for the refused answer is left to the person; clear it for what follows.
    await page.getByTestId('composer-content').fill('');
  });

  await step(`the answer is recorded and ${MANAGER}'s step lock is released`, async () => {
    await page.locator(q.pendingFrom(MANAGER)).first().waitFor({ state: 'detached' });
    await page.locator(`${q.agent(MANAGER)}[data-locked="false"]`).waitFor();
    await page.locator('[data-testid="pending-count"][data-count="0"]').waitFor({ state: 'attached' });
  });

  let timelineEarly = 0;
  await step('the task shows its stages, and its timeline while it runs', async () => {
    await page.locator(q.task(task.id)).click();
    await page.getByTestId('tab-stages').click();
    await page.locator('[data-testid="stage-list"] [data-testid="stage-item"]').first().waitFor();
    // A running task counts its time up in the list and in its head; its stage shows its own.
    const elapsed = page.locator(`${q.task(task.id)} [data-testid="task-elapsed"]`);
    await elapsed.waitFor();
    const first = await elapsed.textContent();
    await page.waitForTimeout(1100);
    if (!(await elapsed.getAttribute('data-since')) || (await elapsed.textContent()) === first) throw new Failure(`the running task's time does not count up (${first})`);
    await page.locator('[data-testid="stage-elapsed"]').first().waitFor();
    await page.getByTestId('tab-timeline').click();
    await page.locator('[data-testid="timeline-step"]').first().waitFor();
    timelineEarly = Number(await page.getByTestId('timeline').getAttribute('data-steps'));
    await page.getByTestId('tab-stages').click();
  });

  await step("the writer's plan waits for the operator's check and is confirmed in place", async () => {
    const plan = page.locator('[data-testid="decision"][data-kind="plan"]').first();
    await plan.waitFor();
    const text = await plan.textContent();
    if (!text.includes('Write the haiku')) throw new Failure(`the plan shown: ${text}`);
    await page.locator(`[data-testid="step-item"][data-state="waiting_for_approval"]`).first().waitFor({ state: 'attached' });
    await page.screenshot({ path: SHOT.replace(/(\.png)?$/, '-plan-check.png') });
    await plan.getByTestId('decision-approve').click();
    await page.locator('[data-testid="decision"][data-kind="plan"]').waitFor({ state: 'detached' });
  });

  await step("the writer's answer shows under its running step while it is written", async () => {
    await page.getByTestId('tab-agents').click();
    const writing = page.locator('[data-testid="agent-card"][data-agent-id="writer"] [data-testid="step-item"][data-state="running"] [data-testid="step-writing"]');
    await writing.first().waitFor({ state: 'attached' });
    const text = (await writing.first().textContent()) || '';
    if (!text.startsWith('<think>Cold')) throw new Failure(`the text being written is "${text}"`);
    await page.getByTestId('tab-stages').click();
  });

  await step('the task reaches finished, with every stage finished and a summary', async () => {
    await page.locator(`${q.task(task.id)}[data-state="finished"]`).waitFor();
    await page.getByTestId('task-summary').waitFor();
    const states = await page.locator('[data-testid="stage-item"]').evaluateAll((els) => els.map((e) => e.dataset.state));
    if (!states.length || states.some((s) => s !== 'finished')) throw new Failure(`stage states: ${states.join(', ')}`);
    await page.locator('[data-testid="stage-summary"]').first().waitFor();
  });

  await step("the task's group conversation holds the messages", async () => {
    await page.getByTestId('tab-chat').click();
    await page.locator('[data-testid="group-chat"] [data-testid="group-message"]').first().waitFor();
    await page.locator(`[data-testid="group-chat"] [data-testid="group-message"][data-sender="${USER}"]`).first().waitFor();
  });

  await step("the agents panel shows the manager's finished steps with their results", async () => {
    await page.getByTestId('tab-agents').click();
    const card = page.locator(`[data-testid="agent-card"][data-agent-id="${MANAGER}"]`);
    await card.waitFor();
    if ((await card.getAttribute('data-locked')) !== 'false') throw new Failure('the manager card still shows a step lock');
    const first = card.locator('[data-testid="steps-finished"] [data-testid="step-item"]').first();
    await first.waitFor();
    await first.locator('summary').click();
    await first.locator('pre.json').first().waitFor();
    // The writer was hired during the run: its card arrived live and names its template.
    const hired = page.locator('[data-testid="agent-card"][data-agent-id="writer"] [data-testid="agent-card-template"]');
    await hired.waitFor();
    if ((await hired.textContent()).trim() !== 'hired · writer') throw new Failure(`the hired writer's card says "${await hired.textContent()}"`);
    await page.screenshot({ path: SHOT.replace(/(\.png)?$/, '-agents.png') });
  });

  await step('the timeline shows the finished task: its stage, a lane per agent, grown live', async () => {
    await page.locator(q.task(task.id)).click();
    await page.getByTestId('tab-timeline').click();
    const tl = page.getByTestId('timeline');
    await tl.waitFor();
    const lanes = await page.locator('[data-testid="timeline-lane"]').evaluateAll((els) => els.map((e) => e.dataset.agentId));
    if (!lanes.includes(MANAGER) || !lanes.includes('writer')) throw new Failure(`timeline lanes: ${lanes.join(', ')}`);
    if ((await page.locator('[data-testid="timeline-stage"]').count()) < 1) throw new Failure('no stage on the timeline');
    // The timeline redraws the lanes that changed on its next frame (up to a second on a busy
    // machine): wait for it to show more steps than while the task ran, within a deadline.
    const grown = await page
      .waitForFunction((early) => Number(document.querySelector('[data-testid="timeline"]')?.dataset.steps) > early, timelineEarly, { timeout: 10000 })
      .then(() => true, () => false);
    const n = Number(await tl.getAttribute('data-steps'));
    if (!grown) throw new Failure(`the timeline showed ${timelineEarly} steps while running and ${n} at the end`);
    const running = await page.locator('[data-testid="timeline-step"][data-state="running"]').count();
    if (running) throw new Failure(`${running} steps still drawn as running after the task finished`);
    // The finished task's time is fixed: how long it ran.
    const ran = page.getByTestId('task-head-elapsed');
    await ran.waitFor();
    if (await ran.getAttribute('data-since')) throw new Failure('the finished task still counts its time up');
    await page.screenshot({ path: SHOT.replace(/(\.png)?$/, '-timeline.png') });
  });

  await step('the task names its trace and shows what each agent and its costliest steps spent', async () => {
    await page.locator(q.task(task.id)).click();
    await page.getByTestId('tab-stages').click();
    const trace = await page.getByTestId('task-trace').getAttribute('data-trace-id');
    if (!/^[0-9a-f]{32}$/.test(trace || '')) throw new Failure(`the task's trace id: "${trace}"`);
    const card = page.getByTestId('task-spent');
    await card.waitFor();
    const rows = await page.locator('[data-testid="spent-agent"]').evaluateAll((els) => els.map((e) => [e.dataset.key, Number(e.dataset.tokens)]));
    const who = rows.map(([k]) => k);
    if (!who.includes('writer') || !who.includes(MANAGER)) throw new Failure(`spent by: ${who.join(', ')}`);
    if (!rows.every(([, t]) => t > 0)) throw new Failure(`spent by agent: ${JSON.stringify(rows)}`);
    // Largest first.
    if (rows.some(([, t], i) => i > 0 && t > rows[i - 1][1])) throw new Failure(`not largest first: ${JSON.stringify(rows)}`);
    const steps = await page.locator('[data-testid="spent-step"]').count();
    if (steps < 1 || steps > 8) throw new Failure(`${steps} costliest steps shown`);
    // The card is drawn again as changes come in (the operator's own agent still moves): a
    // scroll that finds it detached tries the new one.
    for (let tries = 0; ; tries++) {
      try {
        await card.scrollIntoViewIfNeeded();
        break;
      } catch (e) {
        if (tries >= 4 || !/not attached/.test(String(e))) throw e;
      }
    }
    await page.screenshot({ path: SHOT.replace(/(\.png)?$/, '-spent.png') });
  });

  await step('the filter narrows tasks, agents and steps, and clearing it shows all again', async () => {
    await page.getByTestId('tab-agents').click();
    // The lists are drawn in the next animation frame: wait until they show exactly the match.
    const count = (what) => `document.querySelectorAll('[data-testid="${what}"]').length`;
    const only = (what, attr, value) =>
      `(() => { const els = document.querySelectorAll('[data-testid="${what}"]'); return els.length === 1 && els[0].getAttribute('${attr}') === '${value}'; })()`;
    await page.getByTestId('filter').fill('haiku for');
    await page.waitForFunction(only('task-item', 'data-task-id', task.id));
    await page.getByTestId('filter').fill('wren');
    await page.waitForFunction(only('agent-item', 'data-agent-id', 'writer'));
    await page.getByTestId('filter').fill('');
    await page.waitForFunction(`${count('task-item')} >= 2 && ${count('agent-item')} >= 3`);
  });

  await step('who talks to whom: the task\'s agents and people as nodes, their messages as arrows', async () => {
    await page.locator(q.task(task.id)).click();
    await page.getByTestId('tab-graph').click();
    await page.getByTestId('message-graph').waitFor();
    const nodes = await page.locator('[data-testid="graph-node"]').evaluateAll((els) => els.map((e) => e.dataset.agentId));
    for (const who of [MANAGER, USER, 'writer']) if (!nodes.includes(who)) throw new Failure(`graph nodes: ${nodes.join(', ')}`);
    // The manager asked the operator (waiting), the operator answered.
    const asked = page.locator(`[data-testid="graph-edge"][data-from="${MANAGER}"][data-to="${USER}"]`);
    const answered = page.locator(`[data-testid="graph-edge"][data-from="${USER}"][data-to="${MANAGER}"]`);
    if (!(await asked.count()) || !(await answered.count())) {
      const edges = await page.locator('[data-testid="graph-edge"]').evaluateAll((els) => els.map((e) => `${e.dataset.from}->${e.dataset.to}`));
      throw new Failure(`graph edges: ${edges.join(', ')}`);
    }
    await page.screenshot({ path: SHOT.replace(/(\.png)?$/, '-graph.png') });
  });

  await step('a step that fails shows in the failures panel with its reason, and marks its agent', async () => {
    await sendGoal(baseId, 'FAIL ON PURPOSE: show me what a failure looks like');
    const item = page.locator('[data-testid="failure-item"][data-kind="step"]').first();
    await item.waitFor();
    const reason = (await item.getByTestId('failure-reason').textContent()) || '';
    if (!reason.includes('planned_step')) throw new Failure(`the failure's reason: "${reason}"`);
    await page.locator(`${q.agent(MANAGER)} [data-testid="agent-failures"]`).waitFor();
    const id = await item.getAttribute('data-step-id');
    await item.click();
    const row = page.locator(`[data-testid="agent-card"] li[data-step-id="${id}"]`);
    await row.locator('.step-error').first().waitFor();
    // Why: the prompt as sent and every raw reply, one per try (the same answer twice is not
    // asked for a third time).
    await row.getByTestId('step-calls-load').click();
    await row.getByTestId('step-call-reply').first().waitFor();
    const replies = await row.getByTestId('step-call-reply').allTextContents();
    if (replies.length !== 2 || replies.some((r) => !r.includes('I would rather not plan'))) throw new Failure(`the step's raw replies: ${JSON.stringify(replies)}`);
    const prompt = (await row.getByTestId('step-call-prompt').first().textContent()) || '';
    if (!prompt.includes('FAIL ON PURPOSE')) throw new Failure(`the prompt shown: ${prompt.slice(0, 200)}`);
    await page.screenshot({ path: SHOT.replace(/(\.png)?$/, '-failure.png') });
  });

  await step('the failures panel stays short: the newest two, and "show all" for the rest', async () => {
    await sendGoal(baseId, 'FAIL ON PURPOSE again');
    await page.waitForFunction(() => Number(document.querySelector('[data-testid="failure-count"]')?.dataset.count) >= 4);
    const n = Number(await page.getByTestId('failure-count').getAttribute('data-count'));
    if ((await page.locator('[data-testid="failure-item"]').count()) !== 2) throw new Failure('more than two failures shown before "show all"');
    await page.getByTestId('failures-all').click();
    await page.waitForFunction((n) => document.querySelectorAll('[data-testid="failure-item"]').length === n, n);
    await page.getByTestId('failures-fewer').click();
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="failure-item"]').length === 2);
  });

  await step('on a 390×844 phone in dark mode the console fits the screen', async () => {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, colorScheme: 'dark', isMobile: true, hasTouch: true });
    const p = await phone.newPage();
    p.setDefaultTimeout(WAIT);
    p.on('pageerror', (e) => pageErrors.push(`phone page error: ${e.message}`));
    await p.goto(`${BASE_URL}/`, { waitUntil: 'domcontentloaded' });
    await p.getByTestId('login-user').fill(USER);
    await p.getByTestId('login-password').fill(PASSWORD);
    await p.getByTestId('login-submit').click();
    await p.locator('[data-testid="conn-status"][data-state="live"]').waitFor();
    await p.locator(q.task(task.id)).click();
    await p.getByTestId('tab-timeline').click();
    await p.locator('[data-testid="timeline-step"]').first().waitFor();
    const fit = await p.evaluate(() => ({ page: document.documentElement.scrollWidth, screen: window.innerWidth }));
    if (fit.page > fit.screen) throw new Failure(`the page is ${fit.page} px wide on a ${fit.screen} px screen`);
    const bg = await p.evaluate(() => getComputedStyle(document.body).backgroundColor);
    const rgb = (bg.match(/\d+/g) || []).slice(0, 3).map(Number);
    if (rgb.length !== 3 || rgb.reduce((a, b) => a + b, 0) > 150) throw new Failure(`dark mode background is ${bg}`);
    await p.screenshot({ path: SHOT.replace(/(\.png)?$/, '-phone-dark.png'), fullPage: true });
    await phone.close();
  });

  await step('a long task is cancelled from the console: the task ends cancelled and its writer is free', async () => {
    await sendGoal(baseId, 'LONG TASK: think at length');
    const long = page.locator('[data-testid="task-item"][data-task-name="A long task"]');
    await long.waitFor();
    const id = await long.getAttribute('data-task-id');
    await long.click();
    // The writer's plan waits for the operator's check (the example checks plans): confirm it.
    const plan = page.locator('[data-testid="decision"][data-kind="plan"]').first();
    await plan.waitFor();
    await plan.getByTestId('decision-approve').click();
    await page.getByTestId('tab-agents').click();
    await page.locator('[data-testid="agent-card"][data-agent-id="writer"] [data-testid="step-item"][data-state="running"]').first().waitFor();
    // The panel shows the newest few; its count says how many there are.
    const failures = () => page.getByTestId('failure-count').getAttribute('data-count').then(Number);
    const failuresBefore = await failures();
    page.once('dialog', (d) => d.accept('not needed any more'));
    await page.getByTestId('task-cancel').click();
    await page.locator(`${q.task(id)}[data-state="cancelled"]`).waitFor();
    await page.locator(`${q.agent('writer')}[data-working-state="idle"]`).waitFor();
    const running = await page.locator('[data-testid="agent-card"][data-agent-id="writer"] [data-testid="step-item"][data-state="running"]').count();
    if (running) throw new Failure('the writer still shows a running step after the task was cancelled');
    // Its step was set aside (cancelled), not failed: the failures panel does not grow.
    await page.locator('[data-testid="agent-card"][data-agent-id="writer"] [data-testid="step-item"][data-state="cancelled"]').first().waitFor();
    const failuresAfter = await failures();
    if (failuresAfter !== failuresBefore) throw new Failure(`failures went from ${failuresBefore} to ${failuresAfter} on a cancel`);
    await page.screenshot({ path: SHOT.replace(/(\.png)?$/, '-cancelled.png') });
  });

  await step('a long keyed list draws only the rows in view, and a changed row once it is scrolled to', async () => {
    const r = await page.evaluate(async () => {
      const { h, keyed, InView } = await import('./dom.js');
      const box = h('div', { style: 'position:fixed;top:0;left:0;width:300px;height:200px;overflow:auto;z-index:99' });
      const list = h('div');
      box.append(list);
      document.body.append(box);
      const frames = (n) => new Promise((done) => {
        const next = () => (n-- > 0 ? requestAnimationFrame(next) : done());
        next();
      });
      const items = Array.from({ length: 60 }, (_, i) => i);
      let version = 0;
      let drawn = [];
      const inView = new InView(box, () => draw(), { from: 20, placeholder: () => h('div', { style: 'height:40px' }) });
      const draw = () =>
        keyed(list, items, (i) => i, (i) => `${i}|${version}`, (i) => {
          drawn.push(i);
          return h('div', { style: 'height:40px' }, `row ${i} v${version}`);
        }, inView);
      draw();
      await frames(4);
      const firstDraw = [...drawn];
      const top = list.children[0].textContent;
      drawn = [];
      version = 1;
      draw();
      const changed = [...drawn];
      drawn = [];
      box.scrollTop = 40 * 55;
      await frames(6);
      const scrolled = [...drawn];
      const last = list.children[59].textContent;
      box.remove();
      return { firstDraw, top, changed, scrolled, last };
    });
    // The first screenful is drawn at once, the rest as placeholders until they are seen.
    if (!r.firstDraw.length || r.firstDraw.length > 12 || r.firstDraw.includes(59) || r.top !== 'row 0 v0') throw new Failure(`the first draw made rows ${r.firstDraw.join(',')} (top: "${r.top}")`);
    // 5 rows show in the 200 px box, 5 more within a box's height below it.
    if (!r.changed.length || r.changed.length > 12 || r.changed.includes(59)) throw new Failure(`a change drew rows ${r.changed.join(',')}; only those near the view should be`);
    if (!r.scrolled.includes(59) || r.last !== 'row 59 v1') throw new Failure(`scrolled to the end, rows ${r.scrolled.join(',')} were drawn and the last says "${r.last}"`);
  });

  await step(`screenshot to ${SHOT}`, async () => {
    await page.getByTestId('tab-stages').click();
    await page.locator(`[data-testid="conversation-tab"][data-agent-id="${MANAGER}"]`).click();
    await page.screenshot({ path: SHOT });
  });

  if (!(await page.evaluate(() => window.__noReload === true))) throw new Failure('the page reloaded; updates must arrive live');
  if (pageErrors.length) throw new Failure(`the page reported errors:\n  ${pageErrors.join('\n  ')}`);
  ok = true;
  log(`passed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
} catch (e) {
  console.error(`\nWEB CONSOLE TEST FAILED at "${phase}":\n  ${e instanceof Failure ? e.message : firstLine(e)}`);
  if (pageErrors.length) console.error(`page errors:\n  ${pageErrors.join('\n  ')}`);
  if (page) {
    try {
      const state = await page.evaluate(() => ({
        conn: document.querySelector('[data-testid="conn-status"]')?.textContent,
        tasks: [...document.querySelectorAll('[data-testid="task-item"]')].map((e) => `${e.dataset.taskName} [${e.dataset.state}] stages=${e.dataset.stageCount}`),
        agents: [...document.querySelectorAll('[data-testid="agent-item"]')].map((e) => `${e.dataset.agentId} ${e.dataset.workingState} locked=${e.dataset.locked}`),
        inbox: [...document.querySelectorAll('[data-testid="private-message"]')].map((e) => `${e.dataset.sender} pending=${e.dataset.pending}: ${e.querySelector('.msg-body')?.textContent}`),
        composer: document.querySelector('[data-testid="composer-status"]')?.textContent,
      }));
      console.error(`what the page showed: ${JSON.stringify(state, null, 2)}`);
      await page.screenshot({ path: SHOT });
      console.error(`screenshot of the failure: ${SHOT}`);
    } catch {
      /* the page itself is gone */
    }
  }
} finally {
  await browser.close().catch(() => {});
}
process.exit(ok ? 0 : 1);

/** Sends the manager a goal in the base task, as the operator would from the composer. */
async function sendGoal(baseId, text) {
  await page.getByTestId('composer-task').selectOption(baseId);
  await page.locator(`[data-testid="receiver-option"][data-agent-id="${MANAGER}"] input`).check();
  await page.getByTestId('composer-need-reply').uncheck();
  await page.getByTestId('composer-waiting').uncheck();
  await page.getByTestId('composer-content').fill(text);
  await page.getByTestId('composer-send').click();
  await waitSent();
}

async function waitSent() {
  const status = page.getByTestId('composer-status');
  await page.locator('[data-testid="composer-status"]:is([data-state="sent"], [data-state="error"])').waitFor();
  if ((await status.getAttribute('data-state')) === 'error') throw new Failure(`the console says: ${await status.textContent()}`);
  // Ready for the next message.
  await page.locator('[data-testid="composer-status"][data-state="sent"]').waitFor();
}
