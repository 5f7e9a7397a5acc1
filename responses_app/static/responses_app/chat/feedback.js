// feedback.js: Helpful / Not helpful and a note on an ended answer (web/feedback.py), sent with
// fetch so the page stays where it is; the buttons show the rating the server stored. Without
// this script the same form posts and the page reloads at the turn.

const SAID = { up: "Marked helpful.", down: "Marked not helpful.", "": "Rating removed." };

function show(form, rating, note) {
  form.dataset.rating = rating;
  for (const button of form.querySelectorAll("button[name=rating][value=up], button[name=rating][value=down]")) {
    button.setAttribute("aria-pressed", String(button.value === rating));
  }
  const summary = form.querySelector(".feedback-note summary");
  if (summary) summary.textContent = note ? "Your note" : "Add a note";
}

export function bindFeedback(root) {
  root.addEventListener("submit", async (event) => {
    const form = event.target.closest("form[data-feedback]");
    if (!form) return;
    event.preventDefault();
    const action = event.submitter ? event.submitter.value : "note";
    const data = new FormData(form);
    data.set("rating", action);
    const status = form.querySelector("[data-feedback-status]");
    let said;
    try {
      const response = await fetch(form.action, {
        method: "POST", body: data, credentials: "same-origin", headers: { Accept: "application/json" },
      });
      const answer = await response.json();
      if (!response.ok) {
        said = answer.error || `Not saved (${response.status}).`;
      } else {
        show(form, answer.rating, answer.note);
        said = action === "note" ? "Note saved." : SAID[answer.rating];
      }
    } catch {
      said = "Not saved: no connection. Try again.";
    }
    if (status) status.textContent = said; // a status region: read out once
  });
}
