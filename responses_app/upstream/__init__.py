"""How bytes arrive: http (a Responses API over HTTP, streamed as SSE), websocket (WebSocket mode)
and lane (one response's frames on a shared socket), embedded (the built-in simulator reached
in-process), credentials (the keys this server holds, masked out of every message) and probe
(what a provider can do, asked live).

May import the settings (conf, providers), the core (streaming) and the simulator; never the models,
the relay or an edge: the relay drives these clients."""
