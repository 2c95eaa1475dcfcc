// actiongw console: plain JS, no framework. Everything the agent or a
// remote host controls is set with textContent after visible() has made
// its controls and invisible characters show; nothing is ever parsed as
// markup.
"use strict";

// Characters that draw nothing or reorder what follows: shown as \uXXXX.
const HIDDEN = new Set([0x00ad, 0x034f, 0x061c, 0x115f, 0x1160, 0x17b4, 0x17b5, 0x180e,
  0x200b, 0x200c, 0x200d, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e,
  0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0x2066, 0x2067, 0x2068, 0x2069,
  0x3164, 0xfeff, 0xffa0]);
const PLAIN = /^[\x20-\x7e\n\t]*$/;

// visible returns s with terminal controls as their pictures (ESC as ␛)
// and bidi overrides and invisible characters as \uXXXX. With oneLine,
// line breaks and tabs too.
function visible(s, oneLine) {
  if (s === undefined || s === null) return "";
  s = String(s);
  if (!oneLine && PLAIN.test(s)) return s;
  let out = "";
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (!oneLine && (c === 0x0a || c === 0x09)) out += ch;
    else if (c === 0x1b) out += "\u241b";
    else if (c < 0x20) out += String.fromCodePoint(0x2400 + c);
    else if (c === 0x7f) out += "\u2421";
    else if ((c >= 0x80 && c <= 0x9f) || HIDDEN.has(c) || (c >= 0xe0000 && c <= 0xe007f)) {
      out += "\\u" + c.toString(16).toUpperCase().padStart(4, "0");
    } else out += ch;
  }
  return out;
}

// el makes an element with a class and text (made visible).
function el(tag, cls, text, oneLine) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = visible(text, oneLine);
  return e;
}

const SVG = "http://www.w3.org/2000/svg";
function svgEl(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = visible(text, true);
  return e;
}

// statusClass is the colour class of a status: a fixed name, never the
// status itself.
function statusClass(status) {
  switch (status) {
    case "running": return "st-running";
    case "exited": case "ok": return "st-ok";
    case "failed": case "http_error": case "signaled": return "st-failed";
    case "cancelled": case "timeout": case "timed_out": case "output_limit": case "body_limit": case "size_limit": case "interrupted": return "st-stopped";
    case "denied": case "busy": return "st-denied";
  }
  return "st-other";
}

function duration(ms) {
  if (!(ms >= 0)) return "";
  if (ms < 1000) return ms + " ms";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(1) + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + Math.floor(s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
}

function clock(t) {
  const d = new Date(t);
  return isNaN(d) ? "" : d.toLocaleTimeString();
}

const zero = "0001-01-01T00:00:00Z";
function ended(a) { return a.ended && a.ended !== zero; }

// ---- session and requests ----

let csrf = "";

async function post(path, body) {
  const r = await fetch(path, {
    method: "POST", credentials: "same-origin",
    headers: {"Content-Type": "application/json", "X-Actiongw-Csrf": csrf},
    body: JSON.stringify(body),
  });
  let data = {};
  try { data = await r.json(); } catch (e) { /* not JSON: the status says it */ }
  if (!r.ok) throw new Error(data.error || ("HTTP " + r.status));
  return data;
}

async function getJSON(path) {
  const r = await fetch(path, {credentials: "same-origin"});
  const data = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(data.error || ("HTTP " + r.status));
  return data;
}

function notice(text) {
  const n = document.getElementById("notice");
  n.textContent = visible(text);
  n.hidden = !text;
}

// ---- live view ----

const MAX_STREAM = 256 * 1024; // what the page keeps of one stream

// SHOWN is how many finished actions the live view draws at first, and
// adds for each "show older": a table of a thousand rows takes longer to
// lay out than the person waits for the page (running actions and the
// selected one are always drawn).
const SHOWN = 100;

const state = {
  serves: new Map(),    // id -> serve
  actions: new Map(),   // serve + "\0" + handle -> action
  rows: new Map(),      // key -> tr
  outputs: new Map(),   // key -> {stream -> {text, end, dropped}}
  questions: new Map(), // serve + "\0" + id -> question
  selected: "",
  shown: SHOWN,         // finished actions the table draws
  snapshotSeen: false,  // the first snapshot arrived
};

function keyOf(serve, id) { return serve + "\0" + id; }

function applySnapshot(snap) {
  state.serves = new Map((snap.serves || []).map(s => [s.id, s]));
  state.actions = new Map();
  for (const a of snap.actions || []) state.actions.set(keyOf(a.serve, a.handle), a);
  state.questions = new Map((snap.questions || []).map(q => [keyOf(q.serve, q.id), q]));
  renderServes();
  renderActions();
  renderQuestions();
  if (!state.snapshotSeen) {
    state.snapshotSeen = true;
    goToPointed();
  }
}

function applyEvent(e) {
  if (e.serve) { state.serves.set(e.serve.id, e.serve); renderServes(); }
  if (e.serve_gone) {
    state.serves.delete(e.serve_gone);
    for (const [k, q] of state.questions) if (q.serve === e.serve_gone) state.questions.delete(k);
    renderServes(); renderQuestions();
  }
  if (e.action) upsertAction(e.action);
  if (e.output) addOutput(e.output);
  if (e.question) { state.questions.set(keyOf(e.question.serve, e.question.id), e.question); renderQuestions(); }
  if (e.question_gone) {
    for (const [k, q] of state.questions) if (q.id === e.question_gone) state.questions.delete(k);
    renderQuestions();
  }
}

function renderServes() {
  const ul = document.getElementById("serves");
  ul.replaceChildren();
  if (state.serves.size === 0) ul.append(el("li", "quiet", "no serve is running on this state directory"));
  for (const s of state.serves.values()) {
    ul.append(el("li", "", "pid " + s.pid + " · client " + (s.client || "(not yet known)") + " · since " + clock(s.started), true));
  }
}

function sortedActions() {
  return [...state.actions.entries()].sort((a, b) => (a[1].started < b[1].started ? 1 : a[1].started > b[1].started ? -1 : 0));
}

function renderActions() {
  const tbody = document.querySelector("#actions tbody");
  state.rows = new Map();
  const sorted = sortedActions();
  const frag = document.createDocumentFragment();
  let finished = 0;
  for (const [k, a] of sorted) {
    if (a.status !== "running" && k !== state.selected && finished++ >= state.shown) continue;
    const tr = document.createElement("tr");
    fillRow(tr, k, a);
    state.rows.set(k, tr);
    frag.append(tr);
  }
  tbody.replaceChildren(frag);
  renderOlder();
  if (!state.selected || !state.actions.has(state.selected)) {
    const running = sorted.find(([, a]) => a.status === "running");
    if (running) select(running[0]); else renderOutput();
  } else renderOutput();
}

// renderOlder says how many actions the table leaves out.
function renderOlder() {
  const n = state.actions.size - state.rows.size;
  document.getElementById("older").hidden = n <= 0;
  document.getElementById("older-count").textContent = n + " older finished " + (n === 1 ? "action" : "actions") + " not shown";
}

function statusText(a) {
  let t = a.status;
  if (a.remote_stopped !== undefined) t += " · remote_stopped: " + a.remote_stopped;
  if (a.stop_reason) t += " · " + a.stop_reason;
  return t;
}

function fillRow(tr, k, a) {
  tr.replaceChildren();
  tr.dataset.key = k;
  tr.dataset.handle = a.handle;
  tr.classList.toggle("selected", k === state.selected);
  tr.append(el("td", "", clock(a.started)), el("td", "", a.tool, true), el("td", "", a.target, true),
    el("td", "what", a.what), el("td", "", a.client, true));
  const st = el("td", "status " + statusClass(a.status), statusText(a), true);
  st.dataset.status = a.status;
  tr.append(st);
  const dur = el("td", "duration", durationOf(a));
  tr.append(dur);
  const td = el("td");
  if (a.status === "running") {
    const b = el("button", "danger stop", "Stop");
    b.type = "button";
    b.addEventListener("click", ev => { ev.stopPropagation(); stopAction(a, b); });
    td.append(b);
  }
  tr.append(td);
  tr.onclick = () => select(k);
}

function durationOf(a) {
  const start = Date.parse(a.started);
  const end = ended(a) ? Date.parse(a.ended) : Date.now();
  return duration(end - start);
}

function upsertAction(a) {
  const k = keyOf(a.serve, a.handle);
  const isNew = !state.actions.has(k);
  state.actions.set(k, a);
  let tr = state.rows.get(k);
  if (!tr && !isNew) {
    // An older action the table leaves out.
    renderOlder();
    if (k === state.selected) renderOutputTitle();
    return;
  }
  if (!tr) {
    tr = document.createElement("tr");
    state.rows.set(k, tr);
    document.querySelector("#actions tbody").prepend(tr);
  }
  fillRow(tr, k, a);
  if (isNew && a.status === "running" && !runningSelected()) select(k);
  else if (k === state.selected) renderOutputTitle();
}

function runningSelected() {
  const a = state.actions.get(state.selected);
  return a && a.status === "running";
}

async function stopAction(a, button) {
  button.disabled = true;
  button.textContent = "stopping…";
  try {
    const r = await post("/api/stop", {serve: a.serve, handle: a.handle});
    notice("stopped " + a.handle + ": " + r.status + ", remote_stopped: " + r.remote_stopped + (r.reason ? " (" + r.reason + ")" : ""));
    const cur = state.actions.get(keyOf(a.serve, a.handle));
    if (cur && cur.status === "running") {
      upsertAction(Object.assign({}, cur, {status: r.status, remote_stopped: r.remote_stopped, stop_reason: r.reason, ended: new Date().toISOString()}));
    }
  } catch (err) {
    button.disabled = false;
    button.textContent = "Stop";
    notice("could not stop " + a.handle + ": " + err.message);
  }
}

function select(k) {
  const old = state.rows.get(state.selected);
  if (old) old.classList.remove("selected");
  state.selected = k;
  const tr = state.rows.get(k);
  if (tr) tr.classList.add("selected");
  renderOutput();
}

function renderOutputTitle() {
  const a = state.actions.get(state.selected);
  document.getElementById("output-title").textContent = a ? visible(a.handle + " · " + a.target + " · " + a.what + " · " + a.status, true) : "";
}

function renderOutput() {
  const panel = document.getElementById("output-panel");
  const box = document.getElementById("output-streams");
  const a = state.actions.get(state.selected);
  panel.hidden = !a;
  box.replaceChildren();
  if (!a) return;
  renderOutputTitle();
  const streams = state.outputs.get(state.selected);
  if (!streams || streams.size === 0) {
    box.append(el("p", "quiet", a.status === "running" ? "no output yet" : "no output seen by this page (read_output has it all)"));
    return;
  }
  for (const [name, s] of streams) {
    box.append(el("h3", "", name, true));
    const pre = el("pre", "stream", streamText(s));
    pre.dataset.stream = name;
    box.append(pre);
  }
}

function streamText(s) {
  return (s.dropped ? "… " + s.dropped + " earlier bytes not shown here (read_output has them)\n" : "") + s.text;
}

const utf8 = new TextEncoder(), fromUTF8 = new TextDecoder();

// addOutput appends a piece of output at its offset (in bytes of the
// redacted stream): what this page has seen already is left out, a gap
// is said.
function addOutput(o) {
  const k = keyOf(o.serve, o.handle);
  let streams = state.outputs.get(k);
  if (!streams) { streams = new Map(); state.outputs.set(k, streams); }
  let s = streams.get(o.stream);
  if (!s) { s = {text: "", end: o.offset, dropped: o.offset}; streams.set(o.stream, s); }
  const bytes = utf8.encode(o.data);
  const start = o.offset, stop = o.offset + bytes.length;
  if (stop <= s.end) return; // seen already (before a snapshot)
  let data = o.data;
  if (start < s.end) data = fromUTF8.decode(bytes.slice(s.end - start));
  else if (start > s.end) s.text += "\n… " + (start - s.end) + " bytes not shown\n";
  s.text += data;
  s.end = stop;
  if (s.text.length > MAX_STREAM) {
    const cut = s.text.length - MAX_STREAM;
    s.dropped += utf8.encode(s.text.slice(0, cut)).length;
    s.text = s.text.slice(cut);
  }
  if (k !== state.selected) return;
  const pre = [...document.querySelectorAll("#output-streams pre")].find(p => p.dataset.stream === o.stream);
  if (pre) pre.textContent = visible(streamText(s));
  else renderOutput();
}

// ---- approvals ----

function remembered(ns) {
  const s = Math.round(ns / 1e9);
  if (s % 3600 === 0) return s / 3600 + " h";
  if (s % 60 === 0) return s / 60 + " min";
  return s + " s";
}

function renderQuestions() {
  const box = document.getElementById("questions");
  box.replaceChildren();
  const n = state.questions.size;
  document.getElementById("question-count").textContent = n ? String(n) : "";
  document.getElementById("no-questions").hidden = n > 0;
  for (const [k, q] of state.questions) {
    const card = el("div", "question");
    card.dataset.key = k;
    card.dataset.id = q.id;
    card.append(el("div", "", q.tool + " on " + q.target + " asks about the " + q.asked, true));
    card.append(el("pre", "qtext", q.text));
    const exp = el("div", "quiet expires", "");
    exp.dataset.expires = q.expires;
    card.append(exp);
    const buttons = el("div", "buttons");
    const answer = (a, label, cls) => {
      const b = el("button", cls, label);
      b.type = "button";
      b.dataset.answer = a;
      b.addEventListener("click", () => answerQuestion(q, a, card));
      buttons.append(b);
    };
    answer("approve", "Approve once", "approve");
    if (q.remember > 0) answer("approve_for", "Approve for " + remembered(q.remember), "approve");
    answer("decline", "Deny", "danger");
    card.append(buttons);
    card.classList.toggle("pointed", q.id === pointedQuestion());
    box.append(card);
  }
  tickQuestions();
}

// pointedQuestion is the question the page's address names
// (#question=ID): a serve hands that address to a client that can open
// addresses (MCP URL-mode elicitation), for a question only this page
// answers. Only an ID is read from it, and only compared.
function pointedQuestion() {
  const m = /^#question=([A-Za-z0-9]{1,64})$/.exec(location.hash);
  return m ? m[1] : "";
}

// goToPointed shows the question the address names, or says it is gone.
function goToPointed() {
  const id = pointedQuestion();
  if (!id) return;
  show("approvals");
  renderQuestions();
  const card = [...document.querySelectorAll("#questions .question")].find(c => c.dataset.id === id);
  if (card) card.scrollIntoView({block: "center"});
  else notice("the question this address names is no longer waiting: it was answered, withdrawn or expired");
}

async function answerQuestion(q, a, card) {
  for (const b of card.querySelectorAll("button")) b.disabled = true;
  try {
    await post("/api/answer", {serve: q.serve, question: q.id, answer: a});
    state.questions.delete(keyOf(q.serve, q.id));
    renderQuestions();
    notice((a === "decline" ? "denied: " : "approved: ") + q.tool + " on " + q.target);
  } catch (err) {
    for (const b of card.querySelectorAll("button")) b.disabled = false;
    card.append(el("div", "error", "not answered: " + err.message));
  }
}

function tickQuestions() {
  for (const e of document.querySelectorAll("#questions .expires")) {
    const left = Date.parse(e.dataset.expires) - Date.now();
    e.textContent = left > 0 ? "expires in " + duration(Math.floor(left / 1000) * 1000) : "expired";
  }
}

// ---- audit view ----

const auditFilters = ["target", "tool", "status"];

function auditQuery() {
  const q = new URLSearchParams();
  for (const f of auditFilters) {
    const v = document.getElementById("f-" + f).value;
    if (v) q.set(f, v);
  }
  const secs = document.getElementById("f-time").value;
  if (secs) q.set("since", new Date(Date.now() - secs * 1000).toISOString().replace(/\.\d+Z$/, "Z"));
  return q;
}

function fillSelect(id, values) {
  const sel = document.getElementById(id);
  const cur = sel.value;
  sel.replaceChildren(el("option", "", "any"));
  sel.firstChild.value = "";
  for (const v of values || []) {
    const o = el("option", "", v, true);
    o.value = v;
    sel.append(o);
  }
  sel.value = (values || []).includes(cur) ? cur : "";
}

function whatOf(e) {
  const r = e.intent || e.outcome || e.other || {};
  if (e.other) return e.kind + (r.sealed ? " of " + r.sealed.dir : "") + (r.key_id ? " " + r.key_id : "");
  if (r.command) return r.command;
  if (r.method || r.path) return (r.method || "") + " " + (r.path || "");
  return "";
}

async function loadAudit() {
  const q = auditQuery();
  document.getElementById("f-download").href = "/api/audit.jsonl?" + q.toString();
  const [log, chain] = await Promise.all([getJSON("/api/audit?" + q.toString()), getJSON("/api/verify")]);
  renderChain(chain);
  fillSelect("f-target", log.targets);
  fillSelect("f-tool", log.tools);
  fillSelect("f-status", log.statuses);
  document.getElementById("audit-count").textContent = visible(log.total + " matching" +
    (log.total > log.entries.length ? ", newest " + log.entries.length + " shown" : "") +
    (log.limited ? " (of the last 20000 records)" : "") +
    (log.unreadable.length ? "; " + log.unreadable.length + " unreadable lines" : ""), true);
  const tbody = document.querySelector("#audit-table tbody");
  const frag = document.createDocumentFragment();
  for (const e of log.entries) {
    const tr = document.createElement("tr");
    const i = e.intent || {}, o = e.outcome || {};
    const exit = o.exit_code !== undefined ? "exit " + o.exit_code : o.http_status ? "http " + o.http_status : "";
    tr.append(el("td", "", clock(e.time)), el("td", "", e.tool, true), el("td", "", e.target, true),
      el("td", "what", whatOf(e)), el("td", "", i.decision || "", true),
      el("td", "status " + statusClass(e.status), e.status + (o.remote_stopped !== undefined ? " · remote_stopped: " + o.remote_stopped : ""), true),
      el("td", "", exit), el("td", "", e.outcome ? duration(o.duration_ms || 0) : ""), el("td", "mono", e.handle, true));
    tr.addEventListener("click", () => toggleDetails(tr, e));
    frag.append(tr);
  }
  tbody.replaceChildren(frag);
}

function toggleDetails(tr, e) {
  const next = tr.nextSibling;
  if (next && next.classList && next.classList.contains("details")) { next.remove(); return; }
  const d = el("tr", "details");
  const td = el("td");
  td.colSpan = 9;
  for (const [name, rec] of [["intent", e.intent], ["outcome", e.outcome], [e.kind, e.other]]) {
    if (!rec) continue;
    td.append(el("h3", "", name), el("pre", "", JSON.stringify(rec, null, 2)));
  }
  d.append(td);
  tr.after(d);
}

function renderChain(c) {
  const box = document.getElementById("chain");
  box.className = "chain " + (c.verified ? "verified" : "damaged");
  box.replaceChildren(el("span", "state", c.verified ? "verified" : (c.damage ? "damaged at " + c.damage.File + (c.damage.Line ? " line " + c.damage.Line : "") : "not verified")),
    el("span", "", c.text));
  if (c.note) box.append(el("div", "quiet", "keyring: " + c.note));
}

// ---- timeline ----

async function loadTimeline() {
  const now = Date.now(), from = now - 3600 * 1000;
  const q = new URLSearchParams({since: new Date(from).toISOString().replace(/\.\d+Z$/, "Z"), limit: "10000"});
  const log = await getJSON("/api/audit?" + q.toString());
  const bars = new Map(); // handle -> {target, start, end, status, what}
  for (const e of log.entries) {
    if (!e.handle) continue;
    const start = Date.parse(e.time);
    const end = e.outcome ? start + (e.outcome.duration_ms || 0) : now;
    bars.set(e.handle, {target: e.target, start, end, status: e.status, what: whatOf(e), tool: e.tool});
  }
  for (const a of state.actions.values()) {
    const start = Date.parse(a.started);
    if (start < from && a.status !== "running") continue;
    bars.set(a.handle, {target: a.target, start, end: ended(a) ? Date.parse(a.ended) : now, status: a.status, what: a.what, tool: a.tool});
  }
  drawTimeline([...bars.values()], from, now);
}

function drawTimeline(bars, from, now) {
  const targets = [...new Set(bars.map(b => b.target))].sort();
  const labelW = 180, W = 1100, rowH = 26, top = 24;
  const H = top + Math.max(1, targets.length) * rowH + 8;
  const svg = svgEl("svg", {viewBox: "0 0 " + W + " " + H, class: "timeline", role: "img"});
  svg.append(svgEl("title", {}, "actions of the last hour per target"));
  const x = t => labelW + (Math.max(t, from) - from) / (now - from) * (W - labelW - 10);
  for (let m = 0; m <= 60; m += 10) {
    const t = from + m * 60000;
    svg.append(svgEl("line", {x1: x(t), x2: x(t), y1: top - 6, y2: H}));
    svg.append(svgEl("text", {x: x(t) - 14, y: 12}, m === 60 ? "now" : "-" + (60 - m) + " min"));
  }
  if (targets.length === 0) svg.append(svgEl("text", {x: labelW, y: top + 16}, "no action in the last hour"));
  targets.forEach((target, i) => {
    const y = top + i * rowH;
    svg.append(svgEl("text", {x: 4, y: y + 17}, target.length > 24 ? target.slice(0, 23) + "…" : target));
    for (const b of bars.filter(b => b.target === target)) {
      const x0 = x(b.start), x1 = x(Math.min(b.end, now));
      const r = svgEl("rect", {x: x0, y: y + 4, width: Math.max(2, x1 - x0), height: rowH - 8, class: statusClass(b.status)});
      r.append(svgEl("title", {}, b.tool + " · " + b.status + " · " + duration(b.end - b.start) + " · " + b.what));
      svg.append(r);
    }
  });
  document.getElementById("timeline-box").replaceChildren(svg);
}

// ---- views and the event stream ----

let view = "live";

function show(name) {
  view = name;
  for (const s of document.querySelectorAll(".view")) s.hidden = s.id !== "view-" + name;
  for (const b of document.querySelectorAll(".tab")) b.classList.toggle("active", b.dataset.view === name);
  const load = name === "audit" ? loadAudit : name === "timeline" ? loadTimeline : null;
  if (load) load().catch(err => notice("could not load the " + name + ": " + err.message));
}

// connect follows the event stream, and returns it.
function connect() {
  const conn = document.getElementById("conn");
  const es = new EventSource("/api/events");
  es.addEventListener("open", () => { conn.textContent = "live"; conn.className = "conn live"; });
  es.addEventListener("snapshot", m => applySnapshot(JSON.parse(m.data)));
  es.addEventListener("feed", m => applyEvent(JSON.parse(m.data)));
  es.addEventListener("missed", m => notice("this page missed " + JSON.parse(m.data).missed + " events while it did not keep up; the view was refreshed"));
  es.addEventListener("error", () => {
    conn.className = "conn down";
    conn.textContent = es.readyState === EventSource.CLOSED ? "disconnected (reload the page)" : "reconnecting…";
  });
  return es;
}

async function main() {
  for (const b of document.querySelectorAll(".tab")) b.addEventListener("click", () => show(b.dataset.view));
  window.addEventListener("hashchange", () => { if (state.snapshotSeen) goToPointed(); });
  document.getElementById("show-older").addEventListener("click", () => { state.shown += 5 * SHOWN; renderActions(); });
  document.getElementById("f-apply").addEventListener("click", () => loadAudit().catch(err => notice("could not load the audit log: " + err.message)));
  // The session and the event stream at once: the first paint waits
  // for the stream's snapshot, not for a round trip more.
  const session = getJSON("/api/session");
  show("live");
  const es = connect();
  try {
    csrf = (await session).csrf;
  } catch (err) {
    es.close();
    notice("not logged in: open the login URL the console printed on its terminal");
    return;
  }
  setInterval(() => {
    for (const [k, tr] of state.rows) {
      const a = state.actions.get(k);
      if (a && a.status === "running") tr.querySelector(".duration").textContent = durationOf(a);
    }
    tickQuestions();
  }, 1000);
  setInterval(() => { if (view === "timeline") loadTimeline().catch(() => {}); }, 10000);
}

main();
