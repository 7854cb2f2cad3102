// A plan waiting for a person's check, as the graph it is: each step with its plan id, the
// steps it waits for and its replan mark, the graph sketched (levels and arrows, as the stage
// cards draw a running plan), and an edit that keeps ids, dependencies and replan marks and is
// checked before it is sent: duplicate or unknown ids, a step that waits for itself and a
// circle are refused here with the reason, as the runtime would refuse them.

import { h } from './dom.js';
import { layout, s, NODE_W, NODE_H } from './plan.js';
import { t } from './i18n.js';

/** A planned step as the person sees and edits it: what the runtime reads of an edit. */
export function editable(p) {
  const out = { step_intention: p.step_intention, type: p.type, executor: p.executor, text_content: p.text_content };
  if (p.id) out.id = p.id;
  if ((p.depends_on || []).length) out.depends_on = [...p.depends_on];
  if (p.replan) out.replan = true;
  return out;
}

/** Whether the steps form a graph plan (any of them has an id). */
export const isGraph = (steps) => steps.some((p) => p.id);

/** Why an edited plan's graph cannot run, or null: checked as the runtime checks a plan. */
export function graphProblem(steps) {
  if (!Array.isArray(steps) || !steps.length) return t('plan_check.needs_a_step');
  const ids = new Set();
  for (const p of steps) {
    if (!p || typeof p !== 'object') return t('plan_check.step_not_object');
    if (p.id === undefined || p.id === null) continue;
    if (typeof p.id !== 'string' || !p.id.trim()) return t('plan_check.id_empty');
    if (ids.has(p.id)) return t('plan_check.id_twice', { id: p.id });
    ids.add(p.id);
  }
  for (const p of steps) {
    for (const d of p.depends_on || []) {
      if (d === p.id) return t('plan_check.waits_for_itself', { id: p.id });
      if (!ids.has(d)) return t('plan_check.waits_for_unknown', { step: p.id || p.step_intention, dep: d });
    }
  }
  const circle = findCircle(steps);
  return circle ? t('plan_check.circle', { steps: circle.join(' → ') }) : null;
}

/** A circle of dependencies (its ids, the first again at the end), or null. */
function findCircle(steps) {
  const deps = new Map(steps.filter((p) => p.id).map((p) => [p.id, p.depends_on || []]));
  const state = new Map();
  const path = [];
  const visit = (id) => {
    if (state.get(id) === 'done') return null;
    if (state.get(id) === 'open') return [...path.slice(path.indexOf(id)), id];
    state.set(id, 'open');
    path.push(id);
    for (const d of deps.get(id) || []) {
      const found = visit(d);
      if (found) return found;
    }
    path.pop();
    state.set(id, 'done');
    return null;
  };
  for (const id of deps.keys()) {
    const found = visit(id);
    if (found) return found;
  }
  return null;
}

/** The plan's steps listed: id, executor, intention, what each waits for, replan marks. */
export function stepList(steps) {
  return h(
    'ol',
    { class: 'small plan-check-steps' },
    steps.map((p) =>
      h(
        'li',
        { testid: 'plan-check-step', 'data-plan-id': p.id || '' },
        p.id ? h('span', { class: 'tag mono' }, p.id) : null,
        h('span', { class: 'mono' }, ` [${p.executor}] `),
        p.step_intention,
        (p.depends_on || []).length ? h('span', { class: 'muted', testid: 'plan-check-after' }, ` · ${t('plan_check.after', { steps: p.depends_on.join(', ') })}`) : null,
        p.replan ? h('span', { class: 'flag', title: t('plan_check.replan_title') }, t('plan_check.replan')) : null,
      ),
    ),
  );
}

/** The graph sketched: a node per step in levels, an arrow from each step it waits for. */
export function sketch(steps) {
  // As step states, so the stage cards' layout places them (a plan id is its own step id here).
  const states = steps.map((p) => ({ step_id: p.id, plan_id: p.id, depends_on: p.depends_on || [], step_intention: p.step_intention }));
  const { nodes, edges, width, height } = layout(states, steps.map((p) => p.id));
  const at = new Map(nodes.map((n) => [n.step.step_id, n]));
  return s(
    'svg',
    { class: 'plan-check-sketch', width, height, viewBox: `0 0 ${width} ${height}`, 'data-testid': 'plan-check-sketch', role: 'img', 'aria-label': t('plan_check.sketch_label') },
    edges.map(({ from, to }) =>
      s('line', { class: 'pg-edge', 'data-testid': 'plan-check-edge', 'data-from': from.step.step_id, 'data-to': to.step.step_id, x1: from.x + NODE_W / 2, y1: from.y + NODE_H, x2: to.x + NODE_W / 2, y2: to.y }),
    ),
    [...at.values()].map((n) =>
      s(
        'g',
        { class: 'pg-node st-pending', 'data-testid': 'plan-check-node', 'data-plan-id': n.step.step_id },
        s('rect', { x: n.x, y: n.y, width: NODE_W, height: NODE_H, rx: 6 }),
        s('text', { x: n.x + 8, y: n.y + 20, class: 'pg-id mono' }, n.step.step_id),
        s('text', { x: n.x + 8, y: n.y + 38, class: 'pg-intent' }, String(n.step.step_intention || '').slice(0, 19)),
      ),
    ),
  );
}
