// Puppeteer `page.evaluate(() => 1)` round trips on one page, through the task's CDP endpoint
// and straight to Chromium, alternating (run by benches/cdp_endpoint.rs from the pinned
// puppeteer-core under target/puppeteer, where Node resolves its imports from).
// argv: <endpoint ws URL> <browser ws URL> <page target id> <samples>
// Prints one JSON line: {"via": [us...], "direct": [us...]}.
import puppeteer from 'puppeteer-core';

// Never outlive the bench: a hung connection ends the run with an error.
setTimeout(() => { console.error('timed out'); process.exit(2); }, 300_000).unref();

const [viaUrl, directUrl, targetId, n] = process.argv.slice(2);
const pageOf = async (browserWSEndpoint) => {
  const b = await puppeteer.connect({ browserWSEndpoint, defaultViewport: null });
  const page = (await b.pages()).find((p) => p.target()._targetId === targetId);
  if (!page) throw new Error(`no page ${targetId} among ${(await b.pages()).length}`);
  return [b, page];
};
const [bv, via] = await pageOf(viaUrl);
const [bd, direct] = await pageOf(directUrl);
const time = async (page) => {
  const t = process.hrtime.bigint();
  await page.evaluate(() => 1);
  return Number(process.hrtime.bigint() - t) / 1e3;
};
for (let i = 0; i < 300; i++) {
  await time(via);
  await time(direct);
}
const out = { via: [], direct: [] };
for (let i = 0; i < Number(n); i++) {
  const order = i % 2 === 0 ? [['via', via], ['direct', direct]] : [['direct', direct], ['via', via]];
  for (const [k, p] of order) out[k].push(await time(p));
}
console.log(JSON.stringify(out));
await bv.disconnect();
await bd.disconnect();
