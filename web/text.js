// Turning message text into readable DOM, always as text nodes: runtime instructions embedded
// as <instruction>{json}</instruction> become a labelled, foldable chip; a trailing
// <return_waiting_id> becomes a small marker; task and stage ids become their names.

import { h, jsonBlock } from './dom.js';
import { t, num } from './i18n.js';
import { stateLabel } from './ctx.js';

const TAGS = /<(instruction|return_waiting_id)>([\s\S]*?)<\/\1>/g;
const UUID = /\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi;
const LONG = 700;

/** The body of a chat message. `lookups` = {task(id), stage(id), onTask(id)}. */
export function messageBody(text, lookups) {
  const body = h('div', { class: 'msg-body' });
  let last = 0;
  const plain = [];
  for (const m of text.matchAll(TAGS)) {
    plain.push(text.slice(last, m.index));
    last = m.index + m[0].length;
    if (m[1] === 'instruction') plain.push(instructionChip(m[2]));
    else plain.push(h('span', { class: 'flag flag-answer', title: t('text.answers_wait', { id: m[2].trim() }) }, t('text.answers_a_wait')));
  }
  plain.push(text.slice(last));
  for (const part of plain) {
    if (typeof part !== 'string') body.appendChild(part);
    else if (part.trim()) body.appendChild(textPart(part.replace(/^\s*\n|\n\s*$/g, ''), lookups));
  }
  return body;
}

function textPart(s, lookups) {
  if (s.length <= LONG) return h('span', { class: 'pre' }, linkIds(s, lookups));
  const el = h('span', { class: 'pre' }, linkIds(`${s.slice(0, LONG)}…`, lookups));
  const more = h('button', { type: 'button', class: 'btn btn-link small' }, t('text.show_all'));
  more.addEventListener('click', () => {
    el.replaceChildren(linkIds(s, lookups));
    more.remove();
  });
  return h('span', null, el, ' ', more);
}

function instructionChip(raw) {
  let obj = null;
  try {
    obj = JSON.parse(raw);
  } catch {
    /* shown raw */
  }
  let action = t('text.instruction');
  if (obj && typeof obj === 'object') {
    if (typeof obj.action === 'string') action = obj.action;
    else if (Object.keys(obj).length === 1) action = Object.keys(obj)[0];
  }
  const inner = obj && typeof obj === 'object' && Object.keys(obj).length === 1 ? Object.values(obj)[0] : null;
  const hint = inner && typeof inner === 'object' ? inner.stage_intention || inner.goal || '' : '';
  const d = h('details', { class: 'instr' });
  d.appendChild(h('summary', null, h('span', { class: 'instr-name mono' }, action.replace(/_/g, ' ')), hint ? h('span', { class: 'instr-hint' }, hint) : null));
  d.addEventListener(
    'toggle',
    () => {
      if (d.open && d.childNodes.length === 1) d.appendChild(jsonBlock(obj ?? raw));
    },
    { once: false },
  );
  return d;
}

/** Text with known task/stage ids replaced by chips showing their names, `code` as code. */
export function linkIds(text, lookups) {
  const frag = document.createDocumentFragment();
  const parts = String(text).split(/`([^`\n]{1,80})`/);
  parts.forEach((part, i) => frag.appendChild(i % 2 ? h('code', null, part) : linkPlain(part, lookups)));
  return frag;
}

function linkPlain(text, lookups) {
  const frag = document.createDocumentFragment();
  let last = 0;
  for (const m of String(text).matchAll(UUID)) {
    const id = m[0];
    const task = lookups.task(id);
    const stage = task ? null : lookups.stage(id);
    if (!task && !stage) continue;
    frag.appendChild(document.createTextNode(text.slice(last, m.index)));
    last = m.index + id.length;
    if (task) {
      const chip = h('button', { type: 'button', class: 'chip chip-link', title: id }, task.task_name);
      chip.addEventListener('click', (e) => {
        e.preventDefault();
        e.stopPropagation();
        lookups.onTask(id);
      });
      frag.appendChild(chip);
    } else {
      frag.appendChild(h('span', { class: 'chip', title: id }, t('ctx.stage_named', { intention: stage.stage_intention })));
    }
  }
  frag.appendChild(document.createTextNode(text.slice(last)));
  return frag;
}

/**
 * What a runtime message (`[TaskState]`) says, as a sentence for people, from its typed body
 * (`message.body`: a notice or an instruction); null when it has none (the raw text is shown
 * then). `names` = {agent(id), task(id), stage(id)} give names for ids.
 */
export function systemSentence(body, names) {
  if (!body || typeof body !== 'object') return null;
  if (body.notice) return noticeSentence(body.notice, names);
  if (body.instruction) return instructionSentence(body.instruction, names);
  return null;
}

function noticeSentence(n, names) {
  switch (n.kind) {
    case 'task_created':
      return t('text.task_created', { task: n.task_name });
    case 'stage_complete':
      return t('text.stage_complete', { stage: n.stage_intention, state: stateLabel(n.state) });
    case 'no_stage_left':
      return t('text.no_stage_left');
    case 'agent_stuck':
      return t('text.agent_stuck', { agent: names.agent(n.agent_id), stage: n.stage_intention, reason: n.reason });
    case 'task_ended':
      return n.state === 'cancelled' ? t('text.task_cancelled') : t('text.task_ended', { state: stateLabel(n.state) });
    case 'task_stalled':
      return t('text.task_stalled', { min: num(Math.max(1, Math.round(n.idle_secs / 60))) });
    default:
      return null;
  }
}

function instructionSentence(i, names) {
  const [action, a] = Object.entries(i)[0] || [];
  if (!a || typeof a !== 'object') return null;
  switch (action) {
    case 'start_stage':
      return t('text.stage_starts', { stage: a.stage_intention || names.stage(a.stage_id), goal: a.goal });
    case 'finish_stage':
      return t('text.stage_finished', { stage: names.stage(a.stage_id) });
    case 'finish_task':
      return t('text.task_finished', { task: names.task(a.task_id) });
    case 'pause_task':
      return a.paused ? t('text.task_paused', { task: names.task(a.task_id) }) : t('text.task_resumed', { task: names.task(a.task_id) });
    case 'update_working_memory':
      return t('text.memory_updated');
    case 'add_tool_decision':
      return t('text.tool_returned', { tool: a.tool_name });
    default:
      return null;
  }
}
