// The supervisor page: every task, live, from the server's event stream (/events).
// Nothing from the server is ever inserted as HTML: every text goes through textContent.
//
// The stream sends every task in full once ("reset"), then per task only the fields that
// changed. A list comes as its new items (objects) and, for items this page already holds,
// their index in the list it has: [{..}, 0] is one new item before the first one held. Each
// card is made of parts that depend on a few fields; only the parts whose fields came are
// drawn again, and list items keep their elements (focus and typed text stay).
"use strict";

const tasksEl = document.getElementById("tasks");
const statusEl = document.getElementById("status");
const emptyEl = document.getElementById("empty");
/** task_id -> {el, data, parts, lists}: `lists[field]` is [{d, el}], in the server's order. */
const cards = new Map();
/** What a person typed into prompt fields, by dialog key, kept across re-renders. */
const drafts = new Map();
/** Server clock minus ours, in seconds. */
let skew = 0;
/** Thumbnails by task: {src, width, height, why, at, loading}. */
const thumbs = new Map();
/** How often a task's thumbnail is refreshed while it is on screen. */
const THUMB_EVERY_MS = 5000;

function serverNow() { return Date.now() / 1000 + skew; }

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") e.textContent = String(v);
    else if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) if (c) e.append(c);
  return e;
}

function duration(s) {
  s = Math.max(0, Math.round(s));
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
  if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
}

/** A span whose text is kept relative to now: "12 s ago", "in 4 min", "for 3 s". */
function when(at, fmt) {
  const e = el("span", { "data-at": at, "data-fmt": fmt });
  tick1(e, serverNow());
  return e;
}
function tick1(e, now) {
  const at = Number(e.dataset.at), fmt = e.dataset.fmt;
  if (fmt === "ago") e.textContent = duration(now - at) + " ago";
  else if (fmt === "left") e.textContent = now >= at ? "now" : "in " + duration(at - now);
  else if (fmt === "for") e.textContent = duration(now - at);
}
function tick() {
  const now = serverNow();
  for (const e of document.querySelectorAll("[data-at]")) tick1(e, now);
}

async function post(path, body) {
  const r = await fetch(path, {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  let answer = {};
  try { answer = await r.json(); } catch (_) { answer = { ok: false, error: "HTTP " + r.status }; }
  if (!r.ok || !answer.ok) throw new Error(answer.error || "HTTP " + r.status);
  return answer;
}

function dialogView(t, d) {
  const key = t.task_id + "\u0000" + d.id;
  const err = el("p", { class: "error", role: "alert" });
  let input = null;
  const box = el("div", {
    class: "dialog", role: "group", "data-task": t.task_id, "data-dialog": d.id,
    "aria-label": "Pending " + d.kind + " dialog " + d.id,
  });
  const head = el("p", { class: "meta" }, d.kind + " " + d.id + " · opened ", when(d.opened_at, "ago"));
  if (d.watchdog_at) head.append(" · the watchdog dismisses it ", when(d.watchdog_at, "left"));
  box.append(head, el("p", { class: "msg", text: d.message }));
  if (d.kind === "prompt") {
    box.append(el("p", { class: "meta", text: "Default answer: " + JSON.stringify(d.default_prompt) }));
    const id = "answer-" + btoa(unescape(encodeURIComponent(key))).replace(/[^A-Za-z0-9]/g, "");
    input = el("input", { id, type: "text", "data-key": key, autocomplete: "off" });
    input.value = drafts.has(key) ? drafts.get(key) : d.default_prompt;
    input.addEventListener("input", () => drafts.set(key, input.value));
    box.append(el("label", { for: id, text: "Answer to the prompt" }), input);
  }
  box.append(el("p", { class: "meta url", text: "Frame: " + (d.url || d.frame_id || "unknown") }));
  const answer = async (action, btn) => {
    for (const b of box.querySelectorAll("button")) b.disabled = true;
    err.textContent = "";
    try {
      const body = { task_id: t.task_id, dialog_id: d.id, action };
      if (input && action === "accept") body.prompt_text = input.value;
      await post("/api/answer", body);
      drafts.delete(key);
      box.setAttribute("aria-busy", "true");
    } catch (e) {
      err.textContent = "Not answered: " + e.message;
      for (const b of box.querySelectorAll("button")) b.disabled = false;
      btn.focus();
    }
  };
  const accept = el("button", { type: "button", class: "primary", "data-key": key + "\u0000accept", text: "Accept" });
  accept.addEventListener("click", () => answer("accept", accept));
  const dismiss = el("button", { type: "button", "data-key": key + "\u0000dismiss", text: "Dismiss" });
  dismiss.addEventListener("click", () => answer("dismiss", dismiss));
  box.append(el("div", { class: "actions" }, accept, dismiss), err);
  return box;
}

function frameTree(frames) {
  const kids = new Map();
  const ids = new Set(frames.map((f) => f.frame_id));
  for (const f of frames) {
    const p = f.parent_frame_id && ids.has(f.parent_frame_id) ? f.parent_frame_id : "";
    if (!kids.has(p)) kids.set(p, []);
    kids.get(p).push(f);
  }
  const list = (parent, depth) => {
    const ul = el("ul");
    for (const f of kids.get(parent) || []) {
      const li = el("li", {}, el("span", { class: "url", text: f.url || "(no URL)" }));
      if (f.oopif) li.append(el("span", { class: "badge oopif", text: "OOPIF" }));
      if (f.crashed) li.append(el("span", { class: "badge crashed", text: "crashed" }));
      if (f.name) li.append(el("span", { class: "meta", text: " name " + f.name }));
      if (depth < 20 && kids.has(f.frame_id)) li.append(list(f.frame_id, depth + 1));
      ul.append(li);
    }
    return ul;
  };
  return list("", 0);
}

function thumbnailOf(t) {
  const got = thumbs.get(t.task_id);
  const box = el("div", { class: "thumbs" });
  if (got && got.src) box.append(el("img", { class: "thumb", src: got.src, width: got.width, height: got.height, alt: "Thumbnail of the task's page" }));
  if (got && got.why) box.append(el("p", { class: "meta", text: "No new thumbnail: " + got.why }));
  const btn = el("button", { type: "button", "data-key": t.task_id + "\u0000thumb", text: "Refresh thumbnail" });
  btn.addEventListener("click", () => loadThumb(t.task_id, true));
  box.append(btn);
  return box;
}

/** Fetches a task's thumbnail (the server takes at most one a second per task). */
async function loadThumb(task, force) {
  const got = thumbs.get(task) || {};
  if (got.loading || (!force && got.at && Date.now() - got.at < THUMB_EVERY_MS)) return;
  got.loading = true;
  thumbs.set(task, got);
  const next = { src: got.src, width: got.width, height: got.height, at: Date.now() };
  try {
    const a = await post("/api/thumbnail", { task_id: task });
    Object.assign(next, { src: "data:image/jpeg;base64," + a.data, width: a.width, height: a.height, why: null });
  } catch (e) {
    next.why = e.message;
  }
  thumbs.set(task, next);
  const c = cards.get(task);
  if (c) draw(c, ["thumbnail"]);
}

/** Refreshes the thumbnails of the active tasks on screen. */
function refreshThumbs() {
  for (const [id, c] of cards) {
    if (c.data.state !== "active") continue;
    const r = c.el.getBoundingClientRect();
    if (r.bottom > 0 && r.top < window.innerHeight) loadThumb(id, false);
  }
}

function holdView(t) {
  const box = el("div", { class: t.held_since ? "held" : "" });
  const err = el("p", { class: "error", role: "alert" });
  const held = !!t.held_since;
  if (held) box.append(el("p", {}, "A person holds this task (for ", when(t.held_since, "for"), "): the supervisor answers no dialog and sends no automatic command, and the agent's calls are refused."));
  else if (t.holds) box.append(el("p", { class: "meta", text: "Held by a person " + t.holds + (t.holds === 1 ? " time, " : " times, ") + duration(t.held_before_s) + " in all." }));
  const btn = el("button", { type: "button", "data-key": t.task_id + "\u0000hold", text: held ? "Take back" : "Take over" });
  btn.addEventListener("click", async () => {
    btn.disabled = true;
    try { await post("/api/hold", { task_id: t.task_id, hold: !held }); }
    catch (e) { err.textContent = (held ? "Not taken back: " : "Not taken over: ") + e.message; btn.disabled = false; }
  });
  box.append(el("div", { class: "actions" }, btn), err);
  return box;
}

/** The element of one item of a list field, by field (the task's data is `t`). */
const ITEMS = {
  pending: (t, d) => dialogView(t, d),
  pages: (t, p) => {
    const li = el("li", {}, el("strong", { text: p.title || "(untitled)" }), " ", el("span", { class: "url", text: p.url }));
    if (p.opener) li.append(el("span", { class: "meta", text: " popup" }));
    return li;
  },
  frames: null,
  recent: (t, c) => {
    const li = el("li", {}, c.kind + " " + c.id + " closed by ", el("strong", { text: c.closed_by }), " ", when(c.closed_at, "ago"));
    if (c.accepted !== null) li.append(c.accepted ? " (accepted)" : " (dismissed)");
    if (c.user_input !== null) li.append(" answer " + JSON.stringify(c.user_input));
    li.append(el("div", { class: "meta", text: c.message }));
    return li;
  },
  console: (t, c) => el("li", {}, el("span", { class: "badge", text: c.level }), " ", c.text, " ", el("span", { class: "meta" }, when(c.ts, "ago"))),
  downloads: (t, d) => {
    const size = d.total ? d.received + " of " + d.total + " bytes" : d.received + " bytes";
    return el("li", {}, el("strong", { text: d.file || "(no name)" }), " " + d.state + ", " + size + ", started ", when(d.started_at, "ago"));
  },
};

/** Puts exactly `els` in `box`, in order, moving no element that is already in place. */
function sync(box, els) {
  const keep = new Set(els);
  for (const c of [...box.children]) if (!keep.has(c)) c.remove();
  els.forEach((e, i) => { if (box.children[i] !== e) box.insertBefore(e, box.children[i] || null); });
}

/** The elements of list `field`'s items. */
function itemEls(c, field) { return (c.lists[field] || []).map((i) => i.el); }

/** A part of a list in a <details>: its summary's count and its items. */
function listPart(field, title, count) {
  return {
    fields: [field, count],
    make(c) {
      const summary = el("summary");
      const ul = el("ul");
      return Object.assign(el("details", { "data-key": c.data.task_id + "\u0000" + field }, summary, ul), { summary, ul });
    },
    draw(c, box) {
      box.summary.textContent = title + " (" + (count ? c.data[count] : c.data[field].length) + ")";
      sync(box.ul, itemEls(c, field));
    },
  };
}

/** The parts of a card, in order: the fields each shows, how it is made and drawn again. */
const PARTS = [
  {
    fields: ["state", "attempt", "of", "crashed"],
    make(c) {
      const id = "task-" + btoa(unescape(encodeURIComponent(c.data.task_id))).replace(/[^A-Za-z0-9]/g, "");
      c.el.setAttribute("aria-labelledby", id);
      return el("h2", { id });
    },
    draw(c, h) {
      const t = c.data;
      const state = el("span", { class: "badge state-" + t.state, text: t.state });
      if (t.state === "reconnecting") state.textContent = "reconnecting " + t.attempt + " of " + t.of;
      h.replaceChildren(t.task_id, state);
      if (t.crashed) h.append(el("span", { class: "badge crashed", text: "crashed" }));
    },
  },
  {
    fields: ["cdp_url", "policy"],
    make: () => el("p", { class: "meta url" }),
    draw(c, p) { p.textContent = c.data.cdp_url + " · dialogs: " + c.data.policy; },
  },
  {
    fields: ["state", "reason", "blocked"],
    make: () => el("div"),
    draw(c, box) {
      const t = c.data;
      box.replaceChildren();
      if (t.reason) box.append(el("p", { class: "error", text: (t.state === "dead" ? "Dead: " : "Reason: ") + t.reason }));
      if (t.blocked) box.append(el("p", { class: "error", text: "Blocked (" + t.blocked.reason + "): " + t.blocked.hint }));
    },
  },
  {
    fields: ["state", "held_since", "holds", "held_before_s"],
    make: () => el("div"),
    draw(c, box) {
      const t = c.data;
      box.replaceChildren();
      if (t.state === "active" || t.held_since) box.append(holdView(t));
    },
  },
  {
    fields: ["state", "thumbnail"],
    make: () => el("div"),
    draw(c, box) {
      box.replaceChildren();
      if (c.data.state === "active") box.append(thumbnailOf(c.data));
    },
  },
  {
    fields: ["pending", "pending_hidden"],
    make() {
      const none = el("p", { class: "muted", text: "No dialog pending." });
      const list = el("div");
      const more = el("p", { class: "meta" });
      return Object.assign(el("div", {}, none, list, more), { none, list, more });
    },
    draw(c, box) {
      const t = c.data;
      box.none.hidden = t.pending.length > 0;
      sync(box.list, itemEls(c, "pending"));
      box.more.hidden = !t.pending_hidden;
      box.more.textContent = t.pending_hidden ? t.pending_hidden + " more pending" : "";
    },
  },
  listPart("pages", "Pages", null),
  {
    fields: ["frames", "frames_hidden"],
    make(c) {
      const summary = el("summary");
      const tree = el("div");
      return Object.assign(el("details", { "data-key": c.data.task_id + "\u0000frames" }, summary, tree), { summary, tree });
    },
    draw(c, box) {
      box.summary.textContent = "Frames (" + (c.data.frames.length + c.data.frames_hidden) + ")";
      box.tree.replaceChildren(frameTree(c.data.frames));
    },
  },
  listPart("recent", "Recent dialogs", null),
  listPart("console", "Console errors", "console_total"),
  listPart("downloads", "Downloads", "downloads_total"),
];

/** Takes in one task's fields as the server sent them (a list as new items and indexes). */
function takeIn(c, fields) {
  for (const [k, v] of Object.entries(fields)) {
    if (k in ITEMS && Array.isArray(v)) {
      const old = c.lists[k] || [];
      const make = ITEMS[k];
      const items = v.map((x) => typeof x === "number" ? old[x] : { d: x, el: make ? make(c.data, x) : null })
        .filter((i) => i);
      c.lists[k] = items;
      c.data[k] = items.map((i) => i.d);
    } else {
      c.data[k] = v;
    }
  }
}

/** Draws again the parts of `c` that show one of `fields`, keeping the focus and caret. */
function draw(c, fields) {
  const focused = document.activeElement;
  const focusKey = focused && c.el.contains(focused) && focused.dataset ? focused.dataset.key : null;
  const caret = focusKey && focused.tagName === "INPUT" ? [focused.selectionStart, focused.selectionEnd] : null;
  const came = new Set(fields);
  PARTS.forEach((part, i) => {
    if (part.fields.some((f) => came.has(f))) part.draw(c, c.parts[i]);
  });
  if (focusKey && !c.el.contains(document.activeElement)) {
    const again = [...c.el.querySelectorAll("[data-key]")].find((e) => e.dataset.key === focusKey);
    if (again) {
      again.focus();
      if (caret && again.setSelectionRange) again.setSelectionRange(caret[0], caret[1]);
    }
  }
}

/** A task's fields came: its card is made (in order) or the parts they show drawn again. */
function update(fields) {
  let c = cards.get(fields.task_id);
  if (!c) {
    c = { el: el("section", { class: "task", "data-task": fields.task_id }), data: { task_id: fields.task_id }, parts: [], lists: {} };
    takeIn(c, fields);
    c.parts = PARTS.map((part) => part.make(c));
    c.el.append(...c.parts);
    draw(c, PARTS.flatMap((p) => p.fields));
    let before = null;
    for (const [id, o] of cards) if (id > c.data.task_id && (!before || id < before.id)) before = { id, el: o.el };
    tasksEl.insertBefore(c.el, before ? before.el : null);
    cards.set(c.data.task_id, c);
    emptyEl.hidden = true;
    return;
  }
  takeIn(c, fields);
  draw(c, Object.keys(fields));
}

function remove(id) {
  const c = cards.get(id);
  if (c) c.el.remove();
  cards.delete(id);
  const prefix = id + "\u0000";
  for (const k of [...drafts.keys()]) if (k.startsWith(prefix)) drafts.delete(k);
  thumbs.delete(id);
  emptyEl.hidden = cards.size > 0;
}

function onTasks(ev) {
  const m = JSON.parse(ev.data);
  skew = m.now - Date.now() / 1000;
  if (m.reset) {
    // A fresh full state (a new stream): every list item is new.
    const keep = new Set(m.tasks.map((t) => t.task_id));
    for (const id of [...cards.keys()]) if (!keep.has(id)) remove(id);
    for (const c of cards.values()) c.lists = {};
  }
  for (const t of m.tasks) update(t);
  for (const id of m.gone || []) remove(id);
  if (m.reset) refreshThumbs();
  statusEl.textContent = "Live: " + cards.size + (cards.size === 1 ? " task" : " tasks");
  document.body.dataset.version = String((Number(document.body.dataset.version) || 0) + 1);
}

function connect() {
  const es = new EventSource("/events");
  es.addEventListener("tasks", onTasks);
  es.addEventListener("open", () => { statusEl.textContent = "Live: " + cards.size + (cards.size === 1 ? " task" : " tasks"); });
  es.addEventListener("error", () => {
    statusEl.textContent = es.readyState === EventSource.CLOSED
      ? "Disconnected from the supervisor (reload the page to retry)."
      : "Connection to the supervisor lost; reconnecting…";
  });
}

emptyEl.hidden = false;
connect();
setInterval(tick, 1000);
setInterval(refreshThumbs, THUMB_EVERY_MS);
