// Why an agent did what it did: a step's LLM calls as they were sent (system and user message)
// with the raw reply (or the error), tokens and time, fetched when a person asks for them
// (`GET /api/step/{id}/calls`; the team keeps only its newest calls).

import { h, fmt } from './dom.js';
import { t } from './i18n.js';

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
        box.replaceChildren(h('span', { class: 'muted small' }, t('calls.loading')));
        try {
          box.replaceChildren(...render(await load(stepId)));
        } catch (e) {
          box.replaceChildren(h('span', { class: 'step-error' }, t('calls.load_failed', { error: e.message || e })));
        }
        button.disabled = false;
      },
    },
    t('calls.show'),
  );
  return h('div', null, button, box);
}

function render(data) {
  const calls = (data && data.calls) || [];
  if (!calls.length) {
    return [h('p', { class: 'muted small', testid: 'step-calls-none' }, t('calls.none_kept', { kept: data && data.kept }))];
  }
  return calls.map((c, i) =>
    h(
      'div',
      { class: 'call', testid: 'step-call' },
      h(
        'div',
        { class: 'label' },
        calls.length > 1 ? `${t('calls.try_of', { try: fmt.int(i + 1), total: fmt.int(calls.length) })} · ` : '',
        h('span', { class: 'mono' }, c.skill),
        ` · ${t('calls.sent', { at: fmt.clock(c.sent_at), took: fmt.duration(c.answered_at - c.sent_at) })}`,
        fmt.tokens(c.usage) ? ` · ${fmt.tokens(c.usage)}` : '',
        c.cut === 'token_limit' ? ` · ${t('calls.cut_max_tokens')}` : c.cut === 'repetition' ? ` · ${t('calls.cut_repetition')}` : '',
      ),
      h('details', { class: 'fold' }, h('summary', null, t('calls.system_message', { chars: fmt.int(c.system.length) })), h('pre', { class: 'pre call-text' }, c.system)),
      h('details', { class: 'fold' }, h('summary', null, c.tool_rounds ? t('calls.prompt_rounds', { chars: fmt.int(c.prompt.length), rounds: fmt.int(c.tool_rounds) }) : t('calls.prompt', { chars: fmt.int(c.prompt.length) })), h('pre', { class: 'pre call-text', testid: 'step-call-prompt' }, c.prompt)),
      c.error
        ? h('p', { class: 'step-error' }, t('calls.error', { error: c.error }))
        : h('div', null, h('div', { class: 'label' }, t('calls.raw_reply')), h('pre', { class: 'pre call-text', testid: 'step-call-reply' }, c.reply)),
    ),
  );
}
