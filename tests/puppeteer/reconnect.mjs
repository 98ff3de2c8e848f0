// Puppeteer through the task's CDP endpoint while the task's own connection to Chromium drops
// and is made again (run by tests/it/e2e_cdp_endpoint_life.rs).
// argv: <endpoint ws URL> <task page URL> <URL whose GET cuts the task's connection>
// Prints one JSON line with what it saw; exits non-zero on any failure (every wait is bounded).
import puppeteer from 'puppeteer-core';

const [wsEndpoint, top, cutUrl] = process.argv.slice(2);
const out = {};
const ms = (t) => Math.round(Number(process.hrtime.bigint() - t) / 1e5) / 10;

// `promise`, or a failure naming `what` after `limit` ms (the timer never keeps Node alive).
function within(promise, limit, what) {
  let timer;
  const late = new Promise((_, fail) => {
    timer = setTimeout(() => fail(new Error(`${what}: not within ${limit} ms`)), limit);
    timer.unref();
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

const taskPage = async (browser) => {
  const pages = await browser.pages();
  const page = pages.find((p) => p.url() === top);
  if (!page) throw new Error('the task page is not among ' + pages.map((p) => p.url()));
  return page;
};

const browser = await puppeteer.connect({ browserWSEndpoint: wsEndpoint, defaultViewport: null });
const page = await taskPage(browser);
out.before = await page.evaluate(() => 6 * 7);

// The task's upstream connection is cut: Puppeteer hears of it as of a browser whose targets
// went away (their sessions detached), while its own connection stays open.
const closed = new Promise((resolve) => page.once('close', resolve));
const destroyed = new Promise((resolve) => browser.once('targetdestroyed', (t) => resolve(t.type())));
const cut = process.hrtime.bigint();
out.cut = await within(fetch(cutUrl).then((r) => r.text()), 10000, 'the cut');
await within(closed, 10000, "the task page's close");
out.destroyed = await within(destroyed, 10000, 'targetdestroyed');
out.closed_ms = ms(cut);
out.old_page = await within(
  page.evaluate(() => 1).then((v) => `answered ${v}`, (e) => e.message),
  10000,
  'a call on the page that went away',
);
out.connected_after_cut = browser.connected;

// The task is back: the page is attached again on the same Puppeteer connection.
const again = await within(
  browser.waitForTarget((t) => t.type() === 'page' && t.url() === top, { timeout: 20000 }),
  21000,
  'the page attached again',
);
const page2 = await again.page();
out.after = await page2.evaluate(() => `${document.title} ${6 * 7}`);
out.back_ms = ms(cut);
out.pages_after = (await browser.pages()).map((p) => p.url());
await browser.disconnect();

// And a new connection to the same endpoint.
const fresh = await puppeteer.connect({ browserWSEndpoint: wsEndpoint, defaultViewport: null });
out.fresh = await (await taskPage(fresh)).evaluate(() => location.pathname);
out.fresh_pages = (await fresh.pages()).length;
await fresh.disconnect();

console.log(JSON.stringify(out));
