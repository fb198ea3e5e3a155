// The login page: POST /api/v1/auth/login, then go where the user was going (same site only).
import { api, ApiError, showError } from "./api.js";
import { safeNext } from "./safe_next.js";

const form = document.getElementById("login-form");
const error = document.getElementById("login-error");
form.addEventListener("submit", async (e) => {
  e.preventDefault();
  showError(error, "");
  const button = form.querySelector("button[type=submit]");
  button.disabled = true;
  try {
    await api("/api/v1/auth/login", {
      method: "POST",
      body: { username: form.username.value.trim(), password: form.password.value },
    });
    location.assign(safeNext(new URLSearchParams(location.search).get("next"), location.origin));
  } catch (err) {
    const status = err instanceof ApiError ? err.status : 0;
    const message =
      status === 401 ? "Wrong user name or password."
      : status === 429 ? `Too many failed logins: ${err.message.replace(/^too many failed logins[^;]*;\s*/i, "")}.`
      : status === 422 ? "Enter a user name and a password."
      : `Could not log in: ${err.message}`;
    showError(error, message);
    form.password.value = "";
    form.password.focus();
  } finally {
    button.disabled = false;
  }
});
