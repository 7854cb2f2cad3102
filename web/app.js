// Cohort operator console: sign in as a human agent, watch the team live, chat and answer.
// This is the entry: the session (sign in, sign out), the live feed, which parts of the page a
// change marks dirty, the painter that redraws them, the tabs and the page's event wiring. The
// views are modules of their own: tasks.js, chat.js, agents.js, composer.js, control.js,
// failures.js, timeline.js, nodes.js; what they share is in ctx.js. Every text they write comes
// from i18n.js, in the team's language or the one the person chose; it is set before anything
// is drawn (`boot`).
//
// Data flow: the websocket sends a snapshot of the four states, then one event per change.
// Events go into the Store (by version, older ones ignored); each marks the parts of the page
// it affects as dirty, and one animation frame re-renders only those parts. Lists are keyed and
// each item carries a signature (the versions it was built from), so an unchanged task, stage,
// agent card or step keeps its DOM element. The human's private chats and notices come from
// GET /api/human/{id}/conversations, fetched again whenever the human's own agent state
// changes (a message reached them, they sent one) and after each send.

import { h, tickElapsed } from './dom.js';
import { t, tn, setLanguage, chosenLanguage, chooseLanguage, language, applyStatic, LANGUAGES } from './i18n.js';
import { session, bind, api, Live, AuthError, teamLanguage } from './api.js';
import { renderFailures } from './failures.js';
import { renderTimeline } from './timeline.js';
import { renderGraph } from './graph.js';
import { $, app, store, ui, mark, onPaint, agentName, taskName, isBase } from './ctx.js';
import { ensureSelectedTask, renderTaskList, renderTaskHead, renderStages, selectTask } from './tasks.js';
import { renderGroupChat, renderChatCount, renderInbox, markNoticesSeen } from './chat.js';
import { writing, renderTeamList, renderAgentCards, showStep, showAgent, forgetAgentViews } from './agents.js';
import { renderComposer, send, setStatus } from './composer.js';
import { attachPicked } from './attachments.js';
import { refreshConversations } from './conversations.js';
import { refreshDecisions } from './control.js';
import { renderWaiting } from './waiting.js';
import { startNodes, stopNodes, renderNodes } from './nodes.js';

let live = null;

// ---------------------------------------------------------------- rendering

/** The parts drawn in a tab's view, by that tab. A hidden view is not drawn: what changed in
 * it waits in `deferred` until its tab is shown (a large team changes the agent cards many
 * times a second, and nobody looks at them from the stages view). */
const VIEWS = new Set(['stages', 'chat', 'agents', 'timeline', 'graph']);
const deferred = new Set();

/** Redraws the parts marked dirty since the last frame (see `mark` in ctx.js). */
function render(parts) {
  if (!app.sess) return;
  if (parts.has('tasks')) ensureSelectedTask();
  if (parts.has('detail')) parts.add('stages');
  if (parts.has('chat')) renderChatCount();
  for (const view of VIEWS) {
    if (view !== ui.tab && parts.delete(view)) deferred.add(view);
  }
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
  run('stages', renderStages);
  run('chat', renderGroupChat);
  run('team', renderTeamList);
  run('agents', renderAgentCards);
  run('inbox', renderInbox);
  run('composer', renderComposer);
  run('summary', renderSummaryLine);
  run('nodes', renderNodes);
  if (parts.has('inbox')) parts.add('decisions');
  run('decisions', renderWaiting);
  run('failures', () => renderFailures(viewCtx(), $('failures'), $('failure-list'), $('failure-count')));
  run('timeline', () => renderTimeline({ ...viewCtx(), task: store.get('task', ui.taskId), now: store.now(), redraw: () => mark('timeline') }, $('view-timeline')));
  run('graph', () => renderGraph({ ...viewCtx(), task: store.get('task', ui.taskId), showAgent }, $('view-graph')));
}

// Running steps grow on the timeline while it is shown; running tasks, stages and steps count
// their time up in place.
setInterval(() => {
  if (!app.sess || document.hidden) return;
  if (ui.tab === 'timeline') mark('timeline');
  tickElapsed(store.now());
}, 1000);

/** What the view modules need from the app. */
function viewCtx() {
  return { store, agentName, taskName, showStep, showTask: selectTask };
}

onPaint(render);

function markAll() {
  mark('tasks', 'detail', 'chat', 'team', 'agents', 'inbox', 'composer', 'summary', 'decisions', 'failures', 'timeline', 'graph');
}

// ---------------------------------------------------------------- header, tabs

function renderSummaryLine() {
  const tasks = store.all('task').map((r) => r.state).filter((t) => !isBase(t));
  const running = tasks.filter((t) => t.execution_state === 'running').length;
  const agents = store.all('agent').map((r) => r.state);
  const working = agents.filter((a) => a.working_state === 'working').length;
  const waiting = agents.filter((a) => a.working_state === 'waiting').length;
  $('summary-line').textContent = tn('app.summary', running, { agents: agents.length, working, waiting, tasks: tasks.length });
}

function setTab(tab) {
  ui.tab = tab;
  for (const b of document.querySelectorAll('.tab')) {
    const on = b.dataset.tab === tab;
    b.classList.toggle('active', on);
    b.setAttribute('aria-selected', on ? 'true' : 'false');
  }
  for (const v of VIEWS) $(`view-${v}`).hidden = v !== tab;
  if (deferred.delete(tab)) mark(tab);
  if (tab === 'chat') {
    const view = $('view-chat');
    view.scrollTop = view.scrollHeight;
  }
}

function setConn(state, delay) {
  const el = $('conn');
  el.dataset.state = state;
  el.textContent =
    state === 'live'
      ? t('conn.live')
      : state === 'offline'
        ? t('conn.offline', { s: Math.max(1, Math.round(delay / 1000)) })
        : state === 'reconnecting'
          ? t('conn.reconnecting')
          : t('conn.connecting');
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

/** How many steps' answers being written are kept (in `writing`, agents.js), oldest dropped. */
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
    el = h('p', { class: 'pre step-writing', testid: 'step-writing', 'data-writing': step_id, title: t('app.writing') });
    row.append(el);
  }
  el.textContent = text;
}

/** Marks what a changed record shows; a person's own record changing may mean new chats. */
function onTouched({ kind, id, state }) {
  switch (kind) {
    case 'task':
      mark('tasks', 'summary', 'composer');
      // A task that ended failed with a reason is listed with the failures.
      if (state && state.execution_state === 'failed') mark('failures');
      if (id === ui.taskId || !ui.taskPicked) mark('detail', 'chat', 'graph');
      break;
    case 'stage':
      mark('tasks', 'composer');
      if (state && state.task_id === ui.taskId) mark('detail');
      break;
    case 'agent':
      mark('team', 'agents', 'summary', 'graph');
      if (id === app.sess.human_agent_id) refreshConversations();
      break;
    case 'step':
      if (state && state.execution_state !== 'running') writing.delete(id);
      // A step starts or stops waiting for a person: the list of what waits is fetched again.
      if ((state && state.execution_state.startsWith('waiting_for_')) || app.decisionItems.some((d) => d.step_id === id)) refreshDecisions();
      mark('team', 'agents', 'failures');
      if (state && state.task_id === ui.taskId) mark('timeline');
      // A graph plan's step: its plan is drawn in its stage's card.
      if (state && state.task_id === ui.taskId && store.inGraphPlan(state)) mark('stages');
      if (state && state.agent_id === app.sess.human_agent_id) refreshConversations();
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
  app.sess = s;
  app.client = api(s);
  ui.noticesSeen = Number(sessionStorage.getItem(`cohort.noticesSeen.${s.human_agent_id}`) || 0);
  $('login').hidden = true;
  $('app').hidden = false;
  $('whoami').textContent = s.human_agent_id;
  document.title = t('page.title_signed_in', { who: s.human_agent_id });
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
        await app.client.states('task');
        return false;
      } catch (e) {
        if (e instanceof AuthError) {
          signOut(t('app.session_ended'));
          return true;
        }
        return false;
      }
    },
  });
  live.connect();
  refreshConversations(0);
  startNodes();
  clearInterval(start.poll);
  // A slow safety net for the private chats, in case an event was missed while offline.
  start.poll = setInterval(() => refreshConversations(0), 20000);
}

function signOut(message) {
  if (app.sess) $('login-user').value = app.sess.human_agent_id;
  if (live) live.stop();
  live = null;
  clearInterval(start.poll);
  stopNodes();
  session.clear();
  app.sess = null;
  app.client = null;
  ui.pool = { conversation_privates: {}, global_messages: [] };
  ui.poolSig = '';
  ui.replyTo = null;
  ui.receivers = new Set();
  ui.receiversPicked = false;
  ui.autoReceiver = null;
  ui.filter = '';
  $('filter').value = '';
  ui.taskPicked = false;
  ui.taskId = null;
  ui.composerTask = null;
  app.composerSig = '';
  app.decisionItems = [];
  $('decisions').hidden = true;
  store.reset(0);
  for (const id of ['task-list', 'agent-list', 'agent-cards', 'view-chat', 'conv-tabs', 'conv-body', 'view-stages', 'view-timeline', 'question-list', 'decision-list']) {
    $(id).replaceChildren();
    $(id)._keyed = null;
  }
  // Kept parts of views are the last person's: built anew for the next one.
  $('view-stages')._stages = null;
  $('view-stages')._info = null;
  $('view-timeline')._tl = null;
  forgetAgentViews();
  deferred.clear();
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
  for (const picker of [$('lang'), $('login-lang')]) {
    picker.replaceChildren(...LANGUAGES.map((l) => h('option', { value: l.code, lang: l.code, selected: l.code === language() }, l.name)));
    // The page is drawn anew in the chosen language; the session (sessionStorage) stays.
    picker.addEventListener('change', () => {
      chooseLanguage(picker.value);
      location.reload();
    });
  }
  for (const b of document.querySelectorAll('.tab')) b.addEventListener('click', () => setTab(b.dataset.tab));
  $('steps-this-task').addEventListener('change', (e) => {
    ui.stepsThisTask = e.target.checked;
    mark('agents');
  });
  $('filter').addEventListener('input', (e) => {
    ui.filter = e.target.value.trim().toLowerCase();
    mark('tasks', 'team', 'agents');
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
  $('c-files').addEventListener('change', (e) => attachPicked(e.target, setStatus));
  $('c-content').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) $('composer').requestSubmit();
  });
}

// The views reach these through `app` (ctx.js): importing the entry would be a cycle.
app.signOut = signOut;
app.setTab = setTab;

/** The language first (the person's choice on this browser, else the team's), then the page. */
async function boot() {
  setLanguage(chosenLanguage() || (await teamLanguage()));
  applyStatic();
  wire();
  const saved = session.load();
  if (saved) start(saved);
  else showLogin();
}

boot();

