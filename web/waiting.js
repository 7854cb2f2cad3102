// "Waiting for you": everything the team waits on the person for, in one strip at the top of
// the page, never inside a scrolled panel. Questions an agent asked (a choice's options send
// the answer at one click; a form or a free answer is sent from the card itself), and the
// steps held for the person's verdict: plan and stage checks, tool approvals, missing
// parameters (drawn by decisions.js). Each says who asks, in which task, and by when; the task
// views ask `waitsIn` whether a task waits for the person.

import { h, keyed, fmt } from './dom.js';
import { t } from './i18n.js';
import { AuthError } from './api.js';
import { renderDecisions, fieldInput } from './decisions.js';
import { $, app, ui, mark, agentName, taskName, NO_RELATIVE } from './ctx.js';
import { pendingOf, refreshConversations } from './conversations.js';
import { refreshDecisions } from './control.js';
import { selectTask } from './tasks.js';

/** The questions waiting for the person's reply, oldest first, as {kind: 'question', …}. */
function questions() {
  const out = [];
  for (const [from, msgs] of Object.entries(ui.pool.conversation_privates || {})) {
    for (const m of pendingOf(msgs)) out.push({ kind: 'question', from, m });
  }
  return out.sort((a, b) => (a.m.timestamp < b.m.timestamp ? -1 : a.m.timestamp > b.m.timestamp ? 1 : 0));
}

const NONE = [];
// What waits, by task: built again only when the person's conversations or the decisions were
// fetched anew (both are replaced whole), not for every task a list draws.
const index = { pool: null, decisions: null, byTask: new Map() };

/** What waits for the person in task `taskId`: [{kind, who, what}] (questions first). */
export function waitsIn(taskId) {
  if (index.pool !== ui.pool || index.decisions !== app.decisionItems) {
    index.pool = ui.pool;
    index.decisions = app.decisionItems;
    index.byTask = new Map();
    const add = (task, w) => {
      if (!index.byTask.has(task)) index.byTask.set(task, []);
      index.byTask.get(task).push(w);
    };
    for (const q of questions()) add(q.m.task_id, { kind: 'question', who: q.from, what: q.m.content });
    for (const d of app.decisionItems || []) add(d.task_id, { kind: d.kind, who: d.agent_id, what: d.step_intention || '' });
  }
  return index.byTask.get(taskId) || NONE;
}

/** What a waiting item asks, in a few words, for the task views. */
export function waitLabel(w) {
  const who = agentName(w.who);
  if (w.kind === 'question') return t('waiting.asks_you', { who, what: w.what });
  if (w.kind === 'plan') return t('waiting.plan_waits', { who });
  if (w.kind === 'params') return t('waiting.needs_params', { who });
  return t('waiting.tool_waits', { who });
}

let lastSig = '';
let lastCount = 0;

export function renderWaiting() {
  const qs = questions();
  const ds = app.decisionItems || [];
  const n = qs.length + ds.length;
  $('decisions').hidden = n === 0;
  $('decision-count').textContent = String(n);
  keyed(
    $('question-list'),
    qs,
    // Two questions of one agent in one task may come within the same second (the timestamp's
    // resolution): their deadlines (ms) and texts tell them apart.
    (q) => `${q.from}|${q.m.task_id}|${q.m.timestamp}|${q.m.reply_by_ms || ''}|${q.m.content}`,
    (q) => `${agentName(q.from)}|${taskName(q.m.task_id)}`,
    (q) => questionCard(q),
  );
  const act = {
    approve: (item, body) => app.client.approve(item.step_id, body).finally(() => refreshDecisions(0)),
    reject: (item, reason, then) => app.client.reject(item.step_id, reason, then).finally(() => refreshDecisions(0)),
    fill: (item, values) => app.client.fillParams(item.step_id, values).finally(() => refreshDecisions(0)),
  };
  renderDecisions($('decision-list'), ds, act, { agent: agentName, task: taskName });
  // Something new waits: the strip comes into view if the page was scrolled away from it (on a
  // phone, the composer that sent the goal is two screens down).
  if (n > lastCount) {
    const r = $('decisions').getBoundingClientRect();
    if (r.top < 0 || r.top > window.innerHeight - 80) $('decisions').scrollIntoView({ block: 'start' });
  }
  lastCount = n;
  // The task list, the task's head and its stage cards say which tasks wait for the person,
  // and for whom in each.
  const sig = waitSignature(qs, ds);
  if (sig !== lastSig) {
    lastSig = sig;
    mark('tasks', 'detail', 'stages');
  }
}

/** What the task views show of what waits (see `waitsIn`): each item's task, kind and who
 * asks. A question answered and a plan check come in one fetch leave the task waiting, but
 * for someone else: its stage must say so. */
export function waitSignature(qs, ds) {
  return [...qs.map((q) => `${q.m.task_id}:question:${q.from}`), ...ds.map((d) => `${d.task_id}:${d.kind}:${d.agent_id}`)].join('|');
}

/** Sends `content` as the person's answer to question `q`; resolves when the server took it. */
async function sendAnswer(q, content) {
  await app.client.sendMessage({
    task_id: q.m.task_id,
    receiver: [q.from],
    content,
    stage_relative: q.m.stage_relative || NO_RELATIVE,
    need_reply: false,
    waiting: false,
  });
  refreshConversations(0);
}

function questionCard(q) {
  const { m } = q;
  const status = h('p', { class: 'composer-status small', role: 'status', testid: 'question-status' });
  const card = h('div', { class: 'decision decision-question', testid: 'question', 'data-agent-id': q.from, 'data-task-id': m.task_id });
  const answer = (content) => {
    for (const el of card.querySelectorAll('button, input, textarea, select')) el.disabled = true;
    status.dataset.state = 'sending';
    status.textContent = t('waiting.sending');
    sendAnswer(q, content).then(
      () => {
        status.dataset.state = 'sent';
        status.textContent = t('waiting.answered', { content });
      },
      (e) => {
        if (e instanceof AuthError) return app.signOut(t('waiting.session_ended'));
        for (const el of card.querySelectorAll('button, input, textarea, select')) el.disabled = false;
        status.dataset.state = 'error';
        status.textContent = t('waiting.not_sent', { error: e.message });
      },
    );
  };
  card.append(
    h(
      'div',
      { class: 'msg-head' },
      h('b', null, t('waiting.question')),
      h('span', { class: 'muted' }, ` · ${agentName(q.from)}`),
      h('span', { class: 'tag tag-link', title: t('waiting.task_id', { id: m.task_id }), onclick: () => selectTask(m.task_id) }, taskName(m.task_id)),
      h('span', { class: `flag ${m.waiting ? 'flag-wait' : ''}` }, m.waiting ? t('waiting.waits_for_reply') : t('waiting.asks_for_reply')),
      m.reply_by_ms ? h('span', { class: 'time', testid: 'question-deadline', title: t('waiting.deadline_title') }, t('waiting.by', { time: fmt.clock(m.reply_by_ms) })) : null,
    ),
    h('p', { class: 'question-text' }, m.content || ''),
    answerControls(m, answer),
    status,
  );
  return card;
}

/** A choice: one button per option, each sends (several: a box per option and Send). A form:
 * its fields, each with its description, and Send. Else a line. */
function answerControls(m, answer) {
  const ask = m.ask || {};
  // An option is a text, or {key, label}: the person reads the label, the answer is the key.
  const options = (ask.options || []).map((o) => (typeof o === 'string' ? { key: o, label: o } : { key: o.key, label: o.label || o.key }));
  if (ask.mode === 'select' && ask.multiple) {
    const boxes = options.map((o) => [o, h('input', { type: 'checkbox', testid: 'ask-choice', 'data-option': o.key })]);
    const send = () => {
      const chosen = boxes.filter(([, b]) => b.checked).map(([o]) => o.key);
      if (chosen.length) answer(JSON.stringify(chosen));
    };
    return h(
      'div',
      { class: 'ask-options ask-multi', testid: 'ask-options' },
      boxes.map(([o, b]) => h('label', { class: 'small ask-choice' }, b, ` ${o.label}`)),
      h('button', { type: 'button', class: 'btn btn-primary btn-sm', testid: 'ask-choices-send', onclick: send }, t('waiting.send')),
    );
  }
  if (ask.mode === 'select') {
    return h('div', { class: 'ask-options', testid: 'ask-options' }, options.map((o) => h('button', { type: 'button', class: 'btn btn-primary btn-sm', testid: 'ask-option', 'data-option': o.key, onclick: () => answer(o.key) }, o.label)));
  }
  if (ask.mode === 'form') {
    const inputs = (ask.fields || []).map((f) => [f, fieldInput(f)]);
    const send = () => {
      const values = {};
      for (const [f, input] of inputs) {
        if (f.type === 'boolean') values[f.key] = input.checked;
        else if (input.value !== '') values[f.key] = f.type === 'number' ? Number(input.value) : input.value;
      }
      answer(JSON.stringify(values));
    };
    return h(
      'div',
      { class: 'ask-form form-fields', testid: 'ask-form' },
      inputs.map(([f, input]) => h('label', { class: 'small' }, `${f.label || f.key}${f.required ? ' *' : ''}`, input, f.description ? h('span', { class: 'muted field-help' }, f.description) : null)),
      h('div', { class: 'row row-end' }, h('button', { type: 'button', class: 'btn btn-primary btn-sm', testid: 'ask-form-send', onclick: send }, t('waiting.send'))),
    );
  }
  const input = h('input', { class: 'grow', placeholder: t('waiting.your_answer'), testid: 'question-answer', 'aria-label': t('waiting.your_answer') });
  const send = () => {
    if (input.value.trim()) answer(input.value);
  };
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') send();
  });
  return h('div', { class: 'row' }, input, h('button', { type: 'button', class: 'btn btn-primary btn-sm', testid: 'question-send', onclick: send }, t('waiting.send')));
}
