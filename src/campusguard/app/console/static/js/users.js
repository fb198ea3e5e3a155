// Users (admin): the rows come rendered with the page (local accounts and those of the campus sign-in);
// this script acts on them: change a role, reset a local account's password, remove, create an API
// token, add a user. After a change it reads the page's rows again (one renderer: the server's).
import "./nav.js";
import { api, el, showError } from "./api.js";

const rows = document.getElementById("user-rows");
const errorBox = document.getElementById("users-error");
const tokenOut = document.getElementById("token-out");
const statusBox = document.getElementById("users-status");
const form = document.getElementById("add-user");
const reset = document.getElementById("reset-password");
const resetTitle = document.getElementById("reset-title");
let resetting = null; // the user whose password the reset form sets

const userPath = (name) => `/api/v1/users/${encodeURIComponent(name)}`;

function say(text) {
  statusBox.textContent = text;
  statusBox.hidden = !text;
}

/** Read the rows again from the page as the server renders it now. */
async function refresh() {
  const response = await fetch("/users", { credentials: "same-origin", headers: { Accept: "text/html" } });
  if (!response.ok) throw new Error(`the users could not be read again (HTTP ${response.status})`);
  const page = new DOMParser().parseFromString(await response.text(), "text/html");
  const fresh = page.getElementById("user-rows");
  if (fresh) rows.replaceChildren(...[...fresh.children].map((row) => document.importNode(row, true)));
}

async function change(action, fn) {
  try {
    await fn();
    showError(errorBox, "");
    say(action);
    await refresh();
  } catch (err) {
    showError(errorBox, err.message);
    await refresh().catch(() => {}); // put a refused role choice back
  }
}

function removeUser(name, source) {
  const again = source === "oidc" ? " If the provider still gives them a mapped group, signing in makes the account again." : "";
  if (!confirm(`Remove user ${name}? Their sessions and tokens stop working.${again}`)) return;
  change(`${name} removed.`, () => api(userPath(name), { method: "DELETE" }));
}

async function createToken(name) {
  const label = prompt(`What is the API token for ${name} used for?`, "integration");
  if (label === null) return;
  try {
    const out = await api(`${userPath(name)}/tokens`, { method: "POST", body: { label } });
    tokenOut.replaceChildren(
      `API token for ${out.user} (shown once; valid ${out.expires_days} days): `,
      el("code", {}, out.token),
    );
    tokenOut.hidden = false;
  } catch (err) {
    showError(errorBox, err.message);
  }
}

function openReset(name) {
  resetting = name;
  resetTitle.textContent = `Reset the password of ${name}`;
  reset.hidden = false;
  reset.elements.password.value = "";
  reset.elements.password.focus();
}

rows.addEventListener("click", (e) => {
  const button = e.target.closest("button[data-action]");
  const row = e.target.closest("tr[data-user]");
  if (!button || !row) return;
  const name = row.dataset.user;
  if (button.dataset.action === "token") createToken(name);
  else if (button.dataset.action === "password") openReset(name);
  else if (button.dataset.action === "remove") removeUser(name, row.dataset.source);
});

rows.addEventListener("change", (e) => {
  const select = e.target.closest("select[data-action=role]");
  const row = e.target.closest("tr[data-user]");
  if (!select || !row) return;
  const name = row.dataset.user;
  const note = row.dataset.source === "oidc" ? " until their next sign-in sets it from their groups" : "";
  change(`${name} is now ${select.value}${note}.`, () =>
    api(userPath(name), { method: "PATCH", body: { role: select.value } }),
  );
});

reset.addEventListener("submit", (e) => {
  e.preventDefault();
  const name = resetting;
  const password = reset.elements.password.value;
  change(`The password of ${name} is set; their login sessions ended.`, async () => {
    await api(userPath(name), { method: "PATCH", body: { password } });
    reset.hidden = true;
  });
});
document.getElementById("reset-cancel").addEventListener("click", () => {
  reset.hidden = true;
  resetting = null;
});

form.addEventListener("submit", async (e) => {
  e.preventDefault();
  const name = form.elements.name.value.trim();
  try {
    await api("/api/v1/users", {
      method: "POST",
      body: { name, role: form.elements.role.value, password: form.elements.password.value },
    });
    form.reset();
    showError(errorBox, "");
    say(`${name} added.`);
    await refresh();
  } catch (err) {
    showError(errorBox, `Not added: ${err.message}`);
  }
});
