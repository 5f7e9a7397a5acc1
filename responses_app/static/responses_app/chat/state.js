// state.js: a live turn's state, told from its view as turns.badge_key tells it, and worded
// with the server's words (vocab.js). Pure: no DOM. tests/web/test_render_parity.py holds the two
// to the same badge.

import { vocab } from "./vocab.js";

export function badgeKey(status, view) {
  if (vocab.terminalBadges[status]) return vocab.terminalBadges[status];
  if (status === vocab.pending) return "queued";
  const meta = (view && view.meta) || {};
  if (vocab.terminalBadges[meta.status]) return vocab.terminalBadges[meta.status];
  if (meta.retry) return "retrying";
  if (meta.status === "queued") return "queued";
  if (meta.status === "waiting_for_approval") return "waiting_approval";
  const blocks = (view && view.blocks) || [];
  if (blocks.some((b) => b.kind === "tool" && b.state === "searching")) return "searching";
  const last = blocks[blocks.length - 1];
  if (last && last.kind === "tool" && vocab.callerTools.has(last.tool) && vocab.doneStates.has(last.state)) {
    return "waiting_tool";
  }
  if (meta.activity === "tool" && last && last.kind === "tool" && !vocab.doneStates.has(last.state)) {
    return "working"; // no text for a while, but a tool runs and events flow
  }
  const visible = blocks.some((b) => vocab.visibleKinds.has(b.kind) && b.text);
  if (!visible || (last && last.kind === "reasoning")) return "thinking";
  return "in_progress";
}

export function badgeIsFinal(key) {
  return Object.values(vocab.terminalBadges).includes(key);
}

// The badge's words: "Retrying ({status}, {attempt} of {of})…" filled from the view's meta.retry.
export function badgeText(key, view) {
  const retry = (view && view.meta && view.meta.retry) || {};
  return (vocab.labels[key] || key).replace(/\{(\w+)\}/g, (_, name) => String(retry[name] ?? "?"));
}
