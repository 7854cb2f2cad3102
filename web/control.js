// The operator's controls: the decisions waiting for the person (GET /api/approvals, fetched
// again when a step starts or stops waiting; drawn by waiting.js) and pause/cancel, whose
// outcome (or refusal) shows in the composer's status line.

import { AuthError } from './api.js';
import { app, mark } from './ctx.js';
import { setStatus } from './composer.js';
import { t } from './i18n.js';

let decisionTimer = 0;
/** Fetches the decisions again after `delay` ms; calls close together make one fetch. */
export function refreshDecisions(delay = 150) {
  clearTimeout(decisionTimer);
  decisionTimer = setTimeout(async () => {
    if (!app.client) return;
    try {
      const r = await app.client.approvals();
      app.decisionItems = (r && r.approvals) || [];
      mark('decisions');
    } catch (e) {
      if (e instanceof AuthError) return app.signOut(t('waiting.session_ended'));
      console.warn('approvals:', e.message);
    }
  }, delay);
}

/** Runs an operator's control; its refusal (a member, a task already over) is shown. */
export function control(p) {
  p.then(
    () => setStatus('sent', t('decisions.done')),
    (e) => setStatus('error', e.message),
  );
}

/** Asks before cancelling (a reason is optional); nothing happens if the person declines. */
export function confirmCancel(what, run) {
  const why = window.prompt(t('control.cancel_prompt', { what }), '');
  if (why === null) return;
  control(run(why));
}
