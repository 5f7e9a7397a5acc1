// main.js: the chat pages' entry point (<script type="module">, no build step).
//
// The pages are complete without JavaScript: every committed message is rendered on the server.
// This follows live turns (follower.js), keeps the newest text in view and the reader in place
// (scroll.js), sends prompts (composer.js), shows turns started in other tabs (conversation.js),
// typesets math (math.js), copies (copy.js), sends feedback on answers (feedback.js), answers the
// keyboard (keyboard.js: the skip link, shortcuts and their help) and runs the conversation sidebar (sidebar.js). Words and status sets come from the server (vocab.js).

import { bindBranches } from "./branches.js";
import { bindComposer, bindCount } from "./composer.js";
import { ConversationLive, bindActions, bindUndo } from "./conversation.js";
import { bindCopy } from "./copy.js";
import { bindFeedback } from "./feedback.js";
import { csrfToken } from "./csrf.js";
import { followAll, followers, hooks, liveHtml, liveTexts } from "./follower.js";
import { bindShortcuts, bindSkipLink, focusComposerOnLoad } from "./keyboard.js";
import { renderMarkdown } from "./markdown.js";
import { prepare as prepareMath, typeset } from "./math.js";
import { contentChanged, keepPosition, startScroll } from "./scroll.js";
import { bindSidebar } from "./sidebar.js";
import { badgeKey } from "./state.js";
import { loadUrls, url } from "./urls.js";
import { loadFromPage } from "./vocab.js";

// Approve / Deny on an MCP approval request: the answer is stored once, from any tab; the runner
// picks it up and the block's new state arrives as a patch, here and in every other tab.
function bindApprovals(root) {
  root.addEventListener("click", async (event) => {
    const button = event.target.closest(".approval button[data-approve]");
    if (!button) return;
    const box = button.closest(".approval");
    const turn = button.closest("article.turn");
    if (!box || !turn) return;
    box.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    const address = url("apiApprove", { request: turn.dataset.requestId, approval: box.dataset.approvalId });
    let why = null;
    try {
      const response = await fetch(address, {
        method: "POST", credentials: "same-origin",
        headers: { "X-CSRFToken": csrfToken(), "Content-Type": "application/json" },
        body: JSON.stringify({ approve: button.dataset.approve === "true" }),
      });
      if (!response.ok && response.status !== 409) {
        const said = await response.json().then((body) => body.error, () => "");
        why = `${response.status}${said ? `: ${said}` : ""}`;
      }
    } catch {
      why = "no connection";
    }
    if (why !== null) notSent(box, why);
  });
}

// An answer that did not reach the server says so where it was given, and can be given again.
function notSent(box, why) {
  box.querySelectorAll("button").forEach((b) => { b.disabled = false; });
  box.dataset.error = why;
  let note = box.querySelector(".approval-error");
  if (!note) {
    note = document.createElement("p");
    note.className = "approval-error";
    note.setAttribute("role", "alert");
    box.append(note);
  }
  note.textContent = `Your answer was not sent (${why}). Try again.`;
}

function start() {
  // Shows the controls that need this script: on the app's own markup only, never the host's.
  for (const root of document.querySelectorAll(".relay")) root.classList.add("relay-js");
  loadFromPage(document);
  loadUrls(document);
  const chat = document.querySelector(".chat[data-conversation]");
  const form = document.getElementById("composer");
  const syncStop = form ? bindComposer(form) : () => {};
  const changed = () => { contentChanged(); syncStop(); };
  hooks.rendered = changed;
  hooks.replaced = changed;
  hooks.keep = keepPosition;
  const sidebar = bindSidebar(document, { current: chat ? chat.dataset.conversation : "", liveHere: () => followers.size > 0 });
  hooks.answer = () => sidebar.answerChanged();
  if (chat) {
    startScroll({ composer: form, jumpButton: chat.querySelector("[data-jump]"), turns: document.getElementById("turns") });
    bindActions(chat, chat.dataset.conversation);
    chat.querySelectorAll(".edit-form textarea[data-max-chars]").forEach(bindCount);
    bindBranches(chat, new ConversationLive(chat.dataset.conversation));
  }
  focusComposerOnLoad(document, chat !== null);
  typeset(document);
  if (document.getElementById("turns")) prepareMath(); // a page of answers: math may come any moment
  followAll();
  syncStop();
  bindApprovals(document);
  bindCopy(document);
  bindFeedback(document);
  bindUndo(document);
  bindSkipLink(document);
  bindShortcuts(document);
  window.relayChat = { followers, liveTexts, liveHtml, renderMarkdown, typeset, badgeKey }; // for debugging and tests
}

start();
