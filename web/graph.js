// Who talks to whom in a task: its agents as nodes on a circle, its group conversation's
// messages as arrows (thicker for more messages), an agent waiting for a reply ringed, and an
// arrow whose newest message asked for a reply its sender still waits for drawn dashed. Read from the task's conversation
// pool, which keeps the newest messages: the graph says how many it counts.

import { h, fmt } from './dom.js';
import { t, tn } from './i18n.js';

const SVG = 'http://www.w3.org/2000/svg';
const SIZE = 420;
const RADIUS = 150;
const NODE = 26;

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) el.setAttribute(k, String(v));
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** The edges of a conversation: `sender→receiver` → {from, to, count, waits}. */
export function edgesOf(pool) {
  const edges = new Map();
  for (const entry of pool || []) {
    const m = (entry && entry.message) || {};
    if (!m.sender_id || m.sender_id === '[TaskState]') continue;
    for (const to of m.receiver || []) {
      if (to === m.sender_id) continue;
      const key = `${m.sender_id}\u2192${to}`;
      const e = edges.get(key) || { from: m.sender_id, to, count: 0, waits: false, waitIds: [] };
      e.count += 1;
      // The newest message's wait ids: the arrow is dashed while its sender still holds one.
      e.waitIds = (m.waiting && m.waiting.length ? m.waiting : []).map(String);
      edges.set(key, e);
    }
  }
  return [...edges.values()];
}

/** ctx: {store, task, agentName, showAgent(id)} */
export function renderGraph(ctx, view) {
  const { store, task } = ctx;
  if (!task) {
    view.replaceChildren(h('div', { class: 'empty' }, t('graph.no_task')));
    return;
  }
  const pool = task.shared_conversation_pool || [];
  const edges = edgesOf(pool);
  const ids = [...new Set([...(task.task_group || []), ...edges.flatMap((e) => [e.from, e.to])])];
  if (!ids.length) {
    view.replaceChildren(h('div', { class: 'empty' }, t('graph.no_agents')));
    return;
  }
  const c = SIZE / 2;
  const at = new Map(
    ids.map((id, i) => {
      const a = (2 * Math.PI * i) / ids.length - Math.PI / 2;
      return [id, { x: c + RADIUS * Math.cos(a), y: c + RADIUS * Math.sin(a) }];
    }),
  );
  const most = Math.max(1, ...edges.map((e) => e.count));
  // Dashed only while its sender still holds that message's wait: an answered question is
  // history.
  for (const e of edges) {
    const a = store.get('agent', e.from);
    const held = new Set(a && Array.isArray(a.step_lock) ? a.step_lock.map(String) : []);
    e.waits = e.waitIds.some((w) => held.has(w));
  }
  const arrows = edges.map((e) => {
    const p = at.get(e.from);
    const q = at.get(e.to);
    // Both directions of a pair are drawn apart: each bends to its own side.
    const dx = q.x - p.x;
    const dy = q.y - p.y;
    const len = Math.hypot(dx, dy) || 1;
    const ux = dx / len;
    const uy = dy / len;
    const bend = 18;
    const start = { x: p.x + ux * NODE, y: p.y + uy * NODE };
    const end = { x: q.x - ux * (NODE + 4), y: q.y - uy * (NODE + 4) };
    const mid = { x: (start.x + end.x) / 2 - uy * bend, y: (start.y + end.y) / 2 + ux * bend };
    return s(
      'g',
      { class: `g-edge${e.waits ? ' g-wait' : ''}`, 'data-testid': 'graph-edge', 'data-from': e.from, 'data-to': e.to, 'data-count': e.count },
      s('title', null, e.waits ? tn('graph.edge_waiting', e.count, { from: ctx.agentName(e.from), to: ctx.agentName(e.to) }) : tn('graph.edge', e.count, { from: ctx.agentName(e.from), to: ctx.agentName(e.to) })),
      s('path', { d: `M${start.x},${start.y} Q${mid.x},${mid.y} ${end.x},${end.y}`, 'stroke-width': 1.5 + (3 * e.count) / most, 'marker-end': 'url(#g-arrow)', fill: 'none' }),
      s('text', { x: mid.x, y: mid.y, class: 'g-count' }, fmt.int(e.count)),
    );
  });
  const nodes = ids.map((id) => {
    const p = at.get(id);
    const a = store.get('agent', id);
    const waiting = a && a.working_state === 'waiting';
    const human = a && a.human_config;
    return s(
      'g',
      { class: `g-node${waiting ? ' g-waiting' : ''}${human ? ' g-human' : ''}`, 'data-testid': 'graph-node', 'data-agent-id': id, 'data-waiting': waiting ? 'true' : 'false', transform: `translate(${p.x},${p.y})`, tabindex: 0, role: 'button' },
      s('title', null, `${ctx.agentName(id)} (${id})${waiting ? ` · ${t('graph.waiting_for_reply')}` : ''}`),
      s('circle', { r: NODE }),
      s('text', { class: 'g-initial', dy: '0.35em' }, (ctx.agentName(id) || id).slice(0, 1).toUpperCase()),
      s('text', { class: 'g-name', y: NODE + 14 }, ctx.agentName(id)),
    );
  });
  for (const n of nodes) n.addEventListener('click', () => ctx.showAgent(n.getAttribute('data-agent-id')));
  const omitted = task.shared_conversation_omitted || 0;
  view.replaceChildren(
    h(
      'div',
      { class: 'graph', testid: 'message-graph' },
      s(
        'svg',
        { viewBox: `0 0 ${SIZE} ${SIZE}`, class: 'graph-svg', role: 'img', 'aria-label': t('graph.label') },
        s('defs', null, s('marker', { id: 'g-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'g-arrowhead' }))),
        arrows,
        nodes,
      ),
      h('p', { class: 'muted small' }, omitted ? tn('graph.legend_omitted', pool.length, { omitted: fmt.int(omitted) }) : tn('graph.legend', pool.length)),
    ),
  );
}
