// Drives the Cohort web console in headless Chromium through a HIGH call's confirmation (run by
// tests/suite/web_console.rs on a copy of examples/tools/approval.yaml, whose clerk's HIGH calls and
// plans wait for the operator): the clerk's plans are confirmed as they come, and the call that
// writes the file waits with a warning that names what it may do, shown before its arguments,
// with two ways to reject it: skip the call, or (seed 000's default) cancel the task. Rejected
// that way, the task ends cancelled with the reason, and the file was never written.
//
//   COHORT_URL=http://127.0.0.1:7878 COHORT_USER=operator COHORT_PASSWORD=cohort-demo \
//   COHORT_SCREENSHOT=target/web-console-approval-warning.png node tests/web/approval_warning.test.mjs

import { Failure, settings, step, log, walk, sendGoal } from './harness.mjs';

const S = settings('approval warning test', 'web-console-approval-warning.png');
const { WAIT, shot } = S;

await walk(S, 'APPROVAL WARNING TEST', async (page) => {
  await step('send the manager the goal', () => sendGoal(page, 'Write a greeting file'));

  const warned = await step('plans confirmed as they come; the HIGH call waits with its warning first, and is rejected: cancel the task', async () => {
    const deadline = Date.now() + WAIT * 2;
    while (Date.now() < deadline) {
      await page.locator('[data-testid="decisions"] [data-testid="decision"]').first().waitFor();
      // This card, by its step: the next one may take its place at the top at once.
      const id = await page.locator('[data-testid="decisions"] [data-testid="decision"]').first().getAttribute('data-step-id');
      const card = page.locator(`[data-testid="decisions"] [data-testid="decision"][data-step-id="${id}"]`);
      const kind = await card.getAttribute('data-kind');
      if (kind === 'tool_call') {
        const risk = ((await card.getByTestId('decision-risk').textContent()) || '').trim();
        if (risk !== 'risk HIGH') throw new Failure(`a ${risk} call waits, not the HIGH one`);
        const warning = card.getByTestId('decision-warning');
        const text = (await warning.textContent()) || '';
        if (!text.startsWith('Careful: `write_file` is HIGH risk: it may overwrite or delete things')) throw new Failure(`the warning: "${text}"`);
        if ((await warning.getAttribute('role')) !== 'alert') throw new Failure('the warning is not announced');
        // Said before the arguments it warns about.
        const before = await warning.evaluate((w) => !!(w.compareDocumentPosition(w.parentElement.querySelector('[data-testid="decision-arguments"]')) & Node.DOCUMENT_POSITION_FOLLOWING));
        if (!before) throw new Failure('the warning comes after the arguments');
        const skip = ((await card.getByTestId('decision-skip').textContent()) || '').trim();
        const reject = ((await card.getByTestId('decision-reject').textContent()) || '').trim();
        if (skip !== 'Skip this call' || reject !== 'Reject: cancel the task') throw new Failure(`the rejections offered: "${skip}", "${reject}"`);
        await card.screenshot({ path: shot('-card') });
        await card.getByTestId('decision-reason').fill('not this file, not today');
        await card.getByTestId('decision-reject').click();
        await card.waitFor({ state: 'detached' });
        return text;
      }
      await card.getByTestId('decision-approve').click();
      await card.waitFor({ state: 'detached' });
    }
    throw new Failure('no HIGH call came to be approved');
  });

  await step('the task ends cancelled, with the reason in its summary', async () => {
    const item = page.locator('[data-testid="task-item"][data-base="false"][data-state="cancelled"]').first();
    await item.waitFor();
    await item.click();
    const card = page.locator('[data-testid="task-summary"]');
    await card.waitFor();
    const text = (await card.textContent()) || '';
    if (!text.includes('Task cancelled') || !text.includes('not this file, not today')) throw new Failure(`the summary card: "${text}"`);
    log(`warned: ${warned}`);
  });
});
