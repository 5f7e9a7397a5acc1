// copy.js: the Copy buttons (an answer as Markdown, a code block, a tool's code or output, a share
// link) through the clipboard API; the button reads "Copied" for a moment and the page announces it
// (a share link in its own status, beside it).

import { announce, followers } from "./follower.js";

const SHOWN_MS = 1500;

function answerMarkdown(turn) {
  const follower = followers.get(turn.dataset.requestId);
  if (follower && follower.view) {
    // A continuation being written goes on from the answer so far (Continue), word for word.
    const earlier = turn.querySelector("template[data-markdown-earlier]")?.content.textContent || "";
    return earlier + follower.view.blocks.filter((b) => b.kind === "text" && b.text).map((b) => b.text).join("\n\n");
  }
  const source = turn.querySelector("template[data-markdown]");
  return source ? source.content.textContent : "";
}

function copiedText(button) {
  if (button.dataset.copy === "answer") return answerMarkdown(button.closest("article.turn"));
  if (button.dataset.copy === "link") return button.closest("[data-share]").querySelector(".share-url").value;
  const pre = button.parentElement.querySelector("pre");
  return pre ? pre.textContent : "";
}

// No clipboard API (a page over plain HTTP from another host): a share link is selected and copied
// the old way; if even that fails it stays selected, for the keyboard's own copy.
function fallbackCopy(button) {
  const field = button.dataset.copy === "link" && button.closest("[data-share]").querySelector(".share-url");
  if (!field) return "Could not copy";
  field.focus();
  field.select();
  let copied = false;
  try { copied = document.execCommand("copy"); } catch { /* refused */ }
  if (!copied) return "Selected: press Ctrl+C (⌘C) to copy";
  button.focus();
  return "Copied";
}

export function bindCopy(root) {
  root.addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-copy]");
    if (!button) return;
    let word = "Copied";
    try {
      await navigator.clipboard.writeText(copiedText(button));
    } catch {
      word = fallbackCopy(button);
    }
    button.dataset.copied = word === "Copied" ? "ok" : "failed";
    const status = button.parentElement.querySelector("[data-copy-status]"); // a share link's own status
    if (status) status.textContent = word;
    else announce(word);
    clearTimeout(button.copiedTimer);
    button.copiedTimer = setTimeout(() => { delete button.dataset.copied; }, SHOWN_MS);
  });
}
