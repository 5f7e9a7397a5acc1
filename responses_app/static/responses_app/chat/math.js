// math.js: math typeset as MathML, one step after the Markdown is rendered.
//
// Both renderers (markdown.py, markdown.js) write math as `<code class="md-math">TeX</code>`, display
// math with `md-math-display` too: what a page without this script shows, and what parity holds.
// `typeset` turns each such code not yet typeset into MathML with temml (vendor/temml, imported as
// a page of answers starts), the TeX kept as the MathML's annotation for screen readers and
// copying. It is the one place that does: the live drawing (turnview.js), a turn from the server
// (follower.js's swap, composer.js) and the page as loaded (main.js) all call it. TeX that temml
// cannot read stays code, with a title that says why; nothing is thrown or logged.

const CACHE_SIZE = 500; // formulas: the live tail is drawn again every frame, its math with it
// Colours come from the theme: TeX's colour commands keep what they colour and drop the colour.
const MACROS = { "\\color": "\\@firstoftwo{}", "\\textcolor": "\\@secondoftwo", "\\colorbox": "\\@secondoftwo" };
const UNTYPESET = "code.md-math:not([data-math-error])";

const cache = new Map(); // "D"/"I" + TeX -> a <math> element to clone, or why it could not be typeset
let temml = null;
let loading = null;

function load() {
  return loading ??= import("../vendor/temml/temml.mjs").then(
    (module) => { temml = module.default; typeset(document); }, // and what was drawn meanwhile
    () => {}); // not loaded (offline, say): the TeX stays code, as without this script
}

// Why temml refused, in one line: its message names the problem and where ("at position 3").
function why(error) {
  const said = String(error && error.message || error).split("\n")[0].replace(/\u0332/g, "").trim();
  return `Not typeset: ${said.replace(/:$/, "") || "temml could not read it"}`;
}

function render(tex, display) {
  const holder = document.createElement("span");
  try {
    temml.render(tex, holder, { displayMode: display, annotate: true, throwOnError: true, macros: { ...MACROS } });
  } catch (error) {
    return why(error);
  }
  const math = holder.firstElementChild;
  if (!math) return why("temml gave nothing");
  math.removeAttribute("style"); // display math is laid out by chat.css, inside its scrolling box
  return math;
}

// The cached rendering of `tex`, made once; the least recently used goes when the cache is full.
function rendered(tex, display) {
  const key = (display ? "D" : "I") + tex;
  let found = cache.get(key);
  if (found === undefined) {
    found = render(tex, display);
    if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value);
  } else {
    cache.delete(key);
  }
  cache.set(key, found);
  return found;
}

function typesetOne(code) {
  const display = code.classList.contains("md-math-display");
  const found = rendered(code.textContent, display);
  if (typeof found === "string") {
    code.dataset.mathError = "";
    code.title = found;
    return;
  }
  const box = code.ownerDocument.createElement("span");
  box.className = code.className;
  if (display) box.tabIndex = 0; // a wide formula scrolls sideways: the keyboard can scroll it too
  box.append(found.cloneNode(true));
  code.replaceWith(box);
}

// A page that may show an answer soon loads temml now, not with the first formula: typeset in the
// frame it arrives, math never shows as code first (a table row holding it would change once shown).
// Resolves once it is loaded (or could not be).
export function prepare() {
  return load();
}

// Typesets the math under `root` (an element, a fragment or the document), which it returns. Until
// temml is loaded the code stays as it is, and is typeset once it is.
export function typeset(root) {
  const codes = root.querySelectorAll(UNTYPESET);
  if (codes.length && !temml) load();
  else for (const code of codes) typesetOne(code);
  return root;
}
