// sidebar.js: the conversation sidebar (_sidebar.html), rendered by the server, complete without
// this script. Here: the filter narrows the list as one types (over the titles in the page: no
// request per key; the search page reads every message); where the page is narrow, the sidebar is a
// drawer the Conversations button opens: the focus moves into it and stays there, Escape, the
// backdrop or picking a conversation closes it, and the focus returns to the button.
//
// The live marks stay current without polling every page: this page's own conversation is live
// while one of its answers is followed here (follower.js says when one starts and ends); the list
// is fetched again (the sidebar address, one small request) when an answer here starts or ends,
// and, only while another listed conversation is live and the page is seen, every LIVE_REFRESH_MS.

import { FOCUS_COMPOSER } from "./composer.js";
import { url } from "./urls.js";

const LIVE_REFRESH_MS = 15000;
const SETTLE_MS = 400; // an answer's end is committed a moment after its last message
const FOCUSABLE = "a[href], button:not([disabled]), input:not([disabled]), [tabindex]:not([tabindex='-1'])";

function normal(text) {
  return text.normalize("NFKD").replace(/\p{M}/gu, "").toLowerCase().replace(/\s+/g, " ").trim();
}

export function bindSidebar(doc, { current = "", liveHere = () => false } = {}) {
  const bar = doc.querySelector("[data-sidebar]");
  if (!bar) return { answerChanged() {} };
  const root = bar.parentElement;
  const toggle = doc.querySelector("[data-sidebar-toggle]");
  const filter = bar.querySelector("[data-sidebar-filter]");
  const items = bar.querySelector("[data-sidebar-items]");
  const none = bar.querySelector("[data-sidebar-none]");
  const search = bar.querySelector("[data-sidebar-search]");
  const searchBase = search ? search.getAttribute("href") : "";
  const status = bar.querySelector("[data-sidebar-status]");
  let backdrop = null;

  // --- the filter ---
  function applyFilter({ speak = false } = {}) {
    const query = normal(filter.value);
    let shown = 0;
    let total = 0;
    for (const item of items.querySelectorAll("[data-sidebar-item]")) {
      total += 1;
      const title = item.querySelector("[data-sidebar-title]");
      const match = !query || normal(title ? title.textContent : "").includes(query);
      item.hidden = !match;
      if (match) shown += 1;
    }
    none.hidden = !(query && shown === 0);
    if (search) search.setAttribute("href", `${searchBase}?q=${encodeURIComponent(filter.value.trim())}`);
    if (speak) status.textContent = !query ? "" : shown === 0 ? "No conversation title matches."
      : `${shown} of ${total} conversation${total === 1 ? "" : "s"} match.`;
  }
  filter.addEventListener("input", () => applyFilter({ speak: true }));

  // --- the drawer ---
  const drawer = () => toggle !== null && getComputedStyle(toggle).display !== "none";
  const isOpen = () => bar.classList.contains("open");
  const rest = () => [...root.children].filter((el) => el !== bar && el !== backdrop);

  function open() {
    if (isOpen()) return;
    bar.classList.add("open");
    toggle.setAttribute("aria-expanded", "true");
    for (const el of rest()) el.inert = true; // the page behind the drawer is out of reach
    backdrop = doc.createElement("div");
    backdrop.className = "sidebar-backdrop";
    backdrop.dataset.sidebarBackdrop = "";
    backdrop.addEventListener("click", () => close());
    root.append(backdrop);
    const first = bar.querySelector(FOCUSABLE);
    if (first) first.focus();
  }

  function close({ refocus = true } = {}) {
    if (!isOpen()) return;
    bar.classList.remove("open");
    toggle.setAttribute("aria-expanded", "false");
    for (const el of rest()) el.inert = false;
    if (backdrop) backdrop.remove();
    backdrop = null;
    if (refocus) toggle.focus();
  }

  if (toggle) toggle.addEventListener("click", () => (isOpen() ? close() : open()));
  const closer = bar.querySelector("[data-sidebar-close]");
  if (closer) closer.addEventListener("click", () => close());
  bar.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      if (isOpen()) { event.preventDefault(); close(); }
      else if (event.target === filter && filter.value) { event.preventDefault(); filter.value = ""; applyFilter({ speak: true }); }
      return;
    }
    if (event.key !== "Tab" || !isOpen()) return;
    const inside = [...bar.querySelectorAll(FOCUSABLE)].filter((el) => el.getClientRects().length);
    if (!inside.length) return;
    const [first, last] = [inside[0], inside[inside.length - 1]];
    if (event.shiftKey && doc.activeElement === first) { event.preventDefault(); last.focus(); }
    else if (!event.shiftKey && doc.activeElement === last) { event.preventDefault(); first.focus(); }
  });
  bar.addEventListener("click", (event) => {
    const link = event.target.closest("a[href]");
    if (!link) return;
    if (link.matches("[data-sidebar-new]")) {
      try { sessionStorage.setItem(FOCUS_COMPOSER, "1"); } catch { /* no storage */ }
    }
    close({ refocus: false }); // picked: the page changes
  });
  // Wider again (a rotated tablet): the sidebar is beside the page, no drawer left open.
  window.addEventListener("resize", () => { if (isOpen() && !drawer()) close({ refocus: false }); });

  // --- the live marks ---
  function markHere() {
    const item = current && items.querySelector(`[data-sidebar-item][data-conversation="${current}"]`);
    if (!item) return;
    const live = liveHere();
    const marker = item.querySelector("[data-live-marker]");
    item.toggleAttribute("data-live", live);
    if (live && !marker) {
      const mark = doc.createElement("span");
      mark.className = "live-marker small";
      mark.dataset.liveMarker = "";
      mark.textContent = "answering";
      item.querySelector("a").append(mark);
    } else if (!live && marker) {
      marker.remove();
    }
  }

  let timer = null;
  let settle = null;
  function schedule() {
    clearTimeout(timer);
    timer = null;
    const elsewhere = [...items.querySelectorAll("[data-sidebar-item][data-live]")]
      .some((item) => item.dataset.conversation !== current);
    if (elsewhere && doc.visibilityState === "visible") timer = setTimeout(refresh, LIVE_REFRESH_MS);
  }

  async function refresh() {
    let html;
    try {
      const response = await fetch(`${url("sidebar")}?current=${encodeURIComponent(current)}`,
        { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      html = await response.text();
    } catch {
      schedule(); // offline: the marks stay as they were; asked again later, or at the next start or end
      return;
    }
    const focused = items.contains(doc.activeElement) && doc.activeElement.closest("[data-sidebar-item]");
    const again = focused ? focused.dataset.conversation : null;
    items.innerHTML = html;
    markHere();
    applyFilter();
    schedule();
    if (again) {
      const link = items.querySelector(`[data-sidebar-item][data-conversation="${again}"] a`);
      if (link) link.focus();
    }
  }

  doc.addEventListener("visibilitychange", () => {
    if (doc.visibilityState === "visible" && items.querySelector("[data-sidebar-item][data-live]")) refresh();
    else schedule();
  });
  applyFilter();
  schedule();

  return {
    // An answer of this page started or ended: its mark now, the others' from the server.
    answerChanged() {
      markHere();
      clearTimeout(settle);
      settle = setTimeout(refresh, SETTLE_MS);
    },
  };
}
