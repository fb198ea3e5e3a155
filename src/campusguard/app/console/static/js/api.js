// Shared helpers of the console pages: API calls with the CSRF header, DOM building, formatting.

export const ROLE_RANK = { viewer: 0, operator: 1, admin: 2 };

/** The page's user, from the body's data attributes (set by the server). */
export function currentUser() {
  const { user, role } = document.body.dataset;
  return { name: user || "", role: role || "viewer" };
}

export function hasRole(role) {
  return (ROLE_RANK[currentUser().role] ?? -1) >= ROLE_RANK[role];
}

export function cookie(name) {
  const prefix = name + "=";
  for (const part of document.cookie.split(";")) {
    const item = part.trim();
    if (item.startsWith(prefix)) return decodeURIComponent(item.slice(prefix.length));
  }
  return "";
}

export class ApiError extends Error {
  constructor(status, message, body = null) {
    super(message);
    this.status = status;
    this.body = body; // the parsed error body (a 409 of the zones carries the current `revision`)
  }
}

/** The readable message of an API error body (FastAPI's `detail`: a string or a list of field errors). */
function detailText(body, status) {
  const detail = body && body.detail;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail.map((e) => `${(e.loc || []).filter((p) => p !== "body").join(".")}: ${e.msg}`).join("; ");
  }
  return `request failed (HTTP ${status})`;
}

export function loginUrl() {
  return "/login?next=" + encodeURIComponent(location.pathname + location.search);
}

/**
 * Call the API. JSON in and out; writes carry X-CSRF-Token from the cg_csrf cookie.
 * A 401 means the session is gone: go to the login page.
 */
export async function api(path, options = {}) {
  return (await apiVersioned(path, options)).data;
}

/**
 * `api`, also answering the response's ETag: `{data, etag}`. `ifMatch` is sent as If-Match (a
 * conditional write: a 409 `ApiError` when the resource changed since that ETag).
 */
export async function apiVersioned(path, { method = "GET", body, ifMatch } = {}) {
  const headers = { Accept: "application/json" };
  if (method !== "GET" && method !== "HEAD") headers["X-CSRF-Token"] = cookie("cg_csrf");
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (ifMatch) headers["If-Match"] = ifMatch;
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  if (response.status === 401 && !path.startsWith("/api/v1/auth/login")) {
    location.assign(loginUrl());
    throw new ApiError(401, "session expired");
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!response.ok) throw new ApiError(response.status, detailText(data, response.status), data);
  return { data, etag: response.headers.get("ETag") };
}

/**
 * POST a JSON body and save the file the answer carries (a download, e.g. an evidence bundle);
 * the file name comes from Content-Disposition. Errors are thrown as `ApiError` with the API's message.
 */
export async function downloadPost(path, body, fallbackName) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": cookie("cg_csrf") },
    body: JSON.stringify(body),
    credentials: "same-origin",
  });
  if (!response.ok) {
    let data = null;
    try {
      data = await response.json();
    } catch {
      data = null;
    }
    throw new ApiError(response.status, detailText(data, response.status));
  }
  const blob = await response.blob();
  const match = /filename="?([^";]+)"?/.exec(response.headers.get("content-disposition") || "");
  const link = el("a", { href: URL.createObjectURL(blob), download: match ? match[1] : fallbackName, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 60000);
  return blob.size;
}

/** Build an element: el("a", {href: "/x", class: "b"}, "text", child). Text is never parsed as HTML. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function showError(node, message) {
  if (!node) return;
  node.textContent = message || "";
  node.hidden = !message;
}

/** A filter form's fields as the API takes them (``since``/``until`` datetime-local values become
 * ISO 8601 instants; empty fields are left out). */
export function filterParams(form, fields) {
  const params = new URLSearchParams();
  for (const name of fields) {
    const value = form.elements[name].value.trim();
    if (!value) continue;
    params.set(name, name === "since" || name === "until" ? new Date(value).toISOString() : value);
  }
  return params;
}

export function formatTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toLocaleString(undefined, {
    year: "numeric", month: "short", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
}

export function formatDuration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "";
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const m = Math.floor(seconds / 60);
  const s = Math.round(seconds % 60);
  return m < 60 ? `${m} min ${s} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

// The rule kinds' labels, from the server's rule registry (GET /api/v1/rule-kinds), once per page.
const kindLabels = new Map();
let kindsRequest = null;

/** The rule kinds (`{kind, label, has_end}`, in order) and event phases; fills `kindLabel`. */
export function loadKinds() {
  if (!kindsRequest) {
    kindsRequest = api("/api/v1/rule-kinds").then(
      (data) => {
        for (const k of data.kinds) kindLabels.set(k.kind, k.label);
        return data;
      },
      (err) => {
        kindsRequest = null; // try again next time
        throw err;
      },
    );
  }
  return kindsRequest;
}

/** A kind's label once `loadKinds()` has resolved, else the kind itself. */
export function kindLabel(kind) {
  return kindLabels.get(kind) || kind;
}

/** How long an ended incident lasted ("" while it goes on). */
export function eventDuration(event) {
  return event.end_s === null || event.end_s === undefined ? "" : formatDuration(event.end_s - event.start_s);
}

export const STATE_LABELS = { open: "Open", acknowledged: "Acknowledged", resolved: "Resolved" };

/** The review-state badge of an event. */
export function stateBadge(event) {
  return el("span", { class: `badge state-${event.state}` }, STATE_LABELS[event.state] || event.state);
}

/** Subscribe to the server-sent event stream; `onEvent(eventJson)`; `onState("live"|"reconnecting")`. */
export function eventStream(onEvent, onState) {
  const source = new EventSource("/api/v1/events/stream");
  source.addEventListener("open", () => onState && onState("live"));
  source.addEventListener("error", () => onState && onState("reconnecting"));
  source.addEventListener("event", (message) => {
    try {
      onEvent(JSON.parse(message.data));
    } catch (err) {
      console.error("bad event message", err);
    }
  });
  return source;
}
