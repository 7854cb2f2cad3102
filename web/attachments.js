// Files a person attaches: the composer's attach button uploads each file at once (the server
// checks its size and type and keeps it in the team's store), shows it as a chip that can be
// taken off again, and sends the kept files' ids with the message; a task and a message show
// their files, each a button that downloads it (the token goes in a header, so no plain link).

import { h } from './dom.js';
import { t, num } from './i18n.js';
import { AuthError } from './api.js';
import { app, ui } from './ctx.js';
import { setStatus } from './composer.js';

/** The most files one message carries (the server refuses more). */
const MOST_FILES = 8;

/** "812 B", "4.2 kB", "1.3 MB". */
export function size(bytes) {
  if (bytes < 1000) return `${num(bytes)} B`;
  if (bytes < 1e6) return `${num(bytes / 1e3, 1)} kB`;
  return `${num(bytes / 1e6, 1)} MB`;
}

/** The files picked in `input`, uploaded one by one; each shows as it is kept or refused. */
export async function attachPicked(input, status) {
  const files = [...input.files];
  input.value = '';
  for (const file of files) {
    if (ui.attached.length >= MOST_FILES) {
      status('error', t('attachments.too_many', { most: num(MOST_FILES) }));
      break;
    }
    const chip = { name: file.name, state: 'uploading' };
    ui.attached.push(chip);
    renderAttached();
    try {
      const kept = await app.client.upload(file);
      Object.assign(chip, kept.attachment, { state: 'kept' });
      // The same file twice is one attachment.
      if (ui.attached.some((a) => a !== chip && a.id === chip.id)) takeOff(chip);
    } catch (err) {
      if (err instanceof AuthError) return app.signOut(t('app.session_ended'));
      takeOff(chip);
      status('error', t('attachments.not_attached', { name: file.name, error: err.message }));
    }
    renderAttached();
  }
}

/** Takes `chip` off the message (if the person has not already). */
function takeOff(chip) {
  const at = ui.attached.indexOf(chip);
  if (at >= 0) ui.attached.splice(at, 1);
}

/** The ids to send, or null while a file is still uploading. */
export function attachedIds() {
  if (ui.attached.some((a) => a.state !== 'kept')) return null;
  return ui.attached.map((a) => a.id);
}

export function clearAttached() {
  ui.attached = [];
  renderAttached();
}

export function renderAttached() {
  const list = document.getElementById('c-attached');
  list.replaceChildren(
    ...ui.attached.map((a) =>
      h(
        'li',
        { class: `file-chip ${a.state}`, testid: 'composer-attached-file', 'data-state': a.state, 'data-name': a.name },
        h('span', { class: 'file-name' }, a.name),
        h('span', { class: a.state === 'kept' ? 'muted small mono' : 'muted small' }, a.state === 'kept' ? `${a.mime} · ${size(a.bytes)}` : t('attachments.uploading')),
        h('button', { type: 'button', class: 'btn btn-link small', title: t('attachments.take_off', { name: a.name }), 'aria-label': t('attachments.take_off', { name: a.name }), onclick: () => { takeOff(a); renderAttached(); } }, '×'),
      ),
    ),
  );
}

/** The files of a task or a message, each downloadable; null when there are none. */
export function fileList(files, testid) {
  if (!files || !files.length) return null;
  return h(
    'ul',
    { class: 'file-list', testid, 'aria-label': t('attachments.files_label') },
    h('li', { class: 'muted small', 'aria-hidden': 'true' }, t('attachments.attached')),
    files.map((f) =>
      h(
        'li',
        null,
        h('button', { type: 'button', class: 'btn btn-link file-link', testid: 'attachment', 'data-attachment-id': f.id, title: t('attachments.download', { name: f.name, mime: f.mime, size: size(f.bytes) }), onclick: () => download(f) }, f.name),
        h('span', { class: 'muted small' }, ` ${size(f.bytes)}`),
      ),
    ),
  );
}

async function download(f) {
  try {
    const blob = await app.client.attachment(f.id);
    const url = URL.createObjectURL(blob);
    const a = h('a', { href: url, download: f.name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  } catch (err) {
    if (err instanceof AuthError) return app.signOut(t('app.session_ended'));
    setStatus('error', t('attachments.download_failed', { name: f.name, error: err.message }));
  }
}
