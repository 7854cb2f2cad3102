// The console in Chinese, in headless Chromium (run by tests/suite/web_console.rs against
// examples/operator_zh, a team whose `language` is zh):
//
// - A browser that never chose a language gets the team's: the sign-in page is Chinese.
// - The operator gives a goal, answers the manager's question and confirms the writer's plan;
//   at each of those moments, and on every tab of the finished task, no English word is left in
//   the page's visible text (names of formats and protocols aside; ids, code and JSON are
//   marked `.mono`/`code`/`pre` and skipped, and so is the language switch's "English").
// - Nothing is hidden at 1280×800 or 390×844, in either theme, and every text reads at 4.5:1.
// - Times are the locale's (zh-CN's 24-hour clock) and the page says `lang="zh-CN"`.
// - The person switches to English: the page is drawn again in English, still signed in, and
//   the choice outlives a reload (localStorage); switched back, it is Chinese again.
//
//   COHORT_URL=http://127.0.0.1:7878 COHORT_USER=operator COHORT_PASSWORD=cohort-demo \
//   node tests/web/zh.test.mjs

import { Failure, settings, step, log, elapsed, launch, signIn, reportFailure, contrastOk, fitsOk, goalBecomesTask } from './harness.mjs';

const S = settings('zh console test', 'web-console-zh.png');
const { WAIT, shot } = S;
const LAPTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };
const TABS = ['stages', 'chat', 'agents', 'timeline', 'graph'];

/** Words that stay as they are in a Chinese console (as tests/suite/console_texts.rs allows),
 * and the SPEC's skill names, which the runtime's texts quote as they are (`[think] 写俳句`). */
const KEPT = ['Cohort', 'JSON', 'YAML', 'CSV', 'PDF', 'Markdown', 'MCP', 'LLM', 'MB', 'KB', 'Ctrl', 'Enter', 'ID', 'id', 'URL', 'USD', 'OpenTelemetry', 'Jaeger', 'Tempo', 'Langfuse'];
const SKILLS = ['planning', 'reflection', 'summary', 'instruction_generation', 'think', 'quick_think', 'decision', 'send_message', 'process_message', 'task_manager', 'agent_manager', 'ask_info', 'tool_decision'];

/** Every visible English word on the page, with where it is: text nodes and tooltips outside
 * ids, code, JSON and elements in another language (`lang`), as `{word, text, where}`. */
function englishLeft(page) {
  return page.evaluate((listed) => {
    // The team's agent ids are names its file gave (ASCII by the SPEC), not words.
    const kept = [...listed, ...new Set([...document.querySelectorAll('[data-agent-id]')].map((e) => e.dataset.agentId))];
    const SKIP = '.mono, code, pre, script, style, [lang]:not(html), [data-i18n-skip]';
    const out = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const el = n.parentElement;
      if (!el || el.closest(SKIP) || el.closest('[hidden]')) continue;
      if (!el.getClientRects().length || getComputedStyle(el).visibility === 'hidden') continue;
      const text = n.textContent;
      // A file name, a flag, an identifier (`human_agent_id`) or an id-like token (digits in
      // it) is a name, not a word.
      const words = text
        .split(/[^A-Za-z0-9_.\-]+/)
        .filter((w) => !w.startsWith('-'))
        .map((w) => w.replace(/^[.\-]+|[.\-]+$/g, ''))
        .filter((w) => w && !w.includes('.') && !w.includes('_') && !/\d/.test(w));
      for (const w of words) {
        if ((w.match(/[A-Za-z]/g) || []).length >= 2 && !kept.includes(w)) {
          const where = `${el.tagName.toLowerCase()}${el.dataset.testid ? `[${el.dataset.testid}]` : el.className && typeof el.className === 'string' ? `.${el.className.trim().split(/\s+/).join('.')}` : ''}`;
          out.push({ word: w, text: text.trim().slice(0, 80), where });
        }
      }
    }
    // Attributes people read too: tooltips, placeholders, labels for screen readers.
    for (const el of document.querySelectorAll('[title], [placeholder], [aria-label]')) {
      if (el.closest(SKIP) || el.closest('[hidden]')) continue;
      for (const attr of ['title', 'placeholder', 'aria-label']) {
        const v = el.getAttribute(attr);
        if (!v) continue;
        const words = v.split(/[^A-Za-z0-9_.\-]+/).filter((w) => w && !w.startsWith('-') && !w.includes('.') && !w.includes('_') && !/\d/.test(w));
        for (const w of words) if ((w.match(/[A-Za-z]/g) || []).length >= 2 && !kept.includes(w)) out.push({ word: w, text: `${attr}="${v.slice(0, 80)}"`, where: el.tagName.toLowerCase() });
      }
    }
    return out;
  }, [...KEPT, ...SKILLS]);
}

async function chineseOnly(page, where) {
  const left = await englishLeft(page);
  if (left.length) throw new Failure(`${where}: ${left.length} English words left, e.g. ${left.slice(0, 8).map((l) => `"${l.word}" in "${l.text}" (${l.where})`).join('; ')}`);
}

/** Every tab: Chinese only, at 4.5:1, and (on a phone) within the screen. */
async function everyTab(page, where, phone) {
  for (const tab of TABS) {
    await page.getByTestId(`tab-${tab}`).click();
    await page.waitForTimeout(250);
    await chineseOnly(page, `${where}, tab ${tab}`);
    await contrastOk(page, `${where}, tab ${tab}`);
    if (phone) await fitsOk(page, `${where}, tab ${tab}`);
  }
  await page.getByTestId('tab-stages').click();
}

async function opened(browser, viewport, colorScheme, pageErrors) {
  const context = await browser.newContext({ viewport, colorScheme, deviceScaleFactor: 1 });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT);
  page.on('pageerror', (e) => pageErrors.push(`page error (${viewport.width} ${colorScheme}): ${e.message}`));
  page.on('console', (m) => {
    // A refused sign-in is a 401 the browser logs; it is what the test does on purpose.
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) pageErrors.push(`console error (${viewport.width} ${colorScheme}): ${m.text()}`);
  });
  return { context, page };
}

const browser = await launch(S);
const pageErrors = [];
let page;
let ok = false;
try {
  let context;
  ({ context, page } = await opened(browser, LAPTOP, 'light', pageErrors));

  await step("a browser that never chose gets the team's language: the sign-in page is Chinese", async () => {
    await page.goto(`${S.BASE_URL}/`, { waitUntil: 'domcontentloaded' });
    await page.getByTestId('login-form').waitFor();
    const submit = (await page.getByTestId('login-submit').textContent()) || '';
    if (submit.trim() !== '登录') throw new Failure(`the sign-in button says "${submit}"`);
    const lang = await page.evaluate(() => document.documentElement.lang);
    if (lang !== 'zh-CN') throw new Failure(`<html lang="${lang}">`);
    await chineseOnly(page, 'the sign-in page');
    await contrastOk(page, 'the sign-in page');
  });

  await step('a wrong password is refused in Chinese', async () => {
    await page.getByTestId('login-user').fill(S.USER);
    await page.getByTestId('login-password').fill('not-the-password');
    await page.getByTestId('login-submit').click();
    const err = page.getByTestId('login-error');
    await err.waitFor();
    await chineseOnly(page, 'the sign-in page, a wrong password');
  });

  const task = await step('signed in, a goal given in the composer becomes a task; the page is Chinese', async () => {
    await signIn(page, S);
    await chineseOnly(page, 'the console before any task');
    return goalBecomesTask(page, '写一首关于我选的季节的俳句。');
  });

  await step("the manager's question waits at the top in Chinese, with its deadline on the locale's clock", async () => {
    const card = page.locator('[data-testid="decisions"] [data-testid="question"]').first();
    await card.waitFor();
    const by = (await card.getByTestId('question-deadline').textContent()) || '';
    if (!/\d\d:\d\d:\d\d/.test(by) || /\bby\b/.test(by)) throw new Failure(`the question's deadline: "${by}"`);
    await chineseOnly(page, 'a question waiting');
    await contrastOk(page, 'a question waiting');
    await card.locator('[data-testid="ask-option"]', { hasText: '秋' }).click();
    await page.locator('[data-testid="question"]').waitFor({ state: 'detached' });
  });

  await step("the writer's plan check waits in Chinese and is confirmed", async () => {
    const plan = page.locator('[data-testid="decisions"] [data-testid="decision"][data-kind="plan"]').first();
    await plan.waitFor();
    await chineseOnly(page, 'a plan check waiting');
    await contrastOk(page, 'a plan check waiting');
    await page.screenshot({ path: shot('-plan-check') });
    await plan.getByTestId('decision-approve').click();
    await page.locator('[data-testid="decisions"]').waitFor({ state: 'hidden' });
  });

  await step('the task finishes; every tab reads in Chinese at 4.5:1 on the laptop', async () => {
    await page.locator(`[data-testid="task-item"][data-task-id="${task}"][data-state="finished"]`).waitFor();
    await page.getByTestId('notices').locator('summary').click();
    await page.getByTestId('notice-item').first().waitFor();
    await everyTab(page, 'laptop light', false);
  });

  for (const scheme of ['light', 'dark']) {
    await step(`a 390×844 phone (${scheme}): Chinese only, nothing wider than the screen, every text at 4.5:1`, async () => {
      const phone = await opened(browser, PHONE, scheme, pageErrors);
      await signIn(phone.page, S);
      await phone.page.locator(`[data-testid="task-item"][data-task-id="${task}"]`).click();
      await fitsOk(phone.page, `phone ${scheme}`);
      await everyTab(phone.page, `phone ${scheme}`, true);
      await phone.page.screenshot({ path: shot(`-phone-${scheme}`), fullPage: true });
      await phone.context.close();
    });
  }

  await step('switched to English, the page is English and still signed in; the choice outlives a reload', async () => {
    await Promise.all([page.waitForEvent('load'), page.getByTestId('language').selectOption('en')]);
    await page.locator('[data-testid="conn-status"][data-state="live"]').waitFor();
    const tab = (await page.getByTestId('tab-stages').textContent()) || '';
    if (tab.trim() !== 'Stages') throw new Failure(`in English the stages tab says "${tab}"`);
    await page.reload({ waitUntil: 'domcontentloaded' });
    await page.locator('[data-testid="conn-status"][data-state="live"]').waitFor();
    const again = (await page.getByTestId('tab-stages').textContent()) || '';
    if (again.trim() !== 'Stages') throw new Failure(`after a reload the stages tab says "${again}"`);
    await Promise.all([page.waitForEvent('load'), page.getByTestId('language').selectOption('zh')]);
    await page.locator('[data-testid="conn-status"][data-state="live"]').waitFor();
    await chineseOnly(page, 'switched back to Chinese');
  });

  await step(`screenshot to ${S.SHOT}`, () => page.screenshot({ path: S.SHOT }));
  await context.close();
  if (pageErrors.length) throw new Failure(`the page reported errors:\n  ${pageErrors.join('\n  ')}`);
  ok = true;
  log(`passed in ${elapsed()} s`);
} catch (e) {
  await reportFailure('zh console test', e, { page, pageErrors, shot: S.SHOT });
} finally {
  await browser.close().catch(() => {});
}
process.exit(ok ? 0 : 1);
