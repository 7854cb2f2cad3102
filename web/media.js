// The images and sounds a tool returned (MCP image and audio content): a step's result keeps
// a reference to each (`{type, mimeType, blob, bytes}`), and the bytes are fetched from
// `GET /api/blob/{id}` with the session's token, shown as a picture or a player.

import { h, fmt } from './dom.js';
import { t } from './i18n.js';

/** How deep a result is searched for references (as the runtime's `media_in`). */
const DEPTH = 6;

/** The media references anywhere in a step's result, in order, each once. */
export function mediaRefs(result) {
  const found = new Map();
  const walk = (v, depth) => {
    if (!v || typeof v !== 'object') return;
    if (!Array.isArray(v) && typeof v.blob === 'string' && (v.type === 'image' || v.type === 'audio')) {
      found.set(v.blob, v);
      return;
    }
    if (depth === 0) return;
    for (const x of Array.isArray(v) ? v : Object.values(v)) walk(x, depth - 1);
  };
  walk(result, DEPTH);
  return [...found.values()];
}

/** The step's images and sounds, each loaded when shown; none: null. */
export function mediaSection(result, loadBlob) {
  const refs = mediaRefs(result);
  if (!refs.length) return null;
  return h('div', { class: 'media', testid: 'step-media' }, h('div', { class: 'label' }, refs.length === 1 ? t('media.media') : t('media.media_count', { count: fmt.int(refs.length) })), ...refs.map((r) => mediaItem(r, loadBlob)));
}

function mediaItem(ref, loadBlob) {
  const what = ref.type === 'image' ? t('media.what_image', { mime: ref.mimeType, bytes: fmt.int(ref.bytes) }) : t('media.what_audio', { mime: ref.mimeType, bytes: fmt.int(ref.bytes) });
  const isImage = ref.type === 'image';
  const el = isImage
    ? h('img', { class: 'media-image', testid: 'step-media-image', alt: t('media.image_alt', { mime: ref.mimeType }), title: what })
    : h('audio', { class: 'media-audio', testid: 'step-media-audio', controls: 'controls', title: what });
  const note = h('div', { class: 'muted small mono' }, what);
  loadBlob(ref.blob)
    .then((blob) => {
      el.src = URL.createObjectURL(blob);
    })
    .catch((e) => {
      note.textContent = t('media.load_failed', { what, error: e.message || e });
      note.className = 'step-error small';
    });
  return h('figure', { class: 'media-item' }, el, note);
}
