// The detection page's checks (SPEC §19, issue 32): each a known way a page tells that a
// protocol client or an automation layer is attached. The page runs them in rounds: round 0 as
// soon as it has loaded (no client attached yet), then each time the test moves its round on
// (the page long-polls /detect-next), and posts every round's values to /detect-report. The test
// compares each round with round 0: a check whose value changed has "flipped".
//
// Console traps are cumulative: every round logs fresh trap objects, and a trap that ever fired
// stays fired (a client that enables the Runtime domain later gets the messages logged before,
// replayed, so the round-0 traps fire then).
(() => {
  'use strict';
  const params = new URLSearchParams(location.search);
  const ROLE = params.get('role') || 'top';
  const PAGE = params.get('p') || '0';
  const OWN_PATHS = ['/detect', '/detect.js', '/detect-next', '/detect-report'];
  const SCRIPT_URL = new URL('/detect.js', location.href).href;

  // What the page saved before anyone could touch it.
  const FPTS = Function.prototype.toString;
  const NAMES = ['alert', 'confirm', 'prompt', 'print', 'open'];
  const natives = {};
  for (const n of NAMES) natives[n] = window[n];
  const nativeToString = FPTS;
  const fired = {};
  const fire = (name) => { fired[name] = true; };

  // Error.prepareStackTrace sees every error whose stack V8 formats: one that somebody else
  // formats (a console serialiser reading `stack`) fires. Others get V8's own format.
  const marked = new WeakSet();
  Error.prepareStackTrace = (err, frames) => {
    if (marked.has(err)) fire('console_prepare_stack_trace');
    let head;
    try { head = Error.prototype.toString.call(err); } catch (e) { head = 'Error'; }
    return head + frames.map((f) => '\n    at ' + f).join('');
  };

  // Main-world DOM calls from code that is not the page's own (an injected evaluation).
  const foreignCalls = [];
  // A frame with a position (`file:line:col`) that is not the page's own script.
  const isForeign = (stack) => String(stack).split('\n').slice(1).some((line) => {
    const l = line.trim();
    return l.startsWith('at ') && /:\d+:\d+\)?$/.test(l) && !l.includes(location.origin);
  });
  const watch = (obj, name) => {
    const orig = obj[name];
    if (typeof orig !== 'function') return;
    const wrapped = {
      [name](...args) {
        const st = new Error().stack;
        if (isForeign(st) && foreignCalls.length < 5) foreignCalls.push(name + ': ' + String(st).slice(0, 400));
        return orig.apply(this, args);
      },
    }[name];
    obj[name] = wrapped;
  };
  watch(Document.prototype, 'querySelector');
  watch(Document.prototype, 'querySelectorAll');
  watch(Document.prototype, 'getElementById');
  watch(Document.prototype, 'getElementsByTagName');
  watch(Document.prototype, 'evaluate');
  watch(Element.prototype, 'querySelector');
  watch(Element.prototype, 'querySelectorAll');
  watch(Element.prototype, 'getBoundingClientRect');

  const ownKeys = (o) => {
    try {
      return Reflect.ownKeys(o).map((k) => (typeof k === 'symbol' ? k.toString() : k));
    } catch (e) {
      return ['<' + e + '>'];
    }
  };
  const PROTOS = {
    'Object.prototype': Object.prototype,
    'Function.prototype': Function.prototype,
    'Array.prototype': Array.prototype,
    'Error': Error,
    'Error.prototype': Error.prototype,
    'Promise.prototype': Promise.prototype,
    'EventTarget.prototype': EventTarget.prototype,
    'Node.prototype': Node.prototype,
    'Element.prototype': Element.prototype,
    'HTMLElement.prototype': HTMLElement.prototype,
    'Document.prototype': Document.prototype,
    'HTMLDocument.prototype': HTMLDocument.prototype,
    'Window.prototype': Window.prototype,
    'Navigator.prototype': Navigator.prototype,
    'navigator': navigator,
    'console': console,
    'JSON': JSON,
  };
  let baseline = null;
  const diff = (now, before) => {
    const b = new Set(before);
    const n = new Set(now);
    return {
      added: now.filter((k) => !b.has(k)).sort(),
      removed: before.filter((k) => !n.has(k)).sort(),
    };
  };
  const takeBaseline = () => {
    const protos = {};
    for (const [name, o] of Object.entries(PROTOS)) protos[name] = ownKeys(o);
    baseline = { window: ownKeys(window), document: ownKeys(document), protos };
  };

  const describeFn = (fn) => {
    if (typeof fn !== 'function') return { type: typeof fn };
    let ctor = false;
    try { Reflect.construct(function () {}, [], fn); ctor = true; } catch (e) { ctor = false; }
    return {
      name: fn.name,
      length: fn.length,
      has_prototype: Object.prototype.hasOwnProperty.call(fn, 'prototype'),
      own_keys: ownKeys(fn),
      constructor: ctor,
    };
  };
  const descriptor = (o, k) => {
    const d = Object.getOwnPropertyDescriptor(o, k);
    if (!d) return null;
    return {
      writable: d.writable, enumerable: d.enumerable, configurable: d.configurable,
      get: typeof d.get, set: typeof d.set,
      value: describeFn(d.value),
    };
  };

  // A value whose string conversion throws, for the stack check.
  const thrower = () => ({ toString() { throw new Error('detect-toString'); } });
  const stackThrough = (name) => {
    try {
      if (name === 'prompt') window.prompt(thrower(), 'x');
      else window[name](thrower());
      return 'no throw';
    } catch (e) {
      // The frames down to the call of `name` (not the page's own callers, which differ by round).
      const lines = String(e && e.stack).split('\n');
      const own = lines.findIndex((l) => l.includes('stackThrough'));
      return lines.slice(0, own < 0 ? lines.length : own).map((l) => l.split(location.origin).join('PAGE')).join('\n');
    }
  };

  const logTraps = () => {
    // 1. An Error whose own `stack` is a getter, passed to console.debug / console.log.
    for (const [check, log] of [['console_debug_error_stack_getter', console.debug],
                                ['console_log_error_stack_getter', console.log]]) {
      const e = new Error('detect');
      Object.defineProperty(e, 'stack', { configurable: true, get() { fire(check); return 'Error: detect'; } });
      log.call(console, e);
    }
    // 2. An Error whose stack V8 formats lazily (prepareStackTrace fires when someone reads it).
    {
      const e = new Error('detect-lazy');
      marked.add(e);
      console.log(e);
    }
    // 3. An Error whose `message` and `name` are getters.
    {
      const e = new Error();
      Object.defineProperty(e, 'message', { configurable: true, get() { fire('console_error_message_name_getter'); return 'm'; } });
      Object.defineProperty(e, 'name', { configurable: true, get() { fire('console_error_message_name_getter'); return 'n'; } });
      console.error(e);
    }
    // 4. An object with a Symbol.toStringTag getter.
    console.log({ get [Symbol.toStringTag]() { fire('console_tostringtag_getter'); return 'Detect'; } });
    // 5. A Proxy whose every trap fires.
    {
      const handler = {};
      for (const t of ['get', 'has', 'ownKeys', 'getOwnPropertyDescriptor', 'getPrototypeOf']) {
        handler[t] = (...a) => { fire('console_proxy_traps'); return Reflect[t](...a); };
      }
      console.log(new Proxy({ a: 1 }, handler));
    }
    // 6. console.table of rows with getters.
    console.table([{ get a() { fire('console_table_getter'); return 1; } }]);
    // 7. A %s format argument with a toString, and console.dir of an object with a getter.
    console.log('%s', { toString() { fire('console_format_tostring'); return 'x'; } });
    console.dir({ get a() { fire('console_dir_getter'); return 1; } });
  };
  const CONSOLE_CHECKS = ['console_debug_error_stack_getter', 'console_log_error_stack_getter',
    'console_prepare_stack_trace', 'console_error_message_name_getter', 'console_tostringtag_getter',
    'console_proxy_traps', 'console_table_getter', 'console_format_tostring', 'console_dir_getter'];

  const runChecks = () => {
    logTraps();
    const c = {};
    for (const k of CONSOLE_CHECKS) c[k] = fired[k] === true;
    for (const n of NAMES) {
      try { c['tostring_' + n] = nativeToString.call(window[n]); } catch (e) { c['tostring_' + n] = '<' + e + '>'; }
    }
    try {
      c.tostring_tostring = Function.prototype.toString.call(Function.prototype.toString) +
        (Function.prototype.toString === FPTS ? '' : ' (replaced)');
    } catch (e) { c.tostring_tostring = '<' + e + '>'; }
    const d = {};
    for (const n of NAMES) d[n] = { descriptor: descriptor(window, n), same: window[n] === natives[n] };
    d['Function.prototype.toString'] = descriptor(Function.prototype, 'toString');
    c.descriptors = d;
    c.new_props_window = diff(ownKeys(window), baseline.window);
    c.new_props_document = diff(ownKeys(document), baseline.document);
    const p = {};
    for (const [name, o] of Object.entries(PROTOS)) {
      const dd = diff(ownKeys(o), baseline.protos[name]);
      if (dd.added.length || dd.removed.length) p[name] = dd;
    }
    c.new_props_prototypes = p;
    c.resource_entries = performance.getEntriesByType('resource')
      .map((e) => e.name)
      .filter((u) => { try { const x = new URL(u); return !(x.origin === location.origin && OWN_PATHS.includes(x.pathname)) && !x.pathname.startsWith('/detect'); } catch (e) { return true; } })
      .sort();
    c.stack_through_dialogs = { alert: stackThrough('alert'), confirm: stackThrough('confirm'), prompt: stackThrough('prompt') };
    c.main_world_foreign_calls = foreignCalls.slice();
    {
      const t0 = performance.now();
      // eslint-disable-next-line no-debugger
      debugger;
      c.debugger_pause = performance.now() - t0 > 500;
    }
    c.navigator_webdriver = navigator.webdriver;
    c.visibility = { state: document.visibilityState, hidden: document.hidden, focus: document.hasFocus() };
    c.viewport = { inner: [innerWidth, innerHeight], outer: [outerWidth, outerHeight], dpr: devicePixelRatio,
      screen: [screen.width, screen.height, screen.availWidth, screen.availHeight] };
    c.user_agent = { ua: navigator.userAgent, brands: navigator.userAgentData ? navigator.userAgentData.brands.map((b) => b.brand) : null,
      platform: navigator.platform, languages: navigator.languages };
    return c;
  };

  // What a page sees of the browser's launch (not a before/after check: reported as is).
  const launchFacts = () => {
    const chrome = window.chrome;
    return {
      user_agent: navigator.userAgent,
      headless_in_ua: /HeadlessChrome/.test(navigator.userAgent),
      brands: navigator.userAgentData ? navigator.userAgentData.brands.map((b) => b.brand) : null,
      webdriver: navigator.webdriver,
      window: [innerWidth, innerHeight, outerWidth, outerHeight],
      screen: [screen.width, screen.height, screen.availWidth, screen.availHeight, screen.colorDepth],
      chrome: chrome === undefined ? null : Object.keys(chrome).sort(),
      chrome_runtime: chrome !== undefined && chrome.runtime !== undefined,
      plugins: navigator.plugins.length,
      mime_types: navigator.mimeTypes.length,
      languages: navigator.languages,
      notification_permission: typeof Notification === 'undefined' ? null : Notification.permission,
      hardware_concurrency: navigator.hardwareConcurrency,
    };
  };

  const post = (round, checks) => fetch('/detect-report', {
    method: 'POST',
    headers: { 'Content-Type': 'text/plain' },
    body: JSON.stringify({ page: PAGE, role: ROLE, round, checks, facts: launchFacts() }),
  });

  const loop = async (round) => {
    for (;;) {
      let next = round;
      try {
        const r = await fetch('/detect-next?p=' + encodeURIComponent(PAGE) + '&after=' + round);
        if (r.status === 200) next = Number(await r.text());
      } catch (e) { await new Promise((ok) => setTimeout(ok, 100)); }
      if (next > round) {
        round = next;
        await post(round, runChecks());
      }
      if (next < 0) return;
    }
  };

  const start = async () => {
    // An OOPIF learns its size from its parent's layout, a moment after its own load: round 0
    // waits for it (at most 3 s), or `viewport` would differ by itself later.
    for (let i = 0; i < 150 && (innerWidth === 0 || innerHeight === 0); i++) {
      await new Promise((ok) => setTimeout(ok, 20));
    }
    takeBaseline();
    await post(0, runChecks());
    loop(0);
  };
  if (document.readyState === 'complete') start();
  else window.addEventListener('load', start, { once: true });
})();
