// attach.js: the composer's attachments. Attach (beside Send) opens the file picker; an image pasted into the
// message box, or files dropped on the composer, are added too; each file is a chip (a thumbnail
// for an image) with Remove, until the message is sent.
//
// The files live in the form's own file input (set through a DataTransfer), so a form that posts
// without fetch (a first prompt) sends them as the page without the script does, and FormData(form)
// holds them for composer.js. The page checks what it states (how many, how large); the server
// checks again, and tells the kind by the bytes (attachments.py). Nothing typed is lost either way.

import { announce } from "./follower.js";

function sizeWords(bytes) {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1).replace(/\.0$/, "")} MB`;
}

function chip(file, remove) {
  const li = document.createElement("li");
  li.className = "chip";
  li.dataset.chip = file.name;
  if (/^image\//.test(file.type)) {
    const img = document.createElement("img");
    img.alt = "";
    const reader = new FileReader();
    reader.addEventListener("load", () => { img.src = reader.result; });
    reader.readAsDataURL(file);
    li.append(img);
  }
  const name = document.createElement("span");
  name.className = "chip-name";
  name.textContent = file.name;
  const size = document.createElement("span");
  size.className = "muted small";
  size.textContent = sizeWords(file.size);
  const button = document.createElement("button");
  button.type = "button";
  button.className = "chip-remove";
  button.textContent = "×";
  button.setAttribute("aria-label", `Remove ${file.name}`);
  button.addEventListener("click", remove);
  li.append(name, size, button);
  return li;
}

// `onError(lines)`: what the page refused, in words; `onChange()`: the files changed.
export function bindAttachments(form, { onError = () => {}, onChange = () => {} } = {}) {
  const box = form.querySelector("[data-files]");
  if (!box) return null;
  const input = box.querySelector("input[type=file]");
  const chips = box.querySelector("[data-chips]");
  const attach = form.querySelector("[data-attach]"); // beside Send
  const maxFiles = Number(box.dataset.maxFiles || 0);
  const maxBytes = Number(box.dataset.maxBytes || 0);
  let files = [];
  // Attach stands for the file input and its label (one control to reach, not two).
  if (attach) for (const element of [input, box.querySelector("[data-files-label]")]) if (element) element.hidden = true;

  const render = () => {
    chips.replaceChildren(...files.map((file, index) => chip(file, () => removeAt(index))));
    chips.hidden = files.length === 0;
  };
  const sync = () => {
    const transfer = new DataTransfer();
    for (const file of files) transfer.items.add(file);
    input.files = transfer.files;
    render();
    onChange();
  };
  const removeAt = (index) => {
    const [gone] = files.splice(index, 1);
    sync();
    const next = chips.querySelectorAll(".chip-remove")[Math.min(index, files.length - 1)];
    (next || attach || input).focus();
    if (gone) announce(`Removed ${gone.name}.`);
  };
  const add = (list) => {
    const refused = [];
    let added = 0;
    for (const file of list) {
      if (files.length >= maxFiles) refused.push(`A message takes at most ${maxFiles} files: “${file.name}” was not added.`);
      else if (maxBytes && file.size > maxBytes) refused.push(`“${file.name}” is ${sizeWords(file.size)}; an attachment can be at most ${box.dataset.maxSize}. Choose a smaller file.`);
      else if (!file.size) refused.push(`“${file.name}” is empty. Choose another file.`);
      else { files.push(file); added += 1; }
    }
    sync();
    if (refused.length) onError(refused);
    if (added) announce(`${added} file${added === 1 ? "" : "s"} attached: ${files.length} in all.`);
  };

  // The picker replaces the input's files with what was picked: added to those attached before.
  input.addEventListener("change", () => {
    const picked = [...input.files].filter((f) => !files.includes(f));
    add(picked);
  });
  if (attach) attach.addEventListener("click", () => input.click());
  form.addEventListener("paste", (event) => {
    const pasted = [...((event.clipboardData && event.clipboardData.files) || [])];
    if (!pasted.length) return;
    if (!event.clipboardData.types.includes("text/plain")) event.preventDefault(); // an image alone
    add(pasted);
  });
  const carriesFiles = (event) => event.dataTransfer && [...event.dataTransfer.types].includes("Files");
  form.addEventListener("dragover", (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    form.classList.add("dropping");
  });
  form.addEventListener("dragleave", (event) => {
    if (!form.contains(event.relatedTarget)) form.classList.remove("dropping");
  });
  form.addEventListener("drop", (event) => {
    form.classList.remove("dropping");
    if (!carriesFiles(event)) return;
    event.preventDefault();
    add([...event.dataTransfer.files]);
  });
  return {
    count: () => files.length,
    clear: () => { files = []; sync(); },
  };
}
