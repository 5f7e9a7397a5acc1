// highlight.js: syntax colours for fenced code with a language, as token classes (`hl-k` keyword,
// `hl-s` string, `hl-c` comment, `hl-n` number), the same as responses_app/highlight.py.
// Its own, since no maintained library gives identical HTML in Python and JavaScript.

const esc = (value) => String(value).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
  .replace(/"/g, "&quot;").replace(/'/g, "&#x27;"); // markdown.js's esc (which imports this module)

const MAX_CHARS = 20000; // longer blocks stay plain, as in highlight.py (MAX_CHARS)
const IDENT = "[A-Za-z_$][A-Za-z0-9_$]*";
const NUMBER = "(?<![A-Za-z0-9_$.])[0-9]+(?:\\.[0-9]+)?";
const STRINGS = "\"(?:[^\"\\\\\\n]|\\\\[^\\n])*\"?|'(?:[^'\\\\\\n]|\\\\[^\\n])*'?";

function lang(comment, keywords) {
  return [new RegExp(`(?<c>${comment})|(?<s>${STRINGS})|(?<n>${NUMBER})|(?<w>${IDENT})`, "g"), new Set(keywords.split(" "))];
}

const PYTHON = lang("#[^\\n]*", "False None True and as assert async await break class continue def del elif " +
  "else except finally for from global if import in is lambda nonlocal not or pass raise return " +
  "try while with yield match case self print len range");
const JS = lang("//[^\\n]*", "async await break case catch class const continue default delete do else export " +
  "extends false finally for function if import in instanceof let new null of return static super " +
  "switch this throw true try typeof undefined var void while yield");
const SHELL = lang("(?<![^ \\t\\n])#[^\\n]*", "if then else elif fi for while do done case esac in function " +
  "return export local echo cd exit set");
const LANGUAGES = new Map(Object.entries({ python: PYTHON, py: PYTHON, javascript: JS, js: JS, typescript: JS, ts: JS,
  bash: SHELL, sh: SHELL, shell: SHELL, zsh: SHELL }));

// Longer than MAX_CHARS code points, as Python's len counts them (not UTF-16 units).
function longer(code) {
  if (code.length <= MAX_CHARS) return false;
  let count = 0;
  for (const _ of code) if (++count > MAX_CHARS) return true; // eslint-disable-line no-unused-vars
  return false;
}

// The code as escaped HTML, its tokens wrapped in `<span class="hl-…">` if `language` is known.
export function highlight(code, language) {
  const known = LANGUAGES.get(language.toLowerCase());
  if (!known || longer(code)) return esc(code);
  const [pattern, keywords] = known;
  const pieces = [];
  let at = 0;
  for (const m of code.matchAll(pattern)) {
    const kind = m.groups.c !== undefined ? "c" : m.groups.s !== undefined ? "s" : m.groups.n !== undefined ? "n" : "w";
    if (kind === "w" && !keywords.has(m[0])) continue;
    pieces.push(esc(code.slice(at, m.index)), `<span class="hl-${kind === "w" ? "k" : kind}">`, esc(m[0]), "</span>");
    at = m.index + m[0].length;
  }
  return pieces.join("") + esc(code.slice(at));
}
