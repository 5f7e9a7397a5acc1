// keyboard.js: the skip link, the message box focused when a chat page opens, and the keyboard
// shortcuts with their help (_shortcuts.html, a modal <dialog>).
//
// Shortcuts use Alt+Shift and a letter (event.code, so any layout and a Mac's Option work), which
// desktop browsers and screen readers leave to pages, and so they work from a text field too. The help
// opens with Ctrl/Cmd+/ anywhere, or with ? outside a text field; ? is a single-character shortcut,
// so the help has a switch to turn it off (WCAG 2.1.4), remembered in localStorage.

import { FOCUS_COMPOSER, touchScreen } from "./composer.js";
import { announce } from "./follower.js";
import { url } from "./urls.js";

const QUESTION_MARK_OFF = "relay:shortcuts-question-mark-off";
const FOCUSABLE = "a[href], button:not([disabled]), input:not([disabled]), select, textarea, [tabindex]:not([tabindex='-1'])";

function composerInput() {
  return document.getElementById("composer-input");
}

function typing(target) {
  return target instanceof Element && target.closest("input, textarea, select, [contenteditable]:not([contenteditable=false])") !== null;
}

function stored(key) {
  try { return localStorage.getItem(key); } catch { return null; }
}

function store(key, value) {
  try {
    if (value === null) localStorage.removeItem(key);
    else localStorage.setItem(key, value);
  } catch { /* no storage */ }
}

const actions = {
  // New chat: the list page's message box starts a conversation.
  KeyN() {
    const input = composerInput();
    if (input && !input.form.dataset.conversation) { input.focus(); return; }
    try { sessionStorage.setItem(FOCUS_COMPOSER, "1"); } catch { /* no storage */ }
    location.assign(url("conversations"));
  },
  KeyM() {
    const input = composerInput();
    if (input) input.focus();
    else announce("There is no message box on this page.");
  },
  KeyS() {
    const stop = document.querySelector("#composer [data-stop-latest]");
    if (stop && !stop.hidden) stop.click();
    else announce("No answer is being written.");
  },
  KeyC() {
    const copies = document.querySelectorAll("#turns article.turn button[data-copy=answer]");
    if (copies.length) copies[copies.length - 1].click(); // copy.js copies it and says so
    else announce("There is no answer to copy yet.");
  },
};

function bindHelp(dialog) {
  let before = null;
  const toggle = dialog.querySelector("[data-question-mark]");
  if (toggle) {
    toggle.checked = stored(QUESTION_MARK_OFF) === null;
    toggle.addEventListener("change", () => store(QUESTION_MARK_OFF, toggle.checked ? null : "1"));
  }
  const enterHelp = dialog.querySelector("[data-enter-help]");
  const open = () => {
    if (dialog.open) return;
    before = document.activeElement;
    if (enterHelp) enterHelp.textContent = touchScreen() ? "A new line (this is a touch screen: Send sends)" : "Send";
    dialog.showModal();
    dialog.querySelector("[data-close-shortcuts]").focus();
  };
  dialog.querySelector("[data-close-shortcuts]").addEventListener("click", () => dialog.close());
  // The focus goes back where it was (the browser does it too; this covers a control that went away),
  // unless it has moved since: the close event comes a moment after the dialog closed.
  dialog.addEventListener("close", () => {
    const back = before && before.isConnected ? before : composerInput();
    const loose = !document.activeElement || document.activeElement === document.body || dialog.contains(document.activeElement);
    if (back && loose) back.focus({ preventScroll: true });
    before = null;
  });
  // The focus stays in the help: Tab from its last control goes to its first, and back.
  dialog.addEventListener("keydown", (event) => {
    if (event.key !== "Tab") return;
    const inside = [...dialog.querySelectorAll(FOCUSABLE)].filter((el) => el.getClientRects().length);
    if (!inside.length) return;
    const [first, last] = [inside[0], inside[inside.length - 1]];
    if (event.shiftKey && (document.activeElement === first || !dialog.contains(document.activeElement))) {
      event.preventDefault();
      last.focus();
    } else if (!event.shiftKey && (document.activeElement === last || !dialog.contains(document.activeElement))) {
      event.preventDefault();
      first.focus();
    }
  });
  // A click on the backdrop (outside the dialog's box) closes it, as Escape does.
  dialog.addEventListener("click", (event) => {
    if (event.target !== dialog) return;
    const r = dialog.getBoundingClientRect();
    const outside = event.clientX < r.left || event.clientX > r.right || event.clientY < r.top || event.clientY > r.bottom;
    if (outside) dialog.close();
  });
  return open;
}

export function bindShortcuts(doc) {
  const dialog = doc.getElementById("relay-shortcuts");
  if (!dialog) return;
  const openHelp = bindHelp(dialog);
  doc.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.isComposing || dialog.open) return;
    const command = event.ctrlKey || event.metaKey;
    if (command && !event.altKey && (event.key === "/" || event.code === "Slash")) {
      event.preventDefault();
      openHelp();
      return;
    }
    if (event.key === "?" && !command && !event.altKey && !typing(event.target) && stored(QUESTION_MARK_OFF) === null) {
      event.preventDefault();
      openHelp();
      return;
    }
    if (event.altKey && event.shiftKey && !command && Object.hasOwn(actions, event.code)) {
      event.preventDefault();
      actions[event.code]();
    }
  });
}

// The skip link moves the focus, not only the view (a textarea or the content's start).
export function bindSkipLink(doc) {
  for (const link of doc.querySelectorAll("a[data-skip-link]")) {
    link.addEventListener("click", (event) => {
      const target = doc.getElementById(link.getAttribute("href").slice(1));
      if (!target) return;
      event.preventDefault();
      target.focus();
    });
  }
}

// A chat page opens with the message box focused where a keyboard is likely (a fine pointer: on a
// phone a focused box opens the on-screen keyboard), and always after a prompt sent from the list
// or the New chat shortcut.
export function focusComposerOnLoad(doc, chat) {
  let asked = false;
  try {
    asked = sessionStorage.getItem(FOCUS_COMPOSER) !== null;
    sessionStorage.removeItem(FOCUS_COMPOSER);
  } catch { /* no storage */ }
  const input = doc.getElementById("composer-input");
  if (!input) return;
  const named = location.hash.length > 1 && doc.getElementById(decodeURIComponent(location.hash.slice(1)));
  // What the server gave the focus (autofocus: a refused send's reason, a new share link) keeps it;
  // one the address names was scrolled to already (scroll.js).
  const given = doc.querySelector("[autofocus]");
  if (given && given !== input) {
    given.focus({ preventScroll: given === named });
    return;
  }
  if (!asked && !(chat && window.matchMedia("(pointer: fine)").matches)) return;
  input.focus({ preventScroll: true });
  // An address naming a turn (#turn-…) has the browser focus that turn once the page has loaded:
  // the message box takes the focus back then, unless the reader has moved it meanwhile.
  if (!named) return;
  const again = () => {
    if ([named, input, doc.body].includes(doc.activeElement)) input.focus({ preventScroll: true });
  };
  if (doc.readyState === "complete") requestAnimationFrame(again);
  else window.addEventListener("load", () => requestAnimationFrame(again), { once: true });
}
