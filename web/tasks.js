// The tasks: the task list on the left (each with its running stage and stage dots), the
// selected task's head (state, manager, group, pause/cancel) and its stages view (the summary,
// each stage's allocation and summaries, its agents' graph plans (plan.js), the shared info).
// Which task is shown: the one the person picked, else the newest running one, followed as new
// tasks start.

import { h, keyed, lazyDetails, fmt, elapsed } from './dom.js';
import { $, app, store, ui, mark, agentChip, agentName, isBase, taskTitle, badge, stateLabel, tasksInOrder, matches, taskName, NO_RELATIVE } from './ctx.js';
import { t, tn } from './i18n.js';
import { control, confirmCancel } from './control.js';
import { planGraph } from './plan.js';
import { showStep } from './agents.js';
import { waitsIn, waitLabel } from './waiting.js';
import { forkedFromItem } from './fork.js';
import { fileList } from './attachments.js';

/** Keeps the shown task when the person picked it, else follows the newest running one. */
export function ensureSelectedTask() {
  const tasks = tasksInOrder();
  if (ui.taskPicked && store.get('task', ui.taskId)) return;
  // Follow the newest real task (running first), else the base task.
  const real = tasks.filter((r) => !isBase(r.state));
  const pick = real.find((r) => r.state.execution_state === 'running') || real[0] || tasks[0];
  const id = pick ? pick.state.task_id : null;
  if (id !== ui.taskId) {
    ui.taskId = id;
    ui.taskPicked = false;
    mark('detail', 'chat', 'composer', 'agents', 'timeline', 'graph');
  }
}

/** The person picked a task: it is shown, and a message not yet begun goes to it. */
export function selectTask(id) {
  ui.taskId = id;
  ui.taskPicked = true;
  if (!ui.replyTo && !$('c-content').value.trim()) {
    ui.composerTask = id;
    ui.composerTaskPicked = false;
  }
  mark('tasks', 'detail', 'chat', 'agents', 'composer', 'timeline', 'graph');
}

function stageLabel(task) {
  const stages = store.stagesOf(task);
  if (!stages.length) return isBase(task) ? t('tasks.base_never_finishes') : t('tasks.no_stages_yet');
  const i = stages.findIndex((r) => r.state.execution_state === 'running');
  if (i >= 0) return t('tasks.stage_running', { no: fmt.int(i + 1), count: fmt.int(stages.length), intention: stages[i].state.stage_intention });
  const waiting = stages.findIndex((r) => r.state.execution_state === 'init');
  if (waiting >= 0) return t('tasks.stage_next', { no: fmt.int(waiting + 1), count: fmt.int(stages.length), intention: stages[waiting].state.stage_intention });
  // A stage the task's record says gave no result is not counted as finished.
  const nothing = gaveNothing(task);
  const done = stages.filter((r) => r.state.execution_state === 'finished' && !nothing.has(r.state.stage_id)).length;
  return t('tasks.stages_finished', { done: fmt.int(done), count: fmt.int(stages.length) });
}

export function renderTaskList() {
  const list = $('task-list');
  const all = tasksInOrder();
  const tasks = all.filter((r) => matches(r.state.task_name, r.state.task_intention, r.state.task_id));
  $('task-count').textContent = tasks.length === all.length ? (all.length ? fmt.int(all.length) : '') : t('tasks.count_of', { shown: fmt.int(tasks.length), all: fmt.int(all.length) });
  keyed(
    list,
    tasks,
    (r) => r.state.task_id,
    (r) => `${r.version}|${store.stagesOf(r.state).map((s) => s.version).join(',')}|${r.state.task_id === ui.taskId}|${waitsIn(r.state.task_id).length}`,
    (r) => {
      const task = r.state;
      const stages = store.stagesOf(task);
      return h(
        'li',
        {
          class: `task-item${task.task_id === ui.taskId ? ' selected' : ''}${isBase(task) ? ' base' : ''}`,
          testid: 'task-item',
          'data-task-id': task.task_id,
          'data-task-name': task.task_name,
          'data-state': task.execution_state,
          'data-base': isBase(task) ? 'true' : 'false',
          'data-stage-count': String(stages.length),
          tabindex: '0',
          role: 'button',
          'aria-pressed': task.task_id === ui.taskId ? 'true' : 'false',
          onclick: () => selectTask(task.task_id),
          onkeydown: (e) => {
            if (e.key === 'Enter' || e.key === ' ') {
              e.preventDefault();
              selectTask(task.task_id);
            }
          },
        },
        h('div', { class: 'task-item-top' }, h('span', { class: 'task-name' }, taskTitle(task)), isBase(task) ? h('span', { class: 'tag' }, t('tasks.base')) : null, isBase(task) ? null : elapsed(task.started_at, task.ended_at, store.now(), { class: 'task-elapsed muted small', testid: 'task-elapsed' }), outcomeBadge(task, 'task-state')),
        h('div', { class: 'task-item-stage', testid: 'task-running-stage' }, stageLabel(task), stagesFailedFlag(task), waitsIn(task.task_id).length ? h('span', { class: 'flag flag-you', testid: 'task-waits-you-flag' }, t('tasks.waits_for_you')) : null),
        stages.length
          ? h(
              'div',
              { class: 'stage-dots', 'aria-hidden': 'true' },
              stages.map((s) => {
                const why = gaveNothing(task).get(s.state.stage_id);
                const state = why ? 'failed' : s.state.execution_state;
                return h('span', { class: `dot st-${state}`, title: `${s.state.stage_intention} — ${why ? t('tasks.no_result_why', { why }) : stateLabel(state)}` });
              }),
            )
          : null,
      );
    },
  );
  if (!tasks.length) list.replaceChildren(h('li', { class: 'empty' }, ui.filter ? t('tasks.no_task_matches') : t('tasks.no_tasks_yet')));
}

export function renderTaskHead() {
  const head = $('task-head');
  const task = store.get('task', ui.taskId);
  if (!task) {
    head.replaceChildren(h('div', { class: 'empty' }, t('tasks.waiting_for_team')));
    head.removeAttribute('data-task-id');
    return;
  }
  head.dataset.taskId = task.task_id;
  head.dataset.state = task.execution_state;
  const tokens = fmt.tokens(task.token_usage);
  const over = ['finished', 'failed', 'cancelled'].includes(task.execution_state);
  const controls = isBase(task) || over
    ? null
    : h(
        'span',
        { class: 'task-controls' },
        h('button', { type: 'button', class: 'btn btn-ghost btn-sm', testid: 'task-pause', onclick: () => control(app.client.pauseTask(task.task_id, !task.paused)) }, task.paused ? t('tasks.resume') : t('tasks.pause')),
        h('button', { type: 'button', class: 'btn btn-ghost btn-sm btn-danger', testid: 'task-cancel', onclick: () => confirmCancel(t('tasks.cancel_what_task', { name: task.task_name }), (why) => app.client.cancelTask(task.task_id, why)) }, t('tasks.cancel_task')),
      );
  head.replaceChildren(
    h('div', { class: 'task-head-top' }, h('h2', { class: 'task-title', testid: 'task-title' }, taskTitle(task)), isBase(task) ? h('span', { class: 'tag' }, t('tasks.base_task')) : null, outcomeBadge(task, 'task-detail-state'), stagesFailedFlag(task), controls),
    h('p', { class: 'task-intention' }, task.task_intention || ''),
    isBase(task) ? '' : fileList(task.attachments, 'task-attachments') || '',
    waitingNote(task) || '',
    h(
      'div',
      { class: 'meta' },
      h('span', { class: 'meta-item' }, h('span', { class: 'muted' }, `${t('tasks.manager')} `), agentChip(task.task_manager)),
      h('span', { class: 'meta-item' }, h('span', { class: 'muted' }, `${t('tasks.group')} `), (task.task_group || []).map((id) => agentChip(id))),
      !isBase(task) && task.started_at ? h('span', { class: 'meta-item muted' }, `${over ? t('tasks.ran') : t('tasks.running_for')} `, elapsed(task.started_at, task.ended_at, store.now(), { testid: 'task-head-elapsed' })) : null,
      tokens ? h('span', { class: 'meta-item muted' }, t('tasks.tokens', { tokens })) : null,
      h('span', { class: 'meta-item muted mono', title: t('tasks.task_id') }, fmt.short(task.task_id)),
      traceItem(task),
      forkedFromItem(task, { task: taskName }, selectTask),
    ),
  );
}

/** The OpenTelemetry trace the task's work is in, to look up in a trace viewer (a click copies
 * it). */
function traceItem(task) {
  if (!task.trace_id) return null;
  const copy = () => navigator.clipboard && navigator.clipboard.writeText(task.trace_id).catch(() => {});
  return h(
    'button',
    { type: 'button', class: 'meta-item muted mono trace-id', testid: 'task-trace', 'data-trace-id': task.trace_id, title: t('tasks.trace_title'), onclick: copy },
    t('tasks.trace', { id: task.trace_id }),
  );
}

/** What a usage adds up to, with the repairs made to the answers. */
function addUp(into, s) {
  const u = s.token_usage || {};
  into.prompt += u.prompt_tokens || 0;
  into.cached += u.cached_prompt_tokens || 0;
  into.completion += u.completion_tokens || 0;
  into.usd += u.cost_usd || 0;
  into.repairs += ((s.execute_result && s.execute_result.repairs) || []).length;
  return into;
}

const nothingSpent = () => ({ prompt: 0, cached: 0, completion: 0, usd: 0, repairs: 0 });

/** One bar of the spent card: prompt tokens (the cached part lighter) and completion tokens,
 * scaled to the largest row. */
function spentRow(testid, key, label, x, most) {
  const pct = (n) => `${((100 * n) / Math.max(most, 1)).toFixed(1)}%`;
  const tokens = x.cached
    ? t('fmt.tokens_cached', { in: fmt.int(x.prompt), cached: fmt.int(x.cached), out: fmt.int(x.completion) })
    : t('fmt.tokens', { in: fmt.int(x.prompt), out: fmt.int(x.completion) });
  const words = `${tokens}${x.usd ? ` · ${fmt.usd(x.usd)}` : ''}${x.repairs ? ` · ${tn('tasks.repairs', x.repairs)}` : ''}`;
  return h(
    'li',
    { class: 'spent-row', testid, 'data-key': key, 'data-tokens': x.prompt + x.completion, 'data-repairs': x.repairs },
    h('span', { class: 'spent-label' }, label),
    h(
      'span',
      { class: 'spent-bar', 'aria-hidden': 'true' },
      h('span', { class: 'spent-cached', style: `width:${pct(x.cached)}` }),
      h('span', { class: 'spent-in', style: `width:${pct(x.prompt - x.cached)}` }),
      h('span', { class: 'spent-out', style: `width:${pct(x.completion)}` }),
    ),
    h('span', { class: 'spent-words muted' }, words),
  );
}

/** What the task's steps spent, per agent and for its costliest steps: tokens (cached ones
 * apart), USD where the models have prices, repairs to the answers. */
function spentCard(task) {
  const steps = [];
  for (const id of task.task_group || []) for (const r of store.stepsOf(id)) if (r.state.task_id === task.task_id) steps.push(r.state);
  const total = (x) => x.prompt + x.completion;
  const spent = steps.map((s) => ({ s, x: addUp(nothingSpent(), s) })).filter(({ x }) => total(x) > 0 || x.repairs);
  if (!spent.length) return null;
  const agents = new Map();
  for (const { s } of spent) addUp(agents.get(s.agent_id) || agents.set(s.agent_id, nothingSpent()).get(s.agent_id), s);
  const byAgent = [...agents].sort((a, b) => total(b[1]) - total(a[1]));
  const costliest = spent.sort((a, b) => total(b.x) - total(a.x)).slice(0, 8);
  const most = Math.max(...byAgent.map(([, x]) => total(x)));
  return h(
    'section',
    { class: 'spent-card', testid: 'task-spent' },
    h('h3', { class: 'label' }, t('tasks.spent_by_agent')),
    h('ul', { class: 'spent-list' }, byAgent.map(([id, x]) => spentRow('spent-agent', id, agentName(id), x, most))),
    h('h3', { class: 'label' }, t('tasks.costliest_steps')),
    h(
      'ul',
      { class: 'spent-list' },
      costliest.map(({ s, x }) => spentRow('spent-step', s.step_id, `${agentName(s.agent_id)}: ${s.step_intention}`, x, most)),
    ),
  );
}

/** "Waiting for you: …" under a task's goal while the task waits for the person. */
function waitingNote(task) {
  const waits = waitsIn(task.task_id);
  if (!waits.length) return null;
  const note = waits.length > 1 ? t('tasks.waiting_note_more', { what: waitLabel(waits[0]), more: fmt.int(waits.length - 1) }) : t('tasks.waiting_note', { what: waitLabel(waits[0]) });
  return h('p', { class: 'task-waits-you', testid: 'task-waits-you', role: 'status' }, h('b', null, t('tasks.waiting_for_you')), note);
}

/** The stages the task's record says gave no result (a stage closed as finished may have), by
 * id, with why. */
function gaveNothing(task) {
  return new Map(((task.outcome && task.outcome.failed_stages) || []).map((f) => [f.stage_id, f.why]));
}

/** The task's state badge, its title saying why a failed task failed. */
function outcomeBadge(task, testid) {
  // A paused task is still `running` in its record; people see that it is paused.
  const b = badge(task.paused && task.execution_state === 'running' ? 'paused' : task.execution_state, testid);
  const o = task.outcome;
  if (o && o.why) b.title = o.why;
  return b;
}

/** A finished task whose stages did not all give a result says how many did not. */
function stagesFailedFlag(task) {
  const failed = (task.outcome && task.outcome.failed_stages) || [];
  if (task.execution_state !== 'finished' || !failed.length) return null;
  const what = failed.map((f) => `${f.stage_intention}: ${f.why}`).join('\n');
  return h('span', { class: 'flag flag-warn', testid: 'task-stages-failed', title: what }, tn('tasks.stages_failed', failed.length));
}

/** Why a task failed, and the stages that gave no result (a finished task may list some). */
function outcomeNote(task) {
  const o = task.outcome;
  if (!o || (!o.why && !(o.failed_stages || []).length)) return null;
  const lines = [];
  if (o.why) lines.push(h('li', null, o.why));
  for (const f of o.failed_stages || []) {
    lines.push(h('li', null, t('tasks.stage_failed_why', { intention: f.stage_intention, why: f.why })));
  }
  return h('ul', { class: 'outcome-note', testid: 'task-outcome' }, ...lines);
}

export function renderStages() {
  const view = $('view-stages');
  const task = store.get('task', ui.taskId);
  if (!task) {
    view.replaceChildren();
    return;
  }
  const parts = [];
  // The manager's words, what the runtime wrote of them, and why the task ended as it did.
  const added = taskSummaryAdded(task.summary_written);
  const note = outcomeNote(task);
  if (task.task_summary || added || note) {
    parts.push(
      h(
        'section',
        { class: `summary-card st-border-${task.execution_state}`, testid: 'task-summary' },
        h('h3', null, task.execution_state === 'failed' ? t('tasks.task_failed') : task.execution_state === 'cancelled' ? t('tasks.task_cancelled') : t('tasks.task_summary')),
        note,
        task.task_summary ? h('p', { class: 'pre' }, task.task_summary) : null,
        added,
      ),
    );
  }
  // The stage cards are keyed: a stage of a hundred agents is drawn again only when it changed.
  const list = (view._stages ||= h('ol', { class: 'stage-list', testid: 'stage-list' }));
  const stages = store.stagesOf(task).map((r, i) => ({ r, i }));
  // A stage that gave no result, by the task's record (one closed as finished may have).
  const nothing = gaveNothing(task);
  keyed(
    list,
    stages,
    ({ r }) => r.state.stage_id,
    ({ r, i }) => `${r.version}|${i}|${nothing.get(r.state.stage_id) || ''}|${waitsIn(task.task_id).map((w) => w.who).join(',')}`,
    ({ r, i }) => stageCard(r.state, i, nothing.get(r.state.stage_id)),
  );
  if (!stages.length) {
    list.replaceChildren(
      h(
        'li',
        { class: 'empty' },
        isBase(task)
          ? t('tasks.base_no_stages')
          : waitsIn(task.task_id).length
            ? t('tasks.no_stages_manager_waits')
            : t('tasks.no_stages_manager_adds'),
      ),
    );
  }
  // Each card's graph plans, kept apart from the card: a step changing redraws its plan alone.
  for (const card of list.children) if (card._plans) fillPlans(card._plans, task.task_id, card.dataset.stageId);
  parts.push(list);
  const spent = spentCard(task);
  if (spent) parts.push(spent);
  // Graph plans made outside any stage (a manager's, say).
  const loose = (view._loose ||= h('section', { class: 'plans-loose', testid: 'plans-outside-stages' }, h('h3', { class: 'label' }, t('tasks.plans_outside_stages')), h('div', { class: 'plans' })));
  if (fillPlans(loose.lastChild, task.task_id, NO_RELATIVE)) parts.push(loose);
  const info = task.shared_info_pool || [];
  if (info.length) {
    // Built again only when the pool changed (its entries are only appended or trimmed).
    const sig = `${task.task_id}|${info.length}|${task.shared_info_omitted || 0}`;
    if (!view._info || view._info.sig !== sig) {
      view._info = {
        sig,
        el: lazyDetails(`info:${task.task_id}`, t('tasks.shared_info', { count: fmt.int(info.length) }), () =>
          h(
            'ul',
            { class: 'info-list' },
            info.map((e) => h('li', null, h('span', { class: 'muted' }, `${fmt.time(e.timestamp)} `), agentChip(e.agent_id), ' ', e.content)),
          ),
        { class: 'fold fold-info' }),
      };
    }
    parts.push(view._info.el);
  }
  view.replaceChildren(...parts);
}

/** Draws the graph plans of a task's stage into `box`, each again only when one of its steps
 * changed; says whether there are any. */
function fillPlans(box, taskId, stageId) {
  const plans = store.plansIn(taskId, stageId);
  const ctx = { store, agentName, showStep, now: store.now() };
  keyed(
    box,
    plans,
    (p) => p.by,
    (p) => `${store.planVersion(p.by)}|${store.replanned(p.by)?.step_id || ''}|${p.steps.length}`,
    (p) => planGraph(ctx, p),
  );
  return plans.length > 0;
}

/** The parts of a task's summary the runtime wrote that the card shows below the manager's
 * words; a task stopped or cancelled says why in its outcome note instead (`outcome.why`). */
const SHOWN_WRITTEN = new Set(['results_added', 'composed', 'closed_by_runtime']);

/** What the runtime wrote of a task's summary (`w`: its `summary_written`), beside the
 * manager's words and marked as the runtime's: the stages' reports it added or composed the
 * summary from, or why it closed the task itself. */
export function taskSummaryAdded(w) {
  if (!w || !SHOWN_WRITTEN.has(w.written)) return null;
  return h(
    'div',
    { class: 'summary-added', testid: 'task-summary-added', 'data-written': w.written },
    h('span', { class: 'flag flag-warn' }, taskWrittenFlag(w)),
    w.reports ? h('div', { class: 'summary-result pre' }, w.reports) : null,
  );
}

/** The flag over the runtime's part of a task summary: what it did, and why. */
function taskWrittenFlag(w) {
  switch (w.written) {
    case 'composed':
      return t('tasks.task_summary_composed');
    case 'closed_by_runtime':
      return t('tasks.task_closed_by_runtime', { reason: w.reason || '' });
    default:
      return t('tasks.task_results_added');
  }
}

/** Agent `id`'s completion report in stage `s`: its summary in its own words, then what the
 * runtime added to it (its results) or composed it from, marked as the runtime's. */
export function agentReport(s, id) {
  const written = (s.completion_written || {})[id];
  const results = (s.completion_results || {})[id] || [];
  const own = s.completion_summary[id];
  return h(
    'div',
    { class: 'alloc-summary', testid: 'stage-summary', 'data-written': written || 'own' },
    h('span', { class: 'label' }, `${t('tasks.summary')} `),
    own,
    written
      ? h(
          'div',
          { class: 'summary-added', testid: 'stage-summary-added' },
          h('span', { class: 'flag flag-warn' }, written === 'composed' ? t('tasks.summary_composed') : t('tasks.summary_results_added')),
          results.map((r) => h('div', { class: 'summary-result' }, r)),
        )
      : null,
  );
}

/** A stage's card; `gaveNothing`: why the task's record says the stage gave no result. */
function stageCard(s, i, gaveNothing) {
  const alloc = s.agent_allocation || {};
  const states = s.every_agent_state || {};
  const sums = s.completion_summary || {};
  const agents = [...new Set([...Object.keys(alloc), ...Object.keys(states)])];
  const plans = h('div', { class: 'plans', testid: 'stage-plans' });
  const card = h(
    'li',
    { class: `stage-card st-border-${s.execution_state}`, testid: 'stage-item', 'data-stage-id': s.stage_id, 'data-state': s.execution_state },
    h('div', { class: 'stage-top' }, h('span', { class: 'stage-no' }, t('tasks.stage_no', { no: fmt.int(i + 1) })), h('span', { class: 'stage-intention' }, s.stage_intention), elapsed(s.started_at, s.ended_at, store.now(), { class: 'muted small', testid: 'stage-elapsed' }), badge(s.execution_state, 'stage-state'), gaveNothing ? h('span', { class: 'flag flag-warn', testid: 'stage-gave-nothing', title: gaveNothing }, t('tasks.no_result')) : null),
    s.execution_state === 'running' ? stageControls(s) : null,
    h(
      'table',
      { class: 'alloc' },
      h('tbody', null,
        agents.map((id) =>
          h(
            'tr',
            { 'data-agent-id': id },
            h('td', { class: 'alloc-agent' }, agentChip(id), agentInStage(s, id, states[id])),
            h(
              'td',
              { class: 'alloc-goal' },
              h('div', null, alloc[id] || ''),
              id in sums ? agentReport(s, id) : null,
            ),
          ),
        ),
      ),
    ),
    plans,
  );
  card._plans = plans;
  return card;
}

/** An agent's state in a stage; one whose work waits for the person says so (the stage's
 * record says `working` while its plan waits for a check), and nobody works in a stage over. */
function agentInStage(s, id, state) {
  // A stage that is over has nobody working in it, whatever its record last said of an agent
  // (a stage cancelled while its agent worked keeps `working`).
  if (['finished', 'failed', 'cancelled'].includes(s.execution_state) && (!state || state === 'working')) return badge('stopped', 'stage-agent-state');
  const waiting = waitsIn(s.task_id).some((w) => w.who === id);
  if (waiting && (!state || state === 'working' || state === 'idle')) return h('span', { class: 'badge st-waiting-you', testid: 'stage-agent-state', 'data-state': 'waiting_for_you' }, t('tasks.waits_for_you'));
  return badge(state || 'idle', 'stage-agent-state');
}

/** A running stage that is stuck, or whose agents failed, is started afresh or stopped. */
function stageControls(s) {
  return h(
    'div',
    { class: 'stage-controls' },
    h(
      'button',
      {
        type: 'button',
        class: 'btn btn-ghost btn-sm',
        testid: 'stage-retry',
        title: t('tasks.retry_stage_title'),
        onclick: () => {
          if (window.confirm(t('tasks.retry_stage_confirm', { intention: s.stage_intention }))) control(app.client.retryStage(s.stage_id));
        },
      },
      t('tasks.retry_stage'),
    ),
    h('button', { type: 'button', class: 'btn btn-ghost btn-sm btn-danger', testid: 'stage-cancel', onclick: () => confirmCancel(t('tasks.cancel_what_stage', { intention: s.stage_intention }), (why) => app.client.cancelStage(s.stage_id, why)) }, t('tasks.cancel_stage')),
  );
}
