// chat.js: follows in-flight responses over websockets and sends prompts without a reload.
//
// The page is complete without this module: every committed message is rendered on the server.
// Here, each live turn (`article.turn[data-live]`) opens ws(s)://host/ws/requests/<id>/, takes the
// `snapshot`, applies `patch`es with the same reducer as responses_app/streaming/view.py (four
// ops: add / append / set / meta; a patch applies only when its `base` equals the held revision,
// otherwise we ask for a snapshot), and renders at most once per animation frame. On `terminal`
// the turn is swapped for its server rendering, so a finished answer is identical in every tab.

const TERMINAL = new Set(["completed", "failed", "error", "incomplete", "cancelled", "unknown"]);
const BADGE_TERMINAL = { completed: "completed", failed: "failed", error: "failed", incomplete: "incomplete",
  cancelled: "cancelled", unknown: "unknown" };
const LABELS = { queued: "Queued", in_progress: "In progress", thinking: "Thinking…", searching: "Searching…",
  waiting_tool: "Waiting for tool", completed: "Completed", failed: "Failed", incomplete: "Incomplete",
  cancelled: "Cancelled", unknown: "Unknown outcome" };
const CALLER_TOOLS = new Set(["function_call", "custom_tool_call"]);
const VISIBLE = new Set(["text", "refusal", "image", "audio"]);
const SILENCE_MS = 50000; // the server pings every 20 s when idle; this much silence is a dead socket
const PROBE_MS = 4000;

// --- rendering (mirrors responses_app/markdown.py and the _block.html template) ------------------

export function esc(value) {
  return String(value ?? "").replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;").replace(/'/g, "&#x27;");
}

const FENCE = /^\s*(```|~~~)\s*([\w+#.-]*)\s*$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBER = /^\s*\d{1,9}[.)]\s+(.*)$/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const CODE = /`([^`\n]+)`/g;
const LINK = /\[([^[\]\n]+)\]\((https?:\/\/[^\s()<>]+)\)/gi;
const BOLD = /\*\*(?=\S)(.+?)(?<=\S)\*\*/g;
const EM_STAR = /(?<![*\p{L}\p{N}_])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\p{L}\p{N}_])/gu;
const EM_UNDER = /(?<![_\p{L}\p{N}])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![_\p{L}\p{N}])/gu;
const TOKEN = /\u0000(\d+)\u0000/g;
const SAFE_URL = /^https?:\/\/[^\s"'<>`]+$/i;

function emphasis(html) {
  return html.replace(BOLD, "<strong>$1</strong>").replace(EM_STAR, "<em>$1</em>").replace(EM_UNDER, "<em>$1</em>");
}

export function renderInline(text) {
  const stash = [];
  const keep = (html) => { stash.push(html); return `\u0000${stash.length - 1}\u0000`; };
  let out = esc(String(text).replace(/\u0000/g, ""));
  out = out.replace(CODE, (_, code) => keep(`<code>${code}</code>`));
  out = out.replace(LINK, (_, label, url) =>
    keep(`<a href="${url}" rel="noopener noreferrer nofollow" target="_blank">${emphasis(label)}</a>`));
  out = emphasis(out);
  while (/\u0000\d+\u0000/.test(out)) out = out.replace(TOKEN, (_, n) => stash[Number(n)]);
  return out;
}

export function renderMarkdown(text) {
  const lines = String(text || "").replace(/\r\n?/g, "\n").split("\n");
  const out = [];
  const paragraph = [];
  let items = [];
  let listTag = "";
  const flushParagraph = () => {
    if (paragraph.length) out.push(`<p>${paragraph.map(renderInline).join("<br>")}</p>`);
    paragraph.length = 0;
  };
  const flushList = () => {
    if (items.length) out.push(`<${listTag}>${items.map((i) => `<li>${i}</li>`).join("")}</${listTag}>`);
    items = [];
    listTag = "";
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = FENCE.exec(line);
    if (fence) {
      flushParagraph(); flushList();
      const code = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) code.push(lines[i++]);
      const cls = fence[2] ? ` class="language-${esc(fence[2])}"` : "";
      out.push(`<pre><code${cls}>${esc(code.join("\n"))}</code></pre>`);
      continue;
    }
    const bullet = BULLET.exec(line);
    const number = bullet ? null : NUMBER.exec(line);
    const heading = HEADING.exec(line);
    if (bullet || number) {
      flushParagraph();
      const tag = bullet ? "ul" : "ol";
      if (listTag && listTag !== tag) flushList();
      listTag = tag;
      items.push(renderInline((bullet || number)[1]));
    } else if (!line.trim()) {
      flushParagraph(); flushList();
    } else if (heading) {
      flushParagraph(); flushList();
      const level = Math.min(heading[1].length + 2, 6);
      out.push(`<h${level} class="md-h">${renderInline(heading[2])}</h${level}>`);
    } else if (items.length && /^( {2}|\t)/.test(line)) {
      items[items.length - 1] += " " + renderInline(line.trim());
    } else {
      flushList();
      paragraph.push(line);
    }
  }
  flushParagraph(); flushList();
  return out.join("");
}

export function badgeKey(status, view) {
  if (BADGE_TERMINAL[status]) return BADGE_TERMINAL[status];
  if (status === "pending") return "queued";
  const meta = (view && view.meta) || {};
  if (BADGE_TERMINAL[meta.status]) return BADGE_TERMINAL[meta.status];
  if (meta.status === "queued") return "queued";
  const blocks = (view && view.blocks) || [];
  if (blocks.some((b) => b.kind === "tool" && b.state === "searching")) return "searching";
  const last = blocks[blocks.length - 1];
  if (last && last.kind === "tool" && CALLER_TOOLS.has(last.tool) && (last.state === "completed" || last.state === "done")) {
    return "waiting_tool";
  }
  const visible = blocks.some((b) => VISIBLE.has(b.kind) && b.text);
  if (!visible || (last && last.kind === "reasoning")) return "thinking";
  return "in_progress";
}

function citations(block) {
  const seen = new Set();
  const found = [];
  for (const note of block.annotations || []) {
    if (!note || typeof note !== "object") continue;
    if (note.type === "url_citation") {
      const url = typeof note.url === "string" && SAFE_URL.test(note.url.trim()) ? note.url.trim() : null;
      if (url && !seen.has(url)) { seen.add(url); found.push({ kind: "url", url, title: String(note.title || url) }); }
    } else if (note.type === "file_citation" || note.type === "container_file_citation") {
      const name = String(note.filename || note.file_id || "file");
      if (!seen.has(name)) { seen.add(name); found.push({ kind: "file", title: name }); }
    }
  }
  return found;
}

const TOOL_NAMES = { web_search_call: "Web search", file_search_call: "File search", function_call: "Function call",
  custom_tool_call: "Tool call", code_interpreter_call: "Code interpreter", image_generation_call: "Image generation",
  mcp_call: "MCP call", mcp_list_tools: "MCP tools list", mcp_approval_request: "MCP approval request",
  computer_call: "Computer use", local_shell_call: "Shell", shell_call: "Shell", apply_patch_call: "Patch" };

function toolTitle(block) {
  const tool = String(block.tool || "tool");
  let title = TOOL_NAMES[tool] || (tool.charAt(0).toUpperCase() + tool.slice(1)).replace(/_/g, " ");
  if (block.name) title += block.server_label ? ` ${block.server_label}.${block.name}` : ` ${block.name}`;
  if (block.query) title += `: “${block.query}”`;
  else if (block.queries && block.queries.length) title += ": " + block.queries.slice(0, 3).map((q) => `“${q}”`).join(", ");
  return title;
}

function toolDetails(block) {
  const details = [];
  for (const key of ["arguments", "input", "commands", "output", "result", "outputs", "operation", "error"]) {
    let value = block[key];
    if (value === undefined || value === null || value === "" || (Array.isArray(value) && !value.length)) continue;
    if (typeof value === "object" && !Array.isArray(value) && !Object.keys(value).length) continue;
    if (typeof value === "string") {
      try { value = JSON.stringify(JSON.parse(value), null, 2); } catch { /* keep the text */ }
    } else {
      value = JSON.stringify(value, null, 2);
    }
    details.push([key, value]);
  }
  return details;
}

const IMAGE_PREFIXES = [["iVBOR", "image/png"], ["/9j/", "image/jpeg"], ["UklGR", "image/webp"], ["R0lGOD", "image/gif"]];

function imageSrc(block) {
  const data = block.image_b64 || block.result;
  if (typeof data !== "string" || !data || data.length > 8000000 || !/^[A-Za-z0-9+/=\s]+$/.test(data)) return "";
  const found = IMAGE_PREFIXES.find(([prefix]) => data.startsWith(prefix));
  return found ? `data:${found[1]};base64,${data}` : "";
}

function reasoningTitle(text) {
  const match = /^\s*\*\*(.+?)\*\*/.exec(text || "");
  return match ? `Reasoning · ${match[1]}` : "Reasoning summary";
}

function sourcesHtml(block) {
  const cites = citations(block);
  if (!cites.length) return "";
  const items = cites.map((c) => c.kind === "url"
    ? `<li><a href="${esc(c.url)}" rel="noopener noreferrer nofollow" target="_blank">${esc(c.title)}</a></li>`
    : `<li><span class="file-cite">${esc(c.title)}</span></li>`).join("");
  return `<div class="sources"><span class="sources-label">Sources</span><ol>${items}</ol></div>`;
}

export function renderBlock(block) {
  const id = esc(block.id);
  switch (block.kind) {
    case "text":
      return `<div class="block block-text" data-block-id="${id}"><div class="md">${renderMarkdown(block.text)}</div>${sourcesHtml(block)}</div>`;
    case "refusal":
      return `<div class="block block-refusal" data-block-id="${id}"><span class="tag">Refusal</span> ${esc(block.text)}</div>`;
    case "reasoning":
      return block.text
        ? `<details class="block block-reasoning" data-block-id="${id}"><summary>${esc(reasoningTitle(block.text))}</summary><div class="md">${renderMarkdown(block.text)}</div></details>`
        : `<div class="block block-empty" data-block-id="${id}" hidden></div>`;
    case "image": {
      const src = imageSrc(block);
      return `<figure class="block block-image" data-block-id="${id}">${src ? `<img src="${esc(src)}" alt="Generated image">` : ""}<figcaption>Image generation · ${esc(block.state)}</figcaption></figure>`;
    }
    case "audio":
      return `<div class="block block-audio" data-block-id="${id}"><span class="tag">Audio transcript</span> ${esc(block.text)}</div>`;
    default: {
      const code = block.text ? `<pre><code>${esc(block.text)}</code></pre>` : "";
      const details = toolDetails(block).map(([label, value]) =>
        `<div class="tool-detail"><span class="muted small">${esc(label)}</span><pre>${esc(value)}</pre></div>`).join("");
      return `<details class="block block-tool" data-block-id="${id}" data-state="${esc(block.state)}"><summary><span class="tool-title">${esc(toolTitle(block))}</span> <span class="tool-state state-${esc(block.state)}">${esc(block.state)}</span></summary>${code}${details}</details>`;
    }
  }
}

// --- following one request ------------------------------------------------------------------------

const followers = new Map();
const liveTexts = new Map(); // request id -> the text this tab assembled itself, before the swap

function csrfToken() {
  const input = document.querySelector("input[name=csrfmiddlewaretoken]");
  if (input) return input.value;
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

function remember(key) {
  // True when this tab's session storage already had the key; sets it either way.
  try {
    const seen = sessionStorage.getItem(key) !== null;
    sessionStorage.setItem(key, "1");
    return seen;
  } catch {
    return false; // storage disabled: count as a first connection
  }
}

function schedule(callback) {
  // Hidden tabs get no animation frames; they still keep their view current, just less often.
  return document.hidden ? setTimeout(callback, 100) : requestAnimationFrame(callback);
}

class Follower {
  constructor(turn) {
    this.turn = turn;
    this.id = turn.dataset.requestId;
    this.status = turn.dataset.status;
    this.view = null;
    this.revision = -1;
    this.queue = [];
    this.scheduled = false;
    this.dirty = new Set();
    this.full = false;
    this.awaitingSnapshot = false;
    this.ws = null;
    this.attempt = 0;
    this.opened = false;
    this.done = false;
    this.lastMessageAt = Date.now();
    // A tab that followed this request before (a reload, back/forward) is reconnecting, not new.
    this.followedBefore = remember(`relay:followed:${this.id}`);
    followers.set(this.id, this);
    this.bindStop();
    this.connect();
  }

  bindStop() {
    const form = this.turn.querySelector(".stop-form");
    if (!form) return;
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.stop();
    });
  }

  url() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const reconnect = this.opened || this.attempt || this.followedBefore;
    return `${scheme}//${location.host}/ws/requests/${this.id}/${reconnect ? "?reconnect=1" : ""}`;
  }

  connect() {
    if (this.done) return;
    clearTimeout(this.retryTimer);
    let ws;
    try {
      ws = new WebSocket(this.url());
    } catch {
      this.retry();
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      if (ws !== this.ws) return;
      this.opened = true;
      this.attempt = 0;
      this.lastMessageAt = Date.now();
      this.setReconnecting(false);
    };
    ws.onmessage = (event) => {
      if (ws !== this.ws) return;
      this.lastMessageAt = Date.now();
      let message;
      try { message = JSON.parse(event.data); } catch { return; }
      this.queue.push(message);
      if (!this.scheduled) {
        this.scheduled = true;
        schedule(() => { this.scheduled = false; this.flush(); });
      }
    };
    let openedThis = false;
    ws.addEventListener("open", () => { openedThis = true; });
    ws.onclose = (event) => {
      if (ws !== this.ws) return;
      this.ws = null;
      if (this.done) return;
      if (event.code === 4403) {
        this.forbidden();
        return;
      }
      this.setReconnecting(true);
      // A socket that never opened looks like a network error: after two of those, ask the API
      // whether we may still see this request at all (a proxy may refuse the handshake itself).
      if (!openedThis && this.attempt >= 1) this.checkAccess();
      this.retry();
    };
  }

  retry() {
    if (this.done) return;
    clearTimeout(this.retryTimer);
    const delay = Math.min(15000, 400 * 2 ** this.attempt) * (0.75 + Math.random() * 0.5);
    this.attempt += 1;
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }

  reconnectNow() {
    if (this.done) return;
    const old = this.ws;
    this.ws = null;
    if (old) { try { old.close(); } catch { /* already closed */ } }
    this.setReconnecting(true);
    this.attempt = Math.max(this.attempt, 1);
    this.connect();
  }

  probe() {
    // After sleep or a network change a socket can look open and be dead: ping, expect an answer.
    if (this.done) return;
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) {
      if (!this.ws || this.ws.readyState !== WebSocket.CONNECTING) this.reconnectNow();
      return;
    }
    const sentAt = Date.now();
    try { this.ws.send('{"type":"ping"}'); } catch { this.reconnectNow(); return; }
    setTimeout(() => { if (!this.done && this.lastMessageAt < sentAt) this.reconnectNow(); }, PROBE_MS);
  }

  send(message) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify(message));
      return true;
    }
    return false;
  }

  askSnapshot() {
    this.awaitingSnapshot = true;
    if (!this.send({ type: "snapshot" })) this.reconnectNow(); // a fresh connection starts with one
  }

  flush() {
    const messages = this.queue;
    this.queue = [];
    for (const message of messages) {
      if (this.done) break;
      this.handle(message);
    }
    if (!this.done) this.render();
  }

  handle(message) {
    switch (message.type) {
      case "snapshot":
        this.view = message.view;
        this.revision = message.revision;
        if (message.status) this.status = message.status;
        this.awaitingSnapshot = false;
        this.full = true;
        break;
      case "patch":
        if (!this.view || this.awaitingSnapshot || message.revision <= this.revision) return; // a duplicate
        if (message.base !== this.revision) { this.askSnapshot(); return; } // a gap: never show a hole
        try {
          for (const op of message.ops) this.apply(op);
        } catch {
          this.askSnapshot();
          return;
        }
        this.revision = message.revision;
        this.view.revision = message.revision;
        if (this.status === "pending") this.status = "streaming";
        break;
      case "terminal":
        this.status = message.status;
        this.finish(message);
        break;
      default: // ping, pong, error: liveness only
        break;
    }
  }

  find(id) {
    const blocks = this.view.blocks;
    for (let i = blocks.length - 1; i >= 0; i--) if (blocks[i].id === id) return blocks[i];
    throw new Error(`no block ${id}`);
  }

  apply(op) {
    const kind = op[0];
    if (kind === "append") {
      const block = this.find(op[1]);
      block.text = (block.text || "") + op[2];
      this.dirty.add(op[1]);
    } else if (kind === "set") {
      Object.assign(this.find(op[1]), op[2]);
      this.dirty.add(op[1]);
    } else if (kind === "add") {
      const existing = this.view.blocks.find((b) => b.id === op[1].id);
      if (existing) Object.assign(existing, op[1]);
      else this.view.blocks.push({ ...op[1] });
      this.dirty.add(op[1].id);
    } else if (kind === "meta") {
      Object.assign(this.view.meta, op[1]);
    } else {
      throw new Error(`unknown op ${kind}`);
    }
  }

  render() {
    if (!this.view) return;
    const box = this.turn.querySelector("[data-blocks]");
    if (this.full) {
      box.innerHTML = this.view.blocks.map(renderBlock).join("");
      this.full = false;
    } else {
      for (const id of this.dirty) {
        const block = this.view.blocks.find((b) => b.id === id);
        if (!block) continue;
        const element = box.querySelector(`[data-block-id="${CSS.escape(id)}"]`);
        if (!element) {
          box.insertAdjacentHTML("beforeend", renderBlock(block));
        } else if (block.kind === "text" && element.classList.contains("block-text")) {
          element.querySelector(".md").innerHTML = renderMarkdown(block.text);
          const sources = element.querySelector(".sources");
          const html = sourcesHtml(block);
          if (sources) sources.outerHTML = html || "<span hidden></span>";
          else if (html) element.insertAdjacentHTML("beforeend", html);
        } else {
          const open = element.tagName === "DETAILS" && element.open;
          element.outerHTML = renderBlock(block);
          if (open) box.querySelector(`[data-block-id="${CSS.escape(id)}"]`).open = true;
        }
      }
    }
    this.dirty.clear();
    const placeholder = this.turn.querySelector("[data-placeholder]");
    if (placeholder) placeholder.hidden = this.view.blocks.length > 0;
    this.setBadge(badgeKey(this.status, this.view));
    const error = this.view.meta && this.view.meta.error;
    if (error && typeof error === "object") this.showError(error);
  }

  setBadge(key) {
    const badge = this.turn.querySelector("[data-badge]");
    if (!badge || badge.dataset.badge === key) return;
    badge.dataset.badge = key;
    badge.className = `badge badge-${key}`;
    badge.textContent = LABELS[key] || key;
  }

  showError(error) {
    const box = this.turn.querySelector("[data-error]");
    if (!box) return;
    box.hidden = false;
    box.innerHTML = `<strong>${esc(error.code || "error")}</strong>${error.message ? ": " + esc(error.message) : ""}`;
  }

  setReconnecting(on) {
    const conn = this.turn.querySelector(".conn");
    if (conn) conn.hidden = !on;
    this.turn.classList.toggle("reconnecting", on);
  }

  stop() {
    const button = this.turn.querySelector(".stop");
    if (button) { button.disabled = true; button.textContent = "Stopping…"; }
    if (this.send({ type: "cancel" })) return;
    fetch(this.turn.dataset.cancelUrl, {
      method: "POST", credentials: "same-origin", headers: { "X-CSRFToken": csrfToken() },
    }).catch(() => { if (button) { button.disabled = false; button.textContent = "Stop"; } });
  }

  async checkAccess() {
    try {
      const response = await fetch(`/api/requests/${this.id}`, { credentials: "same-origin" });
      if (response.status === 404 || response.status === 401 || response.status === 403) this.forbidden();
    } catch {
      // offline: keep retrying
    }
  }

  forbidden() {
    this.close();
    this.setBadge("unknown");
    this.showError({ code: "forbidden", message: "You cannot watch this response." });
  }

  close() {
    this.done = true;
    clearTimeout(this.retryTimer);
    followers.delete(this.id);
    const ws = this.ws;
    this.ws = null;
    if (ws) { try { ws.close(1000); } catch { /* already closed */ } }
    this.setReconnecting(false);
  }

  async finish(message) {
    this.render();
    this.close();
    const box = this.turn.querySelector("[data-blocks]");
    if (box && this.view) liveTexts.set(this.id, box.innerText);
    this.setBadge(badgeKey(message.status, this.view));
    const stop = this.turn.querySelector(".stop-form");
    if (stop) stop.remove();
    this.turn.removeAttribute("data-live");
    this.turn.dataset.status = message.status;
    if (message.error && typeof message.error === "object") this.showError(message.error);
    // The server rendering of the committed answer: the same HTML in every tab, after every reload.
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const response = await fetch(this.turn.dataset.turnUrl, { credentials: "same-origin" });
        if (!response.ok) return;
        const html = (await response.text()).trim();
        const holder = document.createElement("div");
        holder.innerHTML = html;
        const fresh = holder.firstElementChild;
        if (!fresh) return;
        if (fresh.dataset.live && attempt < 2) { // not committed yet: try once more shortly
          await new Promise((resolve) => setTimeout(resolve, 300));
          continue;
        }
        this.turn.replaceWith(fresh);
        this.turn = fresh;
        fresh.dataset.finished = "1";
        return;
      } catch {
        return;
      }
    }
  }
}

export function follow(turn) {
  const id = turn.dataset.requestId;
  if (!id || followers.has(id) || !turn.dataset.live) return followers.get(id);
  return new Follower(turn);
}

// --- the composer ------------------------------------------------------------------------------

function newRequestId() {
  if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function showFormErrors(form, errors, message) {
  const box = form.querySelector(".form-errors");
  if (!box) return;
  const lines = Object.entries(errors || {}).flatMap(([field, messages]) =>
    messages.map((m) => `<p><strong>${esc(field)}</strong>: ${esc(m)}</p>`));
  box.innerHTML = lines.join("") || `<p>${esc(message || "Something went wrong.")}</p>`;
  box.hidden = false;
}

function bindComposer(form) {
  const input = form.querySelector("textarea[name=input]");
  if (input) {
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
  }
  const conversation = form.dataset.conversation;
  if (!conversation) return; // the first prompt of a conversation posts normally and redirects
  let sending = false;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (sending) return;
    sending = true;
    const button = form.querySelector("button[type=submit]");
    if (button) button.disabled = true;
    const data = new FormData(form);
    const body = {
      input: data.get("input") || "",
      model: data.get("model") || "",
      conversation,
      client_request_id: data.get("client_request_id"),
      metadata: (data.get("metadata") || "").trim(),
    };
    try {
      const response = await fetch(form.dataset.api, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken(), Accept: "application/json" },
        body: JSON.stringify(body),
      });
      if (response.status === 401 || response.status === 403) { location.reload(); return; }
      const result = await response.json().catch(() => ({}));
      if (!response.ok) { showFormErrors(form, result.errors, result.error); return; }
      form.querySelector(".form-errors").hidden = true;
      form.querySelector("input[name=client_request_id]").value = newRequestId(); // the next prompt
      if (input) input.value = "";
      await addTurn(conversation, result.id);
    } catch {
      // Offline or the server restarted: keep the same client_request_id, so sending again is safe.
      showFormErrors(form, null, "Could not reach the server. Your message was kept; press Send to try again.");
    } finally {
      sending = false;
      if (button) button.disabled = false;
    }
  });
}

async function addTurn(conversation, requestId) {
  let turn = document.getElementById(`turn-${requestId}`);
  if (!turn) {
    const response = await fetch(`/c/${conversation}/turns/${requestId}/`, { credentials: "same-origin" });
    if (!response.ok) { location.reload(); return; }
    const holder = document.createElement("div");
    holder.innerHTML = (await response.text()).trim();
    turn = holder.firstElementChild;
    const turns = document.getElementById("turns");
    const empty = turns.querySelector(".empty-turns");
    if (empty) empty.remove();
    turns.appendChild(turn);
  }
  turn.scrollIntoView({ behavior: "smooth", block: "start" });
  follow(turn);
}

// --- start ---------------------------------------------------------------------------------------

function start() {
  document.querySelectorAll("article.turn[data-live]").forEach(follow);
  const form = document.getElementById("composer");
  if (form) bindComposer(form);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") followers.forEach((f) => f.probe());
  });
  window.addEventListener("online", () => followers.forEach((f) => f.reconnectNow()));
  setInterval(() => {
    const now = Date.now();
    followers.forEach((f) => {
      if (f.ws && f.ws.readyState === WebSocket.OPEN && now - f.lastMessageAt > SILENCE_MS) f.reconnectNow();
    });
  }, 10000);
  window.relayChat = { followers, liveTexts, renderMarkdown, badgeKey }; // for debugging and tests
}

start();
