// chrome-remote-interface on a page of the task, through the task's CDP endpoint (run by
// tests/it/e2e_cdp_endpoint_page.rs), with its default target: the first page of /json/list.
// argv: <endpoint http URL> <URL to navigate to>
// The endpoint's discovery is under the task's token (`alterPath` puts it before /json/list; the
// page's webSocketDebuggerUrl has it already), and it serves no /json/protocol (`local: true`:
// the protocol the package ships; without it, the error says so). Prints one JSON line; exits
// non-zero on any failure.
import CDP from 'chrome-remote-interface';

const [httpEndpoint, url] = process.argv.slice(2);
const base = new URL(httpEndpoint);
const prefix = base.pathname.replace(/\/$/, '');
const alterPath = (p) => (p.startsWith(prefix + '/') ? p : prefix + p);
const out = {};

const client = await CDP({ host: base.hostname, port: base.port, alterPath, local: true });
try {
  const { Runtime, Page } = client;
  out.ws = client.webSocketUrl;
  const v = await Runtime.evaluate({ expression: '6 * 7' });
  out.evaluate = v.result.value;
  await Page.enable();
  const loaded = Page.loadEventFired();
  await Page.navigate({ url });
  await loaded;
  out.title = (await Runtime.evaluate({ expression: 'document.title' })).result.value;
  client.once('Page.javascriptDialogOpening', (d) => {
    out.dialog = d.message;
    Page.handleJavaScriptDialog({ accept: true, promptText: 'Ann' });
  });
  const answer = await Runtime.evaluate({ expression: "prompt('Who?', 'x')" });
  out.answer = answer.result.value;
} finally {
  await client.close();
}
// Given the page's WebSocket URL and nothing else, chrome-remote-interface asks the root of that
// host for /json/protocol: the endpoint's 404 says what to do.
try {
  const other = await CDP({ target: out.ws });
  await other.close();
  out.default_options = 'connected';
} catch (e) {
  out.default_options = String(e?.message ?? e);
}
console.log(JSON.stringify(out));
