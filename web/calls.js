// Why an agent did what it did: a step's LLM calls as they were sent (system and user message)
// with the raw reply (or the error), tokens and time, fetched when a person asks for them
// (`GET /api/step/{id}/calls`; the team keeps only its newest calls).

import { h, fmt } from './dom.js';

/** A button that loads the step's calls into the box after it. */
export function callsSection(stepId, load) {
  const box = h('div', { class: 'calls', testid: 'step-calls' });
  const button = h(
    'button',
    {
      type: 'button',
      class: 'btn btn-ghost btn-sm',
      testid: 'step-calls-load',
      onclick: async () => {
        button.disabled = true;
        box.replaceChildren(h('span', { class: 'muted small' }, 'loading…'));
        try {
          box.replaceChildren(...render(await load(stepId)));
        } catch (e) {
          box.replaceChildren(h('span', { class: 'step-error' }, `could not load the calls: ${e.message || e}`));
        }
        button.disabled = false;
      },
    },
    'Show prompt and raw reply',
  );
  return h('div', null, button, box);
}

function render(data) {
  const calls = (data && data.calls) || [];
  if (!calls.length) {
    return [h('p', { class: 'muted small', testid: 'step-calls-none' }, `No LLM call of this step is kept (a team keeps its newest ${data && data.kept} calls; steps without a model call have none).`)];
  }
  return calls.map((c, i) =>
    h(
      'div',
      { class: 'call', testid: 'step-call' },
      h(
        'div',
        { class: 'label' },
        calls.length > 1 ? `Try ${i + 1} of ${calls.length} · ` : '',
        `${c.skill} · sent ${fmt.clock(c.sent_at)} · ${fmt.duration(c.answered_at - c.sent_at)}`,
        fmt.tokens(c.usage) ? ` · ${fmt.tokens(c.usage)}` : '',
        c.cut === 'token_limit' ? ' · cut off at max_tokens' : c.cut === 'repetition' ? ' · stopped: it repeated itself' : '',
      ),
      h('details', { class: 'fold' }, h('summary', null, `System message (${c.system.length} chars)`), h('pre', { class: 'pre call-text' }, c.system)),
      h('details', { class: 'fold' }, h('summary', null, `Prompt (${c.prompt.length} chars${c.tool_rounds ? `, ${c.tool_rounds} tool rounds` : ''})`), h('pre', { class: 'pre call-text', testid: 'step-call-prompt' }, c.prompt)),
      c.error
        ? h('p', { class: 'step-error' }, `Error: ${c.error}`)
        : h('div', null, h('div', { class: 'label' }, 'Raw reply'), h('pre', { class: 'pre call-text', testid: 'step-call-reply' }, c.reply)),
    ),
  );
}
