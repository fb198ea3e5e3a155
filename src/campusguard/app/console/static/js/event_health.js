// The incident page of a camera health incident: its problem and measures in words and, on an ongoing
// `moved` incident, the admin's "accept the new view" (two steps: ask, then confirm).
import { el, hasRole } from "./api.js";
import { HEALTH_LABELS, HEALTH_WHY, acceptQuestion, acceptView, measureWords } from "./health_words.js";

const facts = document.getElementById("facts");
let box = null; // the accept-view controls, made on the first moved incident shown

function acceptBox(camera) {
  const question = el("p", { id: "accept-view-question", class: "small" }, acceptQuestion(camera));
  const ask = el("button", { type: "button", id: "accept-view", class: "primary" }, "Accept the new view");
  const confirm = el("button", { type: "button", id: "accept-view-confirm", "aria-describedby": "accept-view-question" }, "Yes, make it the reference view");
  const cancel = el("button", { type: "button", class: "quiet" }, "Cancel");
  const confirmRow = el("div", { class: "actions", hidden: true }, confirm, cancel);
  const result = el("p", { class: "small", role: "status" });
  const root = el(
    "div",
    { class: "review accept-view-box" },
    el("p", {}, "If the camera was turned on purpose, make what it sees now its reference view: this incident then ends."),
    el("div", { class: "actions" }, ask),
    question,
    confirmRow,
    result,
  );
  question.hidden = true;
  ask.addEventListener("click", () => {
    question.hidden = confirmRow.hidden = false;
    ask.hidden = true;
    confirm.focus();
  });
  cancel.addEventListener("click", () => {
    question.hidden = confirmRow.hidden = true;
    ask.hidden = false;
    ask.focus();
  });
  confirm.addEventListener("click", async () => {
    confirm.disabled = true;
    try {
      const health = await acceptView(camera);
      result.className = "small notice";
      result.replaceChildren(
        `Accepted at ${new Date().toLocaleTimeString()}: this is ${camera}'s reference view now; the incident ends with the next picture.`,
        health.zones_on_old_view.length ? ` Zones ${health.zones_on_old_view.join(", ")} were drawn on the old view: ` : "",
        health.zones_on_old_view.length ? el("a", { href: `/zones/${encodeURIComponent(camera)}` }, "check them") : "",
      );
    } catch (err) {
      result.className = "small error";
      result.textContent = `Not accepted: ${err.message}`;
    } finally {
      confirm.disabled = false;
      question.hidden = confirmRow.hidden = true;
      ask.hidden = false;
    }
  });
  return root;
}

/** Add a camera health incident's facts after the others; the accept-view controls on an ongoing `moved` one. */
export function showHealth(event) {
  if (event.kind !== "camera_health") return;
  const details = event.details || {};
  const problem = details.problem || event.zone;
  const words = measureWords(details.measures);
  facts.append(
    el("dt", {}, "Problem"),
    el("dd", {}, `${HEALTH_LABELS[problem] || problem}. ${HEALTH_WHY[problem] || ""}`),
  );
  if (words.length) facts.append(el("dt", {}, "Measures"), el("dd", {}, words.join("; ")));
  const offer = problem === "moved" && event.open && hasRole("admin");
  if (offer && !box) {
    box = acceptBox(event.camera);
    facts.after(box);
  }
  if (box) box.hidden = !offer;
}
