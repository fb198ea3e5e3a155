// Users (admin): list, add, remove, create an API token (the audit log has its own page, audit.js).
import "./nav.js";
import { api, currentUser, el, formatTime, showError } from "./api.js";

const rows = document.getElementById("user-rows");
const errorBox = document.getElementById("users-error");
const tokenOut = document.getElementById("token-out");
const form = document.getElementById("add-user");

async function removeUser(name) {
  if (!confirm(`Remove user ${name}? Their sessions and tokens stop working.`)) return;
  try {
    await api(`/api/v1/users/${encodeURIComponent(name)}`, { method: "DELETE" });
    await refresh();
  } catch (err) {
    showError(errorBox, err.message);
  }
}

async function createToken(name) {
  const label = prompt(`What is the API token for ${name} used for?`, "integration");
  if (label === null) return;
  try {
    const out = await api(`/api/v1/users/${encodeURIComponent(name)}/tokens`, { method: "POST", body: { label } });
    tokenOut.replaceChildren(
      `API token for ${out.user} (shown once; valid ${out.expires_days} days): `,
      el("code", {}, out.token),
    );
    tokenOut.hidden = false;
  } catch (err) {
    showError(errorBox, err.message);
  }
}

async function refresh() {
  try {
    const users = await api("/api/v1/users");
    showError(errorBox, "");
    rows.replaceChildren(
      ...users.map((u) => {
        const actions = el("td", { class: "actions" });
        const token = el("button", { type: "button", class: "quiet" }, "API token");
        token.addEventListener("click", () => createToken(u.name));
        actions.append(token);
        if (u.name !== currentUser().name) {
          const remove = el("button", { type: "button", class: "danger" }, "Remove");
          remove.addEventListener("click", () => removeUser(u.name));
          actions.append(remove);
        }
        return el(
          "tr",
          { dataset: { user: u.name } },
          el("td", {}, u.name),
          el("td", {}, el("span", { class: `badge role-${u.role}` }, u.role)),
          el("td", {}, formatTime(u.created_at)),
          actions,
        );
      }),
    );
  } catch (err) {
    showError(errorBox, err.message);
  }
}

form.addEventListener("submit", async (e) => {
  e.preventDefault();
  try {
    await api("/api/v1/users", {
      method: "POST",
      body: { name: form.elements.name.value.trim(), role: form.elements.role.value, password: form.elements.password.value },
    });
    form.reset();
    await refresh();
  } catch (err) {
    showError(errorBox, `Not added: ${err.message}`);
  }
});
refresh();
