// Camera health: each camera's state now (can it see, and why not), its latest measures in words, its
// reference view, the zones drawn on an older view, and its health incidents of the last days, polled
// every 5 s. An admin accepts a moved camera's new view here (two steps: ask, then confirm).
import "./nav.js";
import { api, el, formatDuration, formatTime, hasRole, showError } from "./api.js";
import {
  HEALTH_LABELS, HEALTH_WHY, acceptQuestion, acceptView, incidentLink, isProblem, measureWords, oldViewNote, sinceWords,
} from "./health_words.js";

const POLL_MS = 5000;
const CAMERA_STATES = {
  starting: "Starting", live: "Live", reconnecting: "Reconnecting", offline: "Offline", stopped: "Stopped", failed: "Failed",
};
const REVIEW = { open: "open", acknowledged: "acknowledged", resolved: "resolved" };

const list = document.getElementById("health-list");
const errorBox = document.getElementById("health-error");
const summary = document.getElementById("health-summary");
const daysSelect = document.getElementById("health-days");
const cards = new Map(); // camera name -> the card's parts

daysSelect.value = localStorage.getItem("cg-health-days") || "7";

function makeCard(name) {
  const id = `health-${name.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const state = el("span", { class: "badge" });
  const camState = el("span", { class: "badge" });
  const now = el("p", { class: "now" });
  const measures = el("ul", { class: "measures muted", "aria-label": `Latest measures of ${name}` });
  const reference = el("p", { class: "muted small" });
  const oldView = el("p", { class: "notice old-view", hidden: true });
  const accept = el("button", { type: "button", class: "accept-view" }, "Accept the current view");
  const question = el("p", { class: "small", id: `${id}-question` });
  const confirm = el("button", { type: "button", class: "primary confirm-accept", "aria-describedby": `${id}-question` }, "Yes, make it the reference view");
  const cancel = el("button", { type: "button", class: "quiet" }, "Cancel");
  const confirmBox = el("div", { class: "actions confirm", hidden: true }, question, confirm, cancel);
  const result = el("p", { class: "small", role: "status" });
  const actions = el("div", { class: "actions", hidden: true }, accept, confirmBox, result);
  const problemsTitle = el("h3", { id: `${id}-problems` });
  const problems = el("ul", { class: "problems", "aria-labelledby": `${id}-problems` });
  const root = el(
    "article",
    { class: "card health-card", dataset: { camera: name }, "aria-labelledby": `${id}-title` },
    el("header", {}, el("h2", { id: `${id}-title` }, name), state, camState),
    now,
    measures,
    reference,
    oldView,
    actions,
    problemsTitle,
    problems,
  );
  const card = { root, state, camState, now, measures, reference, oldView, actions, accept, confirmBox, question, confirm, cancel, result, problemsTitle, problems, name };
  accept.addEventListener("click", () => {
    question.textContent = acceptQuestion(name);
    confirmBox.hidden = false;
    accept.hidden = true;
    confirm.focus();
  });
  cancel.addEventListener("click", () => {
    confirmBox.hidden = true;
    accept.hidden = false;
    accept.focus();
  });
  confirm.addEventListener("click", async () => {
    confirm.disabled = true;
    try {
      const health = await acceptView(name);
      result.className = "small";
      result.textContent = `Accepted at ${new Date().toLocaleTimeString()}: this is ${name}'s reference view now.`;
      if (health.zones_on_old_view.length) result.textContent += " Check its zones on the new view.";
    } catch (err) {
      result.className = "small error";
      result.textContent = `Not accepted: ${err.message}`;
    } finally {
      confirm.disabled = false;
      confirmBox.hidden = true;
      accept.hidden = false;
      accept.focus();
      poll();
    }
  });
  return card;
}

function problemItem(p) {
  const lasted = p.open ? "going on" : p.duration_s === null ? "" : `lasted ${formatDuration(p.duration_s)}`;
  const words = measureWords(p.measures).slice(0, 2).join("; ");
  return el(
    "li",
    { dataset: { id: p.id, problem: p.problem } },
    el("span", { class: `badge health-${p.problem}` }, HEALTH_LABELS[p.problem] || p.problem),
    incidentLink(p.id, formatTime(p.started_at) || p.id),
    lasted ? el("span", { class: p.open ? "badge ongoing" : "muted" }, lasted) : null,
    el("span", { class: "muted" }, REVIEW[p.state] || p.state),
    words ? el("span", { class: "muted" }, words) : null,
  );
}

function update(card, row, days) {
  const h = row.health;
  const state = h ? h.state : "unknown";
  const problem = isProblem(state);
  card.root.classList.toggle("cannot-see", problem);
  card.root.dataset.health = state;
  card.state.className = `badge health-${state}`;
  card.state.textContent = h ? HEALTH_LABELS[state] || state : "Health not watched";
  card.camState.className = `badge cam-${row.camera_state}`;
  card.camState.textContent = `Camera: ${CAMERA_STATES[row.camera_state] || row.camera_state}`;
  if (!h) {
    card.now.replaceChildren(
      "No health reading for this camera: its health check is off, it has not started yet, or the cameras run on Ray.",
    );
  } else if (problem) {
    const since = sinceWords(h.since);
    card.now.replaceChildren(
      HEALTH_WHY[state] || "",
      since ? ` It has been so ${since}.` : "",
      h.event_id ? " " : "",
      h.event_id ? incidentLink(h.event_id, "Open its incident") : "",
    );
  } else if (state === "learning") {
    card.now.replaceChildren("Learning this camera's usual view; it is judged once that is done.");
  } else {
    card.now.replaceChildren("The camera sees normally.");
  }
  const words = h ? measureWords(h.measures) : [];
  card.measures.hidden = !words.length;
  card.measures.replaceChildren(...words.map((w) => el("li", {}, w)));
  if (h && h.reference_made_at) {
    card.reference.textContent = h.reference_accepted_by
      ? `Reference view accepted by ${h.reference_accepted_by}, ${formatTime(h.reference_made_at)}.`
      : `Reference view learned ${formatTime(h.reference_made_at)}.`;
  } else if (h && Object.keys(h.measures).length && state !== "learning") {
    card.reference.textContent = "Reference view learned from this run's first pictures (not kept on disk for a recorded file).";
  } else {
    card.reference.textContent = h ? "No reference view yet: no picture measured." : "";
  }
  const note = oldViewNote(h);
  card.oldView.hidden = !note;
  card.oldView.replaceChildren(
    ...(note ? [note, " ", el("a", { href: `/zones/${encodeURIComponent(row.name)}` }, "Open the zone editor")] : []),
  );
  // an admin accepts what the camera sees now: only once something was measured
  card.actions.hidden = !(h && hasRole("admin") && Object.keys(h.measures).length);
  card.accept.className = `accept-view${state === "moved" ? " primary" : ""}`;
  const period = days === 1 ? "last day" : `last ${days} days`;
  card.problemsTitle.textContent = row.problems_total
    ? `Health incidents, ${period}: ${row.problems_total}` + (row.problems_total > row.problems.length ? ` (latest ${row.problems.length} shown)` : "")
    : `No health incidents in the ${period}`;
  card.problems.replaceChildren(...row.problems.map(problemItem));
}

let polling = false;
async function poll() {
  if (polling) return;
  polling = true;
  try {
    const days = Number(daysSelect.value) || 7;
    const page = await api(`/api/v1/health?days=${days}`);
    showError(errorBox, "");
    for (const row of page.cameras) {
      if (!cards.has(row.name)) {
        const card = makeCard(row.name);
        cards.set(row.name, card);
        list.append(card.root);
      }
      update(cards.get(row.name), row, page.days);
    }
    const blind = page.cameras.filter((c) => c.health && isProblem(c.health.state)).length;
    summary.textContent = page.cameras.length
      ? blind ? `${blind} of ${page.cameras.length} cameras cannot see` : "No camera reports a problem"
      : "No cameras configured";
  } catch (err) {
    showError(errorBox, `Camera health unavailable: ${err.message}`);
  } finally {
    polling = false;
  }
}

daysSelect.addEventListener("change", () => {
  localStorage.setItem("cg-health-days", daysSelect.value);
  poll();
});
poll();
setInterval(poll, POLL_MS);
