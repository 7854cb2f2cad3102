// A graph plan drawn as a small DAG (SVG): one node per step, with its plan id, intention and
// state, coloured by the state; an arrow from each step it depends on; the steps in levels, a
// step one level below its deepest dependency, so the steps that may run side by side sit side
// by side. A pending step says which steps it still waits for; a step that did not run because
// a dependency failed says so, and why on hover. The stage cards show their stage's plans
// (tasks.js); a click on a node opens the step in its agent's card.

import { h, fmt } from './dom.js';
import { truncate, stateLabel } from './ctx.js';
import { t, tn } from './i18n.js';

const SVG = 'http://www.w3.org/2000/svg';
/** A node's size, the gaps between nodes and levels, and the margin around them (px). */
export const NODE_W = 124;
export const NODE_H = 50;
const GAP_X = 12;
const GAP_Y = 30;
const PAD = 6;
/** How many characters of a step's intention and status fit on a node's line. */
const LINE = 19;

export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined && v !== false) el.setAttribute(k, String(v));
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** How a step is named in a plan: its plan id, else its short step id. */
export const planName = (step) => step.plan_id || fmt.short(step.step_id);

/** The copy a step runs again as after a restart cut it off (and that copy's copy), else the
 * step itself; `get` looks a step up by id. */
function standing(get, id) {
  let step = get(id);
  for (let i = 0; step && i < 16; i++) {
    const next = step.execute_result && step.execute_result.runs_again_as;
    const copy = typeof next === 'string' ? get(next) : undefined;
    if (!copy) break;
    step = copy;
  }
  return step;
}

/** The names of the steps `step` still waits for (those not finished), in its order. */
export function waitingOn(store, step) {
  const out = [];
  for (const id of step.depends_on || []) {
    const dep = standing((x) => store.get('step', x), id);
    if (dep && dep.execution_state === 'finished') continue;
    out.push(dep ? planName(dep) : fmt.short(id));
  }
  return out;
}

/** The dependency that ended without a result, for a step that therefore never ran. */
function brokenDependency(store, step) {
  if (step.started_at || !['failed', 'cancelled'].includes(step.execution_state)) return null;
  for (const id of step.depends_on || []) {
    const dep = standing((x) => store.get('step', x), id);
    if (dep && ['failed', 'cancelled'].includes(dep.execution_state)) return dep;
  }
  return null;
}

/**
 * Where each step of a plan goes: `steps` (states, in the order they came) and `plannedIds`
 * (the plan ids in the order the plan lists them, if known) → {nodes: [{step, x, y, level}],
 * edges: [{from, to}] (nodes), width, height}. A step a restart cut off is left out for the
 * copy that runs again in its place.
 */
export function layout(steps, plannedIds) {
  const byId = new Map(steps.map((st) => [st.step_id, st]));
  const shown = steps.filter((st) => {
    const next = st.execute_result && st.execute_result.runs_again_as;
    return !(typeof next === 'string' && byId.has(next));
  });
  // Plan order: as the planning step's answer lists them when it is known, else as they came.
  const listed = new Map((plannedIds || []).map((id, i) => [id, i]));
  const rank = ({ st, i }) => (listed.has(st.plan_id) ? listed.get(st.plan_id) : listed.size + i);
  const sorted = shown
    .map((st, i) => ({ st, i }))
    .sort((a, b) => rank(a) - rank(b))
    .map(({ st }) => st);
  const order = new Map(sorted.map((st, i) => [st.step_id, i]));
  const deps = new Map(
    shown.map((st) => {
      const ids = (st.depends_on || []).map((id) => standing((x) => byId.get(x), id)).filter(Boolean).map((d) => d.step_id);
      return [st.step_id, [...new Set(ids)].filter((d) => d !== st.step_id && order.has(d))];
    }),
  );
  // A step one level below its deepest dependency (a cycle, which the runtime refuses, is cut).
  const level = new Map();
  const levelOf = (id, path) => {
    if (level.has(id)) return level.get(id);
    if (path.has(id)) return 0;
    path.add(id);
    const ds = deps.get(id);
    const l = ds.length ? 1 + Math.max(...ds.map((d) => levelOf(d, path))) : 0;
    path.delete(id);
    level.set(id, l);
    return l;
  };
  const rows = [];
  for (const st of sorted) (rows[levelOf(st.step_id, new Set())] ||= []).push(st);
  const widest = Math.max(1, ...rows.map((r) => (r ? r.length : 0)));
  const width = PAD * 2 + widest * NODE_W + (widest - 1) * GAP_X;
  const at = new Map();
  const nodes = [];
  rows.forEach((row, l) => {
    if (!row) return;
    // Below the first level, a step sits under the middle of its dependencies (fewer crossings).
    const mid = (st) => {
      const xs = deps.get(st.step_id).filter((d) => at.has(d)).map((d) => at.get(d).x);
      return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
    };
    if (l > 0) row.sort((a, b) => mid(a) - mid(b) || order.get(a.step_id) - order.get(b.step_id));
    const left = PAD + ((widest - row.length) * (NODE_W + GAP_X)) / 2;
    row.forEach((st, i) => {
      const p = { step: st, x: left + i * (NODE_W + GAP_X), y: PAD + l * (NODE_H + GAP_Y), level: l };
      at.set(st.step_id, p);
      nodes.push(p);
    });
  });
  const edges = sorted.flatMap((st) => deps.get(st.step_id).map((d) => ({ from: at.get(d), to: at.get(st.step_id) })));
  const height = PAD * 2 + rows.length * NODE_H + Math.max(0, rows.length - 1) * GAP_Y;
  return { nodes, edges, width, height };
}

/** A node's status line, and the lines its hover title adds. */
function status(store, st, now) {
  const took = st.started_at ? fmt.took(st, now) : '';
  switch (st.execution_state) {
    case 'pending': {
      const waits = waitingOn(store, st);
      return waits.length ? { line: t('plan.waits_for', { steps: waits.join(', ') }), why: t('plan.waits_for_why', { steps: waits.join(', ') }) } : { line: stateLabel('pending') };
    }
    case 'init':
      return { line: st.ready_at ? t('plan.ready') : t('plan.queued') };
    case 'running':
      return { line: stateLabel('running') };
    case 'waiting_for_approval':
      return { line: t('plan.waits_for_approval') };
    case 'waiting_for_param':
      return { line: t('plan.needs_parameter') };
    case 'finished':
      return { line: took ? `${stateLabel('finished')} · ${took}` : stateLabel('finished') };
    default: {
      const dep = brokenDependency(store, st);
      const error = st.execute_result && typeof st.execute_result.error === 'string' ? st.execute_result.error : '';
      return { line: dep ? t('plan.not_run', { step: planName(dep), state: stateLabel(dep.execution_state) }) : stateLabel(st.execution_state), why: error };
    }
  }
}

/** Markers and clips need ids unique in the page: every plan's SVG has its own. */
let svgs = 0;

/**
 * The plan `plan` ({by, steps: records}, from `store.plansIn`) as a figure: a caption (whose
 * plan, how far it got, whether it was made again) and the graph, which scrolls in its own box
 * when it is wider than the card. ctx: {store, agentName, showStep(step), now}
 */
export function planGraph(ctx, plan) {
  const { store } = ctx;
  const steps = plan.steps.map((r) => r.state);
  const maker = store.get('step', plan.by);
  const planned = maker && maker.execute_result && Array.isArray(maker.execute_result.planned_step) ? maker.execute_result.planned_step.map((p) => p && p.id) : null;
  const { nodes, edges, width, height } = layout(steps, planned);
  const n = ++svgs;
  const arrow = `pg-arrow-${n}`;
  // A node's text stays inside it, however wide its letters.
  const clip = `pg-clip-${n}`;
  const byName = (p) => planName(p.step);
  // A node's arrows leave and arrive spread along its edge, in the order of the other ends.
  const spread = (list, end, other) => {
    const by = new Map();
    for (const e of list) {
      if (!by.has(e[end])) by.set(e[end], []);
      by.get(e[end]).push(e);
    }
    const at = new Map();
    for (const [node, es] of by) {
      es.sort((a, b) => a[other].x - b[other].x);
      es.forEach((e, i) => at.set(e, node.x + (NODE_W * (i + 1)) / (es.length + 1)));
    }
    return at;
  };
  const outX = spread(edges, 'from', 'to');
  const inX = spread(edges, 'to', 'from');
  const lines = edges.map((e) => {
    const { from, to } = e;
    const x1 = outX.get(e);
    const y1 = from.y + NODE_H;
    const x2 = inX.get(e);
    const y2 = to.y - 2;
    const bend = Math.min(GAP_Y, (y2 - y1) / 2);
    const done = from.step.execution_state === 'finished';
    return s(
      'path',
      {
        class: `pg-edge${done ? '' : ' pg-edge-open'}`,
        'data-testid': 'plan-edge',
        'data-from': byName(from),
        'data-to': byName(to),
        d: `M${x1},${y1} C${x1},${y1 + bend} ${x2},${y2 - bend} ${x2},${y2}`,
        'marker-end': `url(#${arrow})`,
      },
      s('title', null, done ? t('plan.edge_waits_finished', { to: byName(to), from: byName(from) }) : t('plan.edge_waits', { to: byName(to), from: byName(from) })),
    );
  });
  const boxes = nodes.map(({ step: st, x, y, level }) => {
    const { line, why } = status(store, st, ctx.now);
    const title = [
      `${st.plan_id ? `${st.plan_id}: ` : ''}${st.step_intention || t('plan.no_intention')}`,
      `${stateLabel(st.execution_state)}${st.started_at ? ` · ${t('plan.started_at', { at: fmt.clock(st.started_at) })}` : ''}${st.ended_at ? ` · ${t('plan.ran', { took: fmt.took(st) })}` : ''}${st.ready_at ? ` · ${t('plan.ready_at', { at: fmt.clock(st.ready_at) })}` : ''}`,
      why,
    ].filter(Boolean);
    const g = s(
      'g',
      {
        class: `pg-node st-${st.execution_state}`,
        'data-testid': 'plan-node',
        'data-plan-id': st.plan_id || '',
        'data-step-id': st.step_id,
        'data-state': st.execution_state,
        'data-level': level,
        'data-waits-for': st.execution_state === 'pending' ? waitingOn(store, st).join(',') : null,
        transform: `translate(${x},${y})`,
        tabindex: 0,
        role: 'button',
        'aria-label': `${planName(st)}: ${st.step_intention || ''} — ${line}`,
      },
      s('title', null, title.join('\n')),
      s('rect', { width: NODE_W, height: NODE_H, rx: 6 }),
      s(
        'g',
        { 'clip-path': `url(#${clip})` },
        s('text', { class: 'pg-id mono', x: 8, y: 15 }, truncate(st.plan_id || '·', LINE)),
        s('text', { class: 'pg-intent', x: 8, y: 29 }, truncate(st.step_intention || t('plan.no_intention'), LINE)),
        s('text', { class: 'pg-status', 'data-testid': 'plan-node-status', x: 8, y: 43 }, truncate(line, LINE + 1)),
      ),
    );
    const open = () => ctx.showStep(st);
    g.addEventListener('click', open);
    g.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' || e.key === ' ') {
        e.preventDefault();
        open();
      }
    });
    return g;
  });
  const agent = steps[0].agent_id;
  return figure(ctx, plan, nodes.map((n) => n.step), agent, s(
    'svg',
    { class: 'plan-svg', width, height, viewBox: `0 0 ${width} ${height}`, role: 'group', 'aria-label': tn('plan.graph_label', nodes.length, { agent: ctx.agentName(agent) }) },
    s(
      'defs',
      null,
      s('marker', { id: arrow, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'pg-arrowhead' })),
      s('clipPath', { id: clip }, s('rect', { x: 2, y: 2, width: NODE_W - 6, height: NODE_H - 4 })),
    ),
    lines,
    boxes,
  ));
}

/** The figure around a plan's graph: whose plan it is and how far it got. */
function figure(ctx, plan, steps, agent, svg) {
  const { store } = ctx;
  const count = (...states) => steps.filter((st) => states.includes(st.execution_state)).length;
  const parts = [
    [count('finished'), (n) => t('plan.count_finished', { count: n })],
    [count('running', 'waiting_for_approval', 'waiting_for_param'), (n) => t('plan.count_running', { count: n })],
    [count('init'), (n) => t('plan.count_ready', { count: n })],
    [count('pending'), (n) => t('plan.count_waiting', { count: n })],
    [count('failed'), (n) => t('plan.count_failed', { count: n })],
    [count('cancelled'), (n) => t('plan.count_cancelled', { count: n })],
  ].filter(([n]) => n > 0);
  const maker = store.get('step', plan.by);
  const again = store.replanned(plan.by);
  const note = (origin, words) => {
    const after = origin && store.get('step', origin.after);
    return after ? ` · ${words(planName(after))}` : '';
  };
  const counted = parts.map(([n, words]) => words(fmt.int(n))).join(t('plan.list_sep'));
  return h(
    'figure',
    { class: 'plan', testid: 'plan-graph', 'data-plan-by': plan.by, 'data-agent-id': agent, 'data-steps': String(steps.length) },
    h(
      'figcaption',
      { class: 'plan-head small' },
      h('b', null, t('plan.plan_of', { agent: ctx.agentName(agent) })),
      ` · ${parts.length ? tn('plan.steps_counted', steps.length, { counts: counted }) : tn('plan.steps', steps.length)}`,
      maker && maker.origin && maker.origin.kind === 'replan' ? note(maker.origin, (step) => t('plan.made_again_after', { step })) : null,
      again ? note(again.origin, (step) => t('plan.replanned_after', { step })) : null,
    ),
    h('div', { class: 'plan-box' }, svg),
  );
}
