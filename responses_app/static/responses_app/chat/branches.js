// branches.js: the versions of a turn (`‹ 2/3 ›`) and the branch every tab shows.
//
// Regenerate and Edit add a version of a turn; the conversation shows one branch, the same in
// every tab. The conversation socket says which: {"type":"branch","ids":[...]} when it changes
// (a version picked anywhere, Regenerate, Edit, a new turn) and {"type":"turns","ids":[...]} on
// connect. The page keeps its turns in step: the turns after the first one that differs are taken
// out (their followers closed) and the branch's are added in order, each from its server
// rendering (composer.js's addTurn, which follows a live one). A turn with continuations (Continue)
// is one turn, named by its first part. The `‹ ›` buttons are forms sent
// with fetch; without this script they post and the page reloads at the turn.

import { addTurn } from "./composer.js";
import { csrfToken } from "./csrf.js";
import { followers } from "./follower.js";
import { contentChanged } from "./scroll.js";

let queue = Promise.resolve(); // branch changes are applied one after another, in the order they came

function shownTurns() {
  const box = document.getElementById("turns");
  return box ? Array.from(box.querySelectorAll(":scope > article.turn")) : [];
}

async function showBranch(conversation, ids) {
  const shown = shownTurns();
  let same = 0;
  // A turn is named by its first part (data-turn-id); a continued one is followed through its last.
  while (same < shown.length && same < ids.length && shown[same].dataset.turnId === ids[same]) same += 1;
  for (const turn of shown.slice(same)) {
    const follower = followers.get(turn.dataset.requestId);
    if (follower) follower.close();
    turn.remove();
  }
  for (const id of ids.slice(same)) await addTurn(conversation, id);
  if (shown.length > same) contentChanged();
}

// Applies a branch after the ones before it; resolves once its turns are in the page.
export function showBranchSoon(conversation, ids) {
  queue = queue.then(() => showBranch(conversation, ids)).catch(() => {});
  return queue;
}

async function pick(form, conversation) {
  const turn = form.closest("article.turn");
  const place = shownTurns().indexOf(turn);
  const step = form.querySelector("button[data-step]")?.dataset.step;
  const response = await fetch(form.action, {
    method: "POST", credentials: "same-origin", body: new FormData(form),
    headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
  });
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  const { ids } = await response.json();
  await showBranchSoon(conversation, ids);
  // The same control on the version now shown, so the keyboard can go on stepping through them.
  const shown = document.getElementById(`turn-${ids[place]}`);
  const buttons = shown ? Array.from(shown.querySelectorAll(".version-step")) : [];
  const next = buttons.find((b) => b.dataset.step === step && !b.disabled) || buttons.find((b) => !b.disabled);
  if (next) next.focus();
}

// `live` is the page's ConversationLive: its branch messages are applied here, the rest as before.
export function bindBranches(chat, live) {
  const conversation = chat.dataset.conversation;
  // A version opened for this page view (`?version=`, a search result) stays as it is: the saved
  // branch and its new turns are not followed here, and its arrows post and reload (they save one).
  const opened = "version" in chat.dataset;
  const handle = live.handle.bind(live);
  live.handle = (message) => {
    if (opened && ["branch", "turns", "turn"].includes(message.type)) return undefined;
    if ((message.type === "branch" || message.type === "turns") && Array.isArray(message.ids)) {
      return showBranchSoon(conversation, message.ids);
    }
    return handle(message);
  };
  chat.addEventListener("submit", (event) => {
    const form = event.target;
    if (!form.matches(".version-form") || opened) return;
    event.preventDefault();
    if (!form.getAttribute("action")) return;
    form.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    pick(form, conversation).catch(() => form.submit()); // the plain post says what went wrong
  });
}
