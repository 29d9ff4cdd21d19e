// vaultsync ui: the vault through time. Plain JavaScript, no dependency, nothing loaded from elsewhere.
// Every note text reaches the page through textContent, except the note body, which the server renders
// from Markdown with raw HTML off (vaultsync/ui/render.py); the Content-Security-Policy forbids inline script.
"use strict";

const TOKEN = document.querySelector('meta[name="vaultsync-token"]').content;
const $ = (id) => document.getElementById(id);
const state = {
  batches: [],          // [[known_at µs, notes changed], ...] oldest first
  at: null,             // the moment (µs), null = now
  valid: null,          // validity time (µs) or null
  view: null,           // [start, end] µs shown by the strip
  note: null,           // open note path
  query: "",
  showLater: false,
  diffMode: "inline",
  source: false,
  openFolders: new Set(),
  tab: "search",
  diff: null,           // a change's diff asked for by the address: {since (µs), was (path before), kind}
};
let seq = 0;            // answers to older requests than the newest are dropped

// ---------------------------------------------------------------- helpers

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}

async function api(path, params) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== null && v !== undefined && v !== "") query.set(k, v);
  const response = await fetch(`/api/${path}?${query}`, {headers: {"X-Vaultsync-Token": TOKEN}, cache: "no-store"});
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

function nowUs() { return Date.now() * 1000; }

function iso(us) {
  if (us === null) return "now";
  us = Math.floor(us);  // the strip's ends fall between microseconds
  const ms = Math.floor(us / 1000);
  const micro = us - ms * 1000;
  let text = new Date(ms).toISOString();
  if (micro) text = text.replace("Z", String(micro).padStart(3, "0") + "Z");
  return text.replace(".000Z", "Z");
}

function short(us) {
  return us === null ? "now" : iso(us).replace("T", " ").replace(/(:\d\d)(\.\d+)?Z$/, "$1 UTC");
}

// A typed time: YYYY-MM-DD (midnight UTC) or ISO 8601 with an explicit offset; anything else is refused. A
// fraction of a second may have up to nine digits: those after the sixth are dropped (the store keeps
// microseconds; dropping them never moves a time past a batch it is before).
function parseTime(text) {
  text = text.trim();
  if (text === "" || text.toLowerCase() === "now") return null;
  let m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (m) {
    const ms = Date.UTC(+m[1], +m[2] - 1, +m[3]);
    if (new Date(ms).getUTCDate() !== +m[3]) throw new Error(`no such date ${text}`);
    return ms * 1000;
  }
  m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2})?)(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/.exec(text);
  if (!m) throw new Error(`invalid time ${JSON.stringify(text)}: use YYYY-MM-DD or ISO 8601 with an offset, e.g. 2024-03-01T12:00:00Z`);
  const ms = Date.parse(m[1] + m[3]);
  if (Number.isNaN(ms)) throw new Error(`invalid time ${JSON.stringify(text)}`);
  return ms * 1000 + Number((m[2] || "").slice(0, 6).padEnd(6, "0"));
}

// A typed moment: a time (parseTime), or a revision id as history and changes show it (r12: the moment of
// batch 12, asked of the server).
async function parseMoment(text) {
  if (/^\s*[rR]\d{1,18}\s*$/.test(text)) return (await api("moment", {at: text.trim()})).us;
  return parseTime(text);
}

function showError(message) { $("error").textContent = message || ""; }

// The page's own address for a note as of a moment (and, for a change, the diff since): a real link, so it
// opens in a new tab, can be bookmarked, and Back returns to it.
function noteHref(path, at, extra) {
  const params = new URLSearchParams();
  if (at !== null && at !== undefined) params.set("at", String(at));
  if (state.valid !== null) params.set("valid", String(state.valid));
  params.set("note", path);
  if (state.query) params.set("q", state.query);
  for (const [k, v] of Object.entries(extra || {})) if (v !== null && v !== undefined) params.set(k, String(v));
  return `#${params}`;
}

// ---------------------------------------------------------------- the timeline

function ends() {
  const first = state.batches.length ? state.batches[0][0] : nowUs() - 86400e6;
  return [first, Math.max(nowUs(), first + 1)];
}

function momentUs() { return state.at === null ? ends()[1] : state.at; }

// A moment before the vault's first batch: nothing was recorded yet, which every pane says in these words.
function beforeHistory(at) { return at !== null && state.batches.length > 0 && at < state.batches[0][0]; }
function beforeText() { return `before the first recorded moment (${short(state.batches[0][0])})`; }

function batchIndexAt(us) {  // the last batch at or before us (-1: before the first)
  let lo = 0, hi = state.batches.length;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (state.batches[mid][0] <= us) lo = mid + 1; else hi = mid; }
  return lo - 1;
}

function drawTimeline() {
  const canvas = $("density"), strip = $("timeline");
  const width = strip.clientWidth, height = strip.clientHeight, dpr = window.devicePixelRatio || 1;
  canvas.width = width * dpr; canvas.height = height * dpr;
  const g = canvas.getContext("2d");
  g.scale(dpr, dpr);
  g.clearRect(0, 0, width, height);
  const [start, end] = state.view, span = end - start;
  const bins = new Array(Math.max(1, Math.floor(width / 3))).fill(0);
  for (const [us, count] of state.batches) {
    if (us < start || us > end) continue;
    const i = Math.min(bins.length - 1, Math.floor((us - start) / span * bins.length));
    bins[i] += Math.max(count, 1);
  }
  const top = Math.max(1, ...bins);
  g.fillStyle = "#4a6fa5";
  bins.forEach((n, i) => {
    if (!n) return;
    const h = Math.max(3, (Math.log1p(n) / Math.log1p(top)) * (height - 6));
    g.fillRect(i * 3, height - h, 2, h);
  });
  // ticks: pick a step that gives a handful of labels
  const steps = [60e6, 3600e6, 86400e6, 7 * 86400e6, 30 * 86400e6, 365 * 86400e6];
  const step = steps.find((s) => span / s <= 12) || steps[steps.length - 1];
  g.fillStyle = "#8a94a6"; g.font = "10px system-ui, sans-serif";
  for (let t = Math.ceil(start / step) * step; t < end; t += step) {
    const x = (t - start) / span * width;
    g.fillRect(x, 0, 1, 5);
    const label = step >= 30 * 86400e6 ? iso(t).slice(0, 7) : step >= 86400e6 ? iso(t).slice(0, 10) : iso(t).slice(11, 16);
    g.fillText(label, x + 2, 12);
  }
  const at = state.at === null ? Math.min(momentUs(), end) : state.at;  // now: at the right edge
  const cursor = $("cursor");
  cursor.hidden = at < start || at > end;
  cursor.classList.toggle("now", state.at === null);
  cursor.style.left = `${Math.min(width - 1, ((at - start) / span) * width)}px`;
  $("axis-start").textContent = short(start);
  $("axis-end").textContent = short(end) + (end >= ends()[1] - Math.max(2e6, span / 100) ? " (now)" : "");  // (now moves on)
  strip.setAttribute("aria-valuemin", String(ends()[0]));
  strip.setAttribute("aria-valuemax", String(ends()[1]));
  strip.setAttribute("aria-valuenow", String(at));
  strip.setAttribute("aria-valuetext", state.at === null ? "now" : iso(state.at));
}

function zoom(factor, centre) {
  const [lo, hi] = ends();
  const [start, end] = state.view;
  const c = centre === undefined ? momentUs() : centre;
  let span = Math.max(60e6, Math.min((hi - lo) * 1.02, (end - start) * factor));
  let s = c - (c - start) / (end - start) * span;
  s = Math.max(lo - (hi - lo) * 0.01, Math.min(s, hi - span));
  state.view = [s, s + span];
  drawTimeline();
}

function zoomAll() {  // the whole history, first batch to now
  const [lo, hi] = ends();
  const pad = (hi - lo) * 0.01 + 1;
  state.view = [lo - pad, hi];
  drawTimeline();
}

function zoomBatches() {  // the first batch to the last one (now is drawn at the right edge when later)
  if (state.batches.length < 2) return zoomAll();
  const lo = state.batches[0][0], hi = state.batches[state.batches.length - 1][0];
  const pad = (hi - lo) * 0.04 + 60e6;
  state.view = [lo - pad, Math.min(hi + pad, ends()[1])];
  drawTimeline();
}

function usAtX(x) {
  const strip = $("timeline"), [start, end] = state.view;
  const us = start + (x / strip.clientWidth) * (end - start);
  // snap to a batch within 4 pixels, so a click on a bar lands on that batch
  const perPx = (end - start) / strip.clientWidth;
  const i = batchIndexAt(us + 4 * perPx);
  if (i >= 0 && Math.abs(state.batches[i][0] - us) <= 4 * perPx) return state.batches[i][0];
  return Math.round(us);
}

function setMoment(us, options) {
  if (!(options && options.keepDiff)) state.diff = null;
  const [lo, hi] = ends();
  const follow = (options && options.follow) || (us !== null && us >= hi);  // asked for now, or a later date
  if (us !== null && us >= hi) us = null;
  if (us !== null && us < lo - (hi - lo)) us = lo - 1;
  state.at = us;
  const at = momentUs();
  const span = state.view[1] - state.view[0];
  if (us === null && follow && state.view[1] < hi) {
    state.view = [hi - span, hi];  // the timeline follows to now
  } else if (us !== null && (at < state.view[0] || at > state.view[1])) {
    state.view = [at - span / 2, at + span / 2];
  }
  $("moment-input").value = state.at === null ? "" : iso(state.at);
  $("moment-label").textContent = state.at === null ? "as of now"
    : beforeHistory(state.at) ? `as of ${short(state.at)}: ${beforeText()}` : `as of ${short(state.at)}`;
  drawTimeline();
  saveHash();
  if (!(options && options.quiet)) refresh();
}

function stepBatch(direction) {
  const at = momentUs(), i = batchIndexAt(at);
  if (direction < 0) {
    const exact = i >= 0 && state.batches[i][0] === at;
    const j = exact ? i - 1 : i;  // from between two batches (or now): the batch before
    if (j >= 0) setMoment(state.batches[j][0]);
  } else {
    const j = i + 1;
    setMoment(j < state.batches.length ? state.batches[j][0] : null);
  }
}

function timelineKeys(event) {
  const span = state.view[1] - state.view[0];
  const keys = {
    ArrowLeft: () => stepBatch(-1), ArrowDown: () => stepBatch(-1),
    ArrowRight: () => stepBatch(1), ArrowUp: () => stepBatch(1),
    PageUp: () => setMoment(momentUs() - span / 10), PageDown: () => setMoment(momentUs() + span / 10),
    Home: () => state.batches.length && setMoment(state.batches[0][0]), End: () => setMoment(null, {follow: true}),
    "+": () => zoom(0.5), "=": () => zoom(0.5), "-": () => zoom(2), "0": zoomBatches,
  };
  const action = keys[event.key];
  if (action) { event.preventDefault(); action(); }
}

function wireTimeline() {
  const strip = $("timeline");
  let dragging = false;
  const pick = (event) => setMoment(usAtX(event.clientX - strip.getBoundingClientRect().left));
  strip.addEventListener("pointerdown", (event) => { dragging = true; strip.setPointerCapture(event.pointerId); strip.focus(); pick(event); });
  strip.addEventListener("pointermove", (event) => { if (dragging) pick(event); });
  strip.addEventListener("pointerup", () => { dragging = false; });
  strip.addEventListener("wheel", (event) => {
    event.preventDefault();
    const [start, end] = state.view;
    const x = event.clientX - strip.getBoundingClientRect().left;
    zoom(event.deltaY < 0 ? 0.7 : 1 / 0.7, start + (x / strip.clientWidth) * (end - start));
  }, {passive: false});
  strip.addEventListener("keydown", timelineKeys);
  window.addEventListener("resize", () => { drawTimeline(); if (state.diffMode !== "inline") alignRows(); });
  $("zoom-in").addEventListener("click", () => zoom(0.5));
  $("zoom-out").addEventListener("click", () => zoom(2));
  $("zoom-all").addEventListener("click", zoomAll);
  $("zoom-fit").addEventListener("click", zoomBatches);
  $("prev-batch").addEventListener("click", () => stepBatch(-1));
  $("next-batch").addEventListener("click", () => stepBatch(1));
  $("first").addEventListener("click", () => state.batches.length && setMoment(state.batches[0][0]));
  $("now").addEventListener("click", () => setMoment(null, {follow: true}));
  const typed = async () => {
    try { showError(""); setMoment(await parseMoment($("moment-input").value)); } catch (e) { showError(e.message); }
  };
  $("go").addEventListener("click", typed);
  $("moment-input").addEventListener("keydown", (event) => { if (event.key === "Enter") typed(); });
  $("valid-input").addEventListener("keydown", (event) => {
    if (event.key !== "Enter") return;
    try { showError(""); state.valid = parseTime($("valid-input").value); saveHash(); refresh(); } catch (e) { showError(e.message); }
  });
}

// ---------------------------------------------------------------- the tree

function buildTree(data) {
  const root = {folders: new Map(), notes: []};
  const place = (path, entry) => {
    const parts = path.split("/");
    let node = root;
    for (const part of parts.slice(0, -1)) {
      if (!node.folders.has(part)) node.folders.set(part, {folders: new Map(), notes: []});
      node = node.folders.get(part);
    }
    node.notes.push({name: parts[parts.length - 1], ...entry});
  };
  for (const note of data.notes) place(note.path, note);
  if (state.showLater) for (const path of data.added_since) place(path, {path, mark: "added", ghost: true});
  return root;
}

function renderFolder(node, prefix, counts) {
  const list = el("ul", {class: "tree"});
  for (const name of [...node.folders.keys()].sort((a, b) => a.localeCompare(b))) {
    const path = prefix + name;
    const details = el("details", {"data-folder": path});
    details.open = state.openFolders.has(path);
    details.addEventListener("toggle", () => details.open ? state.openFolders.add(path) : state.openFolders.delete(path));
    details.append(el("summary", {}, el("span", {class: "folder", text: name}), " ",
                      el("span", {class: "count", text: String(counts[path] || 0)})),
                   renderFolder(node.folders.get(name), path + "/", counts));
    list.append(el("li", {}, details));
  }
  for (const note of node.notes.sort((a, b) => a.name.localeCompare(b.name))) {
    const link = el("a", {href: noteHref(note.path, state.at), class: "note-link" + (note.ghost ? " ghost" : ""), text: note.name.replace(/\.md$/, ""),
                         "data-path": note.path, title: note.path});
    if (note.path === state.note) link.classList.add("active");
    const item = el("li", {class: note.mark ? `mark-${note.mark}` : ""}, link);
    if (note.mark === "renamed") item.append(el("span", {class: "mark renamed", text: `→ ${note.now}`}));
    else if (note.mark) item.append(el("span", {class: `mark ${note.mark}`, text: {modified: "modified since", deleted: "deleted since", added: "added later"}[note.mark]}));
    list.append(item);
  }
  return list;
}

function renderTree(data) {
  $("tree-count").textContent = `${data.notes.length} at this moment` + (beforeHistory(data.at.us) ? `: ${beforeText()}` : "");
  $("tree").replaceChildren(renderFolder(buildTree(data), "", data.folders));
  $("tree").dataset.at = data.at.us === null ? "now" : String(data.at.us);
}

// ---------------------------------------------------------------- a note

function renderNote(data) {
  $("note-empty").hidden = true;
  $("note").hidden = false;
  $("note-title").textContent = data.title || data.path;
  const r = data.revision;
  $("note-meta").textContent = `${data.path} · revision ${r.id}${r.revision ? ` (content ${r.revision})` : ""} known at ${short(r.known_at)} (${r.kind}${r.renamed_from ? ` from ${r.renamed_from}` : ""})` +
    (data.warnings.length ? ` · ${data.warnings.join("; ")}` : "");
  const table = $("frontmatter"), body = table.tBodies[0];
  body.replaceChildren();
  const fm = data.frontmatter && typeof data.frontmatter === "object" ? data.frontmatter : null;
  table.hidden = !fm || !Object.keys(fm).length;
  if (fm) for (const [key, value] of Object.entries(fm)) {
    body.append(el("tr", {}, el("th", {text: key}), el("td", {text: typeof value === "string" ? value : Array.isArray(value) && value.every((v) => typeof v !== "object") ? value.join(", ") : JSON.stringify(value)})));
  }
  $("note-body").innerHTML = data.html;  // rendered by the server with raw HTML off; see render.py
  for (const link of $("note-body").querySelectorAll("a.wikilink[data-path]")) link.href = noteHref(link.dataset.path, state.at);
  for (const img of $("note-body").querySelectorAll("img.embed[data-file]")) {  // the image as it was at the note's moment
    const query = new URLSearchParams({path: img.dataset.file, token: TOKEN});
    if (data.at.us !== null) query.set("at", String(data.at.us));
    img.src = `/api/file?${query}`;
  }
  for (const box of $("note-body").querySelectorAll(".embed.pdf[data-pdf]")) showPdfPage(box, data.at.us);
  $("note-source").textContent = data.content;  // the exact text, as `read --as-of` prints it
  $("note").dataset.path = data.path;
  $("note").dataset.at = data.at.us === null ? "now" : String(data.at.us);
  renderRevisions(data);
}

async function showPdfPage(box, us) {  // an embedded PDF's first page, its text as it was at the note's moment
  const page = box.querySelector(".pdf-page");
  try {
    const pdf = await api("note", {path: box.dataset.pdf, at: us === null ? null : String(us)});
    const first = /^# Page \d+\n\n([\s\S]*?)\n*(?=^# Page \d+\n|(?![\s\S]))/m.exec(pdf.content || "");
    page.textContent = first ? first[1] : "(no text on its pages)";
  } catch (error) {
    page.textContent = `(${error.message})`;
  }
}

function renderRevisions(data) {
  const body = $("revisions").tBodies[0];
  body.replaceChildren();
  const revs = data.revisions;
  const current = revs.findIndex((r) => r.known_at === data.revision.known_at && r.path === data.revision.path);
  const b = current >= 0 ? current : revs.length - 1, a = Math.max(0, b - 1);
  const seconds = revs.map((r) => short(r.known_at));
  revs.forEach((r, i) => {
    // two revisions in one second: their times to the microsecond, so every row says which it is
    const when = seconds.filter((x) => x === seconds[i]).length > 1 ? iso(r.known_at).replace("T", " ").replace("Z", " UTC") : seconds[i];
    const pickA = el("input", {type: "radio", name: "rev-a", value: String(i), checked: i === a, title: "A"});
    const pickB = el("input", {type: "radio", name: "rev-b", value: String(i), checked: i === b, title: "B"});
    pickA.addEventListener("change", () => diffRevisions(revs));
    pickB.addEventListener("change", () => diffRevisions(revs));
    const jump = el("a", {href: noteHref(r.kind === "deleted" ? data.path : r.path, r.known_at), class: "jump", text: when,
                          title: "Move the timeline here"});
    const row = el("tr", {class: i === current ? "current" : "", "data-revision": r.revision || ""}, el("td", {}, pickA),
                   el("td", {}, pickB), el("td", {}, jump), el("td", {class: "rev", text: r.id, title: r.revision ? `content ${r.revision}` : "deleted"}),
                   el("td", {text: r.kind}), el("td", {text: r.path}));
    body.append(row);
  });
  if (state.diff) return;  // the address asked for a change's diff instead (showChangeDiff)
  if (revs.length > 1) diffRevisions(revs); else $("diff-box").hidden = true;
}

function diffRevisions(revs) {
  const a = revs[+document.querySelector('input[name="rev-a"]:checked').value];
  const b = revs[+document.querySelector('input[name="rev-b"]:checked').value];
  showDiff(a.path, a.known_at, b.path, b.known_at, `A ${a.id} (${short(a.known_at)}) → B ${b.id} (${short(b.known_at)})`);
}

let diffRuns = [], diffSeq = 0;

async function showDiff(pathA, atA, pathB, atB, title) {
  const mine = ++diffSeq;
  try {
    const data = await api("diff", {a: pathA, at_a: atA === null ? "now" : atA, b: pathB, at_b: atB === null ? "now" : atB});
    if (mine !== diffSeq) return;  // the reader picked another pair meanwhile
    diffRuns = data.runs;
    $("diff-box").hidden = false;
    $("diff-title").textContent = title || `${pathA} @ ${short(atA)} → ${pathB} @ ${short(atB)}`;
    $("diff-counts").textContent = `${data.removed_words} words removed, ${data.added_words} added`;
    drawDiff();
    $("diff").dataset.pair = `${pathA}@${atA ?? "now"}|${pathB}@${atB ?? "now"}`;
  } catch (e) { showError(e.message); }
}

const CONTEXT = 3;  // unchanged lines shown around a change; the rest is folded behind a button

function unchanged(text, first, last) {
  const lines = text.split(/(?<=\n)/);
  const head = first ? 0 : CONTEXT, tail = last ? 0 : CONTEXT;
  if (lines.length <= head + tail + 2) return [document.createTextNode(text)];
  const folded = lines.slice(head, lines.length - tail).join("");
  const fold = el("button", {type: "button", class: "fold", text: `⋯ ${lines.length - head - tail} unchanged lines ⋯`});
  fold.folded = folded;
  fold.addEventListener("click", () => fold.replaceWith(document.createTextNode(folded)));
  return [document.createTextNode(lines.slice(0, head).join("")), fold,
          document.createTextNode(lines.slice(lines.length - tail).join(""))];
}

function diffNodes(runs) {
  return runs.flatMap(([op, text], i) => op === "=" ? unchanged(text, i === 0, i === runs.length - 1)
                                                    : [el(op === "-" ? "del" : "ins", {text})]);
}

// Side by side, in rows that start on the same line in both columns: a stretch of unchanged lines (folded
// alike on both sides) or one changed line (what it removed on the left, what it added on the right), each
// pair of cells as tall as the taller one. The left column's text is the earlier note, the right's the later.
function sideRows(runs) {
  const rows = [];
  let same = "", line = null;  // unchanged lines not yet placed; the changed line being built
  const place = () => { if (same) rows.push({same}); same = ""; if (line) rows.push(line); line = null; };
  for (const [op, text] of runs) {
    if (op !== "=") {
      if (line === null) { if (same) rows.push({same}); same = ""; line = {left: [], right: []}; }
      (op === "-" ? line.left : line.right).push([op, text]);
      continue;
    }
    let rest = text;
    if (line !== null) {  // the changed line runs on to its end
      const nl = rest.indexOf("\n");
      const head = nl < 0 ? rest : rest.slice(0, nl + 1);
      line.left.push(["=", head]); line.right.push(["=", head]);
      if (nl < 0) continue;
      rows.push(line); line = null;
      rest = rest.slice(nl + 1);
    }
    const last = rest.lastIndexOf("\n");
    same += rest.slice(0, last + 1);
    const tail = rest.slice(last + 1);
    if (tail) { if (same) rows.push({same}); same = ""; line = {left: [["=", tail]], right: [["=", tail]]}; }
  }
  place();
  return rows;
}

function pieces(parts, tag) {
  return parts.map(([op, text]) => op === "=" ? document.createTextNode(text) : el(tag, {text}));
}

function alignRows() {
  const left = document.querySelectorAll("#diff pre.left > .row"), right = document.querySelectorAll("#diff pre.right > .row");
  left.forEach((a, i) => { a.style.minHeight = right[i].style.minHeight = ""; });
  left.forEach((a, i) => {
    const height = Math.max(a.getBoundingClientRect().height, right[i].getBoundingClientRect().height);
    a.style.minHeight = right[i].style.minHeight = `${height}px`;
  });
}

function drawSide() {
  const rows = sideRows(diffRuns);
  const left = el("pre", {class: "diff left"}), right = el("pre", {class: "diff right"});
  rows.forEach((row, i) => {
    const a = el("span", {class: "row"}), b = el("span", {class: "row"});
    if (row.same !== undefined) {
      a.append(...unchanged(row.same, i === 0, i === rows.length - 1));
      b.append(...unchanged(row.same, i === 0, i === rows.length - 1));
      const folds = [a.querySelector("button.fold"), b.querySelector("button.fold")];
      if (folds[0]) for (const fold of folds) fold.addEventListener("click", () => {  // unfold both sides
        for (const other of folds) if (other.isConnected) other.replaceWith(document.createTextNode(other.folded));
        alignRows();
      });
    } else {
      a.classList.add("changed"); b.classList.add("changed");
      a.append(...pieces(row.left, "del"));
      b.append(...pieces(row.right, "ins"));
    }
    left.append(a); right.append(b);
  });
  $("diff").replaceChildren(el("div", {class: "side"}, left, right));
  alignRows();
}

function drawDiff() {
  const box = $("diff");
  if (state.diffMode === "inline") {
    box.replaceChildren(el("pre", {class: "diff inline"}, ...diffNodes(diffRuns)));
  } else {
    drawSide();
  }
  $("diff-inline").setAttribute("aria-pressed", String(state.diffMode === "inline"));
  $("diff-side").setAttribute("aria-pressed", String(state.diffMode !== "inline"));
}

function showSource(source) {
  state.source = source;
  $("note-body").hidden = source;
  $("note-source").hidden = !source;
  $("show-rendered").setAttribute("aria-pressed", String(!source));
  $("show-source").setAttribute("aria-pressed", String(source));
}

function reveal(path) {
  const parts = path.split("/");
  for (let i = 1; i < parts.length; i++) {
    const folder = parts.slice(0, i).join("/");
    state.openFolders.add(folder);
    const details = [...document.querySelectorAll("#tree details")].find((d) => d.dataset.folder === folder);
    if (details) details.open = true;
  }
}

async function openNote(path, options) {
  state.note = path;
  reveal(path);
  saveHash();
  for (const link of document.querySelectorAll("#tree a.note-link")) link.classList.toggle("active", link.dataset.path === path);
  const mine = ++seq;
  try {
    const data = await api("note", {path, at: state.at ?? "now", valid: state.valid});
    if (mine !== seq) return;
    renderNote(data);
    if (state.diff) showChangeDiff();
    // backlinks cost the most (every note's links then): asked for once the moment has settled
    clearTimeout(backlinksTimer);
    $("backlinks").replaceChildren(el("li", {class: "muted", text: "…"}));
    backlinksTimer = setTimeout(() => loadBacklinks(path, mine), 400);
    if (!(options && options.keepScroll)) $("note-panel").scrollTop = 0;
  } catch (e) {
    if (mine !== seq) return;
    $("note").hidden = true;
    $("diff-box").hidden = true;
    $("note-empty").hidden = false;
    $("note-empty").textContent = e.message;
    if (state.diff && state.diff.kind === "deleted") { $("note-empty").hidden = true; showChangeDiff(); }
  }
}

let backlinksTimer = null;

async function loadBacklinks(path, mine) {
  if (mine !== seq) return;
  try {
    const data = await api("links", {path, at: state.at ?? "now"});
    if (mine !== seq) return;
    const list = $("backlinks");
    list.replaceChildren(...data.backlinks.map((source) => el("li", {}, el("a", {href: noteHref(source, state.at), class: "wikilink", "data-path": source, text: source}))));
    if (!data.backlinks.length) list.append(el("li", {class: "muted", text: "none"}));
  } catch (e) { /* the note itself says what went wrong */ }
}

// ---------------------------------------------------------------- search and changes

let searchTimer = null, searchSeq = 0;  // answers to an older search than the newest are dropped
let searchError = "";  // the refusal shown for the last query, taken away once a query is answered

async function runSearch() {
  const typed = $("search-input").value, query = typed.trim();
  state.query = query;
  saveHash();
  const mine = ++searchSeq, at = state.at;  // the header says the moment this answer is for
  const results = $("search-results");
  if (!typed) { results.replaceChildren(); $("search-info").textContent = ""; results.dataset.state = "ready"; return; }
  searching();
  try {
    // spaces alone are asked too: the server says why such a query has nothing to search for
    const data = await api("search", {q: query || typed, at: at ?? "now", valid: state.valid});
    if (mine !== searchSeq) return;  // a newer query or moment was asked for meanwhile
    results.dataset.state = "ready";
    if (searchError && $("error").textContent === searchError) showError("");
    searchError = "";
    const n = data.hits.length, when = `as of ${short(at)} (${data.mode})`;
    $("search-info").textContent = !n ? `no matches ${when}`
      : data.similar_only ? `${n} similar, no word matches: no note holds these words ${when}`
      : `${n} hit${n === 1 ? "" : "s"} ${when}`;
    $("search-results").replaceChildren(...data.hits.map((hit) => {
      const snippet = el("p", {class: "snippet"});
      String(hit.snippet || "").split("**").forEach((part, i) => snippet.append(i % 2 ? el("mark", {text: part}) : part));
      return el("li", {"data-path": hit.path},
                el("a", {href: noteHref(hit.path, at), class: "wikilink result", "data-path": hit.path, text: hit.path}),
                (hit.heading_path || []).length ? el("span", {class: "muted small", text: ` ${hit.heading_path.join(" > ")}`}) : null, snippet);
    }));
  } catch (e) {
    if (mine !== searchSeq) return;
    results.replaceChildren(); $("search-info").textContent = e.message;
    results.dataset.state = "failed";
    searchError = e.message;
    showError(e.message);
  }
}

// From the first keystroke until its answer is drawn (a first search may load the semantic model): the
// earlier results go, and the pane says it is searching. #search-results carries data-state like #changes.
function searching() {
  $("search-results").replaceChildren();
  $("search-results").dataset.state = "searching";
  $("search-info").textContent = "searching…";
}

// The list and its header are drawn together from one answer, and only from the answer to the newest
// request: an older window's answer arriving late is dropped. #changes carries data-window
// ("since|until" of the list shown, µs or "now") and data-state ("loading" while a newer answer is due,
// "ready" once the list for the newest request is drawn, "failed").
let changesSeq = 0;

let sinceAuto = false;  // the window's start was filled in by the page (the batch before): it follows the moment

async function runChanges() {
  let since;
  const mine = ++changesSeq, list = $("changes"), until = state.at;
  if (sinceAuto) $("since-input").value = "";
  try { since = await parseMoment($("since-input").value); } catch (e) { showError(e.message); return; }
  if (beforeHistory(until)) {  // nothing was recorded yet: no window to ask about
    $("changes-info").textContent = `${short(until)}: ${beforeText()}; nothing had changed yet`;
    list.replaceChildren();
    list.dataset.window = `${since ?? ""}|${until}`;
    list.dataset.state = "ready";
    return;
  }
  if (since === null) {
    const i = batchIndexAt(momentUs());
    since = i >= 1 ? state.batches[i - 1][0] : (state.batches.length ? state.batches[0][0] - 1 : 0);
    $("since-input").value = iso(since);
    sinceAuto = true;
  }
  if (until !== null && since > until) {  // a start typed after the moment: said in the pane, not as an error
    $("changes-info").textContent = `${short(since)} is after this moment (${short(until)}): choose an earlier start`;
    list.replaceChildren();
    list.dataset.window = `${since}|${until}`;
    list.dataset.state = "ready";
    return;
  }
  list.dataset.state = "loading";
  try {
    const data = await api("changes", {since, until: state.at ?? "now", valid: state.valid});
    if (mine !== changesSeq) return;
    const from = data.since.us, to = data.until.us;
    const counts = Object.entries(data.counts).map(([k, n]) => `${n} ${k}`).join(", ") || "nothing";
    $("changes-info").textContent = `${short(from)} → ${short(to)}: ${counts}${data.more ? " (first 500 shown)" : ""}`;
    list.replaceChildren(...data.changes.map((c) => {
      // a real link: this change's note as of the window's end, with its own diff over the window
      const link = el("a", {href: noteHref(c.path, to, {since: from, was: c.renamed_from || null, kind: c.kind === "deleted" ? "deleted" : null}),
                            class: "change", text: c.renamed_from ? `${c.renamed_from} → ${c.path}` : c.path});
      return el("li", {class: `kind-${c.kind}`, "data-path": c.path, "data-kind": c.kind, "data-from": c.renamed_from || ""}, el("span", {class: "kind", text: c.kind}), " ", link,
                el("span", {class: "muted small", text: ` ${short(c.known_at)}`}));
    }));
    list.dataset.window = `${from}|${to ?? "now"}`;
    list.dataset.state = "ready";
  } catch (e) {
    if (mine !== changesSeq) return;
    list.dataset.state = "failed";
    showError(e.message);
  }
}

// The notes deleted up to this moment and still gone then, latest first: each opens as it was just before
// its deletion, with the command that restores it. #deleted carries data-state like #changes.
let deletedSeq = 0;

async function runDeleted() {
  const mine = ++deletedSeq, list = $("deleted"), at = state.at;
  list.dataset.state = "loading";
  try {
    const data = await api("deleted", {until: at ?? "now"});
    if (mine !== deletedSeq) return;
    const n = data.deleted.length;
    $("deleted-info").textContent = n ? `${n} note${n === 1 ? "" : "s"} deleted by ${short(at)} and still gone`
                                      : `nothing deleted by ${short(at)} is still gone`;
    list.replaceChildren(...data.deleted.map((d) => el("li", {"data-path": d.path},
      el("a", {href: noteHref(d.path, d.before_us), class: "change", text: d.path}),
      el("span", {class: "muted small", text: ` deleted ${short(d.deleted_us)}, ${d.size ?? "?"} bytes`}),
      el("code", {class: "small restore", text: d.restore}))));
    list.dataset.state = "ready";
  } catch (e) {
    if (mine !== deletedSeq) return;
    list.dataset.state = "failed";
    showError(e.message);
  }
}

function showChangeDiff() {
  const {since, was, kind} = state.diff, path = state.note, before = was || path;
  if (kind === "deleted") { $("note").hidden = true; $("note-empty").hidden = true; }
  showDiff(before, since, path, state.at, `${before} @ ${short(since)} → ${path} @ ${short(state.at)}`);
}

function selectTab(name) {
  state.tab = name;
  $("tab-search").setAttribute("aria-selected", String(name === "search"));
  $("tab-changes").setAttribute("aria-selected", String(name === "changes"));
  $("search-pane").hidden = name !== "search";
  $("tab-deleted").setAttribute("aria-selected", String(name === "deleted"));
  $("changes-pane").hidden = name !== "changes";
  $("deleted-pane").hidden = name !== "deleted";
  if (name === "changes") runChanges();
  if (name === "deleted") runDeleted();
}

// ---------------------------------------------------------------- moving through time

let refreshing = false, again = false;

async function refresh() {
  if (refreshing) { again = true; return; }   // dragging: the newest moment wins, one request at a time
  refreshing = true;
  try {
    showError("");
    const at = state.at ?? "now";
    const [tree] = await Promise.all([api("tree", {at, valid: state.valid}),
                                      state.note ? openNote(state.note, {keepScroll: true}) : null]);
    renderTree(tree);
    if (state.query) runSearch();
    if (state.tab === "changes") runChanges();  // the same "since", up to the new moment
    if (state.tab === "deleted") runDeleted();
  } catch (e) { showError(e.message); }
  refreshing = false;
  if (again) { again = false; refresh(); }
}

function saveHash() {
  const params = new URLSearchParams();
  if (state.at !== null) params.set("at", String(state.at));
  if (state.valid !== null) params.set("valid", String(state.valid));
  if (state.note) params.set("note", state.note);
  if (state.query) params.set("q", state.query);
  if (state.diff && state.note) {
    params.set("since", String(state.diff.since));
    if (state.diff.was) params.set("was", state.diff.was);
    if (state.diff.kind) params.set("kind", state.diff.kind);
  }
  history.replaceState(null, "", `${location.pathname}${location.search}#${params}`);
}

function loadHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  state.at = params.get("at") ? Number(params.get("at")) : null;
  state.valid = params.get("valid") ? Number(params.get("valid")) : null;
  state.note = params.get("note");
  state.diff = state.note && params.get("since") ? {since: Number(params.get("since")), was: params.get("was"), kind: params.get("kind")} : null;
  state.query = params.get("q") || "";
  $("search-input").value = state.query;
}

async function applyHash() {  // the address changed (a link, Back, Forward, a bookmark): show what it names
  loadHash();
  $("valid-input").value = state.valid === null ? "" : iso(state.valid);
  setMoment(state.at, {quiet: true, keepDiff: true});
  await refresh();
}

async function start() {
  wireTimeline();
  document.addEventListener("click", (event) => {
    const link = event.target.closest("a");
    if (!link) return;
    if (link.classList.contains("external")) return;  // opens in a new tab, no referrer
    const href = link.getAttribute("href") || "";
    if (href.length > 1 && href.startsWith("#")) {  // the page's own address: the browser follows it (hashchange)
      if (link.hash === location.hash && !(event.ctrlKey || event.metaKey || event.shiftKey)) { event.preventDefault(); applyHash(); }
      return;
    }
    event.preventDefault();
    if (link.dataset.path) openNote(link.dataset.path);
  });
  $("show-later").addEventListener("change", () => { state.showLater = $("show-later").checked; refresh(); });
  $("search-input").addEventListener("input", () => {
    clearTimeout(searchTimer);
    if ($("search-input").value.trim()) searching();
    searchTimer = setTimeout(runSearch, 250);
  });
  $("search-input").addEventListener("keydown", (event) => { if (event.key === "Enter") { clearTimeout(searchTimer); runSearch(); } });
  $("tab-search").addEventListener("click", () => selectTab("search"));
  $("tab-changes").addEventListener("click", () => selectTab("changes"));
  $("tab-deleted").addEventListener("click", () => selectTab("deleted"));
  $("since-input").addEventListener("input", () => { sinceAuto = false; });
  $("since-input").addEventListener("keydown", (event) => { if (event.key === "Enter") runChanges(); });
  $("since-prev").addEventListener("click", () => { $("since-input").value = ""; runChanges(); });
  $("show-rendered").addEventListener("click", () => showSource(false));
  $("show-source").addEventListener("click", () => showSource(true));
  $("diff-inline").addEventListener("click", () => { state.diffMode = "inline"; drawDiff(); });
  $("diff-side").addEventListener("click", () => { state.diffMode = "side"; drawDiff(); });
  loadHash();
  window.addEventListener("hashchange", applyHash);
  try {
    const timeline = await api("timeline");
    state.batches = timeline.batches;
    $("vault-name").textContent = timeline.vault;
    $("valid-control").hidden = !timeline.validity;
  } catch (e) { showError(e.message); }
  zoomBatches();
  setMoment(state.at, {quiet: true, keepDiff: true});
  await refresh();
  if (state.query) runSearch();
  document.body.dataset.ready = "1";
}

document.addEventListener("DOMContentLoaded", start);
