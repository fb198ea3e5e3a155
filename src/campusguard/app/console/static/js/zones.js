// The zone and line editor, drawn over the camera's snapshot in an SVG whose coordinates are frame
// pixels. Click to add points to the selected zone or line, drag a point to move it, double-click it
// (or Delete) to remove it; Save sends PUT /api/v1/cameras/{name}/zones, which validates with the
// config models, applies the zones to the running camera and rewrites the config file. Each shape
// keeps the units it has in the config (pixels or fractions of the frame).
import "./nav.js";
import { ApiError, api, el, hasRole, showError } from "./api.js";

const SVG = "http://www.w3.org/2000/svg";
const camera = document.body.dataset.camera;
const zonesPath = `/api/v1/cameras/${encodeURIComponent(camera)}/zones`;
const canEdit = hasRole("admin");

const image = document.getElementById("zone-image");
const svg = document.getElementById("overlay");
const list = document.getElementById("shape-list");
const props = document.getElementById("shape-props");
const nameInput = document.getElementById("shape-name");
const inSideLabel = document.getElementById("in-side-label");
const inSide = document.getElementById("shape-in-side");
const info = document.getElementById("shape-info");
const statusLine = document.getElementById("zones-status");
const errorBox = document.getElementById("zones-error");

let frame = { w: 0, h: 0 }; // frame size in pixels (the config's pixel units)
let shapes = []; // {type: "zone"|"line", data: {...config fields}, pts: [[x, y] in pixels]}
let selected = -1;
let selectedPoint = -1;
let dragging = null;
let dirty = false;
let lastDown = null; // the last pointer-down on a point, to tell a double click
let saved = null; // the last body read from or saved to the server

document.getElementById("zones-title").textContent = `Zones of ${camera}`;
if (!canEdit) {
  document.getElementById("readonly-note").hidden = false;
  document.getElementById("edit-tools").hidden = true;
}

function toPixels(points, units) {
  return units === "fraction" ? points.map(([x, y]) => [x * frame.w, y * frame.h]) : points.map(([x, y]) => [x, y]);
}

function fromPixels(points, units) {
  const round = (v, digits) => Number(v.toFixed(digits));
  return units === "fraction"
    ? points.map(([x, y]) => [round(x / frame.w, 4), round(y / frame.h, 4)])
    : points.map(([x, y]) => [round(x, 1), round(y, 1)]);
}

function load(body) {
  saved = body;
  shapes = [
    ...body.zones.map((z) => ({ type: "zone", data: { ...z }, pts: toPixels(z.polygon, z.units) })),
    ...body.lines.map((l) => ({ type: "line", data: { ...l }, pts: toPixels(l.points, l.units) })),
  ];
  if (selected >= shapes.length) selected = -1;
  selectedPoint = -1;
  dirty = false;
  render();
}

function body() {
  const zones = [];
  const lines = [];
  for (const s of shapes) {
    if (s.type === "zone") zones.push({ ...s.data, polygon: fromPixels(s.pts, s.data.units) });
    else lines.push({ ...s.data, points: fromPixels(s.pts, s.data.units) });
  }
  return { zones, lines };
}

function problems() {
  const seen = new Set();
  for (const s of shapes) {
    const key = `${s.type}:${s.data.name}`;
    if (!s.data.name) return `every ${s.type} needs a name`;
    if (seen.has(key)) return `the name ${s.data.name} is used by two ${s.type}s`;
    seen.add(key);
    if (s.type === "zone" && s.pts.length < 3) return `zone ${s.data.name} needs at least 3 points (it has ${s.pts.length})`;
    if (s.type === "line" && s.pts.length !== 2) return `line ${s.data.name} needs 2 points (it has ${s.pts.length})`;
  }
  return "";
}

function markDirty() {
  dirty = true;
  statusLine.textContent = "Unsaved changes.";
}

function svgEl(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

function handleRadius() {
  const shown = svg.getBoundingClientRect().width || frame.w;
  return (7 * frame.w) / shown; // about 7 screen pixels whatever the zoom
}

function render() {
  svg.replaceChildren();
  renderList();
  if (!frame.w) return;
  svg.setAttribute("viewBox", `0 0 ${frame.w} ${frame.h}`);
  svg.setAttribute("preserveAspectRatio", "none");
  const r = handleRadius();
  shapes.forEach((s, i) => {
    const cls = `${s.type}${i === selected ? " selected" : ""}`;
    const pts = s.pts.map((p) => p.join(",")).join(" ");
    const g = svgEl("g", { class: cls, "data-index": i });
    if (s.type === "zone") {
      g.append(svgEl(s.pts.length >= 3 ? "polygon" : "polyline", { points: pts, class: "shape" }));
    } else {
      g.append(svgEl("polyline", { points: pts, class: "shape" }));
      if (s.pts.length === 2) {
        const [[x1, y1], [x2, y2]] = s.pts;
        const len = Math.hypot(x2 - x1, y2 - y1) || 1;
        const side = s.data.in_side === "left" ? -1 : 1; // right of the direction of travel, on screen
        const nx = (-(y2 - y1) / len) * side;
        const ny = ((x2 - x1) / len) * side;
        const mx = (x1 + x2) / 2;
        const my = (y1 + y2) / 2;
        const label = svgEl("text", { x: mx + nx * r * 3, y: my + ny * r * 3, class: "side", "font-size": r * 2.2 });
        label.textContent = "in";
        g.append(label);
      }
    }
    if (s.pts.length) {
      const [lx, ly] = s.pts[0];
      const size = r * 2.4;
      const nearRight = lx > frame.w * 0.7; // anchor the name on its end there, so it stays in the picture
      const label = svgEl("text", {
        x: nearRight ? lx - r * 1.5 : lx + r * 1.5, y: Math.max(ly - r * 1.5, size * 1.1), class: "label",
        "font-size": size, "text-anchor": nearRight ? "end" : "start",
      });
      label.textContent = s.data.name;
      g.append(label);
    }
    s.pts.forEach(([x, y], k) => {
      const handle = svgEl("circle", {
        cx: x, cy: y, r, class: `handle${i === selected && k === selectedPoint ? " active" : ""}`,
        "data-index": i, "data-point": k,
      });
      g.append(handle);
    });
    svg.append(g);
  });
}

function renderList() {
  list.replaceChildren(
    ...shapes.map((s, i) => {
      const count = s.type === "zone" ? `${s.pts.length} points` : `${s.pts.length}/2 points`;
      const button = el(
        "button",
        { type: "button", class: `shape-button${i === selected ? " selected" : ""}`, dataset: { index: i } },
        el("span", { class: `swatch ${s.type}` }),
        `${s.data.name}`,
        el("small", { class: "muted" }, ` ${s.type} · ${count} · ${s.data.units}`),
      );
      button.addEventListener("click", () => select(i));
      return el("li", {}, button);
    }),
  );
  if (!shapes.length) list.append(el("li", { class: "muted" }, "No zones or lines yet."));
  const s = shapes[selected];
  props.disabled = !s || !canEdit;
  nameInput.value = s ? s.data.name : "";
  inSideLabel.hidden = !s || s.type !== "line";
  if (s && s.type === "line") inSide.value = s.data.in_side || "right";
  info.textContent = s
    ? s.type === "zone"
      ? "Click the picture to add a corner."
      : s.pts.length < 2 ? "Click the picture to place the line's ends." : "Drag the ends to move the line."
    : "";
}

function select(i) {
  selected = i;
  selectedPoint = -1;
  render();
}

function framePoint(event) {
  const ctm = svg.getScreenCTM();
  if (!ctm) return null;
  const p = new DOMPoint(event.clientX, event.clientY).matrixTransform(ctm.inverse());
  return [Math.min(frame.w, Math.max(0, p.x)), Math.min(frame.h, Math.max(0, p.y))];
}

function uniqueName(prefix) {
  const names = new Set(shapes.map((s) => s.data.name));
  let n = 1;
  while (names.has(`${prefix}${n}`)) n += 1;
  return `${prefix}${n}`;
}

function deletePoint() {
  const s = shapes[selected];
  if (!s || selectedPoint < 0) return;
  s.pts.splice(selectedPoint, 1);
  selectedPoint = -1;
  markDirty();
  render();
}

if (canEdit) {
  svg.addEventListener("pointerdown", (event) => {
    const target = event.target;
    if (target.classList.contains("handle")) {
      selected = Number(target.dataset.index);
      selectedPoint = Number(target.dataset.point);
      // a double click (detected here: every render replaces the handles, so no dblclick event) deletes
      const now = performance.now();
      const again = lastDown && lastDown.index === selected && lastDown.point === selectedPoint && now - lastDown.time < 450;
      lastDown = again ? null : { index: selected, point: selectedPoint, time: now };
      if (again) {
        deletePoint();
        event.preventDefault();
        return;
      }
      dragging = { index: selected, point: selectedPoint, moved: false };
      svg.setPointerCapture(event.pointerId);
      render();
      event.preventDefault();
      return;
    }
    const group = target.closest("g");
    const index = group ? Number(group.dataset.index) : -1;
    if (index >= 0 && index !== selected) {
      select(index); // clicking another shape selects it
      return;
    }
    const s = shapes[selected];
    if (!s) {
      statusLine.textContent = "Select a zone or line first, or add one.";
      return;
    }
    if (s.type === "line" && s.pts.length >= 2) {
      statusLine.textContent = "A line has two ends: drag them to move it.";
      return;
    }
    const p = framePoint(event);
    if (!p) return;
    s.pts.push(p);
    selectedPoint = s.pts.length - 1;
    markDirty();
    render();
  });
  svg.addEventListener("pointermove", (event) => {
    if (!dragging) return;
    const p = framePoint(event);
    if (!p) return;
    shapes[dragging.index].pts[dragging.point] = p;
    dragging.moved = true;
    render();
  });
  const stopDrag = () => {
    if (dragging && dragging.moved) markDirty();
    dragging = null;
  };
  svg.addEventListener("pointerup", stopDrag);
  svg.addEventListener("pointercancel", stopDrag);
  document.addEventListener("keydown", (event) => {
    if ((event.key === "Delete" || event.key === "Backspace") && !event.target.closest("input, textarea, select")) {
      deletePoint();
      event.preventDefault();
    }
  });
  document.getElementById("add-zone").addEventListener("click", () => {
    shapes.push({ type: "zone", data: { name: uniqueName("zone"), units: "pixels" }, pts: [] });
    select(shapes.length - 1);
    markDirty();
  });
  document.getElementById("add-line").addEventListener("click", () => {
    shapes.push({ type: "line", data: { name: uniqueName("line"), units: "pixels", in_side: "right" }, pts: [] });
    select(shapes.length - 1);
    markDirty();
  });
  document.getElementById("delete-point").addEventListener("click", deletePoint);
  document.getElementById("delete-shape").addEventListener("click", () => {
    if (selected < 0) return;
    shapes.splice(selected, 1);
    selected = -1;
    selectedPoint = -1;
    markDirty();
    render();
  });
  nameInput.addEventListener("input", () => {
    const s = shapes[selected];
    if (!s) return;
    s.data.name = nameInput.value.trim();
    markDirty();
    render();
    nameInput.focus();
  });
  inSide.addEventListener("change", () => {
    const s = shapes[selected];
    if (!s) return;
    s.data.in_side = inSide.value;
    markDirty();
    render();
  });
  document.getElementById("save").addEventListener("click", async () => {
    showError(errorBox, "");
    const problem = problems();
    if (problem) {
      showError(errorBox, `Not saved: ${problem}.`);
      return;
    }
    try {
      load(await api(zonesPath, { method: "PUT", body: body() }));
      statusLine.textContent = `Saved at ${new Date().toLocaleTimeString()}: applied to the running camera.`;
    } catch (err) {
      const status = err instanceof ApiError ? err.status : 0;
      showError(errorBox, status === 403 ? "Only an admin can change zones." : `Not saved: ${err.message}`);
    }
  });
  document.getElementById("revert").addEventListener("click", async () => {
    showError(errorBox, "");
    load(await api(zonesPath));
    statusLine.textContent = "Reverted to the saved zones.";
  });
  window.addEventListener("beforeunload", (event) => {
    if (dirty) event.preventDefault();
  });
}

function refreshSnapshot() {
  image.src = `/api/v1/cameras/${encodeURIComponent(camera)}/snapshot.jpg?t=${Date.now()}`;
}
let snapshotRetry = null;
image.addEventListener("load", () => {
  if (!frame.w) {
    frame = { w: image.naturalWidth, h: image.naturalHeight };
    if (saved && !dirty) load(saved); // fractions can be placed now that the frame size is known
  }
  if (statusLine.textContent.startsWith("Waiting")) statusLine.textContent = "";
  render();
});
image.addEventListener("error", () => {
  statusLine.textContent = "Waiting for the camera's first frame…";
  clearTimeout(snapshotRetry);
  snapshotRetry = setTimeout(refreshSnapshot, 2000);
});
document.getElementById("refresh-snapshot").addEventListener("click", refreshSnapshot);
window.addEventListener("resize", render);

async function init() {
  try {
    const cameras = await api("/api/v1/cameras");
    const select = document.getElementById("camera-select");
    for (const c of cameras) select.append(el("option", { value: c.name, selected: c.name === camera }, c.name));
    select.addEventListener("change", () => location.assign(`/zones/${encodeURIComponent(select.value)}`));
    const me = cameras.find((c) => c.name === camera);
    if (me && me.width && me.height) frame = { w: me.width, h: me.height };
    load(await api(zonesPath));
  } catch (err) {
    showError(errorBox, err.message);
  }
  refreshSnapshot();
}
init();
