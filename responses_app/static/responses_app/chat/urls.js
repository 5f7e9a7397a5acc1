// urls.js: every address the scripts use, handed over by the page (#relay-urls, rendered by
// {% relay_assets %} from the app's URLconf and websocket routes), so the app works wherever a
// host mounts it. Templates carry {request}, {conversation} and {approval}. Pure: Node can
// configure() it directly.

let templates = {};

export function configureUrls(data) {
  templates = data;
}

export function loadUrls(doc) {
  const script = doc.getElementById("relay-urls");
  if (!script) throw new Error("the page has no #relay-urls");
  configureUrls(JSON.parse(script.textContent));
}

export function url(name, params = {}) {
  const template = templates[name];
  if (template === undefined) throw new Error(`no address ${name} in #relay-urls`);
  return template.replace(/\{(\w+)\}/g, (_, key) => encodeURIComponent(String(params[key])));
}

export function socketUrl(name, params = {}) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}${url(name, params)}`;
}
