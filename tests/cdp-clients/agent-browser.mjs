// agent-browser's CLI, as an agent runs it, on a browser (run by tests/it/e2e_cdp_clients.rs, once
// through the task's CDP endpoint and once straight to Chromium, and the two outputs compared).
// argv: <CDP URL for --cdp> <task page URL> <home: the daemon's sockets, pid file and state>
// Each command is one `agent-browser --json ...` process (the first one starts its daemon, which
// keeps the connection); each is bounded. Prints one JSON line: `out` (compared) and `ms` (not).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const [cdp, top, home] = process.argv.slice(2);
const bin = new URL('./node_modules/agent-browser/bin/agent-browser.js', import.meta.url).pathname;
// Its own HOME: the daemon's socket and pid file live there, apart from any other run's.
const env = { ...process.env, HOME: home, AGENT_BROWSER_IDLE_TIMEOUT_MS: '120000' };
const out = {};
const ms = {};
const t0 = process.hrtime.bigint();

// One command: its `data`, or a thrown error with what it said.
function ab(name, ...args) {
  const t = process.hrtime.bigint();
  let text;
  try {
    text = execFileSync(process.execPath, [bin, '--json', '--cdp', cdp, ...args], {
      env, encoding: 'utf8', timeout: 60000, stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (e) {
    text = e.stdout ?? '';
    if (!text.trim()) throw new Error(`agent-browser ${args.join(' ')}: ${e.message}\n${e.stderr}`);
  }
  ms[name] = Math.round(Number(process.hrtime.bigint() - t) / 1e4) / 100;
  const r = JSON.parse(text.trim().split('\n').pop());
  if (!r.success) throw new Error(`agent-browser ${args.join(' ')}: ${JSON.stringify(r)}`);
  return r.data;
}

// Repeats `name` (a command with no effect) until `done(data)`, within 10 s: a CLI has no event
// to wait on.
function until(name, done, ...args) {
  const end = Date.now() + 10000;
  const t = process.hrtime.bigint();
  for (let tries = 1; ; tries++) {
    const data = ab(name, ...args);
    ms[name + '_tries'] = tries;
    ms[name + '_all'] = Math.round(Number(process.hrtime.bigint() - t) / 1e4) / 100;
    if (done(data)) return data;
    if (Date.now() > end) throw new Error(`${name}: not within 10 s: ${JSON.stringify(data)}`);
  }
}

const tops = (tabs) => tabs.filter((t) => t.url.startsWith(top)).map((t) => t.url);
out.tabs_at_start = tops(ab('tabs_at_start', 'tab', 'list').tabs);
out.new_tab = ab('new_tab', 'tab', 'new', top).url;
out.title = ab('title', 'eval', 'document.title').result;
// Its eval runs in the top document; the cross-origin iframe shows in its snapshot, inlined
// under the iframe once the frame's document has loaded.
out.snapshot = until('snapshot', (d) => d.snapshot.includes('StaticText "B"'), 'snapshot').snapshot;
const shot = join(home, 'shot.png');
ab('screenshot', 'screenshot', shot);
const png = readFileSync(shot);
out.screenshot = [png.readUInt32BE(16), png.readUInt32BE(20)];
// An alert: agent-browser accepts it itself (its default), and the eval gets its value.
out.after_alert = ab('after_alert', 'eval', "alert('agent-browser accepts this'); 'back'").result;
// A confirm it must answer, seen with `dialog status`, answered with `dialog accept`. Raised on a
// timer well after the eval has returned: agent-browser's own checks after an eval wait for the
// page, and a confirm open then makes them time out (30 s straight to Chromium, then "tab is not
// responding").
ab('confirm', 'eval', "setTimeout(() => { window.answer = confirm('sure?'); }, 1500); 'asked'");
const status = until('dialog_status', (d) => d.hasDialog, 'dialog', 'status');
out.dialog = `${status.type}: ${status.message}`;
out.dialog_accept = ab('dialog_accept', 'dialog', 'accept').handled;
out.answer = ab('answer', 'eval', 'window.answer').result;
out.navigated_to = ab('navigate', 'open', top + '?again').url;
out.navigated = ab('navigated', 'eval', 'location.search').result;
ab('tab_close', 'tab', 'close');
out.tabs_after_close = tops(ab('tabs_after_close', 'tab', 'list').tabs);
out.closed = ab('close', 'close').closed;
ms.all = Math.round(Number(process.hrtime.bigint() - t0) / 1e4) / 100;
console.log(JSON.stringify({ out, ms }));
process.exit(0);
