// The console's copy of the four states (task, stage, agent, step), kept current from the
// websocket: a snapshot replaces everything, then each change event is applied in version
// order, exactly as the runtime's own `apply` does (src/event/apply.rs); older ones are
// dropped. Each record remembers its version (a cheap "did it change" signature for
// rendering) and the order in which it was first seen.

export const KINDS = ['task', 'stage', 'agent', 'step'];

/** The step states nothing changes any more. */
export const OVER = new Set(['finished', 'failed', 'cancelled']);

/** A failed step that is a failure: not one dropped before it ran because its work ended. */
export function isFailure(step) {
  return step.execution_state === 'failed' && !(step.execute_result && step.execute_result.dropped === true);
}

/** A step's wait for a person that lasts ends at `at` (as src/event/times.rs notes it). */
function endWait(st, at) {
  if (at !== undefined && st.waited_from !== undefined && st.waited_to === undefined) st.waited_to = at;
}

export class Store {
  constructor() {
    this.reset(0);
  }

  /** Now, on the server's clock. */
  now() {
    return Date.now() + (this.clockOffset || 0);
  }

  reset(version) {
    // The newest version applied. Records from a snapshot carry the snapshot's version, so an
    // event about them is applied only when it is newer; a record the snapshot did not have
    // takes any event.
    this.version = version;
    this.maps = Object.fromEntries(KINDS.map((k) => [k, new Map()]));
    this.seq = 0;
    this.stepsByAgent = new Map();
    this.stagesByTask = new Map();
    // Per agent: the newest version that touched any of its steps (a render signature that
    // costs nothing however many steps it has), and its steps in order, sorted once per change
    // of who they are rather than on every read.
    this.stepsVer = new Map();
    this.stepsSorted = new Map();
    // The failed steps' ids, kept as steps change, so the failures panel never scans them all.
    this.failed = new Set();
    // Plans (see `plansIn`): the planned steps by the step that planned them, the plans that
    // are graphs by `task|stage`, the newest version that touched each plan's steps, and the
    // replan step that made a plan again.
    this.planSteps = new Map();
    this.graphPlans = new Map();
    this.planVer = new Map();
    this.replanOf = new Map();
  }

  /** `states` = {task: {id: state}, stage: {…}, agent: {…}, step: {…}}. */
  loadSnapshot(version, states) {
    this.reset(version || 0);
    // Agents first, then their steps in queue order, so first-seen order is execution order.
    const agents = (states && states.agent) || {};
    const steps = (states && states.step) || {};
    for (const [id, s] of Object.entries(agents)) this.put('agent', id, s, this.version);
    const placed = new Set();
    for (const a of Object.values(agents)) {
      for (const sid of (a && a.agent_step && a.agent_step.step_list) || []) {
        if (steps[sid] && !placed.has(sid)) {
          placed.add(sid);
          this.put('step', sid, steps[sid], this.version);
        }
      }
    }
    for (const [id, s] of Object.entries(steps)) if (!placed.has(id)) this.put('step', id, s, this.version);
    for (const kind of ['task', 'stage']) {
      for (const [id, s] of Object.entries((states && states[kind]) || {})) this.put(kind, id, s, this.version);
    }
  }

  /**
   * Applies one change event (`{version, kind, op, …}`, see src/event/mod.rs) the way the
   * runtime's own `apply` does. Returns the records it touched as [{kind, id, state}] (empty
   * when the event is not newer than the store).
   */
  apply(ev) {
    const v = Number(ev.version) || 0;
    // The server's clock as seen here (events arrive within milliseconds of their time), so
    // running steps are timed on the clock that timed their start.
    if (typeof ev.at === 'number') this.clockOffset = ev.at - Date.now();
    if (v <= this.version) return [];
    this.version = v;
    const touched = [];
    const touch = (kind, id) => {
      const r = this.maps[kind].get(id);
      if (!r) return null;
      r.version = v;
      if (kind === 'step') {
        this.stepsVer.set(r.state.agent_id, v);
        const by = plannedBy(r.state);
        if (by) this.planVer.set(by, v);
      }
      touched.push({ kind, id, state: r.state });
      return r.state;
    };
    switch (`${ev.kind}/${ev.op}`) {
      case 'task/created': {
        this.put('task', ev.task.task_id, ev.task, v);
        const t = touch('task', ev.task.task_id);
        if (t && t.started_at === undefined && ev.at !== undefined) t.started_at = ev.at;
        break;
      }
      case 'task/joined': {
        const t = touch('task', ev.task_id);
        if (t) for (const a of ev.agents) if (!t.task_group.includes(a)) t.task_group.push(a);
        break;
      }
      case 'task/state': {
        const t = touch('task', ev.task_id);
        if (t) {
          t.execution_state = ev.execution_state;
          // The manager's words and what the runtime wrote of them come together.
          if (ev.task_summary !== undefined) {
            t.task_summary = ev.task_summary;
            t.summary_written = ev.summary_written;
          }
          // Why it failed, and its stages that gave nothing (absent when all went well).
          if (ev.outcome !== undefined) t.outcome = ev.outcome;
          if (OVER.has(ev.execution_state) && ev.at !== undefined) t.ended_at = ev.at;
        }
        break;
      }
      case 'task/shared_info': {
        const t = touch('task', ev.task_id);
        if (t) t.shared_info_pool.push(ev.entry);
        break;
      }
      case 'task/conversation': {
        const t = touch('task', ev.task_id);
        if (t) t.shared_conversation_pool.push(ev.entry);
        break;
      }
      case 'task/trimmed': {
        const t = touch('task', ev.task_id);
        if (t) {
          const info = t.shared_info_pool.splice(0, ev.shared_info).length;
          const conv = t.shared_conversation_pool.splice(0, ev.conversation).length;
          t.shared_info_omitted = (t.shared_info_omitted || 0) + info;
          t.shared_conversation_omitted = (t.shared_conversation_omitted || 0) + conv;
        }
        break;
      }
      case 'task/forked': {
        const t = touch('task', ev.task_id);
        if (t) t.forked_from = ev.from;
        break;
      }
      case 'task/paused': {
        const t = touch('task', ev.task_id);
        if (t) t.paused = ev.paused === true;
        break;
      }
      case 'task/tokens': {
        const t = touch('task', ev.task_id);
        if (t) addTokens(t, ev.usage);
        break;
      }
      case 'task/evicted': {
        const t = this.get('task', ev.task_id);
        for (const sid of (t && t.stage_list) || []) this.maps.stage.delete(sid);
        this.maps.task.delete(ev.task_id);
        this.stagesByTask.delete(ev.task_id);
        for (const key of [...this.graphPlans.keys()]) if (key.startsWith(`${ev.task_id}|`)) this.graphPlans.delete(key);
        // Its steps leave with it, as they do on the server.
        for (const [id, r] of this.maps.step) {
          if (r.state.task_id === ev.task_id) {
            this.maps.step.delete(id);
            this.failed.delete(id);
            this.forgetPlanned(id, r.state);
            this.stepsByAgent.get(r.state.agent_id)?.delete(id);
            this.stepsSorted.delete(r.state.agent_id);
            this.stepsVer.set(r.state.agent_id, v);
          }
        }
        touched.push({ kind: 'task', id: ev.task_id, state: null });
        break;
      }
      case 'stage/added': {
        const s = ev.stage;
        const t = touch('task', s.task_id);
        if (t) t.stage_list.splice(Math.min(ev.list_at, t.stage_list.length), 0, s.stage_id);
        this.put('stage', s.stage_id, s, v);
        touch('stage', s.stage_id);
        break;
      }
      case 'stage/state': {
        const s = touch('stage', ev.stage_id);
        if (s) {
          s.execution_state = ev.execution_state;
          if (ev.at !== undefined) {
            if (ev.execution_state === 'running' && s.started_at === undefined) s.started_at = ev.at;
            if (OVER.has(ev.execution_state)) s.ended_at = ev.at;
          }
        }
        break;
      }
      case 'stage/agent': {
        const s = touch('stage', ev.stage_id);
        if (s) s.every_agent_state[ev.agent_id] = ev.state;
        break;
      }
      case 'stage/completion': {
        const s = touch('stage', ev.stage_id);
        if (s) {
          s.completion_summary[ev.agent_id] = ev.summary;
          // A report given again replaces the one before, with what the runtime added to it.
          (s.completion_results ||= {})[ev.agent_id] = ev.results || [];
          if (ev.written) (s.completion_written ||= {})[ev.agent_id] = ev.written;
          else if (s.completion_written) delete s.completion_written[ev.agent_id];
          s.every_agent_state[ev.agent_id] = 'finished';
        }
        break;
      }
      case 'agent/added':
        this.put('agent', ev.agent.agent_id, ev.agent, v);
        touch('agent', ev.agent.agent_id);
        break;
      case 'step/added': {
        const st = ev.step;
        this.put('step', st.step_id, st, v);
        touch('step', st.step_id);
        const a = touch('agent', ev.agent_id);
        if (a) {
          const list = a.agent_step.step_list;
          list.splice(Math.min(ev.list_at, list.length), 0, st.step_id);
          if (ev.todo_at !== undefined && ev.todo_at !== null) {
            const todo = a.agent_step.todo;
            todo.splice(Math.min(ev.todo_at, todo.length), 0, st.step_id);
          }
          if (ev.remember) {
            const t = (a.working_memory[st.task_id] ||= {});
            (t[st.stage_id] ||= []).push(st.step_id);
          }
        }
        break;
      }
      case 'step/started': {
        const st = touch('step', ev.step_id);
        if (st) {
          st.execution_state = 'running';
          // As the server notes it (src/event/times.rs): the first start is kept.
          if (st.started_at === undefined && ev.at !== undefined) st.started_at = ev.at;
          endWait(st, ev.at);
        }
        const a = touch('agent', ev.agent_id);
        if (a) a.agent_step.todo = a.agent_step.todo.filter((id) => id !== ev.step_id);
        break;
      }
      case 'step/updated': {
        const st = touch('step', ev.step_id);
        if (st) {
          for (const f of ['execution_state', 'execute_result', 'instruction_content', 'token_usage']) {
            if (ev[f] !== undefined) st[f] = ev[f];
          }
          // The step's wait for its model's endpoint: set, or cleared (null); over when it ends.
          if (ev.model_wait !== undefined) {
            if (ev.model_wait === null) delete st.model_wait;
            else st.model_wait = ev.model_wait;
          }
          if (OVER.has(ev.execution_state)) delete st.model_wait;
          if (OVER.has(ev.execution_state) && ev.at !== undefined) st.ended_at = ev.at;
          // A queued step goes back to `init` only from `pending`: its dependencies all
          // finished and it became ready (as the server notes it, src/event/times.rs).
          if (ev.execution_state === 'init' && ev.at !== undefined) st.ready_at = ev.at;
          // The time it waits for a person's verdict, drawn as waiting on the timeline.
          if (ev.execution_state !== undefined && ev.at !== undefined) {
            if (ev.execution_state.startsWith('waiting_for_')) {
              st.waited_from = ev.at;
              delete st.waited_to;
            } else endWait(st, ev.at);
          }
          this.noteFailure(ev.step_id, st);
        }
        break;
      }
      case 'step/removed': {
        const gone = new Set(ev.step_ids);
        const a = touch('agent', ev.agent_id);
        if (a) {
          a.agent_step.step_list = a.agent_step.step_list.filter((id) => !gone.has(id));
          a.agent_step.todo = a.agent_step.todo.filter((id) => !gone.has(id));
          for (const t of Object.values(a.working_memory)) {
            for (const [stage, ids] of Object.entries(t)) t[stage] = ids.filter((id) => !gone.has(id));
          }
        }
        break;
      }
      default:
        this.applyToAgent(ev, touch);
    }
    return touched;
  }

  /** The agent changes (and the changes a person alone sees, which only say "look again"). */
  applyToAgent(ev, touch) {
    const a = ev.kind === 'agent' ? touch('agent', ev.agent_id) : null;
    if (!a) return;
    switch (ev.op) {
      case 'working_state':
        a.working_state = ev.state;
        break;
      case 'work_noted': {
        const t = (a.working_memory[ev.task_id] ||= {});
        if (ev.stage_id !== undefined) t[ev.stage_id] ||= [];
        break;
      }
      case 'work_cleared':
        if (ev.stage_id === undefined) delete a.working_memory[ev.task_id];
        else if (a.working_memory[ev.task_id]) delete a.working_memory[ev.task_id][ev.stage_id];
        break;
      case 'waits_held':
        a.step_lock.push(...ev.ids);
        break;
      case 'waits_released':
        a.step_lock = a.step_lock.filter((w) => !ev.ids.includes(w));
        break;
      case 'memory_added':
        a.persistent_memory[ev.key] = ev.text;
        break;
      case 'memory_deleted':
        delete a.persistent_memory[ev.key];
        break;
      case 'tokens':
        addTokens(a, ev.usage);
        break;
      case 'paused':
        // The whole agent, or one task's work on it (as `set_paused` in src/event/apply.rs).
        if (ev.task_id === undefined) a.paused = ev.paused === true;
        else {
          const tasks = new Set(a.paused_tasks || []);
          if (ev.paused) tasks.add(ev.task_id);
          else tasks.delete(ev.task_id);
          a.paused_tasks = [...tasks];
        }
        break;
      default:
        // goal_opened/closed (bookkeeping), a person's own chats and notices: nothing shown
        // in the state itself.
        break;
    }
  }

  put(kind, id, state, version) {
    const map = this.maps[kind];
    const cur = map.get(id);
    if (state === null || state === undefined) {
      map.delete(id);
      if (kind === 'step') {
        this.failed.delete(id);
        if (cur) this.forgetPlanned(id, cur.state);
      }
      return;
    }
    map.set(id, { state, version, seq: cur ? cur.seq : ++this.seq });
    if (kind === 'step') {
      this.noteFailure(id, state);
      this.notePlanned(id, state, version);
    }
    if (kind === 'step' && state.agent_id) {
      index(this.stepsByAgent, state.agent_id, id, cur && cur.state.agent_id);
      for (const a of [state.agent_id, cur && cur.state.agent_id]) {
        if (!a) continue;
        this.stepsSorted.delete(a);
        this.stepsVer.set(a, Math.max(version, this.stepsVer.get(a) || 0));
      }
    }
    if (kind === 'stage' && state.task_id) index(this.stagesByTask, state.task_id, id, cur && cur.state.task_id);
  }

  noteFailure(id, step) {
    if (isFailure(step)) this.failed.add(id);
    else this.failed.delete(id);
  }

  /** Files a planned step under its plan, and the plan under its task and stage when the step
   * makes it a graph (a step with a plan id or dependencies). */
  notePlanned(id, step, version) {
    const o = step.origin;
    if (o && o.kind === 'replan' && o.plan) this.replanOf.set(o.plan, id);
    const by = plannedBy(step);
    if (!by) return;
    index(this.planSteps, by, id);
    this.planVer.set(by, Math.max(version, this.planVer.get(by) || 0));
    if (isGraphStep(step)) index(this.graphPlans, `${step.task_id}|${step.stage_id}`, by);
  }

  forgetPlanned(id, step) {
    const by = plannedBy(step);
    const ids = by && this.planSteps.get(by);
    if (!ids) return;
    ids.delete(id);
    if (!ids.size) {
      this.planSteps.delete(by);
      this.planVer.delete(by);
      this.replanOf.delete(by);
      this.graphPlans.get(`${step.task_id}|${step.stage_id}`)?.delete(by);
    }
  }

  /**
   * The graph plans of a task's stage (`stageId` may be `no_relative`), in the order they were
   * made: [{by, steps}], `by` the step that planned them, `steps` their records oldest first.
   */
  plansIn(taskId, stageId) {
    const plans = [];
    for (const by of this.graphPlans.get(`${taskId}|${stageId}`) || []) {
      const steps = [...(this.planSteps.get(by) || [])].map((id) => this.maps.step.get(id)).filter(Boolean).sort((a, b) => a.seq - b.seq);
      if (steps.length) plans.push({ by, steps });
    }
    return plans.sort((a, b) => a.steps[0].seq - b.steps[0].seq);
  }

  /** Whether `step` belongs to a graph plan (one `plansIn` lists). */
  inGraphPlan(step) {
    const by = plannedBy(step);
    return !!by && !!this.graphPlans.get(`${step.task_id}|${step.stage_id}`)?.has(by);
  }

  /** Changes whenever any step of the plan made by `by` changes. */
  planVersion(by) {
    return this.planVer.get(by) || 0;
  }

  /** The step that plans the rest of the plan made by `by` again (a replan), if one does. */
  replanned(by) {
    const id = this.replanOf.get(by);
    return id ? this.get('step', id) : undefined;
  }

  /** The failed steps' records (see `isFailure`). */
  failures() {
    return [...this.failed].map((id) => this.maps.step.get(id)).filter(Boolean);
  }

  get(kind, id) {
    const r = this.maps[kind].get(id);
    return r ? r.state : undefined;
  }

  rec(kind, id) {
    return this.maps[kind].get(id);
  }

  ver(kind, id) {
    const r = this.maps[kind].get(id);
    return r ? r.version : 0;
  }

  all(kind) {
    return [...this.maps[kind].values()].sort((a, b) => a.seq - b.seq);
  }

  /** The stages of a task in the task's order (then any the task does not list yet). */
  stagesOf(task) {
    const ids = [...((task && task.stage_list) || [])];
    for (const id of this.stagesByTask.get(task && task.task_id) || []) if (!ids.includes(id)) ids.push(id);
    return ids.map((id) => this.maps.stage.get(id)).filter(Boolean);
  }

  /** An agent's step records, oldest first (a shared array: do not change it). */
  stepsOf(agentId) {
    let list = this.stepsSorted.get(agentId);
    if (!list) {
      const ids = this.stepsByAgent.get(agentId) || new Set();
      list = [...ids].map((id) => this.maps.step.get(id)).filter(Boolean).sort((a, b) => a.seq - b.seq);
      this.stepsSorted.set(agentId, list);
    }
    return list;
  }

  /** Changes whenever any step of the agent changes. */
  stepsVersion(agentId) {
    return this.stepsVer.get(agentId) || 0;
  }
}

/** The step that planned `step`, when a plan made it. */
export function plannedBy(step) {
  const o = step && step.origin;
  return o && o.kind === 'planned' && typeof o.by === 'string' ? o.by : null;
}

/** A step of a graph plan: it has its plan's id or waits for other steps. */
export function isGraphStep(step) {
  return !!step && (typeof step.plan_id === 'string' || (Array.isArray(step.depends_on) && step.depends_on.length > 0));
}

function addTokens(rec, usage) {
  const u = (rec.token_usage ||= { prompt_tokens: 0, completion_tokens: 0 });
  u.prompt_tokens += usage.prompt_tokens || 0;
  if (usage.cached_prompt_tokens) u.cached_prompt_tokens = (u.cached_prompt_tokens || 0) + usage.cached_prompt_tokens;
  u.completion_tokens += usage.completion_tokens || 0;
  if (usage.cost_usd) u.cost_usd = (u.cost_usd || 0) + usage.cost_usd;
}

function index(map, owner, id, oldOwner) {
  if (oldOwner && oldOwner !== owner) map.get(oldOwner)?.delete(id);
  let set = map.get(owner);
  if (!set) map.set(owner, (set = new Set()));
  set.add(id);
}
