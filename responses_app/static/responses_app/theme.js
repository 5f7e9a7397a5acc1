// theme.js: the reader's theme, "system", "light" or "dark", remembered in this browser
// (localStorage) and put on every app root as data-theme (theme.css reads it).
//
// A classic script, not a module: {% relay_assets %} puts it first inside the app's root, so it
// runs while the page is parsed, before any of the app's content is, and the root has its theme
// before the first paint: no flash of the other theme. It is a file from this origin, so the
// pages' Content-Security-Policy stays "script-src 'self'" (no inline script). Roots parsed later
// (an embedded answer further down) get theirs as they are inserted, still before a paint.
// Without JavaScript nothing sets data-theme: the page follows the system and the Theme select
// stays hidden.
(() => {
  const KEY = "relay-theme";
  const CHOICES = ["system", "light", "dark"];

  function stored() {
    try {
      const value = window.localStorage.getItem(KEY);
      return CHOICES.includes(value) ? value : "system";
    } catch {
      return "system"; // storage refused (privacy settings): follow the system
    }
  }

  function apply(choice) {
    for (const root of document.querySelectorAll(".relay")) root.dataset.theme = choice;
    for (const select of document.querySelectorAll("select[data-theme-choice]")) select.value = choice;
  }

  const choice = stored();
  apply(choice);
  const late = new MutationObserver((records) => {
    for (const record of records) {
      for (const node of record.addedNodes) {
        if (node.nodeType !== 1) continue;
        if (node.matches(".relay") && !node.dataset.theme) node.dataset.theme = stored();
        if (node.matches("select[data-theme-choice]")) node.value = stored();
      }
    }
  });
  late.observe(document.documentElement, { childList: true, subtree: true });

  document.addEventListener("DOMContentLoaded", () => {
    late.disconnect();
    apply(stored());
    document.addEventListener("change", (event) => {
      const select = event.target.closest("select[data-theme-choice]");
      if (!select || !CHOICES.includes(select.value)) return;
      try {
        if (select.value === "system") window.localStorage.removeItem(KEY);
        else window.localStorage.setItem(KEY, select.value);
      } catch {
        // not remembered, still applied to this page
      }
      apply(select.value);
    });
  });
  // Another tab of this browser chose: follow it here too.
  window.addEventListener("storage", (event) => {
    if (event.key === KEY || event.key === null) apply(stored());
  });
})();
