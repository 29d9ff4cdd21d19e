"use strict";
// The note-history view: an MCP App (io.modelcontextprotocol/ui) speaking JSON-RPC with its host over
// postMessage. The host sends the note_history answer (ui/notifications/tool-result); everything else
// the view asks the server through the host (tools/call): the note as of a revision as safe HTML made by
// the server (the renderer of `vaultsync ui`), a word diff, and restore_note when the server offers it.
const PROTOCOL = "2026-01-26";
const $ = (id) => document.getElementById(id);
const state = { path: null, revisions: [], picked: -1, canRestore: false, seq: 0 };
let nextId = 1;
const pending = new Map();

function send(message) { window.parent.postMessage(message, "*"); }

function request(method, params) {
  const id = nextId++;
  send({ jsonrpc: "2.0", id, method, params });
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
}

async function callTool(name, args) {
  const result = await request("tools/call", { name, arguments: args });
  if (result.isError) {
    const text = (result.content || []).map((c) => c.text || "").join(" ");
    throw new Error(text || `${name} failed`);
  }
  return result.structuredContent || JSON.parse(((result.content || [])[0] || {}).text || "{}");
}

window.addEventListener("message", (event) => {
  if (event.source !== window.parent) return;
  const m = event.data;
  if (!m || m.jsonrpc !== "2.0") return;
  if (m.method === undefined && pending.has(m.id)) {
    const { resolve, reject } = pending.get(m.id);
    pending.delete(m.id);
    if (m.error) reject(new Error(m.error.message || "error")); else resolve(m.result);
  } else if (m.method === "ui/notifications/tool-result") {
    onToolResult(m.params || {});
  } else if (m.method === "ui/notifications/tool-input") {
    const path = ((m.params || {}).arguments || {}).path;
    if (path && !state.path) $("path").textContent = path;
  } else if (m.id !== undefined && m.method) {  // ui/resource-teardown, ping: nothing to keep
    send({ jsonrpc: "2.0", id: m.id, result: {} });
  }
});

function status(text, error) {
  $("status").textContent = text || "";
  $("status").className = error ? "error" : "";
}

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (key === "class") node.className = value; else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);  // text stays text
  return node;
}

function label(r) { return `${r.id} · ${r.kind} · ${r.iso.replace("T", " ").slice(0, 19)}`; }

async function onToolResult(result) {
  if (result.isError) { status(((result.content || [])[0] || {}).text || "note_history failed", true); return; }
  const answer = result.structuredContent || {};
  if (!answer.path) { status("no note in this answer", true); return; }
  await load(answer.path, null);
}

async function load(path, pickRevision) {
  try {
    const now = await callTool("history_view_note", { path });
    state.path = now.path;
    state.revisions = now.revisions;
    state.canRestore = !!now.can_restore;
    $("path").textContent = now.path;
    drawTimeline();
    drawPickers();
    const last = state.revisions.length - 1;
    let index = last;
    if (pickRevision) index = state.revisions.findIndex((r) => r.revision === pickRevision);
    await pick(index < 0 ? last : index);
  } catch (error) { status(error.message, true); }
}

function drawTimeline() {
  const items = state.revisions.map((r, i) => {
    const button = el("button", { type: "button", "data-index": String(i) },
      el("span", { class: "kind" }, r.kind), el("span", { class: "when" }, r.iso),
      el("span", { class: "rev", title: r.revision ? `content ${r.revision}` : "deleted" },
         r.id + (r.path !== state.path ? ` · ${r.path}` : "")));
    button.addEventListener("click", () => pick(i));
    return el("li", { "data-revision": r.revision || "" }, button);
  });
  $("timeline").replaceChildren(...items);
}

function drawPickers() {
  for (const id of ["diff-a", "diff-b"]) {
    const select = $(id);
    select.replaceChildren(...state.revisions.map((r, i) => el("option", { value: String(i) }, label(r))));
    select.onchange = () => diff(Number($("diff-a").value), Number($("diff-b").value));
  }
}

async function pick(index) {
  state.picked = index;
  const r = state.revisions[index];
  document.querySelectorAll("#timeline li").forEach((li, i) => li.classList.toggle("picked", i === index));
  $("shown-label").textContent = `as of ${label(r)}`;
  const latest = index === state.revisions.length - 1;
  $("restore").hidden = !(state.canRestore && !latest && r.kind !== "deleted");
  const mine = ++state.seq;
  if (r.kind === "deleted") {
    $("note").replaceChildren(el("p", { class: "dim" }, "The note was deleted at this revision."));
  } else {
    try {
      const shown = await callTool("history_view_note", { path: r.path, at: r.known_at });
      if (mine !== state.seq) return;
      $("note").innerHTML = shown.html;  // the server's safe HTML (raw HTML off, unsafe links dropped)
    } catch (error) { status(error.message, true); }
  }
  const before = Math.max(0, index - 1);
  $("diff-a").value = String(before);
  $("diff-b").value = String(index);
  await diff(before, index);
}

async function diff(a, b) {
  const ra = state.revisions[a], rb = state.revisions[b];
  try {
    const data = await callTool("history_view_diff", { path_a: ra.path, at_a: ra.known_at, path_b: rb.path, at_b: rb.known_at });
    $("diff-counts").textContent = `${data.removed_words} words removed, ${data.added_words} added`;
    $("diff").replaceChildren(...data.runs.map(([op, text]) =>
      op === "=" ? document.createTextNode(text) : el(op === "-" ? "del" : "ins", {}, text)));
  } catch (error) { status(error.message, true); }
}

$("restore").addEventListener("click", async () => {
  const r = state.revisions[state.picked], latest = state.revisions[state.revisions.length - 1];
  $("restore").disabled = true;
  status("restoring…");
  try {
    const args = { path: latest.kind === "deleted" ? r.path : latest.path, revision: r.id };
    if (latest.kind !== "deleted" && latest.revision) args.expected_revision = latest.revision;
    const done = await callTool("restore_note", args);
    status(`restored as a new revision ${(done.content_hash || "").slice(0, 12)}`.trim());
    await load(args.path, null);
  } catch (error) { status(error.message, true); }
  $("restore").disabled = false;
});

document.addEventListener("click", (event) => {
  const link = event.target.closest && event.target.closest("#note a");
  if (!link) return;
  event.preventDefault();
  if (link.classList.contains("external")) request("ui/open-link", { url: link.getAttribute("href") }).catch(() => {});
});

request("ui/initialize", { protocolVersion: PROTOCOL, appInfo: { name: "vaultsync-note-history", version: "1" },
                           appCapabilities: {} })
  .then(() => send({ jsonrpc: "2.0", method: "ui/notifications/initialized", params: {} }))
  .catch((error) => status(error.message, true));
