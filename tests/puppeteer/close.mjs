// Puppeteer's browser.close() through a task's CDP endpoint (run by
// tests/it/e2e_cdp_endpoint_page.rs): it opens a page, then closes "the browser", which through
// the endpoint closes its pages and disconnects it, and leaves the task's browser open.
// argv: <endpoint ws URL> <URL for the new page>
// Prints one JSON line; exits non-zero on any failure.
import puppeteer from 'puppeteer-core';

const [wsEndpoint, url] = process.argv.slice(2);
const browser = await puppeteer.connect({ browserWSEndpoint: wsEndpoint, defaultViewport: null });
const out = {};
const page = await browser.newPage();
await page.goto(url);
out.title = await page.evaluate(() => document.title);
out.pages = (await browser.pages()).length;
const gone = new Promise((resolve) => browser.once('disconnected', resolve));
await browser.close();
await gone;
out.connected = browser.connected;
console.log(JSON.stringify(out));
