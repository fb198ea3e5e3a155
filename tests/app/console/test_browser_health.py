"""Camera health in a real headless Chromium (`test_browser_console`'s fixtures) against a real uvicorn
serving live HTTP cameras (`fakes_health`): the wall marks a covered and an offline camera with why,
since when and a link to the incident; the health page lists every camera's state and health incidents
(no serious axe-core violation, for an admin and a viewer); an admin accepts a view there, and the page and
the zone editor then name the zones drawn on the old view until the zones are saved (a moved camera's
incident page offers it too, and the incident ends); the editor offers
no "camera health" rule while the timeline's kind filter has it. Screenshots ``wall-health``,
``health`` and ``event-moved`` (into ``$CAMPUSGUARD_SCREENSHOTS`` when set, as ``docs/screenshots/`` is refreshed).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_browser_console as ui  # its fixtures (Chromium, pages, screenshots) and helpers
from fakes_console import LiveServer, served_console
from fakes_health import GATE_ZONES, HealthCameras, camera_health, config_with_health, wait_for
from test_browser_a11y import serious_violations

browser, open_page, shots = ui.browser, ui.open_page, ui.shots  # fixtures, used by name
login = ui.login

pytestmark = pytest.mark.slow


@pytest.fixture
def health_server(tmp_path: Path) -> Iterator[tuple[LiveServer, HealthCameras]]:
    for cams, config in config_with_health(tmp_path):
        for live in served_console(config, tmp_path):
            yield live, cams


def tile(page: Any, camera: str) -> Any:
    return page.locator(f'.tile[data-camera="{camera}"]')


def test_the_wall_and_the_health_page_show_which_cameras_cannot_see_and_why(health_server, open_page, shots):
    live, cams = health_server
    client, admin = live.console.client(), live.console.bearer("ada")
    wait_for(lambda: camera_health(client, admin)["gate"]["state"] == "ok", what="gate learned")
    cams.gate_scene.effect = "cover"
    gate = wait_for(
        lambda: (g := camera_health(client, admin)["gate"])["state"] == "covered" and g["since"] and g,
        what="gate covered",
    )
    yard = wait_for(lambda: (y := camera_health(client, admin)["yard"])["since"] and y, what="yard offline")

    page = open_page()
    login(page, live.url, "ada")
    band = tile(page, "gate").locator(".health-band")
    band.wait_for()
    assert band.locator(".health-problem").inner_text().lower() == "covered"
    assert "since " in band.inner_text()
    assert band.locator("a").get_attribute("href") == f"/events/{gate['event_id']}"
    yard_band = tile(page, "yard").locator(".health-band")
    yard_band.wait_for()
    assert yard_band.locator(".health-problem").inner_text().lower() == "offline"
    assert yard_band.locator("a").get_attribute("href") == f"/events/{yard['event_id']}"
    assert tile(page, "lot").locator(".health-band").is_hidden()  # its health is off: nothing claimed
    assert "2 cannot see" in page.locator("#wall-summary").inner_text()
    page.wait_for_function(
        "() => { const img = document.querySelector('.tile[data-camera=gate] img.frame');"
        " return img && img.complete && img.naturalWidth > 0 }"
    )
    shots.take(page, "wall-health")

    page.goto(f"{live.url}/health")
    card = page.locator('.health-card[data-camera="gate"]')
    card.locator(f'.problems li[data-id="{gate["event_id"]}"]').wait_for()
    assert card.get_attribute("data-health") == "covered"
    assert "Covered" in card.locator("header").inner_text()
    assert "of the usually detailed view lost its contrast" in card.locator(".measures").inner_text()
    link = card.locator(f'.problems li[data-id="{gate["event_id"]}"] a')
    assert link.get_attribute("href") == f"/events/{gate['event_id']}"
    yard_card = page.locator('.health-card[data-camera="yard"]')
    assert "Offline" in yard_card.locator("header").inner_text()
    assert "sends no pictures" in yard_card.locator(".now").inner_text()
    assert yard_card.locator("button.accept-view:visible").count() == 0  # nothing measured: nothing to accept
    assert "Health not watched" in page.locator('.health-card[data-camera="lot"] header').inner_text()
    assert "2 of 3 cameras cannot see" in page.locator("#health-summary").inner_text()
    assert serious_violations(page) == []
    shots.take(page, "health", full_page=True)

    viewer = open_page(ui.TABLET)
    login(viewer, live.url, "vera", next_path="/health")
    viewer.locator('.health-card[data-camera="gate"] .problems li').first.wait_for()
    assert viewer.locator("button.accept-view:visible").count() == 0  # accepting is an admin's
    assert serious_violations(viewer) == []


def test_an_admin_accepts_a_moved_cameras_view_and_is_told_to_check_its_zones_until_they_are_saved(
    health_server, open_page, shots
):
    live, cams = health_server
    client, admin = live.console.client(), live.console.bearer("ada")
    wait_for(lambda: camera_health(client, admin)["gate"]["state"] == "ok", what="gate learned")
    cams.gate_scene.effect = "turn"  # turned away for good: the new view is the one to keep
    moved = wait_for(lambda: (g := camera_health(client, admin)["gate"])["state"] == "moved" and g, what="gate moved")
    page = open_page()
    login(page, live.url, "ada", next_path="/health")
    card = page.locator('.health-card[data-camera="gate"][data-health="moved"]')
    card.wait_for()
    assert "primary" in (card.locator("button.accept-view").get_attribute("class") or "")  # the way out of moved

    page.goto(f"{live.url}/events/{moved['event_id']}")  # the incident page offers it too
    page.locator("#facts dt", has_text="Problem").wait_for()
    assert "Turned away / moved" in page.locator("#facts").inner_text()
    page.click("#accept-view")
    page.click("#accept-view-confirm")  # the second step
    result = page.locator(".accept-view-box [role=status]")
    result.locator("a").wait_for()
    assert f"Zones {', '.join(GATE_ZONES)} were drawn on the old view" in result.inner_text()
    shots.take(page, "event-moved")
    gate = wait_for(lambda: (g := camera_health(client, admin)["gate"])["state"] == "ok" and g, what="moved ended")
    assert gate["reference_accepted_by"] == "ada" and gate["zones_on_old_view"] == list(GATE_ZONES)
    page.locator("#event-open", has_text="ended").wait_for()  # the incident ended with the next sample
    assert page.locator(".accept-view-box").is_hidden()

    page.goto(f"{live.url}/health")
    card = page.locator('.health-card[data-camera="gate"][data-health="ok"]')
    card.locator(".old-view").wait_for()
    assert f"Zones {', '.join(GATE_ZONES)} were drawn on the view before" in card.locator(".old-view").inner_text()
    card.locator("button.accept-view").click()  # accepting again, from this page
    card.locator("button.confirm-accept").click()
    card.locator("[role=status]", has_text="Accepted at").wait_for()
    assert card.locator(".accept-view").is_visible()  # back to one step
    assert client.get("/api/v1/audit?action=camera.accept_view", headers=admin).json()["total"] == 2

    page.goto(f"{live.url}/zones/gate")
    page.locator("#shape-list button").first.wait_for()
    old_view = page.locator("#old-view-note")
    old_view.wait_for()
    assert f"Zones {', '.join(GATE_ZONES)} were drawn on the view before" in old_view.inner_text()
    labels = page.locator("#rule-kind option").all_inner_texts()
    assert labels and "Camera health" not in labels  # configured under health:, not a rule to add
    page.click("#save")
    page.wait_for_function("() => document.getElementById('zones-status').textContent.startsWith('Saved at')")
    assert old_view.is_hidden()
    assert camera_health(client, admin)["gate"]["zones_on_old_view"] == []

    page.goto(f"{live.url}/events")
    page.locator('select[name="kind"] option[value="camera_health"]').wait_for(state="attached")
    assert page.locator('select[name="kind"] option[value="camera_health"]').inner_text() == "Camera health"
