// The nodes of a team across machines (GET /api/nodes, operators only): which node runs the
// team, which runs each agent, and which went away. Polled while signed in; a team served by
// one process has no nodes, and then nothing of this shows. A member is refused the route
// (403) and stops asking.

import { h } from './dom.js';
import { $, app, mark } from './ctx.js';

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

/** The tag on an agent's card naming the node it runs on (marked when that node went away). */
export function nodeTag(agentId) {
  const node = nodes.agents[agentId];
  if (!node) return null;
  const state = stateOf(node);
  const away = state !== 'up';
  return h(
    'span',
    { class: `tag${away ? ' tag-gone' : ''}`, testid: 'agent-card-node', 'data-node': node, 'data-node-state': state || 'unknown', title: away ? `node ${node} went away (${state}); the agent moves to a live node` : `runs on node ${node}` },
    away ? `node ${node} · ${state || 'gone'}` : `node ${node}`,
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
        { class: `tag${n.state === 'up' ? '' : ' tag-gone'}`, testid: 'node', 'data-node': n.name, 'data-node-state': n.state, title: n.runs_team ? `node ${n.name} runs the team` : `node ${n.name} is ${n.state}` },
        n.runs_team ? `${n.name} ★` : n.state === 'up' ? n.name : `${n.name} · ${n.state}`,
      ),
    ),
  );
}
