// Small DOM helpers. Every piece of text goes through text nodes or attributes, never through
// innerHTML, so whatever an agent writes is shown as text and never interpreted as markup.
// Numbers, times and spans are written by `fmt` in the person's language (i18n.js).

import { t, num, clockTime, dateTime } from './i18n.js';

/**
 * h('div', {class: 'x', testid: 'y', onclick: fn, 'data-id': id}, 'text', child, [more])
 * Strings and numbers become text nodes; null, undefined and false are skipped.
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props) {
    for (const [k, v] of Object.entries(props)) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'testid') el.dataset.testid = v;
      else if (k === 'text') el.textContent = v;
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'value') el.value = v;
      else if (k === 'checked' || k === 'disabled' || k === 'selected' || k === 'open' || k === 'hidden') el[k] = !!v;
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

/**
 * Keyed reconciliation of a container's children: an item whose signature did not change keeps
 * its element (and so its scroll position, focus and open <details>); only changed items are
 * rendered again, and elements are moved, not recreated, when the order changes.
 *
 * `inView` (an `InView`, optional): a changed item whose element is off screen keeps its old
 * element, marked stale, and is rendered again once it scrolls into view; a new item past the
 * first screenful starts as a stale placeholder. A list of a hundred agent cards that all
 * change several times a second then costs the few cards on screen.
 */
export function keyed(container, items, key, sig, render, inView = null) {
  const old = container._keyed || new Map();
  const next = new Map();
  let cursor = container.firstChild;
  const lazy = inView && inView.applies(items.length);
  let index = 0;
  for (const item of items) {
    const k = key(item);
    const s = sig(item);
    let entry = old.get(k);
    const hidden = lazy && !inView.shows(k);
    if (entry && entry.sig !== s && hidden) {
      entry.el.dataset.stale = 'true';
    } else if (!entry && hidden && index >= inView.eager) {
      const el = inView.placeholder();
      el.dataset.stale = 'true';
      entry = { el, sig: null };
      inView.watch(el, k);
    } else if (!entry || entry.sig !== s) {
      const el = render(item);
      if (entry) {
        entry.el.replaceWith(el);
        if (cursor === entry.el) cursor = el;
        if (inView) inView.forget(entry.el);
      }
      entry = { el, sig: s };
      if (inView) inView.watch(el, k);
    }
    index += 1;
    next.set(k, entry);
    if (entry.el !== cursor) container.insertBefore(entry.el, cursor);
    else cursor = cursor.nextSibling;
  }
  for (const [k, entry] of old) {
    if (next.has(k)) continue;
    entry.el.remove();
    if (inView) inView.forget(entry.el, k);
  }
  // Anything that is not a keyed element (an empty-state line, say) goes too.
  const kept = new Set([...next.values()].map((e) => e.el));
  for (const child of [...container.childNodes]) if (!kept.has(child)) child.remove();
  container._keyed = next;
}

/**
 * Which elements of a long keyed list are in its scrolled box `root` (or within a box's height
 * of it), for `keyed`: lists of at least `from` items render only those; when a stale one
 * scrolls into view, `onShown` asks for a render. New items that are not seen start as
 * `placeholder()`s, except the list's first `eager` (drawn at once, so a list shows before the
 * observer's first report); a placeholder must take about an item's height (else all of them
 * show at once and are all drawn). `always(key)` names an item
 * rendered wherever it is (one the person asked to be shown).
 */
export class InView {
  constructor(root, onShown, { from = 20, eager = 8, placeholder = () => h('div'), always = () => false } = {}) {
    this.from = from;
    this.eager = eager;
    this.placeholder = placeholder;
    this.always = always;
    this.keys = new WeakMap();
    this.seen = new Set();
    this.observer = new IntersectionObserver(
      (entries) => {
        let stale = false;
        for (const e of entries) {
          const k = this.keys.get(e.target);
          if (k === undefined) continue;
          if (e.isIntersecting) {
            this.seen.add(k);
            stale ||= e.target.dataset.stale === 'true';
          } else this.seen.delete(k);
        }
        if (stale) onShown();
      },
      { root, rootMargin: '100% 0px' },
    );
  }

  applies(n) {
    return n >= this.from;
  }

  shows(key) {
    return this.seen.has(key) || this.always(key);
  }

  /** Follows a newly rendered element (the one it replaced is no longer followed). */
  watch(el, key) {
    this.keys.set(el, key);
    this.observer.observe(el);
  }

  /** Stops following everything (the list was replaced whole). */
  reset() {
    this.observer.disconnect();
    this.seen.clear();
  }

  /** Stops following an element that was replaced, or removed with its key (`gone`). */
  forget(el, gone) {
    this.observer.unobserve(el);
    this.keys.delete(el);
    if (gone !== undefined) this.seen.delete(gone);
  }
}

/** Remembers which <details> are open across re-renders, by a stable key. */
const openDetails = new Set();

/**
 * A <details> whose body is built only when it is opened (large JSON costs nothing while
 * closed) and whose open state survives re-rendering.
 */
export function lazyDetails(key, summary, body, props = {}) {
  const d = h('details', { class: props.class || 'fold', testid: props.testid });
  d.appendChild(h('summary', null, summary));
  const fill = () => {
    if (d.open && d.childNodes.length === 1) d.appendChild(body());
  };
  if (openDetails.has(key)) {
    d.open = true;
    fill();
  }
  d.addEventListener('toggle', () => {
    if (d.open) openDetails.add(key);
    else openDetails.delete(key);
    fill();
  });
  return d;
}

const SVG = 'http://www.w3.org/2000/svg';

/** A small padlock icon (no emoji font is needed). */
export function lockIcon() {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', '0 0 16 16');
  svg.setAttribute('width', '11');
  svg.setAttribute('height', '11');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('class', 'icon');
  const body = document.createElementNS(SVG, 'rect');
  for (const [k, v] of Object.entries({ x: '2.5', y: '7', width: '11', height: '8', rx: '1.5', fill: 'currentColor' })) body.setAttribute(k, v);
  const shackle = document.createElementNS(SVG, 'path');
  for (const [k, v] of Object.entries({ d: 'M5 7V5a3 3 0 0 1 6 0v2', fill: 'none', stroke: 'currentColor', 'stroke-width': '1.8' })) shackle.setAttribute(k, v);
  svg.append(body, shackle);
  return svg;
}

export function jsonBlock(value) {
  let text;
  try {
    text = typeof value === 'string' ? value : JSON.stringify(value, null, 2);
  } catch {
    text = String(value);
  }
  return h('pre', { class: 'json' }, text);
}

/**
 * How long something has run: fixed once it ended, else counting up (app.js updates every
 * `[data-since]` element each second in place, so nothing is rendered again for it).
 */
export function elapsed(startedAt, endedAt, now, props = {}) {
  if (!startedAt) return null;
  if (endedAt) return h('span', { ...props, title: t('dom.span', { from: fmt.clock(startedAt), to: fmt.clock(endedAt) }) }, fmt.duration(endedAt - startedAt));
  return h('span', { ...props, 'data-since': String(startedAt), title: t('dom.since', { at: fmt.clock(startedAt) }) }, fmt.duration(Math.max(0, now - startedAt)));
}

/** Updates every counting `elapsed` span to `now`. */
export function tickElapsed(now) {
  for (const el of document.querySelectorAll('[data-since]')) el.textContent = fmt.duration(Math.max(0, now - Number(el.dataset.since)));
}

/** Keeps a scrolled list pinned to its bottom when it was at the bottom before a change. */
export function stickToBottom(el, wasAtBottom) {
  if (wasAtBottom) el.scrollTop = el.scrollHeight;
}

export function atBottom(el) {
  return el.scrollHeight - el.scrollTop - el.clientHeight < 24;
}

export const fmt = {
  int(n) {
    return num(n);
  },
  tokens(u) {
    if (!u) return null;
    const p = u.prompt_tokens || 0;
    const c = u.completion_tokens || 0;
    if (!p && !c) return null;
    // Prompt tokens the endpoint served from its cache are counted in, and said apart.
    const tokens = u.cached_prompt_tokens
      ? t('fmt.tokens_cached', { in: fmt.int(p), cached: fmt.int(u.cached_prompt_tokens), out: fmt.int(c) })
      : t('fmt.tokens', { in: fmt.int(p), out: fmt.int(c) });
    return u.cost_usd ? `${tokens} · ${fmt.usd(u.cost_usd)}` : tokens;
  },
  /** 0.01234 → "$0.0123", 12.5 → "$12.50". */
  usd(x) {
    return `$${num(x, x >= 1 ? 2 : 4)}`;
  },
  /** "2026-11-22 05:20:06" (the server's local time) → "05:20:06", the date only when it is
   * not today; in the locale's way. */
  time(ts) {
    if (!ts) return '';
    const m = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})/.exec(ts);
    if (!m) return ts;
    const [y, mo, d, hh, mm, ss] = m.slice(1).map(Number);
    const at = new Date(y, mo - 1, d, hh, mm, ss);
    const today = new Date();
    const sameDay = at.getFullYear() === today.getFullYear() && at.getMonth() === today.getMonth() && at.getDate() === today.getDate();
    return sameDay ? clockTime(at) : dateTime(at);
  },
  short(id) {
    return id && id.length > 12 ? id.slice(0, 8) : id;
  },
  /** 850 → "850 ms", 12340 → "12.3 s", 125000 → "2m 05s" (in the person's language). */
  duration(ms) {
    if (ms === null || ms === undefined || !(ms >= 0)) return '';
    if (ms < 1000) return t('fmt.ms', { n: num(Math.round(ms)) });
    if (ms < 60000) return t('fmt.s', { n: num(ms / 1000, 1) });
    const s = Math.floor(ms / 1000);
    return t('fmt.min_s', { m: num(Math.floor(s / 60)), s: String(s % 60).padStart(2, '0') });
  },
  /** A time in ms since the epoch → "05:20:06". */
  clock(ms) {
    if (!ms) return '';
    return clockTime(new Date(ms));
  },
  /** How long a step ran (or runs so far); '' when its start is unknown. */
  took(step, now = Date.now()) {
    if (!step || !step.started_at) return '';
    return fmt.duration(Math.max(0, (step.ended_at || now) - step.started_at));
  },
};
