// The zone editor: zones, lines and privacy masks drawn over the camera's snapshot in an SVG whose
// coordinates are frame pixels, and the rules attached to them. Save sends PUT
// /api/v1/cameras/{name}/zones with zones, lines, rules and privacy; the server validates with the
// config models, applies it to the running camera (rules left as they were keep their incidents)
// and rewrites the config file. Each shape keeps the units it has in the config (pixels or fractions).
// Saves are conditional: the PUT carries If-Match with the ETag of this camera's zones as loaded
// (a revision of this camera's section only: saves to other cameras never make it stale), so a copy
// another admin (or a hand edit of the file) has changed since is refused (409) and the editor
// offers to reload theirs.
//
// Rule forms come from GET /api/v1/rule-kinds: each kind's target (zone or line) and the fields of
// its config model (type, bounds, default, choices), so no list of fields is written here.
import "./nav.js";
import { ApiError, api, apiVersioned, el, hasRole, loadKinds, showError } from "./api.js";
import { oldViewNote } from "./health_words.js";

const SVG = "http://www.w3.org/2000/svg";
const camera = document.body.dataset.camera;
const zonesPath = `/api/v1/cameras/${encodeURIComponent(camera)}/zones`;
const canEdit = hasRole("admin");
const LAYERS = { mask: 0, zone: 1, line: 2 }; // drawing order: masks below zones below lines
const TYPE_WORD = { zone: "zone", line: "line", mask: "privacy mask" };

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
const reloadButton = document.getElementById("reload-zones"); // offered when someone else saved since
const doneButton = document.getElementById("done-drawing");
const addPointsButton = document.getElementById("add-points");
const ruleList = document.getElementById("rule-list");
const rulesTitle = document.getElementById("rules-title");
const rulesNote = document.getElementById("rules-note");
const addRule = document.getElementById("add-rule");
const ruleKind = document.getElementById("rule-kind");
const blurSelect = document.getElementById("privacy-blur");

let frame = { w: 0, h: 0 }; // frame size in pixels (the config's pixel units)
let shapes = []; // {type: "zone"|"line"|"mask", data: {...config fields}, pts: [[x, y] in pixels]}
let rules = []; // {data: {...config fields}, shape: the shape it watches, or null (the whole frame)}
let privacy = { masks: [], blur: "none" }; // the privacy section but its masks (those are shapes)
let kinds = []; // GET /api/v1/rule-kinds' kinds: {kind, label, target, target_optional, fields}
let selected = -1;
let selectedPoint = -1;
let drawing = false; // clicks add points to the selected shape, wherever they land
let dragging = null;
let dirty = false;
let lastDown = null; // the last pointer-down on a point, to tell a double click
let saved = null; // the last body read from or saved to the server
let revision = null; // this camera's zones revision (the ETag): sent as If-Match, so a stale copy is never saved

document.getElementById("zones-title").textContent = `Zones of ${camera}`;
if (!canEdit) {
  document.getElementById("readonly-note").hidden = false;
  document.getElementById("edit-tools").hidden = true;
  addRule.hidden = true;
  blurSelect.disabled = true;
}

// the toolbar sticks under the navigation bar, whatever height that has
function placeToolbar() {
  const nav = document.querySelector("nav.top");
  document.documentElement.style.setProperty("--nav-h", `${nav ? nav.offsetHeight : 0}px`);
}
placeToolbar();

function toPixels(points, units) {
  return units === "fraction" ? points.map(([x, y]) => [x * frame.w, y * frame.h]) : points.map(([x, y]) => [x, y]);
}

function fromPixels(points, units) {
  const round = (v, digits) => Number(v.toFixed(digits));
  return units === "fraction"
    ? points.map(([x, y]) => [round(x / frame.w, 4), round(y / frame.h, 4)])
    : points.map(([x, y]) => [round(x, 1), round(y, 1)]);
}

function kindOf(kind) {
  return kinds.find((k) => k.kind === kind);
}

function targetKey(kind) {
  const k = kindOf(kind);
  return k && k.target ? k.target : null;
}

/** Load the camera's saved zones and their revision from the server. */
async function loadSaved() {
  const answer = await apiVersioned(zonesPath);
  revision = answer.etag;
  load(answer.data);
}

function load(body) {
  saved = body;
  shapes = [
    ...body.zones.map((z) => ({ type: "zone", data: { ...z }, pts: toPixels(z.polygon, z.units) })),
    ...body.lines.map((l) => ({ type: "line", data: { ...l }, pts: toPixels(l.points, l.units) })),
    ...(body.privacy?.masks || []).map((m) => ({ type: "mask", data: { ...m }, pts: toPixels(m.polygon, m.units) })),
  ];
  const { masks: _masks, ...rest } = body.privacy || {}; // the masks are shapes now
  privacy = rest;
  blurSelect.value = privacy.blur || "none";
  rules = (body.rules || []).map((r) => {
    const key = targetKey(r.kind) || (r.line !== undefined ? "line" : "zone");
    const shape = r[key] ? shapes.find((s) => s.type === key && s.data.name === r[key]) || null : null;
    return { data: { ...r }, shape };
  });
  if (selected >= shapes.length) selected = -1;
  selectedPoint = -1;
  setDrawing(false);
  dirty = false;
  render();
}

function body() {
  const zones = [];
  const lines = [];
  const masks = [];
  for (const s of shapes) {
    if (s.type === "zone") zones.push({ ...s.data, polygon: fromPixels(s.pts, s.data.units) });
    else if (s.type === "mask") masks.push({ ...s.data, polygon: fromPixels(s.pts, s.data.units) });
    else lines.push({ ...s.data, points: fromPixels(s.pts, s.data.units) });
  }
  const ruleBodies = rules.map((r) => {
    const data = { ...r.data };
    const key = targetKey(data.kind);
    if (key) data[key] = r.shape ? r.shape.data.name : data[key] ?? null;
    return data;
  });
  return { zones, lines, rules: ruleBodies, privacy: { ...privacy, masks } };
}

function problems() {
  const seen = new Set();
  for (const s of shapes) {
    const word = TYPE_WORD[s.type];
    const key = `${s.type}:${s.data.name}`;
    if (!s.data.name) return `every ${word} needs a name`;
    if (seen.has(key)) return `the name ${s.data.name} is used by two ${word}s`;
    seen.add(key);
    if (s.type !== "line" && s.pts.length < 3) return `${word} ${s.data.name} needs at least 3 points (it has ${s.pts.length})`;
    if (s.type === "line" && s.pts.length !== 2) return `line ${s.data.name} needs 2 points (it has ${s.pts.length})`;
  }
  for (const r of rules) {
    if (Array.isArray(r.data.classes) && !r.data.classes.length) return `rule ${ruleTitle(r)} needs at least one class`;
  }
  return "";
}

function markDirty() {
  dirty = true;
  statusLine.textContent = "Unsaved changes.";
}

function setDrawing(on) {
  drawing = on && canEdit && !!shapes[selected];
  doneButton.hidden = !drawing;
  svg.classList.toggle("drawing", drawing);
  if (drawing) {
    const s = shapes[selected];
    statusLine.textContent =
      s.type === "line"
        ? `Drawing line ${s.data.name}: click its two ends.`
        : `Drawing ${TYPE_WORD[s.type]} ${s.data.name}: click to add corners, Enter when done.`;
  }
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

/** Shape indexes in drawing order: masks, zones, lines, and the selected shape on top. */
function drawOrder() {
  const order = shapes.map((_, i) => i).sort((a, b) => LAYERS[shapes[a].type] - LAYERS[shapes[b].type] || a - b);
  if (selected >= 0) order.push(...order.splice(order.indexOf(selected), 1));
  return order;
}

function render() {
  svg.replaceChildren();
  renderList();
  renderRules();
  if (!frame.w) return;
  svg.setAttribute("viewBox", `0 0 ${frame.w} ${frame.h}`);
  svg.setAttribute("preserveAspectRatio", "none");
  const r = handleRadius();
  for (const i of drawOrder()) {
    const s = shapes[i];
    const cls = `${s.type}${i === selected ? " selected" : ""}`;
    const pts = s.pts.map((p) => p.join(",")).join(" ");
    const g = svgEl("g", { class: cls, "data-index": i });
    if (s.type !== "line") {
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
      label.textContent = s.type === "mask" ? `${s.data.name} (mask)` : s.data.name;
      g.append(label);
    }
    s.pts.forEach(([x, y], k) => {
      g.append(svgEl("circle", {
        cx: x, cy: y, r, class: `handle${i === selected && k === selectedPoint ? " active" : ""}`,
        "data-index": i, "data-point": k,
      }));
    });
    svg.append(g);
  }
}

function shapeRules(s) {
  return rules.filter((r) => r.shape === s);
}

function renderList() {
  const byLayer = shapes.map((s, i) => [s, i]).sort(([a, i], [b, j]) => LAYERS[a.type] - LAYERS[b.type] || i - j);
  list.replaceChildren(
    ...byLayer.map(([s, i]) => {
      const count = s.type === "line" ? `${s.pts.length}/2 points` : `${s.pts.length} points`;
      const n = shapeRules(s).length;
      const ruleCount = s.type === "mask" ? "" : ` · ${n} rule${n === 1 ? "" : "s"}`;
      const button = el(
        "button",
        { type: "button", class: `shape-button${i === selected ? " selected" : ""}`, dataset: { index: i, type: s.type } },
        el("span", { class: `swatch ${s.type}` }),
        `${s.data.name}`,
        el("small", { class: "muted" }, ` ${TYPE_WORD[s.type]} · ${count}${ruleCount}`),
      );
      button.addEventListener("click", () => {
        select(i);
        list.querySelector(`button[data-index="${i}"]`)?.focus(); // the list was drawn again: keep the focus
      });
      return el("li", {}, button);
    }),
  );
  if (!shapes.length) list.append(el("li", { class: "muted" }, "No zones, lines or masks yet."));
  const s = shapes[selected];
  props.disabled = !s || !canEdit;
  nameInput.value = s ? s.data.name : "";
  inSideLabel.hidden = !s || s.type !== "line";
  addPointsButton.hidden = !s || drawing || (s.type === "line" && s.pts.length >= 2);
  if (s && s.type === "line") inSide.value = s.data.in_side || "right";
  info.textContent = !s
    ? ""
    : drawing
      ? s.type === "line" ? "Click the picture to place the line's ends." : "Click the picture to add corners; Enter when done."
      : s.type === "line" && s.pts.length >= 2 ? "Drag the ends to move the line." : "Drag a corner to move it; Add points to add more.";
}

// rules ------------------------------------------------------------------------------------------
function ruleTitle(r) {
  const k = kindOf(r.data.kind);
  return r.data.name || `${k ? k.label : r.data.kind}`;
}

function ruleSummary(r) {
  const k = kindOf(r.data.kind);
  const parts = r.data.name ? [k ? k.label : r.data.kind] : []; // the title is the kind's label otherwise
  if (Array.isArray(r.data.classes)) parts.push(r.data.classes.join(", "));
  for (const f of k ? k.fields : []) {
    if (!f.advanced && (f.type === "number" || f.type === "integer") && r.data[f.name] !== null && r.data[f.name] !== undefined) {
      parts.push(`${f.title.toLowerCase()} ${r.data[f.name]}`);
      break;
    }
  }
  return parts.join(" · ");
}

/** Kinds a rule on the selected shape (or on the whole frame when none is) can be. */
function applicableKinds(s) {
  if (!s) return kinds.filter((k) => !k.target || k.target_optional);
  return kinds.filter((k) => k.target === s.type);
}

function renderRules() {
  const s = shapes[selected];
  ruleList.replaceChildren();
  if (s && s.type === "mask") {
    rulesTitle.textContent = "Rules";
    rulesNote.textContent = "A privacy mask has no rules: nothing under it is analysed.";
    addRule.hidden = true;
    return;
  }
  const mine = rules.filter((r) => r.shape === (s || null));
  rulesTitle.textContent = s ? `Rules on ${TYPE_WORD[s.type]} ${s.data.name}` : "Rules on the whole frame";
  rulesNote.textContent = mine.length
    ? ""
    : s ? `No rules on this ${TYPE_WORD[s.type]} yet.` : "Select a zone or line to see its rules.";
  for (const r of mine) ruleList.append(ruleForm(r));
  const options = applicableKinds(s);
  ruleKind.replaceChildren(...options.map((k) => el("option", { value: k.kind }, k.label)));
  addRule.hidden = !canEdit || !options.length;
}

/** A list of free texts (a checklist's steps): one labelled input per item, add and remove buttons. */
function stepsInput(f, value, id) {
  const box = el("fieldset", { class: "steps", id, dataset: { widget: f.name, field: f.name } }, el("legend", {}, f.title));
  const items = el("ol", { class: "step-list" });
  const step = (text) => {
    const n = items.childElementCount + 1;
    const input = el("input", {
      id: `${id}-${n}`, type: "text", class: "step", value: text, required: true, maxlength: 300,
      disabled: !canEdit, dataset: { field: f.name },
    });
    const remove = el("button", { type: "button", class: "quiet remove-step", hidden: !canEdit }, "Remove");
    const item = el("li", {}, el("label", { for: `${id}-${n}` }, `Step ${n}`), input, remove);
    remove.addEventListener("click", () => {
      item.remove();
      items.querySelectorAll("li").forEach((li, i) => {
        li.querySelector("label").textContent = `Step ${i + 1}`;
        li.querySelector(".remove-step").setAttribute("aria-label", `Remove step ${i + 1}`);
      });
      box.dispatchEvent(new Event("change", { bubbles: true }));
    });
    remove.setAttribute("aria-label", `Remove step ${n}`);
    items.append(item);
    return input;
  };
  for (const text of Array.isArray(value) ? value : []) step(text);
  const add = el("button", { type: "button", class: "quiet add-step", hidden: !canEdit }, "Add step");
  add.addEventListener("click", () => step("").focus()); // saved once it is typed in (the change event)
  box.append(items, add, el("p", { class: "muted small" }, f.description));
  return box;
}

/** A nested section (escalation): on or off, then its own fields; a list of choices as checkboxes. */
function sectionInput(f, value, id) {
  const box = el("fieldset", { class: "section", id, dataset: { widget: f.name, field: f.name } }, el("legend", {}, f.title));
  const on = el("input", { id: `${id}-on`, type: "checkbox", class: "section-on", checked: !!value, disabled: !canEdit, dataset: { field: f.name } });
  const inner = el("div", { class: "section-fields", hidden: !value });
  box.append(el("label", { class: "inline check", for: `${id}-on` }, on, `${f.title}: ${f.description}`), inner);
  on.addEventListener("change", () => (inner.hidden = !on.checked));
  for (const sub of f.fields) {
    const subId = `${id}-${sub.name}`;
    const current = value ? value[sub.name] : undefined;
    const common = { disabled: !canEdit, dataset: { field: f.name, sub: sub.name } };
    if (sub.type === "list" && sub.choices.length) {
      const chosen = new Set(Array.isArray(current) ? current : []);
      const group = el("fieldset", { class: "choices", dataset: { sub: sub.name } }, el("legend", {}, sub.title));
      sub.choices.forEach((c, i) => {
        const input = el("input", { ...common, id: `${subId}-${i}`, type: "checkbox", value: c, checked: chosen.has(c) });
        group.append(el("label", { class: "inline check", for: `${subId}-${i}` }, input, c));
      });
      group.append(el("p", { class: "muted small" }, sub.description));
      inner.append(group);
    } else if (sub.type === "list") {
      inner.append(el("p", { class: "muted small", dataset: { sub: sub.name } }, `${sub.title}: none to choose from. ${sub.description}`));
    } else if (sub.type === "number" || sub.type === "integer") {
      const input = el("input", {
        ...common, id: subId, type: "number", inputmode: "decimal", step: sub.type === "integer" ? "1" : "any",
        min: sub.minimum ?? null, max: sub.maximum ?? null, value: current ?? "", placeholder: sub.default ?? "",
        title: sub.description,
      });
      inner.append(el("label", { for: subId }, `${sub.title} (${sub.description.replace(/\.$/, "")})`, input));
    }
  }
  return box;
}

function readSection(f, box) {
  if (!box.querySelector("input.section-on").checked) return null;
  const out = {};
  for (const sub of f.fields) {
    if (sub.type === "list") {
      out[sub.name] = [...box.querySelectorAll(`input[data-sub="${sub.name}"]:checked`)].map((i) => i.value);
    } else {
      const input = box.querySelector(`input[data-sub="${sub.name}"]`);
      const text = input ? input.value.trim() : "";
      if (text !== "") out[sub.name] = Number.isFinite(Number(text)) ? Number(text) : text; // the server names a bad number
    }
  }
  return out;
}

function fieldInput(r, f) {
  const value = r.data[f.name];
  const id = `rule-${rules.indexOf(r)}-${f.name}`;
  const attrs = { id, name: f.name, title: f.description, disabled: !canEdit, dataset: { field: f.name } };
  let input;
  if (f.type === "section") return sectionInput(f, value, id);
  if (f.type === "list" && !f.pattern && !f.choices.length) return stepsInput(f, value, id);
  if (f.type === "boolean") {
    input = el("input", { ...attrs, type: "checkbox", checked: value === undefined ? !!f.default : !!value });
    return el("label", { class: "inline check", for: id }, input, f.title);
  }
  if (f.type === "choice") {
    input = el("select", attrs, ...f.choices.map((c) => el("option", { value: c, selected: (value ?? f.default) === c }, c)));
  } else if (f.type === "number" || f.type === "integer") {
    input = el("input", {
      ...attrs, type: "number", inputmode: "decimal", step: f.type === "integer" ? "1" : "any",
      min: f.minimum ?? null, max: f.maximum ?? null, value: value ?? "",
      placeholder: f.nullable ? "none" : f.default ?? "",
    });
  } else {
    const shown = Array.isArray(value) ? value.join(", ") : value ?? "";
    const placeholder = f.name === "name" ? `${r.data.kind}:${r.shape ? r.shape.data.name : "frame"}` : f.type === "list" ? "none" : "";
    input = el("input", { ...attrs, type: "text", value: shown, placeholder, maxlength: 512 });
  }
  return el("label", { for: id }, f.title, input);
}

function readField(f, input) {
  const widget = input.closest("[data-widget]");
  if (f.type === "section") return readSection(f, widget);
  if (f.type === "list" && widget) return [...widget.querySelectorAll("input.step")].map((i) => i.value.trim()); // empty steps: the server names them
  if (f.type === "boolean") return input.checked;
  const text = input.value.trim();
  if (f.type === "number" || f.type === "integer") {
    if (text === "") return f.nullable ? null : undefined; // undefined: the config's default
    const n = Number(text);
    return Number.isFinite(n) ? n : text; // the server names a bad number
  }
  if (f.type === "classes" || f.type === "list") {
    const items = text.split(",").map((t) => t.trim()).filter(Boolean);
    return f.type === "classes" ? items.map((t) => (/^\d+$/.test(t) ? Number(t) : t)) : items;
  }
  if (f.type === "text") return text === "" && f.nullable ? null : text;
  return input.value;
}

function ruleForm(r) {
  const k = kindOf(r.data.kind);
  const summary = el("summary", {}, el("strong", {}, ruleTitle(r)), el("small", { class: "muted" }, ruleSummary(r)));
  const main = el("div", { class: "rule-fields" });
  const more = el("div", { class: "rule-fields" });
  for (const f of k ? k.fields : []) (f.advanced ? more : main).append(fieldInput(r, f));
  const node = el("details", { class: "rule", open: r.open || false, dataset: { kind: r.data.kind } }, summary, main);
  if (more.childElementCount) node.append(el("details", { class: "more" }, el("summary", {}, "More settings"), more));
  if (!k) node.append(el("p", { class: "muted" }, `Unknown rule kind ${r.data.kind}: kept as it is.`));
  if (canEdit) {
    const remove = el("button", { type: "button", class: "danger remove-rule" }, "Remove rule");
    remove.addEventListener("click", () => {
      rules.splice(rules.indexOf(r), 1);
      markDirty();
      render();
    });
    node.append(el("div", { class: "actions" }, remove));
  }
  node.addEventListener("toggle", () => (r.open = node.open));
  node.addEventListener("change", (event) => {
    const input = event.target;
    const f = k && k.fields.find((x) => x.name === input.dataset.field);
    if (!f) return;
    const value = readField(f, input);
    if (value === undefined) delete r.data[f.name];
    else r.data[f.name] = value;
    summary.replaceChildren(el("strong", {}, ruleTitle(r)), el("small", { class: "muted" }, ruleSummary(r)));
    markDirty();
    renderList();
  });
  return node;
}

function newRule(kind, shape) {
  const k = kindOf(kind);
  const data = { kind };
  for (const f of k.fields) if (f.default !== null && f.default !== undefined && f.name !== "name") data[f.name] = f.default;
  if (k.target) data[k.target] = shape ? shape.data.name : null;
  return { data, shape, open: true };
}

// selection and drawing --------------------------------------------------------------------------
function select(i) {
  if (i !== selected) setDrawing(false);
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

/** The point under ``p``: the selected shape's first (a vertex it shares with others moves only it),
 * then the others from the top of the drawing down. */
function pointAt(p) {
  const r = handleRadius() * 1.2;
  const order = drawOrder().reverse();
  for (const i of order) {
    const k = shapes[i].pts.findIndex(([x, y]) => Math.hypot(x - p[0], y - p[1]) <= r);
    if (k >= 0) return { index: i, point: k };
  }
  return null;
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

/** Say which point is selected and where (the status line is a live region: screen readers hear it). */
function announcePoint() {
  const s = shapes[selected];
  if (!s || selectedPoint < 0 || !s.pts[selectedPoint]) return;
  const [x, y] = s.pts[selectedPoint];
  statusLine.textContent =
    `Point ${selectedPoint + 1} of ${s.pts.length} of ${TYPE_WORD[s.type]} ${s.data.name}: x ${Math.round(x)}, y ${Math.round(y)}.`;
}

/** Add a point after the selected one (halfway to the next), or the first points of a new shape. */
function insertPoint() {
  const s = shapes[selected];
  if (!s) {
    statusLine.textContent = "Select a zone, line or mask first, or add one.";
    return;
  }
  if (s.type === "line" && s.pts.length >= 2) {
    statusLine.textContent = "A line has two ends: move them with the arrow keys.";
    return;
  }
  const k = selectedPoint >= 0 ? selectedPoint : s.pts.length - 1;
  let p;
  if (!s.pts.length) {
    p = [frame.w / 2, frame.h / 2];
  } else if (s.pts.length === 1) {
    const [x, y] = s.pts[0];
    p = [x + (x + 20 <= frame.w ? 20 : -20), y];
  } else {
    const [a, b] = [s.pts[k], s.pts[(k + 1) % s.pts.length]];
    p = [(a[0] + b[0]) / 2, (a[1] + b[1]) / 2];
  }
  s.pts.splice(k + 1, 0, p);
  selectedPoint = k + 1;
  markDirty();
  render();
  announcePoint();
}

const MOVES = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };

/** The picture's keys: [ ] select a point, arrows move it (Shift: 10 px), + or Insert add one. */
function onOverlayKey(event) {
  const s = shapes[selected];
  const move = MOVES[event.key];
  const cycle = event.key === "[" || event.key === "]";
  if (event.key === "+" || event.key === "Insert") {
    insertPoint();
  } else if (move || cycle) {
    if (!s || !s.pts.length) {
      statusLine.textContent = s ? "This shape has no point yet: press + to add one." : "Select a zone, line or mask in the list first.";
    } else if (cycle || selectedPoint < 0) {
      const n = s.pts.length;
      selectedPoint = selectedPoint < 0 ? (event.key === "[" ? n - 1 : 0) : (selectedPoint + (event.key === "]" ? 1 : n - 1)) % n;
      render();
      announcePoint();
    } else {
      const step = event.shiftKey ? 10 : 1;
      const [x, y] = s.pts[selectedPoint];
      s.pts[selectedPoint] = [
        Math.min(frame.w, Math.max(0, x + move[0] * step)), Math.min(frame.h, Math.max(0, y + move[1] * step)),
      ];
      markDirty();
      render();
      announcePoint();
    }
  } else {
    return;
  }
  event.preventDefault();
}

function addShape(type, data) {
  shapes.push({ type, data: { name: uniqueName(type === "mask" ? "mask" : type), units: "pixels", ...data }, pts: [] });
  select(shapes.length - 1);
  markDirty();
  setDrawing(true);
  render();
}

function addPoint(s, p) {
  s.pts.push(p);
  selectedPoint = s.pts.length - 1;
  markDirty();
  if (s.type === "line" && s.pts.length >= 2) {
    setDrawing(false);
    statusLine.textContent = "Unsaved changes.";
  }
  render();
}

if (canEdit) {
  svg.addEventListener("pointerdown", (event) => {
    const p = framePoint(event);
    if (!p) return;
    const s = shapes[selected];
    const hit = pointAt(p);
    if (drawing && s && !(hit && hit.index === selected)) {
      // drawing wins over selecting: a click over another shape adds a point here (on its vertex, if on one)
      if (s.type === "line" && s.pts.length >= 2) return;
      addPoint(s, hit ? [...shapes[hit.index].pts[hit.point]] : p);
      event.preventDefault();
      return;
    }
    if (hit) {
      selected = hit.index;
      selectedPoint = hit.point;
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
    const group = event.target.closest("g");
    const index = group ? Number(group.dataset.index) : -1;
    if (index >= 0 && index !== selected) {
      select(index); // not drawing: clicking another shape selects it
      return;
    }
    if (!s) {
      statusLine.textContent = "Select a zone, line or mask first, or add one.";
      return;
    }
    if (s.type === "line" && s.pts.length >= 2) {
      statusLine.textContent = "A line has two ends: drag them to move it.";
      return;
    }
    addPoint(s, p);
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
    if (dragging && dragging.moved) {
      markDirty();
      lastDown = null; // a drag is no first click of a double click
    }
    dragging = null;
  };
  svg.setAttribute("tabindex", "0"); // the keyboard's way to the points (see onOverlayKey)
  svg.addEventListener("keydown", onOverlayKey);
  svg.addEventListener("pointerup", stopDrag);
  svg.addEventListener("pointercancel", stopDrag);
  document.addEventListener("keydown", (event) => {
    const inField = event.target.closest("input, textarea, select");
    if ((event.key === "Enter" || event.key === "Escape") && drawing && (!inField || event.target === nameInput)) {
      setDrawing(false);
      statusLine.textContent = dirty ? "Unsaved changes." : "";
      render();
      event.preventDefault();
    } else if ((event.key === "Delete" || event.key === "Backspace") && !inField) {
      deletePoint();
      event.preventDefault();
    }
  });
  document.getElementById("add-zone").addEventListener("click", () => addShape("zone", {}));
  document.getElementById("add-line").addEventListener("click", () => addShape("line", { in_side: "right" }));
  document.getElementById("add-mask").addEventListener("click", () => addShape("mask", {}));
  doneButton.addEventListener("click", () => {
    setDrawing(false);
    statusLine.textContent = dirty ? "Unsaved changes." : "";
    render();
  });
  addPointsButton.addEventListener("click", () => {
    setDrawing(true);
    render();
  });
  document.getElementById("delete-point").addEventListener("click", deletePoint);
  document.getElementById("insert-point").addEventListener("click", insertPoint);
  document.getElementById("delete-shape").addEventListener("click", () => {
    const s = shapes[selected];
    if (!s) return;
    const gone = shapeRules(s).length;
    rules = rules.filter((r) => r.shape !== s);
    shapes.splice(selected, 1);
    selected = -1;
    selectedPoint = -1;
    setDrawing(false);
    markDirty();
    if (gone) statusLine.textContent = `Unsaved changes: ${TYPE_WORD[s.type]} ${s.data.name} deleted with its ${gone} rule${gone === 1 ? "" : "s"}.`;
    render();
  });
  nameInput.addEventListener("input", () => {
    const s = shapes[selected];
    if (!s) return;
    s.data.name = nameInput.value.trim(); // its rules follow: they hold the shape, not its name
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
  document.getElementById("add-rule-button").addEventListener("click", () => {
    const kind = ruleKind.value;
    if (!kind || !kindOf(kind)) return;
    const s = shapes[selected] || null;
    rules.push(newRule(kind, s && s.type !== "mask" ? s : null));
    markDirty();
    render();
  });
  blurSelect.addEventListener("change", () => {
    privacy.blur = blurSelect.value;
    markDirty();
  });
  // "Replay the last 7 days": the rules as edited, over the camera's stored tracks, before saving
  document.getElementById("replay").addEventListener("click", async () => {
    const box = document.getElementById("replay-result");
    showError(errorBox, "");
    const problem = problems();
    if (problem) {
      showError(errorBox, `Not replayed: ${problem}.`);
      return;
    }
    box.hidden = false;
    box.className = "notice";
    box.textContent = "Replaying the last 7 days…";
    try {
      const out = await api(`${zonesPath}/replay`, { method: "POST", body: body() });
      const skipped = out.skipped_rules.length ? ` Not replayed (they read pixels): ${out.skipped_rules.join(", ")}.` : "";
      box.textContent =
        `Over ${Math.round(out.stream_seconds / 3600 * 10) / 10} h of tracks: ${out.incidents.length} incident(s); ` +
        `${out.summary}.${skipped}`;
    } catch (err) {
      box.className = "error";
      box.textContent = `Not replayed: ${err.message}`;
    }
  });
  document.getElementById("save").addEventListener("click", async () => {
    showError(errorBox, "");
    setDrawing(false);
    const problem = problems();
    if (problem) {
      showError(errorBox, `Not saved: ${problem}.`);
      statusLine.textContent = "Not saved.";
      return;
    }
    statusLine.textContent = "Saving…";
    reloadButton.hidden = true;
    try {
      const names = new Map(shapes.map((s, i) => [i, `${s.type}:${s.data.name}`]));
      const was = selected >= 0 ? names.get(selected) : null;
      const answer = await apiVersioned(zonesPath, { method: "PUT", body: body(), ifMatch: revision });
      revision = answer.etag;
      load(answer.data);
      selected = was ? shapes.findIndex((s) => `${s.type}:${s.data.name}` === was) : -1;
      render();
      statusLine.textContent = `Saved at ${new Date().toLocaleTimeString()}: applied to the running camera.`;
      showOldView(null); // saved on the new view: the server forgets the zones drawn on the old one
    } catch (err) {
      const status = err instanceof ApiError ? err.status : 0;
      statusLine.textContent = "Not saved.";
      if (status === 409 || status === 428) {
        // someone else saved since this copy was loaded: never overwrite their work; offer theirs
        showError(
          errorBox,
          "Not saved: another admin saved this camera's zones, rules or masks (or its section of the config file " +
            "was edited) after you opened them. " +
            "Reload to see their version (your unsaved changes here are then discarded), and make your change again.",
        );
        reloadButton.hidden = false;
        reloadButton.focus();
      } else {
        showError(errorBox, status === 403 ? "Only an admin can change zones, rules and masks." : `Not saved: ${err.message}`);
      }
    }
  });
  async function reload(message) {
    showError(errorBox, "");
    reloadButton.hidden = true;
    try {
      await loadSaved();
      statusLine.textContent = message;
    } catch (err) {
      showError(errorBox, err.message);
    }
  }
  document.getElementById("revert").addEventListener("click", () => reload("Reverted to the saved zones."));
  reloadButton.addEventListener("click", () => reload("Reloaded the saved zones."));
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
window.addEventListener("resize", () => {
  placeToolbar();
  render();
});

/** The camera's new view was accepted (camera health): say which zones were drawn on the old one. */
function showOldView(health) {
  const box = document.getElementById("old-view-note");
  const note = oldViewNote(health);
  box.hidden = !note;
  box.textContent = note || "";
}

async function init() {
  try {
    const cameras = await api("/api/v1/cameras");
    const cameraSelect = document.getElementById("camera-select");
    for (const c of cameras) cameraSelect.append(el("option", { value: c.name, selected: c.name === camera }, c.name));
    cameraSelect.addEventListener("change", () => location.assign(`/zones/${encodeURIComponent(cameraSelect.value)}`));
    const me = cameras.find((c) => c.name === camera);
    if (me && me.width && me.height) frame = { w: me.width, h: me.height };
    // kinds configured by a camera section of their own (camera health: `health:`) are not rules to add
    kinds = (await loadKinds()).kinds.filter((k) => !k.section);
    showOldView(me && me.health);
    await loadSaved();
  } catch (err) {
    showError(errorBox, err.message);
  }
  refreshSnapshot();
}
init();
