// composer.js: sends a prompt without a reload, adds its turn and moves focus to it; also adds
// turns that other tabs started (conversation.js). Without JavaScript the form posts and redirects.
//
// Every prompt box counts its characters as the server does (code points) against the limit the
// page states (data-max-chars: forms.MAX_INPUT_CHARS), and refuses to send more: nothing is cut.
// While an answer streams, the composer's Stop stops the newest one, where the reader already is.

import { csrfToken } from "./csrf.js";
import { esc } from "./markdown.js";
import { announce, follow, followers } from "./follower.js";
import { contentChanged, toBottom } from "./scroll.js";
import { url } from "./urls.js";

export function newRequestId() {
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

// The count under a prompt box, and the box refusing to be sent while it is over the limit.
export function bindCount(input) {
  const max = Number(input.dataset.maxChars || 0);
  const count = input.form && input.form.querySelector("[data-count]");
  if (!max || !count) return;
  const number = new Intl.NumberFormat();
  let over = false;
  const update = () => {
    const n = [...input.value].length;
    const now = n > max;
    count.textContent = n ? `${number.format(n)} / ${number.format(max)}` : "";
    count.classList.toggle("over", now);
    const message = now ? `Too long to send: ${number.format(n)} characters, at most ${number.format(max)}.` : "";
    input.setCustomValidity(message);
    if (now) count.textContent += " · too long";
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

export function bindComposer(form) {
  const input = form.querySelector("textarea[name=input]");
  if (input) {
    bindCount(input);
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
  }
  const syncStop = bindStopLatest(form);
  const conversation = form.dataset.conversation;
  if (!conversation) {
    // The first prompt of a conversation posts normally and redirects: its turn takes the focus there.
    form.addEventListener("submit", () => { try { sessionStorage.setItem(FOCUS_NEW_TURN, "1"); } catch { /* no storage */ } });
    return syncStop;
  }
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
      if (input) { input.value = ""; input.dispatchEvent(new Event("input")); }
      await addTurn(conversation, result.id, { own: true });
      const turn = document.getElementById(`turn-${result.id}`);
      if (turn) turn.focus({ preventScroll: true });
    } catch {
      // Offline or the server restarted: keep the same client_request_id, so sending again is safe.
      showFormErrors(form, null, "Could not reach the server. Your message was kept; press Send to try again.");
    } finally {
      sending = false;
      if (button) button.disabled = false;
    }
  });
  return syncStop;
}

export const FOCUS_NEW_TURN = "relay:focus-new-turn";
const adding = new Map(); // request id -> the promise of its turn being added

// Adds a turn (once, however many tabs or announcements ask) and follows it if it is live.
export function addTurn(conversation, requestId, { own = false } = {}) {
  if (document.getElementById(`turn-${requestId}`)) {
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
  const turn = holder.firstElementChild;
  const turns = document.getElementById("turns");
  const empty = turns.querySelector(".empty-turns");
  if (empty) empty.remove();
  turns.appendChild(turn);
  // An address that named the latest turn names the new latest one, so a reload opens there.
  if (location.hash.startsWith("#turn-")) history.replaceState(history.state, "", `#turn-${requestId}`);
  turn.querySelectorAll("textarea[data-max-chars]").forEach(bindCount);
  contentChanged();
  follow(turn);
}
