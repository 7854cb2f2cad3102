// The conversations: the selected task's group chat (the runtime's long system messages fold
// to their first line) and the person's inbox: private conversations (the ones asking for a
// reply first, with Answer, which fills the composer; the question itself is answered in the
// "Waiting for you" strip, waiting.js), and notices with a count of the ones not seen yet.

import { h, keyed, atBottom, fmt } from './dom.js';
import { t, tn, num } from './i18n.js';
import { messageBody, linkIds, systemSentence } from './text.js';
import { $, app, store, ui, mark, agentName, agentChip, taskName, stageName, truncate, NO_RELATIVE } from './ctx.js';
import { pendingOf } from './conversations.js';
import { selectTask } from './tasks.js';
import { answer } from './composer.js';
import { fileList } from './attachments.js';

/** What message text links to: task and stage ids, a click on a task shows it. */
const lookups = {
  task: (id) => store.get('task', id),
  stage: (id) => store.get('stage', id),
  onTask: (id) => selectTask(id),
};

// ---------------------------------------------------------------- group chat

/** The group chat's count on its tab, shown whichever tab is open. */
export function renderChatCount() {
  const t = store.get('task', ui.taskId);
  const n = ((t && t.shared_conversation_pool) || []).length;
  $('chat-count').textContent = n ? num(n) : '';
}

export function renderGroupChat() {
  const view = $('view-chat');
  const task = store.get('task', ui.taskId);
  const pool = (task && task.shared_conversation_pool) || [];
  const stick = atBottom(view);
  const key = task ? task.task_id : '';
  if (view.dataset.taskId !== key) {
    view.replaceChildren();
    view._keyed = null;
    view.dataset.taskId = key;
  }
  // Keyed by the entry's place in the whole conversation: when the oldest entries leave
  // (the pool is capped), the others keep their keys.
  const omitted = (task && task.shared_conversation_omitted) || 0;
  const entries = pool.map((e, i) => ({ e, i: omitted + i }));
  keyed(view, entries, (x) => `${key}:${x.i}`, () => '1', (x) => groupMessage(x.e));
  if (!pool.length) view.replaceChildren(h('div', { class: 'empty' }, task ? t('chat.no_messages') : ''));
  if (stick || view.dataset.fresh !== key) view.scrollTop = view.scrollHeight;
  view.dataset.fresh = key;
}

/** A runtime message in the group chat: a sentence made from its typed body, its raw text
 * one click away (for debugging); without a body, its raw text folds to the first line. */
function systemBody(m) {
  const sentence = systemSentence(m.body, { agent: agentName, task: (id) => taskName(id), stage: (id) => (store.get('stage', id) || {}).stage_intention || fmt.short(id) });
  const text = m.message || '';
  if (sentence) {
    return h(
      'div',
      { class: 'msg-body', testid: 'system-sentence' },
      h('span', { class: 'pre' }, sentence),
      h('details', { class: 'fold raw-fold', testid: 'system-message-raw' }, h('summary', null, t('chat.raw')), h('pre', { class: 'call-text' }, text)),
    );
  }
  const first = text.split('\n').find((l) => l.trim()) || text;
  return h('details', { class: 'fold sys-fold', testid: 'system-message-fold' }, h('summary', null, truncate(first, 140)), messageBody(text, lookups));
}

function groupMessage(entry) {
  const m = entry.message || {};
  const me = app.sess.human_agent_id;
  const system = m.sender_id === '[TaskState]';
  const flags = [];
  if (m.waiting && m.waiting.length) flags.push(h('span', { class: 'flag flag-wait' }, t('chat.waits_for_reply')));
  else if (m.need_reply) flags.push(h('span', { class: 'flag' }, t('chat.needs_reply')));
  if (m.return_waiting_id) flags.push(h('span', { class: 'flag flag-answer', title: t('text.answers_wait', { id: m.return_waiting_id }) }, t('chat.answer_flag')));
  return h(
    'div',
    { class: `msg${system ? ' msg-system' : ''}${m.sender_id === me ? ' msg-me' : ''}`, testid: 'group-message', 'data-sender': m.sender_id },
    h(
      'div',
      { class: 'msg-head' },
      system ? h('span', { class: 'sender' }, t('ctx.task_system')) : agentChip(m.sender_id),
      h('span', { class: 'arrow' }, '→'),
      (m.receiver || []).map((r) => agentChip(r)),
      m.stage_relative && m.stage_relative !== NO_RELATIVE ? h('span', { class: 'tag', title: m.stage_relative }, stageName(m.stage_relative)) : null,
      flags,
      h('span', { class: 'time', title: entry.timestamp }, fmt.time(entry.timestamp)),
    ),
    system ? systemBody(m) : messageBody(m.message || '', lookups),
    fileList(m.attachments, 'message-attachments'),
  );
}

// ---------------------------------------------------------------- inbox: private chats and notices

function conversationsInOrder() {
  const privates = ui.pool.conversation_privates || {};
  return Object.entries(privates)
    .map(([id, msgs]) => ({ id, msgs: msgs || [], pending: pendingOf(msgs).length, last: (msgs && msgs.length && msgs[msgs.length - 1].timestamp) || '' }))
    .sort((a, b) => b.pending - a.pending || (a.last < b.last ? 1 : a.last > b.last ? -1 : 0));
}

export function renderInbox() {
  const convs = conversationsInOrder();
  const pending = convs.reduce((n, c) => n + c.pending, 0);
  const pc = $('pending-count');
  pc.hidden = pending === 0;
  pc.textContent = tn('chat.replies_pending', pending);
  pc.dataset.count = String(pending);
  document.title = `${pending ? `(${num(pending)}) ` : ''}${t('page.title_signed_in', { who: app.sess.human_agent_id })}`;

  // Notices, newest first.
  const notices = ui.pool.global_messages || [];
  // Counted over every notice ever received: only the newest are kept, so a length would
  // stop growing once the list is full.
  const total = (ui.pool.global_messages_omitted || 0) + notices.length;
  $('notice-count').textContent = num(total);
  const unseen = Math.min(total - ui.noticesSeen, notices.length);
  $('notice-new').hidden = !(unseen > 0);
  $('notice-new').textContent = unseen > 0 ? t('chat.unseen', { count: num(unseen) }) : '';
  if ($('notices').open) markNoticesSeen();
  $('notice-list').replaceChildren(
    ...(notices.length
      ? [...notices].reverse().map((n, i) => h('li', { testid: 'notice-item', class: i < unseen ? 'unseen' : '' }, linkIds(n, lookups)))
      : [h('li', { class: 'empty' }, t('chat.no_notices'))]),
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
        c.pending ? h('span', { class: 'badge badge-pending' }, num(c.pending)) : null,
      ),
  );
  if (!convs.length) $('conv-tabs').replaceChildren(h('span', { class: 'muted small' }, t('chat.no_private')));

  const body = $('conv-body');
  const stick = atBottom(body);
  const conv = convs.find((c) => c.id === ui.conv);
  const changed = body.dataset.conv !== (ui.conv || '');
  body.dataset.conv = ui.conv || '';
  body.replaceChildren(
    ...(conv ? conv.msgs.map(privateMessage) : [h('div', { class: 'empty' }, t('chat.private_empty'))]),
  );
  if (stick || changed) body.scrollTop = body.scrollHeight;
}

function privateMessage(m) {
  const me = app.sess.human_agent_id;
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
      h('b', { class: 'sender' }, mine ? t('chat.you') : agentName(m.sender_id)),
      h('span', { class: 'tag', title: m.task_id, onclick: () => selectTask(m.task_id) }, taskName(m.task_id)),
      pending ? h('span', { class: `flag ${m.waiting ? 'flag-wait' : ''}` }, m.waiting ? t('chat.waiting_for_your_reply') : t('chat.asks_for_reply')) : null,
      !mine && m.need_reply && m.replied ? h('span', { class: 'flag flag-done' }, t('chat.answered')) : null,
      mine && m.return_waiting_id ? h('span', { class: 'flag flag-answer' }, t('chat.answer_flag')) : null,
      h('span', { class: 'time', title: m.timestamp }, fmt.time(m.timestamp)),
    ),
    messageBody(m.content || '', lookups),
    fileList(m.attachments, 'message-attachments'),
    pending
      ? h(
          'div',
          { class: 'msg-actions' },
          h('button', { type: 'button', class: 'btn btn-primary btn-sm', testid: 'answer-button', disabled: answering, onclick: () => answer(m) }, answering ? t('chat.answering') : t('chat.answer')),
        )
      : null,
  );
}

/** Every notice received so far counts as seen (kept for this browser tab's session). */
export function markNoticesSeen() {
  const n = (ui.pool.global_messages_omitted || 0) + (ui.pool.global_messages || []).length;
  if (ui.noticesSeen !== n) {
    ui.noticesSeen = n;
    sessionStorage.setItem(`cohort.noticesSeen.${app.sess.human_agent_id}`, String(n));
    $('notice-new').hidden = true;
    for (const li of $('notice-list').querySelectorAll('.unseen')) li.classList.remove('unseen');
  }
}
