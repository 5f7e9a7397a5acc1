// copy.js: the Copy buttons (an answer as Markdown, a code block, a tool's code or output) through
// the clipboard API; the button reads "Copied" for a moment and the page announces it.

import { announce, followers } from "./follower.js";

const SHOWN_MS = 1500;

function answerMarkdown(turn) {
  const follower = followers.get(turn.dataset.requestId);
  if (follower && follower.view) {
    return follower.view.blocks.filter((b) => b.kind === "text" && b.text).map((b) => b.text).join("\n\n");
  }
  const source = turn.querySelector("template[data-markdown]");
  return source ? source.content.textContent : "";
}

function copiedText(button) {
  if (button.dataset.copy === "answer") return answerMarkdown(button.closest("article.turn"));
  const pre = button.parentElement.querySelector("pre");
  return pre ? pre.textContent : "";
}

export function bindCopy(root) {
  root.addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-copy]");
    if (!button) return;
    let word = "Copied";
    try {
      await navigator.clipboard.writeText(copiedText(button));
    } catch {
      word = "Could not copy";
    }
    button.dataset.copied = word === "Copied" ? "ok" : "failed";
    announce(word);
    clearTimeout(button.copiedTimer);
    button.copiedTimer = setTimeout(() => { delete button.dataset.copied; }, SHOWN_MS);
  });
}
