// Forks in the console: a task forked from a recorded one says so (and leads to it), and a
// failed step offers "Fork from here": the `cohort replay --fork-at` command that replays the
// team's run up to the step and goes on from it with the live model, its step text editable
// here. The fork is written into a copy of the team's store, beside the recorded task; the
// command runs where the team's files are, while this console's team goes on.

import { h, fmt } from './dom.js';
import { t } from './i18n.js';

/** "forked from “task” at step …" in a forked task's head; a click shows the recorded task. */
export function forkedFromItem(task, names, select) {
  const from = task.forked_from;
  if (!from) return null;
  return h(
    'button',
    {
      type: 'button',
      class: 'meta-item muted fork-from',
      testid: 'task-forked-from',
      'data-task-id': from.task_id,
      'data-step-id': from.step_id,
      title: t('fork.forked_from_title', { step: from.step_id }),
      onclick: () => select(from.task_id),
    },
    t('fork.forked_from', { task: names.task(from.task_id), step: fmt.short(from.step_id) }),
  );
}

/** A shell word: quoted when it holds anything a shell would read. */
function shellWord(text) {
  return /^[\w./:=@-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}

/** The command that forks the run at step `s`, with `text` as its step text when it changed. */
export function forkCommand(s, text) {
  const words = ['cohort', 'replay', '--team', 'TEAM.yaml', '--data', 'STORE.db', '--fork-at', s.step_id];
  if (text !== s.text_content) words.push('--step-text', shellWord(text));
  return words.join(' ');
}

/** "Fork from here" on a failed step: its text to edit, the command, and a copy button. */
export function forkSection(s) {
  if (s.execution_state !== 'failed') return null;
  const command = h('code', { class: 'fork-command mono', testid: 'step-fork-command' }, forkCommand(s, s.text_content));
  const text = h('textarea', {
    class: 'fork-text',
    testid: 'step-fork-text',
    rows: 3,
    'aria-label': t('fork.step_text_label'),
    oninput: () => {
      command.textContent = forkCommand(s, text.value);
    },
  });
  text.value = s.text_content || '';
  const copy = () => navigator.clipboard && navigator.clipboard.writeText(command.textContent).catch(() => {});
  const body = h(
    'div',
    { class: 'fork-body', hidden: true },
    h('p', { class: 'muted small' }, t('fork.explain')),
    h('label', { class: 'label' }, t('fork.step_text'), text),
    h('div', { class: 'fork-line' }, command, h('button', { type: 'button', class: 'btn btn-ghost btn-sm', testid: 'step-fork-copy', onclick: copy }, t('fork.copy'))),
  );
  const open = h(
    'button',
    {
      type: 'button',
      class: 'btn btn-ghost btn-sm',
      testid: 'step-fork',
      'aria-expanded': 'false',
      onclick: () => {
        body.hidden = !body.hidden;
        open.setAttribute('aria-expanded', String(!body.hidden));
      },
    },
    t('fork.fork_from_here'),
  );
  return h('div', { class: 'fork', testid: 'step-fork-section' }, open, body);
}
