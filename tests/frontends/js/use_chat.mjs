// What `useChat` does, without React: the `ai` package's own AbstractChat and DefaultChatTransport
// (its fetch, its UI message stream parser and schema, its resume and approval logic) over an
// in-memory chat state, against the relay's AI SDK routes. One scenario per run:
//   node use_chat.mjs '{"base": "...", "token": "...", "mode": "...", "chatId": "...", "model": "..."}'
// prints one JSON object: the chat's messages and statuses at each stage.
import { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";

const config = JSON.parse(process.argv[2]);
const api = `${config.base}/api/aisdk/chat`;
const headers = { Authorization: `Bearer ${config.token}` };
// A paced answer of 700 tokens: a few seconds, so there is a middle to act in.
const body = { model: config.model, metadata: config.pace ? { "sim.tokens_per_s": String(config.pace), "sim.tokens": "700" } : {} };

class MemoryState {
  constructor(messages) {
    this.messages = messages;
    this.status = "ready";
    this.error = undefined;
  }
  pushMessage = (message) => { this.messages = [...this.messages, message]; };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (index, message) => {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  };
  snapshot = (thing) => structuredClone(thing);
}

class Chat extends AbstractChat {
  constructor({ messages = [], ...init }) {
    super({ ...init, state: new MemoryState(messages) });
  }
}

// A connection that drops after `bytes` of the answer: what a flaky network does to useChat.
function droppingFetch(bytes) {
  return async (url, init) => {
    const response = await fetch(url, init);
    if (init?.method !== "POST" || !response.body) return response;
    const reader = response.body.getReader();
    let seen = 0;
    const cut = new ReadableStream({
      async pull(controller) {
        const { value, done } = await reader.read();
        if (done) return controller.close();
        seen += value.length;
        if (seen > bytes) {
          await reader.cancel();
          return controller.error(new TypeError("network error: connection dropped"));
        }
        controller.enqueue(value);
      },
    });
    return new Response(cut, { status: response.status, headers: response.headers });
  };
}

function transport(fetchImpl) {
  return new DefaultChatTransport({ api, headers, body, fetch: fetchImpl });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(predicate, what, timeoutMs = 30000) {
  const start = Date.now();
  while (!predicate()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const assistantText = (chat) => {
  const last = chat.messages.at(-1);
  return last?.role === "assistant" ? last.parts.filter((p) => p.type === "text").map((p) => p.text).join("") : "";
};
const view = (chat) => ({ status: chat.status, error: chat.error?.message ?? null, messages: structuredClone(chat.messages) });
const out = {};
const errors = [];
const onError = (error) => errors.push(String(error?.message ?? error));

if (config.mode === "text") {
  const chat = new Chat({ id: config.chatId, transport: transport(), onError });
  await chat.sendMessage({ text: "Say hello" });
  out.final = view(chat);
} else if (config.mode === "drop") {
  const chat = new Chat({ id: config.chatId, transport: transport(droppingFetch(config.dropAfter ?? 2000)), onError });
  await chat.sendMessage({ text: "Tell me a long story" });
  out.dropped = view(chat);
  await chat.resumeStream();  // the AI SDK's own resume after a disconnect: GET {api}/{chatId}/stream
  out.final = view(chat);
} else if (config.mode === "reload") {
  const first = new Chat({ id: config.chatId, transport: transport(), onError });
  const sending = first.sendMessage({ text: "Tell me a long story" });
  await until(() => assistantText(first).length > 40, "some text");
  await first.stop();  // the tab goes away mid-answer: its stream closes (closing is not Stop)
  await sending;
  out.before = view(first);
  // The page again, as a server that kept the user's message renders it: useChat({resume: true}).
  const reloaded = new Chat({ id: config.chatId, transport: transport(), onError, messages: [first.messages[0]] });
  await reloaded.resumeStream();
  out.final = view(reloaded);
} else if (config.mode === "stop") {
  const chat = new Chat({ id: config.chatId, transport: transport(), onError });
  const sending = chat.sendMessage({ text: "Tell me a long story" });
  await until(() => assistantText(chat).length > 40, "some text");
  const stop = await fetch(`${api}/${encodeURIComponent(config.chatId)}/stream`, { method: "DELETE", headers });
  out.stopStatus = stop.status;
  await sending;  // the stream ends with the request: `abort`, then [DONE]
  out.final = view(chat);
} else if (config.mode === "approval") {
  const chat = new Chat({
    id: config.chatId, transport: transport(), onError,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  await chat.sendMessage({ text: "Roll 2d4+1" });
  out.asked = view(chat);
  const part = chat.messages.at(-1).parts.find((p) => p.state === "approval-requested");
  await chat.addToolApprovalResponse({ id: part.approval.id, approved: true });
  await until(() => chat.status === "ready" && assistantText(chat).length > 0, "the continuation");
  out.final = view(chat);
} else if (config.mode === "continue") {
  // An answer cut short (sim-incomplete), then `sendMessage()` with no message: the AI SDK's own
  // way to go on with the assistant message that is last.
  const chat = new Chat({ id: config.chatId, transport: transport(), onError });
  await chat.sendMessage({ text: "Tell me about rivers" });
  out.first = view(chat);
  await chat.sendMessage();
  out.final = view(chat);
} else if (config.mode === "continue-stopped") {
  // Stop mid-answer (the DELETE route), then go on with it.
  const chat = new Chat({ id: config.chatId, transport: transport(), onError });
  const sending = chat.sendMessage({ text: "Tell me a long story" });
  await until(() => assistantText(chat).length > 40, "some text");
  out.stopStatus = (await fetch(`${api}/${encodeURIComponent(config.chatId)}/stream`, { method: "DELETE", headers })).status;
  await sending;
  out.first = view(chat);
  await chat.sendMessage();
  out.final = view(chat);
} else if (config.mode === "continue-reload") {
  // A reload while the continuation streams: the resumed message is the whole answer.
  const chat = new Chat({ id: config.chatId, transport: transport(), onError });
  await chat.sendMessage({ text: "Tell me about rivers" });
  out.first = view(chat);
  const before = assistantText(chat).length;
  const sending = chat.sendMessage();
  await until(() => assistantText(chat).length > before + 10, "some of the continuation");
  await chat.stop();
  await sending;
  out.before = view(chat);
  const reloaded = new Chat({ id: config.chatId, transport: transport(), onError, messages: [chat.messages[0]] });
  await reloaded.resumeStream();
  out.final = view(reloaded);
} else if (config.mode === "idle") {
  const chat = new Chat({ id: config.chatId, transport: transport(), onError });
  await chat.resumeStream();  // nothing in flight: 204, and the chat stays as it is
  out.final = view(chat);
} else {
  throw new Error(`unknown mode ${config.mode}`);
}
out.errors = errors;
process.stdout.write(JSON.stringify(out));
