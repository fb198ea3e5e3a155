// The noise page: per rule, zone, camera and hour of day, incidents per day and the share of false and
// nuisance alarms over a chosen period, worst first (GET /api/v1/noise), each linking to its incidents.
import "./nav.js";
import { api, el, showError } from "./api.js";

const form = document.getElementById("noise-filters");
const body = document.querySelector("#noise tbody");
const errorBox = document.getElementById("noise-error");

async function load() {
  const days = Number(form.elements.days.value) || 7;
  const since = new Date(Date.now() - days * 86400e3).toISOString();
  try {
    const out = await api(`/api/v1/noise?${new URLSearchParams({ since })}`);
    showError(errorBox, "");
    body.replaceChildren(
      ...out.rows.map((r) =>
        el(
          "tr",
          {},
          el("td", {}, r.rule),
          el("td", {}, r.zone),
          el("td", {}, r.camera),
          el("td", {}, `${String(r.hour).padStart(2, "0")}:00`),
          el("td", {}, r.per_day.toFixed(2)),
          el("td", {}, r.noise_per_day.toFixed(2)),
          el("td", {}, r.noise_share === null ? "–" : `${Math.round(r.noise_share * 100)} %`),
          el("td", {}, `${r.false_alarm} false, ${r.nuisance} nuisance, ${r.confirmed} confirmed`),
          el("td", {}, el("a", { href: r.incidents_url }, "Incidents")),
        ),
      ),
    );
    if (!out.rows.length) body.replaceChildren(el("tr", {}, el("td", { colspan: "9" }, "No incidents in the period.")));
  } catch (err) {
    showError(errorBox, err.message);
  }
}

form.addEventListener("submit", (e) => {
  e.preventDefault();
  load();
});
load();
