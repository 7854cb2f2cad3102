// The person's private conversations and notices, as the server holds them
// (GET /api/human/{id}/conversations): fetched again when the person's own agent state changes
// (a message reached them, they sent one), after each send, and slowly as a safety net. Kept
// apart from the inbox view so the composer can ask for a refresh without importing the view.

import { AuthError } from './api.js';
import { app, ui, mark } from './ctx.js';
import { t } from './i18n.js';

/** The messages in `list` still waiting for the person's reply. */
export function pendingOf(list) {
  return (list || []).filter((m) => m.sender_id !== app.sess.human_agent_id && m.need_reply && !m.replied);
}

let convTimer = 0;
let convInFlight = false;
let convAgain = false;
/** Fetches again after `delay` ms; calls close together make one fetch, none run twice at once. */
export function refreshConversations(delay = 120) {
  clearTimeout(convTimer);
  convTimer = setTimeout(fetchConversations, delay);
}

async function fetchConversations() {
  if (!app.sess) return;
  if (convInFlight) {
    convAgain = true;
    return;
  }
  convInFlight = true;
  try {
    const pool = await app.client.conversations();
    const next = {
      conversation_privates: (pool && pool.conversation_privates) || {},
      global_messages: (pool && pool.global_messages) || [],
      global_messages_omitted: (pool && pool.global_messages_omitted) || 0,
    };
    const sig = JSON.stringify(next);
    if (sig !== ui.poolSig) {
      ui.pool = next;
      ui.poolSig = sig;
      // An answer the server has recorded ends the answering mode.
      if (ui.replyTo && !pendingOf(next.conversation_privates[ui.replyTo.sender_id]).some((m) => m.task_id === ui.replyTo.task_id)) {
        ui.replyTo = null;
        mark('composer');
      }
      mark('inbox', 'summary');
    }
  } catch (e) {
    if (e instanceof AuthError) return app.signOut(t('app.session_ended'));
    console.warn('conversations:', e.message);
  } finally {
    convInFlight = false;
    if (convAgain) {
      convAgain = false;
      refreshConversations(0);
    }
  }
}
