// The first retry of the browser's livesocket.js after each kind of close, for
// tests/web/test_livesocket.py. Usage: node livesocket_retry.mjs > RESULT.json
// A fake WebSocket and timers: each case opens a socket (or not), closes it with a code, and
// reports the delay the socket asked setTimeout for before connecting again.
const base = new URL("../../responses_app/static/responses_app/chat/", import.meta.url);

class FakeSocket {
  static CONNECTING = 0;
  static OPEN = 1;
  static last = null;
  constructor() { this.readyState = FakeSocket.CONNECTING; FakeSocket.last = this; }
  close() {}
  send() {}
}
globalThis.WebSocket = FakeSocket;
const delays = [];
globalThis.setTimeout = (fn, ms) => { delays.push(ms); return delays.length; };
globalThis.clearTimeout = () => {};
globalThis.setInterval = () => 0;
globalThis.clearInterval = () => {};
const { LiveSocket } = await import(new URL("livesocket.js", base));

function firstRetry(code, opened) {
  delays.length = 0;
  const socket = new LiveSocket(() => "ws://test/", { message: () => {} });
  const ws = FakeSocket.last;
  if (opened) { ws.readyState = FakeSocket.OPEN; ws.onopen(); }
  ws.onclose({ code });
  socket.done = true;
  return delays[0];
}

const results = {};
for (const [name, code, opened] of [["restart", 1012, true], ["going away", 1001, true],
  ["dropped", 1006, true], ["server error", 1011, true], ["restart, never opened", 1012, false]]) {
  results[name] = Array.from({ length: 50 }, () => firstRetry(code, opened));
}
process.stdout.write(JSON.stringify(results));
