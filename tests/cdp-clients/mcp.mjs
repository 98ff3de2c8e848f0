// A small stdio MCP client (run by tests/it/e2e_cdp_clients.rs): starts an MCP server (argv after
// `--`), initializes it, then runs the tool calls read as one JSON array from argv[2]
// ([{"name": ..., "arguments": {...}, "timeout_ms": N}, ...]; "list" as a name lists the tools;
// an argument "$selected" is the page id chrome-devtools-mcp last listed as `<id>: ... [selected]`).
// Prints one JSON line: per call, its text content (or its error) and how long it took.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const calls = JSON.parse(process.argv[2]);
const cmd = process.argv.slice(process.argv.indexOf('--') + 1);
const server = spawn(cmd[0], cmd.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] });
const waiting = new Map();
let nextId = 1;
createInterface({ input: server.stdout }).on('line', (line) => {
  let msg;
  try { msg = JSON.parse(line); } catch { return; }
  if (msg.id !== undefined && waiting.has(msg.id)) {
    waiting.get(msg.id)(msg);
    waiting.delete(msg.id);
  }
});
function request(method, params, timeoutMs = 60000) {
  const id = nextId++;
  server.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
  return new Promise((resolve) => {
    const timer = setTimeout(() => { waiting.delete(id); resolve({ timeout: timeoutMs }); }, timeoutMs);
    waiting.set(id, (msg) => { clearTimeout(timer); resolve(msg); });
  });
}
const text = (r) => (r?.content ?? []).map((c) => (c.type === 'text' ? c.text : `[${c.type} ${c.mimeType} ${(c.data ?? '').length}]`)).join('\n');

const out = [];
let selected = null;
const fill = (args) => Object.fromEntries(Object.entries(args ?? {}).map(([k, v]) => [k, v === '$selected' ? selected : v]));
try {
  const init = await request('initialize', {
    protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'cdp-supervisor-test', version: '0' },
  });
  if (!init.result) throw new Error('initialize: ' + JSON.stringify(init));
  server.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
  for (const c of calls) {
    const t = process.hrtime.bigint();
    const r = c.name === 'list'
      ? await request('tools/list', {})
      : await request('tools/call', { name: c.name, arguments: fill(c.arguments) }, c.timeout_ms ?? 60000);
    const ms = Number(process.hrtime.bigint() - t) / 1e6;
    if (c.name === 'list') out.push({ name: 'list', tools: r.result.tools.map((x) => x.name), ms });
    else out.push({ name: c.name, ms, timeout: r.timeout ?? null, error: r.error?.message ?? null,
      is_error: r.result?.isError ?? false, text: text(r.result) });
    const m = /^(\d+): .*\[selected\]/m.exec(text(r.result));
    if (m) selected = Number(m[1]);
  }
} finally {
  server.kill('SIGTERM');
}
console.log(JSON.stringify(out));
process.exit(0);
