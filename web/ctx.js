// What the console's views share: the Store, the `ui` state, the session and its client, the
// render schedule (`mark`) and the helpers that name things (agents, tasks, stages, states).
//
// ES module imports are read-only bindings, so everything that is reassigned (the session, the
// client, the composer's signature, the decisions held) lives as a property of `app`. The entry
// (app.js) fills in `app.signOut`, `app.setTab` and the painter: the views call them without
// importing the entry, which would make an import cycle.

import { h, fmt } from './dom.js';
import { t } from './i18n.js';
import { Store } from './store.js';

export const $ = (id) => document.getElementById(id);
export const BASE_TASK = 'MAS base task';
export const NO_RELATIVE = 'no_relative';

export const store = new Store();

/** Shared values that change as a whole; see the note at the top. */
export const app = {
  sess: null, // {token, human_agent_id} while signed in
  client: null, // the API client of `sess`
  composerSig: '', // what the composer was last built from (composer.js)
  decisionItems: [], // the steps waiting for the person (control.js)
  // Set by app.js before anything runs.
  signOut: (message) => {},
  setTab: (tab) => {},
};

export const ui = {
  taskId: null, // the task shown in the centre
  taskPicked: false, // the user chose it (otherwise the newest task is followed)
  tab: 'stages',
  conv: null, // the private conversation shown (the other agent's id)
  convPicked: false,
  scope: 'group', // receivers offered: the task group or every agent
  receivers: new Set(),
  replyTo: null, // {sender_id, task_id, stage_relative, content} while answering
  stepsThisTask: false,
  showAllSteps: new Set(), // agents whose card lists every finished step (up to LONGEST)
  showAllQueued: new Set(), // agents whose card lists every queued step (up to LONGEST)
  focusStep: null, // a step shown on request (a failure clicked): listed even past the caps
  pool: { conversation_privates: {}, global_messages: [] },
  poolSig: '',
  noticesSeen: 0,
  composerTask: null,
  composerTaskPicked: false,
  receiversPicked: false, // the person chose receivers (else the task's manager is offered)
  autoReceiver: null,
  attached: [], // files attached to the message being written: {name, state, id, mime, bytes}
  filter: '', // lower-case words the task list, agent list and steps are filtered by
};

/** Whether any of the texts holds the filter (every text when there is none). */
export function matches(...texts) {
  if (!ui.filter) return true;
  return texts.some((t) => typeof t === 'string' && t.toLowerCase().includes(ui.filter));
}

// ---------------------------------------------------------------- rendering schedule

// Parts of the page marked dirty are drawn together in an animation frame, by the painter
// app.js registers (it knows which view draws which part). While events pour in (a large team
// at work), a draw waits until twice the last draw's time has passed since it ended, so at
// most a third of the main thread goes to drawing and frames keep coming between draws.
const dirty = new Set();
let frame = 0;
let timer = 0;
let lastEnd = 0;
let lastCost = 0;
let paint = (parts) => {};

/** The longest a marked part waits for its draw. */
const MAX_WAIT_MS = 1000;

export function onPaint(fn) {
  paint = fn;
}

export function mark(...parts) {
  for (const p of parts) dirty.add(p);
  if (frame || timer) return;
  const wait = lastEnd + 2 * lastCost - performance.now();
  if (wait <= 0) {
    frame = requestAnimationFrame(flush);
    return;
  }
  timer = setTimeout(() => {
    timer = 0;
    frame = requestAnimationFrame(flush);
  }, Math.min(wait, MAX_WAIT_MS));
}

function flush() {
  frame = 0;
  const parts = new Set(dirty);
  dirty.clear();
  const started = performance.now();
  paint(parts);
  lastEnd = performance.now();
  lastCost = lastEnd - started;
}

// ---------------------------------------------------------------- names and lookups

export function agentName(id) {
  if (id === '[TaskState]') return t('ctx.task_system');
  if (id === '[SyncState]') return t('ctx.sync_state');
  const a = store.get('agent', id);
  return (a && a.name) || id;
}

export function agentChip(id, extra) {
  const a = store.get('agent', id);
  const human = a && a.human_config;
  return h(
    'span',
    { class: `chip chip-agent${id === (app.sess && app.sess.human_agent_id) ? ' chip-me' : ''}${human ? ' chip-human' : ''}`, title: a ? `${id} · ${a.role}` : id, 'data-agent-id': id },
    agentName(id),
    extra,
  );
}

export function taskName(id) {
  const task = store.get('task', id);
  return task ? taskTitle(task) : fmt.short(id);
}

/** A task's name for people: the base task's (the SPEC's `MAS base task`) in their language. */
export function taskTitle(task) {
  return isBase(task) ? t('ctx.base_task_name') : task.task_name;
}

export function stageName(id) {
  const s = store.get('stage', id);
  return s ? t('ctx.stage_named', { intention: s.stage_intention }) : t('ctx.stage_id', { id: fmt.short(id) });
}

export function isBase(t) {
  return t && t.task_name === BASE_TASK;
}

/** A state's name for people (the wire name in English; `data-state` keeps the wire name). */
export function stateLabel(state) {
  return t(`state.${state || 'none'}`);
}

export function badge(state, testid) {
  return h('span', { class: `badge st-${state || 'none'}`, testid, 'data-state': state || '' }, stateLabel(state));
}

/** The base task first, then the others newest first. */
export function tasksInOrder() {
  const recs = store.all('task');
  const base = recs.filter((r) => isBase(r.state));
  const rest = recs.filter((r) => !isBase(r.state)).reverse();
  return [...base, ...rest];
}

export function truncate(s, n) {
  s = String(s || '').replace(/\s+/g, ' ').trim();
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}
