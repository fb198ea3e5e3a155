// The audit log (admin): server-side pages of 50, filtered by user, action (or every action of a
// kind: "event.*") and time range, kept in the URL; each entry's details shown as fields, and a
// change with before/after (zones) as a field-by-field difference rather than raw JSON.
import "./nav.js";
import { api, el, filterParams, formatTime, showError } from "./api.js";

const PAGE = 50;
const form = document.getElementById("audit-filters");
const list = document.getElementById("audit-list");
const totalBox = document.getElementById("audit-total");
const pageBox = document.getElementById("audit-page");
const newer = document.getElementById("audit-newer");
const older = document.getElementById("audit-older");
const errorBox = document.getElementById("audit-error");
const FIELDS = ["user", "action", "since", "until"];
let offset = 0;

/** A value as short readable text: strings as they are, points as (x, y), the rest as compact JSON. */
function text(value) {
  if (value === null || value === undefined) return "–";
  if (typeof value === "string") return value;
  if (Array.isArray(value) && value.length && value.every((p) => Array.isArray(p) && p.length === 2 && p.every(Number.isFinite))) {
    return value.map(([x, y]) => `(${x}, ${y})`).join(" ");
  }
  return JSON.stringify(value);
}

/** True for a list of objects that each have a name (zones, lines): compared by name, not position. */
function namedList(value) {
  return Array.isArray(value) && value.length > 0 && value.every((v) => v && typeof v === "object" && !Array.isArray(v) && "name" in v);
}

/** Flatten to {path: leaf}: objects by key, named lists by name; other lists (points) stay one leaf;
 * an empty list or object is no field at all (so "no lines" before one was drawn shows only the new line). */
export function flatten(value, path = "", out = {}) {
  if (Array.isArray(value) && value.length === 0) return out;
  if (namedList(value)) {
    for (const item of value) {
      const { name, ...rest } = item;
      const key = `${path}[${name}]`;
      if (Object.keys(rest).length) flatten(rest, key, out);
      else out[key] = name;
    }
  } else if (value && typeof value === "object" && !Array.isArray(value)) {
    const keys = Object.keys(value);
    for (const k of keys) flatten(value[k], path ? `${path}.${k}` : k, out);
  } else if (path) {
    out[path] = value;
  }
  return out;
}

/** The fields that differ between before and after: [{path, kind: added|removed|changed, from, to}]. */
export function diff(before, after) {
  const a = flatten(before ?? {});
  const b = flatten(after ?? {});
  const paths = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  const changes = [];
  for (const path of paths) {
    const inA = path in a;
    const inB = path in b;
    if (inA && inB && text(a[path]) === text(b[path])) continue;
    changes.push({ path, kind: !inA ? "added" : !inB ? "removed" : "changed", from: a[path], to: b[path] });
  }
  return changes;
}

function renderDiff(before, after) {
  const changes = diff(before, after);
  if (!changes.length) return el("p", { class: "muted" }, "No field changed.");
  return el(
    "ul",
    { class: "diff" },
    ...changes.map((c) =>
      el(
        "li",
        { class: `diff-${c.kind}` },
        el("span", { class: "diff-path" }, c.path),
        c.kind === "added" ? el("ins", {}, text(c.to)) : null,
        c.kind === "removed" ? el("del", {}, text(c.from)) : null,
        c.kind === "changed" ? [el("del", {}, text(c.from)), el("span", { class: "muted" }, " → "), el("ins", {}, text(c.to))] : null,
      ),
    ),
  );
}

function renderDetails(details) {
  const { before, after, ...rest } = details || {};
  const facts = Object.entries(rest);
  const parts = [];
  if (facts.length) {
    parts.push(el("dl", { class: "facts audit-facts" }, ...facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, text(v))])));
  }
  if (before !== undefined || after !== undefined) parts.push(renderDiff(before, after));
  return parts;
}

function renderEntry(entry) {
  return el(
    "li",
    { class: "audit-entry card", dataset: { id: entry.id, action: entry.action } },
    el(
      "header",
      {},
      el("strong", { class: "audit-action" }, entry.action),
      entry.target ? el("span", { class: "audit-target" }, entry.target) : null,
      el("span", { class: "muted" }, `by ${entry.user || "the system"}`),
      el("time", { class: "muted", datetime: entry.time }, formatTime(entry.time)),
    ),
    ...renderDetails(entry.details),
  );
}

function apiFilters() {
  return filterParams(form, FIELDS);
}

function syncUrl() {
  const params = new URLSearchParams();
  for (const name of FIELDS) {
    const value = form.elements[name].value.trim();
    if (value) params.set(name, value);
  }
  if (offset) params.set("offset", String(offset));
  history.replaceState(null, "", params.size ? `?${params}` : location.pathname);
}

async function load() {
  const params = apiFilters();
  params.set("limit", String(PAGE));
  params.set("offset", String(offset));
  try {
    const page = await api(`/api/v1/audit?${params}`);
    showError(errorBox, "");
    list.replaceChildren(...page.items.map(renderEntry));
    if (!page.items.length) list.append(el("li", { class: "empty muted" }, "No entries match these filters."));
    const first = page.items.length ? offset + 1 : 0;
    totalBox.textContent = page.total === 1 ? "1 entry" : `${page.total.toLocaleString()} entries`;
    pageBox.textContent = `${first.toLocaleString()}–${(offset + page.items.length).toLocaleString()} of ${page.total.toLocaleString()}`;
    newer.disabled = offset === 0;
    older.disabled = offset + page.items.length >= page.total;
    syncUrl();
  } catch (err) {
    showError(errorBox, `Could not load the audit log: ${err.message}`);
  }
}

async function fillChoices() {
  const facets = await api("/api/v1/audit/facets");
  form.elements.user.append(...facets.users.map((u) => el("option", { value: u }, u)));
  const groups = [...new Set(facets.actions.filter((a) => a.includes(".")).map((a) => a.split(".")[0]))];
  form.elements.action.append(
    ...groups.map((g) => el("option", { value: `${g}.` }, `${g}.* (every ${g} action)`)),
    ...facets.actions.map((a) => el("option", { value: a }, a)),
  );
}

async function init() {
  const query = new URLSearchParams(location.search);
  try {
    await fillChoices();
  } catch (err) {
    showError(errorBox, err.message);
  }
  for (const name of FIELDS) {
    if (!query.has(name)) continue;
    const select = form.elements[name];
    if (select.tagName === "SELECT" && ![...select.options].some((o) => o.value === query.get(name))) {
      select.append(el("option", { value: query.get(name) }, query.get(name)));
    }
    select.value = query.get(name);
  }
  offset = Math.max(0, Number.parseInt(query.get("offset") || "0", 10) || 0);
  await load();
}

form.addEventListener("submit", (e) => {
  e.preventDefault();
  offset = 0;
  load();
});
form.addEventListener("reset", () => setTimeout(() => {
  offset = 0;
  load();
}));
newer.addEventListener("click", () => {
  offset = Math.max(0, offset - PAGE);
  load();
});
older.addEventListener("click", () => {
  offset += PAGE;
  load();
});
init();
