// The incident timeline: filters (kept in the URL), pages of 50, acknowledge, bulk acknowledge /
// resolve of the selected incidents with one note and evidence export of them with a reason
// (operators), and live updates: new and changed incidents arrive over server-sent events and
// appear without a reload. Every incident can be selected, resolved ones too (they are what staff
// export most); acknowledge and resolve apply to the selected ones not yet resolved.
import "./nav.js";
import {
  ApiError, api, downloadPost, el, eventStream, eventDuration, filterParams, formatTime, hasRole, kindLabel, loadKinds, showError,
  stateBadge,
} from "./api.js";

const PAGE = 50;
const BULK_MAX = 500; // the API's limit per bulk review
const form = document.getElementById("filters");
const list = document.getElementById("timeline");
const more = document.getElementById("more");
const total = document.getElementById("events-total");
const errorBox = document.getElementById("events-error");
const liveState = document.getElementById("live-state");
const csvLink = document.getElementById("csv-link");
const FIELDS = ["camera", "kind", "state", "outcome", "rule", "since", "until"];
const shiftLink = document.getElementById("shift-link");
const bulkOutcome = document.getElementById("bulk-outcome");
const bulk = document.getElementById("bulk");
const selectAll = document.getElementById("select-all");
const bulkCount = document.getElementById("bulk-count");
const bulkNote = document.getElementById("bulk-note");
const bulkAck = document.getElementById("bulk-ack");
const bulkResolve = document.getElementById("bulk-resolve");
const bulkResult = document.getElementById("bulk-result");
const bulkReason = document.getElementById("bulk-reason");
const bulkEvidence = document.getElementById("bulk-evidence");
const checklists = new Map(); // id -> the checklist last read (live updates of the pipeline carry none)
const canReview = hasRole("operator");
const selected = new Set(); // ids of the checked incidents
let offset = 0;
let count = 0;

/** The filters as the API takes them (datetime-local values become ISO 8601 instants). */
function apiFilters() {
  return filterParams(form, FIELDS);
}

function eventTime(event) {
  return Date.parse(event.started_at || event.recorded_at) || 0;
}

function matches(event) {
  const f = Object.fromEntries(apiFilters());
  if (f.camera && event.camera !== f.camera) return false;
  if (f.kind && event.kind !== f.kind) return false;
  if (f.rule && event.rule !== f.rule) return false;
  if (f.state && event.state !== f.state) return false;
  if (f.outcome && (event.outcome || "none") !== f.outcome) return false;
  const t = eventTime(event);
  if (f.since && t < Date.parse(f.since)) return false;
  if (f.until && t >= Date.parse(f.until)) return false;
  return true;
}

async function acknowledge(event, button) {
  button.disabled = true;
  try {
    const updated = await api(`/api/v1/events/${encodeURIComponent(event.id)}/ack`, { method: "POST", body: { note: "" } });
    upsert(updated, false);
  } catch (err) {
    button.disabled = false;
    showError(errorBox, err instanceof ApiError && err.status === 409 ? `Already handled: ${err.message}` : err.message);
  }
}

function renderItem(event) {
  const href = `/events/${encodeURIComponent(event.id)}`;
  const what = `${kindLabel(event.kind)} · ${event.rule} on ${event.camera}, ${formatTime(event.started_at)}`;
  // a small thumbnail, blurred where the camera blurs (for every role: a list hands out no sharp image)
  const thumb = event.snapshot_url
    ? el("img", { src: `/api/v1/events/${encodeURIComponent(event.id)}/thumb.jpg`, alt: `Snapshot of ${what}`, loading: "lazy" })
    : el("div", { class: "placeholder" }, "no snapshot");
  if (event.snapshot_url) {
    // media from before the camera blurred has no blurred copy: no thumbnail then
    thumb.addEventListener("error", () => thumb.replaceWith(el("div", { class: "placeholder" }, "no thumbnail")), { once: true });
  }
  const duration = eventDuration(event);
  const actions = el("div", { class: "actions" });
  let pick = null;
  if (canReview) {
    pick = el("input", {
      type: "checkbox",
      class: "pick",
      "aria-label": `Select ${what} (${event.id})`,
      checked: selected.has(event.id),
    });
    pick.addEventListener("change", () => {
      if (pick.checked) selected.add(event.id);
      else selected.delete(event.id);
      updateBulk();
    });
  }
  if (hasRole("operator") && event.state === "open") {
    const button = el("button", { type: "button", class: "ack primary" }, "Acknowledge");
    button.addEventListener("click", () => acknowledge(event, button));
    actions.append(button);
  }
  actions.append(el("a", { class: "button quiet", href }, "Details"));
  if (event.checklist !== undefined) checklists.set(event.id, event.checklist);
  const steps = checklists.get(event.id);
  const reviewer = event.resolved_by
    ? `resolved by ${event.resolved_by}`
    : event.acknowledged_by ? `acknowledged by ${event.acknowledged_by}` : "";
  return el(
    "li",
    { class: `event-item state-${event.state}`, dataset: { id: event.id, state: event.state, time: eventTime(event) } },
    pick,
    // the thumbnail links to the incident too (named by the image's alt text; out of the tab order:
    // the title is the same link); without a snapshot there is no link, only the placeholder
    event.snapshot_url ? el("a", { class: "thumb", href, tabindex: "-1" }, thumb) : el("div", { class: "thumb" }, thumb),
    el(
      "div",
      { class: "summary" },
      el("h3", {}, el("a", { href }, `${kindLabel(event.kind)} · ${event.rule}`)),
      el("p", { class: "muted" }, `${event.camera} · zone ${event.zone} · ${formatTime(event.started_at)}`),
      el(
        "p",
        { class: "badges" },
        stateBadge(event),
        event.open ? el("span", { class: "badge ongoing" }, "ongoing") : el("span", { class: "badge" }, `ended after ${duration}`),
        event.class_names && event.class_names.length ? el("span", { class: "muted" }, event.class_names.join(", ")) : null,
        reviewer ? el("span", { class: "muted reviewer" }, reviewer) : null,
        event.kept ? el("span", { class: "badge kept", title: "Kept: never deleted by retention" }, "kept") : null,
        steps ? el("span", { class: "badge steps" }, `${steps.done} of ${steps.total} steps`) : null,
      ),
    ),
    actions,
  );
}

/** Read incidents again (after an export made them kept) and show them as they are now. */
async function refreshItems(ids) {
  for (const id of ids.slice(0, PAGE)) {
    try {
      upsert(await api(`/api/v1/events/${encodeURIComponent(id)}`), false);
    } catch {
      // gone meanwhile: the next load shows it
    }
  }
}

/** The selected incidents that acknowledge / resolve can still apply to (not resolved). */
function reviewable() {
  return [...selected].filter((id) => list.querySelector(`li[data-id="${CSS.escape(id)}"]`)?.dataset.state !== "resolved");
}

/** The bulk bar: how many are selected, and whether the buttons apply. */
function updateBulk() {
  for (const id of [...selected]) {
    if (!list.querySelector(`li[data-id="${CSS.escape(id)}"] input.pick`)) selected.delete(id); // gone from the page
  }
  const boxes = [...list.querySelectorAll("input.pick")];
  const open = reviewable().length;
  const tooMany = selected.size > BULK_MAX;
  const resolvedNote = selected.size > open ? ` (${selected.size - open} resolved: export only)` : "";
  bulkCount.textContent = tooMany
    ? `${selected.size} selected (at most ${BULK_MAX} at once)`
    : `${selected.size} selected${resolvedNote}`;
  bulkCount.className = tooMany ? "error" : "muted";
  bulkAck.disabled = bulkResolve.disabled = open === 0 || tooMany;
  bulkEvidence.disabled = selected.size === 0 || tooMany || !bulkReason.value.trim();
  selectAll.checked = boxes.length > 0 && boxes.every((b) => b.checked);
  selectAll.indeterminate = !selectAll.checked && boxes.some((b) => b.checked);
}

/** Acknowledge or resolve every selected incident with the one note; report what was skipped. */
async function bulkReview(action) {
  bulkResult.className = "notice";
  const ids = reviewable(); // resolved ones stay selected (for an export) and are not sent
  if (!ids.length) return;
  bulkAck.disabled = bulkResolve.disabled = true;
  try {
    const body = { ids, action, note: bulkNote.value.trim() };
    if (action === "resolve" && bulkOutcome.value) body.outcome = bulkOutcome.value;
    const out = await api("/api/v1/events/bulk", { method: "POST", body });
    for (const event of out.updated) {
      selected.delete(event.id);
      upsert(event, false);
    }
    const done = `${out.updated.length} ${action === "acknowledge" ? "acknowledged" : "resolved"}`;
    const skipped = Object.entries(out.conflicts).map(([id, st]) => `${id} is ${st}`);
    skipped.push(...out.missing.map((id) => `${id} no longer exists`));
    for (const id of [...Object.keys(out.conflicts), ...out.missing]) selected.delete(id);
    bulkResult.textContent = skipped.length ? `${done}; skipped ${skipped.length}: ${skipped.join(", ")}.` : `${done}.`;
    bulkResult.hidden = false;
    if (out.updated.length) bulkNote.value = "";
    showError(errorBox, "");
  } catch (err) {
    showError(errorBox, `Not done: ${err.message}`);
  }
  updateBulk();
}

function setTotal() {
  total.textContent = count === 1 ? "1 incident" : `${count} incidents`;
}

/** Put an event in the list: replace it where it is, or add it at the top when it is new. */
function upsert(event, fromStream) {
  const existing = list.querySelector(`li[data-id="${CSS.escape(event.id)}"]`);
  if (!matches(event)) {
    if (existing) {
      existing.remove();
      count = Math.max(0, count - 1);
      setTotal();
    }
    return;
  }
  const newest = list.querySelector("li[data-id]");
  if (!existing && newest && eventTime(event) < Number(newest.dataset.time)) {
    return; // an update of an older incident that is not on the loaded pages: it shows where it belongs
  }
  const item = renderItem(event);
  if (existing) {
    existing.replaceWith(item);
  } else {
    list.prepend(item);
    count += 1;
    setTotal();
  }
  if (fromStream) {
    item.classList.add("fresh");
    setTimeout(() => item.classList.remove("fresh"), 4000);
  }
  if (canReview) updateBulk();
}

async function load(reset) {
  if (reset) {
    offset = 0;
    list.replaceChildren();
    selected.clear();
    bulkResult.hidden = true;
  }
  const params = apiFilters();
  params.set("limit", String(PAGE));
  params.set("offset", String(offset));
  try {
    const page = await api(`/api/v1/events?${params}`);
    showError(errorBox, "");
    for (const event of page.items) {
      if (!list.querySelector(`li[data-id="${CSS.escape(event.id)}"]`)) list.append(renderItem(event));
    }
    offset += page.items.length;
    count = page.total;
    setTotal();
    more.hidden = offset >= page.total;
    if (!page.total) list.append(el("li", { class: "empty muted" }, "No incidents match these filters."));
    if (canReview) updateBulk();
  } catch (err) {
    showError(errorBox, `Could not load incidents: ${err.message}`);
  }
}

function syncUrl() {
  const params = new URLSearchParams();
  for (const name of FIELDS) {
    const value = form.elements[name].value.trim();
    if (value) params.set(name, value);
  }
  history.replaceState(null, "", params.size ? `?${params}` : location.pathname);
  csvLink.href = `/api/v1/events.csv?${apiFilters()}`;
  // the shift report of the selected period (default: the last 8 hours)
  const f = Object.fromEntries(apiFilters());
  const shift = new URLSearchParams({ since: f.since || new Date(Date.now() - 8 * 3600e3).toISOString() });
  if (f.until) shift.set("until", f.until);
  shiftLink.href = `/api/v1/reports/shift?${shift}`;
}

async function init() {
  const query = new URLSearchParams(location.search);
  const [cameras, vocabulary] = await Promise.allSettled([api("/api/v1/cameras"), loadKinds()]);
  if (cameras.status === "fulfilled") {
    const select = form.elements.camera;
    for (const camera of cameras.value) select.append(el("option", { value: camera.name }, camera.name));
  }
  if (vocabulary.status === "fulfilled") {
    const select = form.elements.kind; // the rule registry's kinds, served by the API
    for (const k of vocabulary.value.kinds) select.append(el("option", { value: k.kind }, k.label));
  }
  const failed = [cameras, vocabulary].find((r) => r.status === "rejected");
  if (failed) showError(errorBox, failed.reason.message);
  for (const name of FIELDS) if (query.has(name)) form.elements[name].value = query.get(name);
  syncUrl();
  await load(true);
  eventStream(
    (event) => {
      list.querySelector("li.empty")?.remove();
      upsert(event, true);
    },
    (state) => {
      liveState.textContent = state === "live" ? "live" : "reconnecting…";
      liveState.className = `badge ${state === "live" ? "cam-live" : "cam-reconnecting"}`;
    },
  );
}

form.addEventListener("submit", (e) => {
  e.preventDefault();
  syncUrl();
  load(true);
});
form.addEventListener("reset", () => setTimeout(() => {
  syncUrl();
  load(true);
}));
more.addEventListener("click", () => load(false));
if (canReview) {
  bulk.hidden = false;
  list.classList.add("selectable");
  selectAll.addEventListener("change", () => {
    for (const box of list.querySelectorAll("input.pick")) {
      box.checked = selectAll.checked;
      const id = box.closest("li").dataset.id;
      if (box.checked) selected.add(id);
      else selected.delete(id);
    }
    updateBulk();
  });
  bulkAck.addEventListener("click", () => bulkReview("acknowledge"));
  bulkResolve.addEventListener("click", () => bulkReview("resolve"));
  bulkReason.addEventListener("input", updateBulk);
  bulkEvidence.addEventListener("click", async () => {
    const ids = [...selected];
    bulkEvidence.disabled = true;
    bulkResult.hidden = false;
    bulkResult.className = "notice";
    bulkResult.textContent = `Exporting ${ids.length} incident(s)…`;
    try {
      const size = await downloadPost("/api/v1/evidence", { ids, reason: bulkReason.value.trim() }, "evidence.zip");
      bulkResult.textContent = `Exported ${ids.length} incident(s) (${size.toLocaleString()} bytes, signed); they are kept.`;
      bulkReason.value = "";
      await refreshItems(ids); // their "kept" mark
    } catch (err) {
      bulkResult.className = "error";
      bulkResult.textContent = err.message;
    } finally {
      updateBulk();
    }
  });
  bulk.addEventListener("submit", (e) => e.preventDefault());
}
init();
