// The failures panel: the tasks that ended failed and the failed steps the console holds,
// newest first. A task with the runtime's reason (a manager that declared success on nothing:
// no stage gave a result); a step with its agent, task, time and reason. A click shows the task,
// or the step in its agent's card. Failures are never only in a log: an agent whose last step
// failed is marked in the agent list too.

import { h, keyed, fmt } from './dom.js';
import { isFailure } from './store.js';
import { stateLabel } from './ctx.js';
import { t } from './i18n.js';

/** Shown at once; the rest are counted. */
const SHOWN = 50;
/** How many the panel shows until the person asks for all: it stays short beside the inbox. */
const FIRST = 2;
let expanded = false;

export function failedSteps(store) {
  return store
    .failures()
    .sort((a, b) => (b.state.ended_at || 0) - (a.state.ended_at || 0) || b.seq - a.seq);
}

export function failureReason(step) {
  const r = step.execute_result;
  return r && typeof r.error === 'string' ? r.error : t('failures.no_reason');
}

/** An agent's failed steps, and whether the newest step that ended failed. */
export function agentFailures(store, agentId) {
  const ended = store
    .stepsOf(agentId)
    .filter((r) => ['finished', 'failed', 'cancelled'].includes(r.state.execution_state) && !(r.state.execute_result && r.state.execute_result.dropped === true));
  const failed = ended.filter((r) => isFailure(r.state));
  const last = ended[ended.length - 1];
  return { count: failed.length, lastFailed: !!last && isFailure(last.state), last: last && last.state };
}

/** The tasks that ended failed, newest first: a task may fail with no step of it failed. */
export function failedTasks(store) {
  return store
    .all('task')
    .filter((r) => r.state.execution_state === 'failed')
    .sort((a, b) => (b.state.ended_at || 0) - (a.state.ended_at || 0));
}

/** Why a task failed: the runtime's reason, and its stages that gave no result. */
export function taskFailureReason(task) {
  const o = task.outcome || {};
  const lines = [o.why, ...(o.failed_stages || []).map((f) => t('failures.stage_failed', { intention: f.stage_intention, why: f.why }))].filter(Boolean);
  return lines.length ? lines.join('\n') : task.task_summary || t('failures.no_reason');
}

/** ctx: {store, agentName, taskName, showStep(step), showTask(id)} */
export function renderFailures(ctx, panel, list, count) {
  const tasks = failedTasks(ctx.store).map((r) => ({ key: `task:${r.state.task_id}`, r, task: true }));
  const steps = failedSteps(ctx.store).map((r) => ({ key: r.state.step_id, r, task: false }));
  const all = [...tasks, ...steps];
  panel.hidden = all.length === 0;
  count.textContent = String(all.length);
  count.dataset.count = String(all.length);
  const shown = all.slice(0, expanded ? SHOWN : FIRST);
  keyed(
    list,
    shown,
    (e) => e.key,
    (e) => String(e.r.version),
    (e) => (e.task ? taskItem(ctx, e.r.state) : stepItem(ctx, e.r.state)),
  );
  const redraw = () => renderFailures(ctx, panel, list, count);
  if (all.length > FIRST) {
    const more = expanded
      ? h('button', { type: 'button', class: 'btn btn-link small', testid: 'failures-fewer', onclick: () => { expanded = false; redraw(); } }, t('failures.show_fewer'))
      : h('button', { type: 'button', class: 'btn btn-link small', testid: 'failures-all', onclick: () => { expanded = true; redraw(); } }, t('failures.show_all', { total: fmt.int(Math.min(all.length, SHOWN)) }));
    list.append(h('li', { class: 'failures-more' }, more, expanded && all.length > SHOWN ? h('span', { class: 'muted small' }, ` · ${t('failures.older_hidden', { count: fmt.int(all.length - SHOWN) })}`) : null));
  }
}

/** One entry of the panel: `who` and `what` in its head with the time it ended, an optional
 * line under it, the reason; a click or Enter opens it. */
function item({ cls, data, title, open, who, what, whatClass = 'muted small', at, line, reason }) {
  return h(
    'li',
    {
      class: cls,
      testid: 'failure-item',
      ...data,
      tabindex: '0',
      role: 'button',
      title,
      onclick: open,
      onkeydown: (e) => {
        if (e.key === 'Enter') open();
      },
    },
    h('div', { class: 'failure-head' }, h('b', null, who), h('span', { class: whatClass }, what), h('span', { class: 'spacer' }), h('span', { class: 'muted small' }, fmt.clock(at))),
    line,
    h('p', { class: 'failure-reason pre', testid: 'failure-reason' }, reason),
  );
}

function taskItem(ctx, task) {
  return item({
    cls: 'failure failure-task',
    data: { 'data-kind': 'task', 'data-task-id': task.task_id },
    title: t('failures.show_task'),
    open: () => ctx.showTask(task.task_id),
    who: t('failures.task_named', { name: task.task_name }),
    what: ` · ${stateLabel('failed')}`,
    at: task.ended_at,
    line: null,
    reason: taskFailureReason(task),
  });
}

function stepItem(ctx, s) {
  return item({
    cls: 'failure',
    data: { 'data-kind': 'step', 'data-step-id': s.step_id, 'data-agent-id': s.agent_id },
    title: t('failures.show_step'),
    open: () => ctx.showStep(s),
    who: ctx.agentName(s.agent_id),
    what: ` · ${s.executor}`,
    whatClass: 'muted small mono',
    at: s.ended_at,
    line: h('div', { class: 'small' }, s.step_intention, h('span', { class: 'muted' }, ` · ${ctx.taskName(s.task_id)}`)),
    reason: failureReason(s),
  });
}
