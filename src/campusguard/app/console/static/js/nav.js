// Every logged-in page: the log-out button, and the message of the not-found page.
import { api } from "./api.js";

const logout = document.getElementById("logout");
if (logout) {
  logout.addEventListener("click", async () => {
    try {
      await api("/api/v1/auth/logout", { method: "POST" });
    } finally {
      // a campus sign-in user also ends the provider's session when it offers that (RP-initiated logout)
      location.assign(document.body.dataset.endSession || "/login");
    }
  });
}

const missing = document.getElementById("missing-message");
if (missing) missing.textContent = document.body.dataset.message || "";
