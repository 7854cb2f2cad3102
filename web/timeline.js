// A task's timeline: its stages as bands and, in one lane per agent, each step as a bar on a
// shared time axis, coloured by its state; running steps grow while the view is open. Shows
// where the time went and what ran in parallel. Steps without a known start (none yet) are
// counted, not drawn.

import { h, fmt } from './dom.js';

/** Bars narrower than this share of the axis are drawn this wide, so none vanish. */
const MIN_WIDTH = 0.4;
/** Steps closer than this share of the axis join one bar: a lane of thousands of short steps
 * stays a few hundred elements (a 5,000-step task draws as fast as a small one). */
const JOIN = 0.25;

/** How a joined bar is coloured: by the state that most needs a look. */
const RANK = ['failed', 'running', 'waiting_for_approval', 'waiting_for_param', 'cancelled', 'finished'];

/** One lane's steps (sorted by start) as bars: single steps, or runs of tiny ones joined. */
function lanesBars(steps, x, now) {
  const bars = [];
  for (const s of steps) {
    const start = x(s.started_at);
    const end = x(s.ended_at || now);
    const last = bars[bars.length - 1];
    if (last && end - start < JOIN && last.end - last.start < JOIN * 4 && start - last.end < JOIN) {
      last.end = Math.max(last.end, end);
      last.steps.push(s);
      if (RANK.indexOf(s.execution_state) >= 0 && (RANK.indexOf(last.state) < 0 || RANK.indexOf(s.execution_state) < RANK.indexOf(last.state))) last.state = s.execution_state;
      continue;
    }
    bars.push({ start, end, steps: [s], state: s.execution_state });
  }
  return bars;
}

/** What the steps the timeline cannot place are. */
function untimed(n, task) {
  const steps = n === 1 ? '1 step' : `${n} steps`;
  return ['finished', 'failed', 'cancelled'].includes(task.execution_state) ? `${steps} never ran (dropped when the work ended)` : `${steps} not started yet`;
}

/** ctx: {store, task, agentName, showStep(step), now} */
export function renderTimeline(ctx, view) {
  const { store, task } = ctx;
  if (!task) {
    view.replaceChildren(h('div', { class: 'empty' }, 'No task selected.'));
    return;
  }
  const steps = store
    .all('step')
    .map((r) => r.state)
    .filter((s) => s.task_id === task.task_id);
  const timed = steps.filter((s) => s.started_at);
  if (!timed.length) {
    view.replaceChildren(
      h('div', { class: 'empty', testid: 'timeline-empty' }, steps.length ? `${steps.length} steps, none started yet.` : 'No steps in this task yet.'),
    );
    return;
  }
  const now = ctx.now;
  const t0 = Math.min(...timed.map((s) => s.started_at));
  const t1 = Math.max(t0 + 1000, ...timed.map((s) => s.ended_at || now));
  const span = t1 - t0;
  const x = (t) => ((t - t0) / span) * 100;
  const bar = (start, end, props, ...children) => {
    const left = x(start);
    const width = Math.max(MIN_WIDTH, x(end) - left);
    return h('div', { ...props, style: `left:${left.toFixed(3)}%;width:${width.toFixed(3)}%` }, ...children);
  };

  // Stages: from the first start to the last end of their steps.
  const stageRows = store.stagesOf(task).map((r, i) => {
    const st = r.state;
    const own = timed.filter((s) => s.stage_id === st.stage_id);
    if (!own.length) return null;
    const start = Math.min(...own.map((s) => s.started_at));
    const end = Math.max(...own.map((s) => s.ended_at || now));
    return bar(
      start,
      end,
      { class: `tl-stage st-${st.execution_state}`, testid: 'timeline-stage', 'data-stage-id': st.stage_id, title: `Stage ${i + 1}: ${st.stage_intention} · ${fmt.duration(end - start)}` },
      `${i + 1}. ${st.stage_intention}`,
    );
  });

  // One lane per agent, in the order they first started a step.
  const lanes = new Map();
  for (const s of [...timed].sort((a, b) => a.started_at - b.started_at)) {
    if (!lanes.has(s.agent_id)) lanes.set(s.agent_id, []);
    lanes.get(s.agent_id).push(s);
  }
  const laneRows = [...lanes].map(([agent, own]) =>
    h(
      'div',
      { class: 'tl-lane', testid: 'timeline-lane', 'data-agent-id': agent },
      h('div', { class: 'tl-label', title: agent }, ctx.agentName(agent)),
      h(
        'div',
        { class: 'tl-track' },
        lanesBars(own, x, now).map((b) => {
          const s = b.steps[0];
          const one = b.steps.length === 1;
          return h('div', {
            class: `tl-step st-${b.state}${one ? '' : ' tl-joined'}`,
            testid: 'timeline-step',
            'data-step-id': s.step_id,
            'data-state': b.state,
            'data-steps': String(b.steps.length),
            style: `left:${b.start.toFixed(3)}%;width:${Math.max(MIN_WIDTH, b.end - b.start).toFixed(3)}%`,
            title: one ? `${s.step_intention}\n${s.executor} · ${s.execution_state} · ${fmt.took(s, now)}` : `${b.steps.length} short steps, from “${s.step_intention}”`,
            onclick: () => ctx.showStep(s),
          });
        }),
      ),
    ),
  );

  view.replaceChildren(
    h(
      'div',
      { class: 'timeline', testid: 'timeline', 'data-steps': String(timed.length) },
      h(
        'div',
        { class: 'tl-axis muted small' },
        h('span', null, fmt.clock(t0)),
        h('span', { class: 'spacer' }),
        h('span', { testid: 'timeline-span' }, fmt.duration(span)),
        h('span', { class: 'spacer' }),
        h('span', null, fmt.clock(t1)),
      ),
      h('div', { class: 'tl-lane tl-stages' }, h('div', { class: 'tl-label muted small' }, 'Stages'), h('div', { class: 'tl-track' }, stageRows)),
      laneRows,
      steps.length > timed.length ? h('div', { class: 'muted small' }, untimed(steps.length - timed.length, task)) : null,
    ),
  );
}
