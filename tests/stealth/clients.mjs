// One CDP client of the side-by-side detection table (tests/it/measure_stealth.rs,
// `side_by_side`), attached the way its users attach it, with its defaults:
//
//   node clients.mjs puppeteer  http://127.0.0.1:PORT  URL-PART
//   node clients.mjs playwright http://127.0.0.1:PORT  URL-PART
//
// Puppeteer: `puppeteer.connect({browserURL})`, then `browser.pages()` and the page whose URL
// contains URL-PART. Playwright: `chromium.connectOverCDP(browserURL)`, then the page among the
// default context's pages. Prints `ATTACHED` once it holds the page, stays attached until its
// standard input closes, then disconnects (never closes the browser) and exits.
import process from 'node:process';

const [which, browserURL, part] = process.argv.slice(2);
if (!which || !browserURL || !part) {
  console.error('usage: node clients.mjs puppeteer|playwright BROWSER_URL URL_PART');
  process.exit(2);
}

const stdinClosed = new Promise((resolve) => {
  process.stdin.on('end', resolve);
  process.stdin.on('close', resolve);
  process.stdin.resume();
});

async function main() {
  if (which === 'puppeteer') {
    const { default: puppeteer } = await import('puppeteer-core');
    const browser = await puppeteer.connect({ browserURL });
    const pages = await browser.pages();
    const page = pages.find((p) => p.url().includes(part));
    if (!page) throw new Error(`no page with ${part} among ${pages.map((p) => p.url())}`);
    console.log('ATTACHED');
    await stdinClosed;
    await browser.disconnect();
  } else if (which === 'playwright') {
    const { chromium } = await import('playwright-core');
    const browser = await chromium.connectOverCDP(browserURL);
    const pages = browser.contexts().flatMap((c) => c.pages());
    const page = pages.find((p) => p.url().includes(part));
    if (!page) throw new Error(`no page with ${part} among ${pages.map((p) => p.url())}`);
    console.log('ATTACHED');
    await stdinClosed;
    // Closing a browser connectOverCDP gave disconnects without closing the real browser.
    await browser.close();
  } else {
    throw new Error(`unknown client ${which}`);
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(String(e && e.stack ? e.stack : e));
    process.exit(1);
  },
);
