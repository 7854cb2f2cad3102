// The composer: the person writes to agents of a task (by default its manager, in the base task
// where goals are given), answers a message that asks for a reply (Answer fills in the receiver,
// task and stage), picks receivers from the task group or every agent, and sends.

import { h } from './dom.js';
import { t, tn, num, tParts } from './i18n.js';
import { AuthError } from './api.js';
import { $, app, store, ui, mark, agentName, taskName, taskTitle, isBase, tasksInOrder, truncate, NO_RELATIVE } from './ctx.js';
import { refreshConversations } from './conversations.js';
import { attachedIds, clearAttached } from './attachments.js';
import { renderChoice, choiceBody } from './choice.js';

/** Answers message `m`: its sender, task and stage fill the composer. */
export function answer(m) {
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

/** Who a message can go to: the task group or every agent, never the person writing. */
function receiverCandidates(t) {
  const me = app.sess.human_agent_id;
  let ids;
  if (ui.scope === 'group' && t) ids = [...(t.task_group || [])];
  else ids = store.all('agent').map((r) => r.state.agent_id);
  for (const r of ui.receivers) if (!ids.includes(r)) ids.push(r); // keep a chosen receiver visible
  return ids.filter((id) => id !== me);
}

export function renderComposer() {
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
  const auto = t0 && t0.task_manager && t0.task_manager !== app.sess.human_agent_id ? t0.task_manager : null;
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
  if (sig === app.composerSig) return;
  app.composerSig = sig;
  const open = tasks.filter((t) => !['finished', 'failed', 'cancelled'].includes(t.execution_state));
  const over = tasks.filter((t) => !open.includes(t));
  const opt = (task) => h('option', { value: task.task_id, 'data-base': isBase(task) ? 'true' : 'false' }, isBase(task) ? t('composer.base_task', { task: taskTitle(task) }) : task.task_name);
  sel.replaceChildren(...open.map(opt), over.length ? h('optgroup', { label: t('composer.tasks_over') }, over.map(opt)) : '');
  if (ui.composerTask) sel.value = ui.composerTask;
  const task = store.get('task', ui.composerTask);

  const stageSel = $('c-stage');
  const prevStage = stageSel.value;
  const stages = task ? store.stagesOf(task) : [];
  stageSel.replaceChildren(
    h('option', { value: NO_RELATIVE }, t('composer.no_stage')),
    ...stages.map((r, i) => h('option', { value: r.state.stage_id }, r.state.execution_state === 'running' ? t('composer.stage_running', { i: num(i + 1), stage: r.state.stage_intention }) : `${num(i + 1)}. ${r.state.stage_intention}`)),
  );
  stageSel.value = [...stageSel.options].some((o) => o.value === prevStage) ? prevStage : NO_RELATIVE;

  for (const b of document.querySelectorAll('.seg button')) b.classList.toggle('active', b.dataset.scope === ui.scope);
  const box = $('c-receivers');
  const ids = receiverCandidates(task);
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
            renderChoice([...ui.receivers]);
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
      : [h('span', { class: 'muted small' }, ui.scope === 'group' ? t('composer.nobody_in_group') : t('composer.no_other_agents'))]),
  );

  renderChoice([...ui.receivers]);

  const rep = $('c-reply');
  if (ui.replyTo) {
    rep.hidden = false;
    rep.replaceChildren(
      h('span', null, tParts('composer.answering', { who: h('b', null, agentName(ui.replyTo.sender_id)), text: truncate(ui.replyTo.content, 90) })),
      h('button', { type: 'button', class: 'btn btn-link small', title: t('composer.stop_answering'), onclick: () => { ui.replyTo = null; mark('composer', 'inbox'); } }, t('composer.cancel_answer')),
    );
  } else {
    rep.hidden = true;
    rep.replaceChildren();
  }
}

/** The line under the composer: what was sent, or why not. */
export function setStatus(state, text) {
  const el = $('c-status');
  el.dataset.state = state;
  el.textContent = text;
}

export async function send(e) {
  e.preventDefault();
  const content = $('c-content').value;
  const receiver = [...ui.receivers];
  if (!ui.composerTask) return setStatus('error', t('composer.choose_task'));
  if (!receiver.length) return setStatus('error', t('composer.choose_receiver'));
  if (!content.trim()) return setStatus('error', t('composer.write_first'));
  const attachments = attachedIds();
  if (!attachments) return setStatus('error', t('composer.wait_attached'));
  const body = {
    task_id: ui.composerTask,
    receiver,
    content,
    stage_relative: $('c-stage').value || NO_RELATIVE,
    need_reply: $('c-need-reply').checked,
    waiting: $('c-waiting').checked,
  };
  if (attachments.length) body.attachments = attachments;
  Object.assign(body, choiceBody());
  const btn = $('c-send');
  btn.disabled = true;
  setStatus('sending', t('composer.sending'));
  try {
    await app.client.sendMessage(body);
    const sent = { to: receiver.map(agentName).join(', '), task: taskName(body.task_id) };
    setStatus('sent', attachments.length ? tn('composer.sent_with_files', attachments.length, sent) : t('composer.sent', sent));
    $('c-content').value = '';
    clearAttached();
    ui.replyTo = null;
    mark('composer', 'inbox');
    refreshConversations(0);
  } catch (err) {
    if (err instanceof AuthError) return app.signOut(t('app.session_ended'));
    setStatus('error', t('composer.not_sent', { error: err.message }));
  } finally {
    btn.disabled = false;
  }
}
