// The nodes of a team across machines (GET /api/nodes, operators only): which node runs the
// team, which runs each agent, and which went away. Polled while signed in; a team served by
// one process has no nodes, and then nothing of this shows. A member is refused the route
// (403) and stops asking.

import { h } from './dom.js';
import { $, app, mark } from './ctx.js';
import { t } from './i18n.js';

const EVERY_MS = 3000;

/** The last answer: `{nodes: [{name, state, runs_team}], agents: {agent_id: node}}`. */
export const nodes = { list: [], agents: {}, sig: '' };
let timer = null;

/** Starts asking for the nodes (again, after a sign-in). */
export function startNodes() {
  stopNodes();
  poll();
  timer = setInterval(poll, EVERY_MS);
}

export function stopNodes() {
  clearInterval(timer);
  timer = null;
  Object.assign(nodes, { list: [], agents: {}, sig: '' });
}

async function poll() {
  if (!app.client) return;
  let got;
  try {
    got = await app.client.nodes();
  } catch (e) {
    // A member may not see them; any other failure is tried again at the next poll.
    if (String(e.message).includes('only an operator')) clearInterval(timer);
    return;
  }
  const sig = JSON.stringify([got.nodes.map((n) => [n.name, n.state, n.runs_team]), got.agents]);
  if (sig === nodes.sig) return;
  Object.assign(nodes, { list: got.nodes, agents: got.agents, sig });
  mark('agents', 'nodes');
}

/** The state of node `name` (`up`, `stopped`, `gone`), if the team has it. */
function stateOf(name) {
  return nodes.list.find((n) => n.name === name)?.state;
}

/** A node's state (`up`, `stopped`, `gone`) for people; an unknown one as it came. */
function stateText(state) {
  if (state === 'up') return t('nodes.state_up');
  if (state === 'stopped') return t('nodes.state_stopped');
  if (state === 'gone') return t('nodes.state_gone');
  return String(state);
}

/** The tag on an agent's card naming the node it runs on (marked when that node went away). */
export function nodeTag(agentId) {
  const node = nodes.agents[agentId];
  if (!node) return null;
  const state = stateOf(node);
  const away = state !== 'up';
  return h(
    'span',
    { class: `tag mono${away ? ' tag-gone' : ''}`, testid: 'agent-card-node', 'data-node': node, 'data-node-state': state || 'unknown', title: away ? t('nodes.went_away', { node, state: stateText(state) }) : t('nodes.runs_on', { node }) },
    away ? t('nodes.node_state', { node, state: stateText(state || 'gone') }) : t('nodes.node', { node }),
  );
}

/** The topbar's line of nodes: each with its state, the one running the team first. */
export function renderNodes() {
  const box = $('nodes-line');
  box.hidden = !nodes.list.length;
  const sorted = [...nodes.list].sort((a, b) => Number(b.runs_team) - Number(a.runs_team) || a.name.localeCompare(b.name));
  box.replaceChildren(
    ...sorted.map((n) =>
      h(
        'span',
        { class: `tag mono${n.state === 'up' ? '' : ' tag-gone'}`, testid: 'node', 'data-node': n.name, 'data-node-state': n.state, title: n.runs_team ? t('nodes.runs_team', { node: n.name }) : t('nodes.is_state', { node: n.name, state: stateText(n.state) }) },
        n.runs_team ? `${n.name} ★` : n.state === 'up' ? n.name : `${n.name} · ${stateText(n.state)}`,
      ),
    ),
  );
}
