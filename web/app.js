// Cohort operator console: sign in as a human agent, watch the team live, chat and answer.
//
// Data flow: the websocket sends a snapshot of the four states, then one event per change.
// Events go into the Store (by version, older ones ignored); each marks the parts of the page
// it affects as dirty, and one animation frame re-renders only those parts. Lists are keyed and
// each item carries a signature (the versions it was built from), so an unchanged task, stage,
// agent card or step keeps its DOM element. The human's private chats and notices come from
// GET /api/human/{id}/conversations, fetched again whenever the human's own agent state
// changes (a message reached them, they sent one) and after each send.

import { h, keyed, lazyDetails, jsonBlock, atBottom, fmt, lockIcon } from './dom.js';
import { Store } from './store.js';
import { session, bind, api, Live, AuthError } from './api.js';
import { messageBody, linkIds } from './text.js';
import { renderDecisions, fieldInput } from './decisions.js';
import { renderFailures, agentFailures, failureReason } from './failures.js';
import { renderTimeline } from './timeline.js';
import { callsSection } from './calls.js';

const $ = (id) => document.getElementById(id);
const BASE_TASK = 'MAS base task';
const NO_RELATIVE = 'no_relative';

const store = new Store();
let sess = null;
let client = null;
let live = null;

const ui = {
  taskId: null, // the task shown in the centre
  taskPicked: false, // the user chose it (otherwise the newest task is followed)
  tab: 'stages',
  conv: null, // the private conversation shown (the other agent's id)
  convPicked: false,
  scope: 'group', // receivers offered: the task group or every agent
  receivers: new Set(),
  replyTo: null, // {sender_id, task_id, stage_relative, content} while answering
  stepsThisTask: false,
  showAllSteps: new Set(),
  pool: { conversation_privates: {}, global_messages: [] },
  poolSig: '',
  noticesSeen: 0,
  composerTask: null,
  composerTaskPicked: false,
  receiversPicked: false, // the person chose receivers (else the task's manager is offered)
  autoReceiver: null,
};

// ---------------------------------------------------------------- rendering schedule

const dirty = new Set();
let frame = 0;
function mark(...parts) {
  for (const p of parts) dirty.add(p);
  if (!frame) frame = requestAnimationFrame(render);
}

function render() {
  frame = 0;
  const parts = new Set(dirty);
  dirty.clear();
  if (!sess) return;
  if (parts.has('tasks')) ensureSelectedTask();
  const run = (name, fn) => {
    if (!parts.has(name)) return;
    try {
      fn();
    } catch (e) {
      console.error(`rendering ${name} failed`, e);
    }
  };
  run('tasks', renderTaskList);
  run('detail', renderTaskHead);
  run('detail', renderStages);
  run('chat', renderGroupChat);
  run('team', renderTeamList);
  run('agents', renderAgentCards);
  run('inbox', renderInbox);
  run('composer', renderComposer);
  run('summary', renderSummaryLine);
  run('decisions', renderDecisionList);
  run('failures', () => renderFailures(viewCtx(), $('failures'), $('failure-list'), $('failure-count')));
  run('timeline', () => {
    if (ui.tab === 'timeline') renderTimeline({ ...viewCtx(), task: store.get('task', ui.taskId), now: store.now() }, $('view-timeline'));
  });
}

// Running steps grow on the timeline while it is shown.
setInterval(() => {
  if (sess && ui.tab === 'timeline' && !document.hidden) mark('timeline');
}, 1000);

/** What the view modules need from the app. */
function viewCtx() {
  return { store, agentName, taskName, showStep };
}

/** Shows a step in its agent's card, opened. */
function showStep(s) {
  ui.stepsThisTask = false;
  $('steps-this-task').checked = false;
  if (!ui.showAllSteps.has(s.agent_id)) ui.showAllSteps.add(s.agent_id);
  mark('agents');
  setTab('agents');
  requestAnimationFrame(() =>
    requestAnimationFrame(() => {
      const row = document.querySelector(`#agent-cards li[data-step-id="${CSS.escape(s.step_id)}"]`);
      if (!row) return;
      const fold = row.querySelector('details');
      if (fold && !fold.open) fold.querySelector('summary').click();
      row.scrollIntoView({ block: 'center' });
      row.classList.remove('flash');
      void row.offsetWidth;
      row.classList.add('flash');
    }),
  );
}

function markAll() {
  mark('tasks', 'detail', 'chat', 'team', 'agents', 'inbox', 'composer', 'summary', 'decisions', 'failures', 'timeline');
}

// ---------------------------------------------------------------- names and lookups

function agentName(id) {
  if (id === '[TaskState]') return 'Task system';
  const a = store.get('agent', id);
  return (a && a.name) || id;
}

function agentChip(id, extra) {
  const a = store.get('agent', id);
  const human = a && a.human_config;
  return h(
    'span',
    { class: `chip chip-agent${id === (sess && sess.human_agent_id) ? ' chip-me' : ''}${human ? ' chip-human' : ''}`, title: a ? `${id} · ${a.role}` : id, 'data-agent-id': id },
    agentName(id),
    extra,
  );
}

function taskName(id) {
  const t = store.get('task', id);
  return t ? t.task_name : fmt.short(id);
}

function isBase(t) {
  return t && t.task_name === BASE_TASK;
}

function badge(state, testid) {
  return h('span', { class: `badge st-${state || 'none'}`, testid, 'data-state': state || '' }, state || '—');
}

function tasksInOrder() {
  const recs = store.all('task');
  const base = recs.filter((r) => isBase(r.state));
  const rest = recs.filter((r) => !isBase(r.state)).reverse();
  return [...base, ...rest];
}

function ensureSelectedTask() {
  const tasks = tasksInOrder();
  if (ui.taskPicked && store.get('task', ui.taskId)) return;
  // Follow the newest real task (running first), else the base task.
  const real = tasks.filter((r) => !isBase(r.state));
  const pick = real.find((r) => r.state.execution_state === 'running') || real[0] || tasks[0];
  const id = pick ? pick.state.task_id : null;
  if (id !== ui.taskId) {
    ui.taskId = id;
    ui.taskPicked = false;
    mark('detail', 'chat', 'composer', 'agents', 'timeline');
  }
}

function selectTask(id) {
  ui.taskId = id;
  ui.taskPicked = true;
  if (!ui.replyTo && !$('c-content').value.trim()) {
    ui.composerTask = id;
    ui.composerTaskPicked = false;
  }
  mark('tasks', 'detail', 'chat', 'agents', 'composer', 'timeline');
}

function stageLabel(t) {
  const stages = store.stagesOf(t);
  if (!stages.length) return isBase(t) ? 'never finishes · send the manager a goal' : 'no stages yet';
  const i = stages.findIndex((r) => r.state.execution_state === 'running');
  if (i >= 0) return `Stage ${i + 1}/${stages.length} · ${stages[i].state.stage_intention}`;
  const waiting = stages.findIndex((r) => r.state.execution_state === 'init');
  if (waiting >= 0) return `Stage ${waiting + 1}/${stages.length} next · ${stages[waiting].state.stage_intention}`;
  const done = stages.filter((r) => r.state.execution_state === 'finished').length;
  return `${done}/${stages.length} stages finished`;
}

// ---------------------------------------------------------------- tasks

function renderTaskList() {
  const list = $('task-list');
  const tasks = tasksInOrder();
  $('task-count').textContent = tasks.length ? String(tasks.length) : '';
  keyed(
    list,
    tasks,
    (r) => r.state.task_id,
    (r) => `${r.version}|${store.stagesOf(r.state).map((s) => s.version).join(',')}|${r.state.task_id === ui.taskId}`,
    (r) => {
      const t = r.state;
      const stages = store.stagesOf(t);
      return h(
        'li',
        {
          class: `task-item${t.task_id === ui.taskId ? ' selected' : ''}${isBase(t) ? ' base' : ''}`,
          testid: 'task-item',
          'data-task-id': t.task_id,
          'data-task-name': t.task_name,
          'data-state': t.execution_state,
          'data-base': isBase(t) ? 'true' : 'false',
          'data-stage-count': String(stages.length),
          tabindex: '0',
          role: 'button',
          'aria-pressed': t.task_id === ui.taskId ? 'true' : 'false',
          onclick: () => selectTask(t.task_id),
          onkeydown: (e) => {
            if (e.key === 'Enter' || e.key === ' ') {
              e.preventDefault();
              selectTask(t.task_id);
            }
          },
        },
        h('div', { class: 'task-item-top' }, h('span', { class: 'task-name' }, t.task_name), isBase(t) ? h('span', { class: 'tag' }, 'base') : null, badge(t.execution_state, 'task-state')),
        h('div', { class: 'task-item-stage', testid: 'task-running-stage' }, stageLabel(t)),
        stages.length
          ? h(
              'div',
              { class: 'stage-dots', 'aria-hidden': 'true' },
              stages.map((s) => h('span', { class: `dot st-${s.state.execution_state}`, title: `${s.state.stage_intention} — ${s.state.execution_state}` })),
            )
          : null,
      );
    },
  );
  if (!tasks.length) list.replaceChildren(h('li', { class: 'empty' }, 'No tasks yet.'));
}

function renderTaskHead() {
  const head = $('task-head');
  const t = store.get('task', ui.taskId);
  if (!t) {
    head.replaceChildren(h('div', { class: 'empty' }, 'Waiting for the team…'));
    head.removeAttribute('data-task-id');
    return;
  }
  head.dataset.taskId = t.task_id;
  head.dataset.state = t.execution_state;
  const tokens = fmt.tokens(t.token_usage);
  const over = ['finished', 'failed', 'cancelled'].includes(t.execution_state);
  const controls = isBase(t) || over
    ? null
    : h(
        'span',
        { class: 'task-controls' },
        h('button', { type: 'button', class: 'btn btn-ghost btn-sm', testid: 'task-pause', onclick: () => control(client.pauseTask(t.task_id, !t.paused)) }, t.paused ? 'Resume' : 'Pause'),
        h('button', { type: 'button', class: 'btn btn-ghost btn-sm btn-danger', testid: 'task-cancel', onclick: () => confirmCancel(`task “${t.task_name}”`, (why) => client.cancelTask(t.task_id, why)) }, 'Cancel task'),
      );
  head.replaceChildren(
    h('div', { class: 'task-head-top' }, h('h2', { class: 'task-title', testid: 'task-title' }, t.task_name), isBase(t) ? h('span', { class: 'tag' }, 'base task') : null, badge(t.execution_state, 'task-detail-state'), t.paused ? h('span', { class: 'flag flag-wait', testid: 'task-paused' }, 'paused') : null, controls),
    h('p', { class: 'task-intention' }, t.task_intention || ''),
    h(
      'div',
      { class: 'meta' },
      h('span', { class: 'meta-item' }, h('span', { class: 'muted' }, 'manager '), agentChip(t.task_manager)),
      h('span', { class: 'meta-item' }, h('span', { class: 'muted' }, 'group '), (t.task_group || []).map((id) => agentChip(id))),
      tokens ? h('span', { class: 'meta-item muted' }, `tokens ${tokens}`) : null,
      h('span', { class: 'meta-item muted mono', title: 'task id' }, fmt.short(t.task_id)),
    ),
  );
}

function renderStages() {
  const view = $('view-stages');
  const t = store.get('task', ui.taskId);
  if (!t) {
    view.replaceChildren();
    return;
  }
  const parts = [];
  if (t.task_summary) {
    parts.push(
      h(
        'section',
        { class: `summary-card st-border-${t.execution_state}`, testid: 'task-summary' },
        h('h3', null, t.execution_state === 'failed' ? 'Task failed' : t.execution_state === 'cancelled' ? 'Task cancelled' : 'Task summary'),
        h('p', { class: 'pre' }, t.task_summary),
      ),
    );
  }
  const stages = store.stagesOf(t);
  const list = h('ol', { class: 'stage-list', testid: 'stage-list' });
  stages.forEach((r, i) => list.appendChild(stageCard(r.state, i)));
  if (!stages.length) {
    list.appendChild(
      h(
        'li',
        { class: 'empty' },
        isBase(t)
          ? 'The base task never finishes and has no stages: it is where you give the manager a goal, which becomes a task of its own.'
          : 'No stages yet: the manager adds them.',
      ),
    );
  }
  parts.push(list);
  const info = t.shared_info_pool || [];
  if (info.length) {
    parts.push(
      lazyDetails(`info:${t.task_id}`, `Shared info (${info.length})`, () =>
        h(
          'ul',
          { class: 'info-list' },
          info.map((e) => h('li', null, h('span', { class: 'muted' }, `${fmt.time(e.timestamp)} `), agentChip(e.agent_id), ' ', e.content)),
        ),
      { class: 'fold fold-info' }),
    );
  }
  view.replaceChildren(...parts);
}

function stageCard(s, i) {
  const alloc = s.agent_allocation || {};
  const states = s.every_agent_state || {};
  const sums = s.completion_summary || {};
  const agents = [...new Set([...Object.keys(alloc), ...Object.keys(states)])];
  return h(
    'li',
    { class: `stage-card st-border-${s.execution_state}`, testid: 'stage-item', 'data-stage-id': s.stage_id, 'data-state': s.execution_state },
    h('div', { class: 'stage-top' }, h('span', { class: 'stage-no' }, `Stage ${i + 1}`), h('span', { class: 'stage-intention' }, s.stage_intention), badge(s.execution_state, 'stage-state')),
    h(
      'table',
      { class: 'alloc' },
      h('tbody', null,
        agents.map((id) =>
          h(
            'tr',
            { 'data-agent-id': id },
            h('td', { class: 'alloc-agent' }, agentChip(id), badge(states[id] || 'idle', 'stage-agent-state')),
            h(
              'td',
              { class: 'alloc-goal' },
              h('div', null, alloc[id] || ''),
              sums[id] ? h('div', { class: 'alloc-summary', testid: 'stage-summary' }, h('span', { class: 'label' }, 'Summary '), sums[id]) : null,
            ),
          ),
        ),
      ),
    ),
  );
}

// ---------------------------------------------------------------- group chat

function renderGroupChat() {
  const view = $('view-chat');
  const t = store.get('task', ui.taskId);
  const pool = (t && t.shared_conversation_pool) || [];
  $('chat-count').textContent = pool.length ? String(pool.length) : '';
  const stick = atBottom(view);
  const key = t ? t.task_id : '';
  if (view.dataset.taskId !== key) {
    view.replaceChildren();
    view._keyed = null;
    view.dataset.taskId = key;
  }
  // Keyed by the entry's place in the whole conversation: when the oldest entries leave
  // (the pool is capped), the others keep their keys.
  const omitted = (t && t.shared_conversation_omitted) || 0;
  const entries = pool.map((e, i) => ({ e, i: omitted + i }));
  keyed(view, entries, (x) => `${key}:${x.i}`, () => '1', (x) => groupMessage(x.e));
  if (!pool.length) view.replaceChildren(h('div', { class: 'empty' }, t ? 'No messages in this task yet.' : ''));
  if (stick || view.dataset.fresh !== key) view.scrollTop = view.scrollHeight;
  view.dataset.fresh = key;
}

/** The runtime's long notices in the group chat fold to their first line. */
function systemBody(text) {
  const first = text.split('\n').find((l) => l.trim()) || text;
  return h('details', { class: 'fold sys-fold', testid: 'system-message-fold' }, h('summary', null, truncate(first, 140)), messageBody(text, lookups));
}

function groupMessage(entry) {
  const m = entry.message || {};
  const me = sess.human_agent_id;
  const system = m.sender_id === '[TaskState]';
  const flags = [];
  if (m.waiting && m.waiting.length) flags.push(h('span', { class: 'flag flag-wait' }, 'waits for reply'));
  else if (m.need_reply) flags.push(h('span', { class: 'flag' }, 'needs reply'));
  if (m.return_waiting_id) flags.push(h('span', { class: 'flag flag-answer', title: `answers wait ${m.return_waiting_id}` }, 'answer'));
  return h(
    'div',
    { class: `msg${system ? ' msg-system' : ''}${m.sender_id === me ? ' msg-me' : ''}`, testid: 'group-message', 'data-sender': m.sender_id },
    h(
      'div',
      { class: 'msg-head' },
      system ? h('span', { class: 'sender' }, 'Task system') : agentChip(m.sender_id),
      h('span', { class: 'arrow' }, '→'),
      (m.receiver || []).map((r) => agentChip(r)),
      m.stage_relative && m.stage_relative !== NO_RELATIVE ? h('span', { class: 'tag', title: m.stage_relative }, stageName(m.stage_relative)) : null,
      flags,
      h('span', { class: 'time', title: entry.timestamp }, fmt.time(entry.timestamp)),
    ),
    system ? systemBody(m.message || '') : messageBody(m.message || '', lookups),
  );
}

function stageName(id) {
  const s = store.get('stage', id);
  return s ? `stage: ${s.stage_intention}` : `stage ${fmt.short(id)}`;
}

const lookups = {
  task: (id) => store.get('task', id),
  stage: (id) => store.get('stage', id),
  onTask: (id) => selectTask(id),
};

// ---------------------------------------------------------------- agents

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
    if (st === 'running' || st.startsWith('waiting_for_')) running.push(r);
    else if (st === 'finished' || st === 'failed' || st === 'cancelled') done.push(r);
    else queued.push(r);
  }
  const order = [...todo];
  queued.sort((a, b) => {
    const ia = order.indexOf(a.state.step_id);
    const ib = order.indexOf(b.state.step_id);
    return (ia < 0 ? 1e9 : ia) - (ib < 0 ? 1e9 : ib) || a.seq - b.seq;
  });
  return { running, queued, done };
}

function lockOf(agent) {
  return Array.isArray(agent.step_lock) ? agent.step_lock : [];
}

function renderTeamList() {
  const list = $('agent-list');
  const agents = agentsInOrder();
  $('team-count').textContent = agents.length ? String(agents.length) : '';
  keyed(
    list,
    agents,
    (r) => r.state.agent_id,
    (r) => `${r.version}|${store.stepsOf(r.state.agent_id).map((s) => s.version).join(',')}`,
    (r) => {
      const a = r.state;
      const lock = lockOf(a);
      const fails = agentFailures(store, a.agent_id);
      const steps = store.stepsOf(a.agent_id);
      const running = steps.find((s) => s.state.execution_state === 'running');
      const queued = ((a.agent_step && a.agent_step.todo) || []).length;
      const done = steps.filter((s) => ['finished', 'failed', 'cancelled'].includes(s.state.execution_state)).length;
      let doing;
      if (lock.length) doing = `waits for ${lock.length === 1 ? 'a reply' : `${lock.length} replies`}`;
      else if (running) doing = `▸ ${running.state.step_intention}`;
      else if (queued) doing = `${queued} queued`;
      else if (a.agent_id === sess.human_agent_id) doing = `you${done ? ` · ${done} sent` : ''}`;
      else doing = done ? `${done} step${done === 1 ? '' : 's'} done` : 'no steps yet';
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
            h('span', { class: 'agent-role muted small', title: a.human_config ? 'a person' : '' }, a.role),
          ),
          h('div', { class: 'agent-item-doing' }, doing),
        ),
        h(
          'div',
          { class: 'agent-item-side' },
          h('span', { class: `ws-label ws-${a.working_state}`, testid: 'agent-working-state' }, a.working_state),
          fails.count
            ? h('span', { class: `fail-mark${fails.lastFailed ? ' fail-last' : ''}`, testid: 'agent-failures', title: fails.lastFailed ? `last step failed: ${failureReason(fails.last)}` : `${fails.count} failed step${fails.count === 1 ? '' : 's'}` }, `✕ ${fails.count}`)
            : null,
          lock.length ? h('span', { class: 'lock', testid: 'agent-lock', title: `step lock: ${lock.join(', ')}` }, lockIcon(), ` ${lock.length}`) : null,
        ),
      );
    },
  );
}

function showAgent(id) {
  setTab('agents');
  requestAnimationFrame(() => {
    const card = document.querySelector(`#agent-cards [data-agent-id="${CSS.escape(id)}"]`);
    if (card) {
      card.scrollIntoView({ block: 'start', behavior: 'smooth' });
      card.classList.remove('flash');
      void card.offsetWidth;
      card.classList.add('flash');
    }
  });
}

function renderAgentCards() {
  const box = $('agent-cards');
  const agents = agentsInOrder();
  keyed(
    box,
    agents,
    (r) => r.state.agent_id,
    (r) =>
      `${r.version}|${store.stepsOf(r.state.agent_id).map((s) => s.version).join(',')}|${ui.stepsThisTask ? ui.taskId : '*'}|${ui.showAllSteps.has(r.state.agent_id)}`,
    (r) => agentCard(r.state),
  );
  if (!agents.length) box.replaceChildren(h('div', { class: 'empty' }, 'No agents yet.'));
}

const FINISHED_SHOWN = 6;

function agentCard(a) {
  const lock = lockOf(a);
  const { running, queued, done } = classifySteps(a);
  const showAll = ui.showAllSteps.has(a.agent_id);
  const recent = [...done].reverse();
  const shown = showAll ? recent : recent.slice(0, FINISHED_SHOWN);
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
        h('div', { class: 'muted small' }, a.role !== a.agent_id ? a.role : null, a.human_config ? h('span', { class: 'tag tag-human' }, 'human') : null, a.template ? h('span', { class: 'tag', testid: 'agent-card-template', title: 'created by a manager from this agent template' }, `hired · ${a.template}`) : null, a.agent_id === sess.human_agent_id ? h('span', { class: 'tag tag-human' }, 'you') : null),
      ),
      h('span', { class: 'spacer' }),
      h('span', { class: `ws-label ws-${a.working_state}`, testid: 'agent-card-state' }, a.working_state),
      lock.length ? h('span', { class: 'lock', testid: 'agent-card-lock', title: lock.join('\n') }, lockIcon(), ` step lock · ${lock.length} wait${lock.length > 1 ? 's' : ''}`) : null,
    ),
    a.profile ? h('p', { class: 'agent-profile muted' }, a.profile) : null,
    h(
      'div',
      { class: 'agent-card-meta small muted' },
      tokens ? h('span', null, `tokens ${tokens}`) : h('span', null, 'no tokens spent'),
      (a.skills || []).length ? h('span', { title: (a.skills || []).join(', ') }, `${a.skills.length} skills`) : null,
      (a.tools || []).length ? h('span', null, `tools: ${a.tools.join(', ')}`) : null,
      lock.length ? h('span', { class: 'mono', title: 'wait ids' }, lock.map(fmt.short).join(' ')) : null,
    ),
    h(
      'div',
      { class: 'step-groups-now' },
      stepGroup('Running', 'steps-running', running, 'nothing'),
      stepGroup('Queued', 'steps-queued', queued, 'empty'),
    ),
    stepGroup(
      'Finished',
      'steps-finished',
      shown,
      'none yet',
      done.length,
      done.length > FINISHED_SHOWN
        ? h(
            'button',
            {
              type: 'button',
              class: 'btn btn-link small',
              onclick: () => {
                if (showAll) ui.showAllSteps.delete(a.agent_id);
                else ui.showAllSteps.add(a.agent_id);
                mark('agents');
              },
            },
            showAll ? 'show recent only' : `show all ${done.length}`,
          )
        : null,
    ),
  );
}

function stepGroup(title, testid, steps, empty, total, extra) {
  return h(
    'section',
    { class: `step-group${steps.length ? '' : ' step-group-empty'}`, testid, 'data-count': String(total ?? steps.length) },
    h('h4', null, title, ' ', h('span', { class: 'count' }, String(total ?? steps.length)), steps.length ? extra : h('span', { class: 'step-group-none' }, empty)),
    steps.length ? h('ul', { class: 'steps' }, steps.map((r) => stepRow(r.state))) : null,
  );
}

function stepRow(s) {
  const tokens = fmt.tokens(s.token_usage);
  const res = s.execute_result;
  const dropped = res && res.dropped === true;
  const error = s.execution_state === 'failed' && res && typeof res.error === 'string' ? res.error : null;
  const human = store.get('agent', s.agent_id)?.human_config;
  const summary = h(
    'span',
    { class: 'step-line' },
    h('span', { class: `dot st-${s.execution_state}`, title: s.execution_state }),
    h(
      'span',
      { class: 'step-intention' },
      s.step_intention || '(no intention)',
      // A person's steps all say "Message sent by a person": show what was sent.
      human && s.text_content ? h('span', { class: 'muted' }, ` · “${truncate(s.text_content, 80)}”`) : null,
    ),
    h('span', { class: `exec exec-${s.type}`, title: `type: ${s.type}` }, `${s.type === 'tool' ? 'tool' : 'skill'} · ${s.executor}`),
    !ui.stepsThisTask && s.task_id !== ui.taskId ? h('span', { class: 'tag', title: s.task_id }, taskName(s.task_id)) : null,
    dropped ? h('span', { class: 'flag' }, 'dropped') : null,
    s.started_at ? h('span', { class: 'step-took muted', testid: 'step-took', title: `started ${fmt.clock(s.started_at)}` }, fmt.took(s, store.now())) : null,
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
        s.text_content ? h('div', null, h('div', { class: 'label' }, 'Input'), h('p', { class: 'pre' }, s.text_content)) : null,
        s.instruction_content ? h('div', null, h('div', { class: 'label' }, 'Instruction'), jsonBlock(s.instruction_content)) : null,
        h('div', null, h('div', { class: 'label' }, 'Result'), res === null || res === undefined ? h('span', { class: 'muted' }, 'none yet') : jsonBlock(res)),
        !human ? callsSection(s.step_id, (id) => client.stepCalls(id)) : null,
        h('div', { class: 'muted small mono' }, `step ${s.step_id} · ${s.stage_id === NO_RELATIVE ? 'no stage' : stageName(s.stage_id)}`, s.started_at ? ` · started ${fmt.clock(s.started_at)}${s.ended_at ? ` · ran ${fmt.took(s)}` : ''}` : ''),
        human || ['finished', 'failed', 'cancelled'].includes(s.execution_state)
          ? null
          : h('button', { type: 'button', class: 'btn btn-ghost btn-sm btn-danger', testid: 'step-cancel', onclick: () => confirmCancel(`step “${s.step_intention}”`, (why) => client.cancelStep(s.step_id, why)) }, 'Cancel step'),
      ),
    { class: 'fold step-fold' },
  );
  const written = s.execution_state === 'running' ? writing.get(s.step_id) : undefined;
  return h(
    'li',
    { class: `step st-${s.execution_state}`, testid: 'step-item', 'data-step-id': s.step_id, 'data-state': s.execution_state, 'data-executor': s.executor },
    details,
    written !== undefined ? h('p', { class: 'pre step-writing', testid: 'step-writing', 'data-writing': s.step_id, title: 'the answer as the model writes it' }, written) : null,
  );
}

// ---------------------------------------------------------------- inbox: private chats and notices

function pendingOf(list) {
  return (list || []).filter((m) => m.sender_id !== sess.human_agent_id && m.need_reply && !m.replied);
}

function conversationsInOrder() {
  const privates = ui.pool.conversation_privates || {};
  return Object.entries(privates)
    .map(([id, msgs]) => ({ id, msgs: msgs || [], pending: pendingOf(msgs).length, last: (msgs && msgs.length && msgs[msgs.length - 1].timestamp) || '' }))
    .sort((a, b) => b.pending - a.pending || (a.last < b.last ? 1 : a.last > b.last ? -1 : 0));
}

function renderInbox() {
  const convs = conversationsInOrder();
  const pending = convs.reduce((n, c) => n + c.pending, 0);
  const pc = $('pending-count');
  pc.hidden = pending === 0;
  pc.textContent = pending === 1 ? '1 reply pending' : `${pending} replies pending`;
  pc.dataset.count = String(pending);
  document.title = `${pending ? `(${pending}) ` : ''}Cohort · ${sess.human_agent_id}`;

  // Notices, newest first.
  const notices = ui.pool.global_messages || [];
  // Counted over every notice ever received: only the newest are kept, so a length would
  // stop growing once the list is full.
  const total = (ui.pool.global_messages_omitted || 0) + notices.length;
  $('notice-count').textContent = String(total);
  const unseen = Math.min(total - ui.noticesSeen, notices.length);
  $('notice-new').hidden = !(unseen > 0);
  $('notice-new').textContent = unseen > 0 ? `${unseen} new` : '';
  if ($('notices').open) markNoticesSeen();
  $('notice-list').replaceChildren(
    ...(notices.length
      ? [...notices].reverse().map((n, i) => h('li', { testid: 'notice-item', class: i < unseen ? 'unseen' : '' }, linkIds(n, lookups)))
      : [h('li', { class: 'empty' }, 'No notices.')]),
  );

  // Which conversation: the user's choice, else the first with a pending reply, else the latest.
  if (!ui.convPicked || !convs.some((c) => c.id === ui.conv)) ui.conv = convs.length ? convs[0].id : null;
  keyed(
    $('conv-tabs'),
    convs,
    (c) => c.id,
    (c) => `${c.pending}|${c.id === ui.conv}|${agentName(c.id)}`,
    (c) =>
      h(
        'button',
        {
          type: 'button',
          class: `conv-tab${c.id === ui.conv ? ' active' : ''}`,
          testid: 'conversation-tab',
          'data-agent-id': c.id,
          'data-pending': String(c.pending),
          onclick: () => {
            ui.conv = c.id;
            ui.convPicked = true;
            mark('inbox');
          },
        },
        agentName(c.id),
        c.pending ? h('span', { class: 'badge badge-pending' }, String(c.pending)) : null,
      ),
  );
  if (!convs.length) $('conv-tabs').replaceChildren(h('span', { class: 'muted small' }, 'No private messages yet.'));

  const body = $('conv-body');
  const stick = atBottom(body);
  const conv = convs.find((c) => c.id === ui.conv);
  const changed = body.dataset.conv !== (ui.conv || '');
  body.dataset.conv = ui.conv || '';
  body.replaceChildren(
    ...(conv ? conv.msgs.map(privateMessage) : [h('div', { class: 'empty' }, 'Messages between you and an agent appear here.')]),
  );
  if (stick || changed) body.scrollTop = body.scrollHeight;
}

function privateMessage(m) {
  const me = sess.human_agent_id;
  const mine = m.sender_id === me;
  const pending = !mine && m.need_reply && !m.replied;
  const answering = ui.replyTo && ui.replyTo.sender_id === m.sender_id && ui.replyTo.task_id === m.task_id && pending;
  return h(
    'div',
    {
      class: `msg${mine ? ' msg-me' : ''}${pending ? ' msg-pending' : ''}${m.waiting && pending ? ' msg-waiting' : ''}`,
      testid: 'private-message',
      'data-sender': m.sender_id,
      'data-task-id': m.task_id,
      'data-pending': pending ? 'true' : 'false',
      'data-waiting': m.waiting ? 'true' : 'false',
      'data-replied': m.replied ? 'true' : 'false',
    },
    h(
      'div',
      { class: 'msg-head' },
      h('b', { class: 'sender' }, mine ? 'You' : agentName(m.sender_id)),
      h('span', { class: 'tag', title: m.task_id, onclick: () => selectTask(m.task_id) }, taskName(m.task_id)),
      pending ? h('span', { class: `flag ${m.waiting ? 'flag-wait' : ''}` }, m.waiting ? 'waiting for your reply' : 'asks for a reply') : null,
      !mine && m.need_reply && m.replied ? h('span', { class: 'flag flag-done' }, 'answered') : null,
      mine && m.return_waiting_id ? h('span', { class: 'flag flag-answer' }, 'answer') : null,
      h('span', { class: 'time', title: m.timestamp }, fmt.time(m.timestamp)),
    ),
    messageBody(m.content || '', lookups),
    pending && m.ask ? askControls(m) : null,
    pending
      ? h(
          'div',
          { class: 'msg-actions' },
          h('button', { type: 'button', class: 'btn btn-primary btn-sm', testid: 'answer-button', disabled: answering, onclick: () => answer(m) }, answering ? 'Answering…' : 'Answer'),
        )
      : null,
  );
}

function markNoticesSeen() {
  const n = (ui.pool.global_messages_omitted || 0) + (ui.pool.global_messages || []).length;
  if (ui.noticesSeen !== n) {
    ui.noticesSeen = n;
    sessionStorage.setItem(`cohort.noticesSeen.${sess.human_agent_id}`, String(n));
    $('notice-new').hidden = true;
    for (const li of $('notice-list').querySelectorAll('.unseen')) li.classList.remove('unseen');
  }
}

let convTimer = 0;
let convInFlight = false;
let convAgain = false;
function refreshConversations(delay = 120) {
  clearTimeout(convTimer);
  convTimer = setTimeout(fetchConversations, delay);
}

async function fetchConversations() {
  if (!sess) return;
  if (convInFlight) {
    convAgain = true;
    return;
  }
  convInFlight = true;
  try {
    const pool = await client.conversations();
    const next = {
      conversation_privates: (pool && pool.conversation_privates) || {},
      global_messages: (pool && pool.global_messages) || [],
      global_messages_omitted: (pool && pool.global_messages_omitted) || 0,
    };
    const sig = JSON.stringify(next);
    if (sig !== ui.poolSig) {
      ui.pool = next;
      ui.poolSig = sig;
      // An answer the server has recorded ends the answering mode.
      if (ui.replyTo && !pendingOf(next.conversation_privates[ui.replyTo.sender_id]).some((m) => m.task_id === ui.replyTo.task_id)) {
        ui.replyTo = null;
        mark('composer');
      }
      mark('inbox', 'summary');
    }
  } catch (e) {
    if (e instanceof AuthError) return signOut('Your session has ended; sign in again.');
    console.warn('conversations:', e.message);
  } finally {
    convInFlight = false;
    if (convAgain) {
      convAgain = false;
      refreshConversations(0);
    }
  }
}

/** A structured question's answer helpers: its options, or its form, fill the composer. */
function askControls(m) {
  const fill = (text) => {
    answer(m);
    $('c-content').value = text;
    $('c-content').focus();
  };
  if (m.ask.mode === 'select') {
    return h('div', { class: 'ask-options', testid: 'ask-options' }, (m.ask.options || []).map((o) => h('button', { type: 'button', class: 'btn btn-ghost btn-sm', testid: 'ask-option', onclick: () => fill(o) }, o)));
  }
  if (m.ask.mode === 'form') {
    const inputs = (m.ask.fields || []).map((f) => [f, fieldInput(f)]);
    const use = () => {
      const values = {};
      for (const [f, input] of inputs) {
        if (f.type === 'boolean') values[f.key] = input.checked;
        else if (input.value !== '') values[f.key] = f.type === 'number' ? Number(input.value) : input.value;
      }
      fill(JSON.stringify(values));
    };
    return h(
      'div',
      { class: 'ask-form form-fields', testid: 'ask-form' },
      inputs.map(([f, input]) => h('label', { class: 'small' }, `${f.label || f.key}${f.required ? ' *' : ''}`, input)),
      h('button', { type: 'button', class: 'btn btn-ghost btn-sm', testid: 'ask-form-use', onclick: use }, 'Use these values'),
    );
  }
  return null;
}

// ---------------------------------------------------------------- decisions and control

let decisionTimer = 0;
let decisionItems = [];
function refreshDecisions(delay = 150) {
  clearTimeout(decisionTimer);
  decisionTimer = setTimeout(async () => {
    if (!client) return;
    try {
      const r = await client.approvals();
      decisionItems = (r && r.approvals) || [];
      mark('decisions');
    } catch (e) {
      if (e instanceof AuthError) return signOut('Your session has ended; sign in again.');
      console.warn('approvals:', e.message);
    }
  }, delay);
}

function renderDecisionList() {
  $('decisions').hidden = decisionItems.length === 0;
  $('decision-count').textContent = String(decisionItems.length);
  const act = {
    approve: (item, body) => client.approve(item.step_id, body).finally(() => refreshDecisions(0)),
    reject: (item, reason) => client.reject(item.step_id, reason).finally(() => refreshDecisions(0)),
    fill: (item, values) => client.fillParams(item.step_id, values).finally(() => refreshDecisions(0)),
  };
  renderDecisions($('decision-list'), decisionItems, act, { agent: agentName, task: taskName });
}

/** Runs an operator's control; its refusal (a member, a task already over) is shown. */
function control(p) {
  p.then(
    () => setStatus('sent', 'Done.'),
    (e) => setStatus('error', e.message),
  );
}

function confirmCancel(what, run) {
  const why = window.prompt(`Cancel ${what}? Give a reason (optional):`, '');
  if (why === null) return;
  control(run(why));
}

// ---------------------------------------------------------------- composer

function answer(m) {
  ui.replyTo = { sender_id: m.sender_id, task_id: m.task_id, stage_relative: m.stage_relative || NO_RELATIVE, content: m.content };
  ui.receiversPicked = true;
  ui.composerTask = m.task_id;
  ui.composerTaskPicked = true;
  const t = store.get('task', m.task_id);
  ui.scope = t && (t.task_group || []).includes(m.sender_id) ? 'group' : 'all';
  ui.receivers = new Set([m.sender_id]);
  $('c-need-reply').checked = false;
  $('c-waiting').checked = false;
  renderComposer();
  $('c-stage').value = [...$('c-stage').options].some((o) => o.value === ui.replyTo.stage_relative) ? ui.replyTo.stage_relative : NO_RELATIVE;
  mark('inbox');
  $('c-content').focus();
}

function receiverCandidates(t) {
  const me = sess.human_agent_id;
  let ids;
  if (ui.scope === 'group' && t) ids = [...(t.task_group || [])];
  else ids = store.all('agent').map((r) => r.state.agent_id);
  for (const r of ui.receivers) if (!ids.includes(r)) ids.push(r); // keep a chosen receiver visible
  return ids.filter((id) => id !== me);
}

let composerSig = '';

function renderComposer() {
  const sel = $('c-task');
  const tasks = tasksInOrder().map((r) => r.state);
  if (!ui.composerTask || !store.get('task', ui.composerTask)) {
    // By default a message goes to the base task, where goals are given.
    const base = tasks.find(isBase);
    ui.composerTask = (base && base.task_id) || ui.taskId || (tasks[0] && tasks[0].task_id) || null;
  }
  // Rebuild only when something the composer shows changed, so an open <select> or a
  // half-made choice is not disturbed by the stream of events.
  const t0 = store.get('task', ui.composerTask);
  // Until the person picks receivers, a message goes to the composer task's manager.
  const auto = t0 && t0.task_manager && t0.task_manager !== sess.human_agent_id ? t0.task_manager : null;
  if (!ui.receiversPicked && ui.autoReceiver !== auto) {
    if (ui.autoReceiver) ui.receivers.delete(ui.autoReceiver);
    if (auto && !ui.receivers.size) ui.receivers.add(auto);
    ui.autoReceiver = auto;
  }
  const sig = JSON.stringify([
    tasks.map((t) => [t.task_id, t.task_name, t.execution_state]),
    ui.composerTask,
    t0 ? store.stagesOf(t0).map((r) => [r.state.stage_id, r.state.execution_state]) : [],
    receiverCandidates(t0).map((id) => [id, agentName(id)]),
    ui.scope,
    [...ui.receivers],
    ui.replyTo,
  ]);
  if (sig === composerSig) return;
  composerSig = sig;
  const open = tasks.filter((t) => !['finished', 'failed', 'cancelled'].includes(t.execution_state));
  const over = tasks.filter((t) => !open.includes(t));
  const opt = (t) => h('option', { value: t.task_id, 'data-base': isBase(t) ? 'true' : 'false' }, isBase(t) ? `${t.task_name} (base)` : t.task_name);
  sel.replaceChildren(...open.map(opt), over.length ? h('optgroup', { label: 'finished' }, over.map(opt)) : null);
  if (ui.composerTask) sel.value = ui.composerTask;
  const t = store.get('task', ui.composerTask);

  const stageSel = $('c-stage');
  const prevStage = stageSel.value;
  const stages = t ? store.stagesOf(t) : [];
  stageSel.replaceChildren(
    h('option', { value: NO_RELATIVE }, 'none'),
    ...stages.map((r, i) => h('option', { value: r.state.stage_id }, `${i + 1}. ${r.state.stage_intention}${r.state.execution_state === 'running' ? ' (running)' : ''}`)),
  );
  stageSel.value = [...stageSel.options].some((o) => o.value === prevStage) ? prevStage : NO_RELATIVE;

  for (const b of document.querySelectorAll('.seg button')) b.classList.toggle('active', b.dataset.scope === ui.scope);
  const box = $('c-receivers');
  const ids = receiverCandidates(t);
  box.replaceChildren(
    ...(ids.length
      ? ids.map((id) => {
          const a = store.get('agent', id);
          const input = h('input', { type: 'checkbox', value: id, checked: ui.receivers.has(id), testid: 'receiver-checkbox' });
          input.addEventListener('change', () => {
            ui.receiversPicked = true;
            if (input.checked) ui.receivers.add(id);
            else ui.receivers.delete(id);
            label.classList.toggle('on', input.checked);
          });
          const label = h(
            'label',
            { class: `receiver${ui.receivers.has(id) ? ' on' : ''}`, testid: 'receiver-option', 'data-agent-id': id, title: a ? `${id} · ${a.role}` : id },
            input,
            h('span', null, agentName(id)),
            a && a.role ? h('span', { class: 'muted small' }, a.role) : null,
          );
          return label;
        })
      : [h('span', { class: 'muted small' }, ui.scope === 'group' ? 'Nobody else is in this task group; choose “all agents”.' : 'No other agents.')]),
  );

  const rep = $('c-reply');
  if (ui.replyTo) {
    rep.hidden = false;
    rep.replaceChildren(
      h('span', null, 'Answering ', h('b', null, agentName(ui.replyTo.sender_id)), ': “', truncate(ui.replyTo.content, 90), '”'),
      h('button', { type: 'button', class: 'btn btn-link small', title: 'Stop answering', onclick: () => { ui.replyTo = null; mark('composer', 'inbox'); } }, 'cancel'),
    );
  } else {
    rep.hidden = true;
    rep.replaceChildren();
  }
}

function truncate(s, n) {
  s = String(s || '').replace(/\s+/g, ' ').trim();
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

function setStatus(state, text) {
  const el = $('c-status');
  el.dataset.state = state;
  el.textContent = text;
}

async function send(e) {
  e.preventDefault();
  const content = $('c-content').value;
  const receiver = [...ui.receivers];
  if (!ui.composerTask) return setStatus('error', 'Choose a task.');
  if (!receiver.length) return setStatus('error', 'Choose at least one receiver.');
  if (!content.trim()) return setStatus('error', 'Write a message first.');
  const body = {
    task_id: ui.composerTask,
    receiver,
    content,
    stage_relative: $('c-stage').value || NO_RELATIVE,
    need_reply: $('c-need-reply').checked,
    waiting: $('c-waiting').checked,
  };
  const btn = $('c-send');
  btn.disabled = true;
  setStatus('sending', 'Sending…');
  try {
    await client.sendMessage(body);
    setStatus('sent', `Sent to ${receiver.map(agentName).join(', ')} in “${taskName(body.task_id)}”.`);
    $('c-content').value = '';
    ui.replyTo = null;
    mark('composer', 'inbox');
    refreshConversations(0);
  } catch (err) {
    if (err instanceof AuthError) return signOut('Your session has ended; sign in again.');
    setStatus('error', `Not sent: ${err.message}`);
  } finally {
    btn.disabled = false;
  }
}

// ---------------------------------------------------------------- header, tabs

function renderSummaryLine() {
  const tasks = store.all('task').map((r) => r.state).filter((t) => !isBase(t));
  const running = tasks.filter((t) => t.execution_state === 'running').length;
  const agents = store.all('agent').map((r) => r.state);
  const working = agents.filter((a) => a.working_state === 'working').length;
  const waiting = agents.filter((a) => a.working_state === 'waiting').length;
  $('summary-line').textContent = `${agents.length} agents · ${working} working · ${waiting} waiting · ${running} running task${running === 1 ? '' : 's'} of ${tasks.length}`;
}

function setTab(tab) {
  ui.tab = tab;
  for (const b of document.querySelectorAll('.tab')) {
    const on = b.dataset.tab === tab;
    b.classList.toggle('active', on);
    b.setAttribute('aria-selected', on ? 'true' : 'false');
  }
  for (const v of ['stages', 'chat', 'agents', 'timeline']) $(`view-${v}`).hidden = v !== tab;
  if (tab === 'timeline') mark('timeline');
  if (tab === 'chat') {
    const view = $('view-chat');
    view.scrollTop = view.scrollHeight;
  }
}

function setConn(state, delay) {
  const el = $('conn');
  el.dataset.state = state;
  el.textContent =
    state === 'live' ? 'live' : state === 'offline' ? `offline · retrying in ${Math.max(1, Math.round(delay / 1000))} s` : state === 'reconnecting' ? 'reconnecting…' : 'connecting…';
}

// ---------------------------------------------------------------- live data

function onSnapshot(version, states) {
  store.loadSnapshot(version, states);
  markAll();
  refreshConversations(0);
  refreshDecisions(0);
}

function onEvent(ev) {
  for (const t of store.apply(ev)) onTouched(t);
}

/** Answers being written (streamed), by step id: shown under the running step until it ends. */
const writing = new Map();
const WRITING_KEPT = 200;

function onWriting({ step_id, text }) {
  if (typeof step_id !== 'string' || typeof text !== 'string') return;
  writing.delete(step_id);
  writing.set(step_id, text);
  if (writing.size > WRITING_KEPT) writing.delete(writing.keys().next().value);
  // Patched in place: a fast model must not re-render the page a few times a second (and the
  // agent cards are only redrawn when their steps change, which writing does not).
  let el = document.querySelector(`[data-writing="${CSS.escape(step_id)}"]`);
  if (!el) {
    const row = document.querySelector(`li[data-step-id="${CSS.escape(step_id)}"][data-state="running"]`);
    if (!row) return;
    el = h('p', { class: 'pre step-writing', testid: 'step-writing', 'data-writing': step_id, title: 'the answer as the model writes it' });
    row.append(el);
  }
  el.textContent = text;
}

/** Marks what a changed record shows; a person's own record changing may mean new chats. */
function onTouched({ kind, id, state }) {
  switch (kind) {
    case 'task':
      mark('tasks', 'summary', 'composer');
      if (id === ui.taskId || !ui.taskPicked) mark('detail', 'chat');
      break;
    case 'stage':
      mark('tasks', 'composer');
      if (state && state.task_id === ui.taskId) mark('detail');
      break;
    case 'agent':
      mark('team', 'agents', 'summary');
      if (id === sess.human_agent_id) refreshConversations();
      break;
    case 'step':
      if (state && state.execution_state !== 'running') writing.delete(id);
      // A step starts or stops waiting for a person: the list of what waits is fetched again.
      if ((state && state.execution_state.startsWith('waiting_for_')) || decisionItems.some((d) => d.step_id === id)) refreshDecisions();
      mark('team', 'agents', 'failures');
      if (state && state.task_id === ui.taskId) mark('timeline');
      if (state && state.agent_id === sess.human_agent_id) refreshConversations();
      break;
  }
}

// ---------------------------------------------------------------- session

function showLogin(message) {
  $('app').hidden = true;
  $('login').hidden = false;
  const err = $('login-error');
  err.hidden = !message;
  err.textContent = message || '';
  ($('login-user').value ? $('login-password') : $('login-user')).focus();
}

function start(s) {
  sess = s;
  client = api(s);
  ui.noticesSeen = Number(sessionStorage.getItem(`cohort.noticesSeen.${s.human_agent_id}`) || 0);
  $('login').hidden = true;
  $('app').hidden = false;
  $('whoami').textContent = s.human_agent_id;
  document.title = `Cohort · ${s.human_agent_id}`;
  setTab(ui.tab);
  store.reset(0);
  markAll();
  live = new Live(s.token, {
    onSnapshot,
    onEvent,
    onWriting,
    onStatus: setConn,
    onAuthLost: async () => {
      try {
        await client.states('task');
        return false;
      } catch (e) {
        if (e instanceof AuthError) {
          signOut('Your session has ended; sign in again.');
          return true;
        }
        return false;
      }
    },
  });
  live.connect();
  refreshConversations(0);
  clearInterval(start.poll);
  // A slow safety net for the private chats, in case an event was missed while offline.
  start.poll = setInterval(() => refreshConversations(0), 20000);
}

function signOut(message) {
  if (sess) $('login-user').value = sess.human_agent_id;
  if (live) live.stop();
  live = null;
  clearInterval(start.poll);
  session.clear();
  sess = null;
  client = null;
  ui.pool = { conversation_privates: {}, global_messages: [] };
  ui.poolSig = '';
  ui.replyTo = null;
  ui.receivers = new Set();
  ui.receiversPicked = false;
  ui.autoReceiver = null;
  ui.taskPicked = false;
  ui.taskId = null;
  ui.composerTask = null;
  composerSig = '';
  decisionItems = [];
  $('decisions').hidden = true;
  store.reset(0);
  for (const id of ['task-list', 'agent-list', 'agent-cards', 'view-chat', 'conv-tabs', 'conv-body']) {
    $(id).replaceChildren();
    $(id)._keyed = null;
  }
  showLogin(message);
}

function wire() {
  $('login-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const btn = e.submitter || $('login-form').querySelector('button');
    btn.disabled = true;
    $('login-error').hidden = true;
    try {
      const s = await bind($('login-user').value.trim(), $('login-password').value);
      session.save(s);
      $('login-password').value = '';
      start(s);
    } catch (err) {
      showLogin(err.message);
    } finally {
      btn.disabled = false;
    }
  });
  $('logout').addEventListener('click', () => signOut());
  for (const b of document.querySelectorAll('.tab')) b.addEventListener('click', () => setTab(b.dataset.tab));
  $('steps-this-task').addEventListener('change', (e) => {
    ui.stepsThisTask = e.target.checked;
    mark('agents');
  });
  $('notices').addEventListener('toggle', () => {
    if ($('notices').open) markNoticesSeen();
  });
  $('c-task').addEventListener('change', (e) => {
    ui.composerTask = e.target.value;
    ui.composerTaskPicked = true;
    if (ui.replyTo && ui.replyTo.task_id !== ui.composerTask) ui.replyTo = null;
    mark('composer', 'inbox');
  });
  for (const b of document.querySelectorAll('.seg button')) {
    b.addEventListener('click', () => {
      ui.scope = b.dataset.scope;
      mark('composer');
    });
  }
  $('c-waiting').addEventListener('change', (e) => {
    if (e.target.checked) $('c-need-reply').checked = true;
  });
  $('c-need-reply').addEventListener('change', (e) => {
    if (!e.target.checked) $('c-waiting').checked = false;
  });
  $('composer').addEventListener('submit', send);
  $('c-content').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) $('composer').requestSubmit();
  });
}

wire();
const saved = session.load();
if (saved) start(saved);
else showLogin();
