// One incident: the clip (or the snapshot until the clip is written), the facts, and the review
// (acknowledge / resolve with a note, operator and admin). Updates of this incident arrive live.
import "./nav.js";
import {
  ApiError, STATE_LABELS, api, downloadPost, el, eventStream, eventDuration, formatTime, hasRole, kindLabel, loadKinds,
  showError,
} from "./api.js";
import { showHealth } from "./event_health.js";

const id = document.body.dataset.eventId;
const path = `/api/v1/events/${encodeURIComponent(id)}`;
const article = document.getElementById("event");
const errorBox = document.getElementById("event-error");
const reviewError = document.getElementById("review-error");
const clip = document.getElementById("clip");
const snapshot = document.getElementById("snapshot");
const clipNote = document.getElementById("clip-note");
const facts = document.getElementById("facts");
const review = document.getElementById("review");
const ackButton = document.getElementById("ack");
const resolveButton = document.getElementById("resolve");
const outcome = document.getElementById("outcome");
const keepButton = document.getElementById("keep");
const note = document.getElementById("note");
const checklist = document.getElementById("checklist");
const checklistSteps = document.getElementById("checklist-steps");
const checklistCount = document.getElementById("checklist-count");
const checklistError = document.getElementById("checklist-error");
const evidence = document.getElementById("evidence");
const evidenceReason = document.getElementById("evidence-reason");
const evidenceStatus = document.getElementById("evidence-status");
let clipPolls = 0;
const WITHHELD =
  "Withheld: this camera blurs people and this incident's media has no blurred copy, so viewers cannot see it. " +
  "An operator or admin can.";

let lastChecklist = null; // live updates of the pipeline carry no checklist: keep the last one

/** The rule's steps with a checkbox each (operators tick them; each tick is audited with who and when). */
function renderChecklist(list) {
  checklist.hidden = !list;
  if (!list) return;
  checklistCount.textContent = `${list.done} of ${list.total} steps`;
  checklistSteps.replaceChildren(
    ...list.steps.map((step) => {
      const box = el("input", { type: "checkbox", checked: step.checked, disabled: !hasRole("operator") || step.index === null });
      box.addEventListener("change", async () => {
        showError(checklistError, "");
        box.disabled = true;
        try {
          render(await api(`${path}/checklist`, { method: "POST", body: { index: step.index, checked: box.checked } }));
        } catch (err) {
          showError(checklistError, err.message);
          load();
        }
      });
      const who = step.by ? `${step.checked ? "ticked" : "unticked"} by ${step.by}, ${formatTime(step.at)}` : "";
      return el(
        "li",
        { class: step.checked ? "done" : "" },
        el("label", { class: "inline" }, box, " ", step.step),
        who ? el("span", { class: "muted" }, ` (${who})`) : null,
        step.index === null ? el("span", { class: "muted" }, " (no longer in the rule)") : null,
      );
    }),
  );
}

function fact(label, value) {
  if (value === null || value === undefined || value === "") return [];
  return [el("dt", {}, label), el("dd", {}, String(value))];
}

function render(event) {
  article.hidden = false;
  document.title = `${kindLabel(event.kind)} on ${event.camera} · CampusGuard`;
  document.getElementById("event-title").textContent = `${kindLabel(event.kind)} · ${event.rule}`;
  const stateBadge = document.getElementById("event-state");
  stateBadge.textContent = STATE_LABELS[event.state] || event.state;
  stateBadge.className = `badge state-${event.state}`;
  const openBadge = document.getElementById("event-open");
  openBadge.textContent = event.open ? "ongoing" : "ended";
  openBadge.className = `badge ${event.open ? "ongoing" : ""}`;

  if (event.clip_url) {
    if (clip.getAttribute("src") !== event.clip_url) {
      clip.src = event.clip_url;
      if (event.snapshot_url) clip.poster = event.snapshot_url;
    }
    clip.hidden = false;
    snapshot.hidden = true;
    clipNote.textContent = "Clip: a few seconds before and after the incident was raised.";
  } else {
    clip.hidden = true;
    if (event.snapshot_url) {
      snapshot.src = event.snapshot_url;
      snapshot.hidden = false;
    }
    if (event.clip_withheld) {
      clipNote.textContent = WITHHELD;
    } else {
      clipNote.textContent = clipPolls < 20 ? "The clip is being written…" : "No clip for this incident.";
    }
  }
  if (!event.snapshot_url && event.snapshot_withheld && !event.clip_url && !event.clip_withheld) {
    clipNote.textContent = WITHHELD;
  }

  const duration = eventDuration(event);
  facts.replaceChildren(
    ...fact("Camera", event.camera),
    ...fact("Rule", `${event.rule} (${kindLabel(event.kind)})`),
    ...fact("Zone", event.zone),
    ...fact("Started", formatTime(event.started_at)),
    ...fact("Ended", event.open ? "still going on" : formatTime(event.ended_at)),
    ...fact("Duration", duration),
    ...fact("Objects", (event.class_names || []).join(", ")),
    ...fact("Track ids", (event.tracker_ids || []).join(", ")),
    ...fact("Count", event.count),
    ...fact("Direction", event.direction),
    ...fact("Acknowledged", event.acknowledged_by ? `${event.acknowledged_by}, ${formatTime(event.acknowledged_at)}` : ""),
    ...fact("Resolved", event.resolved_by ? `${event.resolved_by}, ${formatTime(event.resolved_at)}` : ""),
    ...fact("Outcome", event.outcome ? `${event.outcome.replace("_", " ")} (${event.outcome_by})` : ""),
    ...fact("Note", event.note),
    ...fact("Kept", event.kept ? `${event.kept_by}, ${formatTime(event.kept_at)} (never deleted by retention)` : ""),
    ...fact("Event id", event.id),
  );

  showHealth(event); // a camera health incident: its problem and measures; accepting a moved camera's view
  if (event.checklist !== undefined) lastChecklist = event.checklist;
  renderChecklist(lastChecklist);
  evidence.hidden = !hasRole("operator");
  document.getElementById("report-pdf").href = `${path}/report.pdf`;
  document.getElementById("report-html").href = `${path}/report.html`;
  review.hidden = !hasRole("operator");
  ackButton.disabled = event.state !== "open";
  resolveButton.disabled = event.state === "resolved";
  keepButton.textContent = event.kept ? "Do not keep" : "Keep";
  keepButton.dataset.kept = event.kept ? "1" : "";
}

async function load() {
  try {
    // the kinds' labels come with the first load; without them a kind shows as itself
    const [event] = await Promise.all([api(path), loadKinds().catch(() => null)]);
    showError(errorBox, "");
    render(event);
    if (!event.clip_url && !event.clip_withheld && clipPolls < 20) {
      clipPolls += 1;
      setTimeout(load, 1500); // the clip is written a few seconds after the start
    }
  } catch (err) {
    article.hidden = true;
    showError(errorBox, err instanceof ApiError && err.status === 404 ? "There is no such incident." : err.message);
  }
}

async function act(action) {
  showError(reviewError, "");
  ackButton.disabled = resolveButton.disabled = true;
  try {
    const body = { note: note.value };
    if (action === "resolve" && outcome.value) body.outcome = outcome.value;
    render(await api(`${path}/${action}`, { method: "POST", body }));
    note.value = "";
    outcome.value = "";
  } catch (err) {
    showError(reviewError, err.message);
    load();
  }
}

evidence.addEventListener("submit", async (e) => {
  e.preventDefault();
  const button = document.getElementById("export-evidence");
  button.disabled = true;
  evidenceStatus.hidden = false;
  evidenceStatus.className = "notice";
  evidenceStatus.textContent = "Exporting…";
  try {
    const size = await downloadPost("/api/v1/evidence", { ids: [id], reason: evidenceReason.value.trim() }, `evidence-${id}.zip`);
    evidenceStatus.textContent = `Exported (${size.toLocaleString()} bytes, signed); the incident is kept.`;
    evidenceReason.value = "";
    load();
  } catch (err) {
    evidenceStatus.className = "error";
    evidenceStatus.textContent = err.message;
  } finally {
    button.disabled = false;
  }
});
ackButton.addEventListener("click", () => act("ack"));
resolveButton.addEventListener("click", () => act("resolve"));
keepButton.addEventListener("click", async () => {
  showError(reviewError, "");
  keepButton.disabled = true;
  try {
    render(await api(`${path}/keep`, { method: "POST", body: { kept: !keepButton.dataset.kept } }));
  } catch (err) {
    showError(reviewError, err.message);
  } finally {
    keepButton.disabled = false;
  }
});
load();
eventStream((event) => {
  if (event.id === id) render(event);
});
