// livesocket.js across a server's {"type":"moving"}, for tests/web/test_livesocket.py.
// Usage: node livesocket_move.mjs > RESULT.json. A fake WebSocket and timers: each case drives the
// sockets' events by hand and reports which socket the page reads, which ones were closed, and
// which messages reached the page.
const base = new URL("../../responses_app/static/responses_app/chat/", import.meta.url);

class FakeSocket {
  static CONNECTING = 0;
  static OPEN = 1;
  static CLOSED = 3;
  static made = [];
  constructor(url) {
    this.url = url;
    this.readyState = FakeSocket.CONNECTING;
    this.closedWith = null;
    this.sent = [];
    this.index = FakeSocket.made.length;
    FakeSocket.made.push(this);
  }
  open() { this.readyState = FakeSocket.OPEN; this.onopen(); }
  say(data) { this.onmessage({ data }); }
  close(code) { this.closedWith = code ?? 1005; this.readyState = FakeSocket.CLOSED; }
  drop(code) { this.readyState = FakeSocket.CLOSED; this.onclose({ code }); }
  send(data) { this.sent.push(data); }
}
globalThis.WebSocket = FakeSocket;
let now = 0;
Date.now = () => now;
const timers = [];
globalThis.setTimeout = (fn, ms) => { timers.push({ fn, at: now + ms }); return timers.length; };
globalThis.clearTimeout = () => {};
let beat = null;
globalThis.setInterval = (fn) => { beat = fn; return 1; };
globalThis.clearInterval = () => {};
const { LiveSocket } = await import(new URL("livesocket.js", base));
const MOVING = '{"type":"moving"}';

function start() {
  FakeSocket.made = [];
  timers.length = 0;
  const got = [];
  const states = [];
  let n = 0;
  const socket = new LiveSocket(() => `ws://test/${n++}`, { message: (d) => got.push(d), state: (s) => states.push(s) });
  const [first] = FakeSocket.made;
  first.open();
  first.say("a");
  return { socket, got, states, first };
}

function report({ socket, got, states }) {
  const made = FakeSocket.made;
  const result = {
    reads: made.indexOf(socket.ws),
    made: made.length,
    closed: made.map((s) => s.closedWith),
    got,
    live: socket.live,
    states,
    retries: timers.length,
  };
  socket.close();
  return result;
}

const results = {};

// The new socket speaks: it is read from then on, the old one closed (1000); until then the old one
// was read.
{
  const t = start();
  t.first.say(MOVING);
  const next = FakeSocket.made[1];
  t.first.say("b"); // still read while the new one connects
  next.open();
  t.first.say("c");
  next.say("snapshot");
  t.first.say("late"); // the old one, closing: not read
  next.say("d");
  results.moved = report(t);
}

// A second `moving` while one move is under way opens nothing more.
{
  const t = start();
  t.first.say(MOVING);
  t.first.say(MOVING);
  results.once = report(t);
}

// The new socket fails: dropped, the old one goes on, nothing is retried.
{
  const t = start();
  t.first.say(MOVING);
  FakeSocket.made[1].drop(1006);
  t.first.say("b");
  results.failed = report(t);
}

// The old socket closes (1012) before the new one spoke: the new one is the socket, no retry.
{
  const t = start();
  t.first.say(MOVING);
  const next = FakeSocket.made[1];
  next.open();
  t.first.drop(1012);
  next.say("snapshot");
  results.old_closed_first = report(t);
}

// ... and before the new one even opened: it is adopted, and goes live when it opens.
{
  const t = start();
  t.first.say(MOVING);
  const next = FakeSocket.made[1];
  t.first.drop(1012);
  const whileConnecting = t.socket.live;
  next.open();
  next.say("snapshot");
  results.adopted_connecting = { ...report(t), whileConnecting };
}

// A new socket that stays silent past CONNECT_MS is dropped by the heartbeat; the old one goes on.
{
  const t = start();
  t.first.say(MOVING);
  FakeSocket.made[1].open();
  now += 6000;
  t.first.say("b");
  beat();
  results.silent = report(t);
}
process.stdout.write(JSON.stringify(results));
