// What a message may choose for its receivers' work on it (seed 004: the message's choice wins
// over the agent's own): one of the team's named models every receiver may be given (its
// `models`), and which of the MCP servers every receiver may call it offers. Shown only when
// there is something to choose; what is left as it is sends nothing.

import { h } from './dom.js';
import { t } from './i18n.js';
import { store } from './ctx.js';

/** What all `ids` share of a list each agent state has (`models` or `tools`). */
function shared(ids, key) {
  const lists = ids.map((id) => (store.get('agent', id) || {})[key] || []);
  if (!lists.length) return [];
  return lists[0].filter((x) => lists.every((l) => l.includes(x)));
}

/** Draws the choice for `receivers` (agent ids), keeping what the person picked. */
export function renderChoice(receivers) {
  const box = document.getElementById('c-choice');
  const models = shared(receivers, 'models');
  const tools = shared(receivers, 'tools');
  const sig = JSON.stringify([models, tools]);
  if (box.dataset.sig === sig) return;
  box.dataset.sig = sig;
  box.hidden = !models.length && !tools.length;
  const was = choiceBody();
  const llm = h(
    'select',
    { id: 'c-llm', testid: 'composer-llm', title: t('choice.model_title') },
    h('option', { value: '' }, t('choice.own_model')),
    models.map((m) => h('option', { value: m, class: 'mono', selected: was.llm === m }, m)),
  );
  const servers = tools.map((server) =>
    h(
      'label',
      { class: 'check mono', testid: 'composer-server', 'data-server': server },
      h('input', { type: 'checkbox', value: server, checked: !was.mcp_servers || was.mcp_servers.includes(server) }),
      ` ${server}`,
    ),
  );
  box.replaceChildren(
    models.length ? h('label', null, t('choice.model'), ' ', llm) : '',
    tools.length ? h('span', { class: 'choice-servers', title: t('choice.servers_title') }, h('span', { class: 'muted small' }, t('choice.tools')), servers) : '',
  );
}

/** `{llm?, mcp_servers?}` for the send body: only what the person changed. */
export function choiceBody() {
  const out = {};
  const llm = document.getElementById('c-llm');
  if (llm && llm.value) out.llm = llm.value;
  const boxes = [...document.querySelectorAll('#c-choice [data-testid="composer-server"] input')];
  if (boxes.some((b) => !b.checked)) out.mcp_servers = boxes.filter((b) => b.checked).map((b) => b.value);
  return out;
}
