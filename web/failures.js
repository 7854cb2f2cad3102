// The failures panel: the failed steps the console holds, newest first, each with its agent,
// task, time and reason; a click shows the step in its agent's card. Failures are never only
// in a log: an agent whose last step failed is marked in the agent list too.

import { h, keyed, fmt } from './dom.js';
import { isFailure } from './store.js';

/** Shown at once; the rest are counted. */
const SHOWN = 50;

export function failedSteps(store) {
  return store
    .failures()
    .sort((a, b) => (b.state.ended_at || 0) - (a.state.ended_at || 0) || b.seq - a.seq);
}

export function failureReason(step) {
  const r = step.execute_result;
  return r && typeof r.error === 'string' ? r.error : 'no reason recorded';
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

/** ctx: {store, agentName, taskName, showStep(step)} */
export function renderFailures(ctx, panel, list, count) {
  const all = failedSteps(ctx.store);
  panel.hidden = all.length === 0;
  count.textContent = String(all.length);
  count.dataset.count = String(all.length);
  const shown = all.slice(0, SHOWN);
  keyed(
    list,
    shown,
    (r) => r.state.step_id,
    (r) => String(r.version),
    (r) => {
      const s = r.state;
      return h(
        'li',
        {
          class: 'failure',
          testid: 'failure-item',
          'data-step-id': s.step_id,
          'data-agent-id': s.agent_id,
          tabindex: '0',
          role: 'button',
          title: 'show this step',
          onclick: () => ctx.showStep(s),
          onkeydown: (e) => {
            if (e.key === 'Enter') ctx.showStep(s);
          },
        },
        h(
          'div',
          { class: 'failure-head' },
          h('b', null, ctx.agentName(s.agent_id)),
          h('span', { class: 'muted small' }, ` · ${s.executor}`),
          h('span', { class: 'spacer' }),
          h('span', { class: 'muted small' }, fmt.clock(s.ended_at)),
        ),
        h('div', { class: 'small' }, s.step_intention, h('span', { class: 'muted' }, ` · ${ctx.taskName(s.task_id)}`)),
        h('p', { class: 'failure-reason pre', testid: 'failure-reason' }, failureReason(s)),
      );
    },
  );
  if (all.length > SHOWN) list.append(h('li', { class: 'muted small' }, `${all.length - SHOWN} older failures not shown`));
}
