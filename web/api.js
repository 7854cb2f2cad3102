// REST calls and the live websocket. The session (token and human agent id) is kept in
// sessionStorage: it lasts as long as the browser tab and is never written anywhere else.

import { t } from './i18n.js';

const SESSION_KEY = 'cohort.session';
/** How long the page waits for the team's language before it starts in English. */
const LANGUAGE_WAIT_MS = 3000;

export class AuthError extends Error {}

export const session = {
  load() {
    try {
      const s = JSON.parse(sessionStorage.getItem(SESSION_KEY) || 'null');
      return s && s.token && s.human_agent_id ? s : null;
    } catch {
      return null;
    }
  },
  save(s) {
    sessionStorage.setItem(SESSION_KEY, JSON.stringify({ token: s.token, human_agent_id: s.human_agent_id }));
  },
  clear() {
    sessionStorage.removeItem(SESSION_KEY);
  },
};

async function request(method, path, { token, body, file } = {}) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  // A file goes as the body itself, its type as the browser knows it.
  if (file) headers['Content-Type'] = file.type || 'application/octet-stream';
  if (token) headers.Authorization = `Bearer ${token}`;
  let res;
  try {
    res = await fetch(path, { method, headers, body: file || (body === undefined ? undefined : JSON.stringify(body)) });
  } catch (e) {
    throw new Error(t('api.unreachable', { why: e.message }));
  }
  let data = null;
  const text = await res.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { error: text };
    }
  }
  if (res.status === 401) throw new AuthError(errorText(data) || t('api.not_signed_in'));
  if (!res.ok) throw new Error(errorText(data) || `${res.status} ${res.statusText}`);
  return data;
}

/** An image or a sound a tool returned (or, from `/api/attachments`, a file a person
 * attached), as a Blob (its MIME type from the server). */
async function fetchBlob(id, token, base = '/api/blob') {
  const res = await fetch(`${base}/${encodeURIComponent(id)}`, { headers: { Authorization: `Bearer ${token}` } });
  if (res.status === 401) throw new AuthError(t('api.not_signed_in'));
  if (!res.ok) {
    const text = await res.text();
    let why = text;
    try {
      why = errorText(JSON.parse(text)) || text;
    } catch {}
    throw new Error(why || `${res.status} ${res.statusText}`);
  }
  return res.blob();
}

/** Why the server refused: its message in the team's language, else its English reason. */
function errorText(data) {
  if (!data) return '';
  if (typeof data === 'string') return data;
  return data.message || data.error || data.detail || '';
}

/** The team's language (`language:` in its team file), or null when the server does not say
 * in time: the page then starts in English. */
export async function teamLanguage() {
  try {
    const res = await fetch('/api/language', { headers: { Accept: 'application/json' }, signal: AbortSignal.timeout(LANGUAGE_WAIT_MS) });
    if (!res.ok) return null;
    const data = await res.json();
    return typeof data.language === 'string' ? data.language : null;
  } catch {
    return null;
  }
}

export async function bind(humanAgentId, password) {
  const data = await request('POST', '/api/bind_human_agent', { body: { human_agent_id: humanAgentId, password } }).catch((e) => {
    if (e instanceof AuthError) throw new Error(e.message || t('api.login_failed'));
    throw e;
  });
  if (!data || data.success === false || !data.token) throw new Error(errorText(data) || t('api.login_failed'));
  return { token: data.token, human_agent_id: data.human_agent_id || humanAgentId };
}

export function api(s) {
  const me = encodeURIComponent(s.human_agent_id);
  return {
    states: (type) => request('GET', `/api/states?type=${encodeURIComponent(type)}`, { token: s.token }),
    conversations: () => request('GET', `/api/human/${me}/conversations`, { token: s.token }),
    sendMessage: (m) => request('POST', '/api/send_message', { token: s.token, body: { human_agent_id: s.human_agent_id, ...m } }),
    approvals: () => request('GET', '/api/approvals', { token: s.token }),
    nodes: () => request('GET', '/api/nodes', { token: s.token }),
    approve: (step, body) => request('POST', `/api/step/${encodeURIComponent(step)}/approve`, { token: s.token, body }),
    reject: (step, reason, then) => request('POST', `/api/step/${encodeURIComponent(step)}/reject`, { token: s.token, body: then ? { reason, then } : { reason } }),
    fillParams: (step, values) => request('POST', `/api/step/${encodeURIComponent(step)}/params`, { token: s.token, body: { values } }),
    cancelStep: (step, reason) => request('POST', `/api/step/${encodeURIComponent(step)}/cancel`, { token: s.token, body: { reason } }),
    cancelTask: (task, reason) => request('POST', `/api/task/${encodeURIComponent(task)}/cancel`, { token: s.token, body: { reason } }),
    pauseTask: (task, paused) => request('POST', `/api/task/${encodeURIComponent(task)}/${paused ? 'pause' : 'resume'}`, { token: s.token }),
    blob: (id) => fetchBlob(id, s.token),
    upload: (file) => request('POST', `/api/attachments?name=${encodeURIComponent(file.name)}`, { token: s.token, file }),
    attachment: (id) => fetchBlob(id, s.token, '/api/attachments'),
    stepCalls: (step) => request('GET', `/api/step/${encodeURIComponent(step)}/calls`, { token: s.token }),
    retryStage: (stage) => request('POST', `/api/stage/${encodeURIComponent(stage)}/retry`, { token: s.token }),
    cancelStage: (stage, reason) => request('POST', `/api/stage/${encodeURIComponent(stage)}/cancel`, { token: s.token, body: { reason } }),
  };
}

/**
 * The live connection: calls onSnapshot(version, states) for every snapshot (the first message
 * after each connect, and again whenever the client fell behind) and onEvent(event) for each
 * change event, in version order, and onWriting({step_id, agent_id, text}) for an answer a
 * model is writing (streamed: the text so far, not a change); reconnects with exponential backoff
 * (0.5 s doubling to 15 s, with jitter) and reports its status through onStatus(status, detail).
 */
export class Live {
  constructor(token, { onSnapshot, onEvent, onWriting, onStatus, onAuthLost }) {
    this.token = token;
    this.cb = { onSnapshot, onEvent, onWriting, onStatus, onAuthLost };
    this.attempt = 0;
    this.ws = null;
    this.timer = null;
    this.stopped = false;
    this.wake = () => {
      if (!this.stopped && !this.ws && this.timer) {
        clearTimeout(this.timer);
        this.timer = null;
        this.connect();
      }
    };
    window.addEventListener('online', this.wake);
    document.addEventListener('visibilitychange', this.wake);
  }

  connect() {
    if (this.stopped) return;
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const url = `${proto}//${location.host}/ws?token=${encodeURIComponent(this.token)}`;
    this.cb.onStatus(this.attempt ? 'reconnecting' : 'connecting');
    let ws;
    try {
      ws = new WebSocket(url);
    } catch (e) {
      this.retry();
      return;
    }
    this.ws = ws;
    let gotSnapshot = false;
    ws.onmessage = (m) => {
      let msg;
      try {
        msg = JSON.parse(m.data);
      } catch {
        return;
      }
      if (msg.type === 'snapshot') {
        gotSnapshot = true;
        this.attempt = 0;
        this.cb.onSnapshot(Number(msg.version) || 0, msg.states || {});
        this.cb.onStatus('live');
      } else if (msg.type === 'events' && gotSnapshot) {
        for (const ev of msg.events || []) this.cb.onEvent(ev);
      } else if (msg.type === 'writing' && gotSnapshot && this.cb.onWriting) {
        this.cb.onWriting(msg);
      }
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.stopped) return;
      this.retry(!gotSnapshot);
    };
    ws.onerror = () => {
      /* onclose follows */
    };
  }

  async retry(failedEarly) {
    this.attempt += 1;
    // A connection refused before its snapshot may be a token the server no longer knows.
    if (failedEarly && this.attempt >= 2 && this.cb.onAuthLost) {
      const lost = await this.cb.onAuthLost();
      if (lost || this.stopped) return;
    }
    const base = Math.min(15000, 500 * 2 ** Math.min(this.attempt - 1, 5));
    const delay = Math.round(base * (0.8 + Math.random() * 0.4));
    this.cb.onStatus('offline', delay);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.connect();
    }, delay);
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    window.removeEventListener('online', this.wake);
    document.removeEventListener('visibilitychange', this.wake);
    if (this.ws) {
      const ws = this.ws;
      this.ws = null;
      ws.close();
    }
  }
}
