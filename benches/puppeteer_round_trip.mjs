// Puppeteer `page.evaluate(() => 1)` round trips on one page, through the task's CDP endpoint,
// straight to Chromium and through a byte relay in front of Chromium (the floor any proxy pays),
// each order in turn (run by benches/cdp_endpoint.rs from the pinned puppeteer-core under
// target/puppeteer, where Node resolves its imports from).
// argv: <endpoint ws URL> <browser ws URL> <page target id> <samples> <relay ws URL>
// Prints one JSON line: {"via": [us...], "direct": [us...], "relay": [us...]}.
import puppeteer from 'puppeteer-core';

// Never outlive the bench: a hung connection ends the run with an error.
setTimeout(() => { console.error('timed out'); process.exit(2); }, 300_000).unref();

const [viaUrl, directUrl, targetId, n, relayUrl] = process.argv.slice(2);
const pageOf = async (browserWSEndpoint) => {
  const b = await puppeteer.connect({ browserWSEndpoint, defaultViewport: null });
  const page = (await b.pages()).find((p) => p.target()._targetId === targetId);
  if (!page) throw new Error(`no page ${targetId} among ${(await b.pages()).length}`);
  return [b, page];
};
const [bv, via] = await pageOf(viaUrl);
const [bd, direct] = await pageOf(directUrl);
const [br, relay] = await pageOf(relayUrl);
const time = async (page) => {
  const t = process.hrtime.bigint();
  await page.evaluate(() => 1);
  return Number(process.hrtime.bigint() - t) / 1e3;
};
const pages = [['via', via], ['direct', direct], ['relay', relay]];
for (let i = 0; i < 300; i++) {
  for (const [, p] of pages) await time(p);
}
const out = { via: [], direct: [], relay: [] };
for (let i = 0; i < Number(n); i++) {
  for (let k = 0; k < 3; k++) {
    const [name, p] = pages[(i + k) % 3];
    out[name].push(await time(p));
  }
}
console.log(JSON.stringify(out));
await bv.disconnect();
await bd.disconnect();
await br.disconnect();
