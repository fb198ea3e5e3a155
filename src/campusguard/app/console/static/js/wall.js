// The camera wall: a tile per camera with its live view (MJPEG) or a still refreshed every second,
// and its status (state, frame rates, drops, reconnects, age of the last frame), polled every 2 s;
// a red marker on a tile whose camera has open (unacknowledged) incidents, with their number and a
// link to them, refreshed whenever the live event stream reports a change (and every 15 s); a band over
// the view of a camera that cannot see (camera health: offline, covered, frozen, blurred, moved), with
// since when and a link to its incident.
import "./nav.js";
import { api, el, eventStream, hasRole, showError } from "./api.js";
import { HEALTH_LABELS, HEALTH_WHY, incidentLink, isProblem, sinceWords } from "./health_words.js";

const LIVE_LIMIT = 4; // browsers allow ~6 connections per site over HTTP/1.1: more cameras use stills
const STATUS_EVERY_MS = 2000;
const STILL_EVERY_MS = 1000;
const STATE_LABELS = {
  starting: "Starting", live: "Live", reconnecting: "Reconnecting", offline: "Offline", stopped: "Stopped", failed: "Failed",
  unassigned: "No node runs it",
};

const wall = document.getElementById("wall");
const errorBox = document.getElementById("wall-error");
const summary = document.getElementById("wall-summary");
const modeSelect = document.getElementById("view-mode");
const diskUse = document.getElementById("disk-use");
const DISK_EVERY_MS = 30000;
const tiles = new Map(); // camera name -> {root, img, badge, marker, stats, name, timer}
const INCIDENTS_EVERY_MS = 15000;
let openCounts = {}; // camera name -> open incidents

modeSelect.value = localStorage.getItem("cg-wall-mode") || "auto";

function liveMode() {
  const mode = modeSelect.value;
  return mode === "live" || (mode === "auto" && tiles.size <= LIVE_LIMIT);
}

function cameraPath(name, leaf) {
  return `/api/v1/cameras/${encodeURIComponent(name)}/${leaf}`;
}

function makeTile(camera) {
  const img = el("img", { class: "frame", alt: `Camera ${camera.name}` });
  const placeholder = el("div", { class: "placeholder" }, "No picture yet");
  const badge = el("span", { class: "badge" });
  const marker = el("a", {
    class: "incident-marker",
    href: `/events?camera=${encodeURIComponent(camera.name)}&state=open`,
    hidden: true,
  });
  const stats = el("p", { class: "stats muted" });
  const health = el("div", { class: "health-band", hidden: true });
  const links = el(
    "p",
    { class: "links" },
    el("a", { href: `/events?camera=${encodeURIComponent(camera.name)}` }, "Incidents"),
    el("a", { href: `/zones/${encodeURIComponent(camera.name)}` }, hasRole("admin") ? "Edit zones" : "Zones"),
  );
  const root = el(
    "article",
    { class: "tile card", dataset: { camera: camera.name } },
    el("div", { class: "view" }, img, placeholder, health, badge, marker),
    el("header", {}, el("h2", {}, camera.name), links),
    stats,
  );
  const tile = { root, img, placeholder, badge, marker, stats, health, name: camera.name, timer: null, retry: null };
  showMarker(tile);
  img.addEventListener("load", () => {
    placeholder.hidden = true;
    root.classList.add("has-frame");
  });
  img.addEventListener("error", () => {
    placeholder.hidden = false;
    if (liveMode() && !document.hidden) {
      clearTimeout(tile.retry);
      tile.retry = setTimeout(() => startView(tile), 3000); // the stream ended or is not there yet
    }
  });
  return tile;
}

/** The tile's open-incident marker: "3 open" linking to them, hidden at none. */
function showMarker(tile) {
  const n = openCounts[tile.name] || 0;
  tile.marker.hidden = n === 0;
  tile.marker.textContent = `${n} open`;
  tile.marker.title = `${n} open incident${n === 1 ? "" : "s"} on ${tile.name}: show them`;
  tile.root.classList.toggle("has-incident", n > 0);
}

async function pollIncidents() {
  try {
    openCounts = (await api("/api/v1/open-incidents")).cameras;
    tiles.forEach(showMarker);
  } catch (err) {
    // the camera status line reports an unreachable server; keep the last markers
  }
}

let incidentsTimer = null;
function refreshIncidentsSoon() {
  clearTimeout(incidentsTimer); // a burst of events costs one request
  incidentsTimer = setTimeout(pollIncidents, 300);
}

function stopView(tile) {
  clearInterval(tile.timer);
  clearTimeout(tile.retry);
  tile.timer = null;
  tile.img.removeAttribute("src"); // closes an MJPEG connection
}

function startView(tile) {
  stopView(tile);
  if (document.hidden) return;
  if (liveMode()) {
    tile.img.src = cameraPath(tile.name, "live.mjpeg") + `?t=${Date.now()}`;
    return;
  }
  let loading = false;
  const refresh = () => {
    if (loading) return; // never pile up requests on a slow link
    loading = true;
    const next = new Image();
    next.onload = () => {
      tile.img.src = next.src;
      loading = false;
    };
    next.onerror = () => {
      tile.placeholder.hidden = tile.root.classList.contains("has-frame");
      loading = false;
    };
    next.src = cameraPath(tile.name, "snapshot.jpg") + `?t=${Date.now()}`;
  };
  refresh();
  tile.timer = setInterval(refresh, STILL_EVERY_MS);
}

/** The band over the view of a camera that cannot see: the problem, why, since when, its incident. */
function showHealth(tile, health) {
  const state = health ? health.state : null;
  const problem = isProblem(state);
  tile.root.classList.toggle("cannot-see", problem);
  tile.root.dataset.health = state || "";
  tile.health.hidden = !problem;
  if (!problem) {
    tile.health.replaceChildren();
    return;
  }
  const since = sinceWords(health.since);
  tile.health.title = HEALTH_WHY[state] || "";
  tile.health.replaceChildren(
    el("strong", { class: "health-problem" }, HEALTH_LABELS[state] || state),
    since ? el("span", { class: "health-since" }, since) : null,
    health.event_id ? incidentLink(health.event_id, "Incident") : null,
  );
}

function fps(value) {
  return Number.isFinite(value) ? value.toFixed(1) : "–";
}

function updateStatus(tile, camera) {
  tile.badge.textContent = STATE_LABELS[camera.state] || camera.state;
  tile.badge.className = `badge cam-${camera.state}`;
  const age = camera.last_frame_time ? Math.max(0, Date.now() / 1000 - camera.last_frame_time) : null;
  const parts = [
    `${fps(camera.input_fps)} fps in`,
    `${fps(camera.processed_fps)} processed`,
    `${camera.dropped_frames} dropped`,
    `${camera.reconnects} reconnects`,
  ];
  if (camera.width && camera.height) parts.push(`${camera.width}×${camera.height}`);
  if (camera.node) parts.push(`on node ${camera.node}`); // with several serve nodes: who runs it now
  parts.push(age === null ? "no frame yet" : `last frame ${age < 10 ? age.toFixed(1) : Math.round(age)} s ago`);
  if (camera.health && camera.health.state === "learning") parts.push("learning its view");
  tile.stats.textContent = parts.join(" · ");
  showHealth(tile, camera.health);
}

async function poll() {
  try {
    const cameras = await api("/api/v1/cameras");
    showError(errorBox, "");
    let added = false;
    for (const camera of cameras) {
      if (!tiles.has(camera.name)) {
        const tile = makeTile(camera);
        tiles.set(camera.name, tile);
        wall.append(tile.root);
        added = true;
      }
      updateStatus(tiles.get(camera.name), camera);
    }
    if (added) {
      wall.dataset.count = String(Math.min(tiles.size, 3)); // one or two cameras get bigger tiles
      tiles.forEach(startView);
    }
    const live = cameras.filter((c) => c.state === "live").length;
    const blind = cameras.filter((c) => c.health && isProblem(c.health.state)).length;
    summary.textContent = cameras.length ? `${live} of ${cameras.length} live` : "No cameras configured";
    if (blind) summary.textContent += ` · ${blind} cannot see`;
  } catch (err) {
    showError(errorBox, `Camera status unavailable: ${err.message}`);
  }
}

function bytes(n) {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i += 1; }
  return `${n < 10 && i ? n.toFixed(1) : Math.round(n)} ${units[i]}`;
}

// The disk line: free space of the data volume, media kept by kind, and a warning when a volume is
// full or free space is under the retention floor (the cleanup deletes the oldest media then).
async function pollDisk() {
  try {
    const s = await api("/api/v1/storage");
    const kinds = Object.entries(s.media_bytes).map(([k, n]) => `${k} ${bytes(n)}`).join(", ");
    const parts = [`Disk: ${bytes(s.free_bytes)} free of ${bytes(s.total_bytes)}`];
    if (kinds) parts.push(`media ${kinds}` + (s.max_media_bytes ? ` (limit ${bytes(s.max_media_bytes)})` : ""));
    const low = s.full_volumes.length > 0 || s.free_bytes < s.min_free_bytes;
    if (s.full_volumes.length) parts.push(`FULL: ${s.full_volumes.map((v) => v.volume).join(", ")}`);
    else if (low) parts.push("below the free-space floor");
    diskUse.textContent = parts.join(" · ");
    diskUse.className = low ? "error" : "muted";
  } catch (err) {
    diskUse.textContent = "";
  }
}

modeSelect.addEventListener("change", () => {
  localStorage.setItem("cg-wall-mode", modeSelect.value);
  tiles.forEach(startView);
});
document.addEventListener("visibilitychange", () => tiles.forEach(document.hidden ? stopView : startView));

poll();
setInterval(poll, STATUS_EVERY_MS);
pollDisk();
setInterval(pollDisk, DISK_EVERY_MS);
pollIncidents();
setInterval(pollIncidents, INCIDENTS_EVERY_MS);
eventStream(refreshIncidentsSoon, (state) => {
  if (state === "live") refreshIncidentsSoon(); // catch up on what changed while disconnected
});
