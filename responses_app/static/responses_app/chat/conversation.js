// conversation.js: one socket per open conversation (/ws/conversations/<id>/) that announces turns
// started anywhere (another tab, the API, Regenerate or Edit), renames and deletion; and the
// conversation's own actions (Rename, Delete with the page's own confirm, Regenerate with the same
// or another model, Edit: Escape closes its form; Continue, which goes on in the same turn), the
// list's Undo notice and the image viewer. The socket keeps a heartbeat (livesocket.js), so a tab
// that lost it catches up.
//
// Messages: {"type":"turns","ids":[...]} on connect (every turn, so a tab that was offline
// catches up), {"type":"turn","request_id":id}, {"type":"renamed","title":t}, {"type":"deleted"}.

import { addTurn, newRequestId } from "./composer.js";
import { csrfToken } from "./csrf.js";
import { LiveSocket } from "./livesocket.js";
import { socketUrl, url } from "./urls.js";

export class ConversationLive {
  constructor(id) {
    this.id = id;
    this.socket = new LiveSocket(() => socketUrl("wsConversation", { conversation: id }), {
      message: (data) => {
        let message;
        try { message = JSON.parse(data); } catch { return; }
        this.handle(message);
      },
      closed: (event) => event.code !== 4403 && event.code !== 4404,
      quietMs: 25000, // turns, renames, deletion: a new connection catches up, and `online` makes one at once
      answerMs: 5000,
    });
    window.addEventListener("online", () => this.socket.reconnectNow());
  }

  async handle(message) {
    if (message.type === "turns") {
      for (const id of message.ids) await addTurn(this.id, id);
    } else if (message.type === "turn") {
      await addTurn(this.id, message.request_id);
    } else if (message.type === "renamed") {
      const title = document.querySelector("[data-title]");
      if (title) title.textContent = message.title;
      const listed = document.querySelector(`[data-sidebar-item][data-conversation="${this.id}"] [data-sidebar-title]`);
      if (listed) listed.textContent = message.title; // the sidebar's entry too
      document.title = `${message.title} · Responses Relay`;
    } else if (message.type === "deleted") {
      this.socket.close();
      if (!deleting) location.assign(url("conversations")); // this tab's Delete goes to its Undo instead
    }
  }
}

// Delete asks first in the page's own dialog (_delete_dialog.html): Cancel has the focus, Escape
// closes it, and the focus goes back to Delete. Deleted, the list offers Undo for a few minutes.
let deleting = false;

function confirmDelete(form) {
  const dialog = document.querySelector("[data-delete-dialog]");
  if (!dialog) { form.dataset.confirmed = "1"; form.requestSubmit(); return; }
  if (!dialog.dataset.bound) {
    dialog.dataset.bound = "1";
    dialog.querySelector("[data-delete-cancel]").addEventListener("click", () => dialog.close());
    dialog.querySelector("[data-delete-confirm]").addEventListener("click", () => {
      dialog.close();
      form.dataset.confirmed = "1";
      form.requestSubmit();
    });
  }
  dialog.showModal();
  dialog.querySelector("[data-delete-cancel]").focus();
}

// The list's "Deleted. Undo" leaves when Undo no longer works.
export function bindUndo(doc) {
  const notice = doc.querySelector("[data-undo-notice]");
  if (!notice) return;
  const left = Date.parse(notice.dataset.undoUntil) - Date.now();
  if (Number.isFinite(left)) setTimeout(() => notice.remove(), Math.max(0, left));
}

function toggle(button, form, open) {
  form.hidden = !open;
  button.setAttribute("aria-expanded", String(open));
  if (open) form.querySelector("input[type=text], textarea").focus();
  else if (form.contains(document.activeElement) || document.activeElement === document.body) button.focus();
}

function closeForm(form) {
  if (form.matches(".rename-form")) toggle(document.querySelector("[data-action=rename]"), form, false);
  else toggle(form.closest(".msg-user").querySelector("[data-action=edit]"), form, false);
}

async function postForm(form) {
  const response = await fetch(form.action, {
    method: "POST", credentials: "same-origin", body: new FormData(form),
    headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
  });
  const result = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(result.error || `HTTP ${response.status}`);
  return result;
}

export function bindActions(root, conversation) {
  root.addEventListener("keydown", (event) => {
    const form = event.key === "Escape" && event.target.closest(".rename-form, .edit-form");
    if (form) { event.preventDefault(); closeForm(form); }
  });
  root.addEventListener("click", (event) => {
    const button = event.target.closest("button");
    if (!button) return;
    const action = button.dataset.action;
    if (action === "rename" || action === "cancel-rename") {
      toggle(root.querySelector("[data-action=rename]"), root.querySelector(".rename-form"), action === "rename");
    } else if (action === "edit" || action === "cancel-edit") {
      const user = button.closest(".msg-user");
      toggle(user.querySelector("[data-action=edit]"), user.querySelector(".edit-form"), action === "edit");
    } else if (button.classList.contains("image-zoom")) {
      button.closest("figure").classList.toggle("zoomed");
    }
  });
  root.addEventListener("submit", async (event) => {
    const form = event.target;
    if (form.matches(".delete-form")) {
      if (form.dataset.confirmed === "1") deleting = true;
      else { event.preventDefault(); confirmDelete(form); }
      return;
    }
    if (!form.matches(".regenerate-form, .edit-form, .continue-form")) return;
    event.preventDefault();
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const result = await postForm(form);
      form.querySelector("input[name=client_request_id]").value = newRequestId(); // the next press is new
      if (form.matches(".edit-form")) toggle(form.closest(".msg-user").querySelector("[data-action=edit]"), form, false);
      const chooser = form.closest("details");
      if (chooser) chooser.open = false;
      // Continue goes on in the same turn, where the reader is; a new version is the newest turn.
      await addTurn(conversation, result.id, { own: !form.matches(".continue-form") });
    } catch {
      form.submit(); // the plain post reports the problem on a page of its own
    } finally {
      button.disabled = false;
    }
  });
}
