// Puppeteer or Playwright on a browser (run by tests/it/e2e_cdp_clients.rs, once through the
// task's CDP endpoint and once straight to Chromium, and the two outputs compared).
// argv: <puppeteer-ws | puppeteer-url | playwright> <ws or http URL> <task page URL>
//       <page that alerts while it loads> <scenario: basic | hangs>
// Prints one JSON line; exits non-zero on a failure of the basic scenario. Between two scenarios
// it asks the test to wait for a condition only the supervisor sees: it prints `sync <what>` and
// reads the test's one-line answer from stdin (see `run_synced` in the test).
import { createInterface } from 'node:readline';
import puppeteer from 'puppeteer-core';
import { chromium } from 'playwright-core';

const [lib, url, top, alertOnLoad, scenario] = process.argv.slice(2);
const out = {};
const t0 = process.hrtime.bigint();
const now = () => process.hrtime.bigint();
const ms = (t) => Math.round(Number(now() - t) / 1e4) / 100;
const pngSize = (b) => [b.readUInt32BE(16), b.readUInt32BE(20)];
// A call that may hang: its value, its error, or `hung` after `limit` ms, and how long it took.
async function bounded(promise, limit) {
  const t = now();
  let timer;
  const hung = new Promise((r) => { timer = setTimeout(() => r({ hung: limit }), limit); });
  const r = await Promise.race([
    promise.then((value) => ({ value }), (e) => ({ error: String(e.message ?? e).split('\n')[0] })),
    hung,
  ]);
  clearTimeout(timer);
  return { ...r, ms: ms(t) };
}

const answers = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function sync(what) {
  console.log('sync ' + what);
  const { value, done } = await answers.next();
  if (done) throw new Error('no answer to sync ' + what);
  return JSON.parse(value);
}

let browser, newPage, pages;
if (lib === 'playwright') {
  browser = await chromium.connectOverCDP(url, { timeout: 30000 });
  const ctx = browser.contexts()[0];
  pages = async () => ctx.pages();
  newPage = () => ctx.newPage();
} else {
  const opts = lib === 'puppeteer-url' ? { browserURL: url } : { browserWSEndpoint: url };
  browser = await puppeteer.connect({ ...opts, defaultViewport: null, protocolTimeout: 30000 });
  pages = () => browser.pages();
  newPage = () => browser.newPage();
}
const page = (await pages()).find((p) => p.url() === top);
if (!page) throw new Error('the task page is not among ' + (await pages()).map((p) => p.url()));
const step = (name) => console.error(`step ${name} at ${ms(t0)} ms`);
// The cross-origin iframe of `p`, once the client has it (it attaches the out-of-process
// iframe's target on its own time, so right after `goto` or `connect` it may not have it yet):
// awaited on the client's frame events, within 10 s.
async function iframeIn(p) {
  const cross = (f) => f.url().includes('//localhost:');
  if (lib !== 'playwright') return p.waitForFrame(cross, { timeout: 10000 });
  const later = p.waitForEvent('framenavigated', { predicate: cross, timeout: 10000 });
  const now = p.frames().find(cross);
  if (!now) return later;
  later.catch(() => {});
  return now;
}

if (scenario === 'basic') {
  step('evaluate');
  out.evaluate = await page.evaluate(() => 6 * 7);
  step('iframe');
  out.iframe = await (await iframeIn(page)).evaluate(() => location.origin + ' ' + document.body.innerText);
  step('screenshot');
  out.screenshot = pngSize(await page.screenshot());
  page.once('dialog', async (d) => { out.dialog = d.type() + ': ' + d.message(); await d.accept(); });
  step('after_dialog');
  out.after_dialog = await page.evaluate(() => { alert('the client handles this'); return 'back'; });
  const fresh = await newPage();
  await fresh.goto(top);
  step('new_page_title');
  out.new_page_title = await fresh.title();
  step('new_page_iframe');
  out.new_page_iframe = await (await iframeIn(fresh)).evaluate(() => location.origin);
  step('new_page_screenshot');
  out.new_page_screenshot = pngSize(await fresh.screenshot());
  await fresh.goto(top + '?again');
  step('navigated');
  out.navigated = await fresh.evaluate(() => location.search);
  await fresh.close();
  step('pages_after_close');
  out.pages_after_close = (await pages()).filter((p) => p.url().startsWith(top)).length;
} else {
  // Each scenario starts once the supervisor has no dialog pending (a previous run's may still be
  // closing under load: a call would then be refused naming it, not the scenario's own).
  out.start_closed = await sync('no_dialog');
  // 1. An orphaned dialog: a handler that never answers; the client's next call.
  let dialog;
  const seen = new Promise((r) => page.on('dialog', (d) => { dialog = d; r(); }));
  const raising = bounded(page.evaluate(() => { alert('orphaned'); return 'raised'; }), 20000);
  await seen;
  step('orphan_next_call');
  out.orphan_next_call = await bounded(page.evaluate(() => 2), 5000);
  await dialog.dismiss();
  step('orphan_raising_call');
  out.orphan_raising_call = await raising;
  step('orphan_after');
  out.orphan_after = await bounded(page.evaluate(() => 3), 5000);
  page.removeAllListeners('dialog');
  // The supervisor may record the orphaned dialog's close a moment after the client's answer
  // returned (under load, seen in CI): the next scenario starts once it has, or its call would
  // be refused for the dialog before.
  out.orphan_closed = await sync('no_dialog');
  // 2. An alert during page.evaluate, no handler (Playwright dismisses it; Puppeteer leaves it).
  step('alert_in_evaluate');
  out.alert_in_evaluate = await bounded(page.evaluate(() => { alert('in evaluate'); return 'done'; }), 5000);
  step('alert_in_evaluate_next');
  out.alert_in_evaluate_next = await bounded(page.evaluate(() => 4), 5000);
  // 3. An alert while the page loads, no handler.
  const fresh = await newPage();
  step('alert_on_load_goto');
  out.alert_on_load_goto = await bounded(fresh.goto(alertOnLoad, { timeout: 8000 }), 10000);
  step('alert_on_load_next');
  out.alert_on_load_next = await bounded(fresh.evaluate(() => document.title), 5000);
  step('alert_on_load_close');
  out.alert_on_load_close = await bounded(fresh.close(), 5000);
}
await bounded(lib === 'playwright' ? browser.close() : browser.disconnect(), 5000);
console.log(JSON.stringify(out));
process.exit(0);
