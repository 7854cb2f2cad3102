// Drives the Cohort web console in headless Chromium through a goal with a file attached (run by
// tests/suite/web_console.rs against tests/fixtures/attachments): the operator attaches
// `sales.csv` with the composer's button (a refused file first: a page, which a browser would
// run, is not taken and the reason is shown), sends the goal with it, and sees the task list the
// file; the analyst read it through the workspace server, and the file downloads as it was
// attached. On a 390 px phone the composer's file chip and the task's file stay on the screen.
//
//   COHORT_URL=http://127.0.0.1:7878 COHORT_USER=operator COHORT_PASSWORD=cohort-demo \
//   COHORT_FILE=tests/fixtures/attachments/sales.csv \
//   COHORT_SCREENSHOT=target/web-console-attachments.png node tests/web/attachments.test.mjs

import { readFileSync } from 'node:fs';
import { Failure, settings, step, walk, sendGoal } from './harness.mjs';

const S = settings('attachments test', 'web-console-attachments.png');
// The browser logs the refused upload's answer; the test checks that it is shown.
S.expectedErrors = [/status of 415 \(Unsupported Media Type\)/];
const { shot } = S;
const FILE = process.env.COHORT_FILE || 'tests/fixtures/attachments/sales.csv';
const ID = 'att-16d6c08bb1945e810a4f1c0b';

await walk(S, 'ATTACHMENTS TEST', async (page) => {
  const input = page.getByTestId('composer-files');

  await step('a page is not taken, and the composer says why', async () => {
    await input.setInputFiles({ name: 'page.html', mimeType: 'text/html', buffer: Buffer.from('<script>alert(1)</script>') });
    const status = page.locator('[data-testid="composer-status"][data-state="error"]');
    await status.waitFor();
    const said = (await status.textContent()) || '';
    if (!said.includes('page.html') || !said.includes('text/html')) throw new Failure(`the refusal as shown: "${said}"`);
    if (await page.getByTestId('composer-attached-file').count()) throw new Failure('a refused file is still listed');
  });

  await step('the sales file is attached and shown as kept', async () => {
    await input.setInputFiles(FILE);
    const chip = page.locator('[data-testid="composer-attached-file"][data-name="sales.csv"][data-state="kept"]');
    await chip.waitFor();
    const text = (await chip.textContent()) || '';
    if (!text.includes('text/csv')) throw new Failure(`the chip reads "${text}"`);
    await page.getByTestId('composer').screenshot({ path: shot('-composer') });
  });

  await step('the goal goes with the file', async () => {
    await sendGoal(page, 'GOAL# sum up the attached sales');
    const said = (await page.getByTestId('composer-status').textContent()) || '';
    if (!said.includes('with 1 file')) throw new Failure(`the composer said "${said}"`);
    if (await page.getByTestId('composer-attached-file').count()) throw new Failure('the sent file is still in the composer');
    // The person's own conversation with the manager shows what went with the goal.
    await page.locator('[data-testid="private-chat"] [data-testid="message-attachments"] [data-attachment-id]').first().waitFor({ state: 'attached' });
  });

  await step('the task lists the file and finishes', async () => {
    const item = page.locator('[data-testid="task-item"][data-base="false"]').first();
    await item.waitFor();
    await item.click();
    await page.locator('[data-testid="task-attachments"] [data-testid="attachment"]').first().waitFor();
    const ids = await page.locator('[data-testid="task-attachments"] [data-testid="attachment"]').evaluateAll((els) => els.map((e) => e.getAttribute('data-attachment-id')));
    if (ids.join(',') !== ID) throw new Failure(`the task's files: ${ids.join(', ')}`);
    await page.locator('[data-testid="task-item"][data-base="false"][data-state="finished"]').first().waitFor();
  });

  await step('the analyst read the file through the workspace server', async () => {
    await page.getByTestId('tab-agents').click();
    const read = page.locator('[data-testid="step-item"][data-executor="workspace"][data-state="finished"]').first();
    await read.waitFor({ state: 'attached' });
    await page.getByTestId('tab-stages').click();
  });

  await step('the file downloads as it was attached', async () => {
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.locator('[data-testid="task-attachments"] [data-testid="attachment"]').first().click(),
    ]);
    if (download.suggestedFilename() !== 'sales.csv') throw new Failure(`downloaded as ${download.suggestedFilename()}`);
    const path = await download.path();
    if (readFileSync(path, 'utf8') !== readFileSync(FILE, 'utf8')) throw new Failure('the download differs from the file');
  });

  await step('on a phone the file chip and the task file stay on the screen', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await input.setInputFiles(FILE);
    await page.locator('[data-testid="composer-attached-file"][data-state="kept"]').waitFor();
    for (const sel of ['[data-testid="composer-attached-file"]', '[data-testid="task-attachments"]']) {
      const box = await page.locator(sel).first().boundingBox();
      if (!box) continue; // hidden behind another tab at this width
      if (box.x < 0 || box.x + box.width > 391) throw new Failure(`${sel} reaches ${Math.round(box.x + box.width)} px on a 390 px phone`);
    }
    await page.screenshot({ path: shot('-phone') });
  });
});
