// scroll.js: the page follows a growing answer while the reader is at the bottom.
//
// "At the bottom" is decided only by scroll events (content growing fires none), so a reader who
// scrolls up stops the following at once and gets a "Jump to latest" button; scrolling back down
// or pressing it follows again. The composer's height is published as --composer-h, which the
// stylesheet reserves under the last turn and above the jump button.

const NEAR_PX = 48;
let pinned = true;
let jump = null;

function distance() {
  const root = document.scrollingElement || document.documentElement;
  return root.scrollHeight - root.scrollTop - root.clientHeight;
}

export function isPinned() { return pinned; }

export function toBottom() {
  pinned = true;
  const root = document.scrollingElement || document.documentElement;
  root.scrollTop = root.scrollHeight;
  if (jump) jump.hidden = true;
}

// A finished turn's server rendering replaces the live one: a reader who is not following stays
// on the same words (the block they are reading keeps its place in the window).
export function keepPosition(old, fresh) {
  if (pinned) { old.replaceWith(fresh); return; }
  const anchor = Array.from(old.querySelectorAll("[data-block-id]")).find((el) => el.getBoundingClientRect().bottom > 0);
  const top = (anchor || old).getBoundingClientRect().top;
  old.replaceWith(fresh);
  const id = anchor && anchor.dataset.blockId;
  const again = id ? fresh.querySelector(`[data-block-id="${CSS.escape(id)}"]`) : fresh;
  if (again) window.scrollBy(0, again.getBoundingClientRect().top - top);
}

// After any content change: keep the newest text in view, or say there is more below.
export function contentChanged() {
  if (pinned) toBottom();
  else if (jump) jump.hidden = distance() <= NEAR_PX;
}

export function startScroll({ composer, jumpButton, turns }) {
  jump = jumpButton;
  if (composer) {
    const root = composer.closest(".relay") || document.documentElement;
    const publish = () => {
      root.style.setProperty("--composer-h", `${composer.offsetHeight}px`);
      if (pinned) toBottom(); // the composer grew (Advanced, Stop): the newest text stays above it
    };
    new ResizeObserver(publish).observe(composer);
    publish();
  }
  window.addEventListener("scroll", () => {
    pinned = distance() <= NEAR_PX;
    if (jump) jump.hidden = pinned;
  }, { passive: true });
  if (jump) jump.addEventListener("click", toBottom);
  // A conversation opens at its latest turn, unless the address names an earlier one.
  const target = location.hash ? document.getElementById(location.hash.slice(1)) : null;
  const last = turns ? turns.lastElementChild : null;
  if ("scrollRestoration" in history) history.scrollRestoration = "manual";
  if (!target || target === last) toBottom();
  else {
    target.scrollIntoView({ block: "start" });
    pinned = distance() <= NEAR_PX;
    // Browsers skip `autofocus` when the address names an element: the one named (a new share
    // link) takes the focus the server gave it here.
    if (target.hasAttribute("autofocus")) target.focus({ preventScroll: true });
  }
}
