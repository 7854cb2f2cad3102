// The console's copy of the four states (task, stage, agent, step), kept current from the
// websocket: a snapshot replaces everything, events are applied by version and older ones are
// dropped. Each record remembers its version (a cheap "did it change" signature for
// rendering) and the order in which it was first seen.

export const KINDS = ['task', 'stage', 'agent', 'step'];

export class Store {
  constructor() {
    this.reset(0);
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

  /** Applies one event; false when it is not newer than what the store holds. */
  apply(ev) {
    const map = this.maps[ev.kind];
    if (!map || typeof ev.id !== 'string') return false;
    const v = Number(ev.version) || 0;
    const cur = map.get(ev.id);
    if (cur && cur.version >= v) return false;
    this.put(ev.kind, ev.id, ev.state, v);
    if (v > this.version) this.version = v;
    return true;
  }

  put(kind, id, state, version) {
    const map = this.maps[kind];
    const cur = map.get(id);
    if (state === null || state === undefined) {
      map.delete(id);
      return;
    }
    map.set(id, { state, version, seq: cur ? cur.seq : ++this.seq });
    if (kind === 'step' && state.agent_id) index(this.stepsByAgent, state.agent_id, id, cur && cur.state.agent_id);
    if (kind === 'stage' && state.task_id) index(this.stagesByTask, state.task_id, id, cur && cur.state.task_id);
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

  stepsOf(agentId) {
    const ids = this.stepsByAgent.get(agentId) || new Set();
    return [...ids].map((id) => this.maps.step.get(id)).filter(Boolean).sort((a, b) => a.seq - b.seq);
  }
}

function index(map, owner, id, oldOwner) {
  if (oldOwner && oldOwner !== owner) map.get(oldOwner)?.delete(id);
  let set = map.get(owner);
  if (!set) map.set(owner, (set = new Set()));
  set.add(id);
}
