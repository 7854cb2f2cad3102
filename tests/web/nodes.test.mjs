// Drives the Cohort web console in headless Chromium against a team across machines (run by
// tests/suite/nodes.rs: nodes a and b of tests/fixtures/spread on one Postgres and one NATS): the
// topbar lists the nodes, the one running the team marked; each agent's card names the node it
// runs on. Then node b is killed (COHORT_KILL_PID): b is marked gone, and its agent's card
// names node a, where it runs again. The marks read in light and dark mode.
//
//   COHORT_URL=http://127.0.0.1:7878 COHORT_USER=operator COHORT_PASSWORD=cohort-demo \
//   COHORT_KILL_PID=1234 node tests/web/nodes.test.mjs

import { Failure, settings, step, log, elapsed, launch, signIn as logIn, reportFailure, lowContrast } from './harness.mjs';

const S = settings('nodes test', 'web-console-nodes.png');
const { SHOT, WAIT } = S;
const signIn = (page) => logIn(page, S);
const KILL = Number(process.env.COHORT_KILL_PID || 0);
if (!KILL) {
  console.error('nodes test: set COHORT_KILL_PID (the pid of node b)');
  process.exit(2);
}

const browser = await launch(S);
const pageErrors = [];
let page;
let ok = false;
try {
  const context = await browser.newContext({ viewport: { width: 1366, height: 900 }, deviceScaleFactor: 1 });
  page = await context.newPage();
  page.setDefaultTimeout(WAIT);
  page.on('pageerror', (e) => pageErrors.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') pageErrors.push(`console error: ${m.text()}`);
  });

  await step(`sign in as ${S.USER}`, () => signIn(page));
  await step('the topbar lists both nodes, node a as the one running the team', async () => {
    await page.locator('[data-testid="node"][data-node="b"][data-node-state="up"]').waitFor();
    const a = ((await page.locator('[data-testid="node"][data-node="a"]').textContent()) || '').trim();
    if (a !== 'a ★') throw new Failure(`node a reads "${a}"`);
  });
  await page.getByTestId('tab-agents').click();
  const moved = await step('each agent card names its node; one runs on node b', async () => {
    const onB = page.locator('[data-testid="agent-card"]:has([data-testid="agent-card-node"][data-node="b"])');
    await onB.first().waitFor();
    const id = await onB.first().getAttribute('data-agent-id');
    const cards = await page.locator('[data-testid="agent-card"]').count();
    const named = await page.locator('[data-testid="agent-card"] [data-testid="agent-card-node"]').count();
    // Every agent of the team file names its node (people stay on the team's node, unnamed).
    if (named < 3 || named > cards) throw new Failure(`${named} of ${cards} cards name a node`);
    return id;
  });
  await step('no text on the page reads poorly', async () => {
    const low = await lowContrast(page);
    if (low.length) throw new Failure(`low contrast: ${JSON.stringify(low.slice(0, 3))}`);
  });
  await step('node b is killed: it is marked gone, and its agent runs on node a again', async () => {
    process.kill(KILL, 'SIGKILL');
    await page.locator('[data-testid="node"][data-node="b"][data-node-state="gone"]').waitFor();
    await page.locator(`[data-testid="agent-card"][data-agent-id="${moved}"] [data-testid="agent-card-node"][data-node="a"][data-node-state="up"]`).waitFor();
    const mark = page.locator('[data-testid="node"][data-node="b"]');
    const text = ((await mark.textContent()) || '').trim();
    if (text !== 'b · gone') throw new Failure(`node b reads "${text}"`);
  });
  await step('the gone mark reads in dark mode too', async () => {
    const dark = await browser.newContext({ viewport: { width: 1366, height: 900 }, colorScheme: 'dark' });
    const p = await dark.newPage();
    p.setDefaultTimeout(WAIT);
    await signIn(p);
    await p.locator('[data-testid="node"][data-node="b"][data-node-state="gone"]').waitFor();
    const low = await lowContrast(p);
    await dark.close();
    if (low.length) throw new Failure(`low contrast in dark mode: ${JSON.stringify(low.slice(0, 3))}`);
  });
  await step(`screenshot to ${SHOT}`, async () => {
    await page.screenshot({ path: SHOT });
  });
  if (pageErrors.length) throw new Failure(`the page reported errors:\n  ${pageErrors.join('\n  ')}`);
  ok = true;
  log(`passed in ${elapsed()} s`);
} catch (e) {
  await reportFailure('NODES TEST', e, { page, pageErrors, shot: SHOT });
} finally {
  await browser.close().catch(() => {});
}
process.exit(ok ? 0 : 1);
