// The team: the agent list on the left (what each does now, failures, step locks) and the
// agents view, one card per agent with its running, queued and finished steps; a step opens to
// its input, instruction, result, LLM calls and a cancel button. While a step runs, the answer
// the model is writing shows under it (`writing`, filled by app.js from the live feed).

import { h, keyed, lazyDetails, jsonBlock, fmt, lockIcon, InView } from './dom.js';
import { agentFailures, failureReason } from './failures.js';
import { callsSection } from './calls.js';
import { mediaSection } from './media.js';
import { forkSection } from './fork.js';
import { $, app, store, ui, mark, taskName, stageName, truncate, NO_RELATIVE, matches, agentChip, stateLabel } from './ctx.js';
import { t, tn } from './i18n.js';
import { confirmCancel } from './control.js';
import { waitingOn } from './plan.js';
import { nodes, nodeTag } from './nodes.js';

/** Answers being written (streamed), by step id: shown under the running step until it ends. */
export const writing = new Map();

/** A large team's agent list and cards render only what is on screen (see `InView`); a card
 * the person asked to see, or the card of a step they asked to see, renders wherever it is. */
const listInView = new InView($('agent-list'), () => mark('team'), {
  eager: 16,
  placeholder: () => h('li', { class: 'agent-item placeholder' }),
});
const cardsInView = new InView($('view-agents'), () => mark('agents'), {
  eager: 4,
  placeholder: () => h('article', { class: 'agent-card placeholder' }),
  always: (id) => reveal?.agent === id || (!!ui.focusStep && store.get('step', ui.focusStep)?.agent_id === id),
});

/** Each step's searchable text, lower-cased once (none of it changes after the step is made),
 * so a filter over thousands of steps costs a substring search per step and frame. */
const searchText = new WeakMap();

/** A step the filter keeps: by its intention, executor, text or id. */
function stepMatches(s) {
  if (!ui.filter) return true;
  let text = searchText.get(s);
  if (text === undefined) {
    text = [s.step_intention, s.executor, s.text_content, s.step_id].join('\n').toLowerCase();
    searchText.set(s, text);
  }
  return text.includes(ui.filter);
}

/** An agent the filter keeps: by its name, role or id, or by one of its steps. */
function agentMatches(a) {
  return matches(a.name, a.role, a.agent_id) || (ui.filter && store.stepsOf(a.agent_id).some((r) => stepMatches(r.state)));
}

/** The model agents first, the people (human agents) after them. */
function agentsInOrder() {
  const recs = store.all('agent');
  return [...recs.filter((r) => !r.state.human_config), ...recs.filter((r) => r.state.human_config)];
}

function classifySteps(agent) {
  const todo = new Set((agent.agent_step && agent.agent_step.todo) || []);
  const running = [];
  const queued = [];
  const done = [];
  for (const r of store.stepsOf(agent.agent_id)) {
    const st = r.state.execution_state;
    if (ui.stepsThisTask && r.state.task_id !== ui.taskId) continue;
    if (ui.filter && !matches(agent.name, agent.role, agent.agent_id) && !stepMatches(r.state)) continue;
    if (st === 'running' || st.startsWith('waiting_for_')) running.push(r);
    else if (st === 'finished' || st === 'failed' || st === 'cancelled') done.push(r);
    else queued.push(r);
  }
  // Queue order, looked up once per step (not searched per comparison).
  const place = new Map([...todo].map((id, i) => [id, i]));
  const at = (r) => place.get(r.state.step_id) ?? 1e9;
  queued.sort((a, b) => at(a) - at(b) || a.seq - b.seq);
  return { running, queued, done };
}

function lockOf(agent) {
  return Array.isArray(agent.step_lock) ? agent.step_lock : [];
}

/**
 * Whom each wait on the agent's lock waits for: the receiver its send_message step gave that
 * wait id to (`waiting[i]` answers `receiver[i]`), or SyncState for an ask_info question.
 */
function waitsFor(agent) {
  const lock = lockOf(agent);
  if (!lock.length) return [];
  const who = new Map();
  for (const r of store.stepsOf(agent.agent_id)) {
    const res = r.state.execute_result;
    const m = res && res.send_message;
    if (m && Array.isArray(m.waiting)) m.waiting.forEach((w, i) => who.set(w, m.receiver[i]));
    const ask = res && res.ask_instruction;
    if (ask && ask.waiting_id) who.set(ask.waiting_id, '[SyncState]');
  }
  return lock.map((id) => ({ id, from: who.get(id) || null }));
}

export function renderTeamList() {
  const list = $('agent-list');
  const all = agentsInOrder();
  const agents = all.filter((r) => agentMatches(r.state));
  $('team-count').textContent = agents.length === all.length ? (all.length ? fmt.int(all.length) : '') : t('agents.count_of', { shown: fmt.int(agents.length), total: fmt.int(all.length) });
  keyed(
    list,
    agents,
    (r) => r.state.agent_id,
    (r) => `${r.version}|${store.stepsVersion(r.state.agent_id)}`,
    (r) => {
      const a = r.state;
      const lock = lockOf(a);
      const fails = agentFailures(store, a.agent_id);
      const steps = store.stepsOf(a.agent_id);
      const running = steps.filter((s) => s.state.execution_state === 'running');
      const queued = ((a.agent_step && a.agent_step.todo) || []).length;
      const done = steps.filter((s) => ['finished', 'failed', 'cancelled'].includes(s.state.execution_state)).length;
      let doing;
      if (lock.length) doing = tn('agents.waits_for_replies', lock.length);
      // A graph plan's steps run side by side: the first, and how many more.
      else if (running.length) doing = running.length > 1 ? t('agents.running_more', { intention: running[0].state.step_intention, more: fmt.int(running.length - 1) }) : `▸ ${running[0].state.step_intention}`;
      else if (queued) doing = t('agents.queued_count', { count: fmt.int(queued) });
      else if (a.agent_id === app.sess.human_agent_id) doing = done ? t('agents.you_sent', { count: fmt.int(done) }) : t('agents.you');
      else doing = done ? tn('agents.steps_done', done) : t('agents.no_steps_yet');
      return h(
        'li',
        {
          class: `agent-item ws-${a.working_state}`,
          testid: 'agent-item',
          'data-agent-id': a.agent_id,
          'data-working-state': a.working_state,
          'data-locked': lock.length ? 'true' : 'false',
          'data-failed': fails.lastFailed ? 'true' : 'false',
          title: a.profile || '',
          tabindex: '0',
          role: 'button',
          onclick: () => showAgent(a.agent_id),
          onkeydown: (e) => {
            if (e.key === 'Enter') showAgent(a.agent_id);
          },
        },
        h('span', { class: `avatar ws-${a.working_state}${a.human_config ? ' avatar-human' : ''}`, 'aria-hidden': 'true' }, (a.name || a.agent_id).slice(0, 1).toUpperCase()),
        h(
          'div',
          { class: 'agent-item-main' },
          h(
            'div',
            { class: 'agent-item-top' },
            h('span', { class: 'agent-name' }, a.name || a.agent_id),
            h('span', { class: 'agent-role muted small', title: a.human_config ? t('agents.a_person') : '' }, a.role),
          ),
          h('div', { class: 'agent-item-doing' }, doing),
        ),
        h(
          'div',
          { class: 'agent-item-side' },
          h('span', { class: `ws-label ws-${a.working_state}`, testid: 'agent-working-state' }, stateLabel(a.working_state)),
          fails.count
            ? h('span', { class: `fail-mark${fails.lastFailed ? ' fail-last' : ''}`, testid: 'agent-failures', title: fails.lastFailed ? t('agents.last_step_failed', { reason: failureReason(fails.last) }) : tn('agents.failed_steps', fails.count) }, `✕ ${fmt.int(fails.count)}`)
            : null,
          lock.length ? h('span', { class: 'lock', testid: 'agent-lock', title: t('agents.step_lock_ids', { ids: lock.join(', ') }) }, lockIcon(), ` ${fmt.int(lock.length)}`) : null,
          // Paused by an operator (the whole agent, or its work in some tasks).
          a.paused || (a.paused_tasks || []).length
            ? h('span', { class: 'flag flag-wait', testid: 'agent-paused', title: a.paused ? t('agents.paused_agent') : tn('agents.paused_in_tasks', a.paused_tasks.length) }, stateLabel('paused'))
            : null,
        ),
      );
    },
    listInView,
  );
}

/** Forgets what the agent list and cards followed (a person signed out). */
export function forgetAgentViews() {
  listInView.reset();
  cardsInView.reset();
  reveal = null;
}

/** A view that points at something the filter hides clears the filter first. */
function clearFilter() {
  if (!ui.filter) return;
  ui.filter = '';
  $('filter').value = '';
  mark('tasks', 'team', 'agents');
}

/** Shows an agent's card in the agents view, briefly highlighted. */
export function showAgent(id) {
  clearFilter();
  reveal = { agent: id };
  mark('agents');
  app.setTab('agents');
}

/** What a click asked to be shown (an agent's card, or a step opened in it), shown once the
 * agents view has drawn it: the view may be drawn a frame or more after the click. */
let reveal = null;

function flash(el) {
  el.classList.remove('flash');
  void el.offsetWidth;
  el.classList.add('flash');
}

function showRevealed(box) {
  if (!reveal) return;
  if (reveal.agent) {
    const card = box.querySelector(`[data-agent-id="${CSS.escape(reveal.agent)}"]`);
    if (!card) return;
    card.scrollIntoView({ block: 'start' });
    flash(card);
  } else {
    const row = box.querySelector(`li[data-step-id="${CSS.escape(reveal.step)}"]`);
    if (!row) return;
    const fold = row.querySelector('details');
    if (fold && !fold.open) fold.open = true;
    row.scrollIntoView({ block: 'center' });
    flash(row);
  }
  reveal = null;
}

export function renderAgentCards() {
  const box = $('agent-cards');
  const agents = agentsInOrder().filter((r) => agentMatches(r.state));
  keyed(
    box,
    agents,
    (r) => r.state.agent_id,
    (r) =>
      `${r.version}|${nodes.sig}|${store.stepsVersion(r.state.agent_id)}|${ui.stepsThisTask ? ui.taskId : '*'}|${ui.showAllSteps.has(r.state.agent_id)}|${ui.showAllQueued.has(r.state.agent_id)}|${ui.focusStep}|${ui.filter}`,
    (r) => agentCard(r.state),
    cardsInView,
  );
  showRevealed(box);
  if (!agents.length) box.replaceChildren(h('div', { class: 'empty' }, ui.filter ? t('agents.none_match') : t('agents.none_yet_agents')));
}

/** Finished and queued steps a card lists by default. */
const FINISHED_SHOWN = 6;
const QUEUED_SHOWN = 8;
/** The most steps of one kind a card lists when asked for all of them: an agent that ran for
 * months keeps thousands, and a card of thousands of rows would stall the page (the rest are
 * reached with the filter, the timeline or REST). */
const LONGEST = 200;

/** The first `n` of `steps`, plus the step asked for if it is further down. */
function firstOf(steps, n) {
  const shown = steps.slice(0, n);
  if (ui.focusStep && steps.length > n && !shown.some((r) => r.state.step_id === ui.focusStep)) {
    const focus = steps.find((r) => r.state.step_id === ui.focusStep);
    if (focus) shown.push(focus);
  }
  return shown;
}

/** "show all N" / "show fewer" for one of a card's lists. */
function moreButton(set, id, total, default_n) {
  if (total <= default_n) return null;
  const all = set.has(id);
  return h(
    'button',
    {
      type: 'button',
      class: 'btn btn-link small',
      onclick: () => {
        if (all) set.delete(id);
        else set.add(id);
        mark('agents');
      },
    },
    all ? t('agents.show_fewer') : total > LONGEST ? t('agents.show_newest', { max: fmt.int(LONGEST), total: fmt.int(total) }) : t('agents.show_all', { total: fmt.int(total) }),
  );
}

function agentCard(a) {
  const lock = lockOf(a);
  const { running, queued, done } = classifySteps(a);
  const recent = [...done].reverse();
  const shown = firstOf(recent, ui.showAllSteps.has(a.agent_id) ? LONGEST : FINISHED_SHOWN);
  const queuedShown = firstOf(queued, ui.showAllQueued.has(a.agent_id) ? LONGEST : QUEUED_SHOWN);
  const tokens = fmt.tokens(a.token_usage);
  return h(
    'article',
    { class: `agent-card ws-border-${a.working_state}`, testid: 'agent-card', 'data-agent-id': a.agent_id, 'data-working-state': a.working_state, 'data-locked': lock.length ? 'true' : 'false' },
    h(
      'header',
      { class: 'agent-card-head' },
      h('span', { class: `avatar ws-${a.working_state}${a.human_config ? ' avatar-human' : ''}`, 'aria-hidden': 'true' }, (a.name || a.agent_id).slice(0, 1).toUpperCase()),
      h(
        'div',
        { class: 'agent-card-title' },
        h('div', null, h('b', null, a.name || a.agent_id), ' ', h('span', { class: 'muted mono small' }, a.agent_id)),
        h('div', { class: 'muted small' }, a.role !== a.agent_id ? a.role : null, a.human_config ? h('span', { class: 'tag tag-human' }, t('agents.human')) : null, a.template ? h('span', { class: 'tag mono', testid: 'agent-card-template', title: t('agents.hired_title') }, t('agents.hired', { template: a.template })) : null, a.agent_id === app.sess.human_agent_id ? h('span', { class: 'tag tag-human' }, t('agents.you')) : null, nodeTag(a.agent_id)),
      ),
      h('span', { class: 'spacer' }),
      h('span', { class: `ws-label ws-${a.working_state}`, testid: 'agent-card-state' }, stateLabel(a.working_state)),
      lock.length ? h('span', { class: 'lock', testid: 'agent-card-lock', title: lock.join('\n') }, lockIcon(), ` ${tn('agents.step_lock_waits', lock.length)}`) : null,
    ),
    a.profile ? h('p', { class: 'agent-profile muted' }, a.profile) : null,
    lock.length
      ? h(
          'div',
          { class: 'agent-waits small', testid: 'agent-waits-for' },
          h('span', { class: 'muted' }, `${t('agents.waits_for')} `),
          waitsFor(a).map((w) => (w.from ? agentChip(w.from) : h('span', { class: 'mono muted', title: t('agents.wait_id') }, fmt.short(w.id)))),
        )
      : null,
    memorySection(a),
    h(
      'div',
      { class: 'agent-card-meta small muted' },
      tokens ? h('span', null, t('agents.tokens', { tokens })) : h('span', null, t('agents.no_tokens')),
      (a.skills || []).length ? h('span', { title: (a.skills || []).join(', ') }, t('agents.skills_count', { count: fmt.int(a.skills.length) })) : null,
      (a.tools || []).length ? h('span', { class: 'mono' }, t('agents.tools_list', { tools: a.tools.join(', ') })) : null,
      lock.length ? h('span', { class: 'mono', title: t('agents.wait_ids') }, lock.map(fmt.short).join(' ')) : null,
    ),
    h(
      'div',
      { class: 'step-groups-now' },
      stepGroup(t('agents.running'), 'steps-running', running, t('agents.nothing')),
      stepGroup(t('agents.queued'), 'steps-queued', queuedShown, t('agents.empty'), queued.length, moreButton(ui.showAllQueued, a.agent_id, queued.length, QUEUED_SHOWN)),
    ),
    stepGroup(t('agents.finished'), 'steps-finished', shown, t('agents.none_yet'), done.length, moreButton(ui.showAllSteps, a.agent_id, done.length, FINISHED_SHOWN)),
  );
}

/** The agent's persistent memory (its notes across tasks) and the work it holds now. */
function memorySection(a) {
  const notes = Object.entries(a.persistent_memory || {});
  const work = Object.entries(a.working_memory || {}).flatMap(([task, stages]) =>
    Object.keys(stages || {}).map((stage) => `${taskName(task)} · ${stage === NO_RELATIVE ? t('agents.no_stage') : stageName(stage)}`),
  );
  if (!notes.length && !work.length) return null;
  return lazyDetails(
    `memory:${a.agent_id}`,
    h('span', { testid: 'agent-memory' }, tn('agents.memory_summary', notes.length, { hand: fmt.int(work.length) })),
    () =>
      h(
        'div',
        { class: 'memory-body small' },
        work.length ? h('div', null, h('div', { class: 'label' }, t('agents.working_on')), h('ul', { class: 'memory-list' }, work.map((w) => h('li', null, w)))) : null,
        notes.length
          ? h('div', null, h('div', { class: 'label' }, t('agents.persistent_memory')), h('ul', { class: 'memory-list' }, notes.map(([k, text]) => h('li', { testid: 'memory-note' }, h('span', { class: 'mono muted' }, `${k} `), h('span', { class: 'pre' }, text)))))
          : null,
      ),
    { class: 'fold memory-fold' },
  );
}

function stepGroup(title, testid, steps, empty, total, extra) {
  return h(
    'section',
    { class: `step-group${steps.length ? '' : ' step-group-empty'}`, testid, 'data-count': String(total ?? steps.length) },
    h('h4', null, title, ' ', h('span', { class: 'count' }, fmt.int(total ?? steps.length)), steps.length ? extra : h('span', { class: 'step-group-none' }, empty)),
    steps.length ? h('ul', { class: 'steps' }, steps.map((r) => stepRow(r.state))) : null,
  );
}

/** The repairs the runtime made to a step's answer (`execute_result.repairs`), one flag. */
function repairsFlag(res) {
  const fired = res && Array.isArray(res.repairs) ? res.repairs : [];
  if (!fired.length) return null;
  const title = fired.map((f) => `${f.rule}: ${f.what}`).join('\n');
  const label = fired.length === 1 ? t('agents.repaired', { rule: fired[0].rule }) : t('agents.repairs_count', { count: fmt.int(fired.length) });
  return h('span', { class: 'flag flag-repair mono', testid: 'step-repairs', title }, label);
}

/** What a pending step of a graph plan waits for: the steps of its plan named, or its plan. */
function waitsForSteps(s) {
  const ids = waitingOn(store, s);
  return ids.length ? t('agents.waits_for_steps', { steps: ids.join(', ') }) : t('agents.waits_for_plan');
}

function stepRow(s) {
  const tokens = fmt.tokens(s.token_usage);
  const res = s.execute_result;
  const dropped = res && res.dropped === true;
  // Why it failed, or why it was set aside (cancelled by a person, or its work ended).
  const error = ['failed', 'cancelled'].includes(s.execution_state) && res && typeof res.error === 'string' ? res.error : null;
  const human = store.get('agent', s.agent_id)?.human_config;
  const summary = h(
    'span',
    { class: 'step-line' },
    h('span', { class: `dot st-${s.execution_state}`, title: stateLabel(s.execution_state) }),
    h(
      'span',
      { class: 'step-intention' },
      s.step_intention || t('agents.no_intention'),
      // A person's steps all say "Message sent by a person": show what was sent.
      human && s.text_content ? h('span', { class: 'muted' }, ` · “${truncate(s.text_content, 80)}”`) : null,
    ),
    h('span', { class: `exec exec-${s.type} mono`, title: t('agents.type_title', { type: s.type }) }, s.type === 'tool' ? t('agents.exec_tool', { executor: s.executor }) : t('agents.exec_skill', { executor: s.executor })),
    s.plan_id ? h('span', { class: 'tag mono', testid: 'step-plan-id', title: t('agents.plan_id_title') }, s.plan_id) : null,
    s.execution_state === 'pending' ? h('span', { class: 'flag flag-wait mono', testid: 'step-waits-for', title: t('agents.waits_for_title') }, waitsForSteps(s)) : null,
    !ui.stepsThisTask && s.task_id !== ui.taskId ? h('span', { class: 'tag', title: s.task_id }, taskName(s.task_id)) : null,
    dropped ? h('span', { class: 'flag' }, t('agents.dropped')) : null,
    res && (res.tool_retries || []).length
      ? h('span', { class: 'flag', testid: 'step-retried', title: res.tool_retries.map((r, i) => t('agents.retry_try', { try: fmt.int(i + 1), error: r.error, ms: fmt.int(r.waited_ms) })).join('\n') }, t('agents.retried', { count: fmt.int(res.tool_retries.length) }))
      : null,
    res && res.cached ? h('span', { class: 'flag', testid: 'step-cached', title: t('agents.cached_title', { s: fmt.int(Math.round((res.cached.age_ms || 0) / 1000)) }) }, t('agents.cached')) : null,
    repairsFlag(res),
    s.model_wait
      ? h('span', { class: 'flag flag-wait', testid: 'step-model-wait', title: s.model_wait.reason }, t('agents.model_wait', { at: fmt.clock(s.model_wait.since) }))
      : null,
    s.started_at ? h('span', { class: 'step-took muted', testid: 'step-took', title: t('agents.started', { at: fmt.clock(s.started_at) }) }, fmt.took(s, store.now())) : null,
    tokens ? h('span', { class: 'step-tokens muted' }, tokens) : null,
  );
  const details = lazyDetails(
    `step:${s.step_id}`,
    summary,
    () =>
      h(
        'div',
        { class: 'step-body' },
        error ? h('p', { class: 'step-error' }, error) : null,
        s.model_wait ? h('p', { class: 'step-error' }, t('agents.model_wait_reason', { at: fmt.clock(s.model_wait.since), reason: s.model_wait.reason })) : null,
        s.text_content ? h('div', null, h('div', { class: 'label' }, t('agents.input')), h('p', { class: 'pre' }, s.text_content)) : null,
        s.instruction_content ? h('div', null, h('div', { class: 'label' }, t('agents.instruction')), jsonBlock(s.instruction_content)) : null,
        h('div', null, h('div', { class: 'label' }, t('agents.result')), res === null || res === undefined ? h('span', { class: 'muted' }, t('agents.none_yet')) : jsonBlock(res)),
        res ? mediaSection(res, (id) => app.client.blob(id)) : null,
        !human ? callsSection(s.step_id, (id) => app.client.stepCalls(id)) : null,
        !human ? forkSection(s) : null,
        h('div', { class: 'muted small mono' }, t('agents.step_meta', { id: s.step_id, stage: s.stage_id === NO_RELATIVE ? t('agents.no_stage') : stageName(s.stage_id) }), s.ready_at ? ` · ${t('agents.ready', { at: fmt.clock(s.ready_at) })}` : '', s.started_at ? ` · ${t('agents.started', { at: fmt.clock(s.started_at) })}${s.ended_at ? ` · ${t('agents.ran', { took: fmt.took(s) })}` : ''}` : ''),
        human || ['finished', 'failed', 'cancelled'].includes(s.execution_state)
          ? null
          : h('button', { type: 'button', class: 'btn btn-ghost btn-sm btn-danger', testid: 'step-cancel', onclick: () => confirmCancel(t('agents.cancel_what', { intention: s.step_intention }), (why) => app.client.cancelStep(s.step_id, why)) }, t('agents.cancel_step')),
      ),
    { class: 'fold step-fold' },
  );
  const written = s.execution_state === 'running' ? writing.get(s.step_id) : undefined;
  return h(
    'li',
    { class: `step st-${s.execution_state}`, testid: 'step-item', 'data-step-id': s.step_id, 'data-state': s.execution_state, 'data-executor': s.executor },
    details,
    written !== undefined ? h('p', { class: 'pre step-writing', testid: 'step-writing', 'data-writing': s.step_id, title: t('agents.writing_title') }, written) : null,
  );
}

/** Shows a step in its agent's card, opened. */
export function showStep(s) {
  clearFilter();
  ui.stepsThisTask = false;
  $('steps-this-task').checked = false;
  ui.focusStep = s.step_id;
  reveal = { step: s.step_id };
  mark('agents');
  app.setTab('agents');
}
