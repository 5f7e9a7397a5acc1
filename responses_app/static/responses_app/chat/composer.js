// composer.js: sends a prompt without a reload and adds its turn; also adds turns that other tabs
// started (conversation.js). Without JavaScript the form posts and redirects.
//
// After sending, the focus stays in the message box, so a follow-up typed at once lands there; the
// new answer is announced through the page's live region (follower.js), not by moving the focus.
// Enter sends where there is a fine pointer (Shift+Enter adds a line); on a touch screen Enter adds
// a line and Send sends; Ctrl/Cmd+Enter sends on any screen. The hint under the box says which.
//
// Every prompt box counts its characters as the server does (code points) against the limit the
// page states (data-max-chars: forms.MAX_INPUT_CHARS): the count shows near the limit, and over it
// Send is off, with the reason in words (aria-describedby); nothing is cut. Errors are worded for
// people (web/form_words.py), tied to their field, and go away as soon as the person types there.
// While an answer streams, the composer's Stop stops the newest one, where the reader already is.
// Attachments (attach.js) go with the prompt: the form as multipart, to the same JSON API address.

import { bindAttachments } from "./attach.js";
import { csrfToken } from "./csrf.js";
import { announce, follow, followers } from "./follower.js";
import { typeset } from "./math.js";
import { contentChanged, keepPosition, toBottom } from "./scroll.js";
import { url } from "./urls.js";
import { vocab } from "./vocab.js";

export const FOCUS_COMPOSER = "relay:focus-composer";
const NEAR_LIMIT = 0.9; // the count appears from this share of the limit

export function touchScreen() {
  return window.matchMedia("(pointer: coarse)").matches;
}

export function newRequestId() {
  if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

// One error of a field in words: the same rules as form_words.for_people on the server.
export function errorWords(field, message) {
  const { labels, required } = vocab.form;
  if (message === "This field is required.") return required[field] || `${labels[field] || "This"} is required.`;
  const label = labels[field];
  if (!label) return message;
  if (message.startsWith(field) && !/\w/.test(message.charAt(field.length))) {
    return `${label} ${message.slice(field.length).trimStart()}`;
  }
  if (/^[a-z]/.test(message)) return `${label} ${message}`;
  return message;
}

function control(form, field) {
  const id = vocab.form.controls[field];
  return id ? form.querySelector(`#${id}`) : null;
}

function describedBy(element, id, on) {
  const ids = (element.getAttribute("aria-describedby") || "").split(/\s+/).filter((x) => x && x !== id);
  if (on) ids.unshift(id);
  if (ids.length) element.setAttribute("aria-describedby", ids.join(" "));
  else element.removeAttribute("aria-describedby");
}

// Shows errors ({field: [messages]}, or one message for the whole form) in words, tied to their fields.
export function showFormErrors(form, errors, message) {
  const box = form.querySelector(".form-errors");
  if (!box) return;
  const lines = Object.entries(errors || {}).flatMap(([field, messages]) => messages.map((m) => [field, errorWords(field, m)]));
  if (!lines.length) lines.push(["", message || "Something went wrong."]);
  box.replaceChildren(...lines.map(([field, text]) => {
    const p = document.createElement("p");
    p.dataset.field = field;
    p.textContent = text;
    return p;
  }));
  box.hidden = false;
  for (const [field] of lines) {
    const element = control(form, field);
    if (!element) continue;
    element.setAttribute("aria-invalid", "true");
    describedBy(element, box.id, true);
    const details = element.closest("details");
    if (details) details.open = true;
  }
}

// The person typed in `field` (or sent again: every field): its errors, and those of the whole form, go.
function clearFormErrors(form, field = null) {
  const box = form.querySelector(".form-errors");
  if (!box || box.hidden) return;
  const fields = new Set(field === null ? [] : [field]);
  for (const p of box.querySelectorAll("p")) {
    const about = p.dataset.field || "";
    if (field === null || about === field || !control(form, about)) { p.remove(); fields.add(about); }
  }
  for (const about of fields) {
    const element = control(form, about);
    if (element) { element.removeAttribute("aria-invalid"); describedBy(element, box.id, false); }
  }
  if (!box.querySelector("p")) box.hidden = true;
}

// The count under a prompt box, near the limit, and the box refusing to be sent while it is over it.
export function bindCount(input) {
  const max = Number(input.dataset.maxChars || 0);
  const form = input.form;
  const count = form && form.querySelector("[data-count]");
  if (!max || !count) return;
  const limit = form.querySelector("[data-limit]");
  const send = form.querySelector("button[type=submit]");
  const number = new Intl.NumberFormat();
  let over = false;
  const update = () => {
    const n = [...input.value].length;
    const now = n > max;
    count.textContent = n >= max * NEAR_LIMIT ? `${number.format(n)} / ${number.format(max)}` : "";
    count.classList.toggle("over", now);
    const message = now ? `Too long to send: ${number.format(n)} characters, at most ${number.format(max)}. Remove ${number.format(n - max)} to send.` : "";
    input.setCustomValidity(message);
    if (now) count.textContent += " · too long";
    if (limit) limit.textContent = message;
    if (send) { send.dataset.over = now ? "1" : ""; send.disabled = now || send.dataset.sending === "1"; }
    if (now !== over && now) announce(message);
    over = now;
  };
  input.addEventListener("input", update);
  update();
}

function bindStopLatest(form) {
  const stop = form.querySelector("[data-stop-latest]");
  if (!stop) return () => {};
  let stopped = null;
  stop.addEventListener("click", () => {
    const live = [...followers.values()].filter((f) => f.turn.querySelector(".stop-form"));
    if (live.length) { stopped = live[live.length - 1]; stopped.stop(); }
  });
  return () => {
    const hide = ![...followers.values()].some((f) => f.turn.querySelector(".stop-form .stop:not(:disabled)"));
    const focused = hide && document.activeElement === stop;
    stop.hidden = hide;
    // A hidden button drops the focus: it goes to the answer that was stopped (no keyboard pops up).
    if (focused && stopped) stopped.turn.focus({ preventScroll: true });
  };
}

// Enter, Shift+Enter and Ctrl/Cmd+Enter in a message box, as the hint says.
function bindEnter(form, input) {
  const hint = form.querySelector("[data-hint]");
  if (hint) {
    const word = () => {
      hint.textContent = touchScreen() ? "Enter adds a line · Send sends" : "Enter sends · Shift+Enter adds a line";
    };
    word();
    window.matchMedia("(pointer: coarse)").addEventListener("change", word);
  }
  input.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.isComposing) return;
    const sends = event.ctrlKey || event.metaKey || (!event.shiftKey && !event.altKey && !touchScreen());
    if (!sends) return; // a new line
    event.preventDefault();
    form.requestSubmit();
  });
}

// What the page can tell before asking the server: an empty message (the count refuses a long one);
// attachments alone are a message.
function refusedHere(form, input, attached = 0) {
  if (input && !input.value.trim() && !attached) {
    showFormErrors(form, { input: ["This field is required."] });
    input.focus();
    return true;
  }
  const send = form.querySelector("button[type=submit]");
  return Boolean(send && send.dataset.over === "1");
}

// The words under the model picker follow the choice (the server renders the first choice's).
export function bindModelDescription(form) {
  const select = form.querySelector("[data-model-select]");
  const words = form.querySelector("[data-model-description]");
  if (!select || !words) return;
  select.addEventListener("change", () => {
    const option = select.selectedOptions[0];
    words.textContent = (option && option.dataset.description) || "";
  });
}

// A preset that names a model picks it in the model picker (the person may pick another after).
export function bindPresetModel(form) {
  const presets = form.querySelector("[data-preset-select]");
  const select = form.querySelector("[data-model-select]");
  if (!presets || !select) return;
  presets.addEventListener("change", () => {
    const model = presets.selectedOptions[0]?.dataset.model;
    if (!model || select.value === model) return;
    if (![...select.options].some((option) => option.value === model)) return;
    select.value = model;
    select.dispatchEvent(new Event("change", { bubbles: true }));
  });
}

export function bindComposer(form) {
  const input = form.querySelector("textarea[name=input]");
  form.noValidate = true; // the page words its own errors
  bindModelDescription(form);
  bindPresetModel(form);
  if (input) {
    bindCount(input);
    bindEnter(form, input);
  }
  form.addEventListener("input", (event) => {
    const field = event.target.name;
    if (field) clearFormErrors(form, field);
  });
  const syncStop = bindStopLatest(form);
  const attach = bindAttachments(form, {
    onError: (lines) => showFormErrors(form, { attachments: lines }),
    onChange: () => clearFormErrors(form, "attachments"),
  });
  const attached = () => (attach ? attach.count() : 0);
  const conversation = form.dataset.conversation;
  if (!conversation) {
    // The first prompt of a conversation posts normally and redirects: the message box there takes the focus.
    form.addEventListener("submit", (event) => {
      if (refusedHere(form, input, attached())) { event.preventDefault(); return; }
      try { sessionStorage.setItem(FOCUS_COMPOSER, "1"); } catch { /* no storage */ }
    });
    return syncStop;
  }
  const button = form.querySelector("button[type=submit]");
  const sending = (on) => {
    if (!button) return;
    button.dataset.sending = on ? "1" : "";
    button.disabled = on || button.dataset.over === "1";
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if ((button && button.dataset.sending === "1") || refusedHere(form, input, attached())) return;
    // A disabled button drops the focus: it goes back to the message box, where the next prompt is typed.
    const fromButton = document.activeElement === button;
    sending(true);
    if (fromButton && input) input.focus({ preventScroll: true });
    const data = new FormData(form);
    const body = {
      input: data.get("input") || "",
      model: data.get("model") || "",
      preset: data.get("preset") || "",
      conversation,
      client_request_id: data.get("client_request_id"),
      metadata: (data.get("metadata") || "").trim(),
    };
    // The box empties at once: what the person types next, while this one is on its way, is the next prompt.
    const clear = (text) => { if (input) { input.value = text; input.dispatchEvent(new Event("input")); } };
    const keep = () => { if (input) clear(input.value ? `${body.input}\n${input.value}` : body.input); };
    clear("");
    clearFormErrors(form);
    // With attachments the form goes as it is (multipart, the files in it); without, as JSON.
    const files = attached();
    if (files) { data.set("conversation", conversation); data.set("metadata", body.metadata); }
    try {
      const response = await fetch(form.dataset.api, {
        method: "POST",
        credentials: "same-origin",
        headers: files ? { "X-CSRFToken": csrfToken(), Accept: "application/json" }
          : { "Content-Type": "application/json", "X-CSRFToken": csrfToken(), Accept: "application/json" },
        body: files ? data : JSON.stringify(body),
      });
      if (response.status === 401 || response.status === 403) { location.reload(); return; }
      const result = await response.json().catch(() => ({}));
      if (!response.ok) { keep(); showFormErrors(form, result.errors, result.error); return; }
      form.querySelector("input[name=client_request_id]").value = newRequestId(); // the next prompt
      const presets = form.querySelector("[data-preset-select]");
      if (presets) presets.value = ""; // applied: the conversation holds its settings now
      if (attach) attach.clear();
      await addTurn(conversation, result.id, { own: true });
    } catch {
      // Offline or the server restarted: keep the same client_request_id, so sending again is safe.
      keep();
      showFormErrors(form, null, "Could not reach the server. Your message was kept; press Send to try again.");
    } finally {
      sending(false);
    }
  });
  return syncStop;
}

const adding = new Map(); // request id -> the promise of its turn being added

// Adds a turn (once, however many tabs or announcements ask) and follows it if it is live.
export function addTurn(conversation, requestId, { own = false } = {}) {
  if (document.getElementById(`turn-${requestId}`) || document.querySelector(`article.turn[data-request-id="${CSS.escape(requestId)}"]`)) {
    if (own) toBottom();
    return Promise.resolve();
  }
  if (!adding.has(requestId)) adding.set(requestId, insertTurn(conversation, requestId).finally(() => adding.delete(requestId)));
  return adding.get(requestId).then(() => { if (own) toBottom(); });
}

async function insertTurn(conversation, requestId) {
  const response = await fetch(url("turn", { conversation, request: requestId }), { credentials: "same-origin" });
  if (!response.ok) return;
  if (document.getElementById(`turn-${requestId}`)) return;
  const holder = document.createElement("div");
  holder.innerHTML = (await response.text()).trim();
  const turn = typeset(holder).firstElementChild;
  // Continue: the request is the rest of a turn on the page (named by its first part), which it
  // replaces where it stands, the answer so far in place above the part being written.
  const shown = turn.id ? document.getElementById(turn.id) : null;
  if (shown && shown.dataset.requestId === turn.dataset.requestId) return;
  if (shown) {
    followers.get(shown.dataset.requestId)?.close();
    keepPosition(shown, turn);
  } else {
    const turns = document.getElementById("turns");
    const empty = turns.querySelector(".empty-turns");
    if (empty) empty.remove();
    turns.appendChild(turn);
  }
  // An address that named the latest turn names the new latest one, so a reload opens there.
  if (location.hash.startsWith("#turn-")) history.replaceState(history.state, "", `#${turn.id}`);
  turn.querySelectorAll("textarea[data-max-chars]").forEach(bindCount);
  contentChanged();
  follow(turn);
}
