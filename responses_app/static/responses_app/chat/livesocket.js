// livesocket.js: a websocket that tells honestly, within seconds, whether it is connected.
//
// It reconnects with backoff after a close. A heartbeat finds the sockets that look open and are
// dead (a lost network, a laptop that slept, a proxy that dropped the connection silently): after
// QUIET_MS without a message it sends {"type":"ping"}, which both of the app's sockets answer with
// {"type":"pong"}; nothing within ANSWER_MS of it is a dead socket, replaced at once. A socket
// that delivers messages is never pinged. `state(live)` tells every change, `message(data)` each
// message; `closed(event, opened)` may return false to stop reconnecting (4403: not allowed).
// A socket that only needs to catch up sooner or later (the conversation's) pings less often.
//
// A server about to stop asks first, {"type":"moving"} (viewers/guard.py `move_sockets`): a new
// socket is opened beside this one (it reaches another process: the stopping one no longer
// listens), and takes over at its first message, which both of the app's sockets send at once
// (a snapshot, the turns); the old one is closed then. Until that, the old one goes on, so a
// deploy pauses nothing. A new socket that fails or stays silent is dropped: the old one's close
// (1012) then reconnects as below.

export const QUIET_MS = 1000;
export const ANSWER_MS = 2000; // with the tick: a dead socket is told within about 3.5 s
const CONNECT_MS = 5000; // a handshake that hangs (a half-open network) is given up and tried again
const TICK_MS = 250;
// A server that stops (a deploy: 1012 "service restart", or 1001 "going away") closes its open
// sockets on purpose, a few at a time (project/serve.py), with the other processes ready: the
// first try goes at once, spread over this much, not after the backoff's 300-500 ms.
const SOON_MS = 100;
const STOPPING = new Set([1001, 1012]);
const MOVING = '{"type":"moving"}';

export class LiveSocket {
  constructor(address, { message, state = () => {}, closed = () => true, quietMs = QUIET_MS, answerMs = ANSWER_MS }) {
    this.address = address; // a function: the URL may change between connections
    this.onMessage = message;
    this.onState = state;
    this.onClosed = closed;
    this.quietMs = quietMs;
    this.answerMs = answerMs;
    this.ws = null;
    this.next = null; // the socket opened to move to, until its first message
    this.attempt = 0;
    this.opened = false; // ever opened
    this.done = false;
    this.live = null;
    this.lastMessageAt = Date.now();
    this.pingAt = 0;
    this.timer = setInterval(() => this.beat(), TICK_MS);
    this.connect();
  }

  setLive(live) {
    if (this.live === live) return;
    this.live = live;
    this.onState(live);
  }

  connect() {
    if (this.done) return;
    clearTimeout(this.retryTimer);
    const ws = this.open();
    if (!ws) {
      this.retry();
      return;
    }
    this.ws = ws;
    this.connectAt = Date.now();
  }

  open() {
    let ws;
    try {
      ws = new WebSocket(this.address());
    } catch {
      return null;
    }
    let openedThis = false;
    ws.onopen = () => {
      if (ws === this.next) openedThis = true;
      if (ws !== this.ws) return;
      openedThis = true;
      this.connected();
    };
    ws.onmessage = (event) => {
      if (ws === this.next) this.takeOver(ws);
      if (ws !== this.ws) return;
      this.lastMessageAt = Date.now();
      this.pingAt = 0;
      if (event.data === MOVING) this.move();
      else this.onMessage(event.data);
    };
    ws.onclose = (event) => {
      if (ws === this.next) { this.next = null; return; } // the old socket goes on
      if (ws !== this.ws) return;
      this.ws = null;
      if (this.done) return;
      const goOn = this.onClosed(event, openedThis) !== false;
      if (goOn && this.next) {
        this.adoptNext(); // closed before the new one spoke: it is the socket now
        return;
      }
      this.dropNext();
      this.setLive(false);
      if (goOn) this.retry(openedThis && STOPPING.has(event.code));
    };
    return ws;
  }

  // The server is stopping: a socket elsewhere, beside this one until it speaks.
  move() {
    if (this.done || this.next) return;
    this.next = this.open();
    this.nextAt = Date.now();
  }

  // The socket is open and speaking: counted as live, its backoff and heartbeat start again.
  connected() {
    this.opened = true;
    this.attempt = 0;
    this.lastMessageAt = Date.now();
    this.pingAt = 0;
    this.setLive(true);
  }

  takeOver(ws) {
    const old = this.ws;
    this.next = null;
    this.ws = ws;
    this.connected();
    if (old) { try { old.close(1000); } catch { /* already closed */ } }
  }

  adoptNext() {
    const next = this.next;
    this.next = null;
    this.ws = next;
    this.connectAt = this.nextAt;
    if (next.readyState !== WebSocket.OPEN) {
      this.setLive(false); // live again when it opens
      return;
    }
    this.connected();
  }

  dropNext() {
    const next = this.next;
    this.next = null;
    if (next) { try { next.close(); } catch { /* never opened */ } }
  }

  retry(soon = false) {
    if (this.done) return;
    clearTimeout(this.retryTimer);
    const delay = soon ? Math.random() * SOON_MS : Math.min(15000, 400 * 2 ** this.attempt) * (0.75 + Math.random() * 0.5);
    this.attempt += 1;
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }

  // A new connection now (the network is back, or this one is dead).
  reconnectNow() {
    if (this.done) return;
    this.dropNext();
    const old = this.ws;
    this.ws = null;
    if (old) { try { old.close(); } catch { /* already closed */ } }
    this.setLive(false);
    this.attempt = Math.max(this.attempt, 1);
    this.connect();
  }

  // Ping now (the tab became visible again): the heartbeat then tells within ANSWER_MS.
  probe() {
    if (this.done) return;
    if (!this.ws) { this.reconnectNow(); return; }
    if (this.ws.readyState === WebSocket.OPEN && !this.pingAt) this.ping();
  }

  ping() {
    this.pingAt = Date.now();
    try { this.ws.send('{"type":"ping"}'); } catch { this.reconnectNow(); }
  }

  beat() {
    if (this.done || !this.ws) return;
    const now = Date.now();
    if (this.next && now - this.nextAt > CONNECT_MS) this.dropNext(); // silent: the old one's close decides
    if (this.ws.readyState === WebSocket.CONNECTING && now - this.connectAt > CONNECT_MS) {
      const stuck = this.ws;
      this.ws = null;
      try { stuck.close(); } catch { /* never opened */ }
      this.retry();
      return;
    }
    if (this.ws.readyState !== WebSocket.OPEN) return;
    if (this.pingAt && now - this.pingAt > this.answerMs) this.reconnectNow();
    else if (!this.pingAt && now - this.lastMessageAt > this.quietMs) this.ping();
  }

  send(message) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify(message));
      return true;
    }
    return false;
  }

  close() {
    this.done = true;
    clearTimeout(this.retryTimer);
    clearInterval(this.timer);
    this.dropNext();
    const ws = this.ws;
    this.ws = null;
    if (ws) { try { ws.close(1000); } catch { /* already closed */ } }
  }
}
