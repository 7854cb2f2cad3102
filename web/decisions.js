// "Waiting for you": the steps held for a person's verdict (GET /api/approvals), each answerable
// in place. A tool call: its risk, reason and exact arguments (editable), approve or reject. A
// plan: its steps (a graph plan with its ids, dependencies and sketch; editable as JSON, checked
// before it is sent), confirm or reject with a comment that is planned again.
// Missing parameters: a form made from the tool's schema, filled in or rejected. A server's
// question during a call: its message and form (its defaults filled in), answered or declined.
// The hash the person saw goes with every approval, so a changed call or plan needs a new look.

import { h, jsonBlock, keyed, fmt } from './dom.js';
import { editable, isGraph, graphProblem, stepList, sketch } from './plan_check.js';
import { t, tParts } from './i18n.js';

/**
 * Renders `items` into `container`; `act` performs the verdicts and resolves when the server
 * took them: act.approve(item, body), act.reject(item, reason, then), act.fill(item, values).
 */
export function renderDecisions(container, items, act, names) {
  // Keyed by step and by what the person is asked (its hash): a card being filled in keeps
  // what was typed while other decisions come and go.
  const sig = (item) => `${item.kind}:${item.args_hash || item.plan_hash || ''}:${JSON.stringify(item.form || null)}`;
  keyed(container, items, (item) => item.step_id, sig, (item) => decision(item, act, names));
}

const KIND_TITLE = {
  tool_call: () => t('decisions.kind_tool_call'),
  plan: () => t('decisions.kind_plan'),
  params: () => t('decisions.kind_params'),
  elicitation: () => t('decisions.kind_elicitation'),
};
const RISK = { low: () => t('decisions.risk_low'), medium: () => t('decisions.risk_medium'), high: () => t('decisions.risk_high') };

const BODY = { plan: planBody, params: paramsBody, elicitation: elicitationBody };

function decision(item, act, names) {
  const status = h('p', { class: 'composer-status small', role: 'status', testid: 'decision-status' });
  const busy = (p) => {
    for (const b of box.querySelectorAll('button')) b.disabled = true;
    status.dataset.state = 'sending';
    status.textContent = t('waiting.sending');
    p.then(
      () => {
        status.dataset.state = 'ok';
        status.textContent = t('decisions.done');
      },
      (e) => {
        for (const b of box.querySelectorAll('button')) b.disabled = false;
        status.dataset.state = 'error';
        status.textContent = e.message;
      },
    );
  };
  const asks = item.kind === 'elicitation';
  const placeholder = item.kind === 'plan' ? t('decisions.plan_comment') : asks ? t('decisions.decline_reason') : t('decisions.reject_reason');
  const reason = h('input', { class: 'grow', placeholder, testid: 'decision-reason' });
  // Declining a server's question needs no reason: the server is told only that it was declined.
  const rejectWith = (then) => busy(act.reject(item, reason.value || (asks ? 'declined' : ''), then));
  // A tool call's rejection cancels its task, as seed 000 says; skipping only the call is the
  // other choice.
  const call = item.kind === 'tool_call';
  const reject = h(
    'button',
    { type: 'button', class: `btn btn-ghost btn-sm${call ? ' btn-danger' : ''}`, testid: 'decision-reject', title: call ? t('decisions.reject_call_title') : null, onclick: () => rejectWith(call ? 'cancel_task' : undefined) },
    asks ? t('decisions.decline') : call ? t('decisions.reject_cancel_task') : t('decisions.reject'),
  );
  const skip = call ? h('button', { type: 'button', class: 'btn btn-ghost btn-sm', testid: 'decision-skip', title: t('decisions.skip_title'), onclick: () => rejectWith('skip') }, t('decisions.skip_call')) : null;
  const body = (BODY[item.kind] || toolBody)(item, act, busy);
  const due = item.decide_by_ms ? fmt.clock(item.decide_by_ms) : null;
  const box = h(
    'div',
    { class: `decision decision-${item.kind}`, testid: 'decision', 'data-step-id': item.step_id, 'data-kind': item.kind },
    h(
      'div',
      { class: 'msg-head' },
      h('b', null, KIND_TITLE[item.kind] ? KIND_TITLE[item.kind]() : item.kind),
      h('span', { class: 'muted' }, ` · ${names.agent(item.agent_id)}`),
      h('span', { class: 'tag', title: t('waiting.task_id', { id: item.task_id }) }, names.task(item.task_id)),
      due ? h('span', { class: 'time', title: t('decisions.decide_by') }, t('waiting.by', { time: due })) : null,
    ),
    h('p', { class: 'small' }, item.step_intention || ''),
    body,
    h('div', { class: 'row' }, reason, skip, reject),
    status,
  );
  return box;
}

function toolBody(item, act, busy) {
  const args = h('textarea', { rows: 4, class: 'mono small', testid: 'decision-arguments' });
  args.value = JSON.stringify(item.arguments ?? {}, null, 2);
  const approve = () => {
    let edited;
    try {
      edited = JSON.parse(args.value);
    } catch (e) {
      return busy(Promise.reject(new Error(t('decisions.arguments_not_json', { error: e.message }))));
    }
    const same = JSON.stringify(edited) === JSON.stringify(item.arguments ?? {});
    busy(act.approve(item, same ? { args_hash: item.args_hash } : { args_hash: item.args_hash, arguments: edited }));
  };
  return h(
    'div',
    null,
    h(
      'p',
      { class: 'small' },
      tParts('decisions.tool_on', { tool: h('b', { class: 'mono' }, `${item.tool}`), server: h('span', { class: 'mono' }, `${item.server}`) }),
      ' · ',
      h('span', { class: `risk risk-${item.risk}`, testid: 'decision-risk' }, t('decisions.risk', { level: RISK[item.risk] ? RISK[item.risk]() : String(item.risk || '').toUpperCase() })),
      ` · ${item.reason || ''}`,
    ),
    // A HIGH call is asked with a warning (seed 000 §11.1): what it may do, said first.
    item.warning ? h('p', { class: 'decision-warning small', role: 'alert', testid: 'decision-warning' }, item.warning) : null,
    args,
    h('div', { class: 'row row-end' }, h('button', { type: 'button', class: 'btn btn-primary btn-sm', testid: 'decision-approve', onclick: approve }, t('decisions.approve'))),
  );
}

function stagesBody(item, act, busy) {
  const stages = ((item.stages && item.stages.stages) || []).map(({ stage_intention, agent_allocation }) => ({ stage_intention, agent_allocation }));
  const list = h(
    'ol',
    { class: 'small' },
    stages.map((s) => h('li', null, s.stage_intention, h('span', { class: 'muted' }, ` · ${Object.keys(s.agent_allocation || {}).join(', ')}`))),
  );
  const edit = h('textarea', { rows: 5, class: 'mono small', testid: 'decision-stages' });
  edit.value = JSON.stringify(stages, null, 2);
  const confirm = () => {
    let edited;
    try {
      edited = JSON.parse(edit.value);
    } catch (e) {
      return busy(Promise.reject(new Error(t('decisions.stages_not_json', { error: e.message }))));
    }
    const same = JSON.stringify(edited) === JSON.stringify(stages);
    busy(act.approve(item, same ? { plan_hash: item.plan_hash } : { plan_hash: item.plan_hash, stages: edited }));
  };
  return h(
    'div',
    null,
    list,
    h('details', { class: 'fold' }, h('summary', null, t('decisions.edit_stages')), edit),
    h('div', { class: 'row row-end' }, h('button', { type: 'button', class: 'btn btn-primary btn-sm', testid: 'decision-approve', onclick: confirm }, t('decisions.confirm_stages'))),
  );
}

function planBody(item, act, busy) {
  if (item.stages) return stagesBody(item, act, busy);
  // Ids, dependencies and replan marks are kept: an edit of a graph plan stays a graph.
  const steps = (item.steps || []).map(editable);
  const graph = isGraph(steps);
  const edit = h('textarea', { rows: graph ? 10 : 5, class: 'mono small', testid: 'decision-steps' });
  edit.value = JSON.stringify(steps, null, 2);
  const confirm = () => {
    let edited;
    try {
      edited = JSON.parse(edit.value);
    } catch (e) {
      return busy(Promise.reject(new Error(t('decisions.steps_not_json', { error: e.message }))));
    }
    const problem = graphProblem(edited);
    if (problem) return busy(Promise.reject(new Error(t('decisions.not_sent', { problem }))));
    const same = JSON.stringify(edited) === JSON.stringify(steps);
    busy(act.approve(item, same ? { plan_hash: item.plan_hash } : { plan_hash: item.plan_hash, steps: edited }));
  };
  return h(
    'div',
    null,
    stepList(steps),
    graph ? h('div', { class: 'plan-box' }, sketch(steps)) : null,
    h('details', { class: 'fold' }, h('summary', null, graph ? t('decisions.edit_steps_graph') : t('decisions.edit_steps')), edit),
    h('div', { class: 'row row-end' }, h('button', { type: 'button', class: 'btn btn-primary btn-sm', testid: 'decision-approve', onclick: confirm }, t('decisions.confirm_plan'))),
  );
}
/** A form's inputs, and a function that reads the values filled in. */
function formInputs(item) {
  const fields = (item.form && item.form.fields) || [];
  const inputs = fields.map((f) => [f, fieldInput(f)]);
  const values = () => {
    const out = {};
    for (const [f, input] of inputs) {
      if (f.type === 'boolean') out[f.key] = input.checked;
      else if (input.value !== '') out[f.key] = f.type === 'number' ? Number(input.value) : input.value;
    }
    return out;
  };
  const view = h('div', { class: 'form-fields' }, inputs.map(([f, input]) => h('label', { class: 'small' }, `${f.label || f.key}${f.required ? ' *' : ''}`, input)));
  return { view, values };
}

function paramsBody(item, act, busy) {
  const form = formInputs(item);
  return h(
    'div',
    null,
    h('p', { class: 'small' }, tParts('decisions.tool_on', { tool: h('b', { class: 'mono' }, item.tool), server: h('span', { class: 'mono' }, `${item.server}`) })),
    item.reason ? h('p', { class: 'decision-message', testid: 'decision-refusal' }, item.reason) : null,
    jsonBlock(item.arguments ?? {}),
    form.view,
    h('div', { class: 'row row-end' }, h('button', { type: 'button', class: 'btn btn-primary btn-sm', testid: 'decision-fill', onclick: () => busy(act.fill(item, form.values())) }, t('decisions.fill_and_run'))),
  );
}

/** A server's question during a call: its message, and its form (none: a yes or a no). */
function elicitationBody(item, act, busy) {
  const form = formInputs(item);
  return h(
    'div',
    null,
    h('p', { class: 'small' }, tParts('decisions.server_during', { server: h('span', { class: 'mono' }, `${item.server}`), tool: item.tool ? h('b', { class: 'mono' }, item.tool) : h('b', null, t('decisions.a_call')) })),
    h('p', { class: 'decision-message', testid: 'decision-message' }, item.message || ''),
    form.view,
    h('div', { class: 'row row-end' }, h('button', { type: 'button', class: 'btn btn-primary btn-sm', testid: 'decision-fill', onclick: () => busy(act.fill(item, form.values())) }, t('decisions.answer'))),
  );
}

/** An input for one form field (`agent::ask::AskField`), holding its default if it has one. */
export function fieldInput(f) {
  const testid = `field-${f.key}`;
  const input = (() => {
    switch (f.type) {
      case 'boolean':
        return h('input', { type: 'checkbox', testid, 'data-key': f.key });
      case 'number':
        return h('input', { type: 'number', testid, 'data-key': f.key, min: f.min, max: f.max, step: 'any' });
      case 'select':
        return h('select', { testid, 'data-key': f.key }, h('option', { value: '' }, '—'), (f.options || []).map((o) => h('option', { value: o }, o)));
      case 'textarea':
        return h('textarea', { rows: 5, testid, 'data-key': f.key, maxlength: f.max_length });
      default:
        return h('textarea', { rows: 2, testid, 'data-key': f.key, maxlength: f.max_length });
    }
  })();
  if (f.default !== undefined && f.default !== null) {
    if (f.type === 'boolean') input.checked = f.default === true;
    else input.value = String(f.default);
  }
  return input;
}
