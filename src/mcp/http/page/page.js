// The supervisor page: every task, live, from the server's event stream (/events).
// Nothing from the server is ever inserted as HTML: every text goes through textContent.
"use strict";

const tasksEl = document.getElementById("tasks");
const statusEl = document.getElementById("status");
const emptyEl = document.getElementById("empty");
/** task_id -> {el, data} */
const cards = new Map();
/** What a person typed into prompt fields, by dialog key, kept across re-renders. */
const drafts = new Map();
/** Which <details> are open, by key. */
const opened = new Set();
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

function details(key, title, count, body) {
  const d = el("details", { "data-key": key, open: opened.has(key) },
    el("summary", { text: title + " (" + count + ")" }), body);
  d.addEventListener("toggle", () => { if (d.open) opened.add(key); else opened.delete(key); });
  return d;
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
  if (c) render(c.data);
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

function render(t) {
  const headingId = "task-" + btoa(unescape(encodeURIComponent(t.task_id))).replace(/[^A-Za-z0-9]/g, "");
  const card = el("section", { class: "task", "aria-labelledby": headingId, "data-task": t.task_id });
  const state = el("span", { class: "badge state-" + t.state, text: t.state });
  if (t.state === "reconnecting") state.textContent = "reconnecting " + t.attempt + " of " + t.of;
  const h = el("h2", { id: headingId }, t.task_id, state);
  if (t.crashed) h.append(el("span", { class: "badge crashed", text: "crashed" }));
  card.append(h, el("p", { class: "meta url", text: t.cdp_url + " · dialogs: " + t.policy }));
  if (t.reason) card.append(el("p", { class: "error", text: (t.state === "dead" ? "Dead: " : "Reason: ") + t.reason }));
  if (t.blocked) card.append(el("p", { class: "error", text: "Blocked (" + t.blocked.reason + "): " + t.blocked.hint }));
  if (t.state === "active" || t.held_since) card.append(holdView(t));
  if (t.state === "active") card.append(thumbnailOf(t));
  if (t.pending.length === 0) card.append(el("p", { class: "muted", text: "No dialog pending." }));
  for (const d of t.pending) card.append(dialogView(t, d));
  if (t.pending_hidden) card.append(el("p", { class: "meta", text: t.pending_hidden + " more pending" }));
  const pages = el("ul");
  for (const p of t.pages) {
    const li = el("li", {}, el("strong", { text: p.title || "(untitled)" }), " ", el("span", { class: "url", text: p.url }));
    if (p.opener) li.append(el("span", { class: "meta", text: " popup" }));
    pages.append(li);
  }
  card.append(details(t.task_id + "\u0000pages", "Pages", t.pages.length, pages));
  card.append(details(t.task_id + "\u0000frames", "Frames", t.frames.length + t.frames_hidden, frameTree(t.frames)));
  const recent = el("ul");
  for (const c of t.recent) {
    const li = el("li", {}, c.kind + " " + c.id + " closed by ", el("strong", { text: c.closed_by }), " ", when(c.closed_at, "ago"));
    if (c.accepted !== null) li.append(c.accepted ? " (accepted)" : " (dismissed)");
    if (c.user_input !== null) li.append(" answer " + JSON.stringify(c.user_input));
    li.append(el("div", { class: "meta", text: c.message }));
    recent.append(li);
  }
  card.append(details(t.task_id + "\u0000recent", "Recent dialogs", t.recent.length, recent));
  const consoleList = el("ul");
  for (const c of t.console) consoleList.append(el("li", {}, el("span", { class: "badge", text: c.level }), " ", c.text, " ", el("span", { class: "meta" }, when(c.ts, "ago"))));
  card.append(details(t.task_id + "\u0000console", "Console errors", t.console_total, consoleList));
  const dl = el("ul");
  for (const d of t.downloads) {
    const size = d.total ? d.received + " of " + d.total + " bytes" : d.received + " bytes";
    dl.append(el("li", {}, el("strong", { text: d.file || "(no name)" }), " " + d.state + ", " + size + ", started ", when(d.started_at, "ago")));
  }
  card.append(details(t.task_id + "\u0000downloads", "Downloads", t.downloads_total, dl));
  place(t, card);
}

/** Puts a task's new card where its old one was (or in order), keeping focus and drafts. */
function place(t, card) {
  const old = cards.get(t.task_id);
  const focused = document.activeElement;
  const focusKey = old && old.el.contains(focused) && focused.dataset ? focused.dataset.key : null;
  let caret = null;
  if (focusKey && focused.tagName === "INPUT") caret = [focused.selectionStart, focused.selectionEnd];
  if (old) old.el.replaceWith(card);
  else {
    let before = null;
    for (const [id, c] of cards) if (id > t.task_id && (!before || id < before.id)) before = { id, el: c.el };
    tasksEl.insertBefore(card, before ? before.el : null);
  }
  cards.set(t.task_id, { el: card, data: t });
  if (focusKey) {
    const again = [...card.querySelectorAll("[data-key]")].find((e) => e.dataset.key === focusKey);
    if (again) {
      again.focus();
      if (caret && again.setSelectionRange) again.setSelectionRange(caret[0], caret[1]);
    }
  }
  emptyEl.hidden = cards.size > 0;
}

function remove(id) {
  const c = cards.get(id);
  if (c) c.el.remove();
  cards.delete(id);
  const prefix = id + "\u0000";
  for (const k of [...drafts.keys()]) if (k.startsWith(prefix)) drafts.delete(k);
  thumbs.delete(id);
  for (const k of [...opened]) if (k.startsWith(prefix)) opened.delete(k);
  emptyEl.hidden = cards.size > 0;
}

function onTasks(ev) {
  const m = JSON.parse(ev.data);
  skew = m.now - Date.now() / 1000;
  if (m.reset) {
    const keep = new Set(m.tasks.map((t) => t.task_id));
    for (const id of [...cards.keys()]) if (!keep.has(id)) remove(id);
  }
  for (const t of m.tasks) render(t);
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
