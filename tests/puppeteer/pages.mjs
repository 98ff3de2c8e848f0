// Puppeteer through one task's CDP endpoint: which pages it sees, before and after it opens one
// (run by tests/it/e2e_cdp_endpoint.rs). argv: <endpoint ws URL> <URL for the new page>
// Prints one JSON line; exits non-zero on any failure.
import puppeteer from 'puppeteer-core';

const [wsEndpoint, url] = process.argv.slice(2);
const browser = await puppeteer.connect({ browserWSEndpoint: wsEndpoint, defaultViewport: null });
const out = {};
out.before = (await browser.pages()).map((p) => p.url());
const page = await browser.newPage();
await page.goto(url);
out.title = await page.evaluate(() => document.title);
out.after = (await browser.pages()).map((p) => p.url());
await browser.disconnect();
console.log(JSON.stringify(out));
