// A task's timeline: its stages as bands and, in one lane per agent, each step as a bar on a
// shared time axis, coloured by its state; running steps grow while the view is open. Shows
// where the time went and what ran in parallel: steps of one agent that ran at the same time (a
// graph plan's) take rows of their lane side by side, and a graph step's wait from when its
// dependencies all finished (`ready_at`) to its start is a thin mark before its bar. Steps
// without a known start (none yet) are counted, not drawn.
//
// Drawn incrementally: a bar's place is in milliseconds from the task's first start, scaled by
// one CSS variable (`--k`, the share of the track one millisecond takes), so as time passes
// only that variable changes; a running bar reaches to the track's end (`right: 0`, the axis
// ends now). A lane is built again only when its agent's steps changed or the axis grew by a
// quarter (tiny steps are joined at a share of the axis).

import { h, keyed, fmt, InView } from './dom.js';
import { OVER } from './store.js';
import { stateLabel } from './ctx.js';
import { t, tn } from './i18n.js';

/** Steps closer than this share of the axis join one bar: a lane of thousands of short steps
 * stays a few hundred elements (a 5,000-step task draws as fast as a small one). */
const JOIN = 0.0025;
/** The axis may grow by this factor before the lanes are joined again at its new scale. */
const REJOIN = 1.25;

/** How a joined bar is coloured: by the state that most needs a look. */
const RANK = ['failed', 'running', 'waiting_for_approval', 'waiting_for_param', 'cancelled', 'finished'];

const rank = (state) => {
  const i = RANK.indexOf(state);
  return i < 0 ? RANK.length : i;
};

/** One lane's steps (sorted by start) as bars: single steps, or runs of tiny ones joined
 * (`join`: in ms). A running step's bar ends at `null` (now). */
function laneBars(steps, join) {
  const bars = [];
  for (const s of steps) {
    const end = s.ended_at || null;
    const last = bars[bars.length - 1];
    if (end !== null && last && last.end !== null && end - s.started_at < join && last.end - last.start < join * 4 && s.started_at - last.end < join) {
      last.end = Math.max(last.end, end);
      last.steps.push(s);
      if (rank(s.execution_state) < rank(last.state)) last.state = s.execution_state;
      continue;
    }
    bars.push({ start: s.started_at, end, steps: [s], state: s.execution_state });
  }
  return bars;
}

/** What the steps the timeline cannot place are. */
function untimed(n, task) {
  return ['finished', 'failed', 'cancelled'].includes(task.execution_state) ? tn('timeline.never_ran', n) : tn('timeline.not_started', n);
}

/** A lane's steps (sorted by start) in rows, none of which holds two steps at once: each step
 * in the first row free by its start (a running one holds its row to the end). */
function intoRows(steps) {
  const rows = [];
  const free = [];
  for (const s of steps) {
    let i = free.findIndex((t) => t <= s.started_at);
    if (i < 0) {
      i = rows.length;
      rows.push([]);
    }
    rows[i].push(s);
    // A step over without a known end does not hold its row.
    free[i] = s.ended_at || (OVER.has(s.execution_state) ? s.started_at : Infinity);
  }
  return rows;
}

/** What the colours and marks say. */
function legend() {
  const item = (cls, text, title) => h('span', { class: 'tl-key', title }, h('span', { class: cls, 'aria-hidden': 'true' }), text);
  return h(
    'div',
    { class: 'tl-legend muted small', testid: 'timeline-legend' },
    item('tl-swatch st-running', stateLabel('running')),
    item('tl-swatch st-finished', stateLabel('finished')),
    item('tl-swatch st-failed', stateLabel('failed')),
    item('tl-swatch st-cancelled', stateLabel('cancelled')),
    item('tl-swatch st-waiting_for_approval', t('timeline.key_person'), t('timeline.key_person_title')),
    item('tl-swatch tl-swatch-ready', t('timeline.key_ready'), t('timeline.key_ready_title')),
    h('span', { class: 'tl-key' }, t('timeline.key_rows')),
  );
}

/** An agent's steps in the task, read again only when its steps changed. */
function laneOf(cache, store, agentId, taskId) {
  const ver = store.stepsVersion(agentId);
  const had = cache.get(agentId);
  if (had && had.ver === ver) return had;
  const steps = [];
  let waiting = 0;
  for (const r of store.stepsOf(agentId)) {
    const s = r.state;
    if (s.task_id !== taskId) continue;
    if (s.started_at) steps.push(s);
    else waiting += 1;
  }
  // Steps that started together (a plan's parts) keep their plan's order, however they came.
  steps.sort((a, b) => a.started_at - b.started_at || (a.plan_id || '').localeCompare(b.plan_id || ''));
  const rows = intoRows(steps);
  // Each stage's first start and last end in this lane (`running`: it still runs).
  const stages = new Map();
  let lastEnd = 0;
  let running = false;
  for (const s of steps) {
    const st = stages.get(s.stage_id) || { start: s.started_at, end: 0, running: false };
    if (s.ended_at) st.end = Math.max(st.end, s.ended_at);
    else st.running = true;
    stages.set(s.stage_id, st);
    if (s.ended_at) lastEnd = Math.max(lastEnd, s.ended_at);
    else running = true;
  }
  const lane = { ver, steps, rows, waiting, stages, lastEnd, running, first: steps.length ? steps[0].started_at : 0 };
  cache.set(agentId, lane);
  return lane;
}

/** The lanes of a large team draw only what is in view (see `InView`); `redraw` asks for a
 * draw when a lane not drawn yet scrolls into view. */
let lanesInView = null;

/** ctx: {store, task, agentName, showStep(step), now, redraw()} */
export function renderTimeline(ctx, view) {
  lanesInView ||= new InView(view, ctx.redraw, { eager: 30, placeholder: () => h('div', { class: 'tl-lane placeholder' }) });
  const { store, task, now } = ctx;
  if (!task) {
    view._tl = null;
    view.replaceChildren(h('div', { class: 'empty' }, t('timeline.no_task')));
    return;
  }
  if (!view._tl || view._tl.task !== task.task_id) view._tl = { task: task.task_id, lanes: new Map(), root: null };
  const tl = view._tl;
  const lanes = [];
  let waiting = 0;
  for (const r of store.all('agent')) {
    const lane = laneOf(tl.lanes, store, r.state.agent_id, task.task_id);
    waiting += lane.waiting;
    if (lane.steps.length) lanes.push([r.state.agent_id, lane]);
  }
  const timed = lanes.reduce((n, [, l]) => n + l.steps.length, 0);
  if (!timed) {
    tl.root = null;
    view.replaceChildren(
      h('div', { class: 'empty', testid: 'timeline-empty' }, waiting ? t('timeline.none_started', { count: fmt.int(waiting) }) : t('timeline.no_steps')),
    );
    return;
  }
  // Lanes in the order their agents first started a step.
  lanes.sort((a, b) => a[1].first - b[1].first);
  const t0 = lanes[0][1].first;
  const running = lanes.some(([, l]) => l.running);
  const t1 = Math.max(t0 + 1000, running ? now : 0, ...lanes.map(([, l]) => l.lastEnd));
  const span = t1 - t0;
  // The scale the lanes were joined at; joined again once the axis outgrew it.
  if (!tl.scale || tl.t0 !== t0 || span > tl.scale * REJOIN || span < tl.scale / REJOIN) {
    tl.scale = span;
    tl.t0 = t0;
  }
  const join = tl.scale * JOIN;
  const at = (t) => (t - t0).toFixed(0);
  const place = (start, end) => (end === null ? `left:calc(var(--k) * ${at(start)});right:0` : `left:calc(var(--k) * ${at(start)});width:calc(var(--k) * ${(end - start).toFixed(0)})`);

  if (!tl.root || !view.contains(tl.root)) {
    lanesInView.reset();
    tl.axis = h('div', { class: 'tl-axis muted small' });
    tl.stageTrack = h('div', { class: 'tl-track' });
    // One click handler for every bar (thousands of them): the bar names its first step.
    tl.laneBox = h('div', {
      class: 'tl-lanes',
      onclick: (e) => {
        const id = e.target.dataset && e.target.dataset.stepId;
        const s = id && store.get('step', id);
        if (s) ctx.showStep(s);
      },
    });
    tl.untimed = h('div', { class: 'muted small' });
    tl.root = h(
      'div',
      { class: 'timeline', testid: 'timeline' },
      legend(),
      tl.axis,
      h('div', { class: 'tl-lane tl-stages' }, h('div', { class: 'tl-label muted small' }, t('timeline.stages')), tl.stageTrack),
      tl.laneBox,
      tl.untimed,
    );
    view.replaceChildren(tl.root);
  }
  tl.root.dataset.steps = String(timed);
  tl.root.style.setProperty('--k', `${(100 / span).toPrecision(6)}%`);
  tl.axis.replaceChildren(
    h('span', null, fmt.clock(t0)),
    h('span', { class: 'spacer' }),
    h('span', { testid: 'timeline-span' }, fmt.duration(span)),
    h('span', { class: 'spacer' }),
    h('span', null, fmt.clock(t1)),
  );

  // Stages: from the first start to the last end of their steps, over every lane.
  tl.stageTrack.replaceChildren(
    ...store.stagesOf(task).flatMap((r, i) => {
      const st = r.state;
      let start = Infinity;
      let end = 0;
      let open = false;
      for (const [, l] of lanes) {
        const own = l.stages.get(st.stage_id);
        if (!own) continue;
        start = Math.min(start, own.start);
        end = Math.max(end, own.end);
        open ||= own.running;
      }
      if (start === Infinity) return [];
      const took = (open ? now : end) - start;
      return [
        h(
          'div',
          { class: `tl-stage st-${st.execution_state}`, testid: 'timeline-stage', 'data-stage-id': st.stage_id, style: place(start, open ? null : end), title: t('timeline.stage_title', { i: fmt.int(i + 1), intention: st.stage_intention, took: fmt.duration(took) }) },
          `${i + 1}. ${st.stage_intention}`,
        ),
      ];
    }),
  );

  keyed(
    tl.laneBox,
    lanes,
    ([agent]) => agent,
    ([agent, l]) => `${l.ver}|${tl.scale}|${t0}|${ctx.agentName(agent)}`,
    ([agent, l]) =>
      h(
        'div',
        { class: 'tl-lane', testid: 'timeline-lane', 'data-agent-id': agent, 'data-rows': String(l.rows.length) },
        h('div', { class: 'tl-label', title: l.rows.length > 1 ? t('timeline.lane_title', { agent, rows: fmt.int(l.rows.length) }) : agent }, ctx.agentName(agent)),
        h(
          'div',
          { class: 'tl-track tl-steps' },
          l.rows.map((row, i) => h('div', { class: 'tl-row', 'data-row': String(i) }, laneBars(row, join).flatMap((b) => drawBar(b, i, place)))),
        ),
      ),
    lanesInView,
  );
  tl.untimed.textContent = waiting ? untimed(waiting, task) : '';
}

/** A bar, and before a graph step's bar the mark of its wait from ready to start; made with
 * plain DOM calls (a large task draws thousands of bars at once). */
function drawBar(b, row, place) {
  const s = b.steps[0];
  const one = b.steps.length === 1;
  const el = document.createElement('div');
  el.className = `tl-step st-${b.state}${one ? '' : ' tl-joined'}`;
  el.style.cssText = place(b.start, b.end);
  el.title = one
    ? `${s.plan_id ? `${s.plan_id}: ` : ''}${s.step_intention}\n${s.executor} · ${stateLabel(s.execution_state)}${s.ended_at ? ` · ${fmt.took(s)}` : ''}${s.ready_at ? `\n${t('timeline.ready_started', { at: fmt.clock(s.ready_at), wait: fmt.duration(Math.max(0, s.started_at - s.ready_at)) })}` : ''}`
    : t('timeline.joined', { count: fmt.int(b.steps.length), intention: s.step_intention });
  const d = el.dataset;
  d.testid = 'timeline-step';
  d.stepId = s.step_id;
  d.state = b.state;
  d.steps = String(b.steps.length);
  d.row = String(row);
  if (s.plan_id) d.planId = s.plan_id;
  const out = [el];
  if (one && s.waited_from !== undefined) out.push(waitMark(s, place));
  if (!one || !s.ready_at || s.ready_at > s.started_at) return out;
  const mark = document.createElement('div');
  mark.className = 'tl-ready';
  mark.style.cssText = place(s.ready_at, s.started_at);
  mark.title = t('timeline.ready_title', { at: fmt.clock(s.ready_at), wait: fmt.duration(s.started_at - s.ready_at) });
  mark.dataset.testid = 'timeline-ready';
  mark.dataset.stepId = s.step_id;
  return [...out, mark];
}

/** The part of a step's bar spent waiting for a person (a plan check, an approval): drawn
 * over the bar as waiting, so the run time is not read as the model's. */
function waitMark(s, place) {
  const end = s.waited_to ?? (s.ended_at || null);
  const mark = document.createElement('div');
  mark.className = 'tl-wait';
  mark.style.cssText = place(s.waited_from, end);
  mark.title = end ? t('timeline.waited_for', { from: fmt.clock(s.waited_from), took: fmt.duration(end - s.waited_from) }) : t('timeline.waited_still', { from: fmt.clock(s.waited_from) });
  mark.dataset.testid = 'timeline-wait';
  mark.dataset.stepId = s.step_id;
  return mark;
}
