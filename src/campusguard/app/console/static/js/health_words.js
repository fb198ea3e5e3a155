// Camera health in words, shared by the wall, the health page, the incident page and the zone editor:
// the problem's label, its measures in plain words, since-when, and accepting a moved camera's view.
import { api, el, formatDuration, formatTime } from "./api.js";

/** What a camera's health state is called on the console. */
export const HEALTH_LABELS = {
  ok: "Sees normally",
  learning: "Learning its view",
  offline: "Offline",
  covered: "Covered",
  frozen: "Frozen",
  blurred: "Blurred",
  moved: "Turned away / moved",
};

/** Why the camera cannot see, one line for people. */
export const HEALTH_WHY = {
  offline: "The camera sends no pictures.",
  covered: "Most of the view is dark or flat: something covers the lens.",
  frozen: "Pictures keep coming but never change: the stream is stuck on one picture.",
  blurred: "The picture is far less sharp than this camera usually is: out of focus or a dirty lens.",
  moved: "The view no longer matches the camera's reference view: it was turned or moved.",
};

export const PROBLEMS = ["offline", "covered", "frozen", "blurred", "moved"];

export function isProblem(state) {
  return PROBLEMS.includes(state);
}

function percent(x) {
  return `${Math.max(0, Math.round(x * 100))}%`;
}

/** The measures of a health sample or incident, in plain words (one phrase each, known ones first). */
export function measureWords(measures) {
  const m = measures || {};
  const out = [];
  if (m.seconds_without_frames !== undefined) out.push(`no picture for ${formatDuration(m.seconds_without_frames)}`);
  if (m.covered_area !== undefined) out.push(`${percent(m.covered_area)} of the usually detailed view lost its contrast`);
  if (m.sharpness_ratio !== undefined) out.push(`sharpness ${percent(m.sharpness_ratio)} of its usual level`);
  if (m.similarity !== undefined) out.push(`view ${percent(m.similarity)} alike its reference view`);
  if (m.changed !== undefined) out.push(`${(m.changed * 100).toFixed(m.changed < 0.1 ? 1 : 0)}% of the picture changed since the last sample`);
  if (m.brightness !== undefined) out.push(`brightness ${Math.round(m.brightness)} of 255`);
  return out;
}

/** "since 14:02:10 (3 min 5 s)" for a problem that began at ISO time `since` (with the date when not
 * today; "" when unknown). */
export function sinceWords(since) {
  if (!since) return "";
  const began = new Date(since);
  if (Number.isNaN(began.getTime())) return "";
  const lasted = Math.max(0, (Date.now() - began.getTime()) / 1000);
  const today = began.toDateString() === new Date().toDateString();
  const when = today ? began.toLocaleTimeString() : formatTime(since);
  return `since ${when} (${formatDuration(lasted)})`;
}

/** A note that zones were drawn on the view before the accepted one, or null. */
export function oldViewNote(health) {
  if (!health || !health.zones_on_old_view || !health.zones_on_old_view.length) return null;
  const zones = health.zones_on_old_view;
  const when = health.reference_made_at ? formatTime(health.reference_made_at) : "the new view was accepted";
  const who = health.reference_accepted_by ? ` by ${health.reference_accepted_by}` : "";
  return (
    `${zones.length === 1 ? "Zone" : "Zones"} ${zones.join(", ")} ${zones.length === 1 ? "was" : "were"} drawn on the ` +
    `view before ${when} (accepted${who}): check them on the new view and save the zones.`
  );
}

/** Accept the camera's current view as its reference (admin); the camera's health after it. */
export function acceptView(camera) {
  return api(`/api/v1/cameras/${encodeURIComponent(camera)}/health/accept-view`, { method: "POST" });
}

/** A short "Accept the new view" confirmation text. */
export function acceptQuestion(camera) {
  return (
    `Make what ${camera} sees now its reference view? Do this only when the camera was turned on purpose. ` +
    "Its zones stay as they are: check them on the new view afterwards."
  );
}

/** A link to an incident page. */
export function incidentLink(id, text) {
  return el("a", { href: `/events/${encodeURIComponent(id)}` }, text);
}
