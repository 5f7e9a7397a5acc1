// vocab.js: the words and status sets the server hands over (turns.vocabulary(), rendered
// with json_script as #relay-vocabulary), so no list is spelled out twice. Pure: Node can
// configure() it directly.

export const vocab = {
  labels: {},
  terminalBadges: {},
  ended: new Set(),
  pending: "pending",
  callerTools: new Set(),
  doneStates: new Set(),
  visibleKinds: new Set(),
  form: { labels: {}, required: {}, controls: {} }, // the composer's words (web/form_words.py)
};

export function configure(data) {
  vocab.labels = data.labels;
  vocab.terminalBadges = data.terminal_badges;
  vocab.ended = new Set(data.ended);
  vocab.pending = data.pending;
  vocab.callerTools = new Set(data.caller_tools);
  vocab.doneStates = new Set(data.done_states);
  vocab.visibleKinds = new Set(data.visible_kinds);
  if (data.form) vocab.form = data.form;
}

export function loadFromPage(doc) {
  const script = doc.getElementById("relay-vocabulary");
  if (!script) throw new Error("the page has no #relay-vocabulary");
  configure(JSON.parse(script.textContent));
}
